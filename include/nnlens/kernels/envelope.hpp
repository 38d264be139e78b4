// nnlens/kernels/envelope.hpp -- the split rules ExactLine's pwl_rule traits are built from.
//
//   knot_breaks(knots, a, b, n, out)   element-wise piecewise-linear units with knots k: the local
//                                      ratios s in (0, 1) where a_i + s (b_i - a_i) crosses a knot
//                                      STRICTLY (an end sitting on a knot never splits)
//   envelope_walk(a, b, n, floor, f)   the upper envelope of n lines v_k(s) = a_k + s (b_k - a_k)
//                                      on [0, 1] (and of the constant `floor`, if given): calls
//                                      f(s, winner) at every s in (0, 1) where the arg-max changes,
//                                      in ascending s; returns the winner at s = 0 (n = the floor)
//   envelope_breaks(a, b, n, floor, out)  just the ratios
//   sort_small(x, n)                       a piece's proposed ratios in ascending order (no
//                                      recursion or allocation: a device work item sorts its pair's)
//   merge_piece(t0, t1, s, n, tol, keep)  which of a piece's sorted local ratios become points
//   add_at(dst, v, d, t, j, n, ts)         a polyline's values at ratio t, added to dst
//
// Ratios are computed in R from values of type T (R(a) etc. before subtracting: never narrowed).
// The walk (docs/specs/exactline.md#24-maxpool): start with the arg-max at s = 0, ties to the steeper line
// and then to the lower index; repeatedly find the first crossing, after the current s, by a line
// steeper than the current winner (ties in s go to the steepest, then the lower index).  The slope
// rises at every step, so there are at most n breaks and the walk ends.  This is correct with
// ties (two lines overtaking at the same s) where SyReNN's first-index rule is not.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <type_traits>
#include <vector>

#include "nnlens/core/hd.hpp"
#include "nnlens/kernels/simd.hpp"

namespace nnlens::exactline {

template <class R>
NNLENS_HD inline void sift_down(R* x, std::size_t root, std::size_t end) {
  for (;;) {
    std::size_t c = 2 * root + 1;
    if (c >= end) return;
    if (c + 1 < end && x[c] < x[c + 1]) ++c;
    if (!(x[root] < x[c])) return;
    const R t = x[root];
    x[root] = x[c];
    x[c] = t;
    root = c;
  }
}

/// Sorts x[0..n) ascending in place: insertion sort for short runs, heapsort beyond (no recursion,
/// no allocation: on the thrust backend one work item sorts the candidates of its pair; the host
/// sorts a piece's with it too, so both order them by the same comparisons).
template <class R>
NNLENS_HD inline void sort_small(R* x, std::size_t n) {
  if (n <= 24) {
    for (std::size_t i = 1; i < n; ++i) {
      const R v = x[i];
      std::size_t j = i;
      for (; j > 0 && v < x[j - 1]; --j) x[j] = x[j - 1];
      x[j] = v;
    }
    return;
  }
  for (std::size_t i = n / 2; i-- > 0;) sift_down(x, i, n);
  for (std::size_t end = n - 1; end > 0; --end) {
    const R t = x[0];
    x[0] = x[end];
    x[end] = t;
    sift_down(x, 0, end);
  }
}

/// Whether a unit going from a to b crosses the knot k strictly, and where (s, in R).  NNLENS_HD:
/// the thrust backend's knot rule calls it too (thrust/exactline_kernels.hpp, knot_proposer).
template <class R, class T>
NNLENS_HD inline bool knot_cross(T a, T b, T k, R& s) {
  // bitwise, not short-circuit: one well-predicted branch per unit (most units never cross)
  if (!(((a < k) & (b > k)) | ((a > k) & (b < k)))) return false;
  s = (R(k) - R(a)) / (R(b) - R(a));
  return true;
}

template <class R, class T>
void knot_breaks(std::span<const double> knots, const T* a, const T* b, std::size_t n, std::vector<R>& out) {
  for (double kd : knots) {
    const T k = static_cast<T>(kd);
    auto one = [&](std::size_t i) {
      R r;
      if (knot_cross(a[i], b[i], k, r)) out.push_back(r);
    };
    std::size_t i = 0;
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      // a vector of units at a time; look closer only where one crosses
      namespace simd = kernels::simd;
      constexpr std::size_t W = simd::width<T>;
      const auto kv = simd::broadcast(k);
      for (; i + W <= n; i += W) {
        const auto va = simd::load(a + i), vb = simd::load(b + i);
        if (simd::any(((va < kv) & (vb > kv)) | ((va > kv) & (vb < kv))))
          for (std::size_t l = 0; l < W; ++l) one(i + l);
      }
    }
    for (; i < n; ++i) one(i);
  }
}

/// The walk itself, on lines given by line(k, a_k, d_k) (value at 0 and slope, in R) for
/// k < total: f(s, winner) at each change, in ascending s; returns the winner at s = 0.  NNLENS_HD
/// (no std:: types, no exceptions): the thrust backend's max-window rule runs this same code on
/// the device (thrust/exactline_kernels.hpp, pool_proposer).
template <class R, class Line, class F>
NNLENS_HD std::size_t envelope_walk_lines(std::size_t total, const Line& line, F&& f) {
  if (total == 0) return 0;
  // the winner at s = 0: the largest a; ties to the larger slope, then the lower index
  std::size_t c = 0;
  R ac, dc;
  line(0, ac, dc);
  for (std::size_t k = 1; k < total; ++k) {
    R ak, dk;
    line(k, ak, dk);
    if (ak > ac || (ak == ac && dk > dc)) c = k, ac = ak, dc = dk;
  }
  const std::size_t first = c;
  R s_last = R(0);
  for (;;) {
    std::size_t best = total;
    R bs = R(0), ba = R(0), bd = R(0);
    for (std::size_t k = 0; k < total; ++k) {
      R ak, dk;
      line(k, ak, dk);
      if (!(dk > dc)) continue;
      const R s = (ac - ak) / (dk - dc);  // v_c(s) == v_k(s)
      if (!(s > s_last)) continue;
      if (best == total || s < bs || (s == bs && dk > bd)) best = k, bs = s, ba = ak, bd = dk;
    }
    if (best == total || !(bs < R(1))) break;
    f(bs, best);
    s_last = bs;
    c = best, ac = ba, dc = bd;
  }
  return first;
}

/// See the header comment.  `a` and `b` are read through get(k) -> std::pair<T, T> (so strided
/// windows need no copy).  f(s, winner) for each change; winner == n stands for the floor.
template <class R, class T, class Get, class F>
std::size_t envelope_walk(std::size_t n, Get&& get, const std::optional<T>& floor, F&& f) {
  return envelope_walk_lines<R>(n + (floor ? 1 : 0), [&](std::size_t k, R& ak, R& dk) {
    if (k == n) {
      ak = R(*floor), dk = R(0);
      return;
    }
    auto [a, b] = get(k);
    ak = R(a), dk = R(b) - ak;
  }, f);
}

/// The arg-max change points of a window of n lines (plus the floor), appended to out.
template <class R, class T, class Get>
void envelope_breaks(std::size_t n, Get&& get, const std::optional<T>& floor, std::vector<R>& out) {
  envelope_walk<R, T>(n, get, floor, [&](const R& s, std::size_t) { out.push_back(s); });
}

/// The merge rule of a piece t0 -> t1 (the host's refine and the thrust kernels alike): its local
/// ratios s[0..n), sorted; a ratio equal to the one before is dropped uncounted (std::unique);
/// t = t0 + s (t1 - t0) within tol of the last kept point (or t0) or of t1 counts as merged;
/// keep(e, t) for every other, in order.  Returns the merged count.
template <class R, class Keep>
NNLENS_HD std::size_t merge_piece(R t0, R t1, const R* s, std::size_t n, R tol, Keep&& keep) {
  const R dt = t1 - t0;
  R last = t0;
  std::size_t merged = 0;
  for (std::size_t e = 0; e < n; ++e) {
    if (e > 0 && s[e] == s[e - 1]) continue;
    const R t = t0 + s[e] * dt;
    if (!(t - last > tol) || !(t1 - t > tol)) {
      ++merged;
      continue;
    }
    keep(e, t);
    last = t;
  }
  return merged;
}

/// dst[0..d) += the values at ratio t of a polyline with n points at ratios ts (values v, d per
/// point), j the last point with ts[j] <= t (or 0): its values there, or interpolated between
/// points j and j + 1 (exact on an affine piece).  A composite's join on the host and the device.
template <class S, class R>
NNLENS_HD void add_at(S* dst, const S* v, std::size_t d, R t, std::size_t j, std::size_t n, const R* ts) {
  const S* va = v + j * d;
  if (ts[j] == t || j + 1 == n) {
    for (std::size_t e = 0; e < d; ++e) dst[e] += va[e];
    return;
  }
  const S a = S((t - ts[j]) / (ts[j + 1] - ts[j]));
  const S* vb = va + d;
  for (std::size_t e = 0; e < d; ++e) dst[e] += va[e] + a * (vb[e] - va[e]);
}

}  // namespace nnlens::exactline
