// nnlens/kernels/conv_gemm.hpp -- a dense convolution's forward as one GEMM with im2col inside it.
//
//   kernels::conv_gemm(x, in_n, ns, C, H, W, g, OH, OW, Wg, O, b, y, out_n, work)
//       y_s[o][q] = b[o] + sum_k Wg[o][k] col_s[k][q]   for the ns samples s side by side,
//       col_s = im2col(x_s) ([C*kh*kw][OH*OW], kernels/conv.hpp), q = oh*OW + ow
//   kernels::conv_gemm_scratch<T>(ns, OH*OW, O, C*kh*kw, kh*kw)   the elements of `work` it needs
//
// requires: x points at sample 0's C input channels, sample s at x + s*in_n ([C][H][W] each);
//           Wg is [O][C*kh*kw] row-major; y points at sample 0's O output planes, sample s at
//           y + s*out_n ([O][OH*OW] each); y does not alias x, Wg or b; work holds
//           conv_gemm_scratch<T>(ns, OH*OW, O, C*kh*kw, kh*kw) elements (any alignment).
// ensures:  every y element written once per k block, never read before its first block; each is
//           summed over k in order, in blocks of KC, then the bias added (deterministic for given
//           sizes).
// Method: the GEMM's blocking and micro-kernel (kernels/gemm.hpp, M = O, N = ns*OH*OW, K =
// C*kh*kw), but no im2col buffer: each KC x NC panel of B is built straight from the input planes,
// one k row at a time: row copies into a row of the scratch (in L1) cut into the micro-kernel's
// NR-wide panels, or, for output rows shorter than 4 vectors, a gather straight into the panels
// through an offset table built once per column block.  The micro-kernel stores its tile into the
// output planes, with the bias on the last k block; tiles that straddle two samples' planes (a
// plane's size not a multiple of NR) are summed in a buffer of their own and copied out once.  Against im2col + gemm + a pass for the bias, this saves writing and reading
// the K x N im2col matrix (L2 or L3 sized at a CNN's shapes) and a pass over the output.
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
inline namespace NNLENS_SIMD_NS {

namespace conv_gemm_impl {

/// The scratch of conv_gemm_on for ns samples of OH*OW = P outputs, O channels, K = C*kh*kw and
/// kh*kw = taps, with the GEMM blocking of vectors of `width` scalars of T.
template <class T>
constexpr std::size_t scratch_for(std::size_t width, std::size_t ns, std::size_t P, std::size_t O, std::size_t K,
                                  std::size_t taps) {
  using blk = gemm_impl::gemm_blocking<T>;
  const std::size_t NR = 2 * width, NC = NR * (blk::NC / blk::NR);  // gemm_blocking's shape at that width
  const std::size_t nc = (std::min(ns * P, NC) + NR - 1) / NR * NR;
  // B's panels, one k row, the straddling tiles' sums, the gather table (int32 per tap and
  // column), the alignment
  return std::min(K, blk::KC) * nc + nc + (ns > 1 && P % NR != 0 ? O * nc : 0) +
         (taps * nc * sizeof(std::int32_t) + sizeof(T) - 1) / sizeof(T) + 64 / sizeof(T);
}
template <class T>
constexpr std::size_t scratch(std::size_t ns, std::size_t P, std::size_t O, std::size_t K, std::size_t taps) {
  return scratch_for<T>(gemm_impl::gemm_blocking<T>::W, ns, P, O, K, taps);
}

}  // namespace conv_gemm_impl

namespace conv_gemm_detail {

/// Output positions [q0, q1) of kernel tap (i, j) on input plane xc: row[q - q0] = the input value
/// that im2col puts at col[(c*kh+i)*kw+j][q], 0 in the padding.  rh, rw: tap_rows(i), tap_cols(j).
template <class T>
void tap_span(const T* xc, std::size_t W, const conv_geometry& g, std::size_t OW, const output_range& rh,
              const output_range& rw, std::size_t q0, std::size_t q1, T* row) {
  std::size_t oh = q0 / OW, ow0 = q0 % OW;
  for (std::size_t q = q0; q < q1; ++oh, ow0 = 0) {
    const std::size_t ow1 = std::min(OW, ow0 + (q1 - q)), n = ow1 - ow0;
    if (oh < rh.lo || oh >= rh.hi) {
      detail::zero_row(row, n);
    } else {
      const T* src = xc + (rh.first + (oh - rh.lo) * g.stride_h) * W;
      const std::size_t lo = std::clamp(rw.lo, ow0, ow1), hi = std::clamp(rw.hi, lo, ow1);
      for (std::size_t k = ow0; k < lo; ++k) row[k - ow0] = T(0);
      const T* s = src + rw.first + (lo - rw.lo) * g.stride_w;
      T* d = row + (lo - ow0);
      if (g.stride_w == 1)
        detail::copy_block(d, 0, s, 0, 1, hi - lo);
      else
        for (std::size_t k = 0; k < hi - lo; ++k) d[k] = s[k * g.stride_w];
      for (std::size_t k = hi; k < ow1; ++k) row[k - ow0] = T(0);
    }
    row += n;
    q += n;
  }
}

/// Whether some NR-wide tile of columns straddles two samples' planes.
template <class T>
constexpr bool straddles(std::size_t ns, std::size_t P) {
  return ns > 1 && P % gemm_impl::gemm_blocking<T>::NR != 0;
}

/// Whether output rows are too short for tap_span's row copies (fewer than 4 vectors: measured on
/// AVX2), so that pack_panels gathers through an offset table (one per tap and column, built once
/// per column block).  Not for a 1x1 unpadded kernel of stride 1, whose rows are its input planes.
template <class T>
constexpr bool gathers(const conv_geometry& g, std::size_t OW, std::size_t ns, std::size_t in_n) {
  return !g.is_pointwise() && OW < 4 * simd::width<T> && ns * in_n < (std::size_t(1) << 31);
}

/// off[t * nc + (col - j0)]: where tap t of column col reads, from sample 0's channel 0, or -1 in
/// the padding (no division per element: the columns are walked sample by sample, row by row).
inline void gather_table(std::size_t in_n, std::size_t H, std::size_t W, const conv_geometry& g, std::size_t OH,
                         std::size_t OW, std::size_t j0, std::size_t nc, std::int32_t* off) {
  const std::size_t P = OH * OW;
  for (std::size_t i = 0; i < g.kh; ++i) {
    const output_range rh = tap_rows(g, H, OH, i);
    for (std::size_t j = 0; j < g.kw; ++j, off += nc) {
      const output_range rw = tap_cols(g, W, OW, j);
      std::size_t s = j0 / P, oh = (j0 % P) / OW, ow = j0 % OW;
      for (std::size_t t = 0; t < nc; ++t) {
        const bool in = oh >= rh.lo && oh < rh.hi && ow >= rw.lo && ow < rw.hi;
        off[t] = in ? std::int32_t(s * in_n + (rh.first + (oh - rh.lo) * g.stride_h) * W + rw.first +
                                   (ow - rw.lo) * g.stride_w)
                    : -1;
        if (++ow == OW) {
          ow = 0;
          if (++oh == OH) oh = 0, ++s;
        }
      }
    }
  }
}

/// Rows [k0, k0+kc) x columns [j0, j0+nc) of the samples' im2col, packed as gemm's pack_b packs B:
/// Bp[panel][k][NR], the last panel zero-padded.  `row` holds nc elements; `off` is gather_table's
/// (when gathers()) or nullptr.
template <class T>
void pack_panels(const T* x, std::size_t in_n, std::size_t H, std::size_t W, const conv_geometry& g,
                 std::size_t OH, std::size_t OW, std::size_t k0, std::size_t kc, std::size_t j0, std::size_t nc,
                 T* Bp, T* row, const std::int32_t* off) {
  constexpr std::size_t NR = gemm_impl::gemm_blocking<T>::NR, V = simd::width<T>;
  const std::size_t P = OH * OW, taps = g.kh * g.kw;
  for (std::size_t k = k0; k < k0 + kc; ++k) {
    const std::size_t c = k / taps, tap = k % taps;
    T* dst = Bp + (k - k0) * NR;
    if (off) {  // short rows: straight into the panels through the table
      const T* xc = x + c * H * W;
      const std::int32_t* o = off + tap * nc;
      std::size_t jp = 0;
      for (; jp + NR <= nc; jp += NR, dst += kc * NR)
        for (std::size_t t = 0; t < NR; ++t) dst[t] = o[jp + t] < 0 ? T(0) : xc[o[jp + t]];
      if (jp < nc)
        for (std::size_t t = 0; t < NR; ++t) dst[t] = jp + t < nc && o[jp + t] >= 0 ? xc[o[jp + t]] : T(0);
      continue;
    }
    const output_range rh = tap_rows(g, H, OH, tap / g.kw), rw = tap_cols(g, W, OW, tap % g.kw);
    const bool plane = g.is_pointwise();  // the tap reads the whole plane in order: one copy
    for (std::size_t col = j0; col < j0 + nc;) {  // one sample's part of the columns at a time
      const std::size_t s = col / P, q = col % P, n = std::min(P - q, j0 + nc - col);
      const T* xc = x + s * in_n + c * H * W;
      if (plane)
        detail::copy_block(row + (col - j0), 0, xc + q, 0, 1, n);
      else
        tap_span(xc, W, g, OW, rh, rw, q, q + n, row + (col - j0));
      col += n;
    }
    std::size_t jp = 0;
    for (; jp + NR <= nc; jp += NR, dst += kc * NR)
      for (std::size_t v = 0; v < NR; v += V) simd::store(dst + v, simd::load(row + jp + v));
    if (jp < nc) {
      std::size_t t = 0;
      for (; t < nc - jp; ++t) dst[t] = row[jp + t];
      for (; t < NR; ++t) dst[t] = T(0);
    }
  }
}

}  // namespace conv_gemm_detail

namespace conv_gemm_impl {
/// The kernel of this SIMD target (kernels::conv_gemm below picks the target).
template <class T>
void conv_gemm_on(const T* x, std::size_t in_n, std::size_t ns, std::size_t C, std::size_t H, std::size_t W,
                  const conv_geometry& g, std::size_t OH, std::size_t OW, const T* Wg, std::size_t O, const T* b, T* y,
                  std::size_t out_n, T* work, std::size_t col_lo, std::size_t col_hi) {
  using blk = gemm_impl::gemm_blocking<T>;
  const std::size_t P = OH * OW, N = ns * P, K = C * g.kh * g.kw;
  if (N == 0 || O == 0) return;
  if (K == 0) {
    for (std::size_t s = 0; s < ns; ++s)
      for (std::size_t o = 0; o < O; ++o) std::fill(y + s * out_n + o * P, y + s * out_n + (o + 1) * P, b[o]);
    return;
  }
  auto p = reinterpret_cast<std::uintptr_t>(work);
  T* Bp = reinterpret_cast<T*>((p + 63) & ~std::uintptr_t(63));
  const std::size_t ncr = (std::min(N, blk::NC) + blk::NR - 1) / blk::NR * blk::NR;
  T* row = Bp + std::min(K, blk::KC) * ncr;
  T* part = conv_gemm_detail::straddles<T>(ns, P) ? row + ncr : nullptr;  // [O][ncr]
  T* end = part ? part + O * ncr : row + ncr;
  // the table's int32 objects start their lifetime here (placement new: no aliasing of T)
  std::int32_t* off = conv_gemm_detail::gathers<T>(g, OW, ns, in_n)
                          ? ::new (static_cast<void*>(end)) std::int32_t[g.kh * g.kw * ncr]
                          : nullptr;
  const std::size_t j_end = std::min(N, col_hi);
  for (std::size_t j0 = col_lo; j0 < j_end; j0 += blk::NC) {
    const std::size_t nc = std::min(blk::NC, j_end - j0);
    if (off) conv_gemm_detail::gather_table(in_n, H, W, g, OH, OW, j0, nc, off);
    for (std::size_t k0 = 0; k0 < K; k0 += blk::KC) {
      const std::size_t kc = std::min(blk::KC, K - k0);
      conv_gemm_detail::pack_panels(x, in_n, H, W, g, OH, OW, k0, kc, j0, nc, Bp, row, off);
      const bool first = k0 == 0, last = k0 + kc == K;
      for (std::size_t i0 = 0; i0 < O; i0 += blk::MC) {
        const std::size_t mc = std::min(blk::MC, O - i0);
        for (std::size_t jp = 0; jp < nc; jp += blk::NR) {
          const std::size_t nr = std::min(blk::NR, nc - jp), col = j0 + jp, s = col / P, q = col % P;
          // a tile inside one sample's planes is stored there; one that straddles two samples
          // is summed in `part`, then copied out after the last k block
          const bool inside = q + nr <= P;
          T* c = inside ? y + s * out_n + i0 * P + q : part + i0 * ncr + jp;
          const std::size_t ldc = inside ? P : ncr;
          for (std::size_t ip = 0; ip < mc; ip += blk::MR) {
            const std::size_t o = i0 + ip;
            gemm_impl::micro_kernel<T>(kc, Wg + o * K + k0, K, 1, Bp + jp * kc, c + ip * ldc, ldc,
                                       std::min(blk::MR, mc - ip), nr, first, nullptr, last ? b + o : nullptr);
          }
        }
      }
    }
    if (part)
      for (std::size_t jp = 0; jp < nc; jp += blk::NR) {
        const std::size_t nr = std::min(blk::NR, nc - jp), col = j0 + jp;
        if (col % P + nr <= P) continue;
        for (std::size_t t = 0, cs = col / P, cq = col % P; t < nr; ++cs, cq = 0) {
          const std::size_t n = std::min(nr - t, P - cq);
          for (std::size_t o = 0; o < O; ++o)
            for (std::size_t e = 0; e < n; ++e) y[cs * out_n + o * P + cq + e] = part[o * ncr + jp + t + e];
          t += n;
        }
      }
  }
}

}  // namespace conv_gemm_impl

}  // inline namespace NNLENS_SIMD_NS

namespace dispatch {
/// One SIMD target's conv_gemm (src/dispatch/: nnlens::dispatch, the run-time choice of target).
template <class T>
struct conv_gemm_form {
  std::size_t (*scratch)(std::size_t, std::size_t, std::size_t, std::size_t, std::size_t);
  void (*run)(const T*, std::size_t, std::size_t, std::size_t, std::size_t, std::size_t, const conv_geometry&,
              std::size_t, std::size_t, const T*, std::size_t, const T*, T*, std::size_t, T*, std::size_t, std::size_t);
};
/// Defined in nnlens::dispatch (src/dispatch/dispatch.cpp), as gemm_f32()/gemm_f64(): the chosen
/// target's conv_gemm, or nullptr (then the program's own copy runs); the named target's, or nullptr.
const conv_gemm_form<float>* conv_gemm_f32() noexcept;
const conv_gemm_form<double>* conv_gemm_f64() noexcept;
const conv_gemm_form<float>* conv_gemm_f32(const char* target) noexcept;
const conv_gemm_form<double>* conv_gemm_f64(const char* target) noexcept;
}  // namespace dispatch

/// The elements of `work` that conv_gemm needs for ns samples of OH*OW = P outputs, O channels,
/// K = C*kh*kw and kh*kw = taps.  With NNLENS_RUNTIME_DISPATCH: enough for every target's blocking
/// (the widest vectors, 64 bytes), so a plan sized at compile time fits the target chosen at run time.
template <class T>
constexpr std::size_t conv_gemm_scratch(std::size_t ns, std::size_t P, std::size_t O, std::size_t K, std::size_t taps) {
#if defined(NNLENS_RUNTIME_DISPATCH)
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>)
    return std::max(conv_gemm_impl::scratch<T>(ns, P, O, K, taps),
                    conv_gemm_impl::scratch_for<T>(64 / sizeof(T), ns, P, O, K, taps));
#endif
  return conv_gemm_impl::scratch<T>(ns, P, O, K, taps);
}

/// The tile width of conv_gemm's columns: a column range that starts at a multiple of it gives
/// each output the same sum as the whole call (conv_gemm's col_lo).
template <class T>
constexpr std::size_t conv_gemm_column_align() {
#if defined(NNLENS_RUNTIME_DISPATCH)
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) return 2 * 64 / sizeof(T);  // every target's NR divides it
#endif
  return gemm_impl::gemm_blocking<T>::NR;
}

/// See the header comment.  [col_lo, col_hi): only the output columns (sample-major positions
/// s*OH*OW + q) in that range, col_lo a multiple of conv_gemm_column_align<T>(): each the same sum
/// as in the whole call, so that threads can share one convolution.  With NNLENS_RUNTIME_DISPATCH
/// (link nnlens::dispatch), float and double run the best target's copy for this CPU.
template <class T>
void conv_gemm(const T* x, std::size_t in_n, std::size_t ns, std::size_t C, std::size_t H, std::size_t W,
               const conv_geometry& g, std::size_t OH, std::size_t OW, const T* Wg, std::size_t O, const T* b, T* y,
               std::size_t out_n, T* work, std::size_t col_lo = 0, std::size_t col_hi = std::size_t(-1)) {
#if defined(NNLENS_RUNTIME_DISPATCH)
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    static const dispatch::conv_gemm_form<T>* const form = [] {
      if constexpr (std::is_same_v<T, float>) return dispatch::conv_gemm_f32();
      else return dispatch::conv_gemm_f64();
    }();
    if (form) return form->run(x, in_n, ns, C, H, W, g, OH, OW, Wg, O, b, y, out_n, work, col_lo, col_hi);
  }
#endif
  conv_gemm_impl::conv_gemm_on<T>(x, in_n, ns, C, H, W, g, OH, OW, Wg, O, b, y, out_n, work, col_lo, col_hi);
}

}  // namespace nnlens::kernels
