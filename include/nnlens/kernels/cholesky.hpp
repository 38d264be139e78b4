// nnlens/kernels/cholesky.hpp -- dense Cholesky factorisation and forward substitution (row-major,
// double precision): the KDE bandwidths of Surprise Adequacy.
//
//   detail::cholesky(A, d, L)      L (d x d, lower, zeros above) with L L^T = A; false when a pivot
//                                  is <= 1e-10 times its diagonal entry of A (or not finite)
//   detail::forward_subst(L, d, y) y <- L^-1 y in place (y: d values)
//
// requires: A is d x d and symmetric (only its lower triangle is read); L is a factor cholesky made.
// ensures:  plain loops in a fixed order (no blocking, no SIMD): the same bits on every build.
#pragma once

#include <cmath>
#include <cstddef>
#include <vector>

namespace nnlens::detail {

/// Cholesky of A (d x d, symmetric) into L; false when a pivot is <= 1e-10 times its diagonal entry.
inline bool cholesky(const std::vector<double>& A, std::size_t d, std::vector<double>& L) {
  L.assign(d * d, 0.0);
  for (std::size_t j = 0; j < d; ++j) {
    double p = A[j * d + j];
    for (std::size_t k = 0; k < j; ++k) p -= L[j * d + k] * L[j * d + k];
    if (!(A[j * d + j] > 0) || !(p > 1e-10 * A[j * d + j]) || !std::isfinite(p)) return false;
    const double ljj = std::sqrt(p);
    L[j * d + j] = ljj;
    for (std::size_t i = j + 1; i < d; ++i) {
      double s = A[i * d + j];
      for (std::size_t k = 0; k < j; ++k) s -= L[i * d + k] * L[j * d + k];
      L[i * d + j] = s / ljj;
    }
  }
  return true;
}

/// y <- L^-1 y for the lower-triangular L (d x d).
inline void forward_subst(const std::vector<double>& L, std::size_t d, double* y) {
  for (std::size_t i = 0; i < d; ++i) {
    double s = y[i];
    for (std::size_t j = 0; j < i; ++j) s -= L[i * d + j] * y[j];
    y[i] = s / L[i * d + i];
  }
}

}  // namespace nnlens::detail
