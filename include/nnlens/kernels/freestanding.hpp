// nnlens/kernels/freestanding.hpp -- the forward pass of a firmware model: what a header written by
// `nnlens codegen MODEL --freestanding` (io/codegen_freestanding.hpp) calls.
//
//   nnlens::fw::dense(x, I, W, b, O, y)              y = x W + b, W [I, O] row-major
//   nnlens::fw::conv2d(x, g, w, b, y)                a 2-D convolution, w [O, C/groups, kh, kw]
//   nnlens::fw::pool(x, g, y)                        max or mean over windows (g.mean)
//   nnlens::fw::pwl_map(x, n, groups, knots, nk, slope, icept)   an element-wise piecewise-linear
//                                                    map, in place: element e of group e/(n/groups)
//                                                    in piece j = #{knots < x} is slope[g*(nk+1)+j]
//                                                    * x + icept[...]
//   nnlens::fw::affine(x, n, groups, center, scale, shift)   in place: (x - center) * scale + shift
//                                                    per group (center may be null: x * scale + shift)
//   nnlens::fw::gather_channels(x, channels, P, src, y)   y's channel k = x's channel src[k] (P
//                                                    elements each): a channel permutation or slice
//   nnlens::fw::all_finite(x, n)
//
// requires: nothing but <cstddef>, <cstring>, <type_traits> and nnlens/kernels/simd.hpp: no heap, no exceptions,
//           no RTTI, no xtensor, no I/O, so it builds with arm-none-eabi-g++ -fno-exceptions
//           -fno-rtti for a Cortex-M.  Every buffer is the caller's (the generated header sizes
//           them); weights are read through const pointers, so they stay in flash.
// ensures:  the arithmetic is the host's where the host has a batch-1 kernel (dense: kernels::gemm's
//           packing-free rows, simd::axpy, then the bias; conv2d: the same axpy rows, straight from
//           the input, so no im2col buffer); pooling, maps and affine ops compute the op's own expression (properties.hpp),
//           element by element.  Results match the host's forward within rounding (the generated
//           check in tests/firmware compares them at 1e-5).
#pragma once

#include <cstddef>
#include <cstring>
#include <type_traits>

#include "nnlens/kernels/simd.hpp"
#include "nnlens/kernels/window.hpp"

namespace nnlens::fw {

using size_t = std::size_t;

/// What a generated forward returns (no exceptions on a microcontroller).
enum class status : int {
  ok = 0,
  null_argument = 1,     // x, y or the work area is null
  non_finite_input = 2,  // an input element is NaN or infinite
};

constexpr const char* status_message(status s) {
  switch (s) {
    case status::ok: return "ok";
    case status::null_argument: return "a null pointer was passed";
    case status::non_finite_input: return "an input element is NaN or infinite";
  }
  return "unknown status";
}

template <class T>
constexpr bool all_finite(const T* x, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (!(x[i] - x[i] == T(0))) return false;
  return true;
}

/// y[O] = x[I] W + b; W [I, O].  As the host's batch-1 GEMM: y = 0, y += x[k] W[k, :] for each k
/// (simd::axpy), then y += b.
template <class T>
void dense(const T* x, size_t I, const T* W, const T* b, size_t O, T* y) {
  for (size_t o = 0; o < O; ++o) y[o] = T(0);
  for (size_t k = 0; k < I; ++k) kernels::simd::axpy(O, x[k], W + k * O, y);
  for (size_t o = 0; o < O; ++o) y[o] += b[o];
}

/// A convolution's shapes and geometry (filled in by the generator from the op's conv_geometry).
struct conv_dims {
  size_t C, H, W;          // input [C, H, W]
  size_t O, OH, OW;        // output [O, OH, OW]
  size_t kh, kw, sh, sw;   // kernel, strides
  size_t pt, pl;           // padding before the first row / column
  size_t dh, dw, groups;   // dilations, groups
};

/// y [O, OH, OW] = w * x + b per group, with no scratch memory: per output channel, y = 0, then for
/// each tap k = (c, i, j) in order, y[oh, ow] += w[o, k] x[c, oh sh + i dh - pt, ow sw + j dw - pl]
/// over the outputs whose input lies inside x (padding adds nothing), a row at a time
/// (simd::axpy when the row is contiguous, sw == 1), then y += b.  The same terms in the same
/// order as an im2col product.
template <class T>
void conv2d(const T* x, const conv_dims& g, const T* w, const T* b, T* y) {
  const size_t Cg = g.C / g.groups, Og = g.O / g.groups, P = g.OH * g.OW;
  for (size_t oc = 0; oc < g.O; ++oc) {
    const size_t grp = oc / Og;
    T* yo = y + oc * P;
    const T* wo = w + oc * Cg * g.kh * g.kw;
    for (size_t p = 0; p < P; ++p) yo[p] = T(0);
    for (size_t c = 0; c < Cg; ++c) {
      const T* plane = x + (grp * Cg + c) * g.H * g.W;
      for (size_t i = 0; i < g.kh; ++i)
        for (size_t j = 0; j < g.kw; ++j) {
          const T wk = wo[(c * g.kh + i) * g.kw + j];
          // outputs ow whose column q = ow sw + j dw - pl lies in [0, W)
          const long off = long(j * g.dw) - long(g.pl);
          size_t lo = 0;
          while (lo < g.OW && long(lo * g.sw) + off < 0) ++lo;
          size_t hi = lo;
          while (hi < g.OW && long(hi * g.sw) + off < long(g.W)) ++hi;
          if (lo >= hi) continue;
          for (size_t oh = 0; oh < g.OH; ++oh) {
            const long r = long(oh * g.sh + i * g.dh) - long(g.pt);
            if (r < 0 || r >= long(g.H)) continue;
            const T* row = plane + size_t(r) * g.W;
            T* out = yo + oh * g.OW;
            const size_t q0 = size_t(long(lo * g.sw) + off);
            if (g.sw == 1)
              kernels::simd::axpy(hi - lo, wk, row + q0, out + lo);
            else
              for (size_t ow = lo; ow < hi; ++ow) out[ow] += wk * row[q0 + (ow - lo) * g.sw];
          }
        }
    }
    for (size_t p = 0; p < P; ++p) yo[p] += b[oc];
  }
}

/// A pooling op's windows (from its pool_geometry) and what it reduces them to.
struct pool_dims {
  size_t C, H, W, OH, OW;
  size_t kh, kw, sh, sw;
  size_t pt, pl, pb, pr;
  bool mean;               // false: the maximum over the window's input elements (padding never
                           // wins); true: their sum over the divisor below
  bool count_include_pad;  // mean: divide by the window clipped to the padded input (true) or by
                           // the number of input elements it covers (false)
};

/// y [C, OH, OW] from x [C, H, W].
template <class T>
void pool(const T* x, const pool_dims& g, T* y) {
  for (size_t c = 0; c < g.C; ++c) {
    const T* plane = x + c * g.H * g.W;
    for (size_t oh = 0; oh < g.OH; ++oh) {
      const kernels::window_axis r = kernels::pool_axis(oh, g.sh, g.pt, g.pb, g.kh, g.H, g.count_include_pad);
      for (size_t ow = 0; ow < g.OW; ++ow) {
        const kernels::window_axis q = kernels::pool_axis(ow, g.sw, g.pl, g.pr, g.kw, g.W, g.count_include_pad);
        T acc = g.mean ? T(0) : plane[r.lo * g.W + q.lo];
        for (size_t h = r.lo; h < r.hi; ++h)
          for (size_t w = q.lo; w < q.hi; ++w) {
            const T v = plane[h * g.W + w];
            if (g.mean)
              acc += v;
            else if (v > acc)
              acc = v;
          }
        if (g.mean) acc /= T(r.count * q.count);
        y[(c * g.OH + oh) * g.OW + ow] = acc;
      }
    }
  }
}

/// In place: x[e] = slope * x[e] + icept of its piece (see the header comment).
template <class T>
void pwl_map(T* x, size_t n, size_t groups, const T* knots, size_t nk, const T* slope, const T* icept) {
  const size_t per = n / groups;
  for (size_t g = 0; g < groups; ++g, x += per, slope += nk + 1, icept += nk + 1)
    for (size_t e = 0; e < per; ++e) {
      const T v = x[e];
      size_t j = 0;
      while (j < nk && v > knots[j]) ++j;
      x[e] = slope[j] * v + icept[j];
    }
}

/// In place: x[e] = (x[e] - center[k]) * scale[k] + shift[k], k = e / (n / groups); center null:
/// x[e] * scale[k] + shift[k].
template <class T>
void affine(T* x, size_t n, size_t groups, std::type_identity_t<const T*> center, const T* scale, const T* shift) {
  const size_t per = n / groups;
  for (size_t k = 0; k < groups; ++k, x += per) {
    const T s = scale[k], h = shift[k];
    if (center)
      for (size_t e = 0; e < per; ++e) x[e] = (x[e] - center[k]) * s + h;
    else
      for (size_t e = 0; e < per; ++e) x[e] = x[e] * s + h;
  }
}

/// y[k, 0..P) = x[src[k], 0..P) for k < channels: a channel map (a permutation or a slice of
/// the channels; src from the op's channel_map, one entry per output channel).
template <class T>
void gather_channels(const T* x, size_t channels, size_t P, const size_t* src, T* y) {
  for (size_t k = 0; k < channels; ++k) {
    const T* s = x + src[k] * P;
    for (size_t p = 0; p < P; ++p) y[k * P + p] = s[p];
  }
}

/// dst[0..n) = src[0..n)
template <class T>
void copy(const T* src, size_t n, T* dst) {
  if (src != dst) std::memcpy(dst, src, n * sizeof(T));
}

}  // namespace nnlens::fw
