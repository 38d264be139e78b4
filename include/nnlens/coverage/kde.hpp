// nnlens/coverage/kde.hpp -- a Gaussian kernel density estimate with Scott's bandwidth, as
// scipy.stats.gaussian_kde (the KDE of Surprise Adequacy's LSA, coverage/surprise.hpp).
//
//   detail::gaussian_kde K;
//   K.fit(n, d, x, ridge, fallback_var)   n points in d dimensions, x(i, k) the k-th value of point
//                                   i; false when the covariance stays singular with every ridge
//   K.whiten(x, d, y)               y = L^-1 (x - mean) for a query, x(k) its k-th value
//   K.log_density(yp, cnt, d, out)  out[t] = log KDE at the whitened queries yp[t], t < cnt
//
// The bandwidth covariance is the sample covariance (ddof 1) * n^(-2/(d+4)) (Scott), factored
// L L^T (kernels/cholesky.hpp); log KDE(x) = log_norm + log sum_i exp(-|L^-1 (x - x_i)|^2 / 2)
// with log_norm = -log n - d/2 log 2 pi - log det L, summed by log-sum-exp (no underflow).
// A covariance that is singular (a pivot <= 1e-10 * its diagonal entry: fewer points than
// dimensions, collinear points, a constant dimension) gets a ridge lambda I, lambda = ridge *
// trace(S) / d (for S = 0: ridge * fallback_var * Scott factor^2), times 10 until the factorisation
// succeeds (at most 30 tries); `ridge` records the lambda used (0: none was needed).  One point:
// S = 0.
//
// requires: n >= 1 and d >= 1 for fit (n = 0 or d = 0 leaves an empty KDE, n = 0);
//           log_density: cnt <= sa_tile_q queries, each whitened by this KDE.
// ensures:  deterministic, and bit-identical however the queries are grouped into calls
//           (kernels/sqdist.hpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <numbers>
#include <vector>

#include "nnlens/kernels/cholesky.hpp"
#include "nnlens/kernels/sqdist.hpp"

namespace nnlens::detail {

struct gaussian_kde {
  std::size_t n = 0;
  std::vector<double> mean;  // d
  std::vector<double> L;     // d x d lower Cholesky factor of the bandwidth covariance (+ ridge)
  std::vector<double> z;     // d x n: L^-1 (x_i - mean), transposed
  double log_norm = 0;       // -log n - d/2 log 2pi - log det L
  double ridge = 0;

  /// Fits the n points x(i, k) (see the header comment); false when no ridge makes the bandwidth
  /// covariance positive definite.
  template <class X>
  bool fit(std::size_t points, std::size_t d, X&& x, double rel_ridge, double fallback_var) {
    n = points;
    ridge = 0;
    if (n == 0 || d == 0) {
      n = 0;
      return true;
    }
    mean.assign(d, 0.0);
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t k = 0; k < d; ++k) mean[k] += x(i, k);
    for (auto& v : mean) v /= double(n);
    std::vector<double> S(d * d, 0.0), y(d);
    for (std::size_t i = 0; i < n; ++i) {
      for (std::size_t k = 0; k < d; ++k) y[k] = x(i, k) - mean[k];
      for (std::size_t r = 0; r < d; ++r) {
        const double yr = y[r];
        double* s = S.data() + r * d;
        for (std::size_t k = 0; k <= r; ++k) s[k] += yr * y[k];
      }
    }
    const double factor = std::pow(double(n), -1.0 / double(d + 4));  // Scott
    const double scale = n > 1 ? factor * factor / double(n - 1) : 0.0;
    double trace = 0;
    for (std::size_t r = 0; r < d; ++r)
      for (std::size_t k = 0; k <= r; ++k) {
        S[r * d + k] *= scale;
        S[k * d + r] = S[r * d + k];
        if (k == r) trace += S[r * d + r];
      }
    if (!cholesky(S, d, L)) {
      const double base = trace > 0 ? trace / double(d) : fallback_var * factor * factor;
      double lambda = rel_ridge * base;
      bool ok = false;
      std::vector<double> A;
      for (int t = 0; t < 30 && !ok; ++t, lambda *= 10) {
        A = S;
        for (std::size_t r = 0; r < d; ++r) A[r * d + r] += lambda;
        ok = cholesky(A, d, L);
        if (ok) ridge = lambda;
      }
      if (!ok) return false;
    }
    double logdet = 0;
    for (std::size_t r = 0; r < d; ++r) logdet += std::log(L[r * d + r]);
    log_norm = -std::log(double(n)) - 0.5 * double(d) * std::log(2 * std::numbers::pi) - logdet;
    z.assign(d * n, 0.0);
    for (std::size_t i = 0; i < n; ++i) {
      for (std::size_t k = 0; k < d; ++k) y[k] = x(i, k) - mean[k];
      forward_subst(L, d, y.data());
      for (std::size_t k = 0; k < d; ++k) z[k * n + i] = y[k];
    }
    return true;
  }

  /// y = L^-1 (x - mean), x(k) the query's k-th value (d values).
  template <class X>
  void whiten(X&& x, std::size_t d, double* y) const {
    for (std::size_t i = 0; i < d; ++i) y[i] = x(i) - mean[i];
    forward_subst(L, d, y);
  }

  /// out[t] = log KDE at the whitened queries yp[t], t < cnt <= sa_tile_q.
  void log_density(const double* const* yp, std::size_t cnt, std::size_t d, double* out) const {
    double mx[sa_tile_q], sum[sa_tile_q];
    std::fill(mx, mx + cnt, -std::numeric_limits<double>::infinity());
    std::fill(sum, sum + cnt, 0.0);
    sa_sqdist_chunks(yp, cnt, d, z.data(), n, 0, n, [&](std::size_t, std::size_t len, const double* acc) {
      for (std::size_t t = 0; t < cnt; ++t) {
        const double* a = acc + t * sa_tile_c;
        double cm = -0.5 * a[0];
        for (std::size_t j = 1; j < len; ++j) cm = std::max(cm, -0.5 * a[j]);
        if (cm > mx[t]) {
          sum[t] *= std::exp(mx[t] - cm);
          mx[t] = cm;
        }
        double s = 0;
        for (std::size_t j = 0; j < len; ++j) s += std::exp(-0.5 * a[j] - mx[t]);
        sum[t] += s;
      }
    });
    for (std::size_t t = 0; t < cnt; ++t) out[t] = log_norm + mx[t] + std::log(sum[t]);
  }
};

}  // namespace nnlens::detail
