// nnlens/kernels/max_pool.hpp -- max-pooling arg-max kernels on raw [H, W] planes.
//
//   detail::max_pool_plane(x, planes, H, W, geometry, work, emit)   general two-stage vectorised
//                                       arg-max (any window, stride, padding; xsimd vectors)
//   detail::max_pool_2x2_plane(x, W, OH, OW, y, idx)   2x2 stride 2, float, AVX-512 only
//   detail::max_pool_planes_per_block / max_pool_is_2x2 / max_pool_2x2_vectorised   dispatch helpers
//
// Ties go to the first maximum in row-major window order; a NaN beats numbers (the first NaN wins),
// as in PyTorch.  Both kernels give the same arg-max and the same value bits.  Used by
// layers/max_pool2d.hpp.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "nnlens/kernels/conv.hpp"
#include "nnlens/kernels/simd.hpp"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace nnlens {

namespace detail {

/// True where candidate (v, key k) beats the incumbent (b, key bk): a larger value, a NaN over a
/// number, or an equal value (or both NaN) with a smaller key.  X: a scalar or a simd vector.
/// NaN is tested as !(x == x): xsimd 8.1's != is ordered on AVX and AVX-512 (false for NaN) but
/// unordered on SSE2, while == is ordered everywhere.
template <class X>
inline auto argmax_beats(X v, X k, X b, X bk) {
  const auto vn = !(v == v), bn = !(b == b);
  return (v > b) | (vn & !bn) | (((v == b) | (vn & bn)) & (k < bk));
}

/// Lane-wise arg-max update of lanes [0, n): the candidate v[i] with key k[i] (or the constant
/// `key` when k == nullptr) replaces (b, bk)[i] where it beats it, and then also sets tag[i] = t
/// (when tag != nullptr).
template <class T>
void argmax_update(std::size_t n, const T* v, const T* k, T key, T* b, T* bk, T* tag, T t) {
  namespace simd = kernels::simd;
  using V = simd::vec<T>;
  constexpr std::size_t N = simd::width<T>;
  if (n >= N) {
    const V keyv = simd::broadcast(key), tv = simd::broadcast(t);
    // full vectors, then one last vector overlapping the previous one (the update is idempotent)
    for (std::size_t j = 0;; j += N) {
      const std::size_t i = std::min(j, n - N);
      const V vv = simd::load(v + i), bv = simd::load(b + i), bkv = simd::load(bk + i);
      const V kv = k ? simd::load(k + i) : keyv;
      const auto w = argmax_beats(vv, kv, bv, bkv);
      simd::store(b + i, simd::select(w, vv, bv));
      simd::store(bk + i, simd::select(w, kv, bkv));
      if (tag) simd::store(tag + i, simd::select(w, tv, simd::load(tag + i)));
      if (i == n - N) break;
    }
    return;
  }
  // fewer lanes than a vector: one vector step on padded copies (branch-free: each comparison's
  // outcome is data-dependent and would be mispredicted half the time)
  T lv[N] = {}, lk[N] = {}, lb[N] = {}, lbk[N] = {}, ltag[N] = {};
  for (std::size_t i = 0; i < n; ++i) {
    lv[i] = v[i];
    lk[i] = k ? k[i] : key;
    lb[i] = b[i];
    lbk[i] = bk[i];
    if (tag) ltag[i] = tag[i];
  }
  argmax_update<T>(N, lv, lk, key, lb, lbk, tag ? ltag : nullptr, t);
  for (std::size_t i = 0; i < n; ++i) {
    b[i] = lb[i];
    bk[i] = lbk[i];
    if (tag) tag[i] = ltag[i];
  }
}

/// p[0, n) = v with vector stores (std::fill_n stays scalar at -O2).
template <class T>
inline void vfill(T* p, std::size_t n, T v) {
  namespace simd = kernels::simd;
  constexpr std::size_t N = simd::width<T>;
  if (n < N) {
    for (std::size_t i = 0; i < n; ++i) p[i] = v;
    return;
  }
  const auto vv = simd::broadcast(v);
  for (std::size_t i = 0; i + N <= n; i += N) simd::store(p + i, vv);
  simd::store(p + n - N, vv);
}

/// dst[t] = src[t * stride] for t in [0, n).  Stride 2 deinterleaves whole vectors; it may read
/// up to src[2n] (the caller keeps that inside its buffer).
template <class T>
inline void strided_copy(const T* src, std::size_t stride, std::size_t n, T* dst) {
  namespace simd = kernels::simd;
  using V = simd::vec<T>;
  constexpr std::size_t N = simd::width<T>;
#if !defined(__clang__)  // __builtin_shuffle is GCC's (xsimd 8.1 has no two-source shuffle)
  if constexpr (simd::vector_of<T>) {
    if (stride == 2 && n >= N) {
      using R = typename V::register_type;  // a GCC vector type (__m512, float32x4_t, ...)
      using I = std::conditional_t<sizeof(T) == 4, std::int32_t, std::int64_t>;
      typedef I M __attribute__((vector_size(sizeof(V))));
      M even;
      for (std::size_t k = 0; k < N; ++k) even[k] = I(2 * k);
      for (std::size_t j = 0;; j += N) {
        const std::size_t t = std::min(j, n - N);
        const R a = simd::load(src + 2 * t), b = simd::load(src + 2 * t + N);
        simd::store(dst + t, V(R(__builtin_shuffle(a, b, even))));
        if (t == n - N) break;
      }
      return;
    }
  }
#endif
  for (std::size_t t = 0; t < n; ++t) dst[t] = src[t * stride];
}

/// Scratch scalars max_pool_plane needs for an [H, W] plane pooled to [OH, OW].
constexpr std::size_t max_pool_work(std::size_t W, std::size_t OH, std::size_t OW) {
  return 3 * OH * W + 5 * OH * OW;
}

/// Arg-max of every output of `planes` consecutive [H, W] planes (planes > 1 only when
/// max_pool_planes_per_block allows it); emit(o, plane, index h*W + w in that plane, value) with o
/// the output's index among the block's outputs.
/// Ties: the first maximum in row-major order; NaN beats numbers (the first NaN wins).
/// Two vectorised stages over the whole plane: (1) for every output row and input column, the
/// maximum over the window's rows and the window row i holding it (rows visited top-down, so
/// a tie keeps the upper one); (2) for every output, the best over the window's columns j, visited
/// left to right, a tie going to the smaller i.  Padding never takes part: it enters as -inf with
/// a key that loses every tie.  work: max_pool_work(W, planes * OH, OW) scalars.
template <class T, class F>
void max_pool_plane(const T* x, std::size_t planes, std::size_t H1, std::size_t W, const pool_geometry& g,
                    std::size_t OH1, std::size_t OW, T* work, F&& emit) {
  const T ninf = -std::numeric_limits<T>::infinity();
  const std::size_t H = planes * H1, OH = planes * OH1;  // the planes stacked into one tall plane
  const std::size_t sh = g.stride_h, sw = g.stride_w, P = OH * OW;
  T* m = work;          // [OH][W]: column maxima of each output row's window rows
  T* mi = m + OH * W;   //          the window row i holding them
  T* xs = mi + OH * W;  // [OH][W]: the input rows of one window row i, gathered (stride_h > 1)
  T* best = xs + OH * W;  // [OH][OW]: value, window row i, window column j
  T* bi = best + P;
  T* bj = bi + P;
  T* gv = bj + P;  // [OH][OW]: stage-2 gathers
  T* gi = gv + P;
  vfill(m, OH * W, ninf);
  vfill(mi, OH * W, T(g.kh));  // loses every tie against a real row
  for (std::size_t i = 0; i < g.kh; ++i) {
    const kernels::output_range r = kernels::valid_outputs(H, OH, sh, std::ptrdiff_t(i) - std::ptrdiff_t(g.pad_top));
    const std::size_t n = r.hi - r.lo;
    if (n == 0) continue;
    const T* src = x + r.first * W;  // rows r.first, r.first + sh, ...
    if (sh != 1) {
      for (std::size_t q = 0; q < n; ++q) std::copy_n(x + (r.first + q * sh) * W, W, xs + q * W);
      src = xs;
    }
    argmax_update<T>(n * W, src, nullptr, T(i), m + r.lo * W, mi + r.lo * W, nullptr, T(0));
  }
  vfill(best, P, ninf);
  vfill(bi, P, T(g.kh));
  vfill(bj, P, T(0));
  for (std::size_t j = 0; j < g.kw; ++j) {
    const kernels::output_range c = kernels::valid_outputs(W, OW, sw, std::ptrdiff_t(j) - std::ptrdiff_t(g.pad_left));
    if (c.hi == c.lo) continue;
    if (c.lo == 0 && c.hi == OW && W == sw * OW) {
      // the tap is inside every window and the rows tile exactly: one strided run over the plane
      // (stride 2 may read one vector past m / mi: into mi / xs, never outside the work buffer)
      strided_copy(m + c.first, sw, P, gv);
      strided_copy(mi + c.first, sw, P, gi);
      argmax_update<T>(P, gv, gi, T(0), best, bi, bj, T(j));
      continue;
    }
    for (std::size_t oh = 0; oh < OH; ++oh) {
      T* v = gv + oh * OW;
      T* k = gi + oh * OW;
      const T* mrow = m + oh * W + c.first;
      const T* irow = mi + oh * W + c.first;
      for (std::size_t ow = 0; ow < c.lo; ++ow) v[ow] = ninf, k[ow] = T(g.kh);
      for (std::size_t q = 0; q < c.hi - c.lo; ++q) {
        v[c.lo + q] = mrow[q * sw];
        k[c.lo + q] = irow[q * sw];
      }
      for (std::size_t ow = c.hi; ow < OW; ++ow) v[ow] = ninf, k[ow] = T(g.kh);
    }
    argmax_update<T>(P, gv, gi, T(0), best, bi, bj, T(j));
  }
  std::size_t o = 0;
  for (std::size_t p = 0; p < planes; ++p)
    for (std::size_t oh = 0; oh < OH1; ++oh) {
      const std::size_t h0 = oh * sh - g.pad_top;  // modular arithmetic: h0 + i is the row in the plane
      for (std::size_t ow = 0; ow < OW; ++ow, ++o) {
        const std::size_t w0 = ow * sw - g.pad_left;
        const std::size_t h = h0 + std::size_t(std::ptrdiff_t(bi[o])), w = w0 + std::size_t(std::ptrdiff_t(bj[o]));
        emit(o, p, h * W + w, best[o]);
      }
    }
}

/// How many planes max_pool_plane takes at once: several when the windows tile the rows exactly
/// (no vertical padding, H == OH * stride_h, no window past the last row), so that stacked planes
/// never share a window; enough for ~256 outputs.
constexpr std::size_t max_pool_planes_per_block(const pool_geometry& g, std::size_t H, std::size_t OH, std::size_t OW) {
  const bool stack = g.pad_top == 0 && g.pad_bottom == 0 && H == OH * g.stride_h && (OH - 1) * g.stride_h + g.kh <= H;
  if (!stack || OH * OW == 0) return 1;
  return std::clamp<std::size_t>((256 + OH * OW - 1) / (OH * OW), 1, 64);
}

/// The 2x2, stride-2, unpadded window with every window inside the input (LeNet's, VGG's): a
/// fully vectorised kernel for float on AVX-512 (16 outputs per step, masked row tails).
constexpr bool max_pool_is_2x2(const pool_geometry& g, std::size_t H, std::size_t W, std::size_t OH, std::size_t OW) {
  return g.kh == 2 && g.kw == 2 && g.stride_h == 2 && g.stride_w == 2 && g.pad_top == 0 && g.pad_left == 0 &&
         g.pad_bottom == 0 && g.pad_right == 0 && 2 * OH <= H && 2 * OW <= W;
}
template <class T>
constexpr bool max_pool_2x2_vectorised() {
#if defined(__AVX512F__)
  return std::is_same_v<T, float>;
#else
  return false;
#endif
}

#if defined(__AVX512F__)
/// One plane: y[o] (if y) and idx[o] = h*W + w of the arg-max (if idx), same rules as
/// max_pool_plane: the candidates in row-major order, each replacing the best if it beats it.
inline void max_pool_2x2_plane(const float* x, std::size_t W, std::size_t OH, std::size_t OW, float* y, float* idx) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  const __m512i lane2 = even;  // 2 * lane
  auto beats = [](__m512 c, __m512 b) {
    return __mmask16(_mm512_cmp_ps_mask(c, b, _CMP_GT_OQ) |
                     (_mm512_cmp_ps_mask(c, c, _CMP_UNORD_Q) & _mm512_cmp_ps_mask(b, b, _CMP_ORD_Q)));
  };
  for (std::size_t oh = 0; oh < OH; ++oh) {
    const float* r0 = x + 2 * oh * W;
    const float* r1 = r0 + W;
    for (std::size_t ow = 0; ow < OW; ow += 16) {
      const std::size_t n = std::min<std::size_t>(16, OW - ow), cols = 2 * n;
      const __mmask16 mo = __mmask16((1u << n) - 1);
      const __mmask16 m0 = __mmask16(cols >= 16 ? 0xFFFF : (1u << cols) - 1);
      const __mmask16 m1 = __mmask16(cols > 16 ? (1u << (cols - 16)) - 1 : 0);
      const float* p0 = r0 + 2 * ow;
      const float* p1 = r1 + 2 * ow;
      const __m512 a0 = _mm512_maskz_loadu_ps(m0, p0), a1 = _mm512_maskz_loadu_ps(m1, p0 + 16);
      const __m512 b0 = _mm512_maskz_loadu_ps(m0, p1), b1 = _mm512_maskz_loadu_ps(m1, p1 + 16);
      __m512 best = _mm512_permutex2var_ps(a0, even, a1);  // (2oh, 2ow)
      __m512i tag = _mm512_setzero_si512();
      const __m512 c1 = _mm512_permutex2var_ps(a0, odd, a1);  // (2oh, 2ow + 1)
      __mmask16 k = beats(c1, best);
      best = _mm512_mask_blend_ps(k, best, c1);
      tag = _mm512_mask_mov_epi32(tag, k, _mm512_set1_epi32(1));
      const __m512 c2 = _mm512_permutex2var_ps(b0, even, b1);  // (2oh + 1, 2ow)
      k = beats(c2, best);
      best = _mm512_mask_blend_ps(k, best, c2);
      tag = _mm512_mask_mov_epi32(tag, k, _mm512_set1_epi32(int(W)));
      const __m512 c3 = _mm512_permutex2var_ps(b0, odd, b1);  // (2oh + 1, 2ow + 1)
      k = beats(c3, best);
      best = _mm512_mask_blend_ps(k, best, c3);
      tag = _mm512_mask_mov_epi32(tag, k, _mm512_set1_epi32(int(W) + 1));
      const std::size_t o = oh * OW + ow;
      if (y) _mm512_mask_storeu_ps(y + o, mo, best);
      if (idx) {
        const __m512i base = _mm512_add_epi32(_mm512_set1_epi32(int(2 * oh * W + 2 * ow)), lane2);
        _mm512_mask_storeu_ps(idx + o, mo, _mm512_maskz_cvtepi32_ps(mo, _mm512_add_epi32(base, tag)));
      }
    }
  }
}
#endif

template <class T>
constexpr bool index_exact_in(std::size_t n) {
  return n <= (std::size_t(1) << std::min<int>(std::numeric_limits<T>::digits, 62));
}

}  // namespace detail

}  // namespace nnlens
