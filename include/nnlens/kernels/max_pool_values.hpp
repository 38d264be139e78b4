// nnlens/kernels/max_pool_values.hpp -- max pooling's values alone (no arg-max), at memory speed.
//
//   detail::max_pool_values(x, planes, H, W, g, OH, OW, y, work)
//       y[p][oh][ow] = the first maximum, in row-major window order, of plane p's window (oh, ow)
//   detail::max_pool_values_work(H, g, OW)      the scalars of `work` it needs
//   detail::max_pool_values_pays(OW)            where MaxPool2D's forward without a cache takes it
//
// requires: T float or double; g valid, every window overlapping the input (pool_geometry::
//           window_in_padding); x [planes][H][W], y [planes][OH][OW] not aliasing x.
// ensures:  the value bits of the arg-max kernels (kernels/max_pool.hpp): a NaN beats numbers and
//           the first NaN wins; among equal values (+0 and -0) the first in row-major order wins.
// Method: two separable stages, each vectorised over contiguous outputs.  Rows first: each input
// row is split into its stride_w phases (ph_b[m] = row[m*sw + b - pad_left], -inf outside the
// row), so that tap j of every output column ow reads ph_{j % sw}[ow + j / sw], contiguous in ow;
// each row keeps its first maximum over j.  Then columns: output row oh keeps the first maximum
// over its window's input rows, in order.  A row's first maxima then the first among rows is the
// first in row-major order, and -inf padding never beats an input value (nor changes the bits
// when it ties with an input's -inf).
#pragma once

#include <algorithm>
#include <cstddef>
#include <limits>

#include "nnlens/kernels/conv.hpp"
#include "nnlens/kernels/simd.hpp"

namespace nnlens::detail {

/// Whether max_pool_values beats the arg-max kernels (measured on AVX-512: resnet18's 3x3/2 pool
/// to 56x56 ran 2.6x faster; squeezenet's to 15x15 and 7x7, 0.2x): outputs rows of 32 or more.
constexpr bool max_pool_values_pays(std::size_t OW) { return OW >= 32; }

/// The scalars of max_pool_values' work: one row's phases and one plane's row maxima.
constexpr std::size_t max_pool_values_work(std::size_t H, const pool_geometry& g, std::size_t OW) {
  const std::size_t span = (OW - 1) * g.stride_w + g.kw;  // the padded row the windows read
  const std::size_t mq = (span + g.stride_w - 1) / g.stride_w;
  return g.stride_w * mq + H * OW;
}

namespace max_pool_values_impl {

/// m = the first maximum of (m, v), v the later candidate.
template <class V>
inline V later_max(V m, V v) {
  const auto vn = !(v == v), mn = !(m == m);
  return kernels::simd::select((v > m) | (vn & !mn), v, m);
}
template <class T>
inline T later_max_scalar(T m, T v) {
  return (v > m || (v != v && m == m)) ? v : m;
}

/// out[o] = f(o) for o in [0, n) with vectors (the last one overlapping the one before, as f is a
/// pure function of o) and scalars when n is below a vector.
template <class T, class FV, class FS>
inline void for_outputs(std::size_t n, T* out, FV fv, FS fs) {
  namespace simd = kernels::simd;
  constexpr std::size_t N = simd::width<T>;
  if (n < N || N == 1) {
    for (std::size_t o = 0; o < n; ++o) out[o] = fs(o);
    return;
  }
  for (std::size_t o = 0;; o += N) {
    const std::size_t i = std::min(o, n - N);
    simd::store(out + i, fv(i));
    if (i == n - N) break;
  }
}

}  // namespace max_pool_values_impl

template <class T>
void max_pool_values(const T* x, std::size_t planes, std::size_t H, std::size_t W, const pool_geometry& g,
                     std::size_t OH, std::size_t OW, T* y, T* work) {
  namespace simd = kernels::simd;
  namespace mi = max_pool_values_impl;
  using V = simd::vec<T>;
  const std::size_t sw = g.stride_w, span = (OW - 1) * sw + g.kw, mq = (span + sw - 1) / sw;
  const T lo = -std::numeric_limits<T>::infinity();
  T* ph = work;              // [sw][mq]: one input row's phases
  T* rows = work + sw * mq;  // [H][OW]: each input row's first maxima over its windows' columns
  for (std::size_t pl = 0; pl < planes; ++pl) {
    const T* xp = x + pl * H * W;
    for (std::size_t r = 0; r < H; ++r) {
      const T* src = xp + r * W;
      for (std::size_t b = 0; b < sw; ++b) {  // ph_b[m] = src[m*sw + b - pad_left], -inf outside
        T* d = ph + b * mq;
        // m in [m0, m1): inside the row
        const std::size_t m0 = std::min(mq, g.pad_left > b ? (g.pad_left - b + sw - 1) / sw : 0);
        const std::size_t end = g.pad_left + W > b ? (g.pad_left + W - b + sw - 1) / sw : 0;
        const std::size_t m1 = std::max(m0, std::min(mq, end));
        for (std::size_t m = 0; m < m0; ++m) d[m] = lo;
        const T* s0 = src + (m0 * sw + b - g.pad_left);
        if (sw == 1)
          std::copy(s0, s0 + (m1 - m0), d + m0);
        else if (sw == 2)  // a constant stride: the compiler's vector permutes
          for (std::size_t m = 0; m < m1 - m0; ++m) d[m0 + m] = s0[2 * m];
        else
          for (std::size_t m = m0; m < m1; ++m) d[m] = s0[(m - m0) * sw];
        for (std::size_t m = m1; m < mq; ++m) d[m] = lo;
      }
      mi::for_outputs<T>(
          OW, rows + r * OW,
          [&](std::size_t o) {
            V m = simd::load(ph + o);
            for (std::size_t j = 1; j < g.kw; ++j) m = mi::later_max(m, simd::load(ph + (j % sw) * mq + o + j / sw));
            return m;
          },
          [&](std::size_t o) {
            T m = ph[o];
            for (std::size_t j = 1; j < g.kw; ++j) m = mi::later_max_scalar(m, ph[(j % sw) * mq + o + j / sw]);
            return m;
          });
    }
    T* yp = y + pl * OH * OW;
    for (std::size_t oh = 0; oh < OH; ++oh) {
      // the window's input rows [r0, r1), at least one (window_in_padding)
      const std::size_t top = oh * g.stride_h;
      const std::size_t r0 = top > g.pad_top ? top - g.pad_top : 0;
      const std::size_t r1 = std::min(H, top + g.kh > g.pad_top ? top + g.kh - g.pad_top : 0);
      mi::for_outputs<T>(
          OW, yp + oh * OW,
          [&](std::size_t o) {
            V m = simd::load(rows + r0 * OW + o);
            for (std::size_t r = r0 + 1; r < r1; ++r) m = mi::later_max(m, simd::load(rows + r * OW + o));
            return m;
          },
          [&](std::size_t o) {
            T m = rows[r0 * OW + o];
            for (std::size_t r = r0 + 1; r < r1; ++r) m = mi::later_max_scalar(m, rows[r * OW + o]);
            return m;
          });
    }
  }
}

}  // namespace nnlens::detail
