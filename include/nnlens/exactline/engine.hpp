// nnlens/exactline/engine.hpp -- ExactLine's layer-by-layer engine on the host.
//
//   detail::line_engine<S, R> e(opt, parallel, P, Q, stats);  e.run(net, pl[, first])
//       the points pl (ratios t and the values there) through the network's top-level layers
//       (from `first` on): at each layer the breaks its pwl_rule asks for are inserted, then its
//       forward pass runs on every point at once (exactline/line.hpp's header says how)
//   e.bound(values, reserved, slice, pieces)   a bounded run (exactline/bounded.hpp): at most
//       `values` values at once or line_overflow, the step's input kept until the step completes
//       (restore() gives it back), the first refine keeping only `slice` of its points
#pragma once

#include <algorithm>
#include <cstddef>
#include <functional>
#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "nnlens/core/composite.hpp"
#include "nnlens/core/error.hpp"
#include "nnlens/core/thread_pool.hpp"
#include "nnlens/exactline/buffer_pool.hpp"
#include "nnlens/exactline/line_result.hpp"
#include "nnlens/exactline/walk.hpp"
#include "nnlens/kernels/envelope.hpp"
#include "nnlens/network/forward.hpp"
#include "nnlens/network/visit.hpp"

namespace nnlens::detail {

/// The points of a line before (or after) some layer: ratios and the values there.
template <class S, class R>
struct polyline {
  std::vector<R> t;
  value_buffer<S> v;  // t.size() x dim
  std::size_t dim = 0;
};

/// A bounded run's step that would pass its allowance (exactline/bounded.hpp catches it; the
/// engine's restore() then gives back the step's input).  Not an nnlens::error: it never leaves
/// the bounded driver.
struct line_overflow {
  std::size_t layer = 0;           // the top-level layer the step starts at
  std::size_t values = 0;          // the values the step would have held
  std::size_t refine_points = 0;   // points after the step's first refine; 0: its first action was not one
  std::vector<std::size_t> refine_pos;  // where each input point sits among those points
};
/// Points [lo, hi] of a refine's output (a bounded run's sub-segment).
struct point_slice {
  std::size_t lo = 0, hi = 0;
};

template <class S, class R>
class line_engine {
 public:
  static constexpr std::string_view name = "exact_line";
  line_engine(const line_options& o, bool parallel, std::span<const S> P, std::span<const S> Q, line_stats& st)
      : opt_(o), par_(parallel), P_(P), Q_(Q), stats_(st) {}

  /// The whole network (exactline/walk.hpp's walk, shared by every engine), or its top-level
  /// layers from `first` on.
  template <class Net>
  void run(const Net& net, polyline<S, R>& pl, std::size_t first = 0) {
    pl_ = top_ = &pl;
    line_walk(*this, net, opt_.fuse_max_pool, first);
  }

  // ---- bounded runs (exactline/bounded.hpp) ----
  /// Hold at most `values` values at once (besides `reserved` held elsewhere), else throw
  /// line_overflow; the first step's first refine keeps only `slice`.  pieces: per top-level layer,
  /// the pieces of every completed step are added there (stats_.points is left alone).
  void bound(std::size_t values, std::size_t reserved, std::optional<point_slice> slice, std::vector<std::size_t>* pieces) {
    allowance_ = values, reserved_ = reserved, slice_ = slice, pieces_ = pieces;
  }
  /// After a line_overflow: the top-level points back to the step's input, the prefix to its start.
  void restore() {
    if (holding_) {
      buffer_pool<S>::local().give(std::move(top_->v));
      top_->t = std::move(held_.t);
      top_->v = std::move(held_.v);
      top_->dim = held_.dim;
      holding_ = false;
    }
    prefix_.resize(step_prefix_);
    running_.clear();
    finished_values_ = 0;
    pl_ = top_;
  }
  void step_begin(std::size_t i) {
    if (!allowance_) return;
    step_ = i, step_prefix_ = prefix_.size(), first_action_ = true, step_refined_ = false, step_points_.clear();
  }
  void step_end() {
    if (!allowance_) return;
    if (holding_) buffer_pool<S>::local().give(std::move(held_.v)), held_.t.clear(), holding_ = false;
    slice_.reset();
    for (auto [i, n] : step_points_) {
      if (pieces_->size() <= i) pieces_->resize(i + 1, 0);
      (*pieces_)[i] += n - 1;
    }
  }

  // The walk's steps (exactline/walk.hpp) on the current points.
  void layer_done() {
    if (allowance_)
      step_points_.emplace_back(step_ + step_points_.size(), pl_->t.size());
    else
      stats_.points.push_back(pl_->t.size());
  }
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
    if (allowance_) {
      if (pl_ == top_) first_action_ = false;
      room(n * dout);
    }
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
    retire(pl);
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
    // a bounded run's first refine of a step goes on without breaks too: it may keep a slice
    const bool first = allowance_ && first_action_ && pl_ == top_;
    if (allowance_ && pl_ == top_) first_action_ = false;
    if (s.empty() && !first) return;
    // 2. global ratios; merge what is within merge_tol (or coincides after rounding)
    std::vector<R> tn;
    std::vector<std::size_t> src;  // for a new point: piece index; old points: npos
    std::vector<R> loc;            // local ratio of a new point
    tn.reserve(n + s.size());
    constexpr std::size_t old = std::size_t(-1);
    std::vector<std::size_t> pos, merged_in;  // first: each old point's place in tn, merges per piece
    std::size_t j_start = 0;                  // the old points before a slice
    const R tol = R(opt_.merge_tol);
    std::size_t k = 0;
    for (std::size_t j = 0; j < n; ++j) {
      if (first) pos.push_back(tn.size());
      tn.push_back(pl.t[j]);
      src.push_back(old);
      loc.push_back(R(0));
      if (j + 1 == n) break;
      const std::size_t mj = exactline::merge_piece(pl.t[j], pl.t[j + 1], s.data() + k, cnt[j], tol, [&](std::size_t e, R tt) {
        tn.push_back(tt);
        src.push_back(j);
        loc.push_back(s[k + e]);
      });
      if (first) merged_in.push_back(mj); else stats_.merged += mj;
      k += cnt[j];
    }
    if (first) {  // keep the slice; count the merges of the pieces that start in it
      step_refined_ = true;
      const std::size_t lo = slice_ ? slice_->lo : 0, hi = slice_ ? slice_->hi : tn.size() - 1;
      for (std::size_t j = 0; j + 1 < n; ++j)
        if (pos[j] >= lo && pos[j] < hi) stats_.merged += merged_in[j];
      if (slice_) {
        NNLENS_EXPECTS(lo < hi && hi < tn.size());
        rec_points_ = tn.size(), rec_pos_ = pos;
        j_start = std::size_t(std::count(src.begin(), src.begin() + std::ptrdiff_t(lo), old));
        tn.erase(tn.begin() + std::ptrdiff_t(hi + 1), tn.end()), tn.erase(tn.begin(), tn.begin() + std::ptrdiff_t(lo));
        src.erase(src.begin() + std::ptrdiff_t(hi + 1), src.end()), src.erase(src.begin(), src.begin() + std::ptrdiff_t(lo));
        loc.erase(loc.begin() + std::ptrdiff_t(hi + 1), loc.end()), loc.erase(loc.begin(), loc.begin() + std::ptrdiff_t(lo));
      } else {
        rec_points_ = tn.size(), rec_pos_ = std::move(pos);
      }
    }
    const std::size_t m = tn.size();
    if (allowance_) {
      check_line_pieces(m, opt_, [&] { return at.str(); });  // a part's own pieces (the whole: bounded.hpp)
      room(m * d);
    } else {
      check_caps(m, d, at);
    }
    // 3. values at the new points: interpolated (exact) or recomputed from the input
    auto& bufs = buffer_pool<S>::local();
    value_buffer<S> v = bufs.take(m * d);
    std::vector<std::size_t> fresh;
    for (std::size_t i = 0, j = j_start; i < m; ++i) {
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
    retire(pl);
    pl.t = std::move(tn);
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
    const std::size_t saved = prefix_.size(), finished_before = finished_values_;
    if (allowance_ && pl_ == top_) first_action_ = false;
    line_branches(*this, l, in, at, [&](std::size_t, auto&& run) {
      if (allowance_) room(pl.v.size());
      polyline<S, R> c{pl.t, buffer_pool<S>::local().take(pl.v.size()), pl.dim};
      std::copy(pl.v.begin(), pl.v.end(), c.v.begin());
      pl_ = &c;
      running_.push_back(&c);
      run();
      running_.pop_back();
      pl_ = &pl;
      finished_values_ += c.v.size();
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
        // (the segment's end is t = 1, also in a bounded run's sub-segment)
        if (is_old || (tu[i] - m.back() > tol && (i + 1 == tu.size() || R(1) - tu[i] > tol)))
          m.push_back(tu[i]);
        else
          ++stats_.merged;
      }
      tu = std::move(m);
    }
    const std::size_t dout = out.size();
    if (allowance_) {
      check_line_pieces(tu.size(), opt_, [&] { return at.str(); });
      room(tu.size() * dout);
    } else
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
    retire(pl);
    pl.t = std::move(tu);
    for (auto& c : outs) bufs.give(std::move(c.v));
    finished_values_ = finished_before;
    pl.v = std::move(sum);
    pl.dim = dout;
    push_prefix(l, in, out);
  }

 private:
  /// pl's values are about to be replaced: the top-level points' first replacement in a bounded
  /// step is kept (restore()), every other goes back to the pool.
  void retire(polyline<S, R>& pl) {
    if (allowance_ && &pl == top_ && !holding_) {
      held_.t = pl.t, held_.v = std::move(pl.v), held_.dim = pl.dim, holding_ = true;
      return;
    }
    buffer_pool<S>::local().give(std::move(pl.v));
  }
  /// A bounded run: line_overflow when making `add` more values would pass the allowance.
  void room(std::size_t add) const {
    std::size_t live = reserved_ + top_->v.size() + (holding_ ? held_.v.size() : 0) + finished_values_;
    for (const auto* p : running_) live += p->v.size();
    if (live + add <= allowance_) return;
    line_overflow o{step_, live + add, 0, {}};
    if (step_refined_) o.refine_points = rec_points_, o.refine_pos = rec_pos_;  // the step began with a refine
    throw o;
  }
  using prefix_fn = std::function<void(std::size_t, const S*, S*)>;
  const line_options& opt_;
  bool par_;
  std::span<const S> P_, Q_;
  line_stats& stats_;
  polyline<S, R>* pl_ = nullptr;                            // the points the steps work on
  std::vector<std::pair<prefix_fn, std::size_t>> prefix_;  // reanchor: (forward, output size)
  // bounded runs (bound(); 0: unbounded, check_line_caps applies)
  std::size_t allowance_ = 0, reserved_ = 0;
  std::optional<point_slice> slice_;
  std::vector<std::size_t>* pieces_ = nullptr;
  polyline<S, R>* top_ = nullptr;             // the top-level points (pl_ is a branch's inside a composite)
  polyline<S, R> held_;                       // the step's input, while holding_
  bool holding_ = false, first_action_ = false, step_refined_ = false;
  std::size_t step_ = 0, step_prefix_ = 0, finished_values_ = 0, rec_points_ = 0;
  std::vector<std::size_t> rec_pos_;          // the first refine's old points' places among its points
  std::vector<const polyline<S, R>*> running_;  // composites' branches being run
  std::vector<std::pair<std::size_t, std::size_t>> step_points_;  // (layer, points) of the step
};

}  // namespace nnlens::detail
