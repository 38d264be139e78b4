// nnlens/exactline/stream.hpp -- ExactLine whose rows go to the caller as they are completed.
//
//   auto s = exact_line_stream([execution::par,] net, P, Q, on_row, opts);
//       on_row(t, y): every row of the partition (the ratio t and the outputs y there, a
//       std::span<const S>), in order of t, each once; nothing of the line is kept
//   s.pieces, s.stats (validate: the checks, done on the rows as they pass), s.input_shape, ...
//   auto v = exact_lines_stream([execution::par,] net, A, B, on_row, opts);
//       on_row(i, t, y) for segment i; with execution::par, segments run at once on the pool's
//       threads, so on_row is called from several threads (each segment's rows in order); fewer
//       segments than threads run one by one, each parallel over its points
//
// With line_options::max_memory (the default) the values in flight stay within about that budget
// whatever the number of pieces (exactline/bounded.hpp), so a segment of 10^7 pieces needs memory
// for its rows only where on_row keeps them.  With max_memory = 0 the rows are handed over after
// the whole line was computed.  The rows are those of exact_line, bit for bit.
// Errors: exact_line's; exact_lines_stream with keep_going records a segment's error in its summary
// (rows already handed over stay handed over), without it rethrows the first failing segment's.
// An nnlens::error thrown by on_row stops its segment the same way.
#pragma once

#include <cstddef>
#include <exception>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "nnlens/core/execution.hpp"
#include "nnlens/core/thread_pool.hpp"
#include "nnlens/exactline/line.hpp"

namespace nnlens {

/// What a streamed line leaves: its shape, statistics and number of pieces.
template <class S = double, class R = double>
struct line_summary {
  shape input_shape{}, output_shape{};
  std::size_t pieces = 0;
  line_stats stats;
  std::string error;  // exact_lines_stream with keep_going: why this segment failed (else empty)
};

namespace detail {
template <class S, class R, class Net, class OnRow>
line_summary<S, R> stream_impl(const Net& net, const std::vector<S>& P, const std::vector<S>& Q, const line_options& opt,
                               bool parallel, OnRow& on_row) {
  line_summary<S, R> s;
  s.input_shape = input_shape_of(net);
  s.output_shape = output_shape_of(net);
  const std::size_t dout = s.output_shape.size();
  std::span<const S> p(P), q(Q);
  std::optional<line_validator<S, R, Net>> v;
  if (opt.validate) v.emplace(net, p, q, dout, opt, s.stats);
  std::size_t rows = 0;
  line_rows<S, R>(net, p, q, opt, parallel, s.stats, [&](const R& t, const S* y, std::size_t d) {
    if (v) v->row(t, y);
    on_row(t, std::span<const S>(y, d));
    ++rows;
  });
  if (v) v->finish();
  s.pieces = rows > 0 ? rows - 1 : 0;
  return s;
}
}  // namespace detail

/// ExactLine on P -> Q with its rows handed to on_row(t, y) as they are completed (see the header
/// comment).
template <class S = double, class R = double, class Policy, class Net, class EP, class EQ, class OnRow>
  requires execution::is_execution_policy_v<Policy>
line_summary<S, R> exact_line_stream(const Policy&, const Net& net, const EP& P, const EQ& Q, OnRow&& on_row,
                                     const line_options& opt = {}) {
  static_assert(detail::require_pwl_network<Net>());
  check_shapes(net);
  const auto& n = detail::as_scalar<S>(net);
  const std::vector<S> p = detail::to_values<S>(P), q = detail::to_values<S>(Q);
  detail::check_segment(p, q, input_shape_of(n));
  return detail::stream_impl<S, R>(n, p, q, opt, execution::is_host_parallel_policy_v<Policy>, on_row);
}
template <class S = double, class R = double, class Net, class EP, class EQ, class OnRow>
  requires(!execution::is_execution_policy_v<Net>)
line_summary<S, R> exact_line_stream(const Net& net, const EP& P, const EQ& Q, OnRow&& on_row,
                                     const line_options& opt = {}) {
  return execution::with_default_policy(net, [&](const auto& pol) { return exact_line_stream<S, R>(pol, net, P, Q, on_row, opt); });
}

/// Many segments, A[i] -> B[i], each streamed: on_row(i, t, y).  With execution::par the segments
/// run at once (each sequentially) and share max_memory, or, fewer than the pool's threads, one
/// after the other, each parallel over its points with the whole budget (as exact_lines).
template <class S = double, class R = double, class Policy, class Net, class OnRow>
  requires execution::is_execution_policy_v<Policy>
std::vector<line_summary<S, R>> exact_lines_stream(const Policy&, const Net& net, const std::vector<std::vector<S>>& A,
                                                   const std::vector<std::vector<S>>& B, OnRow&& on_row,
                                                   const line_options& opt = {}) {
  static_assert(detail::require_pwl_network<Net>());
  check_shapes(net);
  if (A.size() != B.size()) throw shape_error(detail::concat("exact_lines_stream: ", A.size(), " start points but ", B.size(), " end points"));
  const auto& n = detail::as_scalar<S>(net);
  const bool within = detail::lines_within<Policy>(A.size());  // as exact_lines
  const line_options each = detail::share_budget<Policy>(opt, within);
  std::vector<line_summary<S, R>> res(A.size());
  std::vector<std::exception_ptr> eps(A.size());
  auto one = [&](std::size_t i) {
    try {
      detail::check_segment(A[i], B[i], input_shape_of(n));
      auto row = [&](const R& t, std::span<const S> y) { on_row(i, t, y); };
      res[i] = detail::stream_impl<S, R>(n, A[i], B[i], each, within, row);
    } catch (const error&) {
      eps[i] = std::current_exception();
    }
  };
  bool ran = false;
  if constexpr (execution::is_host_parallel_policy_v<Policy>)
    if (!within) detail::default_pool().parallel_for(A.size(), one), ran = true;
  if (!ran)
    for (std::size_t i = 0; i < A.size(); ++i) one(i);
  for (std::size_t i = 0; i < res.size(); ++i) {
    if (!eps[i]) continue;
    if (!opt.keep_going) detail::rethrow_prefixed(eps[i], detail::concat("exact_lines_stream: segment ", i, ": "));
    try {
      std::rethrow_exception(eps[i]);
    } catch (const error& e) {
      res[i].error = e.what();
      res[i].input_shape = input_shape_of(n);
      res[i].output_shape = output_shape_of(n);
    }
  }
  return res;
}
template <class S = double, class R = double, class Net, class OnRow>
  requires(!execution::is_execution_policy_v<Net>)
std::vector<line_summary<S, R>> exact_lines_stream(const Net& net, const std::vector<std::vector<S>>& A,
                                                   const std::vector<std::vector<S>>& B, OnRow&& on_row,
                                                   const line_options& opt = {}) {
  return execution::with_default_policy(net, [&](const auto& pol) { return exact_lines_stream<S, R>(pol, net, A, B, on_row, opt); });
}

}  // namespace nnlens
