// nnlens/thrust/exactline_kernels.hpp -- the device kernels of ExactLine over many segments
// (nnlens/thrust/exactline.hpp), on raw device pointers.
//
// The points of all segments are rows of one batch, sorted by (segment, t): seg[r] (segment id),
// t[r] (the ratio, R = double) and v[r * d .. r * d + d) (the tensor before the next layer).  A
// "pair" r is rows r and r + 1 of the same segment (a piece).
//
//   knot_proposer<T, R>{d, knots, nk}    an element-wise op's rule (pwl_rule<L>::knots, any op):
//                                        local ratios s in (0, 1) where a unit of the piece crosses
//                                        a knot strictly (exactline::knot_breaks), at most
//                                        max_knots knots
//   pool_proposer<T, R>{dims, floor?}    a max window's rule: the arg-max changes of every window
//                                        (and of the floor c of a fused max(x, c)), the envelope walk
//                                        of exactline::envelope_walk, the same tie rules
//   count_pairs / fill_pairs             candidates per pair; written at exclusive-scan offsets and
//                                        sorted there (exactline::sort_small, as the host sorts them)
//   merge_pairs                          per pair, over its sorted candidates: drops exact repeats
//                                        (std::unique) and ratios within merge_tol of the last kept
//                                        point or of the pair's end (counted as merged), as the host
//   move_rows / scatter_new              the refined batch: old rows move by the kept count before
//                                        them; kept candidates become rows with values interpolated
//                                        between the pair's ends (the layer then runs on every row);
//                                        move_rows also drops the rows of failed segments
//   join_union / join_values             a composite (Residual, Concat): the union of its branches'
//                                        points per segment (the host's merge rule), then each row
//                                        the join of the branches' values there
//   segment_update                       new row offsets per segment, merged and proposed counts
//   endpoints_at / scatter_rows          reanchor inputs, writing rows back
//
// requires: thrust with THRUST_DEVICE_SYSTEM set by the build (as nnlens/thrust/kernels.hpp).
// ensures:  every launcher is one thrust::for_each over an index range of an NNLENS_HD functor with
//           no exceptions, no std:: containers, no recursion; ratios are computed in R from T values
//           with the host's formulas (R(k) - R(a)) / (R(b) - R(a)) and t_j + s (t_{j+1} - t_j), so the
//           device and the host agree bit for bit when their inputs to a split layer agree.
#pragma once

#include <cstddef>

#include <thrust/execution_policy.h>
#include <thrust/for_each.h>
#include <thrust/iterator/counting_iterator.h>

#include "nnlens/config.hpp"
#include "nnlens/kernels/envelope.hpp"
#include "nnlens/thrust/kernels.hpp"

namespace nnlens::thrust_kernels::line {

/// A proposer's candidates: counted, and written to out unless it is null.
template <class R>
struct emit_to {
  R* out = nullptr;
  idx n = 0;
  NNLENS_HD void operator()(R s) {
    if (out) out[n] = s;
    ++n;
  }
};

/// An element-wise op with knots k (pwl_rule<L>::knots): a unit crosses a knot strictly inside the
/// piece a -> b (an end on a knot never splits); the host's formulas, knot by knot.
template <class T, class R>
struct knot_proposer {
  static constexpr idx max_knots = 8;
  idx d;
  double knots[max_knots];
  idx nk;
  template <class E>
  NNLENS_HD void operator()(const T* a, const T* b, E& emit) const {
    for (idx q = 0; q < nk; ++q) {
      const T k = static_cast<T>(knots[q]);
      for (idx i = 0; i < d; ++i) {
        R s;
        if (exactline::knot_cross(a[i], b[i], k, s) && s > R(0) && s < R(1)) emit(s);
      }
    }
  }
};

/// A max window (optionally with the floor max(., c) of a fused element-wise op): per window, in
/// the host's window order (channel, row, column; elements row-major), the envelope walk.
template <class T, class R>
struct pool_proposer {
  window_dims dm;
  bool has_floor = false;
  T floor = T(0);
  template <class E>
  NNLENS_HD void operator()(const T* a, const T* b, E& emit) const {
    for (idx c = 0; c < dm.C; ++c)
      for (idx oh = 0; oh < dm.OH; ++oh) {
        const pool_span r = pool_rows(dm, oh);
        for (idx ow = 0; ow < dm.OW; ++ow) {
          const pool_span q = pool_cols(dm, ow);
          if (r.hi > r.lo && q.hi > q.lo) walk(a, b, c * dm.H * dm.W + r.lo * dm.W + q.lo, r.hi - r.lo, q.hi - q.lo, emit);
        }
      }
  }

 private:
  // the window's lines (row-major), then the floor: the host's walk (exactline::envelope_walk_lines)
  template <class E>
  NNLENS_HD void walk(const T* a, const T* b, idx base, idx nh, idx nw, E& emit) const {
    const idx n = nh * nw;
    exactline::envelope_walk_lines<R>(n + (has_floor ? 1 : 0), [&](idx k, R& ak, R& dk) {
      if (k == n) {
        ak = R(floor), dk = R(0);
        return;
      }
      const idx i = base + (k / nw) * dm.W + k % nw;
      ak = R(a[i]);
      dk = R(b[i]) - ak;
    }, [&](R s, idx) { emit(s); });
  }
};

/// cnt[r] = number of candidates of pair r (0 across segments and for the last row).
template <class T, class R, class P>
struct count_pairs {
  const idx* seg;
  const T* v;
  idx n, d;
  P prop;
  idx* cnt;
  NNLENS_HD void operator()(idx r) const {
    if (r + 1 >= n || seg[r] != seg[r + 1]) {
      cnt[r] = 0;
      return;
    }
    emit_to<R> e;
    prop(v + r * d, v + (r + 1) * d, e);
    cnt[r] = e.n;
  }
};

template <class T, class R, class P>
struct fill_pairs {
  const idx* cnt;
  const idx* off;
  const T* v;
  idx d;
  P prop;
  R* s;
  idx* pair;
  NNLENS_HD void operator()(idx r) const {
    if (cnt[r] == 0) return;
    R* o = s + off[r];
    emit_to<R> e{o};
    prop(v + r * d, v + (r + 1) * d, e);
    exactline::sort_small(o, e.n);
    for (idx q = 0; q < e.n; ++q) pair[off[r] + q] = r;
  }
};

/// After sorting the candidates by (pair, s): keep[e] in {0, 1}; kept[r], merged[r] per pair
/// (exactline::merge_piece: the host's rule).
template <class R>
struct merge_pairs {
  const idx* cnt;
  const idx* off;
  const R* t;
  const R* s;
  R tol;
  idx* keep;
  idx* kept;
  idx* merged;
  NNLENS_HD void operator()(idx r) const {
    const idx c = cnt[r], o = off[r];
    idx k = 0;
    for (idx e = o; e < o + c; ++e) keep[e] = 0;
    merged[r] = c ? exactline::merge_piece(t[r], t[r + 1], s + o, c, tol, [&](idx e, R) { keep[o + e] = 1, ++k; }) : 0;
    kept[r] = k;
  }
};

/// Moves row r (segment, ratio, values) to pos[r] (pos null: r + koff[r], the rows kept before
/// it); with live set, only the rows of live segments (live[seg[r]]) move.
template <class T, class R>
struct move_rows {
  const idx* seg;
  const R* t;
  const T* v;
  const idx* koff;
  const idx* pos;
  const idx* live;
  idx d;
  idx* seg2;
  R* t2;
  T* v2;
  NNLENS_HD void operator()(idx r) const {
    if (live && !live[seg[r]]) return;
    const idx nr = pos ? pos[r] : r + koff[r];
    seg2[nr] = seg[r];
    t2[nr] = t[r];
    for (idx i = 0; i < d; ++i) v2[nr * d + i] = v[r * d + i];
  }
};

/// Kept candidate e of pair r becomes row r + 1 + g[e] (g: exclusive scan of keep).
template <class T, class R>
struct scatter_new {
  const idx* seg;
  const R* t;
  const T* v;
  const idx* pair;
  const R* s;
  const idx* keep;
  const idx* g;
  idx d;
  idx* seg2;
  R* t2;
  T* v2;
  idx* fresh;  // may be null: fresh[g[e]] = the new row (reanchor)
  NNLENS_HD void operator()(idx e) const {
    if (!keep[e]) return;
    const idx r = pair[e], row = r + 1 + g[e];
    const R t0 = t[r], dt = t[r + 1] - t0;
    seg2[row] = seg[r];
    t2[row] = t0 + s[e] * dt;
    const T a = T(s[e]);
    const T* va = v + r * d;
    const T* vb = va + d;
    T* dst = v2 + row * d;
    for (idx i = 0; i < d; ++i) dst[i] = va[i] + a * (vb[i] - va[i]);
    if (fresh) fresh[g[e]] = row;
  }
};

/// Per segment g (rows [off[g], off[g+1])): its new offsets, merged and proposed counts.
struct segment_update {
  const idx* off;  // G + 1 entries
  const idx* koff;  // n entries
  const idx* cnt;
  const idx* merged;
  idx n, K, G;
  idx* off2;  // G + 1 entries
  idx* mseg;
  idx* pseg;
  NNLENS_HD void operator()(idx g) const {
    const idx o = off[g];
    off2[g] = o < n ? o + koff[o] : n + K;
    if (g == G) return;
    idx m = 0, p = 0;
    const idx e = off[g + 1];
    for (idx r = o; r < e; ++r) m += merged[r], p += cnt[r];
    mseg[g] = m;
    pseg[g] = p;
  }
};

/// x[k] = P + T(t) (Q - P) of segment seg[r] for the rows r = fresh[k] (reanchor).
template <class T, class R>
struct endpoints_at {
  const idx* fresh;
  const idx* seg;
  const R* t;
  const T* PQ;  // P and Q of segment g: rows 2 g and 2 g + 1
  idx di;
  T* x;
  NNLENS_HD void operator()(idx k) const {
    const idx r = fresh[k];
    const T a = T(t[r]);
    const T *P = PQ + 2 * seg[r] * di, *Q = P + di;
    for (idx i = 0; i < di; ++i) x[k * di + i] = P[i] + a * (Q[i] - P[i]);
  }
};

template <class T>
struct scatter_rows {
  const idx* rows;
  const T* x;
  idx d;
  T* v;
  NNLENS_HD void operator()(idx k) const {
    for (idx i = 0; i < d; ++i) v[rows[k] * d + i] = x[k * d + i];
  }
};

struct live_flag {
  const idx* seg;
  const idx* live;
  idx* out;
  NNLENS_HD void operator()(idx r) const { out[r] = live[seg[r]]; }
};

/// At most this many branches per composite on the device.
inline constexpr idx max_branches = 8;

/// One branch of a composite after its walk: rows sorted by (segment, t), off[g] the first row of
/// segment g (G + 1 entries), and where its values go in a joined row (a sum: 0; a concat: its offset).
template <class T, class R>
struct branch_rows {
  const R* t = nullptr;
  const idx* off = nullptr;
  const T* v = nullptr;
  idx d = 0, at = 0;
};

/// The union of the branches' ratios of segment g, in order, exact repeats once.
template <class T, class R>
struct union_cursor {
  const branch_rows<T, R>* br;
  idx nb, pos[max_branches], end[max_branches];
  NNLENS_HD union_cursor(const branch_rows<T, R>* b, idx n, idx g) : br(b), nb(n) {
    for (idx q = 0; q < nb; ++q) pos[q] = br[q].off[g], end[q] = br[q].off[g + 1];
  }
  NNLENS_HD bool next(R& v) {
    bool any = false;
    for (idx q = 0; q < nb; ++q)
      if (pos[q] < end[q] && (!any || br[q].t[pos[q]] < v)) v = br[q].t[pos[q]], any = true;
    for (idx q = 0; q < nb && any; ++q)
      if (pos[q] < end[q] && br[q].t[pos[q]] == v) ++pos[q];
    return any;
  }
};

/// A composite's points per live segment g, as the host's composite step: the union of the
/// branches' ratios; then, with tol > 0 and more than 2 points, a point stays if the composite's
/// input has it (tin, offin) or if it lies more than tol after the last kept point and before the
/// last point (the others count as merged).  Count pass (t_out null): cnt[g], merged[g]; fill
/// pass: t_out and seg_out from off_out[g].
template <class T, class R>
struct join_union {
  branch_rows<T, R> br[max_branches];
  idx nb;
  const R* tin;
  const idx* offin;
  const idx* live;
  R tol;
  idx *cnt, *merged;
  const idx* off_out;
  R* t_out;
  idx* seg_out;
  NNLENS_HD bool is_old(idx g, R v) const {
    idx a = offin[g], z = offin[g + 1];
    while (a < z) {
      const idx m = (a + z) / 2;
      if (tin[m] < v) a = m + 1;
      else z = m;
    }
    return a < offin[g + 1] && tin[a] == v;
  }
  NNLENS_HD void operator()(idx g) const {
    if (!live[g]) {
      if (!t_out) cnt[g] = merged[g] = 0;
      return;
    }
    R v = R(0), last = R(0), kept = R(0);
    idx u = 0, k = 0, m = 0;
    for (union_cursor<T, R> c(br, nb, g); c.next(v);) ++u, last = v;
    const bool merge = tol > R(0) && u > 2;
    union_cursor<T, R> c(br, nb, g);
    for (idx i = 0; c.next(v); ++i) {
      if (merge && i > 0 && !is_old(g, v) && !(v - kept > tol && (i + 1 == u || last - v > tol))) {
        ++m;
        continue;
      }
      if (t_out) t_out[off_out[g] + k] = v, seg_out[off_out[g] + k] = g;
      kept = v, ++k;
    }
    if (!t_out) cnt[g] = k, merged[g] = m;
  }
};

/// The joined row r (segment seg[r], ratio t[r]): 0, then each branch's value at t[r] added at its
/// place, in branch order (its row there, or interpolated between the rows around t[r]), as the host.
template <class T, class R>
struct join_values {
  branch_rows<T, R> br[max_branches];
  idx nb, dout;
  const R* t;
  const idx* seg;
  T* v;
  NNLENS_HD void operator()(idx r) const {
    const idx g = seg[r];
    const R tu = t[r];
    T* dst = v + r * dout;
    for (idx e = 0; e < dout; ++e) dst[e] = T(0);
    for (idx q = 0; q < nb; ++q) {
      const branch_rows<T, R>& c = br[q];
      const idx lo = c.off[g], hi = c.off[g + 1];
      idx a = lo, z = hi;  // the last row j with t[j] <= tu
      while (a < z) {
        const idx m = (a + z) / 2;
        if (c.t[m] <= tu) a = m + 1;
        else z = m;
      }
      const idx j = a > lo ? a - 1 : lo;
      exactline::add_at(dst + c.at, c.v + lo * c.d, c.d, tu, j - lo, hi - lo, c.t + lo);
    }
  }
};

}  // namespace nnlens::thrust_kernels::line
