// nnlens/kernels/conv_planes.hpp -- a convolution as an implicit GEMM over zero-padded input
// planes: conv_gemm's sums without its packed panels.
//
//   kernels::conv_planes(x, in_n, ns, C, H, W, g, OH, OW, Wg, O, b, y, out_n, work, col_lo, col_hi)
//       y_s[o][q] = b[o] + sum_k Wg[o][k] col_s[k][q], exactly as kernels::conv_gemm computes it
//   kernels::conv_planes_takes(g, W, H, groups, Og)  whether the geometry suits it
//   kernels::conv_planes_scratch<T>(ns, C, H, W, g, OH, O)   the elements of `work` it needs
//
// requires: as kernels::conv_gemm: x points at sample 0's C input channels, sample s at
//           x + s*in_n ([C][H][W] each); Wg is [O][C*kh*kw] row-major; y at sample 0's O output
//           planes, sample s at y + s*out_n ([O][OH*OW] each), not aliasing x, Wg or b; work holds
//           conv_planes_scratch elements (any alignment).  [col_lo, col_hi): only the output
//           columns s*OH*OW + q in that range are written (any bounds: threads may share a
//           convolution).
// ensures:  the same bits as kernels::conv_gemm on the same arguments (tests/kernels/
//           test_conv_planes.cpp): each output summed over k = (c*kh + i)*kw + j in order, in blocks
//           of the GEMM's KC, each block's sum from zero added to the output, the bias added after
//           the last block.
// Method: split each zero-padded input plane xp[Hp][Wp] into its stride_h x stride_w phases
// (rows r*sh + a, columns c*sw + b: sh*sw planes of Hq x Wq, Hq = ceil(Hp/sh), Wq = ceil(Wp/sw);
// with stride 1 the one phase is xp).  Tap (i, j) then reads phase ((i*dh) % sh, (j*dw) % sw)
// shifted by ((i*dh)/sh)*Wq + (j*dw)/sw, for every output.  Index the outputs by "virtual"
// positions v = oh*Wq + ow, ow in [0, Wq) (the columns ow >= OW are computed and dropped): the
// im2col row of every tap, over any run of consecutive v, is then a contiguous run of one phase,
// and the micro-kernel loads its B vectors straight from the phases through a table of K
// offsets.  Nothing is packed: the cost is one copy of the input (against im2col's kh*kw/(sh*sw)
// copies into the GEMM's panels) and (Wq - OW)/OW extra columns.  Tiles are R output channels x V
// vectors of virtual positions, summed in bands that stay in L2 (every k block of a band, then its
// valid columns copied out).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <new>
#include <type_traits>

#include "nnlens/kernels/conv.hpp"
#include "nnlens/kernels/gemm.hpp"
#include "nnlens/kernels/simd.hpp"

namespace nnlens::kernels {

namespace conv_planes_detail {
/// A phase plane's width: ceil(Wp / stride_w).
constexpr std::size_t phase_width(const conv_geometry& g, std::size_t W) {
  return (W + g.pad_left + g.pad_right + g.stride_w - 1) / g.stride_w;
}
}  // namespace conv_planes_detail

/// Whether conv_planes suits the geometry (of one group: Og output channels of `groups`): a kernel
/// larger than 1x1 (conv_gemm reads a plain 1x1's planes in place, and a strided 1x1 reads too
/// little of its input to pay for the copy) with strides of at most 4, and then either virtual
/// outputs at most 1.25x the real ones (the Wq - OW extra columns per row, and a sample's last
/// tile rounded up to the widest target's 48 columns), or, for groups of at least 8 outputs (a
/// tile's rows), at most 2x.  Measured on AVX-512: resnet18's 3x3 convolutions at 14x14 and wider
/// run 1.2x-1.9x conv_gemm's speed, its 7x7 ones 0.6x-0.9x; regnet_x_400mf's 16-channel groups
/// 1.0x-3x kernels::grouped_conv's speed from 56x56 down to 7x7; taking its 4x4 and 2x2 groups
/// too made the whole regnet_x_400mf at 64x64 1.7x slower (24.5 against 14.4 ms, batch 16).
constexpr bool conv_planes_takes(const conv_geometry& g, std::size_t W, std::size_t H, std::size_t groups = 1,
                                 std::size_t Og = 0) {
  if ((g.kh == 1 && g.kw == 1) || g.invalid() || g.stride_h > 4 || g.stride_w > 4) return false;
  const std::size_t OW = g.out_w(W), OH = g.out_h(H), P = OH * OW;
  if (P == 0) return false;
  const std::size_t virt = (OH * conv_planes_detail::phase_width(g, W) + 47) / 48 * 48;
  if (groups > 1 && Og >= 8) return virt <= 2 * P;
  return 4 * (virt - P) <= P;
}

inline namespace NNLENS_SIMD_NS {
namespace conv_planes_impl {

/// The tile: R output channels x V vectors of `width` scalars.
template <class T>
struct planes_blocking {
  static constexpr std::size_t R = 8, V = 3;  // measured against 6x2, 12x2, 14x2, 4x4
};

/// The layout of one sample's scratch for vectors of `width` scalars.
struct planes_layout {
  std::size_t Wq = 0, Hq = 0, S = 1, Pv = 0, Ps = 0;  // a phase's width, height; phases; virtual outputs; plane stride
};
constexpr planes_layout layout_for(std::size_t width, std::size_t H, std::size_t W, const conv_geometry& g,
                                   std::size_t OH) {
  planes_layout l;
  const std::size_t tw = planes_blocking<float>::V * width;  // the tile's width
  l.Wq = conv_planes_detail::phase_width(g, W);
  l.Hq = (H + g.pad_top + g.pad_bottom + g.stride_h - 1) / g.stride_h;
  l.S = g.stride_h * g.stride_w;
  l.Pv = (OH * l.Wq + tw - 1) / tw * tw;
  // the last tile's farthest read, inside the plane's zero guard
  const std::size_t reach = l.Pv + ((g.span_h() - 1) / g.stride_h) * l.Wq + (g.span_w() - 1) / g.stride_w;
  l.Ps = (std::max(l.Hq * l.Wq, reach) + width - 1) / width * width;
  return l;
}

/// The tiles of a band: virtual outputs summed over every k block, then copied out.  With one k
/// block, bands of at most planes_band_scalars (whole tiles: at least one), copied out while they
/// are in L2 (the stem's 7x7/2 at 224: 1.05x); with several, a sample's whole plane, each k block
/// over all its tiles before the next (bands of 64 Ki were 0.85x at resnet18's 56x56 and 28x28).
inline constexpr std::size_t planes_band_scalars = std::size_t(1) << 16;
constexpr std::size_t band_tiles(std::size_t width, std::size_t O, std::size_t K, std::size_t Pv) {
  const std::size_t tw = planes_blocking<float>::V * width;
  if (K > gemm_impl::gemm_blocking<float>::KC) return Pv / tw;
  return std::max<std::size_t>(1, std::min(Pv / tw, planes_band_scalars / std::max<std::size_t>(1, O) / tw));
}

template <class T>
constexpr std::size_t scratch_for(std::size_t width, std::size_t ns, std::size_t C, std::size_t H, std::size_t W,
                                  const conv_geometry& g, std::size_t OH, std::size_t O) {
  const planes_layout l = layout_for(width, H, W, g, OH);
  const std::size_t K = C * g.kh * g.kw, tw = planes_blocking<float>::V * width;
  const std::size_t band = band_tiles(width, O, K, l.Pv) * tw + width;
  // the padded planes, one band of virtual outputs, the offset table (int32 per k), the alignment
  return ns * C * l.S * l.Ps + O * band + (K * sizeof(std::int32_t) + sizeof(T) - 1) / sizeof(T) + 64 / sizeof(T);
}
template <class T>
constexpr std::size_t scratch(std::size_t ns, std::size_t C, std::size_t H, std::size_t W, const conv_geometry& g,
                              std::size_t OH, std::size_t O) {
  return scratch_for<T>(simd::width<T>, ns, C, H, W, g, OH, O);
}

/// rows (<= R) output channels x V vectors at xb: C[r][v] = (first ? 0 : C[r][v]) + sum over the kc
/// k's of A[r][k] * xb[off[k] + v], then + bias[r] when bias is given.  As gemm_impl::micro_kernel
/// sums (from zero, k in order, then C, then the bias).
template <std::size_t R, std::size_t V, class T>
inline void tile(std::size_t kc, const T* __restrict__ A, std::size_t lda, const T* __restrict__ xb,
                 const std::int32_t* __restrict__ off, T* C, std::size_t ldc, std::size_t rows, bool first,
                 const T* bias) {
  using Vec = simd::vec<T>;
  constexpr std::size_t N = simd::width<T>;
  const Vec z = simd::zero<T>();
  Vec acc[R][V];
  const T* a[R];
  for (std::size_t r = 0; r < R; ++r) {
    a[r] = A + (r < rows ? r : 0) * lda;
    for (std::size_t v = 0; v < V; ++v) acc[r][v] = z;
  }
  for (std::size_t k = 0; k < kc; ++k) {
    const T* xk = xb + off[k];
    Vec bv[V];
    for (std::size_t v = 0; v < V; ++v) bv[v] = simd::load(xk + v * N);
    for (std::size_t r = 0; r < R; ++r) {
      const Vec av = simd::broadcast(a[r][k]);
      for (std::size_t v = 0; v < V; ++v) acc[r][v] += av * bv[v];
    }
  }
  for (std::size_t r = 0; r < rows; ++r) {
    T* c = C + r * ldc;
    for (std::size_t v = 0; v < V; ++v) {
      Vec s = (first ? z : simd::load(c + v * N)) + acc[r][v];
      if (bias) s = s + simd::broadcast(bias[r]);
      simd::store(c + v * N, s);
    }
  }
}

/// Phase (a, b) of the zero-padded plane of xc [H][W]: dst[r][c] = xp[r*sh + a][c*sw + b] for
/// r < Hq, c < Wq, then zeros up to l.Ps.
template <class T>
void phase_plane(const T* xc, std::size_t H, std::size_t W, const conv_geometry& g, std::size_t a, std::size_t b,
                 const planes_layout& l, T* dst) {
  for (std::size_t r = 0; r < l.Hq; ++r, dst += l.Wq) {
    const std::size_t pr = r * g.stride_h + a;  // the padded row
    if (pr < g.pad_top || pr >= g.pad_top + H) {
      detail::zero_row(dst, l.Wq);
      continue;
    }
    const T* src = xc + (pr - g.pad_top) * W;
    // columns c whose padded column c*sw + b falls inside [pad_left, pad_left + W)
    const std::size_t lo = std::min(l.Wq, (g.pad_left > b ? g.pad_left - b + g.stride_w - 1 : 0) / g.stride_w);
    const std::size_t end = g.pad_left + W > b ? (g.pad_left + W - b + g.stride_w - 1) / g.stride_w : 0;
    const std::size_t hi = std::max(lo, std::min(l.Wq, end));
    for (std::size_t c = 0; c < lo; ++c) dst[c] = T(0);
    const T* s0 = src + (lo * g.stride_w + b - g.pad_left);
    if (g.stride_w == 1)
      detail::copy_block(dst + lo, 0, s0, 0, 1, hi - lo);
    else if (g.stride_w == 2)  // a constant stride: the compiler's vector permutes
      for (std::size_t c = 0; c < hi - lo; ++c) dst[lo + c] = s0[2 * c];
    else
      for (std::size_t c = lo; c < hi; ++c) dst[c] = s0[(c - lo) * g.stride_w];
    for (std::size_t c = hi; c < l.Wq; ++c) dst[c] = T(0);
  }
  detail::zero_row(dst, l.Ps - l.Hq * l.Wq);
}

template <class T>
void conv_planes_on(const T* x, std::size_t in_n, std::size_t ns, std::size_t C, std::size_t H, std::size_t W,
                    const conv_geometry& g, std::size_t OH, std::size_t OW, const T* Wg, std::size_t O, const T* b, T* y,
                    std::size_t out_n, T* work, std::size_t col_lo, std::size_t col_hi) {
  using blk = planes_blocking<T>;
  constexpr std::size_t N = simd::width<T>, R = blk::R, TW = blk::V * N, KC = gemm_impl::gemm_blocking<T>::KC;
  const std::size_t P = OH * OW, K = C * g.kh * g.kw, taps = g.kh * g.kw;
  const std::size_t hi = std::min(ns * P, col_hi);
  if (O == 0 || col_lo >= hi) return;
  if (K == 0) {
    for (std::size_t col = col_lo; col < hi; ++col)
      for (std::size_t o = 0; o < O; ++o) y[(col / P) * out_n + o * P + col % P] = b[o];
    return;
  }
  const planes_layout l = layout_for(N, H, W, g, OH);
  auto p = reinterpret_cast<std::uintptr_t>(work);
  T* xp = reinterpret_cast<T*>((p + 63) & ~std::uintptr_t(63));  // [ns][C][S][Ps]
  const std::size_t cs = l.S * l.Ps;                                // a channel's phases
  // (a row of the band one vector longer than its tiles: rows 4 KiB apart would share L1 sets)
  const std::size_t bt = band_tiles(N, O, K, l.Pv), ldv = bt * TW + (bt * TW == l.Pv ? 0 : N);
  T* yv = xp + ns * C * cs;                                         // [O][ldv]: one band
  std::int32_t* off = ::new (static_cast<void*>(yv + O * ldv)) std::int32_t[K];
  for (std::size_t k = 0; k < K; ++k) {
    const std::size_t c = k / taps, ri = (k % taps) / g.kw * g.dilation_h, ci = k % g.kw * g.dilation_w;
    const std::size_t phase = (ri % g.stride_h) * g.stride_w + ci % g.stride_w;
    off[k] = std::int32_t(c * cs + phase * l.Ps + (ri / g.stride_h) * l.Wq + ci / g.stride_w);
  }
  // the samples and virtual tiles that hold the columns [col_lo, hi)
  const std::size_t s_lo = col_lo / P, s_hi = (hi - 1) / P;
  auto virt = [&](std::size_t q) { return (q / OW) * l.Wq + q % OW; };
  const std::size_t t_lo = virt(col_lo % P) / TW, t_hi = virt((hi - 1) % P) / TW;  // in s_lo, in s_hi
  for (std::size_t s = s_lo; s <= s_hi; ++s)  // the phases of the padded planes, each with its zero guard
    for (std::size_t c = 0; c < C; ++c)
      for (std::size_t a = 0; a < g.stride_h; ++a)
        for (std::size_t bph = 0; bph < g.stride_w; ++bph)
          phase_plane(x + s * in_n + c * H * W, H, W, g, a, bph, l, xp + (s * C + c) * cs + (a * g.stride_w + bph) * l.Ps);
  for (std::size_t s = s_lo; s <= s_hi; ++s) {
    const std::size_t t0 = s == s_lo ? t_lo : 0, t1 = s == s_hi ? t_hi + 1 : l.Pv / TW;
    const std::size_t q0 = s == s_lo ? col_lo % P : 0, q1 = s == s_hi ? (hi - 1) % P + 1 : P;  // its columns
    for (std::size_t b0 = t0; b0 < t1; b0 += bt) {  // a band of tiles [b0, b1): every k block, then out
      const std::size_t b1 = std::min(t1, b0 + bt);
      for (std::size_t k0 = 0; k0 < K; k0 += KC) {
        const std::size_t kc = std::min(KC, K - k0);
        const bool first = k0 == 0, last = k0 + kc == K;
        for (std::size_t t = b0; t < b1; ++t) {
          const T* xb = xp + s * C * cs + t * TW;
          T* cv = yv + (t - b0) * TW;
          for (std::size_t o = 0; o < O; o += R)
            tile<R, blk::V, T>(kc, Wg + o * K + k0, K, xb, off + k0, cv + o * ldv, ldv, std::min(R, O - o), first,
                               last ? b + o : nullptr);
        }
      }
      // the band's virtual positions [v0, v1): the valid columns among [q0, q1)
      const std::size_t v0 = b0 * TW, v1 = b1 * TW;
      for (std::size_t o = 0; o < O; ++o)  // plane by plane: the stores in order
        for (std::size_t oh = v0 / l.Wq; oh < OH && oh * l.Wq < v1; ++oh) {
          const std::size_t r0 = oh * l.Wq;
          std::size_t w0 = v0 > r0 ? v0 - r0 : 0, w1 = std::min(OW, v1 - r0);
          w0 = std::max(w0, q0 > oh * OW ? q0 - oh * OW : 0);
          w1 = std::min(w1, q1 > oh * OW ? q1 - oh * OW : 0);
          if (w0 < w1)
            detail::copy_block(y + s * out_n + o * P + oh * OW + w0, 0, yv + o * ldv + (r0 + w0 - v0), 0, 1, w1 - w0);
        }
    }
  }
}

}  // namespace conv_planes_impl
}  // inline namespace NNLENS_SIMD_NS

namespace dispatch {
/// One SIMD target's conv_planes (src/dispatch/), as conv_gemm_form.
template <class T>
struct conv_planes_form {
  std::size_t (*scratch)(std::size_t, std::size_t, std::size_t, std::size_t, const conv_geometry&, std::size_t,
                         std::size_t);
  void (*run)(const T*, std::size_t, std::size_t, std::size_t, std::size_t, std::size_t, const conv_geometry&,
              std::size_t, std::size_t, const T*, std::size_t, const T*, T*, std::size_t, T*, std::size_t, std::size_t);
};
/// Defined in nnlens::dispatch (src/dispatch/dispatch.cpp): the chosen target's conv_planes, or
/// nullptr (then the program's own copy runs).
const conv_planes_form<float>* conv_planes_f32() noexcept;
const conv_planes_form<double>* conv_planes_f64() noexcept;
}  // namespace dispatch

/// The elements of `work` that conv_planes needs (with NNLENS_RUNTIME_DISPATCH: enough for every
/// target's vectors).
template <class T>
constexpr std::size_t conv_planes_scratch(std::size_t ns, std::size_t C, std::size_t H, std::size_t W,
                                          const conv_geometry& g, std::size_t OH, std::size_t O) {
#if defined(NNLENS_RUNTIME_DISPATCH)
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>)
    return std::max(conv_planes_impl::scratch<T>(ns, C, H, W, g, OH, O),
                    conv_planes_impl::scratch_for<T>(64 / sizeof(T), ns, C, H, W, g, OH, O));
#endif
  return conv_planes_impl::scratch<T>(ns, C, H, W, g, OH, O);
}

/// See the header comment.  With NNLENS_RUNTIME_DISPATCH (link nnlens::dispatch), float and double
/// run the best target's copy for this CPU.
template <class T>
void conv_planes(const T* x, std::size_t in_n, std::size_t ns, std::size_t C, std::size_t H, std::size_t W,
                 const conv_geometry& g, std::size_t OH, std::size_t OW, const T* Wg, std::size_t O, const T* b, T* y,
                 std::size_t out_n, T* work, std::size_t col_lo = 0, std::size_t col_hi = std::size_t(-1)) {
#if defined(NNLENS_RUNTIME_DISPATCH)
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    static const dispatch::conv_planes_form<T>* const form = [] {
      if constexpr (std::is_same_v<T, float>) return dispatch::conv_planes_f32();
      else return dispatch::conv_planes_f64();
    }();
    if (form) return form->run(x, in_n, ns, C, H, W, g, OH, OW, Wg, O, b, y, out_n, work, col_lo, col_hi);
  }
#endif
  conv_planes_impl::conv_planes_on<T>(x, in_n, ns, C, H, W, g, OH, OW, Wg, O, b, y, out_n, work, col_lo, col_hi);
}

}  // namespace nnlens::kernels
