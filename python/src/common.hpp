// python/src/common.hpp -- what every part of the `nnlens._core` extension shares: the Network
// handle over the run-time network form, arrays in and out, the GIL and Ctrl-C, the error types.
//
//   network            a basic_dynamic_network<float> or <double> (or an int8 twin of one) with
//                      what its file declares about the input (layout, per-sample shape, range)
//   input_rows<T>(net, x, what)   a batch-first array in the model's data layout -> n row-major
//                      samples in the network's internal (NCHW) order: the caller's own memory
//                      when x is already C-contiguous in T and the layout needs no permutation,
//                      else one copy (py::array_t forcecast, then the NHWC -> NCHW permutation)
//   to_numpy(xarray / vector, shape)   results handed to numpy without a copy (a capsule owns them)
//   long_call(f)       runs f with the GIL released; poll() from any hook inside stops it when
//                      Ctrl-C was pressed (the Python signal is re-raised after f returns)
//   with_policy(threads, f)   f(execution::seq) for threads == 1, else f(execution::par)
// throws: nnlens::error (translated to nnlens.Error by module.cpp) naming what was passed and what
//         was expected.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include <nnlens/core/error.hpp>
#include <nnlens/core/execution.hpp>
#include <nnlens/core/shape.hpp>
#include <nnlens/core/tensor.hpp>
#include <nnlens/io/layout.hpp>
#include <nnlens/network.hpp>

namespace py = pybind11;

namespace nnlens_python {
using namespace nnlens;  // NOLINT: the library's vocabulary (the module's own names are outside nnlens: pybind11's unqualified calls must not find nnlens's by ADL)

/// nnlens::detail::concat under a name pybind11's own (unqualified) concat cannot meet.
template <class... A>
std::string cat(A&&... a) {
  return nnlens::detail::concat(std::forward<A>(a)...);
}

/// The scalar type of a Network: its weights and everything computed on it.
enum class precision { f32, f64 };
precision parse_precision(const std::string& s);
inline const char* precision_name(precision p) { return p == precision::f64 ? "f64" : "f32"; }

/// An int8 twin (compress::quantized_network of a dynamic network), opaque outside difftest.cpp.
struct quantized_twin;

/// What the model file declares about its input, and the layout the user's arrays are in.
struct input_info {
  io::data_layout declared = io::data_layout::none;  // what the file declares
  io::data_layout data = io::data_layout::none;      // the arrays' layout: declared, or load(layout=)
  std::vector<std::size_t> declared_shape;           // per sample, as the file declares it
  bool batch_axis = true;
  std::vector<double> range_min, range_max;          // .nnet: the declared input range
};

/// A Network: one of the run-time forms, shared (analyses hold it while they run).
struct network {
  precision prec = precision::f32;
  std::shared_ptr<const basic_dynamic_network<float>> f32;
  std::shared_ptr<const basic_dynamic_network<double>> f64;
  std::shared_ptr<const quantized_twin> int8;  // an int8 twin: forward only (f32 / f64 is its original)
  input_info in;
  std::string source;  // the file name, "<bytes>", or what made it ("int8 twin of ...")
  std::string kind;    // "" for a plain network, else the compression ("int8", "q8", "prune 0.5")

  shape input_shape() const { return f32 ? f32->input_shape() : f64->input_shape(); }
  shape output_shape() const { return f32 ? f32->output_shape() : f64->output_shape(); }
  /// The per-sample dims of the user's arrays (the data layout).
  std::vector<std::size_t> data_shape() const { return io::declared_sample_shape(input_shape(), in.data); }
  bool nhwc() const { return in.data == io::data_layout::nhwc && input_shape().rank == 3; }
  /// f(net) with the plain network in its scalar type.
  template <class F>
  decltype(auto) visit(F&& f) const {
    if (prec == precision::f64) return f(*f64);
    return f(*f32);
  }
  template <class T>
  const basic_dynamic_network<T>& get() const {
    if constexpr (std::is_same_v<T, float>)
      return *f32;
    else
      return *f64;
  }
  /// For analyses that need the piecewise-linear float network, not an int8 twin's integer path.
  void require_plain(const char* what) const;
};

template <class T>
network make_network(basic_dynamic_network<T> net, input_info in, std::string source, std::string kind = {}) {
  network n;
  n.prec = std::is_same_v<T, double> ? precision::f64 : precision::f32;
  if constexpr (std::is_same_v<T, double>)
    n.f64 = std::make_shared<const basic_dynamic_network<double>>(std::move(net));
  else
    n.f32 = std::make_shared<const basic_dynamic_network<float>>(std::move(net));
  n.in = std::move(in);
  n.source = std::move(source);
  n.kind = std::move(kind);
  return n;
}

// ---- arrays in --------------------------------------------------------------------------------

/// "(2, 28, 28)" of a numpy array's shape.
std::string shape_text(const py::array& a);
/// "(N, 1, 28, 28)" of the expected batch.
std::string batch_text(const std::vector<std::size_t>& sample);

template <class T>
using carray = py::array_t<T, py::array::c_style | py::array::forcecast>;

/// x as a C-contiguous array of T: x itself when it is one, else one converted copy.  value_error
/// naming `what` when x holds no numbers.
template <class T>
carray<T> as_carray(py::handle x, const std::string& what) {
  if (x.is_none()) throw value_error(what + ": expected an array, got None");
  auto a = carray<T>::ensure(x);
  if (!a) {
    PyErr_Clear();
    throw value_error(cat(what, ": expected an array of numbers, got ", std::string(py::str(py::type::handle_of(x).attr("__name__")))));
  }
  return a;
}

/// n samples in the network's internal order, and what keeps their memory alive.
template <class T>
struct rows {
  carray<T> array;          // the caller's array (or its converted copy)
  xt::xarray<T> permuted;   // NHWC data permuted to NCHW (else empty)
  const T* data = nullptr;
  std::size_t n = 0, width = 0;
  std::span<const T> span() const { return {data, n * width}; }
  /// xt::adapt view [n, sample...] over the rows (no copy).
  auto view(shape s) const { return xt::adapt(data, n * width, xt::no_ownership(), s.with_batch(n)); }
  std::vector<T> row(std::size_t i) const { return std::vector<T>(data + i * width, data + (i + 1) * width); }
  /// What the library's `const A& X` forms read (data(), size(), shape(), dimension()): a [n, width]
  /// view of the rows, no copy.
  struct flat {
    const T* p;
    std::size_t n, w;
    const T* data() const { return p; }
    std::size_t size() const { return n * w; }
    std::vector<std::size_t> shape() const { return {n, w}; }
    std::size_t dimension() const { return 2; }
  };
  flat flat_view() const { return {data, n, width}; }
  /// A copy [n, sample...] for the forms that take an xtensor container.
  xt::xarray<T> copy(shape s) const {
    xt::xarray<T> x = xt::xarray<T>::from_shape(s.with_batch(n));
    std::copy_n(data, n * width, x.data());
    return x;
  }
};

/// A batch-first array [N, data_shape...] (or flat [N, size]) -> rows in the internal order.
/// shape_error naming `what` and the expected shape otherwise.  NaN / Inf are left to the
/// library's own checks (which name the sample and the element).
template <class T>
rows<T> input_rows(const network& net, py::handle x, const std::string& what) {
  rows<T> r;
  r.array = as_carray<T>(x, what);
  const shape in = net.input_shape();
  const auto ds = net.data_shape();
  const auto& a = r.array;
  const auto nd = std::size_t(a.ndim());
  bool ok = nd >= 1;
  bool flat = false;
  if (ok && nd == ds.size() + 1) {
    for (std::size_t i = 0; i < ds.size(); ++i) ok = ok && std::size_t(a.shape(py::ssize_t(i + 1))) == ds[i];
  } else if (ok && nd == 2 && std::size_t(a.shape(1)) == in.size()) {
    flat = true;
  } else {
    ok = false;
  }
  if (!ok)
    throw shape_error(cat(what, ": an array of shape ", shape_text(a), ", expected ", batch_text(ds),
                             net.in.data == io::data_layout::none ? "" : cat(" (", io::layout_name(net.in.data), ")"),
                             " or flat rows (N, ", in.size(), ")"));
  r.n = std::size_t(a.shape(0));
  r.width = in.size();
  r.data = a.data();
  if (net.nhwc() && r.n > 0) {  // the one permutation: [N,H,W,C] -> [N,C,H,W]
    const std::vector<std::size_t> s{r.n, ds[0], ds[1], ds[2]};
    xt::xarray<T> v = xt::adapt(a.data(), r.n * r.width, xt::no_ownership(), s);
    r.permuted = io::to_nchw(v, io::data_layout::nhwc);
    r.data = r.permuted.data();
    (void)flat;
  }
  return r;
}

/// One sample (input shape without the batch axis, or flat) -> its values in the internal order.
template <class T>
std::vector<T> input_sample(const network& net, py::handle x, const std::string& what) {
  carray<T> a = as_carray<T>(x, what);
  const auto ds = net.data_shape();
  const shape in = net.input_shape();
  bool ok = std::size_t(a.ndim()) == ds.size();
  for (std::size_t i = 0; ok && i < ds.size(); ++i) ok = std::size_t(a.shape(py::ssize_t(i))) == ds[i];
  if (!ok && !(a.ndim() == 1 && std::size_t(a.shape(0)) == in.size())) {
    std::string e = "(";
    for (std::size_t i = 0; i < ds.size(); ++i) e += (i ? ", " : "") + std::to_string(ds[i]);
    e += ds.size() == 1 ? ",)" : ")";
    throw shape_error(cat(what, ": one sample of shape ", shape_text(a), ", expected ", e,
                             " (the input shape without the batch axis) or ", in.size(), " flat values"));
  }
  std::vector<T> v(a.data(), a.data() + a.size());
  if (net.nhwc()) {
    const std::vector<std::size_t> s{1, ds[0], ds[1], ds[2]};
    xt::xarray<T> x4 = xt::adapt(v, s);
    const xt::xarray<T> y = io::to_nchw(x4, io::data_layout::nhwc);
    v.assign(y.begin(), y.end());
  }
  return v;
}

/// Class labels: a 1-D array of n non-negative integers, each < classes.
std::vector<std::size_t> labels_of(py::handle y, std::size_t n, std::size_t classes, const std::string& what);

// ---- arrays out -------------------------------------------------------------------------------

template <class T>
py::array to_numpy(xt::xarray<T>&& a) {
  auto* p = new xt::xarray<T>(std::move(a));
  py::capsule owner(p, [](void* v) { delete static_cast<xt::xarray<T>*>(v); });
  std::vector<py::ssize_t> s(p->shape().begin(), p->shape().end());
  return py::array_t<T>(s, p->data(), owner);
}
template <class T>
py::array to_numpy(std::vector<T>&& v, std::vector<py::ssize_t> s) {
  auto* p = new std::vector<T>(std::move(v));
  py::capsule owner(p, [](void* q) { delete static_cast<std::vector<T>*>(q); });
  return py::array_t<T>(s, p->data(), owner);
}
template <class T>
py::array to_numpy(std::vector<T>&& v) {
  const auto n = py::ssize_t(v.size());
  return to_numpy(std::move(v), {n});
}

/// Per-input-element values (internal order) -> an array [lead..., data_shape...] in the data layout.
template <class T>
py::array per_input(const network& net, std::vector<T>&& v, std::size_t batch, bool batched) {
  const auto ds = net.data_shape();
  std::vector<py::ssize_t> s;
  if (batched) s.push_back(py::ssize_t(batch));
  for (auto d : ds) s.push_back(py::ssize_t(d));
  if (net.nhwc()) {
    const shape in = net.input_shape();
    const std::vector<std::size_t> s4{batch, in[0], in[1], in[2]};
    xt::xarray<T> x = xt::adapt(v, s4);
    const xt::xarray<T> y = io::from_nchw(x, io::data_layout::nhwc);
    v.assign(y.begin(), y.end());
  }
  return to_numpy(std::move(v), s);
}

// ---- the GIL, Ctrl-C, threads ---------------------------------------------------------------

/// Thrown inside a long call once Ctrl-C was seen; an nnlens::error so that the library's own
/// error paths (a seed's failure, a segment's keep_going) unwind it like any other.
class interrupted : public error {
 public:
  interrupted() : error("interrupted") {}
};

/// The state of the long call in progress (one at a time per process: nested calls from a
/// callback run inside it and share it).
struct call_state {
  std::thread::id caller;
  std::atomic<bool> stop{false};
  std::chrono::steady_clock::time_point last{};
  std::optional<py::error_already_set> raised;  // the signal handler's exception (KeyboardInterrupt)
};
std::atomic<call_state*>& current_call();

/// From any thread inside a long call: throws interrupted once Ctrl-C was pressed.  On the calling
/// thread it takes the GIL about every 20 ms to run Python's signal handlers.
void poll();

/// f() with the GIL released; the exception of a signal handler that fired meanwhile is raised
/// afterwards (KeyboardInterrupt), else f's own error or result.
template <class F>
auto long_call(F&& f) -> decltype(f()) {
  using R = decltype(f());
  call_state st;
  const bool nested = current_call().load() != nullptr;
  if (!nested) {
    st.caller = std::this_thread::get_id();
    current_call().store(&st);
  }
  std::exception_ptr ep;
  std::optional<std::conditional_t<std::is_void_v<R>, int, R>> r;
  {
    py::gil_scoped_release nogil;
    try {
      if constexpr (std::is_void_v<R>) {
        f();
        r.emplace(0);
      } else {
        r.emplace(f());
      }
    } catch (...) {
      ep = std::current_exception();
    }
  }
  if (!nested) current_call().store(nullptr);
  if (st.raised) throw *st.raised;
  if (st.stop) {  // stopped without a recorded exception: report it as Ctrl-C
    PyErr_SetNone(PyExc_KeyboardInterrupt);
    throw py::error_already_set();
  }
  if (ep) std::rethrow_exception(ep);
  if constexpr (!std::is_void_v<R>) return std::move(*r);
}

template <class F>
decltype(auto) with_policy(std::optional<std::size_t> threads, F&& f) {
  if (threads && *threads == 0) throw value_error("threads: expected at least 1 (None: the process-wide pool)");
  if (threads && *threads == 1) return f(execution::seq);
  return f(execution::par);
}

/// Registers the parts of the module (one per technique, each in its own source).
void register_load(py::module_& m);
void register_network(py::module_& m);
void register_exactline(py::module_& m);
void register_nnslicer(py::module_& m);
void register_coverage(py::module_& m);
void register_neusemslice(py::module_& m);
void register_difftest(py::module_& m);

/// The int8 twin's forward (difftest.cpp): logits [n, out...] of rows already in NCHW order.
py::array quantized_forward(const network& net, const void* rows, std::size_t n);
/// The int8 twin's description for repr ("int8: 5 int8 weight tensors, 2 float layers").
std::string quantized_summary(const network& net);

}  // namespace nnlens_python
