// nnlens/exactline/line_checks.hpp -- what every ExactLine entry point checks and converts, and
// the validation of a result (exactline/line.hpp, plane.hpp, ig.hpp, the thrust backend).
//
//   detail::check_segment(P, Q, in)        shape_error / value_error for a bad segment
//   detail::validate_line(net, r, opt)     every piece checked at 1/4, 1/2, 3/4 against the network
//                                          (batched: 3 points per piece, 1024 pieces per pass)
//   detail::settle_segments(res, eps, opt) exact_lines' errors after every segment ran
//   detail::rethrow_prefixed(e, prefix)    the same error type, its message prefixed
//   detail::to_values<S>(range), detail::as_scalar<S>(net)   conversions
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <exception>
#include <string>
#include <type_traits>
#include <vector>

#include "nnlens/core/error.hpp"
#include "nnlens/exactline/line_result.hpp"
#include "nnlens/network/cast.hpp"
#include "nnlens/network/forward.hpp"

namespace nnlens::detail {

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
  // 1024 pieces per pass, fewer where their points and the forward pass's workspace would pass
  // max_memory (a CNN's activations at 3 points per piece)
  std::size_t chunk = 1024;
  if (opt.max_memory > 0) {
    const std::size_t per_piece = 3 * (di + dout) + inference_workspace_size(net, 3);
    chunk = std::clamp<std::size_t>(opt.max_memory / sizeof(S) / std::max<std::size_t>(per_piece, 1), 1, 1024);
  }
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

}  // namespace nnlens::detail
