// nnlens/kernels/grouped_conv.hpp -- a grouped convolution with a few channels per group (ResNeXt's,
// RegNet's) of one sample, channels last: no im2col, no GEMM per group.
//
//   kernels::grouped_conv_pack(w, O, Cg, groups, taps, wt)       the weights laid out for the kernel,
//                                                                once per layer call
//   kernels::grouped_conv(x, C, H, W, g, O, wt, b, OH, OW, y, scratch)   one sample
//       y[o][oh][ow] = b[o] + sum_{i,j,ci} w[o][ci][i][j] * x[gi*Cg + ci][oh*sh + i*dh - pt][ow*sw + j*dw - pl]
//       gi = o / Og, Cg = C / groups, Og = O / groups; taps outside the input skipped
//
// Why: im2col of each group and a GEMM of Og rows (16 in RegNetX-400MF) over a few pixels ran these
// layers at 5-10 GFLOP/s, mostly packing.  Here the sample is copied channels last, each group's
// weights are laid out [taps][Cg][Og], and each output pixel of a group accumulates its Og outputs
// as one or two vectors of accumulators, four groups at a time: bias, then the taps (i, j) in
// order, each over its input channels in order.  A fixed order for given sizes: the results do not depend on the batch.
// requires: x holds C*H*W scalars (NCHW), w O*Cg*kh*kw (PyTorch's [O, C/groups, kh, kw]) and wt
//           as many, b O, y O*OH*OW, scratch grouped_conv_scratch(...) scalars; OH, OW the geometry's; C and O
//           divisible by groups; grouped_conv_takes(Og) (one or two vectors of float outputs per
//           group), kh*kw <= grouped_max_taps, kw <= depthwise_max_kw.
#pragma once

#include <cstddef>

#include "nnlens/kernels/conv.hpp"
#include "nnlens/kernels/depthwise.hpp"

namespace nnlens::kernels {

inline constexpr std::size_t grouped_max_taps = 64;

/// One sample's scratch: its channels-last copies of x and y.
constexpr std::size_t grouped_conv_scratch(std::size_t C, std::size_t H, std::size_t W, std::size_t O, std::size_t OH,
                                           std::size_t OW) {
  return C * H * W + O * OH * OW;
}

/// wt[G][taps][Cg][Og] from PyTorch's w[O][Cg][taps].
template <class T>
void grouped_conv_pack(const T* w, std::size_t O, std::size_t Cg, std::size_t G, std::size_t taps, T* wt) {
  const std::size_t Og = O / G;
  for (std::size_t gi = 0; gi < G; ++gi)
    for (std::size_t o = 0; o < Og; ++o)
      for (std::size_t ci = 0; ci < Cg; ++ci)
        for (std::size_t t = 0; t < taps; ++t)
          wt[((gi * taps + t) * Cg + ci) * Og + o] = w[((gi * Og + o) * Cg + ci) * taps + t];
}

namespace detail {
/// One output pixel of every group, Og = V vectors: groups in blocks of 4 / V, so that four
/// independent accumulator vectors hide the multiply-add latency; the last groups one by one.
template <std::size_t V, class T>
inline void grouped_pixel(const T* xt, const T* wt, const T* b, const std::size_t* xo, const std::size_t* to,
                          std::size_t nt, std::size_t G, std::size_t Cg, std::size_t taps, T* yp) {
  using Vec = simd::vec<T>;
  constexpr std::size_t N = simd::width<T>, Og = V * N, GB = 4 / V;
  std::size_t gi = 0;
  for (; gi + GB <= G; gi += GB) {
    Vec a[GB][V];
    for (std::size_t k = 0; k < GB; ++k)
      for (std::size_t v = 0; v < V; ++v) a[k][v] = simd::load(b + (gi + k) * Og + v * N);
    for (std::size_t t = 0; t < nt; ++t)
      for (std::size_t ci = 0; ci < Cg; ++ci)
        for (std::size_t k = 0; k < GB; ++k) {
          const Vec xv = simd::broadcast(xt[xo[t] + (gi + k) * Cg + ci]);
          const T* wp = wt + (((gi + k) * taps + to[t]) * Cg + ci) * Og;
          for (std::size_t v = 0; v < V; ++v) a[k][v] += xv * simd::load(wp + v * N);
        }
    for (std::size_t k = 0; k < GB; ++k)
      for (std::size_t v = 0; v < V; ++v) simd::store(yp + (gi + k) * Og + v * N, a[k][v]);
  }
  for (; gi < G; ++gi) {
    Vec a[V];
    for (std::size_t v = 0; v < V; ++v) a[v] = simd::load(b + gi * Og + v * N);
    for (std::size_t t = 0; t < nt; ++t)
      for (std::size_t ci = 0; ci < Cg; ++ci) {
        const Vec xv = simd::broadcast(xt[xo[t] + gi * Cg + ci]);
        const T* wp = wt + ((gi * taps + to[t]) * Cg + ci) * Og;
        for (std::size_t v = 0; v < V; ++v) a[v] += xv * simd::load(wp + v * N);
      }
    for (std::size_t v = 0; v < V; ++v) simd::store(yp + gi * Og + v * N, a[v]);
  }
}
}  // namespace detail

/// Whether grouped_conv takes a layer of Og output channels per group: one or two vectors of float
/// (so the plan does not depend on the scalar: double's are two or four of its vectors).
constexpr bool grouped_conv_takes(std::size_t Og) {
  return Og == simd::width<float> || Og == 2 * simd::width<float>;
}

template <class T>
void grouped_conv(const T* x, std::size_t C, std::size_t H, std::size_t W, const conv_geometry& g, std::size_t O,
                  const T* wt, const T* b, std::size_t OH, std::size_t OW, T* y, T* scratch) {
  const std::size_t G = g.groups, Cg = C / G, Og = O / G, taps = g.kh * g.kw, HW = H * W, P = OH * OW;
  T* xt = scratch;      // [H*W][C]
  T* yt = xt + HW * C;  // [P][O]
  detail::transpose(x, C, HW, xt);
  output_range cols[depthwise_max_kw];
  for (std::size_t j = 0; j < g.kw; ++j) cols[j] = tap_cols(g, W, OW, j);
  std::size_t xo[grouped_max_taps], to[grouped_max_taps];  // a pixel's taps: input pixel, tap index
  for (std::size_t oh = 0; oh < OH; ++oh)
    for (std::size_t ow = 0; ow < OW; ++ow) {
      const std::size_t nt = detail::pixel_taps(g, H, W, cols, oh, ow, C, 1, xo, to);
      T* yp = yt + (oh * OW + ow) * O;
      if (Og == simd::width<T>)
        detail::grouped_pixel<1>(xt, wt, b, xo, to, nt, G, Cg, taps, yp);
      else if (Og == 2 * simd::width<T>)
        detail::grouped_pixel<2>(xt, wt, b, xo, to, nt, G, Cg, taps, yp);
      else
        detail::grouped_pixel<4>(xt, wt, b, xo, to, nt, G, Cg, taps, yp);
    }
  detail::transpose(yt, P, O, y);
}

}  // namespace nnlens::kernels
