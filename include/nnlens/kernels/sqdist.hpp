// nnlens/kernels/sqdist.hpp -- squared Euclidean distances of a few queries to many columns,
// tile by tile (the nearest-neighbour and KDE sums of Surprise Adequacy).
//
//   detail::sa_sqdist_chunks(y, nq, d, R, ld, j0, j1, f)   for nq <= sa_tile_q queries y[q] (d values
//       each) and the columns [j0, j1) of R (d rows of stride ld): f(c0, len, acc) per chunk of
//       <= sa_tile_c columns, acc[q * sa_tile_c + jj] = |y[q] - R[:, c0 + jj]|^2
//
// requires: nq <= sa_tile_q; R holds d rows of at least j1 columns at stride ld.
// ensures:  register-blocked (4 queries x 2 vectors of columns accumulate over the d rows in
//           registers); each entry is the same sum in the same order whatever the tile, so the
//           results are bit-identical however the queries and columns are grouped.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#include "nnlens/kernels/simd.hpp"

namespace nnlens::detail {

inline constexpr std::size_t sa_tile_q = 32;   // queries per tile (a chunk of training ATs is read once per tile)
inline constexpr std::size_t sa_tile_c = 256;  // training ATs per chunk

/// For nq <= 32 queries y[q] (d values each) and the columns [j0, j1) of R (d rows of stride ld),
/// calls f(c0, len, acc) per chunk of <= 256 columns, acc[q * 256 + jj] = |y[q] - R[:, c0 + jj]|^2.
/// Register-blocked: 4 queries x 2 vectors of columns accumulate over the d rows in registers.
/// Each entry is the same sum in the same order whatever the tile (bit-identical results).
template <class F>
void sa_sqdist_chunks(const double* const* y, std::size_t nq, std::size_t d, const double* R, std::size_t ld, std::size_t j0,
                      std::size_t j1, F&& f) {
  namespace simd = kernels::simd;
  using V = simd::vec<double>;
  constexpr std::size_t W = simd::width<double>, B = 2 * W;
  std::vector<double> buf(sa_tile_q * sa_tile_c);
  double* acc = buf.data();
  for (std::size_t c0 = j0; c0 < j1; c0 += sa_tile_c) {
    const std::size_t len = std::min(sa_tile_c, j1 - c0);
    std::size_t jj = 0;
    for (; jj + B <= len; jj += B)
      for (std::size_t q0 = 0; q0 < nq; q0 += 4) {
        const std::size_t qn = std::min<std::size_t>(4, nq - q0);
        const double* yq[4];
        for (std::size_t q = 0; q < 4; ++q) yq[q] = y[q0 + std::min(q, qn - 1)];
        V a[4][2];
        for (auto& aq : a) aq[0] = aq[1] = simd::zero<double>();
        const double* r = R + c0 + jj;
        for (std::size_t k = 0; k < d; ++k, r += ld) {
          const V r0 = simd::load(r), r1 = simd::load(r + W);
          for (std::size_t q = 0; q < 4; ++q) {
            const V v = simd::broadcast(yq[q][k]);
            const V t0 = v - r0, t1 = v - r1;
            a[q][0] += t0 * t0;
            a[q][1] += t1 * t1;
          }
        }
        for (std::size_t q = 0; q < qn; ++q) {
          simd::store(acc + (q0 + q) * sa_tile_c + jj, a[q][0]);
          simd::store(acc + (q0 + q) * sa_tile_c + jj + W, a[q][1]);
        }
      }
    for (; jj < len; ++jj)
      for (std::size_t q = 0; q < nq; ++q) {
        double s = 0;
        const double* r = R + c0 + jj;
        for (std::size_t k = 0; k < d; ++k, r += ld) {
          const double t = y[q][k] - *r;
          s += t * t;
        }
        acc[q * sa_tile_c + jj] = s;
      }
    f(c0, len, static_cast<const double*>(acc));
  }
}

}  // namespace nnlens::detail
