// nnlens/core/relevance.hpp -- what a relevance_rule<L> (layer-wise relevance propagation, LRP)
// sees, and the rule kernels the layer headers share (docs/specs/deepimportance.md#22-neuron-relevance-by-lrp).
//
//   relevance_rule<L> forms (nnlens/coverage/lrp.hpp dispatches on which members exist):
//     passthrough = true                 R_in = R_out (activations, Dropout, Flatten, Identity)
//     relevance(l, args)                 writes R_in from R_out (args below): Dense, Conv2D, the
//                                        pools, BatchNorm, Affine
//     for_each_branch(l, in, f)          a composite (Residual): each branch's layers, joined by an
//                                        addition that splits R in proportion to the summands
//   optional, for folding (BatchNorm after Conv2D or Dense, §2.2 "fold it into the preceding
//   conv/dense"):
//     folds_into_previous = true  and  scale_shift(l, channel, a, t)   y = a x + t per channel
//     accepts_fold = true                the layer honours args.out_scale / args.out_shift
//
// The rules on an affine map with inputs x_j, weights w_jk, bias b_k and output z_k (the layer's
// forward output, bias included; for a folded pair the BatchNorm's output, with w'_jk = a_k w_jk
// and b'_k = a_k b_k + t_k):
//   epsilon     R_j = Σ_k z_jk / (z_k + ε sign(z_k)) R_k,   z_jk = x_j w_jk, sign(0) = +1
//               bias_redistribution: z_jk + b_k / J_k instead (J_k: the inputs k reads, padding
//               excluded), which makes Σ_j R_j = Σ_k R_k up to the ε term (exact for ε -> 0)
//   zplus       R_j = Σ_k z⁺_jk / Σ_i z⁺_ik R_k   (bias ignored; 0 when Σ z⁺ = 0)
//   alpha_beta  R_j = Σ_k (α z⁺_jk / (Σ_i z⁺_ik + b⁺_k) + β z⁻_jk / (Σ_i z⁻_ik + b⁻_k)) R_k
//               with the LRP toolbox's convention α + β = 1 (default α = 3, β = -2); a term with
//               a zero denominator is 0
// Relevance is computed in double, one sample at a time.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <utility>
#include <vector>

#include "nnlens/core/hd.hpp"
#include "nnlens/core/shape.hpp"

namespace nnlens {

enum class lrp_rule { epsilon, zplus, alpha_beta };

struct lrp_options {
  lrp_rule rule = lrp_rule::epsilon;
  double epsilon = 1e-16;            // the reference code's stabiliser (common choice: 0.01)
  bool bias_redistribution = false;  // spread each bias over the inputs: exactly conservative
  double alpha = 3.0, beta = -2.0;   // alpha_beta (alpha + beta = 1)
};

/// What relevance_rule<L>::relevance sees of one sample.
struct relevance_args {
  shape in, out;
  const double* x = nullptr;      // the layer's input
  const double* z = nullptr;      // the layer's output (a folded pair: the BatchNorm's output)
  const double* r_out = nullptr;  // relevance of the outputs
  double* r_in = nullptr;         // relevance of the inputs: written (every element)
  const lrp_options* o = nullptr;
  const double* out_scale = nullptr;  // folded BatchNorm: per output channel (rank 3) or neuron
  const double* out_shift = nullptr;
};

/// relevance_rule of a layer that hands relevance through unchanged (element n to element n).
struct relevance_passthrough_rule {
  static constexpr bool passthrough = true;
};

namespace detail {

NNLENS_HD inline bool lrp_finite(double v) { return v - v == 0.0; }

/// A composite's join backwards, for the host and the thrust kernels alike: the relevance an
/// operand element of value x gets of R, the relevance of an output that `feeders` operand elements
/// with sum zs feed: all of R from one feeder (a concat), else x R / (zs + eps sign zs) (a sum;
/// 0 if not finite).
NNLENS_HD inline double join_share(double R, std::size_t feeders, double zs, double x, double eps) {
  if (R == 0) return 0.0;
  if (feeders == 1) return R;
  const double a = R / (zs + (zs >= 0 ? eps : -eps));
  return lrp_finite(a) ? x * a : 0.0;
}

/// LRP's start, for the host and the thrust kernels alike: R = one_hot(c) z_c over the O logits z,
/// c = cls, or the first maximum of z when cls is std::size_t(-1); returns c.
template <class T>
NNLENS_HD inline std::size_t lrp_start(const T* z, std::size_t O, std::size_t cls, double* R) {
  std::size_t c = cls == std::size_t(-1) ? 0 : cls;
  for (std::size_t k = 1; cls == std::size_t(-1) && k < O; ++k)
    if (z[k] > z[c]) c = k;
  for (std::size_t k = 0; k < O; ++k) R[k] = k == c ? double(z[k]) : 0.0;
  return c;
}

/// The factors of output k of an affine map, for the host and the thrust kernels alike: rk its
/// relevance, zk its output, bk its bias; zp, zn the sums of the positive / negative z_jk
/// (alpha_beta: started from b+_k / b-_k); J the inputs it reads.  epsilon: fa = R_k / (z_k + ε
/// sign z_k) (0 if not finite) and the bias share sh = b_k / J fa; zplus, alpha_beta: fa = zp, fb = zn.
NNLENS_HD inline void lrp_factors(const lrp_options& o, double rk, double zk, double bk, double zp, double zn, std::size_t J,
                                  double& fa, double& fb, double& sh) {
  fa = fb = sh = 0;
  if (rk == 0) return;
  if (o.rule == lrp_rule::epsilon) {
    const double s = rk / (zk + (zk >= 0 ? o.epsilon : -o.epsilon));
    if (!lrp_finite(s)) return;  // z_k = 0 with ε = 0: nothing to distribute
    fa = s;
    if (o.bias_redistribution && J > 0) sh = bk / double(J) * s;
  } else {
    fa = zp, fb = zn;
  }
}

/// acc += input j's term for output k (z = z_jk = x_j w_jk; fa, fb from lrp_factors), one
/// expression for both backends, so that a compiler contracting multiply-adds treats both alike.
NNLENS_HD inline void lrp_term(const lrp_options& o, double& acc, double z, double rk, double fa, double fb) {
  if (o.rule == lrp_rule::epsilon) {
    acc += z * fa;
  } else if (o.rule == lrp_rule::zplus) {
    if (z > 0 && fa > 0) acc += z / fa * rk;
  } else {
    if (z > 0 && fa > 0) acc += o.alpha * z / fa * rk;
    if (z < 0 && fb < 0) acc += o.beta * z / fb * rk;
  }
}

/// R_in of one element of an element-wise affine op (one input per output: z_k = x w + b), the
/// rules above with J = 1: the host's rules of BatchNorm and Affine and the thrust kernel alike.
NNLENS_HD inline double elementwise_relevance(const lrp_options& o, double x, double z, double rk, double w, double b) {
  double acc = 0, fa, fb, sh;
  if (rk == 0) return acc;
  const bool ab = o.rule == lrp_rule::alpha_beta;
  const double zj = x * w;
  const double zp = (ab && b > 0 ? b : 0.0) + (zj > 0 ? zj : 0.0), zn = (ab && b < 0 ? b : 0.0) + (zj < 0 ? zj : 0.0);
  lrp_factors(o, rk, z, b, zp, zn, 1, fa, fb, sh);
  lrp_term(o, acc, zj, rk, fa, fb);
  if (o.rule == lrp_rule::epsilon && o.bias_redistribution) acc += sh;
  return acc;
}

/// The three rules on an affine map, written once.  walk(k, f) calls f(j, w_jk) for every input j
/// that output k reads; bias(k) is b_k; outputs per channel = `per_channel` (1 for rank-1 outputs)
/// indexes out_scale / out_shift.
template <class Walk, class Bias>
void affine_relevance(const relevance_args& a, std::size_t per_channel, Bias&& bias, Walk&& walk) {
  thread_local std::vector<std::pair<std::size_t, double>> c;  // (j, z_jk) of one output
  const lrp_options& o = *a.o;
  const bool ab = o.rule == lrp_rule::alpha_beta, share = o.rule == lrp_rule::epsilon && o.bias_redistribution;
  double* R = a.r_in;
  std::fill(R, R + a.in.size(), 0.0);
  for (std::size_t k = 0; k < a.out.size(); ++k) {
    const double rk = a.r_out[k];
    if (rk == 0) continue;
    const std::size_t ch = k / per_channel;
    const double sc = a.out_scale ? a.out_scale[ch] : 1.0;
    const double bk = sc * double(bias(k)) + (a.out_shift ? a.out_shift[ch] : 0.0);
    if (o.rule == lrp_rule::epsilon && !share) {
      // The default rule needs no sum over the inputs first: one walk, adding into R directly
      // (each input j appears once per output k), 1.3-3.4x faster than the list below.  These are
      // lrp_factors' and lrp_term's epsilon expressions, written out: through the helpers the
      // static LeNet-5 LRP ran 6-7% slower (bench_forms).
      const double zk = a.z[k];
      const double s = rk / (zk + (zk >= 0 ? o.epsilon : -o.epsilon));
      if (!std::isfinite(s)) continue;  // z_k = 0 with ε = 0: nothing to distribute
      walk(k, [&](std::size_t j, double w) {
        const double zj = a.x[j] * sc * w;
        R[j] += zj * s;
      });
      continue;
    }
    c.clear();
    walk(k, [&](std::size_t j, double w) { c.emplace_back(j, a.x[j] * sc * w); });
    double zp = ab && bk > 0 ? bk : 0.0, zn = ab && bk < 0 ? bk : 0.0;
    for (const auto& jc : c) zp += jc.second > 0 ? jc.second : 0.0, zn += jc.second < 0 ? jc.second : 0.0;
    double fa, fb, sh;
    lrp_factors(o, rk, a.z[k], bk, zp, zn, c.size(), fa, fb, sh);
    const double f1 = fa, f2 = fb, add = sh;  // const: kept in registers across the stores to R
    for (const auto& [j, zj] : c) {
      lrp_term(o, R[j], zj, rk, f1, f2);
      if (share) R[j] += add;
    }
  }
}

}  // namespace detail
}  // namespace nnlens
