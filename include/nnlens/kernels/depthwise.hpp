// nnlens/kernels/depthwise.hpp -- a depthwise convolution (one input channel per group) of one
// sample, directly on its planes: no im2col, no GEMM.
//
//   kernels::depthwise_pack(w, C, taps, wt)       the weights channels last, once per layer call
//   kernels::depthwise_conv(x, C, H, W, g, m, w, wt, b, OH, OW, y, scratch)   one sample
//       y[c*m + k][oh][ow] = b[c*m + k] + sum_{i,j} w[c*m + k][i][j] * x[c][oh*sh + i*dh - pt][ow*sw + j*dw - pl]
//       for every input channel c < C and channel multiplier k < m (m = out / groups, the
//       geometry's groups == C), taps outside the input skipped (zero padding)
//
// Why: im2col of one channel and a GEMM with one row per group (a matrix-vector product) ran these
// layers at 0.3-6 GFLOP/s.  With one output channel per input channel (m == 1, MobileNet's and
// EfficientNet's), the sample is copied channels last and each output pixel accumulates its taps
// as one vector loop over the channels, whatever the stride or the plane's width; with a channel
// multiplier (m > 1) each output row is accumulated in place, tap after tap, the inner loop over
// the row's columns a vector loop (stride 1 contiguous, stride 2 as two interleaved streams).
// Either way each output element is the bias plus the taps (i, j) in order: a fixed order for
// given sizes, so the results do not depend on the batch or the thread that ran them.
// requires: x holds C*H*W scalars (NCHW), w holds C*m*kh*kw (PyTorch's [out, 1, kh, kw]), b C*m,
//           y C*m*OH*OW, scratch depthwise_scratch(...) scalars, wt depthwise_pack's weights
//           where that scratch is not empty (unused otherwise); OH, OW the geometry's out_h /
//           out_w; g.groups == C.
#pragma once

#include <cstddef>

#include "nnlens/kernels/conv.hpp"
#include "nnlens/kernels/depthwise_rows.hpp"

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

/// dst[q*rows + r] = src[r*cols + q] (rows x cols to cols x rows): 8 x 8 tiles through a local
/// block (fixed-size loops the compiler unrolls), so both sides stay within a few cache lines;
/// fewer than 8 columns: column by column, the stores contiguous.
template <class T>
void transpose(const T* __restrict src, std::size_t rows, std::size_t cols, T* __restrict dst) {
  constexpr std::size_t B = 8;
  if (cols < B) {
    for (std::size_t q = 0; q < cols; ++q)
      for (std::size_t r = 0; r < rows; ++r) dst[q * rows + r] = src[r * cols + q];
    return;
  }
  std::size_t r0 = 0;
  for (; r0 + B <= rows; r0 += B) {
    std::size_t q0 = 0;
    for (; q0 + B <= cols; q0 += B) {
      T t[B][B];
      for (std::size_t r = 0; r < B; ++r)
        for (std::size_t q = 0; q < B; ++q) t[q][r] = src[(r0 + r) * cols + q0 + q];
      for (std::size_t q = 0; q < B; ++q)
        for (std::size_t r = 0; r < B; ++r) dst[(q0 + q) * rows + r0 + r] = t[q][r];
    }
    for (std::size_t r = r0; r < r0 + B; ++r)
      for (std::size_t q = q0; q < cols; ++q) dst[q * rows + r] = src[r * cols + q];
  }
  for (std::size_t r = r0; r < rows; ++r)
    for (std::size_t q = 0; q < cols; ++q) dst[q * rows + r] = src[r * cols + q];
}

/// The taps (i, j) of output pixel (oh, ow) that read inside the [H, W] input, in order: n of them,
/// xo[t] = (input pixel) * xs, to[t] = (i * kw + j) * ts.  cols: tap_cols of each kernel column.
inline std::size_t pixel_taps(const conv_geometry& g, std::size_t H, std::size_t W, const output_range* cols,
                              std::size_t oh, std::size_t ow, std::size_t xs, std::size_t ts, std::size_t* xo,
                              std::size_t* to) {
  std::size_t nt = 0;
  for (std::size_t i = 0; i < g.kh; ++i) {
    const std::ptrdiff_t ih = std::ptrdiff_t(oh * g.stride_h + i * g.dilation_h) - std::ptrdiff_t(g.pad_top);
    if (ih < 0 || ih >= std::ptrdiff_t(H)) continue;
    for (std::size_t j = 0; j < g.kw; ++j) {
      if (ow < cols[j].lo || ow >= cols[j].hi) continue;
      xo[nt] = (std::size_t(ih) * W + cols[j].first + (ow - cols[j].lo) * g.stride_w) * xs;
      to[nt++] = (i * g.kw + j) * ts;
    }
  }
  return nt;
}

/// One output pixel, channels last: yp[c] = b[c] + sum_t wt[wo[t] + c] * xt[xo[t] + c], the taps t in
/// order, four vectors of channels at a time in registers, then one vector, then one channel.
template <class T>
inline void depthwise_pixel(const T* xt, const T* wt, const std::size_t* xo, const std::size_t* wo, std::size_t nt,
                            const T* b, std::size_t C, T* yp) {
  using V = simd::vec<T>;
  constexpr std::size_t N = simd::width<T>;
  std::size_t c = 0;
  for (; c + 4 * N <= C; c += 4 * N) {
    V a0 = simd::load(b + c), a1 = simd::load(b + c + N), a2 = simd::load(b + c + 2 * N), a3 = simd::load(b + c + 3 * N);
    for (std::size_t t = 0; t < nt; ++t) {
      const T* xp = xt + xo[t] + c;
      const T* wp = wt + wo[t] + c;
      a0 += simd::load(wp) * simd::load(xp);
      a1 += simd::load(wp + N) * simd::load(xp + N);
      a2 += simd::load(wp + 2 * N) * simd::load(xp + 2 * N);
      a3 += simd::load(wp + 3 * N) * simd::load(xp + 3 * N);
    }
    simd::store(yp + c, a0);
    simd::store(yp + c + N, a1);
    simd::store(yp + c + 2 * N, a2);
    simd::store(yp + c + 3 * N, a3);
  }
  for (; c + N <= C; c += N) {
    V a = simd::load(b + c);
    for (std::size_t t = 0; t < nt; ++t) a += simd::load(wt + wo[t] + c) * simd::load(xt + xo[t] + c);
    simd::store(yp + c, a);
  }
  for (; c < C; ++c) {
    T a = b[c];
    for (std::size_t t = 0; t < nt; ++t) a += wt[wo[t] + c] * xt[xo[t] + c];
    yp[c] = a;
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
/// Channels last for kernels of at most this many taps (7 x 7 and smaller), plane by plane beyond.
inline constexpr std::size_t depthwise_max_taps = 64;

/// Whether depthwise_conv runs channels last: one output channel per input channel (m == 1) and at
/// most depthwise_max_taps taps.
constexpr bool depthwise_channels_last(std::size_t m, std::size_t kh, std::size_t kw) {
  return m == 1 && kh * kw <= depthwise_max_taps;
}

/// Whether depthwise_conv with one output channel per input channel runs row by row on its planes
/// (kernels/depthwise_rows.hpp) rather than channels last: output rows of at least 32 columns
/// (there a sample's channels-last copies leave L2: mobilenet_v2's 3x3 at 112x112 and 56x56, and
/// 64x64, ran 1.6x-2.3x faster by rows on one AVX-512 core; at 28x28, 0.97x), stride 1 or 2
/// along the rows, and for stride 2 no dilation.
constexpr bool depthwise_by_rows(std::size_t m, const conv_geometry& g, std::size_t OW) {
  return m == 1 && OW >= 32 && g.kh * g.kw <= depthwise_max_taps &&
         (g.stride_w == 1 || (g.stride_w == 2 && g.dilation_w == 1));
}

/// One sample's scratch of depthwise_conv: the channels-last copies of x and y; by rows, one
/// padded plane; none plane by plane.
constexpr std::size_t depthwise_scratch(std::size_t C, std::size_t H, std::size_t W, const conv_geometry& g,
                                        std::size_t m, std::size_t OH, std::size_t OW) {
  if (depthwise_by_rows(m, g, OW)) return detail::depthwise_rows_work(H, W, g);
  return depthwise_channels_last(m, g.kh, g.kw) ? C * (H * W + OH * OW) : 0;
}

/// wt[taps][C] from w[C][taps] (m == 1).
template <class T>
void depthwise_pack(const T* w, std::size_t C, std::size_t taps, T* wt) {
  detail::transpose(w, C, taps, wt);
}

/// One sample.  m == 1: channels last, every tap one vector loop over the channels (planes of a few
/// pixels, strided or not, run at the loop's rate rather than at a few columns per row); m > 1:
/// plane by plane.  Both add the same products in the same order: bias, then the taps (i, j)
/// in order, those in the padding skipped.
template <class T>
void depthwise_conv(const T* x, std::size_t C, std::size_t H, std::size_t W, const conv_geometry& g, std::size_t m,
                    const T* w, const T* wt, const T* b, std::size_t OH, std::size_t OW, T* y, T* scratch) {
  output_range cols[depthwise_max_kw];
  for (std::size_t j = 0; j < g.kw; ++j) cols[j] = tap_cols(g, W, OW, j);
  const std::size_t taps = g.kh * g.kw, plane = OH * OW, HW = H * W;
  if (depthwise_by_rows(m, g, OW)) {
    for (std::size_t c = 0; c < C; ++c)
      detail::depthwise_rows(x + c * HW, H, W, g, w + c * taps, b[c], OH, OW, cols, y + c * plane, scratch);
    return;
  }
  if (depthwise_channels_last(m, g.kh, g.kw)) {
    T* xt = scratch;      // [H*W][C]
    T* yt = xt + HW * C;  // [OH*OW][C]
    detail::transpose(x, C, HW, xt);
    std::size_t xo[depthwise_max_taps], wo[depthwise_max_taps];  // the pixel's taps inside the input
    for (std::size_t oh = 0; oh < OH; ++oh)
      for (std::size_t ow = 0; ow < OW; ++ow) {
        const std::size_t nt = detail::pixel_taps(g, H, W, cols, oh, ow, C, C, xo, wo);
        detail::depthwise_pixel(xt, wt, xo, wo, nt, b, C, yt + (oh * OW + ow) * C);
      }
    detail::transpose(yt, plane, C, y);
    return;
  }
  for (std::size_t c = 0; c < C; ++c)
    for (std::size_t k = 0; k < m; ++k) {
      const std::size_t o = c * m + k;
      const T* xc = x + c * HW;
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
