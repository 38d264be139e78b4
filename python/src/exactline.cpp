// python/src/exactline.cpp -- ExactLine: exact lines (exact_lines_stream: rows as they are
// completed, so Ctrl-C and progress work), planes, exact integrated gradients (exact_ig_stream, with
// its Riemann / Gauss-Legendre sums from the pieces) and the sums Captum computes from the network's
// own gradients at the samples (riemann_samples + input_gradients, as riemann_ig does).
// Results go to Python as dicts of numpy arrays; python/nnlens/exactline.py wraps them.
#include <mutex>

#include <nnlens/core/progress.hpp>
#include <nnlens/exactline.hpp>
#include <nnlens/exactline/ig_stream.hpp>
#include <nnlens/exactline/stream.hpp>

#include "common.hpp"

namespace nnlens_python {
using namespace nnlens;  // NOLINT: the library's vocabulary (the module's own names are outside nnlens: pybind11's unqualified calls must not find nnlens's by ADL)

namespace {

class_rule parse_class_rule(const std::string& s) {
  if (s == "argmax") return class_rule::argmax;
  if (s == "argmin") return class_rule::argmin;
  throw value_error("classes: expected 'argmax' (classifiers) or 'argmin' (ACAS Xu advisories), got '" + s + "'");
}

riemann_rule parse_rule(const std::string& s) {
  if (s == "left" || s == "riemann_left") return riemann_rule::left;
  if (s == "right" || s == "riemann_right") return riemann_rule::right;
  if (s == "middle" || s == "riemann_middle") return riemann_rule::middle;
  if (s == "trapezoid" || s == "riemann_trapezoid") return riemann_rule::trapezoid;
  if (s == "gausslegendre" || s == "gauss_legendre") return riemann_rule::gauss_legendre;
  throw value_error("method: expected 'exact', 'riemann_left', 'riemann_right', 'riemann_middle', 'riemann_trapezoid' or "
                    "'gausslegendre', got '" + s + "'");
}

struct line_args {
  bool validate = false;
  std::optional<double> validate_tol;
  double merge_tol = 0;
  std::size_t max_pieces = std::size_t(1) << 24;
  std::optional<std::size_t> max_memory;  // bytes; None: the library's default (1 GiB); 0: unbounded
  std::string classes = "argmax";
  std::optional<std::size_t> threads;
  bool progress = false;
  bool keep_going = false;
};

template <class T>
line_options options_of(const line_args& a) {
  line_options o;
  if (!(a.merge_tol >= 0 && a.merge_tol <= 1)) throw value_error(cat("merge_tol: expected 0 to 1, got ", a.merge_tol));
  o.merge_tol = a.merge_tol;
  o.validate = a.validate;
  // the tool's tolerance at each precision (tools/nnlens/exact_line_cmd.cpp, resolution_tol)
  o.validate_tol = a.validate_tol ? *a.validate_tol : (std::is_same_v<T, float> ? 1e-3 : 1e-9);
  if (!(o.validate_tol >= 0 && o.validate_tol < 1)) throw value_error(cat("validate_tol: expected [0, 1), got ", o.validate_tol));
  if (a.max_pieces == 0) throw value_error("max_pieces: expected at least 1");
  o.max_pieces = a.max_pieces;
  if (a.max_memory) o.max_memory = *a.max_memory;
  o.keep_going = a.keep_going;
  return o;
}

py::dict stats_dict(const line_stats& s, bool validated) {
  py::dict d;
  d["merged"] = s.merged;
  d["points_per_layer"] = s.points;
  d["sub_segments"] = s.sub_segments;
  if (validated) {
    d["validated_pieces"] = s.validated_pieces;
    d["violations"] = s.violations;
    d["max_deviation"] = s.max_deviation;
  }
  return d;
}

/// Segments A[i] -> B[i] (internal order), streamed; one dict per segment.
template <class T>
py::list lines(const network& n, const basic_dynamic_network<T>& net, const std::vector<std::vector<T>>& A,
               const std::vector<std::vector<T>>& B, const line_args& a) {
  const line_options opt = options_of<T>(a);
  const class_rule rule = parse_class_rule(a.classes);
  const std::size_t seg = A.size(), dout = net.output_shape().size();
  std::vector<std::vector<double>> ts(seg);
  std::vector<std::vector<T>> vs(seg);
  std::vector<class_tracker<T, double>> trackers;
  for (std::size_t i = 0; i < seg; ++i) trackers.emplace_back(dout, rule);
  std::vector<line_summary<T, double>> sums;
  std::optional<progress_bar> bar;
  if (a.progress) bar.emplace("exact-line", 1000 * seg);
  std::vector<double> covered(seg, 0.0);
  std::mutex mu;
  long_call([&] {
    sums = with_policy(a.threads, [&](const auto& pol) {
      return exact_lines_stream<T, double>(
          pol, net, A, B,
          [&](std::size_t i, double t, std::span<const T> y) {
            poll();
            ts[i].push_back(t);
            vs[i].insert(vs[i].end(), y.begin(), y.end());
            trackers[i].row(t, y.data());
            if (bar) {
              std::lock_guard<std::mutex> lock(mu);
              covered[i] = t;
              double s = 0;
              for (double c : covered) s += c;
              bar->update(std::size_t(1000 * s));
            }
          },
          opt);
    });
  });
  if (bar && bar->redraws() > 0) bar->finish();
  py::list out;
  for (std::size_t i = 0; i < seg; ++i) {
    py::dict d;
    const auto& s = sums[i];
    d["error"] = s.error.empty() ? py::object(py::none()) : py::object(py::str(s.error));
    if (!s.error.empty()) {
      ts[i].clear();
      vs[i].clear();
    }
    const auto rows_n = py::ssize_t(ts[i].size());
    d["t"] = to_numpy(std::move(ts[i]));
    d["outputs"] = to_numpy(std::move(vs[i]), {rows_n, py::ssize_t(dout)});
    py::list cls;
    if (s.error.empty())
      for (const auto& c : trackers[i].intervals()) cls.append(py::make_tuple(c.from, c.to, c.label));
    d["classes"] = cls;
    d["pieces"] = s.pieces;
    d["stats"] = stats_dict(s.stats, opt.validate);
    d["validate_tol"] = opt.validate_tol;
    d["precision"] = precision_name(n.prec);
    out.append(d);
  }
  return out;
}

py::list exact_lines_py(const network& n, py::handle A, py::handle B, const line_args& a) {
  n.require_plain("exact_lines");
  return n.visit([&](const auto& net) {
    using T = typename std::decay_t<decltype(net)>::scalar_type;
    const rows<T> ra = input_rows<T>(n, A, "exact_lines: starts"), rb = input_rows<T>(n, B, "exact_lines: ends");
    if (ra.n != rb.n)
      throw shape_error(cat("exact_lines: ", ra.n, " starts but ", rb.n, " ends (segment i is starts[i] -> ends[i])"));
    std::vector<std::vector<T>> va(ra.n), vb(rb.n);
    for (std::size_t i = 0; i < ra.n; ++i) va[i] = ra.row(i), vb[i] = rb.row(i);
    return lines<T>(n, net, va, vb, a);
  });
}

py::dict exact_line_py(const network& n, py::handle P, py::handle Q, const line_args& a) {
  n.require_plain("exact_line");
  return n.visit([&](const auto& net) {
    using T = typename std::decay_t<decltype(net)>::scalar_type;
    std::vector<std::vector<T>> va{input_sample<T>(n, P, "exact_line: a")}, vb{input_sample<T>(n, Q, "exact_line: b")};
    line_args b = a;
    b.keep_going = false;
    return py::dict(lines<T>(n, net, va, vb, b)[0]);
  });
}

py::dict exact_plane_py(const network& n, py::handle O, py::handle U, py::handle V,
                        const std::vector<std::array<double, 2>>& polygon, std::size_t max_polygons, const std::string& classes) {
  n.require_plain("exact_plane");
  const class_rule rule = parse_class_rule(classes);
  return n.visit([&](const auto& net) {
    using T = typename std::decay_t<decltype(net)>::scalar_type;
    const auto o = input_sample<T>(n, O, "exact_plane: origin"), u = input_sample<T>(n, U, "exact_plane: u"),
               v = input_sample<T>(n, V, "exact_plane: v");
    plane_options po;
    po.max_polygons = max_polygons;
    plane_result<T, double> r;
    std::vector<class_region<T, double>> regions;
    long_call([&] {
      r = exact_plane<T, double>(net, o, u, v, polygon, po);
      regions = classify_plane(r, rule);
    });
    auto polys = [](const auto& list, auto&& get) {
      py::list out;
      for (const auto& item : list) {
        const auto& p = get(item);
        std::vector<double> uv;
        for (const auto& q : p.vertices) uv.push_back(q[0]), uv.push_back(q[1]);
        const auto m = py::ssize_t(p.vertices.size());
        py::dict d;
        d["vertices"] = to_numpy(std::move(uv), {m, 2});
        d["outputs"] = to_numpy(std::vector<T>(p.outputs), {m, py::ssize_t(p.out_size)});
        out.append(d);
      }
      return out;
    };
    py::dict d;
    d["polygons"] = polys(r.polygons, [](const auto& p) -> const auto& { return p; });
    py::list regs = polys(regions, [](const auto& g) -> const auto& { return g.polygon; });
    for (std::size_t i = 0; i < regions.size(); ++i) regs[i]["label"] = regions[i].label;
    d["regions"] = regs;
    d["area"] = r.area();
    return d;
  });
}

/// The target output of each input: given (one, or one per input), else the predicted class.
template <class T>
std::vector<std::size_t> targets_of(const basic_dynamic_network<T>& net, const rows<T>& x, py::handle target) {
  const std::size_t dout = net.output_shape().size();
  std::vector<std::size_t> k(x.n);
  if (target.is_none()) {
    const xt::xarray<T> y = detail::forward_rows(execution::par, net, x.span(), x.n);
    for (std::size_t i = 0; i < x.n; ++i) {
      const T* yi = y.data() + i * dout;
      k[i] = std::size_t(std::max_element(yi, yi + dout) - yi);
    }
    return k;
  }
  if (py::isinstance<py::int_>(target)) {
    const auto t = py::cast<long long>(target);
    if (t < 0 || std::size_t(t) >= dout) throw value_error(cat("target ", t, ": the model has ", dout, " outputs"));
    std::fill(k.begin(), k.end(), std::size_t(t));
    return k;
  }
  return labels_of(target, x.n, dout, "target");
}

/// Exact IG of one input: attributions (data layout), delta = F_k(x) - F_k(x'), the sums asked.
py::dict exact_ig_py(const network& n, py::handle X, py::handle Bl, py::handle target,
                     const std::vector<std::pair<std::string, std::size_t>>& sums_asked,
                     std::optional<std::size_t> max_memory, std::optional<std::size_t> threads, bool progress) {
  n.require_plain("exact_ig");
  return n.visit([&](const auto& net) {
    using T = typename std::decay_t<decltype(net)>::scalar_type;
    const auto x = input_sample<T>(n, X, "exact_ig: x"), b = input_sample<T>(n, Bl, "exact_ig: baseline");
    rows<T> one;
    one.data = x.data(), one.n = 1, one.width = x.size();
    const std::size_t k = targets_of<T>(net, one, target)[0];
    std::vector<riemann_sum> sums;
    for (const auto& [rule, m] : sums_asked) {
      if (m == 0) throw value_error(cat("sums: ", rule, " needs n_steps >= 1"));
      sums.push_back({parse_rule(rule), m});
    }
    line_options lo;
    if (max_memory) lo.max_memory = *max_memory;
    std::optional<progress_bar> bar;
    if (progress) bar.emplace("ig", 1000);
    ig_summary<T> ig = long_call([&] {
      return with_policy(threads, [&](const auto& pol) {
        return exact_ig_stream<T, double>(pol, net, x, b, k, lo, sums, [&](double t, std::span<const T>) {
          poll();
          if (bar) bar->update(std::size_t(1000 * t));
        });
      });
    });
    if (bar && bar->redraws() > 0) bar->finish(cat(ig.pieces, " pieces"));
    py::dict d;
    d["attributions"] = per_input(n, std::move(ig.attributions), 1, false);
    d["delta"] = double(ig.delta);
    d["sum"] = double(ig.sum);
    d["target"] = k;
    d["pieces"] = ig.pieces;
    py::dict rs;
    for (std::size_t q = 0; q < sums.size(); ++q)
      rs[py::make_tuple(sums_asked[q].first, sums_asked[q].second)] = per_input(n, std::move(ig.riemann[q]), 1, false);
    d["riemann"] = rs;
    return d;
  });
}

/// Captum's calling convention: inputs [N, ...], baselines [N, ...] (broadcast by the caller),
/// targets; (attributions [N, ...], delta [N]) with delta = sum(attributions) - (F(x) - F(x')).
py::tuple integrated_gradients_py(const network& n, py::handle X, py::handle Bl, py::handle target, const std::string& method,
                                  std::size_t n_steps, std::optional<std::size_t> max_memory,
                                  std::optional<std::size_t> threads, bool progress) {
  n.require_plain("integrated_gradients");
  const bool exact = method == "exact";
  const riemann_rule rule = exact ? riemann_rule::left : parse_rule(method);
  if (!exact && n_steps < (rule == riemann_rule::trapezoid ? 2u : 1u))
    throw value_error(cat("n_steps ", n_steps, ": expected at least ", rule == riemann_rule::trapezoid ? 2 : 1, " samples"));
  return n.visit([&](const auto& net) {
    using T = typename std::decay_t<decltype(net)>::scalar_type;
    const rows<T> x = input_rows<T>(n, X, "integrated_gradients: inputs"), b = input_rows<T>(n, Bl, "integrated_gradients: baselines");
    if (b.n != x.n) throw shape_error(cat("integrated_gradients: ", x.n, " inputs but ", b.n, " baselines"));
    const std::vector<std::size_t> ks = targets_of<T>(net, x, target);
    const std::size_t di = x.width, N = x.n;
    std::vector<T> attr(N * di);
    std::vector<double> delta(N);
    line_options lo;
    if (max_memory) lo.max_memory = *max_memory;
    std::optional<progress_bar> bar;
    if (progress) bar.emplace("integrated_gradients", N);
    long_call([&] {
      with_policy(threads, [&](const auto& pol) {
        for (std::size_t i = 0; i < N; ++i) {
          poll();
          const std::vector<T> xi = x.row(i), bi = b.row(i);
          std::vector<T> a;
          double change = 0;  // F_k(x) - F_k(x')
          if (exact) {
            auto ig = exact_ig_stream<T, double>(pol, net, xi, bi, ks[i], lo, {}, [&](double, std::span<const T>) { poll(); });
            a = std::move(ig.attributions);
            change = double(ig.delta);
          } else {
            // riemann_ig's sum with this call's policy: the network's gradients at the samples
            // riemann_trapezoid: n_steps samples, Captum's count (n_steps - 1 partitions, the
            // trapezoid rule's own weights: Captum's weights sum to (n_steps - 1) / n_steps)
            std::vector<double> t, w;
            detail::riemann_samples(rule == riemann_rule::trapezoid ? n_steps - 1 : n_steps, rule, t, w);
            std::vector<T> P(t.size() * di);
            for (std::size_t q = 0; q < t.size(); ++q)
              for (std::size_t e = 0; e < di; ++e) P[q * di + e] = bi[e] + T(t[q]) * (xi[e] - bi[e]);
            const auto g = input_gradients<T>(pol, net, P, t.size(), ks[i]);
            a.assign(di, T(0));
            for (std::size_t q = 0; q < t.size(); ++q)
              for (std::size_t e = 0; e < di; ++e) a[e] += T(w[q]) * g[q * di + e];
            for (std::size_t e = 0; e < di; ++e) a[e] *= xi[e] - bi[e];
            std::vector<T> ends(xi);
            ends.insert(ends.end(), bi.begin(), bi.end());
            const xt::xarray<T> y = detail::forward_rows(pol, net, std::span<const T>(ends), 2);
            const std::size_t dout = net.output_shape().size();
            change = double(y.data()[ks[i]]) - double(y.data()[dout + ks[i]]);
          }
          double s = 0;
          for (const T v : a) s += double(v);
          delta[i] = s - change;
          std::copy(a.begin(), a.end(), attr.begin() + std::ptrdiff_t(i * di));
          if (bar) bar->update(i + 1);
        }
      });
    });
    if (bar && bar->redraws() > 0) bar->finish();
    return py::make_tuple(per_input(n, std::move(attr), N, true), to_numpy(std::move(delta)));
  });
}

}  // namespace

void register_exactline(py::module_& m) {
  py::class_<line_args>(m, "_LineArgs")
      .def(py::init<>())
      .def_readwrite("validate", &line_args::validate)
      .def_readwrite("validate_tol", &line_args::validate_tol)
      .def_readwrite("merge_tol", &line_args::merge_tol)
      .def_readwrite("max_pieces", &line_args::max_pieces)
      .def_readwrite("max_memory", &line_args::max_memory)
      .def_readwrite("classes", &line_args::classes)
      .def_readwrite("threads", &line_args::threads)
      .def_readwrite("progress", &line_args::progress)
      .def_readwrite("keep_going", &line_args::keep_going);
  m.def("exact_line", &exact_line_py, py::arg("net"), py::arg("a"), py::arg("b"), py::arg("args"));
  m.def("exact_lines", &exact_lines_py, py::arg("net"), py::arg("starts"), py::arg("ends"), py::arg("args"));
  m.def("exact_plane", &exact_plane_py, py::arg("net"), py::arg("origin"), py::arg("u"), py::arg("v"), py::arg("polygon"),
        py::arg("max_polygons"), py::arg("classes"));
  m.def("exact_ig", &exact_ig_py, py::arg("net"), py::arg("x"), py::arg("baseline"), py::arg("target"), py::arg("sums"),
        py::arg("max_memory"), py::arg("threads"), py::arg("progress"));
  m.def("integrated_gradients", &integrated_gradients_py, py::arg("net"), py::arg("inputs"), py::arg("baselines"),
        py::arg("target"), py::arg("method"), py::arg("n_steps"), py::arg("max_memory"), py::arg("threads"),
        py::arg("progress"));
}

}  // namespace nnlens_python
