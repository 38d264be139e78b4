// python/src/network.cpp -- the Network class (forward, shapes, layers, repr as `nnlens info`
// prints it), the shared helpers of common.hpp, and the process-wide settings (threads).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include <nnlens/core/thread_pool.hpp>
#include <nnlens/network/cast.hpp>

#include "common.hpp"

namespace nnlens_python {
using namespace nnlens;  // NOLINT: the library's vocabulary (the module's own names are outside nnlens: pybind11's unqualified calls must not find nnlens's by ADL)

precision parse_precision(const std::string& s) {
  if (s == "f32" || s == "float32" || s == "float") return precision::f32;
  if (s == "f64" || s == "float64" || s == "double") return precision::f64;
  throw value_error("precision: expected 'f32' or 'f64', got '" + s + "'");
}

std::string shape_text(const py::array& a) {
  std::string s = "(";
  for (py::ssize_t i = 0; i < a.ndim(); ++i) s += (i ? ", " : "") + std::to_string(a.shape(i));
  return s + (a.ndim() == 1 ? ",)" : ")");
}

std::string batch_text(const std::vector<std::size_t>& sample) {
  std::string s = "(N";
  for (auto d : sample) s += ", " + std::to_string(d);
  return s + ")";
}

std::vector<std::size_t> labels_of(py::handle y, std::size_t n, std::size_t classes, const std::string& what) {
  carray<double> a = as_carray<double>(y, what);
  if (a.ndim() != 1 || std::size_t(a.shape(0)) != n)
    throw shape_error(cat(what, ": an array of shape ", shape_text(a), ", expected (", n, ",): one class label per sample"));
  std::vector<std::size_t> r(n);
  for (std::size_t i = 0; i < n; ++i) {
    const double v = a.data()[i];
    if (!(v >= 0) || v != std::floor(v) || v >= double(classes))
      throw value_error(cat(what, ": label ", i, " is ", v, "; expected an integer class in [0, ", classes, ")"));
    r[i] = std::size_t(v);
  }
  return r;
}

std::atomic<call_state*>& current_call() {
  static std::atomic<call_state*> p{nullptr};
  return p;
}

void poll() {
  call_state* st = current_call().load(std::memory_order_acquire);
  if (!st) return;
  if (st->stop.load(std::memory_order_relaxed)) throw interrupted();
  if (std::this_thread::get_id() != st->caller) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - st->last < std::chrono::milliseconds(20)) return;
  st->last = now;
  py::gil_scoped_acquire gil;
  if (PyErr_CheckSignals() != 0) {
    st->raised.emplace();  // fetches the handler's exception (KeyboardInterrupt)
    st->stop.store(true);
    throw interrupted();
  }
}

void network::require_plain(const char* what) const {
  if (int8)
    throw logic_error(cat(what, ": ", source,
                             " is an int8 twin, which runs forward (and difftest) only; analyse its original, or "
                             "compress(..., 'q8') for a weight-only twin that every analysis takes"));
}

namespace {

template <class T>
std::size_t layer_params(const typename basic_dynamic_network<T>::layer_type& v) {
  return std::visit(
      [](const auto& l) -> std::size_t {
        using L = std::decay_t<decltype(l)>;
        std::size_t n = 0;
        if constexpr (HasParameters<L>)
          for (auto s : layer_traits<L>::parameters(l)) n += s.size();
        return n;
      },
      v);
}

/// One row per layer: (index, type, output shape (NCHW), parameters).
py::list layers_of(const network& n) {
  py::list out;
  n.visit([&](const auto& net) {
    using T = typename std::decay_t<decltype(net)>::scalar_type;
    for (std::size_t i = 0; i < net.size(); ++i) {
      py::dict d;
      d["index"] = i;
      d["type"] = std::string(net.layer_name(i));
      const shape s = net.shape_at(i + 1);
      std::vector<std::size_t> dims(s.rank);
      for (std::size_t k = 0; k < s.rank; ++k) dims[k] = s[k];
      d["output_shape"] = py::tuple(py::cast(dims));
      d["params"] = layer_params<T>(net.layer(i));
      out.append(d);
    }
  });
  return out;
}

std::size_t total_params(const network& n) {
  return n.visit([&](const auto& net) {
    using T = typename std::decay_t<decltype(net)>::scalar_type;
    std::size_t t = 0;
    for (std::size_t i = 0; i < net.size(); ++i) t += layer_params<T>(net.layer(i));
    return t;
  });
}

/// "[N,32,32,3] (nhwc)", as `nnlens info` describes the declared input.
std::string describe_input(const network& n) {
  std::string s = "[";
  if (n.in.batch_axis) s += "N";
  for (std::size_t i = 0; i < n.in.declared_shape.size(); ++i)
    s += (i || n.in.batch_axis ? "," : "") + std::to_string(n.in.declared_shape[i]);
  s += "]";
  if (n.in.declared != io::data_layout::none) s += std::string(" (") + io::layout_name(n.in.declared) + ")";
  return s;
}

/// The text of `nnlens info MODEL`, with the precision and the arrays' layout.
std::string info_text(const network& n) {
  std::ostringstream os;
  os << n.source << (n.kind.empty() ? "" : " (" + n.kind + ")") << ", " << precision_name(n.prec) << "\n";
  os << "  input " << describe_input(n);
  if (n.in.data != n.in.declared) os << "; arrays in " << io::layout_name(n.in.data);
  if (n.nhwc()) os << ": arrays in NHWC order (h, w, c); the network computes in NCHW " << n.input_shape().str();
  os << "\n";
  char b[160];
  std::snprintf(b, sizeof b, "  %-5s %-14s %-14s %10s\n", "#", "layer", "output", "params");
  os << b;
  n.visit([&](const auto& net) {
    using T = typename std::decay_t<decltype(net)>::scalar_type;
    for (std::size_t i = 0; i < net.size(); ++i) {
      std::snprintf(b, sizeof b, "  %-5zu %-14s %-14s %10zu\n", i, std::string(net.layer_name(i)).c_str(),
                    net.shape_at(i + 1).str().c_str(), layer_params<T>(net.layer(i)));
      os << b;
    }
  });
  os << "  output " << n.output_shape().str() << ", " << total_params(n) << " parameters";
  if (n.int8) os << "\n  " << quantized_summary(n);
  return os.str();
}

py::array forward(const network& n, py::handle x, std::optional<std::size_t> threads) {
  return n.visit([&](const auto& net) -> py::array {
    using T = typename std::decay_t<decltype(net)>::scalar_type;
    const rows<T> r = input_rows<T>(n, x, "forward: x");
    if (n.int8) return quantized_forward(n, r.data, r.n);
    xt::xarray<T> y;
    {
      py::gil_scoped_release nogil;
      // the precompiled form forward() reaches after its checks: the rows as they are, no copy
      y = with_policy(threads, [&](const auto& pol) { return detail::forward_rows(pol, net, r.span(), r.n); });
    }
    return to_numpy(std::move(y));
  });
}

network cast_to(const network& n, const std::string& p) {
  n.require_plain("Network.to");
  const precision q = parse_precision(p);
  if (q == n.prec) return n;
  if (q == precision::f64) return make_network<double>(network_cast<double>(*n.f32), n.in, n.source, n.kind);
  return make_network<float>(network_cast<float>(*n.f64), n.in, n.source, n.kind);
}

py::tuple dims_tuple(const std::vector<std::size_t>& d) { return py::tuple(py::cast(d)); }
py::tuple dims_tuple(shape s) {
  std::vector<std::size_t> d(s.rank);
  for (std::size_t i = 0; i < s.rank; ++i) d[i] = s[i];
  return dims_tuple(d);
}

std::size_t set_threads(std::size_t n) {
  if (n == 0 || n > 1024) throw value_error(cat("set_threads: expected 1 to 1024 threads, got ", n));
  ::setenv("NNLENS_NUM_THREADS", std::to_string(n).c_str(), 1);
  const std::size_t have = worker_threads();  // starts the pool if it was not running
  if (have != n)
    throw value_error(cat("set_threads(", n, "): the process-wide pool already runs ", have,
                             " threads (it is sized once, before the first parallel call; set NNLENS_NUM_THREADS "
                             "before importing nnlens)"));
  return have;
}

}  // namespace

void register_network(py::module_& m) {
  py::class_<network>(m, "Network", "A network read from a model file (see nnlens.Network).")
      .def("__call__", &forward, py::arg("x"), py::arg("threads") = py::none(),
           "Forward pass on a batch-first array in the model's layout; returns the outputs [N, ...].")
      .def("forward", &forward, py::arg("x"), py::arg("threads") = py::none())
      .def_property_readonly("input_shape", [](const network& n) { return dims_tuple(n.data_shape()); })
      .def_property_readonly("network_input_shape", [](const network& n) { return dims_tuple(n.input_shape()); })
      .def_property_readonly("output_shape", [](const network& n) { return dims_tuple(n.output_shape()); })
      .def_property_readonly("layout", [](const network& n) { return std::string(io::layout_name(n.in.data)); })
      .def_property_readonly("declared_layout", [](const network& n) { return std::string(io::layout_name(n.in.declared)); })
      .def_property_readonly("precision", [](const network& n) { return std::string(precision_name(n.prec)); })
      .def_property_readonly("source", [](const network& n) { return n.source; })
      .def_property_readonly("kind", [](const network& n) { return n.kind; })
      .def_property_readonly("is_int8", [](const network& n) { return bool(n.int8); })
      .def_property_readonly("input_range", [](const network& n) -> py::object {
        if (n.in.range_min.empty()) return py::none();
        return py::make_tuple(to_numpy(std::vector<double>(n.in.range_min)), to_numpy(std::vector<double>(n.in.range_max)));
      })
      .def_property_readonly("layers", &layers_of)
      .def_property_readonly("parameters", &total_params)
      .def_property_readonly("fingerprint", [](const network& n) {
        return n.visit([](const auto& net) { return model_fingerprint(net); });
      })
      .def("to", &cast_to, py::arg("precision"), "The same network in another precision ('f32' or 'f64').")
      .def("info", &info_text, "The text `nnlens info` prints for this model.")
      .def("__repr__", [](const network& n) { return "<nnlens.Network " + info_text(n) + ">"; });

  m.def("set_threads", &set_threads, py::arg("n"),
        "Sizes the process-wide thread pool (before the first parallel call).");
  m.def("worker_threads", [] { return worker_threads(); }, "The threads of the process-wide pool.");
  // The data pointer and sample count the C++ side reads for x (the conversion every analysis
  // uses): equal to x's own pointer when no copy was needed.
  m.def("_input_pointer", [](const network& n, py::handle x) {
    return n.visit([&](const auto& net) {
      using T = typename std::decay_t<decltype(net)>::scalar_type;
      const rows<T> r = input_rows<T>(n, x, "x");
      return py::make_tuple(reinterpret_cast<std::uintptr_t>(r.data), r.n);
    });
  });
}

}  // namespace nnlens_python
