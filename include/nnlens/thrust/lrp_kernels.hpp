// nnlens/thrust/lrp_kernels.hpp -- the thrust backend's LRP and coverage-mapping kernels on raw
// device pointers (the rules of core/relevance.hpp, batched over samples).
//
// requires: as nnlens/thrust/kernels.hpp: thrust, THRUST_DEVICE_SYSTEM set by the build, every
//           pointer a device pointer of that system.  Activations are T (the network's scalar),
//           relevance is double, [batch, tensor size] row-major.
// ensures:  each launcher is one thrust::for_each over an index range with an NNLENS_HD functor
//           (no xtensor, exceptions or std:: algorithms: compiles as CUDA).  Every output element
//           is written by exactly one work item (no atomics), so results do not depend on the
//           number of threads.
//
// The rules' formulas are the host's own (core/relevance.hpp: lrp_factors, lrp_term, and
// kernels/window.hpp's max-pool plane), applied in the host's order per input, so equal activations
// give bit-identical relevance.  An affine layer (Dense, Conv2D) runs in two kernels: the factors,
// one work item per output; then one work item per input plane (sample, channel) adding the terms
// of its group's outputs in output order (a Dense is the 1 x 1 convolution of its inputs: W
// transposed, [O, I]; a folded BatchNorm's osc, osh per output channel as the host folds it).
// The pools and element-wise affine ops: one work item per plane or element.
//
//   lrp_start(n, O, z, cls, R)              R = one_hot(c) z_c per sample (c = cls[n], or the
//                                           first maximum of z when cls is null)
//   lrp_conv_factors / lrp_conv_gather      W [O, C/groups, kh, kw], any geometry (Dense: 1 x 1)
//   lrp_max_pool(n, dims, x, R, R_in)       MaxPool2D, any geometry (padding never wins)
//   lrp_avg_pool(n, dims, x, z, R, R_in, p) AvgPool2D, any geometry (dims.count_pad: its divisor)
//   lrp_scale_shift(n, E, per, x, z, R, R_in, w, b, p)  an element-wise affine op (ElementwiseAffine:
//                                           BatchNorm, Affine), coefficient (i % E) / per
//   lrp_join(n, out, R, op)                 a composite's join backwards (the host's rule, below)
//   lrp_add(count, R, r)                    r[i] += R[i]: relevance into a tensor several nodes read
//   lrp_channel_sums(n, C, hw, R, out)      out[n, c] = sum of R[n, c, 0..hw) (importance)
//   coverage_neuron_values(n, C, hw, x, out, ld, off)  out[n * ld + off + c] = mean of x[n, c, 0..hw)
//                                           (hw = 1: the elements), double: coverage neurons
#pragma once

#include <cstddef>

#include <thrust/execution_policy.h>
#include <thrust/for_each.h>
#include <thrust/iterator/counting_iterator.h>

#include "nnlens/config.hpp"
#include "nnlens/core/relevance.hpp"
#include "nnlens/kernels/pool_relevance.hpp"
#include "nnlens/thrust/kernels.hpp"

namespace nnlens::thrust_kernels {

/// Stores one output's values; fn, bs may be null (not needed by the rule).
NNLENS_HD inline void lrp_store(double* fp, double* fn, double* bs, idx t, double a, double b, double s) {
  fp[t] = a;
  if (fn) fn[t] = b;
  if (bs) bs[t] = s;
}

/// Factors: one work item per output (n, o, oh, ow); taps walked as the host walks them.
template <class T>
struct lrp_conv_factor {
  const T* x;
  const T* W;
  const T* b;
  const T* z;
  const double* R;
  double *fp, *fn, *bs;
  window_dims d;
  lrp_options p;
  const double *osc, *osh;  // a folded BatchNorm's scale and shift per output channel (null: none)
  NNLENS_HD void operator()(idx t) const {
    if (R[t] == 0) {
      lrp_store(fp, fn, bs, t, 0, 0, 0);
      return;
    }
    const idx P = d.OH * d.OW, ow = t % d.OW, oh = (t / d.OW) % d.OH, o = (t / P) % d.O, n = t / (P * d.O);
    const idx cg = d.C / d.groups, og = d.O / d.groups, grp = o / og, K = d.kh * d.kw;
    const double sc = osc ? osc[o] : 1.0, bk = osc ? sc * double(b[o]) + osh[o] : double(b[o]);
    double zp = 0, zn = 0;
    if (p.rule == lrp_rule::alpha_beta) zp = bk > 0 ? bk : 0.0, zn = bk < 0 ? bk : 0.0;
    idx ru = 0, rv = 0;  // taps inside the input: J = cg * ru * rv
    for (idx u = 0; u < d.kh; ++u) {
      const sidx ih = sidx(oh * d.sh + u * d.dh) - sidx(d.pt);
      if (ih >= 0 && ih < sidx(d.H)) ++ru;
    }
    for (idx v = 0; v < d.kw; ++v) {
      const sidx iw = sidx(ow * d.sw + v * d.dw) - sidx(d.pl);
      if (iw >= 0 && iw < sidx(d.W)) ++rv;
    }
    if (p.rule != lrp_rule::epsilon) {
      const T* w = W + o * cg * K;
      for (idx ci = 0; ci < cg; ++ci) {
        const T* xp = x + (n * d.C + grp * cg + ci) * d.H * d.W;
        for (idx u = 0; u < d.kh; ++u) {
          const sidx ih = sidx(oh * d.sh + u * d.dh) - sidx(d.pt);
          if (ih < 0 || ih >= sidx(d.H)) continue;
          for (idx v = 0; v < d.kw; ++v) {
            const sidx iw = sidx(ow * d.sw + v * d.dw) - sidx(d.pl);
            if (iw < 0 || iw >= sidx(d.W)) continue;
            const double zj = double(xp[idx(ih) * d.W + idx(iw)]) * sc * double(w[ci * K + u * d.kw + v]);
            zp += zj > 0 ? zj : 0.0;
            zn += zj < 0 ? zj : 0.0;
          }
        }
      }
    }
    double a, c, e;
    detail::lrp_factors(p, R[t], double(z[t]), bk, zp, zn, cg * ru * rv, a, c, e);
    lrp_store(fp, fn, bs, t, a, c, e);
  }
};

/// Relevance of one input plane (sample n, channel c): the outputs of its group with a
/// non-zero factor, in output order (as the host), scattered into the plane this item owns.
template <class T>
struct lrp_conv_plane {
  const T* x;
  const T* W;
  const double *R, *fp, *fn, *bs;
  double* Rin;
  window_dims d;
  lrp_options p;
  const double* osc;  // a folded BatchNorm's scale per output channel (null: none)
  NNLENS_HD void operator()(idx t) const {
    const idx HW = d.H * d.W, c = t % d.C, n = t / d.C;
    const idx cg = d.C / d.groups, og = d.O / d.groups, g = c / cg, ci = c % cg, K = d.kh * d.kw, P = d.OH * d.OW;
    const T* xp = x + t * HW;
    double* r = Rin + t * HW;
    for (idx i = 0; i < HW; ++i) r[i] = 0;
    for (idx o = g * og; o < (g + 1) * og; ++o) {
      const T* wo = W + (o * cg + ci) * K;
      const idx base = (n * d.O + o) * P;
      const double sc = osc ? osc[o] : 1.0;  // x * 1.0 == x: the same terms unfolded
      for (idx oh = 0; oh < d.OH; ++oh)
        for (idx ow = 0; ow < d.OW; ++ow) {
          const idx k = base + oh * d.OW + ow;
          const double rk = R[k];
          if (rk == 0) continue;
          const double a = fp[k], b = fn ? fn[k] : 0.0;
          const sidx ih0 = sidx(oh * d.sh) - sidx(d.pt), iw0 = sidx(ow * d.sw) - sidx(d.pl);
          idx v0 = 0, v1 = d.kw;  // taps v with 0 <= iw0 + v dw < W
          while (v0 < v1 && iw0 + sidx(v0 * d.dw) < 0) ++v0;
          while (v1 > v0 && iw0 + sidx((v1 - 1) * d.dw) >= sidx(d.W)) --v1;
          for (idx u = 0; u < d.kh; ++u) {
            const sidx ih = ih0 + sidx(u * d.dh);
            if (ih < 0 || ih >= sidx(d.H)) continue;
            const T* wr = wo + u * d.kw;
            const idx j0 = idx(ih) * d.W;
            for (idx v = v0; v < v1; ++v) {
              const idx j = j0 + idx(iw0 + sidx(v * d.dw));
              detail::lrp_term(p, r[j], double(xp[j]) * sc * double(wr[v]), rk, a, b);
              if (bs) r[j] += bs[k];
            }
          }
        }
    }
  }
};

template <class T>
void lrp_conv_factors(idx N, const window_dims& d, const T* x, const T* W, const T* b, const T* z, const double* R, double* fp,
                      double* fn, double* bs, const lrp_options& p, const double* osc = nullptr,
                      const double* osh = nullptr) {
  launch(N * d.O * d.OH * d.OW, lrp_conv_factor<T>{x, W, b, z, R, fp, fn, bs, d, p, osc, osh});
}

/// R_in of every input plane (one work item per sample and input channel).
template <class T>
void lrp_conv_gather(idx N, const window_dims& d, const T* x, const T* W, const double* R, const double* fp, const double* fn,
                     const double* bs, double* Rin, const lrp_options& p, const double* osc = nullptr) {
  launch(N * d.C, lrp_conv_plane<T>{x, W, R, fp, fn, bs, Rin, d, p, osc});
}

/// Max pooling, one work item per plane (sample, channel): kernels::max_pool_relevance, the
/// host's rule.
template <class T>
struct lrp_pool_plane {
  const T* x;
  const double* R;
  double* Rin;
  window_dims d;
  NNLENS_HD void operator()(idx pl) const {
    kernels::max_pool_relevance(d, x + pl * d.H * d.W, R + pl * d.OH * d.OW, Rin + pl * d.H * d.W);
  }
};

template <class T>
void lrp_max_pool(idx N, const window_dims& d, const T* x, const double* R, double* Rin) {
  launch(N * d.C, lrp_pool_plane<T>{x, R, Rin, d});
}

/// Average pooling, one work item per plane (sample, channel): kernels::mean_pool_relevance, the
/// host's rule.
template <class T>
struct lrp_avg_plane {
  const T* x;
  const T* z;
  const double* R;
  double* Rin;
  window_dims d;
  lrp_options p;
  NNLENS_HD void operator()(idx pl) const {
    const idx P = d.H * d.W, Q = d.OH * d.OW;
    kernels::mean_pool_relevance(d, x + pl * P, z + pl * Q, R + pl * Q, Rin + pl * P, p);
  }
};

template <class T>
void lrp_avg_pool(idx N, const window_dims& d, const T* x, const T* z, const double* R, double* Rin, const lrp_options& p) {
  launch(N * d.C, lrp_avg_plane<T>{x, z, R, Rin, d, p});
}

/// An element-wise affine op: element i with coefficient k = (i % E) / per, weight w[k] and bias
/// b[k] (double), by the host's rule (core/relevance.hpp's elementwise_relevance).
template <class T>
struct lrp_scale_elem {
  const T* x;
  const T* z;
  const double* R;
  double* Rin;
  const double *w, *b;
  idx E, per;
  lrp_options p;
  NNLENS_HD void operator()(idx i) const {
    const idx k = (i % E) / per;
    Rin[i] = detail::elementwise_relevance(p, double(x[i]), double(z[i]), R[i], w[k], b[k]);
  }
};

template <class T>
void lrp_scale_shift(idx N, idx E, idx per, const T* x, const T* z, const double* R, double* Rin, const double* w,
                     const double* b, const lrp_options& p) {
  launch(N * E, lrp_scale_elem<T>{x, z, R, Rin, w, b, E, per, p});
}

/// The start of LRP: R[n] = one_hot(c) z[n, c] (detail::lrp_start, the host's).
template <class T>
struct lrp_start_op {
  const T* z;
  const idx* cls;  // null: the first maximum
  double* R;
  idx O;
  NNLENS_HD void operator()(idx n) const { detail::lrp_start(z + n * O, O, cls ? cls[n] : idx(-1), R + n * O); }
};

template <class T>
void lrp_start(idx N, idx O, const T* z, const idx* cls, double* R) {
  launch(N, lrp_start_op<T>{z, cls, R, O});
}

/// At most this many operands per join on the device.
inline constexpr idx lrp_join_max = 8;

/// A composite's join backwards (network/graph.hpp's join_operands; detail::join_share, the host's
/// rule).  One work item per output element of a sample: each operand element feeds one output,
/// so no two items write one place.  add[q]: onto r[q] (a tensor other nodes read too), else
/// written as 0 + v (the host's zeroed sum).
template <class T>
struct lrp_join_op {
  const double* R;
  idx out = 0, K = 0;
  double eps = 0;
  const T* x[lrp_join_max] = {};
  double* r[lrp_join_max] = {};
  idx off[lrp_join_max] = {}, size[lrp_join_max] = {};
  bool add[lrp_join_max] = {};
  NNLENS_HD bool feeds(idx q, idx i) const { return i >= off[q] && i - off[q] < size[q]; }
  NNLENS_HD void operator()(idx t) const {
    const idx s = t / out, i = t % out;
    const double Ri = R[t];
    double zs = 0;
    idx feeders = 0;
    for (idx q = 0; q < K; ++q)
      if (feeds(q, i)) zs += double(x[q][s * size[q] + i - off[q]]), ++feeders;
    for (idx q = 0; q < K; ++q) {
      if (!feeds(q, i)) continue;
      const idx e = s * size[q] + i - off[q];
      r[q][e] = (add[q] ? r[q][e] : 0.0) + detail::join_share(Ri, feeders, zs, double(x[q][e]), eps);
    }
  }
};

template <class T>
void lrp_join(idx N, const lrp_join_op<T>& op) {
  launch(N * op.out, op);
}

struct lrp_add_op {
  const double* R;
  double* r;
  NNLENS_HD void operator()(idx i) const { r[i] += R[i]; }
};

inline void lrp_add(idx count, const double* R, double* r) {
  launch(count, lrp_add_op{R, r});
}

struct lrp_channel_sum_op {
  const double* R;
  double* out;
  idx hw;
  NNLENS_HD void operator()(idx t) const {
    const double* r = R + t * hw;
    double s = 0;
    for (idx i = 0; i < hw; ++i) s += r[i];
    out[t] = s;
  }
};

/// out[n * C + c] = sum of R[(n * C + c) * hw + 0..hw).
inline void lrp_channel_sums(idx N, idx C, idx hw, const double* R, double* out) {
  launch(N * C, lrp_channel_sum_op{R, out, hw});
}

template <class T>
struct neuron_value_op {
  const T* x;
  double* out;
  idx C, hw, ld, off;
  NNLENS_HD void operator()(idx t) const { out[(t / C) * ld + off + t % C] = neuron_mean(x + t * hw, hw); }
};

/// Coverage neurons: out[n * ld + off + c] = mean over hw of x[n, c, ...] (hw = 1: the element).
template <class T>
void coverage_neuron_values(idx N, idx C, idx hw, const T* x, double* out, idx ld, idx off) {
  launch(N * C, neuron_value_op<T>{x, out, C, hw, ld, off});
}

}  // namespace nnlens::thrust_kernels
