// nnlens/kernels/conv.hpp -- sliding-window geometry (convolution, pooling) and im2col / col2im.
//
//   conv_geometry   kernel kh x kw, per-axis stride and dilation, padding (top, left, bottom, right),
//                   groups.  Unnamed fields follow the named ones: conv_geometry{.kh = 3} is a 3x3
//                   kernel, stride 1, no padding; {.kh = 3, .kw = 5, .stride_h = 2, .pad_top = 1}
//                   has stride_w = 2 and pad_bottom = 1, pad_left = pad_right = 0.
//   pool_geometry   window kh x kw, per-axis stride, padding, ceil_mode and count_include_pad
//                   (AvgPool2D only).  The strides default to the window (non-overlapping); an
//                   explicit stride_h other than kh is also stride_w's default:
//                   {.kh = 3, .stride_h = 2} strides 2 both ways, {.kh = 2, .kw = 3} strides 2, 3.
//   conv_geometry_dyn / pool_geometry_dyn   the "known only at run time" sentinels (the layer then
//                   holds its geometry as a member; see layers/conv2d.hpp).
//   kernels::im2col(x, C, H, W, g, OH, OW, col, ld)    col[(c*kh+i)*kw+j][oh*OW+ow] (row stride ld) =
//                   x[c][oh*sh + i*dh - pad_top][ow*sw + j*dw - pad_left], 0 in the padding
//   kernels::col2im(col, ld, C, H, W, g, OH, OW, dx)   the adjoint: ADDS every col entry into dx
//   kernels::gemm_nt(M, N, K, A, lda, B, ldb, C, ldc)  C += A B^T for a long K (weight gradients)
//   kernels::pad_planes / conv_direct                  direct stride-1 convolution (few channels)
//   kernels::sum(x, n)                                 vectorised sum (bias gradients)
//   kernels::valid_outputs(in, out, stride, off)       the outputs o in [lo, hi) with
//                                                      0 <= o*stride + off < in (no div in loops)
//   kernels::tap_rows / tap_cols(g, in, out, i)        valid_outputs of kernel row / column i
//   detail::pool_infer / pool_output_shape             shape checks shared by the pooling layers
//                                                      (their window bounds: kernels/window.hpp)
//
// requires: x holds C*H*W scalars (one sample, NCHW); col holds C*kh*kw rows of ld >= OH*OW
//           scalars; OH, OW are the geometry's out_h / out_w (the caller checked them).
// ensures:  no division or modulo per element; vector copies when the stride is 1 (masked for
//           short rows on AVX-512); every result is deterministic for given sizes, and col2im adds
//           in the same (c, i, j) order per element on every path.  Portable code (xsimd batches,
//           kernels/simd.hpp) everywhere; AVX-512 intrinsics only for masked loads and stores
//           (which xsimd 8.1 lacks), behind __AVX512F__ in detail::masked_*, with the portable
//           path beside them.
#pragma once

#include <algorithm>
#include <cstddef>
#include <initializer_list>
#include <string_view>
#include <type_traits>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "nnlens/core/shape.hpp"
#include "nnlens/kernels/simd.hpp"

namespace nnlens {

/// Geometry of a 2-D convolution (a structural type: usable as a template argument).
struct conv_geometry {
  std::size_t kh = 1, kw = kh;                  // kernel height, width
  std::size_t stride_h = 1, stride_w = stride_h;
  std::size_t pad_top = 0, pad_left = pad_top;  // zero padding before the first row / column
  std::size_t pad_bottom = pad_top, pad_right = pad_left;
  std::size_t dilation_h = 1, dilation_w = dilation_h;
  std::size_t groups = 1;  // in and out channels split into `groups` independent convolutions
  constexpr bool operator==(const conv_geometry&) const = default;

  constexpr bool is_dynamic() const { return kh == dyn; }
  /// 1x1, stride 1, no padding: each input plane is its own im2col row.
  constexpr bool is_pointwise() const {
    return kh == 1 && kw == 1 && stride_h == 1 && stride_w == 1 && pad_top == 0 && pad_left == 0 && pad_bottom == 0 &&
           pad_right == 0;
  }
  /// Input rows (columns) the dilated kernel spans.
  constexpr std::size_t span_h() const { return dilation_h * (kh - 1) + 1; }
  constexpr std::size_t span_w() const { return dilation_w * (kw - 1) + 1; }
  constexpr std::size_t out_h(std::size_t h) const {
    return detail::window_out(h, kh, stride_h, pad_top, pad_bottom, dilation_h);
  }
  constexpr std::size_t out_w(std::size_t w) const {
    return detail::window_out(w, kw, stride_w, pad_left, pad_right, dilation_w);
  }
  /// A sentence saying what is wrong with the hyper-parameters, or nullptr.
  constexpr const char* invalid() const {
    for (std::size_t v : {kh, kw, stride_h, stride_w, pad_top, pad_left, pad_bottom, pad_right, dilation_h, dilation_w, groups})
      if (v == dyn) return "the geometry has a dyn field (never set)";
    if (kh == 0 || kw == 0) return "the kernel must be at least 1x1";
    if (stride_h == 0 || stride_w == 0) return "strides must be positive";
    if (dilation_h == 0 || dilation_w == 0) return "dilations must be positive";
    if (groups == 0) return "groups must be positive";
    return nullptr;
  }
};

/// The run-time-geometry sentinel of Conv2DG (every field dyn).
inline constexpr conv_geometry conv_geometry_dyn{dyn, dyn, dyn, dyn, dyn, dyn, dyn, dyn, dyn, dyn, dyn};

/// Geometry of a 2-D pooling window.
struct pool_geometry {
  std::size_t kh = 1, kw = kh;
  std::size_t stride_h = kh;                       // default: non-overlapping windows
  std::size_t stride_w = stride_h == kh ? kw : stride_h;  // default: likewise, or stride_h if it was set
  std::size_t pad_top = 0, pad_left = pad_top;
  std::size_t pad_bottom = pad_top, pad_right = pad_left;
  bool ceil_mode = false;         // PyTorch's rule: an extra window if it starts inside the input
                                  // or the top/left padding
  bool count_include_pad = true;  // AvgPool2D: divide by the window area clipped to the padded
                                  // input (true) or by the number of input elements (false)
  constexpr bool operator==(const pool_geometry&) const = default;

  constexpr bool is_dynamic() const { return kh == dyn; }
  constexpr std::size_t out_h(std::size_t h) const { return out_extent(h, kh, stride_h, pad_top, pad_bottom); }
  constexpr std::size_t out_w(std::size_t w) const { return out_extent(w, kw, stride_w, pad_left, pad_right); }
  /// PyTorch's pooling_output_shape with per-side padding (core/shape.hpp: in ceil_mode the last
  /// window must start inside the input or the top/left padding).
  constexpr std::size_t out_extent(std::size_t in, std::size_t k, std::size_t s, std::size_t lo, std::size_t hi) const {
    return detail::window_out(in, k, s, lo, hi, 1, ceil_mode);
  }
  constexpr const char* invalid() const {
    for (std::size_t v : {kh, kw, stride_h, stride_w, pad_top, pad_left, pad_bottom, pad_right})
      if (v == dyn) return "the geometry has a dyn field (never set)";
    if (kh == 0 || kw == 0) return "the window must be at least 1x1";
    if (stride_h == 0 || stride_w == 0) return "strides must be positive";
    return nullptr;
  }
  /// nullptr if every window overlaps the input, else a sentence (checked for an [h, w] input
  /// whose output extents oh, ow are positive).
  constexpr const char* window_in_padding(std::size_t h, std::size_t w, std::size_t oh, std::size_t ow) const {
    if (h == dyn || w == dyn || oh == dyn || ow == dyn) return nullptr;
    // Window o covers [o*s - pad, o*s - pad + k): the first must end after 0, the last start before h.
    if (pad_top >= kh || pad_left >= kw || (oh - 1) * stride_h >= h + pad_top || (ow - 1) * stride_w >= w + pad_left)
      return "a pooling window lies entirely in the padding (padding too large for the window)";
    return nullptr;
  }
};

/// The run-time-geometry sentinel of the pooling layers.
inline constexpr pool_geometry pool_geometry_dyn{dyn, dyn, dyn, dyn, dyn, dyn, dyn, dyn, false, true};

namespace detail {

/// Shape checks shared by the pooling layers (the messages / `what` name the layer).
constexpr shape_check pool_infer(const pool_geometry& g, shape in, const char* rank_msg, const char* big_msg) {
  if (in.rank != 3) return {{}, rank_msg};
  if (g.is_dynamic()) return {shape(in[0], dyn, dyn), nullptr};
  const std::size_t oh = g.out_h(in[1]), ow = g.out_w(in[2]);
  if (oh == 0 || ow == 0) return {{}, big_msg};
  if (const char* e = g.window_in_padding(in[1], in[2], oh, ow)) return {{}, e};
  return {shape(in[0], oh, ow), nullptr};
}

inline shape pool_output_shape(const pool_geometry& g, shape in, std::string_view what) {
  if (in.rank != 3) throw shape_error(concat(what, " needs an image input [C,H,W], got ", in.str()));
  if (const char* bad = g.invalid()) throw shape_error(concat(what, ": ", bad));
  const std::size_t oh = g.out_h(in[1]), ow = g.out_w(in[2]);
  if (oh == 0 || ow == 0)
    throw shape_error(concat(what, ": the ", g.kh, "x", g.kw, " window is larger than the padded input ", in.str()));
  if (const char* e = g.window_in_padding(in[1], in[2], oh, ow))
    throw shape_error(concat(what, ": ", e, " (window ", g.kh, "x", g.kw, ", padding ", g.pad_top, ",", g.pad_left, ",",
                             g.pad_bottom, ",", g.pad_right, ", input ", in.str(), ")"));
  return shape(in[0], oh, ow);
}

}  // namespace detail

}  // namespace nnlens

namespace nnlens::kernels {

/// Outputs o in [lo, hi) whose input index o*stride + off lies in [0, in); `first` is the input
/// index of o = lo.
struct output_range {
  std::size_t lo = 0, hi = 0;
  std::size_t first = 0;
};

inline output_range valid_outputs(std::size_t in, std::size_t out, std::size_t stride, std::ptrdiff_t off) {
  const auto s = std::ptrdiff_t(stride);
  const std::ptrdiff_t lo = off >= 0 ? 0 : (-off + s - 1) / s;
  const std::ptrdiff_t lim = std::ptrdiff_t(in) - off;  // need o*s < lim
  const std::ptrdiff_t hi = lim <= 0 ? 0 : std::min<std::ptrdiff_t>(std::ptrdiff_t(out), (lim + s - 1) / s);
  output_range r;
  r.lo = std::size_t(std::min(lo, hi));
  r.hi = std::size_t(std::max(hi, std::ptrdiff_t(0)));
  if (r.lo > r.hi) r.lo = r.hi;
  r.first = r.lo < r.hi ? std::size_t(std::ptrdiff_t(r.lo) * s + off) : 0;
  return r;
}

/// The output rows (columns) whose kernel row i (column j) reads inside the input [H, W] rather than
/// the padding: valid_outputs along one axis of the geometry.
inline output_range tap_rows(const conv_geometry& g, std::size_t H, std::size_t OH, std::size_t i) {
  return valid_outputs(H, OH, g.stride_h, std::ptrdiff_t(i * g.dilation_h) - std::ptrdiff_t(g.pad_top));
}
inline output_range tap_cols(const conv_geometry& g, std::size_t W, std::size_t OW, std::size_t j) {
  return valid_outputs(W, OW, g.stride_w, std::ptrdiff_t(j * g.dilation_w) - std::ptrdiff_t(g.pad_left));
}

namespace detail {
#if defined(__AVX512F__)
template <class T>
inline constexpr bool masked_ops = (std::is_same_v<T, float> || std::is_same_v<T, double>) && simd::width<T> * sizeof(T) == 64;
template <class T>
inline auto tail_mask(std::size_t n) {
  if constexpr (std::is_same_v<T, float>)
    return __mmask16((1u << n) - 1);
  else
    return __mmask8((1u << n) - 1);
}
template <class T, class M>
inline void masked_copy(T* dst, const T* src, M m) {
  if constexpr (std::is_same_v<T, float>)
    _mm512_mask_storeu_ps(dst, m, _mm512_maskz_loadu_ps(m, src));
  else
    _mm512_mask_storeu_pd(dst, m, _mm512_maskz_loadu_pd(m, src));
}
template <class T, class M>
inline simd::vec<T> masked_load(M m, const T* p) {
  if constexpr (std::is_same_v<T, float>)
    return simd::vec<T>(_mm512_maskz_loadu_ps(m, p));
  else
    return simd::vec<T>(_mm512_maskz_loadu_pd(m, p));
}
template <class T, class M>
inline void masked_store(T* p, M m, simd::vec<T> v) {
  if constexpr (std::is_same_v<T, float>)
    _mm512_mask_storeu_ps(p, m, __m512(v));
  else
    _mm512_mask_storeu_pd(p, m, __m512d(v));
}
#else
template <class T>
inline constexpr bool masked_ops = false;
#endif

/// dst[0, n) = 0.
template <class T>
inline void zero_row(T* dst, std::size_t n) {
  constexpr std::size_t N = simd::width<T>;
  if (n < N) {
    for (std::size_t i = 0; i < n; ++i) dst[i] = T(0);
    return;
  }
  std::size_t i = 0;
  for (; i + N <= n; i += N) simd::store(dst + i, simd::zero<T>());
  if (i < n) simd::store(dst + n - N, simd::zero<T>());
}

/// rows x n block copy: dst[r*dld + k] = src[r*sld + k] (no overlap; short rows without calls).
template <class T>
inline void copy_block(T* dst, std::size_t dld, const T* src, std::size_t sld, std::size_t rows, std::size_t n) {
  constexpr std::size_t N = simd::width<T>;
  if (n >= N) {
    for (std::size_t r = 0; r < rows; ++r, dst += dld, src += sld) {
      std::size_t i = 0;
      for (; i + N <= n; i += N) simd::store(dst + i, simd::load(src + i));
      if (i < n) simd::store(dst + n - N, simd::load(src + n - N));  // overlapping: same values
    }
    return;
  }
#if defined(__AVX512F__)
  if constexpr (masked_ops<T>) {
    const auto m = tail_mask<T>(n);
    for (std::size_t r = 0; r < rows; ++r, dst += dld, src += sld) masked_copy(dst, src, m);
    return;
  }
#endif
  for (std::size_t r = 0; r < rows; ++r, dst += dld, src += sld)
    for (std::size_t i = 0; i < n; ++i) dst[i] = src[i];
}

}  // namespace detail

/// sum of x[0, n), with vector accumulators (deterministic order for a given build).
template <class T>
inline T sum(const T* x, std::size_t n) {
  constexpr std::size_t N = simd::width<T>;
  if (n < N) {  // (separately: no vector code for GCC's -Warray-bounds to see on short arrays)
    T s = T(0);
    for (std::size_t i = 0; i < n; ++i) s += x[i];
    return s;
  }
  simd::vec<T> a0 = simd::zero<T>(), a1 = simd::zero<T>();
  std::size_t i = 0;
  for (; i + 2 * N <= n; i += 2 * N) {
    a0 += simd::load(x + i);
    a1 += simd::load(x + i + N);
  }
  for (; i + N <= n; i += N) a0 += simd::load(x + i);
  T s = simd::hsum<T>(a0 + a1);
  for (; i < n; ++i) s += x[i];
  return s;
}

namespace detail {
/// C[R x S] += A[R rows, lda] . B[S rows, ldb]^T over k in [0, K), one register tile.
template <std::size_t R, std::size_t S, class T>
inline void gemm_nt_tile(std::size_t K, const T* A, std::size_t lda, const T* B, std::size_t ldb, T* C,
                         std::size_t ldc) {
  using V = simd::vec<T>;
  constexpr std::size_t N = simd::width<T>;
  V acc[R][S];
  for (auto& row : acc)
    for (V& a : row) a = simd::zero<T>();
  std::size_t k = 0;
  for (; k + N <= K; k += N) {
    V b[S];
    for (std::size_t s = 0; s < S; ++s) b[s] = simd::load(B + s * ldb + k);
    for (std::size_t r = 0; r < R; ++r) {
      const V a = simd::load(A + r * lda + k);
      for (std::size_t s = 0; s < S; ++s) acc[r][s] += a * b[s];
    }
  }
  if (k < K) {  // the tail as one more vector step on zero-padded copies
    const std::size_t n = K - k;
    V b[S];
    for (std::size_t s = 0; s < S; ++s) {
      alignas(64) T tmp[N] = {};
      for (std::size_t q = 0; q < n; ++q) tmp[q] = B[s * ldb + k + q];
      b[s] = simd::load(tmp);
    }
    for (std::size_t r = 0; r < R; ++r) {
      alignas(64) T tmp[N] = {};
      for (std::size_t q = 0; q < n; ++q) tmp[q] = A[r * lda + k + q];
      const V a = simd::load(tmp);
      for (std::size_t s = 0; s < S; ++s) acc[r][s] += a * b[s];
    }
  }
  for (std::size_t r = 0; r < R; ++r)
    for (std::size_t s = 0; s < S; ++s) C[r * ldc + s] += simd::hsum<T>(acc[r][s]);
}
}  // namespace detail

/// C[M, N] += A[M, K] . B[N, K]^T for a long K (both operands with K contiguous): the convolution
/// weight gradient dW += dy . col^T.  Register tiles of 6 x 2 dot products, K in equal blocks of
/// at most 4096.  Deterministic for given sizes.
template <class T>
void gemm_nt(std::size_t M, std::size_t N, std::size_t K, const T* A, std::size_t lda, const T* B, std::size_t ldb,
             T* C, std::size_t ldc) {
  constexpr std::size_t MR = 6, NR = 2, KC = 4096, W = simd::width<T>;
  // K in equal blocks of at most KC (whole vectors), so no block is a short remainder
  const std::size_t blocks = (K + KC - 1) / KC;
  const std::size_t kb = ((K + blocks - 1) / std::max<std::size_t>(1, blocks) + W - 1) / W * W;
  for (std::size_t k0 = 0; k0 < K; k0 += kb) {
    const std::size_t kc = std::min(kb, K - k0);
    for (std::size_t i = 0; i < M; i += MR) {
      const std::size_t mr = std::min(MR, M - i);
      const T* a = A + i * lda + k0;
      for (std::size_t j = 0; j < N; j += NR) {
        const std::size_t nr = std::min(NR, N - j);
        const T* b = B + j * ldb + k0;
        T* c = C + i * ldc + j;
        // dispatch on the tile shape (the compiler keeps each accumulator block in registers)
        switch (mr * 2 + nr - 1) {
          case 6 * 2 + 1: detail::gemm_nt_tile<6, 2>(kc, a, lda, b, ldb, c, ldc); break;
          case 6 * 2 + 0: detail::gemm_nt_tile<6, 1>(kc, a, lda, b, ldb, c, ldc); break;
          case 5 * 2 + 1: detail::gemm_nt_tile<5, 2>(kc, a, lda, b, ldb, c, ldc); break;
          case 5 * 2 + 0: detail::gemm_nt_tile<5, 1>(kc, a, lda, b, ldb, c, ldc); break;
          case 4 * 2 + 1: detail::gemm_nt_tile<4, 2>(kc, a, lda, b, ldb, c, ldc); break;
          case 4 * 2 + 0: detail::gemm_nt_tile<4, 1>(kc, a, lda, b, ldb, c, ldc); break;
          case 3 * 2 + 1: detail::gemm_nt_tile<3, 2>(kc, a, lda, b, ldb, c, ldc); break;
          case 3 * 2 + 0: detail::gemm_nt_tile<3, 1>(kc, a, lda, b, ldb, c, ldc); break;
          case 2 * 2 + 1: detail::gemm_nt_tile<2, 2>(kc, a, lda, b, ldb, c, ldc); break;
          case 2 * 2 + 0: detail::gemm_nt_tile<2, 1>(kc, a, lda, b, ldb, c, ldc); break;
          case 1 * 2 + 1: detail::gemm_nt_tile<1, 2>(kc, a, lda, b, ldb, c, ldc); break;
          default: detail::gemm_nt_tile<1, 1>(kc, a, lda, b, ldb, c, ldc); break;
        }
      }
    }
  }
}

/// xp[c][Hp][Wp] = x[c] with the geometry's zero padding around it (Hp = H + pad_top + pad_bottom,
/// Wp = W + pad_left + pad_right).
template <class T>
void pad_planes(const T* x, std::size_t C, std::size_t H, std::size_t W, const conv_geometry& g, T* xp) {
  const std::size_t Hp = H + g.pad_top + g.pad_bottom, Wp = W + g.pad_left + g.pad_right;
  for (std::size_t c = 0; c < C; ++c) {
    T* p = xp + c * Hp * Wp;
    detail::zero_row(p, g.pad_top * Wp);
    for (std::size_t h = 0; h < H; ++h) {
      T* row = p + (g.pad_top + h) * Wp;
      for (std::size_t k = 0; k < g.pad_left; ++k) row[k] = T(0);
      detail::copy_block(row + g.pad_left, 0, x + (c * H + h) * W, 0, 1, W);
      for (std::size_t k = g.pad_left + W; k < Wp; ++k) row[k] = T(0);
    }
    detail::zero_row(p + (g.pad_top + H) * Wp, g.pad_bottom * Wp);
  }
}

namespace detail {
/// R output channels x V vectors of one output row: acc = b + sum_{c,i,j} w * xp[c][i*dh][s + j*dw].
template <std::size_t R, std::size_t V, class T>
inline void direct_tile(const T* xp, std::size_t C, std::size_t plane, std::size_t Wp, const T* wt, std::size_t O,
                        const T* b, const conv_geometry& g, const std::size_t* starts, T* y, std::size_t P) {
  using Vec = simd::vec<T>;
  Vec acc[R][V];
  for (std::size_t r = 0; r < R; ++r)
    for (std::size_t v = 0; v < V; ++v) acc[r][v] = simd::broadcast(b[r]);
  for (std::size_t c = 0; c < C; ++c)
    for (std::size_t i = 0; i < g.kh; ++i) {
      const T* xr = xp + c * plane + i * g.dilation_h * Wp;
      const T* w = wt + (c * g.kh + i) * g.kw * O;
      for (std::size_t j = 0; j < g.kw; ++j, w += O) {
        Vec xv[V];
        for (std::size_t v = 0; v < V; ++v) xv[v] = simd::load(xr + starts[v] + j * g.dilation_w);
        for (std::size_t r = 0; r < R; ++r) {
          const Vec wv = simd::broadcast(w[r]);
          for (std::size_t v = 0; v < V; ++v) acc[r][v] += wv * xv[v];
        }
      }
    }
  for (std::size_t r = 0; r < R; ++r)
    for (std::size_t v = 0; v < V; ++v) simd::store(y + r * P + starts[v], acc[r][v]);
}

template <std::size_t V, class T>
inline void direct_tile_rows(std::size_t R, const T* xp, std::size_t C, std::size_t plane, std::size_t Wp, const T* wt,
                             std::size_t O, const T* b, const conv_geometry& g, const std::size_t* starts, T* y,
                             std::size_t P) {
  switch (R) {
    case 6: direct_tile<6, V>(xp, C, plane, Wp, wt, O, b, g, starts, y, P); break;
    case 5: direct_tile<5, V>(xp, C, plane, Wp, wt, O, b, g, starts, y, P); break;
    case 4: direct_tile<4, V>(xp, C, plane, Wp, wt, O, b, g, starts, y, P); break;
    case 3: direct_tile<3, V>(xp, C, plane, Wp, wt, O, b, g, starts, y, P); break;
    case 2: direct_tile<2, V>(xp, C, plane, Wp, wt, O, b, g, starts, y, P); break;
    default: direct_tile<1, V>(xp, C, plane, Wp, wt, O, b, g, starts, y, P); break;
  }
}
}  // namespace detail

/// Direct stride-1 convolution of one sample (one group), for few output channels and output rows
/// of at least one vector: y[o][oh][ow] = b[o] + sum_{c,i,j} wt[(c*kh+i)*kw+j][o] *
/// xp[c][oh + i*dh][ow + j*dw], xp from pad_planes, wt the weights transposed to [C*kh*kw][O].
/// Register tiles of up to 6 channels x 2 vectors of one output row; the last vector of a row
/// overlaps the one before (recomputing the same outputs) instead of a scalar tail.
/// requires: stride 1 on both axes; OW >= simd::width<T>.
template <class T>
void conv_direct(const T* xp, std::size_t C, const T* wt, const T* b, std::size_t O, const conv_geometry& g,
                 std::size_t OH, std::size_t OW, T* y) {
  constexpr std::size_t N = simd::width<T>, R = 6;
  const std::size_t Hp = (OH - 1) + g.span_h(), Wp = (OW - 1) + g.span_w(), P = OH * OW;
  const std::size_t nv = (OW + N - 1) / N;  // vectors per output row, the last one shifted left
  for (std::size_t o0 = 0; o0 < O; o0 += R) {
    const std::size_t r = std::min(R, O - o0);
    for (std::size_t oh = 0; oh < OH; ++oh) {
      const T* xr = xp + oh * Wp;
      T* yr = y + o0 * P + oh * OW;
      for (std::size_t v = 0; v < nv; v += 2) {
        const std::size_t starts[2] = {std::min(v * N, OW - N), std::min((v + 1) * N, OW - N)};
        if (v + 1 < nv)
          detail::direct_tile_rows<2>(r, xr, C, Hp * Wp, Wp, wt + o0, O, b + o0, g, starts, yr, P);
        else
          detail::direct_tile_rows<1>(r, xr, C, Hp * Wp, Wp, wt + o0, O, b + o0, g, starts, yr, P);
      }
    }
  }
}

/// See the header comment.  Writes every entry of the C*kh*kw x OH*OW block of col.
template <class T>
void im2col(const T* x, std::size_t C, std::size_t H, std::size_t W, const conv_geometry& g, std::size_t OH,
            std::size_t OW, T* col, std::size_t ld) {
  const std::size_t sh = g.stride_h, sw = g.stride_w;
  for (std::size_t c = 0; c < C; ++c) {
    const T* xc = x + c * H * W;
    for (std::size_t i = 0; i < g.kh; ++i) {
      const output_range rh = tap_rows(g, H, OH, i);
      for (std::size_t j = 0; j < g.kw; ++j) {
        const output_range rw = tap_cols(g, W, OW, j);
        T* dst = col + ((c * g.kh + i) * g.kw + j) * ld;
        const std::size_t nw = rw.hi - rw.lo, rows = rh.hi - rh.lo;
        if (nw == 0 || rows == 0) {
          detail::zero_row(dst, OH * OW);
          continue;
        }
        detail::zero_row(dst, rh.lo * OW);  // output rows whose tap lies in the top / bottom padding
        detail::zero_row(dst + rh.hi * OW, (OH - rh.hi) * OW);
        T* d = dst + rh.lo * OW;
        if (rw.lo > 0 || rw.hi < OW)  // columns whose tap lies in the left / right padding
          for (std::size_t r = 0; r < rows; ++r) {
            for (std::size_t k = 0; k < rw.lo; ++k) d[r * OW + k] = T(0);
            for (std::size_t k = rw.hi; k < OW; ++k) d[r * OW + k] = T(0);
          }
        const T* s = xc + rh.first * W + rw.first;
        if (sw == 1) {
          detail::copy_block(d + rw.lo, OW, s, sh * W, rows, nw);
        } else {
          for (std::size_t r = 0; r < rows; ++r)
            for (std::size_t k = 0; k < nw; ++k) d[r * OW + rw.lo + k] = s[r * sh * W + k * sw];
        }
      }
    }
  }
}

/// The adjoint of im2col: dx[c][ih][iw] += col[...] for every entry that im2col copied from x.
/// Per element the additions run in (c, i, j) order on every path.
template <class T>
void col2im(const T* col, std::size_t ld, std::size_t C, std::size_t H, std::size_t W, const conv_geometry& g,
            std::size_t OH, std::size_t OW, T* dx) {
  const std::size_t sh = g.stride_h, sw = g.stride_w;
#if defined(__AVX512F__)
  if constexpr (detail::masked_ops<T>) {
    // stride 1 across: each vector of an input row gathers its kernel-column taps in a register
    // (masked loads), then is stored once (no read-modify-write per tap)
    constexpr std::size_t N = simd::width<T>, max_taps = 32;
    using M = decltype(detail::tail_mask<T>(0));
    if (sw == 1 && g.kw <= max_taps) {
      for (std::size_t wb = 0; wb < W; wb += N) {  // one vector of input columns at a time
        const std::size_t we = std::min(W, wb + N);
        const M mw = detail::tail_mask<T>(we - wb);
        // the taps j that reach these columns: lane l reads output column wb + l - first + lo (the
        // vector's base may lie before the row for masked-off lanes, which are never accessed)
        std::size_t nt = 0, tj[max_taps];
        M tm[max_taps];
        std::ptrdiff_t toff[max_taps];
        for (std::size_t j = 0; j < g.kw; ++j) {
          const output_range rw = valid_outputs(W, OW, 1, std::ptrdiff_t(j * g.dilation_w) - std::ptrdiff_t(g.pad_left));
          const std::size_t a = std::max(wb, rw.first), b = std::min(we, rw.first + rw.hi - rw.lo);
          if (a >= b) continue;
          tj[nt] = j;
          tm[nt] = M(detail::tail_mask<T>(b - wb) & ~detail::tail_mask<T>(a - wb));
          toff[nt] = std::ptrdiff_t(rw.lo) + std::ptrdiff_t(wb) - std::ptrdiff_t(rw.first);
          ++nt;
        }
        for (std::size_t c = 0; c < C; ++c) {
          T* xc = dx + c * H * W + wb;
          for (std::size_t i = 0; i < g.kh; ++i) {
            const output_range rh = tap_rows(g, H, OH, i);
            const T* src = col + (c * g.kh + i) * g.kw * ld + rh.lo * OW;
            T* d = xc + rh.first * W;
            const std::size_t rows = rh.hi - rh.lo;
            std::size_t r = 0;
            for (; r + 4 <= rows; r += 4) {  // four independent accumulators
              simd::vec<T> acc[4];
              for (std::size_t u = 0; u < 4; ++u) acc[u] = detail::masked_load<T>(mw, d + (r + u) * sh * W);
              for (std::size_t q = 0; q < nt; ++q) {
                const T* sj = src + tj[q] * ld + r * OW + toff[q];
                for (std::size_t u = 0; u < 4; ++u) acc[u] += detail::masked_load<T>(tm[q], sj + u * OW);
              }
              for (std::size_t u = 0; u < 4; ++u) detail::masked_store<T>(d + (r + u) * sh * W, mw, acc[u]);
            }
            for (; r < rows; ++r) {
              auto acc = detail::masked_load<T>(mw, d + r * sh * W);
              for (std::size_t q = 0; q < nt; ++q)
                acc += detail::masked_load<T>(tm[q], src + tj[q] * ld + r * OW + toff[q]);
              detail::masked_store<T>(d + r * sh * W, mw, acc);
            }
          }
        }
      }
      return;
    }
  }
#endif
  for (std::size_t c = 0; c < C; ++c) {
    T* xc = dx + c * H * W;
    for (std::size_t i = 0; i < g.kh; ++i) {
      const output_range rh = tap_rows(g, H, OH, i);
      for (std::size_t j = 0; j < g.kw; ++j) {
        const output_range rw = tap_cols(g, W, OW, j);
        const std::size_t nw = rw.hi - rw.lo, rows = rh.hi - rh.lo;
        if (nw == 0 || rows == 0) continue;
        const T* s = col + ((c * g.kh + i) * g.kw + j) * ld + rh.lo * OW + rw.lo;
        T* d = xc + rh.first * W + rw.first;
        if (sw == 1) {  // plain loops: overlapping masked stores for neighbouring taps stall store forwarding
          for (std::size_t r = 0; r < rows; ++r)
            for (std::size_t k = 0; k < nw; ++k) d[r * sh * W + k] += s[r * OW + k];
        } else {
          for (std::size_t r = 0; r < rows; ++r)
            for (std::size_t k = 0; k < nw; ++k) d[r * sh * W + k * sw] += s[r * OW + k];
        }
      }
    }
  }
}

}  // namespace nnlens::kernels
