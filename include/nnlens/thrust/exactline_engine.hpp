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
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
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
/// and copies on growth; here every buffer is written before it is read).  Movable: std::swap.
template <class T>
class dbuf {
 public:
  void reserve(idx n) {
    if (n <= cap_) return;
    p_.reset();
    cap_ = n + n / 4 + 16;
    p_.reset(::thrust::raw_pointer_cast(::thrust::device_malloc<T>(cap_)));
  }
  T* get() const { return p_.get(); }
  void upload(const T* h, idx n) {
    reserve(n);
    if (n) ::thrust::copy(h, h + n, dp());
  }
  void download(idx n, T* h, idx from = 0) const {
    if (n) ::thrust::copy(dp() + std::ptrdiff_t(from), dp() + std::ptrdiff_t(from + n), h);
  }
  void copy_from(const dbuf& o, idx n) {
    reserve(n);
    if (n) ::thrust::copy(o.dp(), o.dp() + std::ptrdiff_t(n), dp());
  }
  T at(idx i) const {
    T x{};
    download(1, &x, i);
    return x;
  }

 private:
  struct release {
    void operator()(T* p) const { ::thrust::device_free(::thrust::device_pointer_cast(p)); }
  };
  ::thrust::device_ptr<T> dp() const { return ::thrust::device_pointer_cast(p_.get()); }
  std::unique_ptr<T, release> p_;
  idx cap_ = 0;
};

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
      std::vector<S> v(2 * G_ * di);
      for (idx j = 0; j < G_; ++j) {
        seg[2 * j] = seg[2 * j + 1] = j;
        t[2 * j] = R(0), t[2 * j + 1] = R(1);
        std::copy(A[ids[j]].begin(), A[ids[j]].end(), v.begin() + std::ptrdiff_t(2 * j * di));
        std::copy(B[ids[j]].begin(), B[ids[j]].end(), v.begin() + std::ptrdiff_t((2 * j + 1) * di));
      }
      c.seg.upload(seg.data(), seg.size());
      c.t.upload(t.data(), t.size());
      c.v.upload(v.data(), v.size());
      c.n = 2 * G_;
      if (opt_->reanchor) PQ_.copy_from(c.v, c.n * di);  // P and Q of every segment: only reanchor reads them
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
    c.t.download(n, t.data());
    c.v.download(n * c.d, v.data());
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
    thrust_layer<L>::forward(l, dn_->params(k_), in, out, cur_.n, cur_.v.get(), next_.v.get());
    std::swap(cur_.v, next_.v);
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
    std::swap(saved_[base], cur_);  // the input
    std::vector<idx> dims;
    line_branches(*this, l, lin, where, [&](std::size_t b, auto&& run) {
      cur_.copy_from(saved_[base]);
      run();
      dims.push_back(cur_.d);
      std::swap(saved_[base + 1 + b], cur_);
      at_ = in_at;
    });
    const std::vector<idx> at = branch_offsets(composite_join_v<L>, dims);
    const line_rows<S, R>& in = saved_[base];
    tk::join_union<S, R> u{};
    u.nb = nb;
    for (idx b = 0; b < nb; ++b) {
      auto& r = saved_[base + 1 + b];
      u.br[b] = {r.t.get(), r.doff.get(), r.v.get(), r.d, at[b]};
    }
    std::vector<idx> live(live_.begin(), live_.end()), cnt(G_), merged(G_), off(G_ + 1, 0);
    live_d_.upload(live.data(), G_);
    cnt_.reserve(G_), merged_.reserve(G_);
    u.tin = in.t.get(), u.offin = in.doff.get(), u.live = live_d_.get(), u.tol = R(opt_->merge_tol);
    u.cnt = cnt_.get(), u.merged = merged_.get();
    thrust_kernels::launch(G_, u);
    cnt_.download(G_, cnt.data());
    merged_.download(G_, merged.data());
    const idx dout = lout.size();
    for (idx j = 0; j < G_; ++j) {
      if (live_[j]) {
        stats_[j].merged += merged[j];
        try {
          check_line_caps<S>(cnt[j], std::max(lin.size(), dout), *opt_, [&] { return where.str(); });
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
    u.live = live_d_.get();
    c.seg.reserve(c.n), c.t.reserve(c.n), c.v.reserve(c.n * dout);
    u.off_out = c.doff.get(), u.t_out = c.t.get(), u.seg_out = c.seg.get();
    thrust_kernels::launch(G_, u);
    tk::join_values<S, R> jv{};
    std::copy(u.br, u.br + nb, jv.br);
    jv.nb = nb, jv.dout = dout, jv.t = c.t.get(), jv.seg = c.seg.get(), jv.v = c.v.get();
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
  dbuf<S> PQ_, x0_, x1_;
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
    thrust_kernels::launch(n, tk::count_pairs<S, R, P>{c.seg.get(), c.v.get(), n, d, prop, cnt_.get()});
    ::thrust::exclusive_scan(::thrust::device, cnt_.get(), cnt_.get() + n, coff_.get());
    const idx total = coff_.at(n - 1);  // cnt[n - 1] == 0
    if (total == 0) return;
    s_.reserve(total);
    pair_.reserve(total);
    thrust_kernels::launch(n, tk::fill_pairs<S, R, P>{cnt_.get(), coff_.get(), c.v.get(), d, prop, s_.get(), pair_.get()});
    keep_.reserve(total);
    kept_.reserve(n);
    merged_.reserve(n);
    thrust_kernels::launch(n, tk::merge_pairs<R>{cnt_.get(), coff_.get(), c.t.get(), s_.get(), R(opt_->merge_tol), keep_.get(),
                                                 kept_.get(), merged_.get()});
    koff_.reserve(n);
    ::thrust::exclusive_scan(::thrust::device, kept_.get(), kept_.get() + n, koff_.get());
    const idx K = koff_.at(n - 1);
    gpos_.reserve(total);
    ::thrust::exclusive_scan(::thrust::device, keep_.get(), keep_.get() + total, gpos_.get());
    doff2_.reserve(G_ + 1);
    mseg_.reserve(G_);
    pseg_.reserve(G_);
    thrust_kernels::launch(G_ + 1, tk::segment_update{c.doff.get(), koff_.get(), cnt_.get(), merged_.get(), n, K, G_, doff2_.get(),
                                                      mseg_.get(), pseg_.get()});
    std::vector<idx> off2(G_ + 1), mseg(G_), pseg(G_);
    doff2_.download(G_ + 1, off2.data());
    mseg_.download(G_, mseg.data());
    pseg_.download(G_, pseg.data());
    bool failed = false;
    for (idx j = 0; j < G_; ++j) {
      if (!live_[j] || pseg[j] == 0) continue;
      stats_[j].merged += mseg[j];
      try {
        check_line_caps<S>(off2[j + 1] - off2[j], d, *opt_, [&] { return where.str(); });
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
      thrust_kernels::launch(n, tk::move_rows<S, R>{c.seg.get(), c.t.get(), c.v.get(), koff_.get(), nullptr, nullptr, d, x.seg.get(),
                                                    x.t.get(), x.v.get()});
      thrust_kernels::launch(total, tk::scatter_new<S, R>{c.seg.get(), c.t.get(), c.v.get(), pair_.get(), s_.get(), keep_.get(),
                                                          gpos_.get(), d, x.seg.get(), x.t.get(), x.v.get(),
                                                          opt_->reanchor ? fresh_.get() : static_cast<idx*>(nullptr)});
      std::swap(c.seg, x.seg), std::swap(c.t, x.t), std::swap(c.v, x.v), std::swap(c.doff, doff2_);
      c.n = n + K;
      c.off = off2;
      if (opt_->reanchor) reanchor(K);
    }
    if (failed) compact();
  }

  /// The K new rows recomputed from P + t (Q - P): the op graph's nodes up to the tensor the rows
  /// hold (device_network::forward; with a composite its other branches too: other tensors).
  void reanchor(idx K) {
    const idx di = dn_->acts()[0].size();
    x0_.reserve(K * di);
    thrust_kernels::launch(K, tk::endpoints_at<S, R>{fresh_.get(), cur_.seg.get(), cur_.t.get(), PQ_.get(), di, x0_.get()});
    NNLENS_EXPECTS(dn_->acts()[at_].size() == cur_.d);
    x1_.reserve(K * cur_.d);
    dn_->forward(K, x0_.get(), x1_.get(), at_);
    thrust_kernels::launch(K, tk::scatter_rows<S>{fresh_.get(), x1_.get(), cur_.d, cur_.v.get()});
  }

  /// Drops the rows of segments that failed.
  void compact() {
    auto& c = cur_;
    const idx n = c.n;
    std::vector<idx> live(live_.begin(), live_.end());
    live_d_.upload(live.data(), G_);
    flag_.reserve(n);
    pos_.reserve(n);
    thrust_kernels::launch(n, tk::live_flag{c.seg.get(), live_d_.get(), flag_.get()});
    ::thrust::exclusive_scan(::thrust::device, flag_.get(), flag_.get() + n, pos_.get());
    std::vector<idx> off(G_ + 1, 0);
    for (idx j = 0; j < G_; ++j) off[j + 1] = off[j] + (live_[j] ? c.off[j + 1] - c.off[j] : 0);
    auto& x = next_;
    x.seg.reserve(off[G_]);
    x.t.reserve(off[G_]);
    x.v.reserve(off[G_] * c.d);
    thrust_kernels::launch(n, tk::move_rows<S, R>{c.seg.get(), c.t.get(), c.v.get(), nullptr, pos_.get(), live_d_.get(), c.d,
                                                  x.seg.get(), x.t.get(), x.v.get()});
    std::swap(c.seg, x.seg), std::swap(c.t, x.t), std::swap(c.v, x.v);
    c.n = off[G_];
    c.off = off;
    c.doff.upload(off.data(), off.size());
  }
};

}  // namespace nnlens::detail::thrust_line
