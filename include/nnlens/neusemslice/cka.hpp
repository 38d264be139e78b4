// nnlens/neusemslice/cka.hpp -- NeuSemSlice's semantic similarity between the embedding landscape of a
// neuron subset and that of the whole layer (docs/specs/neusemslice.md#23-semantic-similarity, docs/specs/neusemslice.md#24-linear-scan), with incremental
// ("prefix sum") Gram updates for the linear scan of Algorithm 1.
//
//   gram_scan g(features, m, neurons, per, similarity::linear_cka, feature_map::full);
//       features: sample-major [m][neurons][per] (per = H*W positions of a conv channel, 1 for a
//       dense unit; any scalar type, held in double).  Holds the (prepared) features, the full
//       Gram M = sum_n F_n F_n^T and the prefix Gram M_Omega of the neurons added so far.
//   g.add(block) / g.add(n)   adds neurons to Omega (rank-|block|*per GEMM update of M_Omega);
//                             returns sim(M_Omega, M) after the block
//   g.sim()                   sim of the current Omega;  g.reset(): Omega = {} again
//   g.similarity_of(subset)   sim of any subset, computed afresh (does not touch Omega)
//   linear_scan(g, order, step, theta)   Algorithm 1: blocks of `step` neurons in `order` until
//                             sim >= theta or every neuron is in; returns k, sim and the trajectory
//   order_by_score(scores)    neuron indices by score descending, ties to the lower index
//   default_step(width)       max(1, ceil(0.01 * width))  (A10)
//   gram_similarity(K, L, m, s)  the same similarity for two m x m Gram matrices given directly
//
// The three forms (sim lies in [0, 1] for the first two; the third may be negative):
//   similarity::linear_cka  (default) linear CKA of Kornblith et al. 2019: K = H M H with
//                           H = I - 11^T/m, sim = <K_Omega, K>_F / (|K_Omega|_F |K|_F).  gram_scan
//                           centres the FEATURES (each feature element minus its mean over the m
//                           samples), which gives H M H exactly in exact arithmetic and keeps the
//                           rounding of big, nearly constant Gram entries out.
//   similarity::uncentered  the paper's literal Eq. 2/4: the same cosine on the raw Gram matrices.
//   similarity::unbiased    CKA from the unbiased HSIC estimator (Song et al. 2012, used by Nguyen,
//                           Raghu & Kornblith 2021 and Kornblith's minibatch CKA): with K~, L~ the
//                           raw Grams with their diagonals zeroed and n = m,
//                             HSIC_u(K,L) = [ tr(K~L~) + (1^T K~ 1)(1^T L~ 1)/((n-1)(n-2))
//                                             - 2/(n-2) 1^T K~ L~ 1 ] / (n(n-3))
//                           sim = HSIC_u(K_Omega, M) / sqrt(HSIC_u(K_Omega,K_Omega) HSIC_u(M,M)).
//                           It needs m >= 4; with fewer samples linear_cka is used instead.
//                           HSIC_u is invariant to centring the features, so the raw Grams serve.
//
// Zero norms (exact): a feature element whose m values are all bit-identical is a constant; under
// linear_cka its centred column is set to exactly 0 (so a constant neuron contributes nothing, and
// a constant-zero or constant layer has a zero centred Gram).  Then, with N = the norm of the whole
// layer's (centred) Gram and N_Omega that of the subset (for unbiased: HSIC_u(.,.) <= 0 counts as 0):
//   N == 0                 the layer's landscape is trivial (e.g. a dead, constant-zero layer):
//                          sim = 1 for every Omega, so the scan keeps the first block only;
//   N > 0, N_Omega == 0    sim = 0 (the subset carries none of it);
//   Omega = every neuron   sim = 1 exactly (oracle 1), whatever the rounding.
// Cost: O(m^2 * per) per added neuron and O(m^2) per similarity; memory m * neurons * per + 2 m^2
// doubles (the per-neuron Grams G_n are accumulated lazily, never stored).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "nnlens/core/error.hpp"
#include "nnlens/kernels/gemm.hpp"

namespace nnlens {

/// Which similarity compares the subset's Gram matrix with the layer's (see the header comment).
enum class similarity { linear_cka, uncentered, unbiased };
/// The feature of a conv channel in the Gram matrices: its full flattened map (A4) or the spatial
/// mean of the map (A4's cheaper form).  Dense units have one value either way.
enum class feature_map { full, spatial_mean };

inline const char* to_string(similarity s) {
  switch (s) {
    case similarity::linear_cka: return "linear_cka";
    case similarity::uncentered: return "uncentered";
    case similarity::unbiased: return "unbiased";
  }
  return "?";
}

/// Neurons added per block by default: max(1, ceil(1% of the width)) (specs A10).
constexpr std::size_t default_step(std::size_t width) { return std::max<std::size_t>(1, (width + 99) / 100); }

/// Neuron indices ordered by score, largest first; ties (and NaN-free equal scores) to the lower index.
inline std::vector<std::size_t> order_by_score(std::span<const double> scores) {
  std::vector<std::size_t> o(scores.size());
  for (std::size_t i = 0; i < o.size(); ++i) o[i] = i;
  std::stable_sort(o.begin(), o.end(), [&](std::size_t a, std::size_t b) { return scores[a] > scores[b]; });
  return o;
}

namespace detail {

/// Frobenius product of two m x m matrices.
inline double frobenius(const double* a, const double* b, std::size_t m) {
  double s = 0;
  for (std::size_t i = 0; i < m * m; ++i) s += a[i] * b[i];
  return s;
}

/// Unbiased HSIC (Song et al. 2012) of two symmetric m x m matrices, m >= 4.
inline double hsic_unbiased(const double* k, const double* l, std::size_t m) {
  double t1 = 0, sk = 0, sl = 0, t3 = 0;
  for (std::size_t i = 0; i < m; ++i) {
    double rk = 0, rl = 0;
    for (std::size_t j = 0; j < m; ++j) {
      if (i == j) continue;
      const double a = k[i * m + j], b = l[i * m + j];
      t1 += a * b;
      rk += a;
      rl += b;
    }
    sk += rk;
    sl += rl;
    t3 += rk * rl;
  }
  const double n = double(m);
  return (t1 + sk * sl / ((n - 1) * (n - 2)) - 2.0 / (n - 2) * t3) / (n * (n - 3));
}

/// The similarity of two prepared Grams (already centred for linear_cka) with the zero-norm rules
/// of the header comment.  `kk`, `ll` are the subset's and the layer's self-products (squared norms
/// or HSIC_u(.,.)), `kl` the cross product.
inline double similarity_from_products(double kk, double ll, double kl) {
  if (!(ll > 0)) return 1.0;  // trivial landscape: every subset reproduces it
  if (!(kk > 0)) return 0.0;  // the subset carries nothing
  return std::clamp(kl / (std::sqrt(kk) * std::sqrt(ll)), -1.0, 1.0);
}

/// H K H for an m x m matrix (row and column means removed).
inline std::vector<double> centre_gram(const double* k, std::size_t m) {
  std::vector<double> r(k, k + m * m), row(m, 0.0);
  double all = 0;
  for (std::size_t i = 0; i < m; ++i) {
    for (std::size_t j = 0; j < m; ++j) row[i] += k[i * m + j];
    all += row[i];
    row[i] /= double(m);
  }
  all /= double(m) * double(m);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < m; ++j) r[i * m + j] = k[i * m + j] - row[i] - row[j] + all;  // symmetric: col mean = row mean
  return r;
}

}  // namespace detail

/// Similarity of two m x m Gram matrices (subset K, layer L).  linear_cka centres both (H K H); a
/// centred Gram whose norm is below 1e-12 of its uncentred norm counts as zero (rounding: a Gram
/// built from constant features).  gram_scan avoids that tolerance by centring the features.
inline double gram_similarity(std::span<const double> k, std::span<const double> l, std::size_t m, similarity s) {
  if (k.size() != m * m || l.size() != m * m) throw value_error("gram_similarity: the Gram matrices must be m x m");
  if (m == 0) throw data_error("gram_similarity: no samples");
  if (s == similarity::unbiased && m >= 4)
    return detail::similarity_from_products(detail::hsic_unbiased(k.data(), k.data(), m),
                                            detail::hsic_unbiased(l.data(), l.data(), m),
                                            detail::hsic_unbiased(k.data(), l.data(), m));
  if (s == similarity::uncentered)
    return detail::similarity_from_products(detail::frobenius(k.data(), k.data(), m), detail::frobenius(l.data(), l.data(), m),
                                            detail::frobenius(k.data(), l.data(), m));
  const auto kc = detail::centre_gram(k.data(), m), lc = detail::centre_gram(l.data(), m);
  double kk = detail::frobenius(kc.data(), kc.data(), m), ll = detail::frobenius(lc.data(), lc.data(), m);
  if (kk <= 1e-24 * detail::frobenius(k.data(), k.data(), m)) kk = 0;
  if (ll <= 1e-24 * detail::frobenius(l.data(), l.data(), m)) ll = 0;
  return detail::similarity_from_products(kk, ll, detail::frobenius(kc.data(), lc.data(), m));
}

/// Incremental Gram matrices of a neuron subset against the whole layer (see the header comment).
class gram_scan {
 public:
  template <class T>
  gram_scan(std::span<const T> features, std::size_t m, std::size_t neurons, std::size_t per,
            nnlens::similarity s = nnlens::similarity::linear_cka, feature_map f = feature_map::full)
      : m_(m), neurons_(neurons), per_(f == feature_map::spatial_mean ? 1 : per), sim_(s) {
    if (m == 0) throw data_error("gram_scan: no samples");
    if (neurons == 0 || per == 0) throw value_error("gram_scan: a layer with no neurons");
    if (features.size() != m * neurons * per)
      throw value_error(detail::concat("gram_scan: ", features.size(), " feature values, expected m*neurons*per = ", m * neurons * per));
    if (sim_ == similarity::unbiased && m < 4) sim_ = similarity::linear_cka;  // HSIC_u needs m >= 4
    const std::size_t d = neurons_ * per_;
    x_.assign(m * d, 0.0);
    for (std::size_t i = 0; i < m; ++i) {
      const T* src = features.data() + i * neurons * per;
      double* dst = x_.data() + i * d;
      if (per_ == per) {
        for (std::size_t j = 0; j < d; ++j) dst[j] = double(src[j]);
      } else {
        for (std::size_t n = 0; n < neurons; ++n) {
          double acc = 0;
          for (std::size_t p = 0; p < per; ++p) acc += double(src[n * per + p]);
          dst[n] = acc / double(per);
        }
      }
    }
    for (double v : x_)
      if (!std::isfinite(v)) throw value_error("gram_scan: a feature value is NaN or Inf");
    if (sim_ == similarity::linear_cka) centre_columns();
    full_.assign(m * m, 0.0);
    kernels::gemm(false, true, m, m, d, x_.data(), d, x_.data(), d, 0.0, full_.data(), m);
    full_self_ = self_product(full_.data());
    reset();
  }

  std::size_t samples() const { return m_; }
  std::size_t neurons() const { return neurons_; }
  /// Values per neuron in the Gram matrices (1 with feature_map::spatial_mean).
  std::size_t per() const { return per_; }
  /// The similarity in use (unbiased falls back to linear_cka below 4 samples).
  nnlens::similarity kind() const { return sim_; }
  std::size_t added() const { return added_; }
  bool contains(std::size_t n) const { return in_.at(n) != 0; }
  /// The whole layer's Gram matrix M (centred for linear_cka), m x m row-major.
  const std::vector<double>& full() const { return full_; }
  /// The subset's Gram matrix M_Omega (centred for linear_cka).
  const std::vector<double>& prefix() const { return prefix_; }

  void reset() {
    prefix_.assign(m_ * m_, 0.0);
    in_.assign(neurons_, 0);
    added_ = 0;
  }

  /// Adds the neurons of `block` to Omega; returns sim(Omega) afterwards.  A neuron already in
  /// Omega or out of range is a value_error.
  double add(std::span<const std::size_t> block) {
    accumulate(block, prefix_, true);
    return sim();
  }
  double add(std::size_t n) { return add(std::span<const std::size_t>(&n, 1)); }

  /// sim(M_Omega, M) of the current Omega.
  double sim() const {
    if (added_ == neurons_) return 1.0;
    return similarity_with(prefix_);
  }

  /// sim of any subset (duplicates are a value_error), computed afresh; Omega is left as it is.
  double similarity_of(std::span<const std::size_t> subset) const {
    std::vector<double> g(m_ * m_, 0.0);
    std::vector<std::uint8_t> seen(neurons_, 0);
    for (auto n : subset) {
      if (n >= neurons_ || seen[n]) throw value_error(detail::concat("gram_scan: neuron ", n, " is out of range or repeated"));
      seen[n] = 1;
    }
    if (subset.size() == neurons_) return 1.0;
    gather_gemm(subset, g);
    return similarity_with(g);
  }

 private:
  void centre_columns() {
    const std::size_t d = neurons_ * per_;
    for (std::size_t j = 0; j < d; ++j) {
      const double first = x_[j];
      bool constant = true;
      double mean = 0;
      for (std::size_t i = 0; i < m_; ++i) {
        const double v = x_[i * d + j];
        constant = constant && v == first;
        mean += v;
      }
      mean /= double(m_);
      for (std::size_t i = 0; i < m_; ++i) x_[i * d + j] = constant ? 0.0 : x_[i * d + j] - mean;
    }
  }
  double self_product(const double* g) const {
    if (sim_ == similarity::unbiased) return detail::hsic_unbiased(g, g, m_);
    return detail::frobenius(g, g, m_);
  }
  double similarity_with(const std::vector<double>& g) const {
    const double kk = self_product(g.data());
    const double kl = sim_ == similarity::unbiased ? detail::hsic_unbiased(g.data(), full_.data(), m_)
                                                   : detail::frobenius(g.data(), full_.data(), m_);
    return detail::similarity_from_products(kk, full_self_, kl);
  }
  void accumulate(std::span<const std::size_t> block, std::vector<double>& g, bool mark) {
    for (auto n : block) {
      if (n >= neurons_ || in_[n]) throw value_error(detail::concat("gram_scan: neuron ", n, " is out of range or already added"));
      if (mark) in_[n] = 1;
    }
    added_ += block.size();
    gather_gemm(block, g);
  }
  /// g += X_S X_S^T, X_S = the columns of the neurons in S.
  void gather_gemm(std::span<const std::size_t> s, std::vector<double>& g) const {
    if (s.empty()) return;
    const std::size_t d = neurons_ * per_, w = s.size() * per_;
    buf_.resize(m_ * w);
    for (std::size_t i = 0; i < m_; ++i)
      for (std::size_t b = 0; b < s.size(); ++b)
        std::copy_n(x_.data() + i * d + s[b] * per_, per_, buf_.data() + i * w + b * per_);
    kernels::gemm(false, true, m_, m_, w, buf_.data(), w, buf_.data(), w, 1.0, g.data(), m_);
  }

  std::size_t m_, neurons_, per_;
  nnlens::similarity sim_;
  std::vector<double> x_, full_, prefix_;
  mutable std::vector<double> buf_;  // gather scratch: one gram_scan per thread
  std::vector<std::uint8_t> in_;
  double full_self_ = 0;
  std::size_t added_ = 0;
};

/// What linear_scan found: Omega = the first k neurons of the order, sim after the last block,
/// and sim after every block (blocks = trajectory.size()).
struct scan_result {
  std::size_t k = 0;
  double sim = 0;
  std::vector<double> trajectory;
};

/// Algorithm 1 of the spec: add blocks of `step` neurons of `order` (a permutation of the layer's
/// neurons) to an empty Omega until sim >= theta or every neuron is in.  theta must lie in (0, 1].
inline scan_result linear_scan(gram_scan& g, std::span<const std::size_t> order, std::size_t step, double theta) {
  if (!(theta > 0 && theta <= 1)) throw value_error(detail::concat("linear_scan: theta = ", theta, ", expected 0 < theta <= 1"));
  if (step == 0) throw value_error("linear_scan: step must be >= 1");
  if (order.size() != g.neurons())
    throw value_error(detail::concat("linear_scan: the order has ", order.size(), " neurons, the layer ", g.neurons()));
  g.reset();
  scan_result r;
  std::size_t pos = 0;
  while (pos < order.size()) {
    const std::size_t b = std::min(step, order.size() - pos);
    r.sim = g.add(order.subspan(pos, b));
    r.trajectory.push_back(r.sim);
    pos += b;
    if (r.sim >= theta) break;
  }
  r.k = pos;
  return r;
}

}  // namespace nnlens
