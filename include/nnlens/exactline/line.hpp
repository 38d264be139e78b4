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
// naming the layer), limit_error (more than max_pieces pieces; with max_memory = 0, more than
// max_bytes of values at a layer; with max_memory, a single piece that alone needs more).
// Memory: with line_options::max_memory (default 1 GiB) the points in flight stay within it: a
// layer that would pass it runs on sub-segments one after the other (exactline/bounded.hpp), with
// the same points and values as one run where the split falls on points of the partition.
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
#include "nnlens/exactline/bounded.hpp"
#include "nnlens/exactline/buffer_pool.hpp"
#include "nnlens/exactline/engine.hpp"
#include "nnlens/exactline/line_checks.hpp"
#include "nnlens/exactline/line_result.hpp"
#include "nnlens/exactline/walk.hpp"
#include "nnlens/kernels/envelope.hpp"
#include "nnlens/network/cast.hpp"
#include "nnlens/network/forward.hpp"
#include "nnlens/network/validate.hpp"
#include "nnlens/network/visit.hpp"

namespace nnlens {


namespace detail {

/// exact_lines under Policy: whether `segments` segments run one after the other, each parallel
/// over its points (execution::par with fewer segments than the pool's threads), rather than at once.
template <class Policy>
bool lines_within(std::size_t segments) {
  if constexpr (execution::is_host_parallel_policy_v<Policy>)
    return segments < default_pool().size();
  else
    return false;
}
/// The budget of each segment: the whole of it, or a share per thread when segments run at once.
template <class Policy>
line_options share_budget(const line_options& opt, bool within) {
  line_options each = opt;
  if constexpr (execution::is_host_parallel_policy_v<Policy>)
    if (!within && each.max_memory > 0) each.max_memory = std::max<std::size_t>(1, each.max_memory / default_pool().size());
  return each;
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

/// The rows of the line P -> Q on a network already in scalar S whose endpoints passed
/// check_segment: emit(t, y, width) for every row, in order of t, each once.  With max_memory the
/// bounded driver holds about that much whatever the number of pieces; without, the rows come
/// after the whole line is in memory.
template <class S, class R, class Net, class Emit>
void line_rows(const Net& net, std::span<const S> P, std::span<const S> Q, const line_options& opt, bool parallel,
               line_stats& st, Emit&& emit) {
  polyline<S, R> pl;
  pl.t = {R(0), R(1)};
  pl.v.assign(P.begin(), P.end());
  pl.v.insert(pl.v.end(), Q.begin(), Q.end());
  pl.dim = P.size();
  if (opt.max_memory > 0) {  // bounded: sub-segments depth first (exactline/bounded.hpp)
    bounded_line<S, R, Net> b(net, opt, parallel, P, Q, st, std::forward<Emit>(emit));
    b.run(pl);
  } else {
    line_engine<S, R> eng(opt, parallel, P, Q, st);
    eng.run(net, pl);
    for (std::size_t i = 0; i < pl.t.size(); ++i) emit(pl.t[i], pl.v.data() + i * pl.dim, pl.dim);
    buffer_pool<S>::local().give(std::move(pl.v));
  }
}

/// One line on a network already in scalar S, whose endpoints passed check_segment (exact_line
/// checks its segment, lines_impl each of exact_lines').
template <class S, class R, class Net>
line_result<S, R> line_impl(const Net& net, std::vector<S> P, std::vector<S> Q, const line_options& opt, bool parallel) {
  line_result<S, R> r;
  r.input_shape = input_shape_of(net);
  r.output_shape = output_shape_of(net);
  r.from = std::move(P);
  r.to = std::move(Q);
  line_rows<S, R>(net, std::span<const S>(r.from), std::span<const S>(r.to), opt, parallel, r.stats,
                  [&](const R& t, const S* y, std::size_t d) {
                    r.t.push_back(t);
                    r.values.insert(r.values.end(), y, y + d);
                  });
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
/// With execution::par the segments run in parallel (each one sequentially), or, when there are
/// fewer segments than threads, one after the other with each parallel over its points.  An error in a
/// segment is rethrown (same error type) naming it, after every other segment has finished; with opt.keep_going it
/// is recorded in that segment's result (`error`) instead.
template <class S = double, class R = double, class Policy, class Net>
  requires execution::is_execution_policy_v<Policy>
std::vector<line_result<S, R>> exact_lines(const Policy&, const Net& net, const std::vector<std::vector<S>>& A,
                                           const std::vector<std::vector<S>>& B, const line_options& opt = {}) {
  return detail::lines_impl<S, R>(net, A, B, opt, [&](const auto& n, const std::vector<std::size_t>& ok, auto& res, auto& eps) {
    // execution::par: fewer segments than threads run one after the other, each on all the threads
    // (parallel over its points); more run at once, one per thread, sharing the budget
    const bool within = detail::lines_within<Policy>(ok.size());
    const line_options each = detail::share_budget<Policy>(opt, within);
    auto one = [&](std::size_t j) {
      try {
        res[ok[j]] = detail::line_impl<S, R>(n, A[ok[j]], B[ok[j]], each, within);
      } catch (const error&) {
        eps[ok[j]] = std::current_exception();
      }
    };
    if constexpr (execution::is_host_parallel_policy_v<Policy>)
      if (!within) {
        detail::default_pool().parallel_for(ok.size(), one);
        return;
      }
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
