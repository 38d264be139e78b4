// python/src/difftest.cpp -- DFlare: compressed twins (int8 / q8 quantisation, magnitude / channel
// pruning: include/nnlens/compress/) and the differential search (dflare, diffchaser) between two
// models, each a Network or any Python callable taking a batch and returning logits (or
// probabilities), as `nnlens difftest` runs it (tools/nnlens/difftest_cmd.cpp).
// A callable is a difftest::black_box whose predict takes the GIL; with one in the pair the search
// runs in lockstep (difftest/lockstep.hpp): every round's mutants go to it as one batch.
#include <cmath>

#include <nnlens/compress/magnitude.hpp>
#include <nnlens/compress/quantize.hpp>
#include <nnlens/difftest/black_box.hpp>
#include <nnlens/difftest/dflare.hpp>
#include <nnlens/difftest/diffchaser.hpp>

#include "common.hpp"

namespace nnlens_python {
using namespace nnlens;  // NOLINT: the library's vocabulary (the module's own names are outside nnlens: pybind11's unqualified calls must not find nnlens's by ADL)

struct quantized_twin {
  std::shared_ptr<const compress::quantized_network<basic_dynamic_network<float>>> f;
  std::shared_ptr<const compress::quantized_network<basic_dynamic_network<double>>> d;
  template <class T>
  const auto& get() const {
    if constexpr (std::is_same_v<T, float>)
      return *f;
    else
      return *d;
  }
};

py::array quantized_forward(const network& n, const void* x, std::size_t batch) {
  return n.visit([&](const auto& net) -> py::array {
    using T = typename std::decay_t<decltype(net)>::scalar_type;
    const shape in = net.input_shape();
    xt::xarray<T> a = xt::xarray<T>::from_shape(in.with_batch(batch));
    std::copy_n(static_cast<const T*>(x), a.size(), a.data());
    py::gil_scoped_release nogil;
    xt::xarray<T> y = n.int8->get<T>().forward(a);
    py::gil_scoped_acquire gil;
    return to_numpy(std::move(y));
  });
}

std::string quantized_summary(const network& n) {
  return n.visit([&](const auto& net) {
    using T = typename std::decay_t<decltype(net)>::scalar_type;
    const auto& q = n.int8->get<T>();
    return cat("int8 twin: ", q.quantized_layers(), " int8 weight tensors, ", q.float_layers().size(),
                  " layers in float between a dequantise and a requantise");
  });
}

namespace {

namespace dt = nnlens::difftest;

network compress_py(const network& n, const std::string& method, py::handle calibration, std::optional<double> ratio,
                    bool per_tensor) {
  n.require_plain("compress");
  const bool pruning = method == "prune" || method == "channel-prune" || method == "channel_prune";
  if (method != "int8" && method != "q8" && !pruning)
    throw value_error("compress: method '" + method + "'; expected 'int8', 'q8', 'prune' or 'channel-prune'");
  if (pruning && (!ratio || !(*ratio >= 0 && *ratio <= 1)))
    throw value_error(cat("compress: '", method, "' needs ratio= in [0, 1] (the fraction pruned)"));
  if (method == "int8" && calibration.is_none())
    throw value_error("compress: 'int8' needs calibration= samples (the activation ranges)");
  return n.visit([&](const auto& net) {
    using T = typename std::decay_t<decltype(net)>::scalar_type;
    using Q = compress::quantized_network<basic_dynamic_network<T>>;
    const std::string from = " of " + n.source;
    if (method == "q8" || method == "int8") {
      compress::quantize_options qo =
          method == "q8" ? compress::quantize_options::dflare_reference() : compress::quantize_options{};
      if (per_tensor) qo.granularity = compress::quant_granularity::per_tensor;
      std::shared_ptr<const Q> q;
      if (method == "q8") {
        q = std::make_shared<const Q>(compress::quantize_weights(net, qo));
        return make_network<T>(q->dequantized(), n.in, "q8 twin" + from, "q8");
      }
      const rows<T> cal = input_rows<T>(n, calibration, "compress: calibration");
      if (cal.n == 0) throw data_error("compress: calibration holds no samples");
      const xt::xarray<T> ca = cal.copy(net.input_shape());
      {
        py::gil_scoped_release nogil;
        q = std::make_shared<const Q>(compress::quantize(net, ca, qo));
      }
      network r = make_network<T>(q->dequantized(), n.in, "int8 twin" + from, "int8");
      auto qt = std::make_shared<quantized_twin>();
      if constexpr (std::is_same_v<T, float>)
        qt->f = q;
      else
        qt->d = q;
      r.int8 = qt;
      return r;
    }
    py::gil_scoped_release nogil;
    if (method == "prune") return make_network<T>(compress::magnitude_prune(net, *ratio), n.in, "pruned twin" + from, cat("prune ", *ratio));
    return make_network<T>(compress::channel_prune(net, *ratio), n.in, "channel-pruned twin" + from, cat("channel-prune ", *ratio));
  });
}

/// How the search's internal C x H x W images map to the arrays a callable (and the caller) sees.
struct io_layout {
  std::vector<std::size_t> data_shape;  // per sample, as the arrays hold it
  bool nhwc = false;                    // the arrays are H x W x C of internal C x H x W
  shape internal;
  float scale = 255;
};

/// internal-order pixels (n samples) -> model-scale values in the arrays' layout
void to_arrays(const io_layout& L, const float* x, std::size_t n, float* out) {
  const std::size_t w = L.internal.size();
  if (!L.nhwc) {
    for (std::size_t i = 0; i < n * w; ++i) out[i] = x[i] / L.scale;
    return;
  }
  const std::size_t C = L.internal[0], H = L.internal[1], W = L.internal[2];
  for (std::size_t s = 0; s < n; ++s)
    for (std::size_t c = 0; c < C; ++c)
      for (std::size_t h = 0; h < H; ++h)
        for (std::size_t q = 0; q < W; ++q)
          out[s * w + (h * W + q) * C + c] = x[s * w + (c * H + h) * W + q] / L.scale;
}

/// A Python callable as a black box (see the header comment).
dt::black_box callable_box(py::object fn, const io_layout& L, std::size_t classes, bool probabilities, std::string name) {
  // the callable is released with the GIL held, whichever thread drops the last copy of the box
  std::shared_ptr<py::object> f(new py::object(std::move(fn)), [](py::object* p) {
    py::gil_scoped_acquire gil;
    delete p;
  });
  dt::black_box b;
  b.input_size = L.internal.size();
  b.classes = classes;
  b.name = name;
  b.predict = [f, L, classes, probabilities, name](std::span<const float> x, std::size_t n, std::span<float> probs) {
    poll();
    py::gil_scoped_acquire gil;
    std::vector<py::ssize_t> s{py::ssize_t(n)};
    for (auto d : L.data_shape) s.push_back(py::ssize_t(d));
    py::array_t<float> a(s);
    to_arrays(L, x.data(), n, a.mutable_data());
    py::object out;
    try {
      out = (*f)(a);
    } catch (py::error_already_set& e) {
      if (e.matches(PyExc_KeyboardInterrupt))
        if (call_state* st = current_call().load()) {
          st->raised = e;
          st->stop = true;
          throw interrupted();
        }
      throw value_error(cat("model '", name, "' raised ", e.what()));
    }
    if (py::hasattr(out, "detach")) out = out.attr("detach")();  // a torch tensor
    carray<double> y = as_carray<double>(out, cat("model '", name, "' output"));
    if (std::size_t(y.size()) != n * classes)
      throw shape_error(cat("model '", name, "': a batch of ", n, " gave ", y.size(), " values, expected ", n, " x ", classes));
    std::vector<double> v(y.data(), y.data() + y.size());
    if (!probabilities) dt::softmax_rows(std::span<double>(v), classes);
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (!std::isfinite(v[i])) throw value_error(cat("model '", name, "': output of sample ", i / classes, " is not finite"));
      probs[i] = float(v[i]);
    }
  };
  return b;
}

/// A Network as a black box reading raw pixels / scale; poll() before each query (Ctrl-C).
dt::black_box network_box(const network& n, float scale) {
  dt::black_box b = n.visit([&](const auto& net) -> dt::black_box {
    using T = typename std::decay_t<decltype(net)>::scalar_type;
    if (!n.int8) {
      // the box shares the network (it stays alive as long as the box)
      if constexpr (std::is_same_v<T, float>)
        return dt::detail::wrap_shared(n.f32, n.source, dt::normalization::divide_by(scale));
      else
        return dt::detail::wrap_shared(n.f64, n.source, dt::normalization::divide_by(scale));
    }
    auto q = n.int8;
    const shape in = net.input_shape();
    return dt::wrap(
        [q, in, scale](std::span<const float> x, std::size_t k, std::span<float> probs) {
          xt::xarray<T> a = xt::xarray<T>::from_shape(in.with_batch(k));
          for (std::size_t i = 0; i < a.size(); ++i) a.data()[i] = T(x[i] / scale);
          const xt::xarray<T> p = q->template get<T>().predict(a);
          for (std::size_t i = 0; i < p.size(); ++i) probs[i] = float(p.data()[i]);
        },
        in.size(), net.output_shape().size(), n.source);
  });
  auto inner = std::make_shared<const dt::black_box>(b);
  b.predict = [inner](std::span<const float> x, std::size_t k, std::span<float> probs) {
    poll();
    inner->predict(x, k, probs);
  };
  return b;
}

std::string status_name(dt::seed_status s) {
  switch (s) {
    case dt::seed_status::found: return "found";
    case dt::seed_status::not_found: return "not_found";
    case dt::seed_status::already_triggering: return "already_triggering";
    case dt::seed_status::failed: return "failed";
  }
  return "?";
}

py::dict difftest_py(py::object original, py::object twin, py::handle seeds_in, std::uint64_t seed, std::size_t max_queries,
                     double timeout, const std::string& method, const std::string& acceptance, const std::string& selection,
                     const std::string& distance, bool skip_repeats, double pixel_scale, bool probabilities,
                     std::optional<std::size_t> threads, bool progress) {
  if (method != "dflare" && method != "diffchaser")
    throw value_error("method: expected 'dflare' or 'diffchaser', got '" + method + "'");
  if (max_queries == 0 && !(timeout > 0)) throw value_error("max_queries 0 and timeout 0: a search needs a query or a time budget");
  if (!(timeout >= 0) || !std::isfinite(timeout)) throw value_error(cat("timeout ", timeout, ": expected seconds >= 0"));
  if (!(pixel_scale > 0) || !std::isfinite(pixel_scale)) throw value_error(cat("pixel_scale ", pixel_scale, ": expected > 0"));
  dt::acceptance acc = dt::acceptance::paper;
  if (acceptance == "reference") acc = dt::acceptance::reference;
  else if (acceptance == "no-novelty" || acceptance == "no_novelty") acc = dt::acceptance::no_novelty;
  else if (acceptance != "paper") throw value_error("acceptance: expected 'paper', 'reference' or 'no-novelty', got '" + acceptance + "'");
  dt::selection_rule sel = dt::selection_rule::paper;
  if (selection == "reference") sel = dt::selection_rule::reference;
  else if (selection == "last-accepted" || selection == "last_accepted") sel = dt::selection_rule::last_accepted;
  else if (selection == "uniform") sel = dt::selection_rule::uniform;
  else if (selection != "paper") throw value_error("selection: expected 'paper', 'reference', 'last-accepted' or 'uniform', got '" + selection + "'");
  dt::distance_measure dist = dt::distance_measure::top1_probability;
  if (distance == "logit-margin" || distance == "logit_margin") dist = dt::distance_measure::logit_margin;
  else if (distance != "paper") throw value_error("distance: expected 'paper' or 'logit-margin', got '" + distance + "'");

  const network* nf = py::isinstance<network>(original) ? &py::cast<const network&>(original) : nullptr;
  const network* ng = py::isinstance<network>(twin) ? &py::cast<const network&>(twin) : nullptr;
  if (!nf && !PyCallable_Check(original.ptr())) throw value_error("difftest: original is neither an nnlens.Network nor a callable");
  if (!ng && !PyCallable_Check(twin.ptr())) throw value_error("difftest: twin is neither an nnlens.Network nor a callable");
  const network* ref = nf ? nf : ng;
  io_layout L;
  L.scale = float(pixel_scale);
  std::vector<float> pixels;
  std::size_t n = 0;
  if (ref) {
    const rows<float> r = input_rows<float>(*ref, seeds_in, "difftest: seeds");
    L.internal = ref->input_shape();
    L.data_shape = ref->data_shape();
    L.nhwc = ref->nhwc();
    n = r.n;
    pixels.assign(r.data, r.data + r.n * r.width);
  } else {
    const carray<float> a = as_carray<float>(seeds_in, "difftest: seeds");
    if (a.ndim() < 2 || a.ndim() > 4) throw shape_error("difftest: seeds of shape " + shape_text(a) + "; expected (N, C, H, W), (N, H, W) or (N, F)");
    for (py::ssize_t d = 1; d < a.ndim(); ++d) L.data_shape.push_back(std::size_t(a.shape(d)));
    const auto& s = L.data_shape;
    L.internal = s.size() == 3 ? shape(s[0], s[1], s[2]) : s.size() == 2 ? shape(1, s[0], s[1]) : shape(s[0]);
    n = std::size_t(a.shape(0));
    pixels.assign(a.data(), a.data() + a.size());
  }
  if (n == 0) throw data_error("difftest: no seeds");
  const std::size_t w = L.internal.size();
  for (std::size_t i = 0; i < pixels.size(); ++i) {
    const float v = pixels[i] * L.scale;
    if (!(v >= 0.f && v <= 255.f))
      throw value_error(cat("difftest: seed ", i / w, " element ", i % w, " is ", pixels[i], "; times pixel_scale ", pixel_scale,
                               " it leaves the pixel range [0, 255]"));
    pixels[i] = v;
  }
  // the classes of a pair of callables: the first seed, asked once
  std::size_t classes = ref ? ref->output_shape().size() : 0;
  if (!ref) {
    std::vector<float> one(w);
    to_arrays(L, pixels.data(), 1, one.data());
    std::vector<py::ssize_t> s{1};
    for (auto d : L.data_shape) s.push_back(py::ssize_t(d));
    py::array_t<float> a(s);
    std::copy(one.begin(), one.end(), a.mutable_data());
    py::object y = original(a);
    if (py::hasattr(y, "detach")) y = y.attr("detach")();
    classes = std::size_t(as_carray<double>(y, "difftest: original's output").size());
  }
  if (nf && ng && (nf->input_shape() != ng->input_shape() || nf->output_shape().size() != ng->output_shape().size()))
    throw shape_error(cat("difftest: the twin's input ", ng->input_shape().str(), " / ", ng->output_shape().size(),
                             " classes differ from the original's ", nf->input_shape().str(), " / ", nf->output_shape().size()));
  const bool any_callable = !nf || !ng;
  const dt::black_box f = nf ? network_box(*nf, L.scale) : callable_box(original, L, classes, probabilities, "original");
  const dt::black_box g = ng ? network_box(*ng, L.scale) : callable_box(twin, L, classes, probabilities, "twin");
  const dt::image_shape img = L.internal.rank == 3 ? dt::image_shape{L.internal[0], L.internal[1], L.internal[2]}
                                                   : dt::image_shape{1, 1, L.internal.size()};
  dt::dflare_result r = long_call([&] {
    auto common = [&](auto& d) {
      d.image = img;
      d.max_queries = max_queries;
      d.max_seconds = timeout;
      d.seed = seed;
      d.progress = progress;
    };
    const std::span<const float> sp(pixels);
    if (method == "dflare") {
      dt::dflare_options d;
      common(d);
      d.accept = acc, d.selection = sel, d.distance = dist, d.skip_repeats = skip_repeats;
      d.lockstep = any_callable;  // a callable answers each round's mutants as one batch
      if (any_callable) return dt::dflare(execution::seq, f, g, sp, n, d);
      return with_policy(threads, [&](const auto& pol) { return dt::dflare(pol, f, g, sp, n, d); });
    }
    if (skip_repeats || dist != dt::distance_measure::top1_probability)
      throw value_error("distance='logit-margin' and skip_repeats are options of method 'dflare', not of 'diffchaser'");
    dt::diffchaser_options d;
    common(d);
    if (any_callable) return dt::diffchaser(execution::seq, f, g, sp, n, d);
    return with_policy(threads, [&](const auto& pol) { return dt::diffchaser(pol, f, g, sp, n, d); });
  });
  py::list out;
  for (const auto& s : r.seeds) {
    py::dict d;
    d["index"] = s.index;
    d["status"] = status_name(s.status);
    d["found"] = s.found();
    d["queries"] = s.queries;
    d["seconds"] = s.seconds;
    d["seed_label"] = s.seed_label;
    d["labels"] = py::make_tuple(s.label_f, s.label_g);
    if (s.found() && !s.input.empty()) {
      std::vector<float> v(w);
      to_arrays(L, s.input.data(), 1, v.data());
      std::vector<py::ssize_t> sh;
      for (auto x : L.data_shape) sh.push_back(py::ssize_t(x));
      d["input"] = to_numpy(std::move(v), sh);
    } else {
      d["input"] = py::none();
    }
    d["error"] = s.error.empty() ? py::object(py::none()) : py::object(py::str(s.error));
    out.append(d);
  }
  const auto sum = r.summary();
  py::dict sm;
  sm["seeds"] = sum.seeds, sm["searched"] = sum.searched, sm["found"] = sum.found, sm["not_found"] = sum.not_found;
  sm["already_triggering"] = sum.already_triggering, sm["failed"] = sum.failed, sm["success_rate"] = sum.success_rate;
  sm["mean_queries"] = sum.mean_queries, sm["mean_seconds"] = sum.mean_seconds, sm["total_queries"] = sum.total_queries;
  sm["method"] = method;
  py::dict res;
  res["seeds"] = out;
  res["summary"] = sm;
  return res;
}

}  // namespace

void register_difftest(py::module_& m) {
  m.def("compress", &compress_py, py::arg("net"), py::arg("method"), py::arg("calibration"), py::arg("ratio"),
        py::arg("per_tensor"));
  m.def("difftest", &difftest_py, py::arg("original"), py::arg("twin"), py::arg("seeds"), py::arg("seed"),
        py::arg("max_queries"), py::arg("timeout"), py::arg("method"), py::arg("acceptance"), py::arg("selection"),
        py::arg("distance"), py::arg("skip_repeats"), py::arg("pixel_scale"), py::arg("probabilities"), py::arg("threads"),
        py::arg("progress"));
}

}  // namespace nnlens_python
