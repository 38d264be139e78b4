// nnlens/exactline/line_checks.hpp -- what every ExactLine entry point checks and converts, and
// the validation of a result (exactline/line.hpp, plane.hpp, ig.hpp, the thrust backend).
//
//   detail::check_segment(P, Q, in)        shape_error / value_error for a bad segment
//   detail::line_validator<S, R, Net> v(net, P, Q, out, opt, stats)   the same on rows as they come:
//                                          v.row(t, y) ... v.finish()
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
#include <span>
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

/// --validate on rows as they come (in order of t, each once): every piece between two rows is
/// checked at 1/4, 1/2 and 3/4 of its length against the network, in passes of up to 1024 pieces
/// (fewer where their points and the forward pass's workspace would pass max_memory: a CNN's
/// activations at 3 points per piece).  Holds the rows of one pass, never the whole line.
template <class S, class R, class Net>
class line_validator {
 public:
  line_validator(const Net& net, std::span<const S> P, std::span<const S> Q, std::size_t out, const line_options& opt,
                 line_stats& st)
      : net_(net), P_(P), Q_(Q), dout_(out), opt_(opt), st_(st) {
    const std::size_t di = P.size();
    if (opt.max_memory > 0) {
      const std::size_t per_piece = 3 * (di + dout_) + dout_ + inference_workspace_size(net, 3);
      chunk_ = std::clamp<std::size_t>(opt.max_memory / sizeof(S) / std::max<std::size_t>(per_piece, 1), 1, 1024);
    }
  }
  /// The output y (dout values) at ratio t: closes the piece from the row before.
  void row(const R& t, const S* y) {
    t_.push_back(t);
    y_.insert(y_.end(), y, y + dout_);
    if (t_.size() > chunk_) pass();
  }
  /// The pieces still held (call once, after the last row).
  void finish() {
    if (t_.size() > 1) pass();
  }

 private:
  void pass() {
    const std::size_t k = t_.size() - 1, di = P_.size(), nb = 3 * k;
    const R alphas[3] = {R(1) / R(4), R(1) / R(2), R(3) / R(4)};
    x_.resize(nb * di);
    f_.resize(nb * dout_);
    for (std::size_t j = 0; j < k; ++j)
      for (std::size_t q = 0; q < 3; ++q) {
        const S tt = S(t_[j] + alphas[q] * (t_[j + 1] - t_[j]));
        S* x = x_.data() + (3 * j + q) * di;
        for (std::size_t i = 0; i < di; ++i) x[i] = P_[i] + tt * (Q_[i] - P_[i]);
      }
    const std::size_t need = inference_workspace_size(net_, nb);
    if (ws_.size() < need) ws_.resize(need);
    forward_into(net_, nb, x_.data(), f_.data(), std::span<S>(ws_));
    for (std::size_t j = 0; j < k; ++j) {
      bool bad = false;
      const S* y0 = y_.data() + j * dout_;
      const S* y1 = y0 + dout_;
      for (std::size_t q = 0; q < 3; ++q) {
        const S a = S(alphas[q]);
        const S* f = f_.data() + (3 * j + q) * dout_;
        for (std::size_t o = 0; o < dout_; ++o) {
          const S interp = y0[o] + a * (y1[o] - y0[o]);
          const S diff = f[o] > interp ? f[o] - interp : interp - f[o];
          const S mag = f[o] > S(0) ? f[o] : S(0) - f[o];
          const double dev = double(diff / (S(1) + mag));
          st_.max_deviation = std::max(st_.max_deviation, dev);
          if (dev > opt_.validate_tol) bad = true;
        }
      }
      ++st_.validated_pieces;
      if (bad) ++st_.violations;
    }
    // the last row starts the next pass's first piece
    t_.erase(t_.begin(), t_.end() - 1);
    y_.erase(y_.begin(), y_.end() - std::ptrdiff_t(dout_));
  }

  const Net& net_;
  std::span<const S> P_, Q_;
  std::size_t dout_;
  const line_options& opt_;
  line_stats& st_;
  std::size_t chunk_ = 1024;
  std::vector<R> t_;
  std::vector<S> y_, x_, f_, ws_;
};

/// Every piece of r checked against the network (line_validator over its rows).
template <class S, class R, class Net>
void validate_line(const Net& net, line_result<S, R>& r, const line_options& opt) {
  line_validator<S, R, Net> v(net, r.from, r.to, r.out_size(), opt, r.stats);
  for (std::size_t j = 0; j < r.t.size(); ++j) v.row(r.t[j], r.output(j).data());
  v.finish();
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
