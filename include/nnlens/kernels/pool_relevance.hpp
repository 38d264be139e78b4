// nnlens/kernels/pool_relevance.hpp -- LRP of pooling windows on one plane [H, W] (its outputs
// [OH, OW]), for the host's relevance rules (MaxPool2D, AvgPool2D, GlobalAvgPool) and the thrust
// LRP kernels (thrust/lrp_kernels.hpp: one work item per plane) alike.
//
//   max_pool_relevance(d, x, R, r)           winner-take-all: each output with R != 0, in order,
//                                            hands R / ties to the inputs equal to its window's
//                                            maximum (padding never wins)
//   mean_pool_relevance(d, x, z, R, r, o)    the affine rules of core/relevance.hpp with
//                                            w_jk = 1 / divisor and no bias: per output with
//                                            R != 0, in order, its factors, then its terms added
//                                            to its window's inputs row by row
// r is written (every element).  NNLENS_HD: nvcc compiles them for the device.
#pragma once

#include <cstddef>

#include "nnlens/core/hd.hpp"
#include "nnlens/core/relevance.hpp"
#include "nnlens/kernels/window.hpp"

namespace nnlens::kernels {

template <class T>
NNLENS_HD void max_pool_relevance(const window_dims& d, const T* x, const double* R, double* r) {
  for (std::size_t i = 0; i < d.H * d.W; ++i) r[i] = 0;
  for (std::size_t oh = 0; oh < d.OH; ++oh)
    for (std::size_t ow = 0; ow < d.OW; ++ow) {
      const double rk = R[oh * d.OW + ow];
      if (rk == 0) continue;
      const window_axis rs = pool_rows(d, oh), cs = pool_cols(d, ow);
      std::size_t ties = 0;
      double m = 0;
      for (std::size_t i = rs.lo; i < rs.hi; ++i)
        for (std::size_t q = cs.lo; q < cs.hi; ++q) {
          const double v = double(x[i * d.W + q]);
          if (ties == 0 || v > m) m = v, ties = 1;
          else if (v == m) ++ties;
        }
      if (ties == 0) continue;
      const double share = rk / double(ties);
      for (std::size_t i = rs.lo; i < rs.hi; ++i)
        for (std::size_t q = cs.lo; q < cs.hi; ++q)
          if (double(x[i * d.W + q]) == m) r[i * d.W + q] += share;
    }
}

template <class T>
NNLENS_HD void mean_pool_relevance(const window_dims& d, const T* x, const T* z, const double* R, double* r, const lrp_options& o) {
  const bool share = o.rule == lrp_rule::epsilon && o.bias_redistribution;
  for (std::size_t i = 0; i < d.H * d.W; ++i) r[i] = 0;
  for (std::size_t k = 0; k < d.OH * d.OW; ++k) {
    if (R[k] == 0) continue;
    const window_axis rs = pool_rows(d, k / d.OW), cs = pool_cols(d, k % d.OW);
    const double w = 1.0 / double(rs.count * cs.count);
    double zp = 0, zn = 0, fa, fb, sh;
    for (std::size_t h = rs.lo; h < rs.hi && o.rule != lrp_rule::epsilon; ++h)
      for (std::size_t v = cs.lo; v < cs.hi; ++v) {
        const double zj = double(x[h * d.W + v]) * w;
        zp += zj > 0 ? zj : 0.0;
        zn += zj < 0 ? zj : 0.0;
      }
    nnlens::detail::lrp_factors(o, R[k], double(z[k]), 0.0, zp, zn, (rs.hi - rs.lo) * (cs.hi - cs.lo), fa, fb, sh);
    for (std::size_t h = rs.lo; h < rs.hi; ++h)
      for (std::size_t v = cs.lo; v < cs.hi; ++v) {
        nnlens::detail::lrp_term(o, r[h * d.W + v], double(x[h * d.W + v]) * w, R[k], fa, fb);
        if (share) r[h * d.W + v] += sh;
      }
  }
}

}  // namespace nnlens::kernels
