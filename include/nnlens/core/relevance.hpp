// nnlens/core/relevance.hpp -- what a relevance_rule<L> (layer-wise relevance propagation, LRP)
// sees, and the rule kernels the layer headers share (specs/deepimportance.md §2.2).
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

/// The three rules on an affine map, written once.  walk(k, f) calls f(j, w_jk) for every input j
/// that output k reads; bias(k) is b_k; outputs per channel = `per_channel` (1 for rank-1 outputs)
/// indexes out_scale / out_shift.
template <class Walk, class Bias>
void affine_relevance(const relevance_args& a, std::size_t per_channel, Bias&& bias, Walk&& walk) {
  thread_local std::vector<std::pair<std::size_t, double>> c;  // (j, z_jk) of one output
  const lrp_options& o = *a.o;
  double* R = a.r_in;
  std::fill(R, R + a.in.size(), 0.0);
  const std::size_t nout = a.out.size();
  for (std::size_t k = 0; k < nout; ++k) {
    const double rk = a.r_out[k];
    if (rk == 0) continue;
    const std::size_t ch = k / per_channel;
    const double sc = a.out_scale ? a.out_scale[ch] : 1.0;
    const double bk = sc * double(bias(k)) + (a.out_shift ? a.out_shift[ch] : 0.0);
    if (o.rule == lrp_rule::epsilon && !o.bias_redistribution) {
      // The default rule needs no sum over the inputs first: one walk, adding into R directly
      // (each input j appears once per output k), 1.3-3.4x faster than the list below.  The
      // expressions are the list's, so the thrust kernels match bit for bit at -O3 too; with
      // bias redistribution they did not (the share's addition), so that case keeps the list.
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
    switch (o.rule) {
      case lrp_rule::epsilon: {
        const double zk = a.z[k];
        const double s = rk / (zk + (zk >= 0 ? o.epsilon : -o.epsilon));
        if (!std::isfinite(s)) break;  // z_k = 0 with ε = 0: nothing to distribute
        for (const auto& [j, zj] : c) R[j] += zj * s;
        if (o.bias_redistribution && !c.empty()) {
          const double share = bk / double(c.size()) * s;
          for (const auto& jc : c) R[jc.first] += share;
        }
        break;
      }
      case lrp_rule::zplus: {
        double zp = 0;
        for (const auto& jc : c) zp += std::max(jc.second, 0.0);
        if (zp > 0)
          for (const auto& [j, zj] : c)
            if (zj > 0) R[j] += zj / zp * rk;
        break;
      }
      case lrp_rule::alpha_beta: {
        double zp = std::max(bk, 0.0), zn = std::min(bk, 0.0);
        for (const auto& jc : c) zp += std::max(jc.second, 0.0), zn += std::min(jc.second, 0.0);
        for (const auto& [j, zj] : c) {
          if (zj > 0 && zp > 0) R[j] += o.alpha * zj / zp * rk;
          if (zj < 0 && zn < 0) R[j] += o.beta * zj / zn * rk;
        }
        break;
      }
    }
  }
}

}  // namespace detail
}  // namespace nnlens
