// nnlens/coverage/kmeans1d.hpp -- DeepImportance's clustering step (docs/specs/deepimportance.md#23-clustering-the-important-neurons):
// exact 1-D k-means, the exact 1-D silhouette, and Algorithm 2 for one neuron.
//
//   kmeans_1d_result r = kmeans_1d(values, k)        optimal (minimum within-cluster sum of squares)
//                                                    k-means in 1-D: centroids ascending, labels in
//                                                    the caller's order, sizes, sse
//   double s = silhouette_1d(values, labels, k)      exact mean silhouette, L1 distance (§2.3, Eq. 2-4)
//   std::vector<double> s = silhouette_samples_1d(values, labels, k)      the same, per point
//   neuron_clusters c = cluster_neuron(activations, options)             Algorithm 2 for one neuron
//   neuron_clusters c = cluster_neuron(activations, options, workspace)  the same, reusing buffers
//   std::size_t j = nearest_centroid(sorted_centroids, v)                §2.4's per-neuron mapping
//
// k-means.  The reference code runs sklearn's KMeans (k-means++, 10 restarts, unseeded), which is
// neither deterministic nor guaranteed optimal.  In 1-D the optimum is a partition of the sorted
// values into k contiguous runs, found exactly by dynamic programming over prefix sums
//   D[m][j] = min_{i<j} D[m-1][i] + cost(i, j),   cost(i, j) = SSE of the sorted values [i, j),
// with the divide-and-conquer optimisation (the optimal split point is monotone in j because cost
// satisfies the quadrangle inequality): O(k N log N) time after an O(N log N) sort, O(k N) memory.
// Ties between equally good split points go to the smaller index, so results are deterministic.
// Equal values always share a cluster, and each value's centroid is a nearest one.
//
// Silhouette (scikit-learn's definition and conventions, metric = |a - b|):
//   A(t) = mean distance from t to the OTHER members of its cluster (sum / (|C(t)| - 1)),
//   B(t) = min over the other non-empty clusters C' of the mean distance from t to C',
//   s(t) = (B - A) / max(A, B); s(t) = 0 when t is alone in its cluster or when max(A, B) == 0.
//   S    = mean of s(t) over all points (no subsampling).
// Computed exactly in O(N log N + N k): one sort, then per-cluster prefix sums, since for sorted
// members c_1..c_n with p of them below x,  sum |x - c| = x p - sum_{<} c + sum_{>=} c - x (n - p).
// The labels may be arbitrary (not only contiguous runs); empty cluster indices are ignored.
//
// Algorithm 2 for one neuron, cluster_neuron (all fidelity options of §2.6 item 6 default ON):
//   1. drop_zeros      [CODE] drop exact zeros (+0.0 and -0.0) first.
//   2. min_samples     [CODE] fewer than min_samples values left (or none at all) -> one centroid
//                      {0}, k = 1 (§6 item 11: a factor of 1 in |INCC|).  0 disables the rule
//                      (an empty neuron still gets {0}).
//   3. ks              the candidate cluster counts C (§3: {2,3,4}).  Every k must be >= 2.  A k
//                      >= the number of distinct values left is skipped (§6 item 6: the silhouette
//                      needs 2 <= k <= distinct - 1); if none is left, one centroid = the mean of
//                      the values (rounded as below), k = 1.
//   4. the k with the largest silhouette wins; ties go to the smaller k.
//   5. round_decimals  [CODE] round centroids to this many decimals, half to even on the binary
//                      value as numpy.round does (§3: 2); a negative value keeps them exact.
//   6. centroids are sorted ascending and those equal after rounding are merged (§2.3's
//                      recommended extras), so centroids.size() may be smaller than k.
//
// Errors: an empty input, k = 0, k larger than the number of distinct values (kmeans_1d), NaN or
// Inf (the index is named), labels of the wrong length or >= k, fewer than 2 non-empty clusters
// (silhouette) and a candidate k < 2 throw nnlens::value_error.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <utility>
#include <vector>

#include "nnlens/core/error.hpp"

namespace nnlens {

/// The optimal k-means partition of 1-D values.
struct kmeans_1d_result {
  std::vector<double> centroids;    // ascending; centroids[c] = mean of the values labelled c
  std::vector<std::size_t> labels;  // labels[i] = cluster of values[i] (caller's order)
  std::vector<std::size_t> sizes;   // sizes[c] = number of values labelled c (all >= 1)
  double sse = 0;                   // sum over values of (value - its centroid)^2
};

/// Options of Algorithm 2 (see the header comment; defaults = the reference code).
struct cluster_options {
  bool drop_zeros = true;                  // [CODE] §2.3 / §2.6.6: drop exact zeros first
  std::size_t min_samples = 10;            // [CODE] §2.3 / §6.11: fewer values left -> {0}
  std::vector<std::size_t> ks = {2, 3, 4}; // §2.3 / §3: candidate cluster counts C (each >= 2)
  int round_decimals = 2;                  // [CODE] §2.3 / §3: centroid precision; < 0 = exact
};

/// What Algorithm 2 learnt about one neuron.
struct neuron_clusters {
  std::vector<double> centroids;   // ascending, distinct (after rounding)
  std::size_t k = 0;               // the cluster count chosen (1 for the single-centroid fallbacks)
  std::vector<double> silhouettes; // silhouettes[i] = S for options.ks[i]; NaN where not computed
  std::size_t n_used = 0;          // values clustered (after dropping zeros)
};

namespace detail::km1d {

inline void check_finite(std::span<const double> v, const char* fn, const char* what) {
  for (std::size_t i = 0; i < v.size(); ++i)
    if (!std::isfinite(v[i]))
      throw value_error(detail::concat("nnlens::", fn, ": ", what, "[", i, "] is ", v[i],
                                       "; every value must be finite (no NaN/Inf)"));
}

inline std::size_t count_distinct_sorted(std::span<const double> x) {
  std::size_t d = x.empty() ? 0 : 1;
  for (std::size_t i = 1; i < x.size(); ++i) d += x[i] != x[i - 1];
  return d;
}

// Exact k-means DP on ascending values x[0..n).  After solve(x, kmax), bounds(k, b) gives the
// optimal partition into k <= kmax runs: b[0] = 0 < b[1] < ... < b[k] = n.  The buffers are kept
// between calls (a cluster_workspace reuses them across neurons).
class dp_solver {
 public:
  void solve(std::span<const double> x, std::size_t kmax) {
    n_ = x.size();
    kmax_ = kmax;
    if (n_ >= std::numeric_limits<std::uint32_t>::max())
      throw limit_error(detail::concat("nnlens: 1-D k-means on ", n_, " values; at most 2^32 - 2"));
    // Prefix sums of values shifted by the median: limits cancellation in q - s^2/len.
    shift_ = x[n_ / 2];
    p1_.resize(n_ + 1);
    p2_.resize(n_ + 1);
    p1_[0] = p2_[0] = 0.0;
    for (std::size_t i = 0; i < n_; ++i) {
      const double y = x[i] - shift_;
      p1_[i + 1] = p1_[i] + y;
      p2_[i + 1] = p2_[i] + y * y;
    }
    // Split points are stored for layers 2..kmax-1 (layer 1 always splits at 0; the last layer
    // is needed at j = n only).
    opt_.resize(kmax_ > 2 ? (kmax_ - 2) * (n_ + 1) : 0);
    prev_.resize(n_ + 1);
    cur_.resize(n_ + 1);
    prev_[0] = inf();
    for (std::size_t j = 1; j <= n_; ++j) prev_[j] = cost(0, j);  // m = 1
    last_ = 0;
    for (std::size_t m = 2; m <= kmax_; ++m) {
      if (m == kmax_) {
        cur_[n_] = best_split(m, n_, m - 1, n_ - 1, last_);
      } else {
        std::fill(cur_.begin(), cur_.begin() + std::ptrdiff_t(m), inf());  // fewer points than runs
        layer(m, m, n_, m - 1, n_ - 1);
      }
      std::swap(prev_, cur_);
    }
  }

  void bounds(std::size_t k, std::vector<std::size_t>& b) const {
    b.assign(k + 1, 0);
    b[k] = n_;
    if (k < 2) return;
    std::size_t j = k == kmax_ ? std::size_t(last_) : std::size_t(opt_at(k, n_));
    b[k - 1] = j;
    for (std::size_t m = k - 1; m >= 2; --m) {
      j = opt_at(m, j);
      b[m - 1] = j;
    }
  }

  /// Prefix sums of x - shift() (prefix()[i] = sum of the first i).
  std::span<const double> prefix() const { return {p1_.data(), n_ + 1}; }
  double shift() const { return shift_; }

 private:
  static double inf() { return std::numeric_limits<double>::infinity(); }

  std::uint32_t& opt_at(std::size_t m, std::size_t j) { return opt_[(m - 2) * (n_ + 1) + j]; }
  std::uint32_t opt_at(std::size_t m, std::size_t j) const { return opt_[(m - 2) * (n_ + 1) + j]; }

  double cost(std::size_t i, std::size_t j) const {  // SSE of x[i, j), j > i
    const double s = p1_[j] - p1_[i];
    const double c = (p2_[j] - p2_[i]) - s * s / double(j - i);
    return c > 0 ? c : 0.0;
  }

  // min over i in [ilo, ihi] (clipped to [m-1, j-1]) of prev[i] + cost(i, j); arg -> smallest i.
  double best_split(std::size_t m, std::size_t j, std::size_t ilo, std::size_t ihi,
                    std::uint32_t& arg) const {
    ilo = std::max(ilo, m - 1);
    ihi = std::min(ihi, j - 1);
    double best = inf();
    std::size_t a = ilo;
    for (std::size_t i = ilo; i <= ihi; ++i) {
      const double v = prev_[i] + cost(i, j);
      if (v < best) {
        best = v;
        a = i;
      }
    }
    arg = std::uint32_t(a);
    return best;
  }

  // cur[j] for j in [jlo, jhi], knowing that the optimal split lies in [ilo, ihi].
  void layer(std::size_t m, std::size_t jlo, std::size_t jhi, std::size_t ilo, std::size_t ihi) {
    while (jlo <= jhi) {
      const std::size_t mid = jlo + (jhi - jlo) / 2;
      std::uint32_t& arg = opt_at(m, mid);
      cur_[mid] = best_split(m, mid, ilo, ihi, arg);
      const std::size_t a = arg;
      if (mid > jlo) layer(m, jlo, mid - 1, ilo, a);  // left half recursively, right half by loop
      jlo = mid + 1;
      ilo = a;
    }
  }

  std::size_t n_ = 0, kmax_ = 0;
  double shift_ = 0;
  std::uint32_t last_ = 0;
  std::vector<double> p1_, p2_, prev_, cur_;
  std::vector<std::uint32_t> opt_;
};

// Mean silhouette of the contiguous partition b of ascending values x (every run non-empty, k >= 2),
// given prefix sums of x - shift.  O(n): the nearest other cluster of a point is an adjacent run.
inline double silhouette_sorted_runs(std::span<const double> x, std::span<const std::size_t> b,
                                     std::span<const double> prefix, double shift) {
  const std::size_t n = x.size(), k = b.size() - 1;
  const auto mean = [&](std::size_t c) {
    return (prefix[b[c + 1]] - prefix[b[c]]) / double(b[c + 1] - b[c]);
  };
  double total = 0;
  for (std::size_t c = 0; c < k; ++c) {
    const std::size_t l = b[c], r = b[c + 1];
    if (r - l < 2) continue;  // singleton: s = 0
    const double lo = c > 0 ? mean(c - 1) : 0.0, hi = c + 1 < k ? mean(c + 1) : 0.0;
    const double inv = 1.0 / double(r - l - 1);
    for (std::size_t i = l; i < r; ++i) {
      const double y = x[i] - shift;
      const double own = y * double(i - l) - (prefix[i] - prefix[l]) + (prefix[r] - prefix[i + 1]) -
                         y * double(r - i - 1);
      const double a = own * inv;
      double bb = std::numeric_limits<double>::infinity();
      if (c > 0) bb = y - lo;
      if (c + 1 < k) bb = std::min(bb, hi - y);
      const double den = std::max(a, bb);
      if (den > 0) total += (bb - a) / den;
    }
  }
  return total / double(n);
}

// Per-point silhouettes for arbitrary labels (validated by the caller) into s.
inline void silhouette_general(std::span<const double> values, std::span<const std::size_t> labels,
                               std::size_t k, std::span<double> s, const char* fn) {
  const std::size_t n = values.size();
  if (labels.size() != n)
    throw value_error(detail::concat("nnlens::", fn, ": ", labels.size(), " labels for ", n,
                                     " values; need one label per value"));
  if (n == 0) throw value_error(detail::concat("nnlens::", fn, ": no values (empty input)"));
  if (k == 0) throw value_error(detail::concat("nnlens::", fn, ": k = 0; need k >= 2"));
  check_finite(values, fn, "values");
  std::vector<std::size_t> size(k, 0);
  for (std::size_t i = 0; i < n; ++i) {
    if (labels[i] >= k)
      throw value_error(detail::concat("nnlens::", fn, ": labels[", i, "] = ", labels[i],
                                       " is not below k = ", k));
    ++size[labels[i]];
  }
  std::size_t nonempty = 0;
  for (std::size_t c = 0; c < k; ++c) nonempty += size[c] > 0;
  if (nonempty < 2)
    throw value_error(detail::concat("nnlens::", fn, ": the labels name ", nonempty,
                                     " non-empty cluster(s); the silhouette needs at least 2"));

  // Points in ascending value order (ties by index, for determinism).
  std::vector<std::pair<double, std::size_t>> order(n);
  for (std::size_t i = 0; i < n; ++i) order[i] = {values[i], i};
  std::sort(order.begin(), order.end());
  const double shift = order[n / 2].first;

  // Members grouped by cluster (ascending within a group), with prefix sums over the buffer.
  std::vector<std::size_t> off(k + 1, 0);
  for (std::size_t c = 0; c < k; ++c) off[c + 1] = off[c] + size[c];
  std::vector<double> member(n);
  {
    std::vector<std::size_t> fill(off.begin(), off.end() - 1);
    for (const auto& [v, i] : order) member[fill[labels[i]]++] = v - shift;
  }
  std::vector<double> prefix(n + 1, 0.0);
  for (std::size_t i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + member[i];

  std::vector<std::size_t> below(k, 0);  // per cluster: members < the current value
  for (const auto& [v, idx] : order) {
    const double y = v - shift;
    const std::size_t own = labels[idx];
    if (size[own] < 2) {
      s[idx] = 0.0;
      continue;
    }
    double a = 0, bmin = std::numeric_limits<double>::infinity();
    for (std::size_t c = 0; c < k; ++c) {
      if (size[c] == 0) continue;
      std::size_t p = below[c];
      while (p < size[c] && member[off[c] + p] < y) ++p;
      below[c] = p;
      const double lo = prefix[off[c] + p] - prefix[off[c]];
      const double hi = prefix[off[c + 1]] - prefix[off[c] + p];
      const double sum = y * double(p) - lo + hi - y * double(size[c] - p);
      if (c == own)
        a = sum / double(size[c] - 1);
      else
        bmin = std::min(bmin, sum / double(size[c]));
    }
    const double den = std::max(a, bmin);
    s[idx] = den > 0 ? (bmin - a) / den : 0.0;
  }
}

inline double round_to(double v, int decimals) {
  if (decimals < 0) return v;
  const double scale = std::pow(10.0, decimals);
  return std::nearbyint(v * scale) / scale + 0.0;  // + 0.0 turns -0 into +0
}

}  // namespace detail::km1d

/// Exact optimal 1-D k-means (minimum within-cluster sum of squares), O(k N log N).
/// Throws value_error for an empty input, NaN/Inf (naming the index), k = 0, or k larger than the
/// number of distinct values (no partition into k non-empty clusters with distinct centroids).
inline kmeans_1d_result kmeans_1d(std::span<const double> values, std::size_t k) {
  const std::size_t n = values.size();
  if (n == 0) throw value_error("nnlens::kmeans_1d: no values (empty input); need at least k values");
  if (k == 0) throw value_error("nnlens::kmeans_1d: k = 0; need k >= 1 clusters");
  detail::km1d::check_finite(values, "kmeans_1d", "values");

  std::vector<std::pair<double, std::size_t>> order(n);
  for (std::size_t i = 0; i < n; ++i) order[i] = {values[i], i};
  std::sort(order.begin(), order.end());
  std::vector<double> x(n);
  for (std::size_t i = 0; i < n; ++i) x[i] = order[i].first;
  const std::size_t distinct = detail::km1d::count_distinct_sorted(x);
  if (k > distinct)
    throw value_error(detail::concat("nnlens::kmeans_1d: k = ", k, " exceeds the number of distinct "
                                     "values (", distinct, " among ", n, ")"));

  detail::km1d::dp_solver dp;
  dp.solve(x, k);
  std::vector<std::size_t> b;
  dp.bounds(k, b);

  kmeans_1d_result r;
  r.centroids.resize(k);
  r.sizes.resize(k);
  r.labels.resize(n);
  for (std::size_t c = 0; c < k; ++c) {
    double sum = 0;
    for (std::size_t i = b[c]; i < b[c + 1]; ++i) sum += x[i];
    const double mu = sum / double(b[c + 1] - b[c]);
    double sse = 0;
    for (std::size_t i = b[c]; i < b[c + 1]; ++i) {
      sse += (x[i] - mu) * (x[i] - mu);
      r.labels[order[i].second] = c;
    }
    r.centroids[c] = mu;
    r.sizes[c] = b[c + 1] - b[c];
    r.sse += sse;
  }
  return r;
}

/// Per-point silhouettes (L1 distance, scikit-learn's conventions), in the caller's order.
/// labels[i] < k; at least 2 clusters must be non-empty.  O(N log N + N k).
inline std::vector<double> silhouette_samples_1d(std::span<const double> values,
                                                 std::span<const std::size_t> labels, std::size_t k) {
  std::vector<double> s(values.size());
  detail::km1d::silhouette_general(values, labels, k, s, "silhouette_samples_1d");
  return s;
}

/// Mean silhouette (L1 distance) = sklearn.metrics.silhouette_score(X, labels, metric="manhattan").
inline double silhouette_1d(std::span<const double> values, std::span<const std::size_t> labels,
                            std::size_t k) {
  std::vector<double> s(values.size());
  detail::km1d::silhouette_general(values, labels, k, s, "silhouette_1d");
  double total = 0;
  for (const double v : s) total += v;
  return total / double(s.size());
}

class cluster_workspace;
inline neuron_clusters cluster_neuron(std::span<const double> activations, const cluster_options& o,
                                      cluster_workspace& ws);

/// Buffers of cluster_neuron, kept between calls: pass the same workspace when clustering many
/// neurons to avoid re-allocating (and re-faulting) a few MB per neuron.  Not thread-safe: one
/// workspace per thread.
class cluster_workspace {
 private:
  friend neuron_clusters cluster_neuron(std::span<const double>, const cluster_options&,
                                        cluster_workspace&);
  detail::km1d::dp_solver dp_;
  std::vector<double> x_;
  std::vector<std::size_t> b_, best_b_;
};

/// Algorithm 2 (spec §2.3) for one neuron's activations over the training inputs, reusing ws.
inline neuron_clusters cluster_neuron(std::span<const double> activations, const cluster_options& o,
                                      cluster_workspace& ws) {
  detail::km1d::check_finite(activations, "cluster_neuron", "activations");
  for (std::size_t i = 0; i < o.ks.size(); ++i)
    if (o.ks[i] < 2)
      throw value_error(detail::concat("nnlens::cluster_neuron: candidate ks[", i, "] = ", o.ks[i],
                                       "; every candidate cluster count must be >= 2"));

  neuron_clusters out;
  out.silhouettes.assign(o.ks.size(), std::numeric_limits<double>::quiet_NaN());
  std::vector<double>& x = ws.x_;
  x.clear();
  for (const double v : activations)
    if (!(o.drop_zeros && v == 0.0)) x.push_back(v);
  out.n_used = x.size();
  if (x.empty() || x.size() < o.min_samples) {
    out.centroids = {0.0};
    out.k = 1;
    return out;
  }
  std::sort(x.begin(), x.end());
  const std::size_t distinct = detail::km1d::count_distinct_sorted(x);

  std::size_t kmax = 0;
  for (const std::size_t k : o.ks)
    if (k < distinct) kmax = std::max(kmax, k);
  if (kmax == 0) {  // no candidate fits: one centroid, the mean
    double sum = 0;
    for (const double v : x) sum += v;
    out.centroids = {detail::km1d::round_to(sum / double(x.size()), o.round_decimals)};
    out.k = 1;
    return out;
  }

  detail::km1d::dp_solver& dp = ws.dp_;
  dp.solve(x, kmax);  // one DP for every candidate k
  double best = -std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < o.ks.size(); ++i) {
    const std::size_t k = o.ks[i];
    if (k >= distinct) continue;
    dp.bounds(k, ws.b_);
    const double s = detail::km1d::silhouette_sorted_runs(x, ws.b_, dp.prefix(), dp.shift());
    out.silhouettes[i] = s;
    if (s > best || (s == best && k < out.k)) {
      best = s;
      out.k = k;
      ws.best_b_ = ws.b_;
    }
  }
  const auto& bb = ws.best_b_;
  out.centroids.resize(out.k);
  for (std::size_t c = 0; c < out.k; ++c) {
    double sum = 0;
    for (std::size_t i = bb[c]; i < bb[c + 1]; ++i) sum += x[i];
    out.centroids[c] = detail::km1d::round_to(sum / double(bb[c + 1] - bb[c]), o.round_decimals);
  }
  std::sort(out.centroids.begin(), out.centroids.end());
  out.centroids.erase(std::unique(out.centroids.begin(), out.centroids.end()), out.centroids.end());
  return out;
}

/// Algorithm 2 (spec §2.3) for one neuron's activations over the training inputs.
inline neuron_clusters cluster_neuron(std::span<const double> activations,
                                      const cluster_options& o = {}) {
  cluster_workspace ws;
  return cluster_neuron(activations, o, ws);
}

/// Index of the centroid nearest to v in ascending centroids; a tie goes to the lower centroid
/// (spec §2.4).  O(log k).  Throws value_error for no centroids or a non-finite v.
inline std::size_t nearest_centroid(std::span<const double> sorted_centroids, double v) {
  if (sorted_centroids.empty())
    throw value_error("nnlens::nearest_centroid: no centroids");
  if (!std::isfinite(v))
    throw value_error(detail::concat("nnlens::nearest_centroid: value ", v, " is not finite"));
  const auto it = std::lower_bound(sorted_centroids.begin(), sorted_centroids.end(), v);
  if (it == sorted_centroids.begin()) return 0;
  const std::size_t hi = std::size_t(it - sorted_centroids.begin());
  if (it == sorted_centroids.end()) return hi - 1;
  return (v - sorted_centroids[hi - 1] <= sorted_centroids[hi] - v) ? hi - 1 : hi;
}

}  // namespace nnlens
