// nnlens/layers/max_pool2d.hpp -- 2-D max pooling.
//
//   MaxPool2D<K, Stride = K, Pad = 0>   square K x K window, symmetric padding
//   MaxPool2DG<pool_geometry{...}>      rectangular window, per-axis stride, asymmetric padding
//                                       (top, left, bottom, right), ceil_mode (kernels/conv.hpp)
//   MaxPool2D<dyn> == MaxPool2DG<pool_geometry_dyn>   the run-time form (member `geometry`)
//
// Input [C, H, W] -> [C, OH, OW].  Padding acts as -infinity (it never wins).  No weights: the
// scalar type is the activations' (forward/backward are templates on it).
// requires: rank-3 input; the window fits the padded input; no window lies entirely in the
//           padding (checked by infer and output_shape).  count_include_pad has no meaning here
//           and must keep its default.
// ensures:  ties go to the FIRST maximum in row-major window order (row, then column); a NaN
//           in a window wins over numbers (the first NaN), as in PyTorch.  backward routes dy to
//           the arg-max (adding where windows overlap).  With forward_args.cache non-null,
//           forward stores each output's arg-max (the index h*W + w in its input plane, exact in T
//           when H*W <= 2^digits(T); otherwise nothing is cached) and backward reads it; without a
//           cache backward recomputes the arg-max from x.
// Kernels: a general two-stage vectorised arg-max (detail::max_pool_plane) and, for float on
// AVX-512, a dedicated 2x2 stride-2 kernel (detail::max_pool_2x2_plane); both give the same
// arg-max and the same value bits.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <utility>
#include <vector>
#include <type_traits>
#include <string>

#include "nnlens/core/traits.hpp"
#include "nnlens/exactline/envelope.hpp"
#include "nnlens/kernels/conv.hpp"
#include "nnlens/kernels/simd.hpp"
#include "nnlens/network/dynamic_form.hpp"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace nnlens {

template <pool_geometry G>
struct MaxPool2DG {
  static_assert(G.invalid() == nullptr, "MaxPool2D: the window and the strides must be positive");
  static_assert(G.count_include_pad, "MaxPool2D: count_include_pad applies to AvgPool2D only; leave it at its default");
  static constexpr pool_geometry geometry = G;
};
template <>
struct MaxPool2DG<pool_geometry_dyn> {
  pool_geometry geometry{};
};

/// Square window and symmetric padding.  K == dyn: the run-time form.
template <std::size_t K = dyn, std::size_t Stride = K, std::size_t Pad = 0>
using MaxPool2D =
    MaxPool2DG<K == dyn ? pool_geometry_dyn : pool_geometry{K, K, Stride, Stride, Pad, Pad, Pad, Pad, false, true}>;

namespace detail {

/// True where candidate (v, key k) beats the incumbent (b, key bk): a larger value, a NaN over a
/// number, or an equal value (or both NaN) with a smaller key.  X: a scalar or a simd vector.
template <class X>
inline auto argmax_beats(X v, X k, X b, X bk) {
  return (v > b) | ((v != v) & (b == b)) | (((v == b) | ((v != v) & (b != b))) & (k < bk));
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
      simd::store(b + i, w ? vv : bv);
      simd::store(bk + i, w ? kv : bkv);
      if (tag) simd::store(tag + i, w ? tv : simd::load(tag + i));
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
#if !defined(__clang__)  // __builtin_shuffle is GCC's
  if (stride == 2 && n >= N) {
    using I = std::conditional_t<sizeof(T) == 4, std::int32_t, std::int64_t>;
    typedef I M __attribute__((vector_size(sizeof(V))));
    M even;
    for (std::size_t k = 0; k < N; ++k) even[k] = I(2 * k);
    for (std::size_t j = 0;; j += N) {
      const std::size_t t = std::min(j, n - N);
      const V a = simd::load(src + 2 * t), b = simd::load(src + 2 * t + N);
      simd::store(dst + t, V(__builtin_shuffle(a, b, even)));
      if (t == n - N) break;
    }
    return;
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

template <pool_geometry G>
struct layer_traits<MaxPool2DG<G>> : layer_defaults {
  using L = MaxPool2DG<G>;
  static constexpr std::string_view name = "MaxPool2D";
  static constexpr pool_geometry geometry_of(const L* l) {
    if constexpr (G.is_dynamic())
      return l->geometry;
    else
      return (void)l, G;
  }

  static constexpr shape_check infer(shape in) {
    return detail::pool_infer(G, in, "MaxPool2D needs an image input [C,H,W] (rank 3)",
                              "MaxPool2D: the window is larger than the padded input");
  }
  static shape output_shape(const L& l, shape in) { return detail::pool_output_shape(geometry_of(&l), in, name); }

  /// One arg-max index per output.
  static constexpr std::size_t cache_size(const L*, shape, shape out) { return out.size(); }
  /// Work space of detail::max_pool_plane (one block of planes at a time).
  static constexpr std::size_t scratch_size(const L* l, shape in, shape out, std::size_t) {
    const std::size_t pb = detail::max_pool_planes_per_block(geometry_of(l), in[1], out[1], out[2]);
    return detail::max_pool_work(in[2], pb * out[1], out[2]);
  }

  template <class T>
  static void forward(const L& l, const forward_args<T>& a) {
    if constexpr (std::is_floating_point_v<T>)
      forward_fast(l, a);
    else
      plain_loops(l, a.batch, a.in, a.out, a.x, a.y, static_cast<T*>(nullptr), static_cast<const T*>(nullptr));
  }
  template <class T>
  static void backward(const L& l, const backward_args<T>& a, L*) {
    if constexpr (std::is_floating_point_v<T>) {
      backward_fast(l, a);
    } else if (a.dx) {
      std::fill(a.dx, a.dx + a.batch * a.in.size(), T(0));
      plain_loops(l, a.batch, a.in, a.out, a.x, static_cast<T*>(nullptr), a.dx, a.dy);
    }
  }

 private:
  /// Any scalar (e.g. exact rationals in tests): plain loops, the first maximum wins.  Writes y
  /// (if y) and adds dy to dx at each arg-max (if dx).
  template <class T>
  static void plain_loops(const L& l, std::size_t batch, shape in, shape out, const T* x, T* y, T* dx, const T* dy) {
    const pool_geometry g = geometry_of(&l);
    const std::size_t C = in[0], H = in[1], W = in[2], OH = out[1], OW = out[2], P = OH * OW;
    for (std::size_t pl = 0; pl < batch * C; ++pl)
      for (std::size_t oh = 0; oh < OH; ++oh)
        for (std::size_t ow = 0; ow < OW; ++ow) {
          const std::ptrdiff_t r0 = std::ptrdiff_t(oh * g.stride_h) - std::ptrdiff_t(g.pad_top);
          const std::ptrdiff_t c0 = std::ptrdiff_t(ow * g.stride_w) - std::ptrdiff_t(g.pad_left);
          std::size_t arg = 0;
          bool any = false;
          for (std::ptrdiff_t r = std::max<std::ptrdiff_t>(r0, 0); r < std::min<std::ptrdiff_t>(r0 + std::ptrdiff_t(g.kh), std::ptrdiff_t(H)); ++r)
            for (std::ptrdiff_t c = std::max<std::ptrdiff_t>(c0, 0); c < std::min<std::ptrdiff_t>(c0 + std::ptrdiff_t(g.kw), std::ptrdiff_t(W)); ++c) {
              const std::size_t i = pl * H * W + std::size_t(r) * W + std::size_t(c);
              if (!any || x[i] > x[arg]) arg = i, any = true;
            }
          const std::size_t o = pl * P + oh * OW + ow;
          if (y) y[o] = x[arg];
          if (dx) dx[arg] += dy[o];
        }
  }

  template <class T>
  static void forward_fast(const L& l, const forward_args<T>& a) {
    const pool_geometry g = geometry_of(&l);
    const std::size_t C = a.in[0], H = a.in[1], W = a.in[2], OH = a.out[1], OW = a.out[2], P = OH * OW;
    const std::size_t planes = a.batch * C, pb = detail::max_pool_planes_per_block(g, H, OH, OW);
    const bool cache = a.cache && detail::index_exact_in<T>(H * W);
#if defined(__AVX512F__)
    if constexpr (detail::max_pool_2x2_vectorised<T>())
      if (detail::max_pool_is_2x2(g, H, W, OH, OW)) {
        for (std::size_t pl = 0; pl < planes; ++pl)
          detail::max_pool_2x2_plane(a.x + pl * H * W, W, OH, OW, a.y + pl * P, cache ? a.cache + pl * P : nullptr);
        return;
      }
#endif
    for (std::size_t p0 = 0; p0 < planes; p0 += pb) {
      const std::size_t np = std::min(pb, planes - p0);
      T* y = a.y + p0 * P;
      if (cache) {
        T* ci = a.cache + p0 * P;
        detail::max_pool_plane(a.x + p0 * H * W, np, H, W, g, OH, OW, a.scratch,
                               [&](std::size_t o, std::size_t, std::size_t i, T v) {
                                 y[o] = v;
                                 ci[o] = T(i);
                               });
      } else {
        detail::max_pool_plane(a.x + p0 * H * W, np, H, W, g, OH, OW, a.scratch,
                               [&](std::size_t o, std::size_t, std::size_t, T v) { y[o] = v; });
      }
    }
  }

  template <class T>
  static void backward_fast(const L& l, const backward_args<T>& a) {
    if (!a.dx) return;
    const pool_geometry g = geometry_of(&l);
    const std::size_t C = a.in[0], H = a.in[1], W = a.in[2], OH = a.out[1], OW = a.out[2], P = OH * OW;
    const std::size_t planes = a.batch * C;
    std::fill(a.dx, a.dx + planes * H * W, T(0));
    if (a.cache && detail::index_exact_in<T>(H * W)) {
      for (std::size_t pl = 0; pl < planes; ++pl) {
        T* dx = a.dx + pl * H * W;
        const T* dy = a.dy + pl * P;
        const T* ci = a.cache + pl * P;
        for (std::size_t o = 0; o < P; ++o) dx[std::size_t(ci[o])] += dy[o];
      }
      return;
    }
#if defined(__AVX512F__)
    if constexpr (detail::max_pool_2x2_vectorised<T>())
      if (detail::max_pool_is_2x2(g, H, W, OH, OW) && detail::index_exact_in<T>(H * W)) {
        T* idx = a.scratch;  // P arg-max indices of one plane
        for (std::size_t pl = 0; pl < planes; ++pl) {
          detail::max_pool_2x2_plane(a.x + pl * H * W, W, OH, OW, nullptr, idx);
          T* dx = a.dx + pl * H * W;
          const T* dy = a.dy + pl * P;
          for (std::size_t o = 0; o < P; ++o) dx[std::size_t(idx[o])] += dy[o];
        }
        return;
      }
#endif
    const std::size_t pb = detail::max_pool_planes_per_block(g, H, OH, OW);
    for (std::size_t p0 = 0; p0 < planes; p0 += pb) {
      T* dx = a.dx + p0 * H * W;
      const T* dy = a.dy + p0 * P;
      detail::max_pool_plane(a.x + p0 * H * W, std::min(pb, planes - p0), H, W, g, OH, OW, a.scratch,
                             [&](std::size_t o, std::size_t p, std::size_t i, T) { dx[p * H * W + i] += dy[o]; });
    }
  }
};

template <pool_geometry G>
struct dynamic_form<MaxPool2DG<G>> {
  using type = MaxPool2DG<pool_geometry_dyn>;
  static type to_dynamic(const MaxPool2DG<G>& l) { return type{layer_traits<MaxPool2DG<G>>::geometry_of(&l)}; }
  static MaxPool2DG<G> from_dynamic(const type& d, const std::string& where) {
    MaxPool2DG<G> l;
    pool_geometry dg = d.geometry;
    dg.count_include_pad = true;  // no meaning for max pooling
    if constexpr (G.is_dynamic()) {
      l.geometry = d.geometry;
    } else if (!(dg == G)) {
      throw shape_error(detail::concat(where, ": MaxPool2D geometry differs from the static type (window ", d.geometry.kh,
                                       "x", d.geometry.kw, " vs ", G.kh, "x", G.kw, "; stride ", d.geometry.stride_h, ",",
                                       d.geometry.stride_w, " vs ", G.stride_h, ",", G.stride_w, "; padding ",
                                       d.geometry.pad_top, ",", d.geometry.pad_left, ",", d.geometry.pad_bottom, ",",
                                       d.geometry.pad_right, " vs ", G.pad_top, ",", G.pad_left, ",", G.pad_bottom, ",",
                                       G.pad_right, "; ceil_mode ", d.geometry.ceil_mode, " vs ", G.ceil_mode, ")"));
    }
    return l;
  }
};

/// ExactLine: per channel and window, the points where the window's arg-max changes along the
/// segment (the upper-envelope walk, exactline/envelope.hpp).  Padding is never a candidate.  With
/// `floor` (a fused ReLU or max(x, c) next to the pool) the constant joins every window.
/// for_each_window(l, in, f) calls f(const std::size_t* idx, std::size_t n) with the flat input
/// indices of each output's candidates (also used by the plane restriction).
template <pool_geometry G>
struct pwl_rule<MaxPool2DG<G>> {
  using L = MaxPool2DG<G>;
  template <class F>
  static void for_each_window(const L& l, shape in, F&& f) {
    const pool_geometry g = layer_traits<L>::geometry_of(&l);
    const std::size_t C = in[0], H = in[1], W = in[2], OH = g.out_h(H), OW = g.out_w(W);
    thread_local std::vector<std::size_t> idx;  // called per piece of every line: no allocation
    idx.reserve(g.kh * g.kw);
    for (std::size_t c = 0; c < C; ++c)
      for (std::size_t oh = 0; oh < OH; ++oh) {
        const std::ptrdiff_t r0 = std::ptrdiff_t(oh * g.stride_h) - std::ptrdiff_t(g.pad_top);
        const std::size_t h0 = std::size_t(std::max<std::ptrdiff_t>(r0, 0));
        const std::size_t h1 = std::size_t(std::min<std::ptrdiff_t>(r0 + std::ptrdiff_t(g.kh), std::ptrdiff_t(H)));
        for (std::size_t ow = 0; ow < OW; ++ow) {
          const std::ptrdiff_t c0 = std::ptrdiff_t(ow * g.stride_w) - std::ptrdiff_t(g.pad_left);
          const std::size_t w0 = std::size_t(std::max<std::ptrdiff_t>(c0, 0));
          const std::size_t w1 = std::size_t(std::min<std::ptrdiff_t>(c0 + std::ptrdiff_t(g.kw), std::ptrdiff_t(W)));
          idx.clear();
          for (std::size_t h = h0; h < h1; ++h)
            for (std::size_t w = w0; w < w1; ++w) idx.push_back(c * H * W + h * W + w);
          if (!idx.empty()) f(idx.data(), idx.size());
        }
      }
  }
  template <class R, class T>
  static void breaks(const L& l, shape in, const T* a, const T* b, const std::optional<T>& floor, std::vector<R>& out) {
    for_each_window(l, in, [&](const std::size_t* idx, std::size_t n) {
      exactline::envelope_breaks<R, T>(
          n, [&](std::size_t k) { return std::pair<T, T>(a[idx[k]], b[idx[k]]); }, floor, out);
    });
  }
};

/// NNSlicer: per channel, channel c of the output comes from channel c of the input: (c, -, Δx_c);
/// per element, only the window's arg-max (the first maximum) contributes: (argmax, -, Δx_argmax).
template <pool_geometry G>
struct sign_rule<MaxPool2DG<G>> {
  using L = MaxPool2DG<G>;
  static void items(const L& l, const sign_ctx& c, std::size_t n, std::vector<sign_item>& out) {
    if (!c.element) {
      out.push_back({n, sign_item::none, c.dx[n]});
      return;
    }
    const pool_geometry g = layer_traits<L>::geometry_of(&l);
    const std::size_t H = c.in[1], W = c.in[2], OH = c.out[1], OW = c.out[2];
    const std::size_t ch = n / (OH * OW), p = n % (OH * OW), oh = p / OW, ow = p % OW;
    const std::ptrdiff_t r0 = std::ptrdiff_t(oh * g.stride_h) - std::ptrdiff_t(g.pad_top);
    const std::ptrdiff_t c0 = std::ptrdiff_t(ow * g.stride_w) - std::ptrdiff_t(g.pad_left);
    std::size_t arg = std::size_t(-1);
    for (std::ptrdiff_t r = std::max<std::ptrdiff_t>(r0, 0); r < std::min<std::ptrdiff_t>(r0 + std::ptrdiff_t(g.kh), std::ptrdiff_t(H)); ++r)
      for (std::ptrdiff_t q = std::max<std::ptrdiff_t>(c0, 0); q < std::min<std::ptrdiff_t>(c0 + std::ptrdiff_t(g.kw), std::ptrdiff_t(W)); ++q) {
        const std::size_t i = ch * H * W + std::size_t(r) * W + std::size_t(q);
        if (arg == std::size_t(-1) || c.x[i] > c.x[arg]) arg = i;
      }
    if (arg != std::size_t(-1)) out.push_back({arg, sign_item::none, c.dx[arg]});
  }
};

/// LRP: winner-take-all; an output's relevance goes to its window's maximum, ties split equally.
template <pool_geometry G>
struct relevance_rule<MaxPool2DG<G>> {
  using L = MaxPool2DG<G>;
  static void relevance(const L& l, const relevance_args& a) {
    const pool_geometry g = layer_traits<L>::geometry_of(&l);
    const std::size_t H = a.in[1], W = a.in[2], OH = a.out[1], OW = a.out[2];
    detail::max_relevance(a, [&](std::size_t k, auto&& f) {
      const std::size_t ch = k / (OH * OW), p = k % (OH * OW), oh = p / OW, ow = p % OW;
      const std::ptrdiff_t r0 = std::ptrdiff_t(oh * g.stride_h) - std::ptrdiff_t(g.pad_top);
      const std::ptrdiff_t c0 = std::ptrdiff_t(ow * g.stride_w) - std::ptrdiff_t(g.pad_left);
      for (std::ptrdiff_t r = std::max<std::ptrdiff_t>(r0, 0); r < std::min<std::ptrdiff_t>(r0 + std::ptrdiff_t(g.kh), std::ptrdiff_t(H)); ++r)
        for (std::ptrdiff_t q = std::max<std::ptrdiff_t>(c0, 0); q < std::min<std::ptrdiff_t>(c0 + std::ptrdiff_t(g.kw), std::ptrdiff_t(W)); ++q)
          f(ch * H * W + std::size_t(r) * W + std::size_t(q));
    });
  }
};

}  // namespace nnlens
