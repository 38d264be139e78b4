// nnlens/kernels/depthwise.hpp -- a depthwise convolution (one input channel per group) of one
// sample, directly on its planes: no im2col, no GEMM.
//
//   kernels::depthwise_conv(x, C, H, W, g, m, w, b, OH, OW, y)
//       y[c*m + k][oh][ow] = b[c*m + k] + sum_{i,j} w[c*m + k][i][j] * x[c][oh*sh + i*dh - pt][ow*sw + j*dw - pl]
//       for every input channel c < C and channel multiplier k < m (m = out / groups, the
//       geometry's groups == C), taps outside the input skipped (zero padding)
//
// Why: im2col of one channel and a GEMM with one row per group (a matrix-vector product) ran these
// layers at 0.3-6 GFLOP/s.  Here each output row is accumulated in place, tap after tap, in the
// order (i, j) after the bias; a row of an output plane stays in the L1 cache while its kh*kw taps
// add into it, and the inner loop over the row's columns is a vector loop (stride 1 contiguous,
// stride 2 as two interleaved streams).  Each output element is one dot product in a fixed order
// for given sizes: the results do not depend on the batch or the thread that ran them.
// requires: x holds C*H*W scalars (NCHW), w holds C*m*kh*kw (PyTorch's [out, 1, kh, kw]), b C*m,
//           y C*m*OH*OW; OH, OW the geometry's out_h / out_w; g.groups == C.
#pragma once

#include <cstddef>

#include "nnlens/kernels/conv.hpp"

namespace nnlens::kernels {

namespace detail {
/// yr[o] += w * xs[o * S] for o in [0, n): S = 1 and 2 fixed (vector loops), other strides by value.
template <std::size_t S, class T>
inline void depthwise_tap(T* __restrict yr, const T* __restrict xs, T w, std::size_t n, std::size_t s) {
  if constexpr (S == 0) {
    for (std::size_t o = 0; o < n; ++o) yr[o] += w * xs[o * s];
  } else {
    for (std::size_t o = 0; o < n; ++o) yr[o] += w * xs[o * S];
  }
}

template <std::size_t S, class T>
void depthwise_plane(const T* x, std::size_t H, std::size_t W, const conv_geometry& g, const T* w, T bias,
                     std::size_t OH, std::size_t OW, const output_range* cols, T* y) {
  for (std::size_t oh = 0; oh < OH; ++oh) {
    T* yr = y + oh * OW;
    for (std::size_t o = 0; o < OW; ++o) yr[o] = bias;
    for (std::size_t i = 0; i < g.kh; ++i) {
      const std::ptrdiff_t ih = std::ptrdiff_t(oh * g.stride_h + i * g.dilation_h) - std::ptrdiff_t(g.pad_top);
      if (ih < 0 || ih >= std::ptrdiff_t(H)) continue;
      const T* xr = x + std::size_t(ih) * W;
      for (std::size_t j = 0; j < g.kw; ++j) {
        const output_range& r = cols[j];
        if (r.lo < r.hi)
          depthwise_tap<S>(yr + r.lo, xr + r.first, w[i * g.kw + j], r.hi - r.lo, g.stride_w);
      }
    }
  }
}
}  // namespace detail

/// The taps of a kernel wider than this many columns are computed by the caller's general path.
inline constexpr std::size_t depthwise_max_kw = 64;

template <class T>
void depthwise_conv(const T* x, std::size_t C, std::size_t H, std::size_t W, const conv_geometry& g, std::size_t m,
                    const T* w, const T* b, std::size_t OH, std::size_t OW, T* y) {
  output_range cols[depthwise_max_kw];
  for (std::size_t j = 0; j < g.kw; ++j) cols[j] = tap_cols(g, W, OW, j);
  const std::size_t taps = g.kh * g.kw, plane = OH * OW;
  for (std::size_t c = 0; c < C; ++c)
    for (std::size_t k = 0; k < m; ++k) {
      const std::size_t o = c * m + k;
      const T* xc = x + c * H * W;
      T* yo = y + o * plane;
      if (g.stride_w == 1)
        detail::depthwise_plane<1>(xc, H, W, g, w + o * taps, b[o], OH, OW, cols, yo);
      else if (g.stride_w == 2)
        detail::depthwise_plane<2>(xc, H, W, g, w + o * taps, b[o], OH, OW, cols, yo);
      else
        detail::depthwise_plane<0>(xc, H, W, g, w + o * taps, b[o], OH, OW, cols, yo);
    }
}

}  // namespace nnlens::kernels
