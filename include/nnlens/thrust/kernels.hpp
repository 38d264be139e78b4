// nnlens/thrust/kernels.hpp -- the thrust backend's kernels on raw device pointers.
//
// requires: thrust (the CUDA toolkit's CCCL 3, or 1.17+); THRUST_DEVICE_SYSTEM set by the build
//           (CUDA with nvcc, OMP with -fopenmp, TBB, CPP); every pointer is a device pointer of
//           that system (thrust::raw_pointer_cast of a thrust::device_vector).
// ensures:  each launcher is one thrust::for_each over an index range; the functors are
//           NNLENS_HD (host + device under nvcc) and use no xtensor, no exceptions, no std::
//           algorithms, so this header compiles as CUDA for sm_80 / sm_90 on its own
//           (tests/thrust/cuda_kernels.cu).  Summation order per output is fixed (input index
//           order), so results do not depend on the number of threads.
//
//   dense(n, I, O, x, Wp, bp, y)        y[n,O] = x[n,I] W[I,O] + b on dense_pad_weights' copy (W's
//                                       rows padded to dense_padded_out(O)); tiles of 8 samples x 8 outputs
//   conv2d_gemm<T, NB>(n, dims, x, Wt, b, y)  NCHW, W [O, C/groups, kh, kw], any geometry, as an
//                                       implicit GEMM (4 pixels x NB channels per work item) on
//                                       conv_transpose_weights<NB>(W)
//   max_pool2d(n, dims, x, y)           padding never wins (max over the window inside the input)
//   avg_pool2d(n, dims, x, y)           the sum over the window inside the input (row by row) over
//                                       the divisor of dims.count_pad (AvgPool2D's, as the host)
//   map(count, x, y, f)                y[i] = f(x[i]): an element-wise op's scalar_map functor
//                                      (core/properties.hpp, ElementwiseMap), any op, one transform
//   scale_shift(count, E, per, x, y, scale, shift, center)  y[i] = (x[i] - center[k]) * scale[k]
//                                      + shift[k], k = (i % E) / per (center null: x[i] * scale[k]
//                                      + shift[k]): an element-wise affine op (ElementwiseAffine)
//   param_map(count, E, per, x, y, p, f)  y[i] = f(x[i], p[k]), k = (i % E) / per: an element-wise
//                                      map with parameters (ParametricMap: PReLU)
//   per_sample(n, E, x, y, f)          f(x + s E, y + s E, E) for every sample s: a map over whole
//                                      samples (SampleMap: Softmax)
//   gate_multiply(n, S, G, s, g, y)     y[r, i] = s[r, i] g[r, i / (S / G)] (a product join)
//   place(n, out, off, size, b, y, add) y[r, off + i] = (add ? y[r, off + i] : 0) + b[r, i] for
//                                      i < size: operand b of a composite's join (a sum adds every
//                                      branch at offset 0, a concat places each at its offset)
//   neuron_partials(n, C, hw, x, part, S)  part[c*S+s] += sum over the samples of block s of the mean
//                                      of x[sample, c, 0..hw) (neuron_mean): NNSlicer's profile sums
#pragma once

#include <cstddef>

#include <thrust/copy.h>
#include <thrust/execution_policy.h>
#include <thrust/for_each.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/transform.h>

#include "nnlens/config.hpp"
#include "nnlens/core/traits.hpp"
#include "nnlens/kernels/window.hpp"

// Vectorise a host loop (OMP/CPP device systems with -fopenmp); nothing under nvcc.
#if defined(_OPENMP) && !defined(__CUDACC__)
#define NNLENS_THRUST_SIMD _Pragma("omp simd")
#else
#define NNLENS_THRUST_SIMD
#endif

namespace nnlens::thrust_kernels {

using idx = std::size_t;
using sidx = long long;

NNLENS_HD inline idx min_(idx a, idx b) { return a < b ? a : b; }

/// f(i) for i < count on the device system: every kernel of the backend.
template <class F>
void launch(idx count, const F& f) {
  if (count) ::thrust::for_each(::thrust::device, ::thrust::counting_iterator<idx>(0), ::thrust::counting_iterator<idx>(count), f);
}

/// The window geometry and the pooling-window helpers the host layers share (kernels/window.hpp).
using kernels::pool_cols;
using kernels::pool_rows;
using kernels::window_dims;
using pool_span = kernels::window_axis;

/// Width of dense()'s padded weight rows: O rounded up to a whole tile of outputs.
NNLENS_HD constexpr idx dense_padded_out(idx O) { return (O + 7) / 8 * 8; }

/// y[n, O] = x[n, I] W + b: tiles of 8 rows x 8 outputs on weights padded to Op =
/// dense_padded_out(O) (Wp [I][Op], bp [Op], zeros past O), so every tile runs the fixed-trip inner
/// loop; rows past N read the last row and are not stored.  Sums in input order, as the host.
template <class T>
struct dense_tile {
  static constexpr idx MB = 8, NB = 8;
  const T* x;
  const T* Wp;
  const T* bp;
  T* y;
  idx N, I, O, Op, oblocks;
  NNLENS_HD void operator()(idx t) const {
    const idx n0 = (t / oblocks) * MB, o0 = (t % oblocks) * NB;
    const idx mn = min_(MB, N - n0), mo = min_(NB, O - o0);
    const T* xr[MB];
    for (idx m = 0; m < MB; ++m) xr[m] = x + (n0 + (m < mn ? m : mn - 1)) * I;
    T acc[MB][NB];
    for (idx m = 0; m < MB; ++m)
      for (idx k = 0; k < NB; ++k) acc[m][k] = T(0);
    for (idx i = 0; i < I; ++i) {
      T w[NB];  // in registers: loaded once for the MB rows
      for (idx k = 0; k < NB; ++k) w[k] = Wp[i * Op + o0 + k];
      for (idx m = 0; m < MB; ++m) {
        const T xv = xr[m][i];
        NNLENS_THRUST_SIMD
        for (idx k = 0; k < NB; ++k) acc[m][k] += xv * w[k];
      }
    }
    for (idx m = 0; m < mn; ++m)
      for (idx k = 0; k < mo; ++k) y[(n0 + m) * O + o0 + k] = acc[m][k] + bp[o0 + k];
  }
};

template <class T>
void dense(idx N, idx I, idx O, const T* x, const T* Wp, const T* bp, T* y) {
  using F = dense_tile<T>;
  const idx Op = dense_padded_out(O), ob = Op / F::NB, nb = (N + F::MB - 1) / F::MB;
  launch(nb * ob, F{x, Wp, bp, y, N, I, O, Op, ob});
}

/// Host: W [I, O] and b [O] with zero outputs up to dense_padded_out(O): what dense() reads.
template <class T, class V>
void dense_pad_weights(idx I, idx O, const T* W, const T* b, V& Wp, V& bp) {
  const idx Op = dense_padded_out(O);
  Wp.assign(I * Op, T(0));
  bp.assign(Op, T(0));
  for (idx i = 0; i < I; ++i)
    for (idx o = 0; o < O; ++o) Wp[i * Op + o] = W[i * O + o];
  for (idx o = 0; o < O; ++o) bp[o] = b[o];
}

/// Width of the transposed, zero-padded weight rows conv2d_gemm reads: Og rounded up to NB.
template <idx NB>
NNLENS_HD constexpr idx conv_padded_out(idx Og) {
  return (Og + NB - 1) / NB * NB;
}

/// Implicit GEMM: a tile of MB = 4 output pixels x NB output channels of one sample and group in
/// registers; Wt [groups][Cg*kh*kw][conv_padded_out<NB>(Og)] (W transposed, zero columns past Og).
/// Each input value is loaded once for NB channels.
template <class T, idx NB>
struct conv_gemm_tile {
  static constexpr idx MB = 4;
  const T* x;
  const T* Wt;
  const T* b;
  T* y;
  window_dims d;
  idx pblocks, oblocks;
  NNLENS_HD void operator()(idx t) const {
    const idx P = d.OH * d.OW, Cg = d.C / d.groups, Og = d.O / d.groups, Op = conv_padded_out<NB>(Og);
    const idx ob = t % oblocks, r1 = t / oblocks, pb = r1 % pblocks, r2 = r1 / pblocks, g = r2 % d.groups,
              n = r2 / d.groups;
    const idx p0 = pb * MB, mn = min_(MB, P - p0), og0 = ob * NB, mo = min_(NB, Og - og0);
    sidx rb[MB], qb[MB];
    for (idx m = 0; m < MB; ++m) {
      const idx p = p0 + (m < mn ? m : 0);
      rb[m] = sidx((p / d.OW) * d.sh) - sidx(d.pt);
      qb[m] = sidx((p % d.OW) * d.sw) - sidx(d.pl);
    }
    T acc[MB][NB];
    for (idx m = 0; m < MB; ++m)
      for (idx k = 0; k < NB; ++k) acc[m][k] = T(0);
    const T* wg = Wt + g * Cg * d.kh * d.kw * Op + og0;
    idx kk = 0;
    for (idx c = 0; c < Cg; ++c) {
      const T* xp = x + (n * d.C + g * Cg + c) * d.H * d.W;
      for (idx i = 0; i < d.kh; ++i)
        for (idx j = 0; j < d.kw; ++j, ++kk) {
          const T* w = wg + kk * Op;
          for (idx m = 0; m < MB; ++m) {
            const sidx r = rb[m] + sidx(i * d.dh), q = qb[m] + sidx(j * d.dw);
            const T xv = (r >= 0 && r < sidx(d.H) && q >= 0 && q < sidx(d.W)) ? xp[idx(r) * d.W + idx(q)] : T(0);
            NNLENS_THRUST_SIMD
            for (idx k = 0; k < NB; ++k) acc[m][k] += xv * w[k];
          }
        }
    }
    for (idx k = 0; k < mo; ++k) {
      const idx o = g * Og + og0 + k;
      T* yo = y + (n * d.O + o) * P + p0;
      for (idx m = 0; m < mn; ++m) yo[m] = acc[m][k] + b[o];
    }
  }
};

/// The convolution as an implicit GEMM on transposed weights (conv_transpose_weights).
template <class T, idx NB>
void conv2d_gemm(idx N, const window_dims& d, const T* x, const T* Wt, const T* b, T* y) {
  using F = conv_gemm_tile<T, NB>;
  const idx P = d.OH * d.OW, pb = (P + F::MB - 1) / F::MB, ob = (d.O / d.groups + NB - 1) / NB;
  launch(N * d.groups * pb * ob, F{x, Wt, b, y, d, pb, ob});
}

/// Host: Wt[g][kk][og] = W[g * Og + og][kk], rows zero-padded to conv_padded_out<NB>(Og).
template <idx NB, class T, class V>
void conv_transpose_weights(const window_dims& d, const T* W, V& Wt) {
  const idx Og = d.O / d.groups, Kc = d.C / d.groups * d.kh * d.kw, Op = conv_padded_out<NB>(Og);
  Wt.assign(d.groups * Kc * Op, T(0));
  for (idx g = 0; g < d.groups; ++g)
    for (idx og = 0; og < Og; ++og)
      for (idx kk = 0; kk < Kc; ++kk) Wt[(g * Kc + kk) * Op + og] = W[(g * Og + og) * Kc + kk];
}

/// One output of a pooling window (kernels::pool_output: the host's AvgPool2D forward too).
template <class T, bool Max>
struct pool_elem {
  const T* x;
  T* y;
  window_dims d;
  NNLENS_HD void operator()(idx t) const {
    const idx ow = t % d.OW, oh = (t / d.OW) % d.OH, pl = t / (d.OW * d.OH);
    y[t] = kernels::pool_output<T, Max>(d, x + pl * d.H * d.W, oh, ow);
  }
};

template <class T>
void max_pool2d(idx N, const window_dims& d, const T* x, T* y) {
  launch(N * d.C * d.OH * d.OW, pool_elem<T, true>{x, y, d});
}

template <class T>
void avg_pool2d(idx N, const window_dims& d, const T* x, T* y) {
  launch(N * d.C * d.OH * d.OW, pool_elem<T, false>{x, y, d});
}

template <class T, class F>
struct map_op {
  F f;
  NNLENS_HD T operator()(T v) const { return f(v); }
};

/// y[i] = f(x[i]) for i < count; f: an NNLENS_HD functor (layer_traits<L>::scalar_map(l)).
template <class T, class F>
void map(idx count, const T* x, T* y, const F& f) {
  ::thrust::transform(::thrust::device, x, x + count, y, map_op<T, F>{f});
}

/// One element of an element-wise affine op: its coefficient k = (i % E) / per; the expression
/// of the property (core/properties.hpp, ElementwiseAffine), so the host forward's rounding.
template <class T>
struct scale_shift_op {
  const T* x;
  T* y;
  const T* scale;
  const T* shift;
  const T* center;  // null: no centring
  idx E, per;
  NNLENS_HD void operator()(idx i) const {
    const idx k = (i % E) / per;
    const T v = center ? x[i] - center[k] : x[i];
    y[i] = v * scale[k] + shift[k];
  }
};

/// y[i] = (x[i] - center[k]) * scale[k] + shift[k] over count = batch * E elements (E: a sample).
template <class T>
void scale_shift(idx count, idx E, idx per, const T* x, T* y, const T* scale, const T* shift, const T* center) {
  launch(count, scale_shift_op<T>{x, y, scale, shift, center, E, per});
}

template <class T, class F>
struct param_map_op {
  const T* x;
  T* y;
  const T* p;
  idx E, per;
  F f;
  NNLENS_HD void operator()(idx i) const { y[i] = f(x[i], p[(i % E) / per]); }
};

template <class T, class F>
void param_map(idx count, idx E, idx per, const T* x, T* y, const T* p, const F& f) {
  launch(count, param_map_op<T, F>{x, y, p, E, per, f});
}

template <class T, class F>
struct per_sample_op {
  const T* x;
  T* y;
  idx E;
  F f;
  NNLENS_HD void operator()(idx s) const { f(x + s * E, y + s * E, E); }
};

template <class T, class F>
void per_sample(idx N, idx E, const T* x, T* y, const F& f) {
  launch(N, per_sample_op<T, F>{x, y, E, f});
}

template <class T>
void copy(idx count, const T* x, T* y) {
  ::thrust::copy(::thrust::device, x, x + count, y);
}

template <class T>
struct place_op {
  const T* b;
  T* y;
  idx out, off, size;
  bool add;
  NNLENS_HD void operator()(idx i) const {
    T* d = y + (i / size) * out + off + i % size;
    *d = (add ? *d : T(0)) + b[i];  // 0 + b: the host join's rounding (and +0 for -0)
  }
};

/// Operand b [N, size] of a join into y [N, out] at per-sample offset off (add: onto y).
template <class T>
void place(idx N, idx out, idx off, idx size, const T* b, T* y, bool add) {
  launch(N * size, place_op<T>{b, y, out, off, size, add});
}

template <class T>
struct gate_multiply_op {
  const T* s;
  const T* g;
  T* y;
  idx S, G, rep;
  NNLENS_HD void operator()(idx i) const {
    const idx r = i / S, e = i % S;
    y[i] = s[i] * g[r * G + e / rep];
  }
};

/// A product join: y [N, S] = s [N, S] times g [N, G] broadcast (G divides S; the host's
/// detail::gate_multiply).
template <class T>
void gate_multiply(idx N, idx S, idx G, const T* s, const T* g, T* y) {
  launch(N * S, gate_multiply_op<T>{s, g, y, S, G, S / G});
}

/// part[c * S + s] += sum over samples n of block s (n = s, s + S, ...) of mean(x[n, c, 0..hw)).
template <class T>
struct neuron_partial {
  const T* x;
  double* part;
  idx N, C, hw, S;
  NNLENS_HD void operator()(idx t) const {
    const idx c = t / S, s = t % S;
    double sum = 0;
    for (idx n = s; n < N; n += S) sum += neuron_mean(x + (n * C + c) * hw, hw);
    part[t] += sum;
  }
};

template <class T>
void neuron_partials(idx N, idx C, idx hw, const T* x, double* part, idx S) {
  launch(C * S, neuron_partial<T>{x, part, N, C, hw, S});
}

}  // namespace nnlens::thrust_kernels

namespace nnlens::detail {
/// The raw device pointer of a thrust::device_vector, grown first to at least n elements.
template <class V>
auto* dptr(V& v, std::size_t n = 0) {
  if (v.size() < n) v.resize(n);
  return ::thrust::raw_pointer_cast(v.data());
}
template <class V>
auto* dptr(const V& v) {
  return ::thrust::raw_pointer_cast(v.data());
}
}  // namespace nnlens::detail
