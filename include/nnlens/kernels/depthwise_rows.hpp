// nnlens/kernels/depthwise_rows.hpp -- one channel of a depthwise convolution, row by row, its
// taps summed in registers (kernels/depthwise.hpp's path for wide planes).
//
//   kernels::detail::depthwise_rows(x, H, W, g, w, bias, OH, OW, cols, y, work)
//       y[oh][ow] = bias + sum_{i,j} w[i*kw + j] * x[oh*sh + i*dh - pt][ow*sw + j*dw - pl]
//   kernels::detail::depthwise_rows_work(H, W, g)   the scalars of `work`
//
// requires: stride_w 1, or 2 without dilation (depthwise_by_rows); cols[j] = tap_cols(g, W, OW, j).
// ensures:  the bits of depthwise_conv's other paths: bias, then the taps (i, j) in order, those in
//           the padding skipped, each a multiply-add into the sum.
// Method: the plane is copied once with its left and right zero padding (for stride 2, split into
// its even and odd padded columns), so that every tap of every output row reads a contiguous,
// in-bounds run.  Each output row is then summed in vectors, up to four side by side in registers
// (the last vector of the row overlapping the one before: the same outputs again); a tap that
// falls in the padding for some lanes of a vector leaves those lanes' sums as they are (a select,
// not an added zero, which could turn a -0 into +0).  Kernel rows in the padding are skipped.
#pragma once

#include <algorithm>
#include <cstddef>

#include "nnlens/kernels/conv.hpp"
#include "nnlens/kernels/simd.hpp"

namespace nnlens::kernels::detail {

/// The largest kernel (rows, columns) depthwise_rows takes (depthwise_max_taps bounds it anyway).
inline constexpr std::size_t depthwise_max_kw_rows = 64;

/// A padded row's length, and a phase's for stride 2.
constexpr std::size_t depthwise_rows_wp(std::size_t W, const conv_geometry& g) {
  return W + g.pad_left + g.pad_right;
}
constexpr std::size_t depthwise_rows_work(std::size_t H, std::size_t W, const conv_geometry& g) {
  const std::size_t wp = depthwise_rows_wp(W, g);
  return g.stride_w == 2 ? 2 * H * ((wp + 1) / 2) : H * wp;
}

/// One output row's taps: the input rows inside, their weights, each kernel column's source.
template <class T>
struct rows_ctx {
  const T* w;
  const std::size_t* wrow;  // the weights' row offset of each kernel row inside
  const T* const* src;      // per kernel row inside: the padded source row (phase 0)
  std::size_t nr, kw;
  const std::size_t* coff;  // per kernel column: offset of output column 0 in the source
  const output_range* cols;
  std::size_t phase_stride; // stride 2: from phase 0 to phase 1
  const std::size_t* phase;
  T bias;
};

/// NV vectors of outputs from column o0, the last at most at end - N; Masked: lanes whose tap
/// reads the padding keep their sums.
template <std::size_t NV, bool Masked, class T>
inline void rows_block(const rows_ctx<T>& c, std::size_t o0, std::size_t end, T* yr) {
  using V = simd::vec<T>;
  constexpr std::size_t N = simd::width<T>;
  std::size_t st[NV];
  V acc[NV];
  for (std::size_t v = 0; v < NV; ++v) {
    st[v] = std::min(o0 + v * N, end - N);
    acc[v] = simd::broadcast(c.bias);
  }
  [[maybe_unused]] V iota{};
  if constexpr (Masked) {
    alignas(64) T lane[N];
    for (std::size_t e = 0; e < N; ++e) lane[e] = T(e);
    iota = simd::load(lane);
  }
  for (std::size_t r = 0; r < c.nr; ++r)
    for (std::size_t j = 0; j < c.kw; ++j) {
      const V wv = simd::broadcast(c.w[c.wrow[r] + j]);
      const T* s = c.src[r] + c.phase[j] * c.phase_stride + c.coff[j];
      if constexpr (Masked) {
        const V jl = simd::broadcast(T(c.cols[j].lo)), jh = simd::broadcast(T(c.cols[j].hi));
        for (std::size_t v = 0; v < NV; ++v) {
          const V ow = iota + simd::broadcast(T(st[v]));
          const V sum = acc[v] + wv * simd::load(s + st[v]);
          acc[v] = simd::select((ow >= jl) & (ow < jh), sum, acc[v]);
        }
      } else {
        for (std::size_t v = 0; v < NV; ++v) acc[v] += wv * simd::load(s + st[v]);
      }
    }
  for (std::size_t v = 0; v < NV; ++v) simd::store(yr + st[v], acc[v]);
}

/// Vectors over [o0, end) in blocks of up to four (the last shifted left to end at `end`).
template <bool Masked, class T>
inline void rows_span(const rows_ctx<T>& c, std::size_t o0, std::size_t end, T* yr) {
  constexpr std::size_t N = simd::width<T>;
  for (; o0 < end; o0 += 4 * N) {
    switch (std::min<std::size_t>(4, (end - o0 + N - 1) / N)) {
      case 4: rows_block<4, Masked>(c, o0, end, yr); break;
      case 3: rows_block<3, Masked>(c, o0, end, yr); break;
      case 2: rows_block<2, Masked>(c, o0, end, yr); break;
      default: rows_block<1, Masked>(c, o0, end, yr); break;
    }
  }
}

template <class T>
void depthwise_rows(const T* x, std::size_t H, std::size_t W, const conv_geometry& g, const T* w, T bias,
                    std::size_t OH, std::size_t OW, const output_range* cols, T* y, T* work) {
  constexpr std::size_t N = simd::width<T>;
  const std::size_t sw = g.stride_w, wp = depthwise_rows_wp(W, g), hw = (wp + 1) / 2;
  const std::size_t row_len = sw == 2 ? hw : wp, phase_stride = sw == 2 ? H * hw : 0;
  for (std::size_t r = 0; r < H; ++r) {  // the padded rows (stride 2: their two phases)
    const T* s = x + r * W;
    if (sw == 1) {
      T* d = work + r * wp;
      for (std::size_t e = 0; e < g.pad_left; ++e) d[e] = T(0);
      copy_block(d + g.pad_left, 0, s, 0, 1, W);
      for (std::size_t e = g.pad_left + W; e < wp; ++e) d[e] = T(0);
      continue;
    }
    for (std::size_t b = 0; b < 2; ++b) {  // phase b: padded columns 2m + b, inside for m in [m0, m1)
      T* d = work + b * phase_stride + r * hw;
      const std::size_t m0 = std::min(hw, g.pad_left > b ? (g.pad_left - b + 1) / 2 : 0);
      const std::size_t m1 = std::max(m0, std::min(hw, (g.pad_left + W - b + 1) / 2));
      for (std::size_t m = 0; m < m0; ++m) d[m] = T(0);
      const T* s0 = s + (2 * m0 + b - g.pad_left);
      for (std::size_t m = 0; m < m1 - m0; ++m) d[m0 + m] = s0[2 * m];  // a constant stride: vector permutes
      for (std::size_t m = m1; m < hw; ++m) d[m] = T(0);
    }
  }
  std::size_t coff[depthwise_max_kw_rows], phase[depthwise_max_kw_rows];
  std::size_t lo = 0, hi = OW;
  for (std::size_t j = 0; j < g.kw; ++j) {
    lo = std::max(lo, cols[j].lo);
    hi = std::min(hi, cols[j].hi);
    const std::size_t q = j * g.dilation_w;  // padded column of output 0's tap j
    phase[j] = sw == 2 ? q & 1 : 0;
    coff[j] = sw == 2 ? q >> 1 : q;
  }
  for (std::size_t oh = 0; oh < OH; ++oh) {
    T* yr = y + oh * OW;
    const T* src[depthwise_max_kw_rows];
    std::size_t wrow[depthwise_max_kw_rows], nr = 0;
    for (std::size_t i = 0; i < g.kh; ++i) {
      const std::ptrdiff_t ih = std::ptrdiff_t(oh * g.stride_h + i * g.dilation_h) - std::ptrdiff_t(g.pad_top);
      if (ih < 0 || ih >= std::ptrdiff_t(H)) continue;
      src[nr] = work + std::size_t(ih) * row_len;
      wrow[nr++] = i * g.kw;
    }
    if (OW < N || N == 1) {  // narrow rows: one output at a time, the taps inside in order
      for (std::size_t ow = 0; ow < OW; ++ow) {
        T a = bias;
        for (std::size_t r = 0; r < nr; ++r)
          for (std::size_t j = 0; j < g.kw; ++j)
            if (ow >= cols[j].lo && ow < cols[j].hi) a += w[wrow[r] + j] * src[r][phase[j] * phase_stride + coff[j] + ow];
        yr[ow] = a;
      }
      continue;
    }
    const rows_ctx<T> cx{w, wrow, src, nr, g.kw, coff, cols, phase_stride, phase, bias};
    // a masked vector at each border, the interior [m0, hi) unmasked (rows too short for that: all
    // masked)
    const std::size_t m0 = lo > 0 ? N : 0;
    if (lo > N || OW - hi > N || hi < m0 + N) {
      rows_span<true>(cx, 0, OW, yr);
      continue;
    }
    if (lo > 0) rows_block<1, true>(cx, 0, N, yr);
    rows_span<false>(cx, m0, hi, yr);
    if (hi < OW) rows_block<1, true>(cx, OW - N, OW, yr);
  }
}

}  // namespace nnlens::kernels::detail
