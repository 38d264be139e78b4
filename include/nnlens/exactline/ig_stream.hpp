// nnlens/exactline/ig_stream.hpp -- exact integrated gradients without keeping the line.
//
//   auto ig = exact_ig_stream([execution::par,] net, x, baseline, k, opts, sums, on_row);
//   ig.attributions, ig.delta, ig.sum, ig.pieces, ig.stats     as exact_ig's (bit for bit)
//   ig.riemann[q]      the Riemann sum sums[q] = {rule, m} from the pieces' gradients, as
//                      riemann_from_pieces(exact_ig(...), m, rule) gives it (bit for bit)
//   on_row(t, y)       optional: each row of the line as it is completed (progress, a file)
//
// The line baseline -> x streams (exactline/stream.hpp); each completed piece's midpoint waits in a
// batch, and a full batch runs one forward_trace + backward for the gradients of output k, which
// are added into the attribution (weight t_{j+1} - t_j) and into each Riemann sum (the weights of
// its samples that fall in the piece, assigned as riemann_from_pieces assigns them) and dropped.
// Memory: line_options::max_memory, half for the line and half for a batch of gradients (at most
// 256 points with their forward_trace buffers), whatever the number of pieces; exact_ig keeps a
// [pieces x in] matrix.  With execution::par the batch's points are split over the threads.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <utility>
#include <vector>

#include "nnlens/exactline/gradient.hpp"
#include "nnlens/exactline/ig.hpp"
#include "nnlens/exactline/stream.hpp"
#include "nnlens/network/trace.hpp"

namespace nnlens {

/// A Riemann sum to accumulate beside exact IG: its rule and partitions.
struct riemann_sum {
  riemann_rule rule = riemann_rule::left;
  std::size_t m = 32;
};

template <class S = double, class R = double>
struct ig_summary {
  std::vector<S> attributions;         // exact IG, one per input element
  S delta{}, sum{};                    // F_k(x) - F_k(x'), and the attributions' sum
  std::size_t output_index = 0, pieces = 0;
  line_stats stats;                    // the line's
  std::vector<riemann_sum> sums;       // what riemann holds
  std::vector<std::vector<S>> riemann; // per sum: the attributions it gives
};

namespace detail {

/// The pieces of a streamed line, their gradients in batches, the sums (see the header comment).
template <class S, class R, class Net>
class ig_accumulator {
 public:
  ig_accumulator(const Net& net, std::span<const S> b, std::span<const S> x, std::size_t k,
                 const line_options& opt, std::vector<riemann_sum> sums, bool parallel)
      : net_(net), b_(b), x_(x), k_(k), par_(parallel), sums_(std::move(sums)) {
    const std::size_t di = b.size();
    attr_.assign(di, S(0));
    // a batch of points and gradients, with one forward_trace's buffers per point, in the half of
    // max_memory that the line leaves (exact_ig_stream gives the line the other half)
    trace<S> probe;
    probe.prepare(net, 1);
    const std::size_t per = 2 * di + probe.elements();
    chunk_ = opt.max_memory > 0
                 ? std::clamp<std::size_t>(opt.max_memory / 2 / sizeof(S) / std::max<std::size_t>(per, 1), 1, 256)
                 : 256;
    for (const auto& s : sums_) {
      if (s.m == 0) throw value_error("exact_ig_stream: a Riemann sum needs m >= 1 partitions");
      samples_.emplace_back();
      weights_.emplace_back();
      riemann_samples(s.m, s.rule, samples_.back(), weights_.back());
    }
    next_.assign(sums_.size(), 0);
    acc_.assign(sums_.size(), std::vector<S>(di, S(0)));
  }

  void row(const R& t, const S* y) {
    if (rows_++ == 0) {
      y0_ = y[k_];
    } else {
      if (t0_.size() == chunk_) run_batch();
      t0_.push_back(prev_t_);
      t1_.push_back(t);
      for (std::size_t q = 0; q < sums_.size(); ++q) {  // the samples before t go to this piece
        S w = S(0);
        const auto& ts = samples_[q];
        while (next_[q] < ts.size() && ts[next_[q]] < t) w += S(weights_[q][next_[q]++]);
        piece_w_.push_back(w);
      }
    }
    prev_t_ = t;
    y1_ = y[k_];
  }

  ig_summary<S, R> finish(line_stats st) {
    // the samples at or after the last break belong to the last piece (riemann_from_pieces)
    if (!t0_.empty())
      for (std::size_t q = 0; q < sums_.size(); ++q) {
        S& w = piece_w_[(t0_.size() - 1) * sums_.size() + q];
        const auto& ts = samples_[q];
        while (next_[q] < ts.size()) w += S(weights_[q][next_[q]++]);
      }
    run_batch();
    ig_summary<S, R> r;
    r.output_index = k_;
    r.pieces = rows_ > 0 ? rows_ - 1 : 0;
    r.stats = std::move(st);
    r.delta = y1_ - y0_;
    const std::size_t di = b_.size();
    r.sum = S(0);
    for (std::size_t i = 0; i < di; ++i) {
      attr_[i] *= x_[i] - b_[i];
      r.sum += attr_[i];
    }
    r.attributions = std::move(attr_);
    for (auto& a : acc_)
      for (std::size_t i = 0; i < di; ++i) a[i] *= x_[i] - b_[i];
    r.sums = sums_;
    r.riemann = std::move(acc_);
    return r;
  }

 private:
  void run_batch() {
    const std::size_t n = t0_.size(), di = b_.size(), ns = sums_.size();
    if (n == 0) return;
    X_.resize(n * di);
    for (std::size_t j = 0; j < n; ++j) {  // line_result::point((t_j + t_{j+1}) / 2)
      const S tt = S((t0_[j] + t1_[j]) / R(2));
      S* p = X_.data() + j * di;
      for (std::size_t i = 0; i < di; ++i) p[i] = b_[i] + tt * (x_[i] - b_[i]);
    }
    const std::vector<S> g =
        par_ ? input_gradients<S>(execution::par, net_, X_, n, k_) : input_gradients<S>(execution::seq, net_, X_, n, k_);
    for (std::size_t j = 0; j < n; ++j) {
      const S w = S(t1_[j] - t0_[j]);
      const S* gj = g.data() + j * di;
      for (std::size_t i = 0; i < di; ++i) attr_[i] += w * gj[i];
      for (std::size_t q = 0; q < ns; ++q) {
        const S wq = piece_w_[j * ns + q];
        if (wq == S(0)) continue;
        S* a = acc_[q].data();
        for (std::size_t i = 0; i < di; ++i) a[i] += wq * gj[i];
      }
    }
    t0_.clear();
    t1_.clear();
    piece_w_.clear();
  }

  const Net& net_;
  std::span<const S> b_, x_;
  std::size_t k_;
  bool par_;
  std::vector<riemann_sum> sums_;
  std::size_t chunk_ = 256, rows_ = 0;
  R prev_t_{};
  S y0_{}, y1_{};
  std::vector<R> t0_, t1_;
  std::vector<S> piece_w_, X_, attr_;
  std::vector<std::vector<R>> samples_, weights_;
  std::vector<std::size_t> next_;
  std::vector<std::vector<S>> acc_;
};

struct no_rows {
  template <class R, class Y>
  void operator()(const R&, const Y&) const {}
};

}  // namespace detail

/// Exact IG of output k along baseline -> x, streamed (see the header comment).
template <class S = double, class R = double, class Policy, class Net, class EX, class EB, class OnRow = detail::no_rows>
  requires execution::is_execution_policy_v<Policy>
ig_summary<S, R> exact_ig_stream(const Policy& pol, const Net& net_any, const EX& x, const EB& baseline, std::size_t k,
                                 const line_options& opt = {}, std::vector<riemann_sum> sums = {}, OnRow&& on_row = {}) {
  const auto& net = detail::as_scalar<S>(net_any);
  const std::vector<S> xv = detail::to_values<S>(x), bv = detail::to_values<S>(baseline);
  const std::size_t dout = output_shape_of(net).size();
  if (k >= dout) throw value_error(detail::concat("exact_ig_stream: output index ", k, " >= output size ", dout));
  if (xv.size() != bv.size())
    throw shape_error(detail::concat("exact_ig_stream: x has ", xv.size(), " elements, the baseline ", bv.size()));
  constexpr bool par = execution::is_host_parallel_policy_v<Policy>;
  detail::ig_accumulator<S, R, std::decay_t<decltype(net)>> acc(net, bv, xv, k, opt, std::move(sums), par);
  line_options half = opt;  // the line and the batch of gradients share the budget
  if (half.max_memory > 0) half.max_memory = std::max<std::size_t>(1, half.max_memory / 2);
  auto s = exact_line_stream<S, R>(
      pol, net, bv, xv,
      [&](const R& t, std::span<const S> y) {
        acc.row(t, y.data());
        on_row(t, y);
      },
      half);
  return acc.finish(std::move(s.stats));
}
template <class S = double, class R = double, class Net, class EX, class EB, class OnRow = detail::no_rows>
  requires(!execution::is_execution_policy_v<Net>)
ig_summary<S, R> exact_ig_stream(const Net& net, const EX& x, const EB& baseline, std::size_t k, const line_options& opt = {},
                                 std::vector<riemann_sum> sums = {}, OnRow&& on_row = {}) {
  return execution::with_default_policy(net, [&](const auto& pol) {
    return exact_ig_stream<S, R>(pol, net, x, baseline, k, opt, std::move(sums), on_row);
  });
}

}  // namespace nnlens
