// nnlens/kernels/int8.hpp -- int8 GEMM with int32 accumulation, and the int8 helpers of the
// quantised networks (compress/quantize.hpp).
//
//   kernels::gemm_s8(M, N, K, A, lda, B, ldb, C, ldc)    C[M,N] = A[M,K] B[K,N]   (int8 x int8 -> int32,
//                                                         C overwritten; all row-major, like gemm.hpp)
//   kernels::pad_planes_s8(x, C, H, W, g, fill, xp)       xp[c][Hp][Wp]: x framed by `fill` (the zero
//                                                         point: the padding of a quantised tensor is
//                                                         the quantised 0, not the integer 0)
//   kernels::quantize_s8(x, n, scale, zp, q)              q = clamp(round(x / scale) + zp, -128, 127)
//   kernels::dequantize_s8(q, n, scale, zp, x)            x = (q - zp) * scale
//
// requires: K * 127 * 128 < 2^31 (K < 131,000: every layer of the supported models); C does not
//           alias A or B.
// ensures:  exact integer arithmetic: the result does not depend on the order of summation, so it
//           is the same on every build and for every blocking.  Written as plain loops in "axpy
//           order" (row i of C += A[i,k] * row k of B), which g++ vectorises at -O2/-O3 (widening
//           int8 -> int32 multiply-adds); zero entries of A (pruned weights) are skipped.  Four rows
//           of A share each load of a row of B.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "nnlens/kernels/conv.hpp"

namespace nnlens::kernels {

namespace detail {
/// c[j] += a * b[j] for j in [0, n): the vectorisable inner loop.
inline void axpy_s8(std::size_t n, std::int32_t a, const std::int8_t* __restrict__ b, std::int32_t* __restrict__ c) {
  for (std::size_t j = 0; j < n; ++j) c[j] += a * std::int32_t(b[j]);
}
inline void axpy4_s8(std::size_t n, std::int32_t a0, std::int32_t a1, std::int32_t a2, std::int32_t a3,
                     const std::int8_t* __restrict__ b, std::int32_t* __restrict__ c0, std::int32_t* __restrict__ c1,
                     std::int32_t* __restrict__ c2, std::int32_t* __restrict__ c3) {
  for (std::size_t j = 0; j < n; ++j) {
    const std::int32_t v = b[j];
    c0[j] += a0 * v;
    c1[j] += a1 * v;
    c2[j] += a2 * v;
    c3[j] += a3 * v;
  }
}
}  // namespace detail

/// C[M,N] = A[M,K] B[K,N], int8 operands, int32 result (overwritten).
inline void gemm_s8(std::size_t M, std::size_t N, std::size_t K, const std::int8_t* A, std::size_t lda,
                    const std::int8_t* B, std::size_t ldb, std::int32_t* C, std::size_t ldc) {
  constexpr std::size_t NB = 512;  // columns of C kept hot while k runs
  for (std::size_t j0 = 0; j0 < N; j0 += NB) {
    const std::size_t nb = std::min(NB, N - j0);
    std::size_t i = 0;
    for (; i + 4 <= M; i += 4) {
      std::int32_t* c0 = C + i * ldc + j0;
      std::int32_t* c1 = c0 + ldc;
      std::int32_t* c2 = c1 + ldc;
      std::int32_t* c3 = c2 + ldc;
      std::fill_n(c0, nb, 0), std::fill_n(c1, nb, 0), std::fill_n(c2, nb, 0), std::fill_n(c3, nb, 0);
      const std::int8_t* a = A + i * lda;
      for (std::size_t k = 0; k < K; ++k) {
        const std::int32_t a0 = a[k], a1 = a[lda + k], a2 = a[2 * lda + k], a3 = a[3 * lda + k];
        if ((a0 | a1 | a2 | a3) == 0) continue;  // pruned
        detail::axpy4_s8(nb, a0, a1, a2, a3, B + k * ldb + j0, c0, c1, c2, c3);
      }
    }
    for (; i < M; ++i) {
      std::int32_t* c = C + i * ldc + j0;
      std::fill_n(c, nb, 0);
      const std::int8_t* a = A + i * lda;
      for (std::size_t k = 0; k < K; ++k)
        if (a[k] != 0) detail::axpy_s8(nb, a[k], B + k * ldb + j0, c);
    }
  }
}

/// xp[c][Hp][Wp] = x[c] surrounded by the geometry's padding, filled with `fill`.
inline void pad_planes_s8(const std::int8_t* x, std::size_t C, std::size_t H, std::size_t W, const conv_geometry& g,
                          std::int8_t fill, std::int8_t* xp) {
  const std::size_t Hp = H + g.pad_top + g.pad_bottom, Wp = W + g.pad_left + g.pad_right;
  for (std::size_t c = 0; c < C; ++c) {
    std::int8_t* p = xp + c * Hp * Wp;
    std::fill_n(p, g.pad_top * Wp, fill);
    for (std::size_t h = 0; h < H; ++h) {
      std::int8_t* row = p + (g.pad_top + h) * Wp;
      std::fill_n(row, g.pad_left, fill);
      std::copy_n(x + (c * H + h) * W, W, row + g.pad_left);
      std::fill_n(row + g.pad_left + W, g.pad_right, fill);
    }
    std::fill_n(p + (g.pad_top + H) * Wp, g.pad_bottom * Wp, fill);
  }
}

/// round(v) half away from zero, saturated to [lo, hi].
inline std::int32_t round_saturate(double v, std::int32_t lo, std::int32_t hi) {
  const double r = std::round(v);
  if (!(r >= double(lo))) return lo;  // also NaN -> lo (never reached: inputs are checked)
  if (r > double(hi)) return hi;
  return std::int32_t(r);
}

/// q[i] = clamp(round(x[i] / scale) + zp, -128, 127).
template <class T>
void quantize_s8(const T* x, std::size_t n, float scale, std::int32_t zp, std::int8_t* q) {
  for (std::size_t i = 0; i < n; ++i)
    q[i] = std::int8_t(std::clamp<std::int32_t>(round_saturate(double(x[i]) / double(scale), -1000, 1000) + zp, -128, 127));
}

/// x[i] = (q[i] - zp) * scale.
template <class T>
void dequantize_s8(const std::int8_t* q, std::size_t n, float scale, std::int32_t zp, T* x) {
  for (std::size_t i = 0; i < n; ++i) x[i] = T(float(std::int32_t(q[i]) - zp) * scale);
}

}  // namespace nnlens::kernels
