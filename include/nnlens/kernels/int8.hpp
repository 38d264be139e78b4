// nnlens/kernels/int8.hpp -- int8 GEMM with int32 accumulation, and the int8 helpers of the
// quantised networks (compress/quantize.hpp).
//
//   kernels::gemm_s8(M, N, K, A, lda, B, ldb, C, ldc)    C[M,N] = A[M,K] B[K,N]   (int8 x int8 -> int32,
//                                                         C overwritten; all row-major, like gemm.hpp)
//   kernels::pad_planes_s8(x, C, H, W, g, fill, xp)       xp[c][Hp][Wp]: x framed by `fill` (the zero
//                                                         point: the padding of a quantised tensor is
//                                                         the quantised 0, not the integer 0)
//   kernels::quantize_s8(x, n, scale, zp, q)              q = clamp(round(x / scale) + zp, -128, 127)
//                                                         (float; round half away from zero)
//   kernels::dequantize_s8(q, n, scale, zp, x)            x = (q - zp) * scale
//   kernels::requantize_s8 / requantize_row_s8            int32 accumulators -> int8 codes
//   kernels::max_pool_s8(x, C, H, W, g, OH, OW, y)        max pooling on int8 codes
//
// requires: K * 127 * 128 < 2^31 (K < 131,000: every layer of the supported models); C does not
//           alias A or B.
// ensures:  exact integer arithmetic: the result does not depend on the order of summation, so it
//           is the same on every build and for every blocking.  With vectors of int32 (xsimd,
//           kernels/simd.hpp: every x86-64 and aarch64 target): k pairs packed as int16 and 4 x 2
//           vector register tiles of pair multiply-adds (detail::madd_pairs: vpmaddwd, vpdpwssd
//           with AVX-VNNI or AVX-512 VNNI, else xsimd shifts and multiplies), packing buffers
//           thread-local (grow once).  Without (a microcontroller, NNLENS_NO_SIMD): plain loops in
//           "axpy order" (row i of C += A[i,k] * row k of B), skipping zero entries of A (pruned
//           weights).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "nnlens/kernels/conv.hpp"
#include "nnlens/kernels/simd.hpp"
#include "nnlens/kernels/window.hpp"

namespace nnlens::kernels {
// The int8 GEMM lives in the SIMD target's namespace (kernels/simd.hpp's NNLENS_SIMD_NS), like
// gemm.hpp's, so that nnlens::dispatch can hold a copy per target; it calls nothing from std::.
inline namespace NNLENS_SIMD_NS {


namespace s8_impl {
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
}  // namespace s8_impl

/// The portable kernel (any target): C[M,N] = A[M,K] B[K,N], C overwritten.
inline void gemm_s8_portable(std::size_t M, std::size_t N, std::size_t K, const std::int8_t* A, std::size_t lda,
                             const std::int8_t* B, std::size_t ldb, std::int32_t* C, std::size_t ldc) {
  constexpr std::size_t NB = 512;  // columns of C kept hot while k runs
  for (std::size_t j0 = 0; j0 < N; j0 += NB) {
    const std::size_t nb = N - j0 < NB ? N - j0 : NB;
    std::size_t i = 0;
    for (; i + 4 <= M; i += 4) {
      std::int32_t* c0 = C + i * ldc + j0;
      std::int32_t* c1 = c0 + ldc;
      std::int32_t* c2 = c1 + ldc;
      std::int32_t* c3 = c2 + ldc;
      for (std::size_t j = 0; j < nb; ++j) c0[j] = c1[j] = c2[j] = c3[j] = 0;
      const std::int8_t* a = A + i * lda;
      for (std::size_t k = 0; k < K; ++k) {
        const std::int32_t a0 = a[k], a1 = a[lda + k], a2 = a[2 * lda + k], a3 = a[3 * lda + k];
        if ((a0 | a1 | a2 | a3) == 0) continue;  // pruned
        s8_impl::axpy4_s8(nb, a0, a1, a2, a3, B + k * ldb + j0, c0, c1, c2, c3);
      }
    }
    for (; i < M; ++i) {
      std::int32_t* c = C + i * ldc + j0;
      for (std::size_t j = 0; j < nb; ++j) c[j] = 0;
      const std::int8_t* a = A + i * lda;
      for (std::size_t k = 0; k < K; ++k)
        if (a[k] != 0) s8_impl::axpy_s8(nb, a[k], B + k * ldb + j0, c);
    }
  }
}

// Unroll the tiles' row loops (g++; nvcc's front end, which sees this header in .cu files, and
// clang have their own rules).
#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__)
#define NNLENS_S8_UNROLL _Pragma("GCC unroll 8")
#else
#define NNLENS_S8_UNROLL
#endif

#if !defined(NNLENS_NO_SIMD)
namespace s8_impl {
/// The int8 kernels' vectors: int32 lanes, each holding a pair of int16 (two k of one row or column).
inline constexpr bool s8_vectors = simd::vector_of<std::int32_t>;
using s8v = simd::vec<std::int32_t>;
inline constexpr std::size_t s8_lanes = simd::width<std::int32_t>;

/// acc + lo(b) lo(a) + hi(b) hi(a) per lane (lo, hi: the lane's two int16).  xsimd 8.1 has no
/// such operation, so x86 gets its one instruction here (vpmaddwd, or vpdpwssd with AVX-VNNI /
/// AVX-512 VNNI, which also adds); every other target the same sum from xsimd shifts and multiplies.
template <class V>
inline V madd_pairs(V acc, V b, V a) {
#if defined(__AVX512BW__)
  if constexpr (sizeof(V) == 64) {  // __m512i
#if defined(__AVX512VNNI__)
    return _mm512_dpwssd_epi32(acc, b, a);
#else
    return _mm512_add_epi32(acc, _mm512_madd_epi16(b, a));
#endif
  } else
#endif
#if defined(__AVX2__)
  if constexpr (sizeof(V) == 32) {  // __m256i
#if defined(__AVXVNNI__)
    return _mm256_dpwssd_avx_epi32(acc, b, a);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(b, a));
#endif
  } else
#endif
  {
    const V blo = (b << 16) >> 16, alo = (a << 16) >> 16;  // arithmetic shifts: sign-extended
    return acc + blo * alo + (b >> 16) * (a >> 16);
  }
}

/// R rows x NV vectors of C from k-pair-packed operands: ap[r][kp] holds (A[r][2kp], A[r][2kp+1])
/// as two int16 in one int32; bp[kp][j] holds (B[2kp][j], B[2kp+1][j]) the same way.
template <std::size_t R, std::size_t NV>
inline void s8_tile(std::size_t Kp, const std::int32_t* ap, std::size_t lap, const std::int32_t* bp, std::size_t ldbp,
                    std::int32_t* C, std::size_t ldc) {
  constexpr std::size_t L = s8_lanes;
  s8v acc[R][NV];
NNLENS_S8_UNROLL
  for (std::size_t r = 0; r < R; ++r)
    for (std::size_t v = 0; v < NV; ++v) acc[r][v] = simd::zero<std::int32_t>();
  for (std::size_t kp = 0; kp < Kp; ++kp) {
    s8v b[NV];
    for (std::size_t v = 0; v < NV; ++v) b[v] = simd::load(bp + kp * ldbp + v * L);
NNLENS_S8_UNROLL
    for (std::size_t r = 0; r < R; ++r) {
      const s8v a = simd::broadcast(ap[r * lap + kp]);
      for (std::size_t v = 0; v < NV; ++v) acc[r][v] = madd_pairs(acc[r][v], b[v], a);
    }
  }
NNLENS_S8_UNROLL
  for (std::size_t r = 0; r < R; ++r)
    for (std::size_t v = 0; v < NV; ++v) simd::store(C + r * ldc + v * L, acc[r][v]);
}

inline std::int32_t s8_pair(std::int32_t lo, std::int32_t hi) {
  return std::int32_t(std::uint32_t(std::uint16_t(std::int16_t(lo))) | (std::uint32_t(std::uint16_t(std::int16_t(hi))) << 16));
}

/// The columns gemm_s8 packs: whole vectors (the rest runs as plain loops).
inline std::size_t s8_packed_cols(std::size_t N) { return N / s8_lanes * s8_lanes; }

inline void pack_b_s8_into(std::size_t K, std::size_t Np, const std::int8_t* B, std::size_t ldb, std::int32_t* bp) {
  const std::size_t Kp = (K + 1) / 2;
  for (std::size_t kp = 0; kp < Kp; ++kp) {
    const std::size_t k = 2 * kp;
    const std::int8_t* b0 = B + k * ldb;
    std::int32_t* d = bp + kp * Np;
    if (k + 1 < K) {
      const std::int8_t* b1 = B + (k + 1) * ldb;
      for (std::size_t j = 0; j < Np; ++j) d[j] = s8_pair(b0[j], b1[j]);
    } else {
      for (std::size_t j = 0; j < Np; ++j) d[j] = s8_pair(b0[j], 0);
    }
  }
}
}  // namespace s8_impl
#else
namespace s8_impl {
inline constexpr bool s8_vectors = false;
}
#endif

namespace s8_impl {
/// Elements of gemm_on's packed B for [K, N] (0 where it does not pack: no vectors of int32, N
/// below one vector, or K < 2).
inline std::size_t packed_size(std::size_t K, std::size_t N) {
#if !defined(NNLENS_NO_SIMD)
  if constexpr (s8_vectors)
    if (N >= s8_lanes && K >= 2) return (K + 1) / 2 * s8_packed_cols(N);
#endif
  (void)K, (void)N;
  return 0;
}
/// B [K, N] packed into out[packed_size(K, N)].
inline void pack_b(std::size_t K, std::size_t N, const std::int8_t* B, std::size_t ldb, std::int32_t* out) {
#if !defined(NNLENS_NO_SIMD)
  if constexpr (s8_vectors)
    if (N >= s8_lanes && K >= 2) return pack_b_s8_into(K, s8_packed_cols(N), B, ldb, out);
#endif
  (void)K, (void)N, (void)B, (void)ldb, (void)out;
}
/// Scratch of gemm_on, in int32 (the packed A, and B unless packed_b is given).
inline std::size_t workspace(std::size_t M, std::size_t N, std::size_t K, bool packed) {
  const std::size_t pb = packed_size(K, N);
  return pb == 0 ? 0 : M * ((K + 1) / 2) + (packed ? 0 : pb);
}

/// C[M,N] = A[M,K] B[K,N], int8 operands, int32 result (overwritten).  With vectors of int32 (xsimd):
/// both operands are packed as int16 pairs along k, and register tiles of 4 rows x 2 vectors (then
/// 1 vector) of columns multiply-add pairs (madd_pairs); the last columns (fewer than a vector) run
/// as plain loops.  Otherwise gemm_s8_portable.  Exact either way (the same integers).
/// packed_b: pack_b's result, or nullptr to pack into `work` (workspace(M, N, K, packed_b) int32).
inline void gemm_on(std::size_t M, std::size_t N, std::size_t K, const std::int8_t* A, std::size_t lda,
                    const std::int8_t* B, std::size_t ldb, std::int32_t* C, std::size_t ldc,
                    const std::int32_t* packed_b, std::int32_t* work) {
#if !defined(NNLENS_NO_SIMD)
  if constexpr (s8_vectors) {
    constexpr std::size_t L = s8_lanes;
    if (N < L || K < 2) return gemm_s8_portable(M, N, K, A, lda, B, ldb, C, ldc);
    const std::size_t Kp = (K + 1) / 2, Np = s8_packed_cols(N);
    std::int32_t* ap = work;
    for (std::size_t i = 0; i < M; ++i) {
      const std::int8_t* a = A + i * lda;
      std::int32_t* d = ap + i * Kp;
      for (std::size_t kp = 0; kp < K / 2; ++kp) d[kp] = s8_pair(a[2 * kp], a[2 * kp + 1]);
      if (K % 2) d[K / 2] = s8_pair(a[K - 1], 0);
    }
    const std::int32_t* bp = packed_b;
    if (!bp) {
      pack_b_s8_into(K, Np, B, ldb, work + M * Kp);
      bp = work + M * Kp;
    }
    std::size_t j = 0;
    for (; j + 2 * L <= Np; j += 2 * L) {  // a strip of B stays in L1 across the rows
      std::size_t i = 0;
      for (; i + 4 <= M; i += 4) s8_tile<4, 2>(Kp, ap + i * Kp, Kp, bp + j, Np, C + i * ldc + j, ldc);
      for (; i < M; ++i) s8_tile<1, 2>(Kp, ap + i * Kp, Kp, bp + j, Np, C + i * ldc + j, ldc);
    }
    if (j < Np) {  // one vector of columns
      std::size_t i = 0;
      for (; i + 4 <= M; i += 4) s8_tile<4, 1>(Kp, ap + i * Kp, Kp, bp + j, Np, C + i * ldc + j, ldc);
      for (; i < M; ++i) s8_tile<1, 1>(Kp, ap + i * Kp, Kp, bp + j, Np, C + i * ldc + j, ldc);
    }
    if (Np < N) {  // the last columns, fewer than a vector
      for (std::size_t r = 0; r < M; ++r) {
        std::int32_t* c = C + r * ldc;
        for (std::size_t q = Np; q < N; ++q) c[q] = 0;
        for (std::size_t k = 0; k < K; ++k) {
          const std::int32_t a = A[r * lda + k];
          if (a == 0) continue;
          for (std::size_t q = Np; q < N; ++q) c[q] += a * std::int32_t(B[k * ldb + q]);
        }
      }
    }
    return;
  }
#endif
  (void)packed_b, (void)work;
  gemm_s8_portable(M, N, K, A, lda, B, ldb, C, ldc);
}
}  // namespace s8_impl
}  // inline namespace NNLENS_SIMD_NS

namespace dispatch {
/// One SIMD target's int8 GEMM and float quantisation loops (src/dispatch/; see gemm.hpp's
/// gemm_form).  Its packed B is its own: pack_b_s8 and gemm_s8 both go through the same choice.
struct gemm_s8_form {
  std::size_t (*packed_size)(std::size_t, std::size_t);
  void (*pack_b)(std::size_t, std::size_t, const std::int8_t*, std::size_t, std::int32_t*);
  std::size_t (*workspace)(std::size_t, std::size_t, std::size_t, bool);
  void (*run)(std::size_t, std::size_t, std::size_t, const std::int8_t*, std::size_t, const std::int8_t*, std::size_t,
              std::int32_t*, std::size_t, const std::int32_t*, std::int32_t*);
  void (*quantize)(const float*, std::size_t, float, std::int32_t, std::int8_t*);
  void (*requantize)(const std::int32_t*, std::size_t, std::int32_t, float, std::int32_t, std::int8_t*);
  void (*requantize_row)(const std::int32_t*, std::size_t, const std::int32_t*, const float*, std::int32_t, std::int8_t*);
};
/// Defined in nnlens::dispatch: the chosen target's int8 GEMM (as gemm_f32()), or the named one.
const gemm_s8_form* gemm_s8() noexcept;
const gemm_s8_form* gemm_s8(const char* target) noexcept;
}  // namespace dispatch

namespace s8_dispatch {
#if defined(NNLENS_RUNTIME_DISPATCH)
inline const dispatch::gemm_s8_form* form() {
  static const dispatch::gemm_s8_form* const f = dispatch::gemm_s8();
  return f;
}
#endif
inline std::int32_t* scratch(std::size_t n) {
  thread_local std::vector<std::int32_t> b;
  if (b.size() < n) b.resize(n);
  return b.data();
}
}  // namespace s8_dispatch

/// B [K, N] in the packed form gemm_s8 uses (pass it as `packed_b` to skip packing per call, e.g.
/// for constant weights).  Empty where gemm_s8 does not pack (no vectors of int32, N below one
/// vector, or K < 2).
inline std::vector<std::int32_t> pack_b_s8(std::size_t K, std::size_t N, const std::int8_t* B, std::size_t ldb) {
#if defined(NNLENS_RUNTIME_DISPATCH)
  if (const auto* f = s8_dispatch::form()) {
    std::vector<std::int32_t> r(f->packed_size(K, N));
    if (!r.empty()) f->pack_b(K, N, B, ldb, r.data());
    return r;
  }
#endif
  std::vector<std::int32_t> r(s8_impl::packed_size(K, N));
  if (!r.empty()) s8_impl::pack_b(K, N, B, ldb, r.data());
  return r;
}

/// C[M,N] = A[M,K] B[K,N], int8 operands, int32 result (overwritten): s8_impl::gemm_on on a
/// thread-local scratch (grows once), or with NNLENS_RUNTIME_DISPATCH the chosen target's copy.
/// packed_b: pack_b_s8(K, N, B, ldb), or nullptr to pack here.
inline void gemm_s8(std::size_t M, std::size_t N, std::size_t K, const std::int8_t* A, std::size_t lda,
                    const std::int8_t* B, std::size_t ldb, std::int32_t* C, std::size_t ldc,
                    const std::int32_t* packed_b = nullptr) {
#if defined(NNLENS_RUNTIME_DISPATCH)
  if (const auto* f = s8_dispatch::form()) {
    const std::size_t need = f->workspace(M, N, K, packed_b != nullptr);
    return f->run(M, N, K, A, lda, B, ldb, C, ldc, packed_b, need ? s8_dispatch::scratch(need) : nullptr);
  }
#endif
  const std::size_t need = s8_impl::workspace(M, N, K, packed_b != nullptr);
  s8_impl::gemm_on(M, N, K, A, lda, B, ldb, C, ldc, packed_b, need ? s8_dispatch::scratch(need) : nullptr);
}

/// Max pooling on int8 codes of one sample, [C, H, W] -> [C, OH, OW] (the padding never wins, as
/// in the float layer: each window is clipped to the input).
inline void max_pool_s8(const std::int8_t* x, std::size_t C, std::size_t H, std::size_t W, const pool_geometry& g,
                        std::size_t OH, std::size_t OW, std::int8_t* y) {
  for (std::size_t c = 0; c < C; ++c) {
    const std::int8_t* xc = x + c * H * W;
    std::int8_t* yc = y + c * OH * OW;
    for (std::size_t oh = 0; oh < OH; ++oh) {
      const auto rh = kernels::pool_axis(oh, g.stride_h, g.pad_top, g.pad_bottom, g.kh, H, false);
      for (std::size_t ow = 0; ow < OW; ++ow) {
        const auto rw = kernels::pool_axis(ow, g.stride_w, g.pad_left, g.pad_right, g.kw, W, false);
        std::int8_t m = -128;
        for (std::size_t h = rh.lo; h < rh.hi; ++h)
          for (std::size_t w = rw.lo; w < rw.hi; ++w) m = std::max(m, xc[h * W + w]);
        yc[oh * OW + ow] = m;
      }
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

// The element-wise int8 loops live in the SIMD target's namespace too (nnlens::dispatch holds a
// copy per target of the float ones); kernels::round_half_away etc. name the program's own.
inline namespace NNLENS_SIMD_NS {

/// round(v) half away from zero, in float: the nearest integer by the 1.5 * 2^23 trick (ties to
/// even; exact for |v| < 2^22), then ties moved away from zero (v - n is exact).  Larger |v| give a
/// value of the same sign and about the same size, which every caller saturates.  Branch-free,
/// no libm call and no float -> int conversion of an unbounded value, so the loops below vectorise.
inline float round_half_away(float v) {
  constexpr float magic = 12582912.0f;  // 1.5 * 2^23
  const float n = (v + magic) - magic;
  const float d = v - n;
  return n + ((d == 0.5f && v > 0.0f) ? 1.0f : 0.0f) - ((d == -0.5f && v < 0.0f) ? 1.0f : 0.0f);
}

/// clamp(round_half_away(v) + zp, -128, 127).
inline std::int32_t saturate_s8(float v, float zp) {
  float r = round_half_away(v) + zp;
  r = r < -128.0f ? -128.0f : r;
  r = r > 127.0f ? 127.0f : r;
  return std::int32_t(r);
}

/// The int8 code of v: clamp(round_half_away(v / scale) + zp, -128, 127) (float arithmetic).
inline std::int8_t quantize_one(float v, float scale, std::int32_t zp) {
  return std::int8_t(saturate_s8(v / scale, float(zp)));
}

// The loops below go through an int32 block: g++ 12 does not vectorise a float -> int8 loop with
// 256-bit vectors, but does vectorise float -> int32 and int32 -> int8.
inline constexpr std::size_t s8_block = 256;

namespace s8_impl {
/// q[i] = clamp(round(x[i] / scale) + zp, -128, 127).
template <class T>
void quantize(const T* __restrict__ x, std::size_t n, float scale, std::int32_t zp, std::int8_t* __restrict__ q) {
  const float z = float(zp);
  alignas(64) std::int32_t t[s8_block];
  for (std::size_t i0 = 0; i0 < n; i0 += s8_block) {
    const std::size_t m = n - i0 < s8_block ? n - i0 : s8_block;
    for (std::size_t i = 0; i < m; ++i) t[i] = saturate_s8(float(x[i0 + i]) / scale, z);
    for (std::size_t i = 0; i < m; ++i) q[i0 + i] = std::int8_t(t[i]);
  }
}

/// Requantise int32 accumulators: q[i] = clamp(round((acc[i] + bias) * mult) + zp, -128, 127).
inline void requantize(const std::int32_t* __restrict__ acc, std::size_t n, std::int32_t bias, float mult,
                       std::int32_t zp, std::int8_t* __restrict__ q) {
  const float z = float(zp);
  alignas(64) std::int32_t t[s8_block];
  for (std::size_t i0 = 0; i0 < n; i0 += s8_block) {
    const std::size_t m = n - i0 < s8_block ? n - i0 : s8_block;
    for (std::size_t i = 0; i < m; ++i) t[i] = saturate_s8(float(std::int64_t(acc[i0 + i]) + bias) * mult, z);
    for (std::size_t i = 0; i < m; ++i) q[i0 + i] = std::int8_t(t[i]);
  }
}
/// The same with one bias and multiplier per element of a row (Dense: per output unit).
inline void requantize_row(const std::int32_t* __restrict__ acc, std::size_t n, const std::int32_t* __restrict__ bias,
                          const float* __restrict__ mult, std::int32_t zp, std::int8_t* __restrict__ q) {
  const float z = float(zp);
  alignas(64) std::int32_t t[s8_block];
  for (std::size_t i0 = 0; i0 < n; i0 += s8_block) {
    const std::size_t m = n - i0 < s8_block ? n - i0 : s8_block;
    for (std::size_t i = 0; i < m; ++i)
      t[i] = saturate_s8(float(std::int64_t(acc[i0 + i]) + bias[i0 + i]) * mult[i0 + i], z);
    for (std::size_t i = 0; i < m; ++i) q[i0 + i] = std::int8_t(t[i]);
  }
}
}  // namespace s8_impl
}  // inline namespace NNLENS_SIMD_NS

/// q[i] = clamp(round(x[i] / scale) + zp, -128, 127) (float arithmetic; with NNLENS_RUNTIME_DISPATCH,
/// float input runs the chosen target's copy, like gemm_s8).
template <class T>
void quantize_s8(const T* __restrict__ x, std::size_t n, float scale, std::int32_t zp, std::int8_t* __restrict__ q) {
#if defined(NNLENS_RUNTIME_DISPATCH)
  if constexpr (std::is_same_v<T, float>)
    if (const auto* f = s8_dispatch::form()) return f->quantize(x, n, scale, zp, q);
#endif
  s8_impl::quantize(x, n, scale, zp, q);
}

/// Requantise int32 accumulators: q[i] = clamp(round((acc[i] + bias) * mult) + zp, -128, 127).
inline void requantize_s8(const std::int32_t* __restrict__ acc, std::size_t n, std::int32_t bias, float mult,
                          std::int32_t zp, std::int8_t* __restrict__ q) {
#if defined(NNLENS_RUNTIME_DISPATCH)
  if (const auto* f = s8_dispatch::form()) return f->requantize(acc, n, bias, mult, zp, q);
#endif
  s8_impl::requantize(acc, n, bias, mult, zp, q);
}
/// The same with one bias and multiplier per element of a row (Dense: per output unit).
inline void requantize_row_s8(const std::int32_t* __restrict__ acc, std::size_t n, const std::int32_t* __restrict__ bias,
                              const float* __restrict__ mult, std::int32_t zp, std::int8_t* __restrict__ q) {
#if defined(NNLENS_RUNTIME_DISPATCH)
  if (const auto* f = s8_dispatch::form()) return f->requantize_row(acc, n, bias, mult, zp, q);
#endif
  s8_impl::requantize_row(acc, n, bias, mult, zp, q);
}

/// x[i] = (q[i] - zp) * scale.
template <class T>
void dequantize_s8(const std::int8_t* __restrict__ q, std::size_t n, float scale, std::int32_t zp, T* __restrict__ x) {
  for (std::size_t i = 0; i < n; ++i) x[i] = T(float(std::int32_t(q[i]) - zp) * scale);
}

}  // namespace nnlens::kernels
