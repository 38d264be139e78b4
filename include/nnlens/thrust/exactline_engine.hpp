// nnlens/thrust/exactline_engine.hpp -- the engine of ExactLine over many segments on the thrust
// device system (nnlens/thrust/exactline.hpp is its entry point and says what it computes).
//
//   layer_run<T>, make_runs(net, params)   the network as the engine reads it: each layer's pwl_rule
//                                          form (affine, knots, max window, composite with its
//                                          branches), shapes, place ("layer 1 (Residual) branch 0
//                                          layer 2") and device forward pass, parameters uploaded
//   line_rows<S, R>                        the points of every segment of a pass on the device
//   engine<S, R>                           one pass: the segments through every layer (refine at a
//                                          split layer, the composite step, reanchor, dropping the
//                                          segments that failed)
//
// requires: as nnlens/thrust/exactline.hpp.  Kernels: nnlens/thrust/exactline_kernels.hpp.
#pragma once

#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <optional>
#include <string>
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

/// A layer's pwl_rule form, as the engine reads it.
enum class kind { affine, knots, pool, composite };

/// One layer as the engine sees it: its form, shapes, place ("layer 1 (Residual) branch 0 layer
/// 2", the host's), knots and floor (kind::knots), pool window, device forward pass, and for a
/// composite its branches and where each lands in the joined row.
template <class T>
struct layer_run {
  kind k = kind::affine;
  shape in{}, out{};
  std::string where;
  double knots[tk::knot_proposer<T, double>::max_knots] = {};
  idx nk = 0;
  std::optional<double> floor;  // the op is max(x, *floor): fusable with an adjacent max window
  thrust_kernels::window_dims pool{};
  std::function<void(idx, const T*, T*)> forward;  // not for a composite (run_forward joins it)
  std::vector<std::vector<layer_run>> branches;
  std::vector<idx> at;  // branch b's values start at at[b] of a joined row
  branch_join join = branch_join::sum;
};

/// Builds layer_runs of a network (already in scalar T), uploading parameters into `params`
/// (a deque: the forward passes keep pointers into it).
template <class T>
struct run_builder {
  std::deque<thrust_params<T>>& params;

  template <class L>
  layer_run<T> build(const L& l, shape in, shape out, std::string where) {
    if constexpr (!PiecewiseLinearLayer<L>) {
      throw logic_error(concat("exact_lines: ", where, " (", layer_traits<L>::name,
                               ") is not piecewise-linear; ExactLine needs every layer piecewise-linear: run it on "
                               "the logits (drop the ",
                               layer_traits<L>::name, ")"));
    } else if constexpr (!ThrustLayer<L>) {
      throw logic_error(concat("exact_lines (thrust): ", where, " (", layer_traits<L>::name,
                               ") has no thrust kernels; run exact_lines with execution::seq or execution::par"));
    } else {
      layer_run<T> r;
      r.in = in, r.out = out, r.where = where;
      if constexpr (pwl_is_composite<L>) {
        r.k = kind::composite;
        r.join = composite_join_v<L>;
        std::vector<idx> dims;
        pwl_rule<L>::for_each_branch(l, in, [&](auto&& walk) {
          auto& br = r.branches.emplace_back();
          const idx b = r.branches.size() - 1;
          walk([&](const auto* lp, auto ii, shape i, shape o) {
            br.push_back(build(*lp, i, o, concat(where, " (", layer_traits<L>::name, ") branch ", b, " layer ", std::size_t(ii))));
          });
          dims.push_back(br.empty() ? in.size() : br.back().out.size());
        });
        if (r.branches.size() > tk::max_branches)
          throw logic_error(concat("exact_lines (thrust): ", where, " (", layer_traits<L>::name, ") has more than ",
                                   tk::max_branches, " branches; run exact_lines with execution::seq"));
        r.at = branch_offsets(r.join, dims);
      } else if constexpr (pwl_has_knots<L>) {  // element-wise: the host's knots
        r.k = kind::knots;
        for (double k : pwl_rule<L>::knots(l)) {
          if (r.nk == tk::knot_proposer<T, double>::max_knots)
            throw logic_error(concat("exact_lines (thrust): ", where, " (", layer_traits<L>::name, ") has more than ",
                                     r.nk, " knots; run exact_lines with execution::seq"));
          r.knots[r.nk++] = k;
        }
        if constexpr (pwl_has_floor<L>) r.floor = pwl_rule<L>::max_floor(l);
      } else if constexpr (max_window<L>) {
        r.k = kind::pool;
        r.pool = thrust_layer<L>::dims(l, in, out);
      } else if constexpr (!pwl_is_affine<L>) {
        throw logic_error(concat("exact_lines (thrust): ", where, " (", layer_traits<L>::name,
                                 ") has no thrust ExactLine rule; run exact_lines with execution::seq"));
      }
      if constexpr (!pwl_is_composite<L>) {
        thrust_params<T>* p = &params.emplace_back();
        if constexpr (thrust_dense_like<L>) {  // padded weights: full tiles only (thrust_kernels::line::dense_padded)
          const idx I = in.size(), O = out.size(), Op = (O + 7) / 8 * 8;
          std::vector<T> w(I * Op, T(0)), b(Op, T(0));
          for (idx a = 0; a < I; ++a)
            for (idx o = 0; o < O; ++o) w[a * Op + o] = l.W.data()[a * O + o];
          for (idx o = 0; o < O; ++o) b[o] = l.b.data()[o];
          p->W.assign(w.begin(), w.end());
          p->b.assign(b.begin(), b.end());
          r.forward = [p, I, O, Op](idx n, const T* x, T* y) {
            tk::dense_padded<T>(n, I, O, Op, x, ::thrust::raw_pointer_cast(p->W.data()), ::thrust::raw_pointer_cast(p->b.data()),
                                y);
          };
        } else {
          thrust_layer<L>::upload(l, *p, in);
          r.forward = [&l, p, in, out](idx n, const T* x, T* y) { thrust_layer<L>::forward(l, *p, in, out, n, x, y); };
        }
      }
      return r;
    }
  }
};

/// The layers of net (already in scalar T) with their uploaded parameters.
template <class T, class Net>
std::vector<layer_run<T>> make_runs(const Net& net, std::deque<thrust_params<T>>& params) {
  run_builder<T> b{params};
  std::vector<layer_run<T>> runs;
  for_each_layer(net, [&](const auto& l, auto i, shape in, shape out) {
    runs.push_back(b.build(l, in, out, concat("layer ", std::size_t(i))));
  });
  return runs;
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
template <class S, class R>
class engine {
 public:
  engine() = default;
  engine(const line_options& o, const std::vector<layer_run<S>>& runs) : opt_(&o), runs_(&runs) {}
  void bind(const line_options& o, const std::vector<layer_run<S>>& runs) {
    opt_ = &o;
    runs_ = &runs;
  }

  /// Runs segments A[ids[j]] -> B[ids[j]]; fills res[ids[j]] or eps[ids[j]].
  void run(const std::vector<std::vector<S>>& A, const std::vector<std::vector<S>>& B, const std::vector<idx>& ids,
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
    prefix_.clear();
    walk(*runs_, true);

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

 private:
  const line_options* opt_ = nullptr;
  const std::vector<layer_run<S>>* runs_ = nullptr;
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
  std::vector<const layer_run<S>*> prefix_;  // reanchor: the layers run so far

  void push_points() {
    for (idx j = 0; j < G_; ++j)
      if (live_[j]) stats_[j].points.push_back(cur_.off[j + 1] - cur_.off[j]);
  }

  /// The layers of runs in order; at the top level (the host's walk) an element-wise max(x, c)
  /// next to a max window runs as one fused rule (the host's try_fuse) and the points are counted.
  void walk(const std::vector<layer_run<S>>& runs, bool top) {
    const idx nl = runs.size();
    for (idx i = 0; i < nl; ++i) {
      const auto& L = runs[i];
      const layer_run<S>* floor_layer = nullptr;
      if (top && opt_->fuse_max_pool && i + 1 < nl) {
        const auto& N = runs[i + 1];
        if (L.k == kind::knots && L.floor && N.k == kind::pool) floor_layer = &L;
        if (L.k == kind::pool && N.k == kind::knots && N.floor) floor_layer = &N;
      }
      if (floor_layer) {
        auto dm = L.k == kind::pool ? L.pool : runs[i + 1].pool;
        dm.C = L.in[0], dm.H = L.in[1], dm.W = L.in[2];
        refine(tk::pool_proposer<S, R>{dm, true, S(*floor_layer->floor)}, L.where);
        apply(L);
        apply(runs[++i]);
        push_points();
      } else {
        step(L);
      }
      if (top) push_points();
    }
  }

  void step(const layer_run<S>& L) {
    if (L.k == kind::composite) return composite(L);
    if (L.k == kind::knots && L.nk > 0) {
      tk::knot_proposer<S, R> prop{cur_.d, {}, L.nk};
      for (idx q = 0; q < L.nk; ++q) prop.knots[q] = L.knots[q];
      refine(prop, L.where);
    }
    if (L.k == kind::pool) refine(tk::pool_proposer<S, R>{L.pool, false, S(0)}, L.where);
    apply(L);
  }

  void apply(const layer_run<S>& L) {
    next_.v.reserve(cur_.n * L.out.size());
    L.forward(cur_.n, raw(cur_.v), raw(next_.v));
    cur_.v.swap(next_.v);
    cur_.d = L.out.size();
    prefix_.push_back(&L);
  }

  /// L's forward pass on n rows (a composite: its branches, then the join, as device_network).
  void run_forward(const layer_run<S>& L, idx n, const S* x, S* y) {
    if (L.k != kind::composite) return L.forward(n, x, y);
    for (idx b = 0; b < L.branches.size(); ++b) {
      dbuf<S> u, w;
      const S* src = x;
      idx d = L.in.size();
      for (const auto& l : L.branches[b]) {
        w.reserve(n * l.out.size());
        run_forward(l, n, src, raw(w));
        u.swap(w);
        src = raw(u), d = l.out.size();
      }
      thrust_kernels::place<S>(n, L.out.size(), L.at[b], d, src, y, L.join == branch_join::sum && b > 0);
    }
  }

  /// A composite, as the host's: each branch from the composite's input points, then the union of
  /// their points (join_union) and the join of their values there (join_values).
  void composite(const layer_run<S>& L) {
    const idx nb = L.branches.size(), base = used_, pre = prefix_.size();
    used_ += 1 + nb;
    if (saved_.size() < used_) saved_.resize(used_);
    saved_[base].swap(cur_);  // the input
    for (idx b = 0; b < nb; ++b) {
      cur_.copy_from(saved_[base]);
      walk(L.branches[b], false);
      saved_[base + 1 + b].swap(cur_);
      prefix_.resize(pre);
    }
    const line_rows<S, R>& in = saved_[base];
    tk::join_union<S, R> u{};
    u.nb = nb;
    for (idx b = 0; b < nb; ++b) {
      auto& r = saved_[base + 1 + b];
      u.br[b] = {raw(r.t), raw(r.doff), raw(r.v), r.d, L.at[b]};
    }
    std::vector<idx> live(live_.begin(), live_.end()), cnt(G_), merged(G_), off(G_ + 1, 0);
    live_d_.upload(live.data(), G_);
    cnt_.reserve(G_), merged_.reserve(G_);
    u.tin = in.t.get(), u.offin = in.doff.get(), u.live = raw(live_d_), u.tol = R(opt_->merge_tol);
    u.cnt = raw(cnt_), u.merged = raw(merged_);
    thrust_kernels::launch(G_, u);
    cnt_.download(0, G_, cnt.data());
    merged_.download(0, G_, merged.data());
    const idx dout = L.out.size();
    for (idx j = 0; j < G_; ++j) {
      if (live_[j]) {
        stats_[j].merged += merged[j];
        try {
          check_caps(cnt[j], std::max(L.in.size(), dout), L.where);
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
    prefix_.push_back(&L);
  }

  /// Inserts the breaks prop proposes (new rows: interpolated pre-activations).
  template <class P>
  void refine(const P& prop, const std::string& where) {
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

  void check_caps(idx points, idx d, const std::string& where) const {
    check_line_caps<S>(points, d, *opt_, [&] { return where; });
  }


  /// The K new rows recomputed from P + t (Q - P) through the layers run so far.
  void reanchor(idx K) {
    const idx di = runs_->empty() ? cur_.d : (*runs_)[0].in.size();
    x0_.reserve(K * di);
    thrust_kernels::launch(K, tk::endpoints_at<S, R>{raw(fresh_), raw(cur_.seg), raw(cur_.t), raw(P_), raw(Q_), di, raw(x0_)});
    idx w = di;
    for (const layer_run<S>* l : prefix_) {
      x1_.reserve(K * l->out.size());
      run_forward(*l, K, raw(x0_), raw(x1_));
      x0_.swap(x1_);
      w = l->out.size();
    }
    NNLENS_EXPECTS(w == cur_.d);
    thrust_kernels::launch(K, tk::scatter_rows<S>{raw(fresh_), raw(x0_), cur_.d, raw(cur_.v)});
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
