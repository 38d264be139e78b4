// nnlens/exactline/line.hpp -- ExactLine: the exact linear restriction of a network to a segment.
//
//   auto r = exact_line(net, P, Q);              // values in double, ratios in double
//   auto r = exact_line<float>(net, P, Q);       // values in float (ratios stay double)
//   auto r = exact_line(execution::par, net, P, Q, opts);   // parallel over pieces
//   r.t          0 = t_0 < t_1 < ... < t_k = 1: on [t_j, t_{j+1}] the network is affine in t
//   r.output(j)  the network output at P + t_j (Q - P)          (k + 1 rows)
//   r.eval(t)    the output anywhere on the segment (exact: interpolation inside its piece)
//   auto v = exact_lines(net, A, B, opts);       // A, B: [n, in...]; segment i = A[i] -> B[i],
//                                                // parallel over segments (execution::par)
//   auto p = exact_path(net, {X0, X1, X2, ...})  // a polyline: the concatenated partitions
//
// Algorithm (docs/specs/exactline.md#21-composition-layer-by-layer): keep the ratios t and the values V at those ratios before
// the next layer.  At each layer, ask its pwl_rule (core/traits.hpp) where each piece must split,
// insert those points with values interpolated from the piece's ends (exact: everything before is
// affine on the piece) or, with `reanchor`, recomputed by running the prefix of the network, then
// run the layer's forward pass on all points at once.  Affine layers only run forward; a composite
// (Residual) runs ExactLine on each branch and takes the union; a ReLU (or max(x, c)) next to a
// MaxPool is fused into one rule, the envelope walk with the constant c as an extra candidate,
// which gives exactly the points where the composed function changes piece (option fuse_max_pool).
//
// Scalars: S (values; the network is converted with network_cast<S> when its weights differ) and
// R (ratios, computed in R from S values and never narrowed).  With an exact rational type for
// both (boost::multiprecision::cpp_rational) every result is exact.
// Errors: shape_error (endpoint sizes), value_error (NaN/Inf endpoint, P == Q), logic_error (a
// layer that is not piecewise-linear in a DynamicNetwork; for a Sequential it is a compile error
// naming the layer), limit_error (more than max_pieces pieces, or more than max_bytes of values).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "nnlens/core/composite.hpp"
#include "nnlens/core/error.hpp"
#include "nnlens/core/execution.hpp"
#include "nnlens/core/thread_pool.hpp"
#include "nnlens/exactline/buffer_pool.hpp"
#include "nnlens/exactline/line_result.hpp"
#include "nnlens/exactline/walk.hpp"
#include "nnlens/kernels/envelope.hpp"
#include "nnlens/network/cast.hpp"
#include "nnlens/network/forward.hpp"
#include "nnlens/network/validate.hpp"
#include "nnlens/network/visit.hpp"

namespace nnlens {

namespace detail {

/// The points of a line before (or after) some layer: ratios and the values there.
template <class S, class R>
struct polyline {
  std::vector<R> t;
  value_buffer<S> v;  // t.size() x dim
  std::size_t dim = 0;
};

template <class S, class R>
class line_engine {
 public:
  static constexpr std::string_view name = "exact_line";
  line_engine(const line_options& o, bool parallel, std::span<const S> P, std::span<const S> Q, line_stats& st)
      : opt_(o), par_(parallel), P_(P), Q_(Q), stats_(st) {}

  /// The whole network (exactline/walk.hpp's walk, shared by every engine).
  template <class Net>
  void run(const Net& net, polyline<S, R>& pl) {
    pl_ = &pl;
    line_walk(*this, net, opt_.fuse_max_pool);
  }

  // The walk's steps (exactline/walk.hpp) on the current points.
  void layer_done() { stats_.points.push_back(pl_->t.size()); }
  template <class L>
  void refine_knots(const L& l, shape in, const layer_site& at) {
    const auto ks = pwl_rule<L>::knots(l);
    const std::vector<double> kv(ks.begin(), ks.end());
    const std::size_t n = in.size();
    if (!kv.empty()) refine([&](const S* a, const S* b, std::vector<R>& o) { exactline::knot_breaks<R>(kv, a, b, n, o); }, at);
  }
  template <class L>
  void refine_window(const L& l, shape in, shape, std::optional<double> c, const layer_site& at) {
    const std::optional<S> floor = c ? std::optional<S>(S(*c)) : std::nullopt;
    refine([&](const S* a, const S* b, std::vector<R>& o) { pwl_rule<L>::breaks(l, in, a, b, floor, o); }, at);
  }
  template <class L>
  void push_prefix(const L& l, shape in, shape out) {
    if (!opt_.reanchor) return;
    prefix_.emplace_back(
        [&l, in, out](std::size_t n, const S* x, S* y) {
          auto& scratch = layer_scratch<S>();
          const std::size_t need = layer_traits<L>::scratch_size(&l, in, out, n);
          if (scratch.size() < need) scratch.resize(need);
          layer_traits<L>::forward(l, forward_args<S>{in, out, n, x, y, nullptr, scratch.data()});
        },
        out.size());
  }

  /// Runs the layer's forward pass on every point (and keeps it for reanchor).
  template <class L>
  void apply(const L& l, shape in, shape out) {
    auto& pl = *pl_;
    const std::size_t n = pl.t.size(), di = in.size(), dout = out.size();
    auto& bufs = buffer_pool<S>::local();
    value_buffer<S> y = bufs.take(n * dout);
    auto run = [&](std::size_t b0, std::size_t b1) {
      auto& scratch = layer_scratch<S>();
      const std::size_t need = layer_traits<L>::scratch_size(&l, in, out, b1 - b0);
      if (scratch.size() < need) scratch.resize(need);
      layer_traits<L>::forward(l, forward_args<S>{in, out, b1 - b0, pl.v.data() + b0 * di, y.data() + b0 * dout, nullptr,
                                                  scratch.data()});
    };
    const std::size_t work = n * std::max(di, dout);
    if (par_ && n >= 64 && work >= (1u << 16)) {
      auto& pool = detail::default_pool();
      const std::size_t chunks = std::min(pool.size() * 4, n / 16);
      pool.parallel_for(chunks, [&](std::size_t c) { run(n * c / chunks, n * (c + 1) / chunks); });
    } else {
      run(0, n);
    }
    bufs.give(std::move(pl.v));
    pl.v = std::move(y);
    pl.dim = dout;
    push_prefix(l, in, out);
  }

  /// Inserts the breaks propose(a, b, out) gives for every piece.
  template <class Propose>
  void refine(Propose&& propose, const layer_site& at) {
    auto& pl = *pl_;
    const std::size_t n = pl.t.size(), d = pl.dim;
    if (n < 2) return;
    // 1. proposals per piece (local ratios in (0,1), sorted, unique)
    std::vector<R> s;
    auto propose_range = [&](std::size_t j0, std::size_t j1, std::vector<R>& out, std::vector<std::size_t>& cnt) {
      for (std::size_t j = j0; j < j1; ++j) {
        const std::size_t start = out.size();
        propose(pl.v.data() + j * d, pl.v.data() + (j + 1) * d, out);
        auto first = out.begin() + std::ptrdiff_t(start);
        auto last = std::remove_if(first, out.end(), [](const R& x) { return !(x > R(0) && x < R(1)); });
        exactline::sort_small(out.data() + start, std::size_t(last - first));
        last = std::unique(first, last);
        out.erase(last, out.end());
        cnt[j] = out.size() - start;
      }
    };
    std::vector<std::size_t> cnt(n, 0);
    if (par_ && n >= 64 && n * d >= (1u << 15)) {
      auto& pool = detail::default_pool();
      const std::size_t chunks = std::min(pool.size() * 4, (n - 1) / 16 + 1);
      std::vector<std::vector<R>> parts(chunks);
      pool.parallel_for(chunks, [&](std::size_t c) {
        propose_range((n - 1) * c / chunks, (n - 1) * (c + 1) / chunks, parts[c], cnt);
      });
      for (auto& p : parts) s.insert(s.end(), p.begin(), p.end());
    } else {
      propose_range(0, n - 1, s, cnt);
    }
    if (s.empty()) return;
    // 2. global ratios; merge what is within merge_tol (or coincides after rounding)
    std::vector<R> tn;
    std::vector<std::size_t> src;  // for a new point: piece index; old points: npos
    std::vector<R> loc;            // local ratio of a new point
    tn.reserve(n + s.size());
    constexpr std::size_t old = std::size_t(-1);
    const R tol = R(opt_.merge_tol);
    std::size_t k = 0;
    for (std::size_t j = 0; j < n; ++j) {
      tn.push_back(pl.t[j]);
      src.push_back(old);
      loc.push_back(R(0));
      if (j + 1 == n) break;
      stats_.merged += exactline::merge_piece(pl.t[j], pl.t[j + 1], s.data() + k, cnt[j], tol, [&](std::size_t e, R tt) {
        tn.push_back(tt);
        src.push_back(j);
        loc.push_back(s[k + e]);
      });
      k += cnt[j];
    }
    const std::size_t m = tn.size();
    check_caps(m, d, at);
    // 3. values at the new points: interpolated (exact) or recomputed from the input
    auto& bufs = buffer_pool<S>::local();
    value_buffer<S> v = bufs.take(m * d);
    std::vector<std::size_t> fresh;
    for (std::size_t i = 0, j = 0; i < m; ++i) {
      S* dst = v.data() + i * d;
      if (src[i] == old) {
        std::copy_n(pl.v.data() + j * d, d, dst);
        ++j;
      } else {
        const S a = S(loc[i]);
        const S* va = pl.v.data() + src[i] * d;
        const S* vb = va + d;
        for (std::size_t e = 0; e < d; ++e) dst[e] = va[e] + a * (vb[e] - va[e]);
        if (opt_.reanchor) fresh.push_back(i);
      }
    }
    if (!fresh.empty()) reanchor(fresh, tn, v, d);
    pl.t = std::move(tn);
    bufs.give(std::move(pl.v));
    pl.v = std::move(v);
  }

  void check_caps(std::size_t points, std::size_t d, const layer_site& at) const {
    check_line_caps<S>(points, d, opt_, [&] { return at.str(); });
  }


  /// Values of the points `idx` recomputed from P + t (Q - P) through the layers seen so far.
  void reanchor(const std::vector<std::size_t>& idx, const std::vector<R>& t, value_buffer<S>& v, std::size_t d) {
    const std::size_t n = idx.size(), di = P_.size();
    std::vector<S> cur(n * di), nxt;
    for (std::size_t r = 0; r < n; ++r)
      for (std::size_t e = 0; e < di; ++e) cur[r * di + e] = P_[e] + S(t[idx[r]]) * (Q_[e] - P_[e]);
    for (auto& [f, dout] : prefix_) {
      nxt.assign(n * dout, S(0));
      f(n, cur.data(), nxt.data());
      std::swap(cur, nxt);
    }
    NNLENS_EXPECTS(cur.size() == n * d);
    for (std::size_t r = 0; r < n; ++r) std::copy_n(cur.data() + r * d, d, v.data() + idx[r] * d);
  }

  /// A composite layer: ExactLine on each branch from the same points; union; output = the join
  /// (sum, or the branches one after another for a concat).
  template <class L>
  void composite(const L& l, shape in, shape out, const layer_site& at) {
    auto& pl = *pl_;
    std::vector<polyline<S, R>> outs;
    const std::size_t saved = prefix_.size();
    line_branches(*this, l, in, at, [&](std::size_t, auto&& run) {
      polyline<S, R> c{pl.t, buffer_pool<S>::local().take(pl.v.size()), pl.dim};
      std::copy(pl.v.begin(), pl.v.end(), c.v.begin());
      pl_ = &c;
      run();
      pl_ = &pl;
      outs.push_back(std::move(c));
      prefix_.resize(saved);
    });
    // union of the branches' ratios (each contains pl.t)
    std::vector<R> tu = outs.empty() ? pl.t : outs[0].t;
    for (std::size_t b = 1; b < outs.size(); ++b) {
      std::vector<R> m;
      m.reserve(tu.size() + outs[b].t.size());
      std::set_union(tu.begin(), tu.end(), outs[b].t.begin(), outs[b].t.end(), std::back_inserter(m));
      tu = std::move(m);
    }
    if (opt_.merge_tol > 0 && tu.size() > 2) {  // points of different branches within the tolerance
      std::vector<R> m{tu[0]};
      const R tol = R(opt_.merge_tol);
      for (std::size_t i = 1; i < tu.size(); ++i) {
        const bool is_old = std::binary_search(pl.t.begin(), pl.t.end(), tu[i]);
        if (is_old || (tu[i] - m.back() > tol && (i + 1 == tu.size() || tu.back() - tu[i] > tol)))
          m.push_back(tu[i]);
        else
          ++stats_.merged;
      }
      tu = std::move(m);
    }
    const std::size_t dout = out.size();
    check_caps(tu.size(), std::max(in.size(), dout), at);
    // the join (core/composite.hpp): branch b's values land at offs[b] of each output row
    std::vector<std::size_t> dims;
    for (const auto& c : outs) dims.push_back(c.dim);
    const std::vector<std::size_t> offs = branch_offsets(composite_join_v<L>, dims);
    auto& bufs = buffer_pool<S>::local();
    value_buffer<S> sum = bufs.take(tu.size() * dout);
    std::fill(sum.begin(), sum.end(), S(0));
    for (std::size_t b = 0; b < outs.size(); ++b) {
      const auto& c = outs[b];
      const std::size_t d = c.dim;
      NNLENS_EXPECTS(offs[b] + d <= dout);
      std::size_t j = 0;
      for (std::size_t i = 0; i < tu.size(); ++i) {
        while (j + 1 < c.t.size() && c.t[j + 1] <= tu[i]) ++j;
        exactline::add_at(sum.data() + i * dout + offs[b], c.v.data(), d, tu[i], j, c.t.size(), c.t.data());
      }
    }
    pl.t = std::move(tu);
    for (auto& c : outs) bufs.give(std::move(c.v));
    bufs.give(std::move(pl.v));
    pl.v = std::move(sum);
    pl.dim = dout;
    push_prefix(l, in, out);
  }

 private:
  using prefix_fn = std::function<void(std::size_t, const S*, S*)>;
  const line_options& opt_;
  bool par_;
  std::span<const S> P_, Q_;
  line_stats& stats_;
  polyline<S, R>* pl_ = nullptr;                            // the points the steps work on
  std::vector<std::pair<prefix_fn, std::size_t>> prefix_;  // reanchor: (forward, output size)
};

/// Rethrows e (an nnlens::error) as the same type with `prefix` before its message.
[[noreturn]] inline void rethrow_prefixed(std::exception_ptr e, const std::string& prefix) {
  try {
    std::rethrow_exception(e);
  } catch (const shape_error& x) {
    throw shape_error(prefix + x.what());
  } catch (const value_error& x) {
    throw value_error(prefix + x.what());
  } catch (const limit_error& x) {
    throw limit_error(prefix + x.what());
  } catch (const logic_error& x) {
    throw logic_error(prefix + x.what());
  } catch (const error& x) {
    throw error(prefix + x.what());
  }
  throw logic_error(prefix + "unknown error");
}

template <class S, class E>
std::vector<S> to_values(const E& e) {
  std::vector<S> v;
  v.reserve(std::size(e));
  for (const auto& x : e) v.push_back(S(x));
  return v;
}

/// The network in scalar S: a reference when it already is, else a converted copy.
template <class S, class Net>
decltype(auto) as_scalar(const Net& net) {
  if constexpr (std::is_same_v<network_scalar_t<Net>, S>)
    return (net);
  else
    return network_cast<S>(net);
}

template <class S, class R, class Net>
void validate_line(const Net& net, line_result<S, R>& r, const line_options& opt) {
  const std::size_t k = r.pieces(), di = r.from.size(), dout = r.out_size();
  constexpr std::size_t chunk = 1024;
  const R alphas[3] = {R(1) / R(4), R(1) / R(2), R(3) / R(4)};
  std::vector<S> x, y, ws;
  for (std::size_t j0 = 0; j0 < k; j0 += chunk) {
    const std::size_t j1 = std::min(k, j0 + chunk), nb = 3 * (j1 - j0);
    x.resize(nb * di);
    y.resize(nb * dout);
    for (std::size_t j = j0; j < j1; ++j)
      for (std::size_t q = 0; q < 3; ++q) {
        const R tt = r.t[j] + alphas[q] * (r.t[j + 1] - r.t[j]);
        auto p = r.point(tt);
        std::copy(p.begin(), p.end(), x.begin() + std::ptrdiff_t((3 * (j - j0) + q) * di));
      }
    const std::size_t need = inference_workspace_size(net, nb);
    if (ws.size() < need) ws.resize(need);
    forward_into(net, nb, x.data(), y.data(), std::span<S>(ws));
    for (std::size_t j = j0; j < j1; ++j) {
      bool bad = false;
      for (std::size_t q = 0; q < 3; ++q) {
        const S a = S(alphas[q]);
        auto y0 = r.output(j), y1 = r.output(j + 1);
        const S* f = y.data() + (3 * (j - j0) + q) * dout;
        for (std::size_t o = 0; o < dout; ++o) {
          const S interp = y0[o] + a * (y1[o] - y0[o]);
          const S diff = f[o] > interp ? f[o] - interp : interp - f[o];
          const S mag = f[o] > S(0) ? f[o] : S(0) - f[o];
          const double dev = double(diff / (S(1) + mag));
          r.stats.max_deviation = std::max(r.stats.max_deviation, dev);
          if (dev > opt.validate_tol) bad = true;
        }
      }
      ++r.stats.validated_pieces;
      if (bad) ++r.stats.violations;
    }
  }
}

/// exact_lines' errors (every policy), after every segment ran: without keep_going the lowest-
/// numbered failing segment's error is rethrown, prefixed "exact_lines: segment i: "; with it,
/// each failing segment's message goes to its result's `error`.
template <class S, class R>
void settle_segments(std::vector<line_result<S, R>>& res, const std::vector<std::exception_ptr>& eps, const line_options& opt) {
  for (std::size_t i = 0; i < res.size(); ++i) {
    if (!eps[i]) continue;
    if (!opt.keep_going) rethrow_prefixed(eps[i], concat("exact_lines: segment ", i, ": "));
    try {
      std::rethrow_exception(eps[i]);
    } catch (const error& e) {
      res[i].error = e.what();
    }
  }
}

/// A segment's checks (every policy): shape_error for endpoints of the wrong size, value_error for
/// a non-finite coordinate or P == Q.
template <class S>
void check_segment(const std::vector<S>& P, const std::vector<S>& Q, shape in) {
  if (P.size() != in.size() || Q.size() != in.size())
    throw shape_error(concat("exact_line: the endpoints have ", P.size(), " and ", Q.size(), " elements; the network's input ",
                             in.str(), " has ", in.size()));
  for (std::size_t i = 0; i < P.size(); ++i) {
    if (!std::isfinite(double(P[i]))) throw value_error(concat("exact_line: P[", i, "] is ", double(P[i]), " (not finite)"));
    if (!std::isfinite(double(Q[i]))) throw value_error(concat("exact_line: Q[", i, "] is ", double(Q[i]), " (not finite)"));
  }
  if (P == Q) throw value_error("exact_line: the segment is degenerate (P == Q): there is no line to restrict to");
}

/// exact_lines for every policy: the checks, then run(n, ok, res, eps) with n the network in S and
/// ok the segments whose endpoints passed (each gets res[i] or eps[i]), then settle_segments.
template <class S, class R, class Net, class Run>
std::vector<line_result<S, R>> lines_impl(const Net& net, const std::vector<std::vector<S>>& A, const std::vector<std::vector<S>>& B,
                                          const line_options& opt, Run&& run) {
  static_assert(require_pwl_network<Net>());
  check_shapes(net);
  if (A.size() != B.size()) throw shape_error(concat("exact_lines: ", A.size(), " start points but ", B.size(), " end points"));
  const auto& n = as_scalar<S>(net);
  std::vector<line_result<S, R>> res(A.size());
  std::vector<std::exception_ptr> eps(A.size());
  std::vector<std::size_t> ok;
  for (std::size_t i = 0; i < A.size(); ++i) {
    try {
      check_segment(A[i], B[i], input_shape_of(n));
      ok.push_back(i);
    } catch (const error&) {
      eps[i] = std::current_exception();
    }
  }
  run(n, ok, res, eps);
  settle_segments(res, eps, opt);
  return res;
}

/// One line on a network already in scalar S, whose endpoints passed check_segment (exact_line
/// checks its segment, lines_impl each of exact_lines').
template <class S, class R, class Net>
line_result<S, R> line_impl(const Net& net, std::vector<S> P, std::vector<S> Q, const line_options& opt, bool parallel) {
  const shape in = input_shape_of(net), out = output_shape_of(net);
  line_result<S, R> r;
  r.input_shape = in;
  r.output_shape = out;
  polyline<S, R> pl;
  pl.t = {R(0), R(1)};
  pl.v.assign(P.begin(), P.end());
  pl.v.insert(pl.v.end(), Q.begin(), Q.end());
  pl.dim = P.size();
  r.from = std::move(P);
  r.to = std::move(Q);
  line_engine<S, R> eng(opt, parallel, r.from, r.to, r.stats);
  eng.run(net, pl);
  r.t = std::move(pl.t);
  r.values.assign(pl.v.begin(), pl.v.end());
  buffer_pool<S>::local().give(std::move(pl.v));
  if (opt.validate) validate_line(net, r, opt);
  return r;
}

}  // namespace detail

/// ExactLine on the segment P -> Q (see the header comment).  P and Q: any range of numbers with
/// as many elements as one input sample (std::vector, xtensor containers, spans...).
template <class S = double, class R = double, class Policy, class Net, class EP, class EQ>
  requires execution::is_execution_policy_v<Policy>
line_result<S, R> exact_line(const Policy&, const Net& net, const EP& P, const EQ& Q, const line_options& opt = {}) {
  static_assert(detail::require_pwl_network<Net>());
  check_shapes(net);
  const auto& n = detail::as_scalar<S>(net);
  constexpr bool par = execution::is_host_parallel_policy_v<Policy>;
  std::vector<S> p = detail::to_values<S>(P), q = detail::to_values<S>(Q);
  detail::check_segment(p, q, input_shape_of(n));
  return detail::line_impl<S, R>(n, std::move(p), std::move(q), opt, par);
}
template <class S = double, class R = double, class Net, class EP, class EQ>
  requires(!execution::is_execution_policy_v<Net>)
line_result<S, R> exact_line(const Net& net, const EP& P, const EQ& Q, const line_options& opt = {}) {
  return execution::with_default_policy(net, [&](const auto& pol) { return exact_line<S, R>(pol, net, P, Q, opt); });
}

/// Many segments: A and B are [n, in...] (or any containers of n rows); segment i = A[i] -> B[i].
/// With execution::par the segments run in parallel (each one sequentially).  An error in a
/// segment is rethrown (same error type) naming it, after every other segment has finished; with opt.keep_going it
/// is recorded in that segment's result (`error`) instead.
template <class S = double, class R = double, class Policy, class Net>
  requires execution::is_execution_policy_v<Policy>
std::vector<line_result<S, R>> exact_lines(const Policy&, const Net& net, const std::vector<std::vector<S>>& A,
                                           const std::vector<std::vector<S>>& B, const line_options& opt = {}) {
  return detail::lines_impl<S, R>(net, A, B, opt, [&](const auto& n, const std::vector<std::size_t>& ok, auto& res, auto& eps) {
    auto one = [&](std::size_t j) {
      try {
        res[ok[j]] = detail::line_impl<S, R>(n, A[ok[j]], B[ok[j]], opt, false);
      } catch (const error&) {
        eps[ok[j]] = std::current_exception();
      }
    };
    if constexpr (execution::is_host_parallel_policy_v<Policy>)
      detail::default_pool().parallel_for(ok.size(), one);
    else
      for (std::size_t j = 0; j < ok.size(); ++j) one(j);
  });
}
template <class S = double, class R = double, class Net>
  requires(!execution::is_execution_policy_v<Net>)
std::vector<line_result<S, R>> exact_lines(const Net& net, const std::vector<std::vector<S>>& A,
                                           const std::vector<std::vector<S>>& B, const line_options& opt = {}) {
  return execution::with_default_policy(net, [&](const auto& pol) { return exact_lines<S, R>(pol, net, A, B, opt); });
}

/// ExactLine along a polyline X0 -> X1 -> ... -> Xm: one line_result per segment (exact: the
/// union of the per-segment partitions is the partition of the path).
template <class S = double, class R = double>
struct path_result {
  std::vector<line_result<S, R>> segments;
  std::size_t pieces() const {
    std::size_t k = 0;
    for (const auto& s : segments) k += s.pieces();
    return k;
  }
  double length() const {
    double l = 0;
    for (const auto& s : segments) l += s.length();
    return l;
  }
};
template <class S = double, class R = double, class Policy, class Net>
  requires execution::is_execution_policy_v<Policy>
path_result<S, R> exact_path(const Policy& pol, const Net& net, const std::vector<std::vector<S>>& X,
                             const line_options& opt = {}) {
  if (X.size() < 2) throw value_error(detail::concat("exact_path: a path needs at least 2 points, got ", X.size()));
  std::vector<std::vector<S>> A(X.begin(), X.end() - 1), B(X.begin() + 1, X.end());
  try {
    return {exact_lines<S, R>(pol, net, A, B, opt)};
  } catch (const error&) {
    detail::rethrow_prefixed(std::current_exception(), "exact_path: ");
  }
}
template <class S = double, class R = double, class Net>
  requires(!execution::is_execution_policy_v<Net>)
path_result<S, R> exact_path(const Net& net, const std::vector<std::vector<S>>& X, const line_options& opt = {}) {
  return execution::with_default_policy(net, [&](const auto& pol) { return exact_path<S, R>(pol, net, X, opt); });
}

}  // namespace nnlens
