// nnlens/thrust/exactline_engine.hpp -- the engine of ExactLine over many segments on the thrust
// device system (nnlens/thrust/exactline.hpp is its entry point and says what it computes).
//
//   check_nodes(net)                       checks every layer (piecewise-linear, at most 8 knots / 8
//                                          branches); the parameters are device_network's
//   line_rows<S, R>                        the points of every segment of a pass on the device
//   engine<S, R, DNet>                     one pass: the segments through every layer, walked as
//                                          every ExactLine engine walks them (exactline/walk.hpp):
//                                          refine at knots or a max window, the composite step,
//                                          reanchor, dropping the segments that failed
//
// requires: as nnlens/thrust/exactline.hpp.  Kernels: nnlens/thrust/exactline_kernels.hpp.
#pragma once

#include <cstddef>
#include <deque>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <thrust/copy.h>
#include <thrust/device_free.h>
#include <thrust/device_malloc.h>
#include <thrust/device_ptr.h>
#include <thrust/scan.h>

#include "nnlens/exactline/line.hpp"
#include "nnlens/thrust/exactline_kernels.hpp"
#include "nnlens/thrust/network.hpp"
#include "nnlens/thrust/policy.hpp"

namespace nnlens::detail::thrust_line {

using idx = std::size_t;
namespace tk = thrust_kernels::line;

/// A max window on the device: the host's window rule (pwl_rule<L>::breaks) of a max-pooling
/// window (core/properties.hpp: PoolingWindow with pool_reduce::max).
template <class L>
concept max_window = pwl_has_window<L> && PoolingWindow<L> && pool_reduction_v<L> == pool_reduce::max;

/// Checks, before any segment runs, that every layer can run ExactLine on the device: the walk of
/// exactline/walk.hpp with checks for steps.  Piecewise-linear; knots (at most 8), a max window,
/// affine, or a composite of at most 8 branches; else logic_error naming the layer and its place.
/// (Thrust kernels: device_network's check.)
struct checker {
  static constexpr std::string_view name = "exact_lines";
  [[noreturn]] static void refuse(const layer_site& at, std::string_view op, std::string_view why) {
    throw logic_error(concat("exact_lines (thrust): ", at.str(), " (", op, ") ", why, "; run exact_lines with execution::seq"));
  }
  void layer_done() {}
  template <class L>
  void apply(const L&, shape, shape) {}
  template <class L>
  void refine_knots(const L& l, shape, const layer_site& at) {
    idx nk = 0;
    for (double q : pwl_rule<L>::knots(l)) (void)q, ++nk;
    if (nk > tk::knot_proposer<double, double>::max_knots) refuse(at, layer_traits<L>::name, "has more than 8 knots");
  }
  template <class L>
  void refine_window(const L&, shape, shape, std::optional<double>, const layer_site& at) {
    if constexpr (!max_window<L>) refuse(at, layer_traits<L>::name, "has no thrust ExactLine rule");
  }
  template <class L>
  void composite(const L& l, shape in, shape, const layer_site& at) {
    idx nb = 0;
    line_branches(*this, l, in, at, [&](std::size_t, auto&& run) { run(), ++nb; });
    if (nb > tk::max_branches) refuse(at, layer_traits<L>::name, "has more than 8 branches");
  }
};

template <class Net>
void check_nodes(const Net& net) {
  checker c;
  line_walk(c, net, false);
}

/// Device memory that only grows and is never initialised (thrust::device_vector fills on resize
/// and copies on growth; here every buffer is written before it is read).
template <class T>
class dbuf {
 public:
  dbuf() = default;
  dbuf(const dbuf&) = delete;
  dbuf& operator=(const dbuf&) = delete;
  ~dbuf() { release(); }
  void reserve(idx n) {
    if (n <= cap_) return;
    release();
    cap_ = n + n / 4 + 16;
    p_ = ::thrust::device_malloc<T>(cap_);
  }
  T* get() const { return ::thrust::raw_pointer_cast(p_); }
  void upload(const T* h, idx n) {
    reserve(n);
    if (n) ::thrust::copy(h, h + n, p_);
  }
  void download(idx i, idx n, T* h) const {
    if (n) ::thrust::copy(p_ + std::ptrdiff_t(i), p_ + std::ptrdiff_t(i + n), h);
  }
  void copy_from(const dbuf& o, idx n) {
    reserve(n);
    if (n) ::thrust::copy(o.p_, o.p_ + std::ptrdiff_t(n), p_);
  }
  T at(idx i) const {
    T x{};
    download(i, 1, &x);
    return x;
  }
  void swap(dbuf& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(cap_, o.cap_);
  }

 private:
  void release() {
    if (cap_) ::thrust::device_free(p_);
    cap_ = 0;
  }
  ::thrust::device_ptr<T> p_{};
  idx cap_ = 0;
};

template <class T>
T* raw(dbuf<T>& v) {
  return v.get();
}

/// The points of every segment of a pass: rows sorted by (segment, t), segment g's rows from
/// off[g] (on the host and, doff, on the device), n rows of width d.
template <class S, class R>
struct line_rows {
  dbuf<idx> seg, doff;
  dbuf<R> t;
  dbuf<S> v;
  std::vector<idx> off;
  idx n = 0, d = 0;
  void copy_from(const line_rows& o) {
    seg.copy_from(o.seg, o.n), t.copy_from(o.t, o.n), v.copy_from(o.v, o.n * o.d);
    doff.copy_from(o.doff, o.off.size());
    off = o.off, n = o.n, d = o.d;
  }
  void swap(line_rows& o) {
    seg.swap(o.seg), doff.swap(o.doff), t.swap(o.t), v.swap(o.v);
    std::swap(off, o.off), std::swap(n, o.n), std::swap(d, o.d);
  }
};

/// One pass: the segments `ids` (all valid) through every layer.
template <class S, class R, class DNet>
class engine {
 public:
  static constexpr std::string_view name = "exact_lines";
  engine() = default;
  explicit engine(const line_options& o) : opt_(&o) {}
  void bind(const line_options& o) { opt_ = &o; }

  /// Runs segments A[ids[j]] -> B[ids[j]] through dn (a device_network in scalar S); fills
  /// res[ids[j]] or eps[ids[j]].  The walk over the network's layers is every engine's
  /// (exactline/walk.hpp): for a Sequential a compile-time fold.
  void run(const DNet& dn, const std::vector<std::vector<S>>& A, const std::vector<std::vector<S>>& B, const std::vector<idx>& ids,
           std::vector<line_result<S, R>>& res, std::vector<std::exception_ptr>& eps) {
    G_ = ids.size();
    if (G_ == 0) return;
    const idx di = A[ids[0]].size();
    auto& c = cur_;
    c.d = di;
    {  // two rows per segment: t = 0 (P) and t = 1 (Q)
      std::vector<idx> seg(2 * G_);
      std::vector<R> t(2 * G_);
      const bool ends = opt_->reanchor;  // P and Q on the device: only reanchor reads them
      std::vector<S> v(2 * G_ * di), p(ends ? G_ * di : 0), q(ends ? G_ * di : 0);
      for (idx j = 0; j < G_; ++j) {
        seg[2 * j] = seg[2 * j + 1] = j;
        t[2 * j] = R(0), t[2 * j + 1] = R(1);
        std::copy(A[ids[j]].begin(), A[ids[j]].end(), v.begin() + std::ptrdiff_t(2 * j * di));
        std::copy(B[ids[j]].begin(), B[ids[j]].end(), v.begin() + std::ptrdiff_t((2 * j + 1) * di));
        if (!ends) continue;
        std::copy(A[ids[j]].begin(), A[ids[j]].end(), p.begin() + std::ptrdiff_t(j * di));
        std::copy(B[ids[j]].begin(), B[ids[j]].end(), q.begin() + std::ptrdiff_t(j * di));
      }
      c.seg.upload(seg.data(), seg.size());
      c.t.upload(t.data(), t.size());
      c.v.upload(v.data(), v.size());
      c.n = 2 * G_;
      if (ends) P_.upload(p.data(), p.size()), Q_.upload(q.data(), q.size());
    }
    c.off.resize(G_ + 1);
    for (idx j = 0; j <= G_; ++j) c.off[j] = 2 * j;
    c.doff.upload(c.off.data(), c.off.size());
    live_.assign(G_, 1);
    err_.assign(G_, nullptr);
    stats_.assign(G_, line_stats{});
    dn_ = &dn;
    k_ = at_ = 0;
    line_walk(*this, dn.network(), opt_->fuse_max_pool);

    // results
    const idx n = c.n;
    std::vector<R> t(n);
    std::vector<S> v(n * c.d);
    c.t.download(0, n, t.data());
    c.v.download(0, n * c.d, v.data());
    for (idx j = 0; j < G_; ++j) {
      const idx g = ids[j];
      if (!live_[j]) {
        eps[g] = err_[j];
        continue;
      }
      auto& r = res[g];
      r.t.assign(t.begin() + std::ptrdiff_t(c.off[j]), t.begin() + std::ptrdiff_t(c.off[j + 1]));
      r.values.assign(v.begin() + std::ptrdiff_t(c.off[j] * c.d), v.begin() + std::ptrdiff_t(c.off[j + 1] * c.d));
      r.stats = std::move(stats_[j]);
    }
  }

  // The walk's steps (exactline/walk.hpp) on the rows of every segment.
  void layer_done() {
    for (idx j = 0; j < G_; ++j)
      if (live_[j]) stats_[j].points.push_back(cur_.off[j + 1] - cur_.off[j]);
  }
  template <class L>
  void refine_knots(const L& l, shape, const layer_site& at) {
    tk::knot_proposer<S, R> prop{cur_.d, {}, 0};
    for (double q : pwl_rule<L>::knots(l)) prop.knots[prop.nk++] = q;
    if (prop.nk > 0) refine(prop, at);
  }
  template <class L>
  void refine_window(const L& l, shape in, shape out, std::optional<double> c, const layer_site& at) {
    if constexpr (max_window<L>)  // (check_nodes refused any other window rule)
      refine(tk::pool_proposer<S, R>{thrust_layer<L>::dims(l, in, out), c.has_value(), S(c.value_or(0))}, at);
  }
  /// The next node of the op graph (layer l) on the current rows.
  template <class L>
  void apply(const L& l, shape in, shape out) {
    next_.v.reserve(cur_.n * out.size());
    thrust_layer<L>::forward(l, dn_->params(k_), in, out, cur_.n, raw(cur_.v), raw(next_.v));
    cur_.v.swap(next_.v);
    cur_.d = out.size();
    at_ = ++k_;  // node k writes tensor k + 1
  }

  /// A composite, as the host's: each branch from the composite's input points, then the union of
  /// their points (join_union) and the join of their values there (join_values).
  template <class L>
  void composite(const L& l, shape lin, shape lout, const layer_site& where) {
    idx nb = 0;
    pwl_rule<L>::for_each_branch(l, lin, [&](const auto&) { ++nb; });
    const idx base = used_, in_at = at_;
    used_ += 1 + nb;
    if (saved_.size() < used_) saved_.resize(used_);
    saved_[base].swap(cur_);  // the input
    std::vector<idx> dims;
    line_branches(*this, l, lin, where, [&](std::size_t b, auto&& run) {
      cur_.copy_from(saved_[base]);
      run();
      dims.push_back(cur_.d);
      saved_[base + 1 + b].swap(cur_);
      at_ = in_at;
    });
    const std::vector<idx> at = branch_offsets(composite_join_v<L>, dims);
    const line_rows<S, R>& in = saved_[base];
    tk::join_union<S, R> u{};
    u.nb = nb;
    for (idx b = 0; b < nb; ++b) {
      auto& r = saved_[base + 1 + b];
      u.br[b] = {raw(r.t), raw(r.doff), raw(r.v), r.d, at[b]};
    }
    std::vector<idx> live(live_.begin(), live_.end()), cnt(G_), merged(G_), off(G_ + 1, 0);
    live_d_.upload(live.data(), G_);
    cnt_.reserve(G_), merged_.reserve(G_);
    u.tin = in.t.get(), u.offin = in.doff.get(), u.live = raw(live_d_), u.tol = R(opt_->merge_tol);
    u.cnt = raw(cnt_), u.merged = raw(merged_);
    thrust_kernels::launch(G_, u);
    cnt_.download(0, G_, cnt.data());
    merged_.download(0, G_, merged.data());
    const idx dout = lout.size();
    for (idx j = 0; j < G_; ++j) {
      if (live_[j]) {
        stats_[j].merged += merged[j];
        try {
          check_caps(cnt[j], std::max(lin.size(), dout), where);
        } catch (const error&) {
          err_[j] = std::current_exception();
          live_[j] = 0, live[j] = 0, cnt[j] = 0;
        }
      }
      off[j + 1] = off[j] + cnt[j];
    }
    auto& c = cur_;
    c.n = off[G_], c.d = dout, c.off = off;
    c.doff.upload(off.data(), off.size());
    live_d_.upload(live.data(), G_);
    u.live = raw(live_d_);
    c.seg.reserve(c.n), c.t.reserve(c.n), c.v.reserve(c.n * dout);
    u.off_out = c.doff.get(), u.t_out = raw(c.t), u.seg_out = raw(c.seg);
    thrust_kernels::launch(G_, u);
    tk::join_values<S, R> jv{};
    std::copy(u.br, u.br + nb, jv.br);
    jv.nb = nb, jv.dout = dout, jv.t = c.t.get(), jv.seg = c.seg.get(), jv.v = raw(c.v);
    thrust_kernels::launch(c.n, jv);
    used_ = base;
    at_ = ++k_;
  }

 private:
  const line_options* opt_ = nullptr;
  idx G_ = 0;  // segments
  line_rows<S, R> cur_, next_;
  std::deque<line_rows<S, R>> saved_;  // a composite's input and its branches' points (nested: a stack)
  idx used_ = 0;                       // of saved_
  dbuf<idx> doff2_, cnt_, coff_, pair_, keep_, kept_, koff_, merged_, gpos_, mseg_, pseg_, fresh_, live_d_, flag_, pos_;
  dbuf<R> s_;
  dbuf<S> P_, Q_, x0_, x1_;
  std::vector<char> live_;
  std::vector<std::exception_ptr> err_;
  std::vector<line_stats> stats_;
  const DNet* dn_ = nullptr;
  idx k_ = 0, at_ = 0;  // the next node of the op graph; the tensor the rows hold (reanchor)

  /// Inserts the breaks prop proposes (new rows: interpolated pre-activations).
  template <class P>
  void refine(const P& prop, const layer_site& where) {
    auto& c = cur_;
    const idx n = c.n, d = c.d;
    if (n < 2) return;
    cnt_.reserve(n);
    coff_.reserve(n);
    thrust_kernels::launch(n, tk::count_pairs<S, R, P>{raw(c.seg), raw(c.v), n, d, prop, raw(cnt_)});
    ::thrust::exclusive_scan(::thrust::device, raw(cnt_), raw(cnt_) + n, raw(coff_));
    const idx total = coff_.at(n - 1);  // cnt[n - 1] == 0
    if (total == 0) return;
    s_.reserve(total);
    pair_.reserve(total);
    thrust_kernels::launch(n, tk::fill_pairs<S, R, P>{raw(cnt_), raw(coff_), raw(c.v), d, prop, raw(s_), raw(pair_)});
    keep_.reserve(total);
    kept_.reserve(n);
    merged_.reserve(n);
    thrust_kernels::launch(n, tk::merge_pairs<R>{raw(cnt_), raw(coff_), raw(c.t), raw(s_), R(opt_->merge_tol), raw(keep_), raw(kept_),
                                     raw(merged_)});
    koff_.reserve(n);
    ::thrust::exclusive_scan(::thrust::device, raw(kept_), raw(kept_) + n, raw(koff_));
    const idx K = koff_.at(n - 1);
    gpos_.reserve(total);
    ::thrust::exclusive_scan(::thrust::device, raw(keep_), raw(keep_) + total, raw(gpos_));
    doff2_.reserve(G_ + 1);
    mseg_.reserve(G_);
    pseg_.reserve(G_);
    thrust_kernels::launch(G_ + 1, tk::segment_update{raw(c.doff), raw(koff_), raw(cnt_), raw(merged_), n, K, G_, raw(doff2_),
                                          raw(mseg_), raw(pseg_)});
    std::vector<idx> off2(G_ + 1), mseg(G_), pseg(G_);
    doff2_.download(0, G_ + 1, off2.data());
    mseg_.download(0, G_, mseg.data());
    pseg_.download(0, G_, pseg.data());
    bool failed = false;
    for (idx j = 0; j < G_; ++j) {
      if (!live_[j] || pseg[j] == 0) continue;
      stats_[j].merged += mseg[j];
      try {
        check_caps(off2[j + 1] - off2[j], d, where);
      } catch (const error&) {
        err_[j] = std::current_exception();
        live_[j] = 0;
        failed = true;
      }
    }
    if (K > 0) {
      auto& x = next_;
      x.seg.reserve(n + K);
      x.t.reserve(n + K);
      x.v.reserve((n + K) * d);
      if (opt_->reanchor) fresh_.reserve(K);
      thrust_kernels::launch(n, tk::move_rows<S, R>{raw(c.seg), raw(c.t), raw(c.v), raw(koff_), nullptr, nullptr, d, raw(x.seg),
                                        raw(x.t), raw(x.v)});
      thrust_kernels::launch(total, tk::scatter_new<S, R>{raw(c.seg), raw(c.t), raw(c.v), raw(pair_), raw(s_), raw(keep_), raw(gpos_), d,
                                               raw(x.seg), raw(x.t), raw(x.v),
                                               opt_->reanchor ? raw(fresh_) : static_cast<idx*>(nullptr)});
      c.seg.swap(x.seg), c.t.swap(x.t), c.v.swap(x.v), c.doff.swap(doff2_);
      c.n = n + K;
      c.off = off2;
      if (opt_->reanchor) reanchor(K);
    }
    if (failed) compact();
  }

  void check_caps(idx points, idx d, const layer_site& where) const {
    check_line_caps<S>(points, d, *opt_, [&] { return where.str(); });
  }

  /// The K new rows recomputed from P + t (Q - P): the op graph's nodes up to the tensor the rows
  /// hold (device_network::forward; with a composite its other branches too: other tensors).
  void reanchor(idx K) {
    const idx di = dn_->acts()[0].size();
    x0_.reserve(K * di);
    thrust_kernels::launch(K, tk::endpoints_at<S, R>{raw(fresh_), raw(cur_.seg), raw(cur_.t), raw(P_), raw(Q_), di, raw(x0_)});
    NNLENS_EXPECTS(dn_->acts()[at_].size() == cur_.d);
    x1_.reserve(K * cur_.d);
    dn_->forward(K, raw(x0_), raw(x1_), at_);
    thrust_kernels::launch(K, tk::scatter_rows<S>{raw(fresh_), raw(x1_), cur_.d, raw(cur_.v)});
  }

  /// Drops the rows of segments that failed.
  void compact() {
    auto& c = cur_;
    const idx n = c.n;
    std::vector<idx> live(live_.begin(), live_.end());
    live_d_.upload(live.data(), G_);
    flag_.reserve(n);
    pos_.reserve(n);
    thrust_kernels::launch(n, tk::live_flag{raw(c.seg), raw(live_d_), raw(flag_)});
    ::thrust::exclusive_scan(::thrust::device, raw(flag_), raw(flag_) + n, raw(pos_));
    std::vector<idx> off(G_ + 1, 0);
    for (idx j = 0; j < G_; ++j) off[j + 1] = off[j] + (live_[j] ? c.off[j + 1] - c.off[j] : 0);
    auto& x = next_;
    x.seg.reserve(off[G_]);
    x.t.reserve(off[G_]);
    x.v.reserve(off[G_] * c.d);
    thrust_kernels::launch(n, tk::move_rows<S, R>{raw(c.seg), raw(c.t), raw(c.v), nullptr, raw(pos_), raw(live_d_), c.d, raw(x.seg),
                                      raw(x.t), raw(x.v)});
    c.seg.swap(x.seg), c.t.swap(x.t), c.v.swap(x.v);
    c.n = off[G_];
    c.off = off;
    c.doff.upload(off.data(), off.size());
  }
};

}  // namespace nnlens::detail::thrust_line
