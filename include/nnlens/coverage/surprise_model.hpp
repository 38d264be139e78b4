// nnlens/coverage/surprise_model.hpp -- Surprise Adequacy (Kim et al., ICSE 2019): the
// preparation and the per-input LSA and DSA that LSC and DSC bucket (coverage/surprise.hpp;
// docs/specs/deepimportance.md#3-hyperparameters, docs/specs/deepimportance.md#7-baselines).
//
//   auto m = prepare_surprise([policy,] net, Xtrain, layer[, opts])   the preparation: the training
//                           activation traces (AT = the neurons of `layer`, channel means for a conv
//                           layer) grouped by predicted class, and a Gaussian KDE per class
//   surprise_default_layer(net)   the penultimate layer = subject_layer(net) (the output feeding the
//                           last weighted layer; LeNet-5: the ReLU after Dense<84>)
//   lsa_values([policy,] net, m, X), dsa_values(...)   raw per-input LSA / DSA
//   surprise_values(m, kind, block[, parallel])       the same for a block streamed for m.layers()
//   save_surprise(os, m) / load_surprise(is, net)      text "nnlens-coverage-surprise 1"
//
// LSA(x) = -log KDE_c(AT(x)), c = x's predicted class (argmax of the output layer's neurons, ties to
// the lower class), the KDE fitted on the training ATs predicted as c, Gaussian kernel, Scott's
// bandwidth (covariance = the class's sample covariance (ddof 1) * n_c^(-2/(d+4))), as
// scipy.stats.gaussian_kde; log-densities by log-sum-exp (no underflow).  AT dimensions whose
// training variance (ddof 0) is < var_threshold (1e-5) are dropped first: by default a dimension
// whose variance is below the threshold within any class (variance_filter::per_class_union, what
// the SA reference code's _get_kdes does: it keeps every class covariance non-singular in the
// common case of a unit that is dead within one class; a class with a single training input does
// not vote, else it would drop every dimension); variance_filter::global filters on the
// variance over all training ATs (the spec's wording, §7), and then a singular class covariance
// gets the ridge below.
// DSA(x) = dist_a / dist_b: x_a = the training AT of the same predicted class nearest to AT(x)
// (Euclidean, all AT dimensions, ties to the earlier training input), dist_a = |AT(x) - AT(x_a)|,
// dist_b = the distance from AT(x_a) to the nearest training AT of any other predicted class.
// Training inputs are grouped by their predicted class (as the reference code does), not labels.
// Degenerate cases (decided here; the papers are silent):
//  - a class covariance that is singular (fewer samples than dimensions, collinear ATs, a dimension
//    constant within the class; Cholesky pivot <= 1e-10 * its diagonal entry): a ridge lambda I is
//    added, lambda = ridge (1e-4) * trace(S)/d (or, for a zero S, * the mean kept training variance
//    * Scott factor^2), multiplied by 10 until the Cholesky factorisation succeeds.  Deterministic;
//    class_ridge(c) reports it (0 when none was needed).  A class of one training input has S = 0.
//  - no training input predicted as class c: LSA = DSA = +inf for inputs predicted as c (outside
//    every bucket range: ignored, or "above" with count_overflow).
//  - no AT dimension passes the variance filter: lsa throws data_error; DSA is still defined.
//  - only one predicted class in the training set: dsa throws data_error (no dist_b).
//  - dist_b = 0 (a training AT shared by two classes): DSA = 0 if dist_a = 0, else +inf.
// Nearest neighbours and KDE sums are brute force over blocks of 32 queries x 256 training ATs
// (double precision; the queries of a block are split over the thread pool when parallel).
// Errors: value_error for a layer index out of range and non-finite ATs; data_error for an empty
// training set, a state file of another model (naming the fingerprints) and a truncated or
// garbage state file.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <istream>
#include <limits>
#include <memory>
#include <mutex>
#include <numeric>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "nnlens/core/error.hpp"
#include "nnlens/core/execution.hpp"
#include "nnlens/core/thread_pool.hpp"
#include "nnlens/coverage/activations.hpp"
#include "nnlens/coverage/covered_set.hpp"
#include "nnlens/coverage/criterion.hpp"
#include "nnlens/coverage/kde.hpp"
#include "nnlens/coverage/state_file.hpp"
#include "nnlens/kernels/sqdist.hpp"
#include "nnlens/network/fingerprint.hpp"

namespace nnlens {

enum class variance_filter { global, per_class_union };
enum class surprise_kind { lsa, dsa };

struct surprise_options {
  std::size_t output_layer = std::size_t(-1);  // the layer whose argmax is the predicted class; -1: the last layer
  double var_threshold = 1e-5;                 // drop AT dimensions with training variance below this
  variance_filter filter = variance_filter::per_class_union;
  double ridge = 1e-4;                         // relative ridge for singular class covariances (see above)
};

/// The default AT layer: the penultimate representation (subject_layer: the output feeding the last
/// weighted layer).  The SA reference code takes layers[-3] of a Keras model, which is that layer
/// for a model ending Dense(84, relu), Dense(10), softmax.
template <class Net>
std::size_t surprise_default_layer(const Net& net) {
  return subject_layer(net);
}

namespace detail {

/// Runs f(tile) for tiles of <= 32 consecutive entries of `order` sharing a key (key(order[i])), on
/// the pool when parallel.  f(first, count) gets positions into `order`.
template <class Key, class F>
void sa_for_tiles(const std::vector<std::size_t>& order, Key&& key, bool parallel, F&& f) {
  std::vector<std::pair<std::size_t, std::size_t>> tiles;
  for (std::size_t i = 0; i < order.size();) {
    std::size_t j = i + 1;
    while (j < order.size() && j - i < sa_tile_q && key(order[j]) == key(order[i])) ++j;
    tiles.emplace_back(i, j - i);
    i = j;
  }
  auto run = [&](std::size_t t) { f(tiles[t].first, tiles[t].second); };
  if (parallel && tiles.size() > 1)
    default_pool().parallel_for(tiles.size(), run);
  else
    for (std::size_t t = 0; t < tiles.size(); ++t) run(t);
}

inline std::size_t sa_argmax(const double* v, std::size_t n) {
  std::size_t b = 0;
  for (std::size_t i = 1; i < n; ++i)
    if (v[i] > v[b]) b = i;
  return b;
}

}  // namespace detail

/// The preparation of LSA/DSA: the training ATs grouped by predicted class, and the per-class KDEs
/// (derived by fit(), which load and prepare call; not saved).
class surprise_model {
 public:
  // ---- stored (saved) ----
  std::uint64_t fingerprint = 0;
  std::size_t layer = 0, output_layer = 0;
  std::size_t dims = 0;     // AT width (neurons of `layer`)
  std::size_t classes = 0;  // neurons of output_layer
  double var_threshold = 1e-5;
  variance_filter filter = variance_filter::global;
  double ridge = 1e-4;
  std::vector<double> ats;               // samples x dims, grouped by predicted class (stable)
  std::vector<std::size_t> index;        // training-set index of each row
  std::vector<std::size_t> class_begin;  // classes + 1 row offsets

  std::vector<std::size_t> layers() const { return {layer, output_layer}; }
  std::size_t samples() const { return index.size(); }
  std::size_t class_size(std::size_t c) const { return class_begin[c + 1] - class_begin[c]; }
  /// AT dimensions the KDEs use (after the variance filter).
  const std::vector<std::size_t>& kept() const { return kept_; }
  /// The ridge added to class c's bandwidth covariance (0: none was needed).
  double class_ridge(std::size_t c) const { return kdes_.at(c).ridge; }
  /// The same stored preparation (the derived KDEs follow from it).
  bool same_preparation(const surprise_model& o) const {
    return fingerprint == o.fingerprint && layer == o.layer && output_layer == o.output_layer && dims == o.dims &&
           classes == o.classes && var_threshold == o.var_threshold && filter == o.filter && ridge == o.ridge &&
           index == o.index && class_begin == o.class_begin && ats == o.ats;
  }

  /// Derives the variance filter, the per-class KDEs and the transposed ATs from the stored fields.
  void fit() {
    const std::size_t n = samples();
    if (n == 0) throw data_error("surprise_model: the training set is empty");
    NNLENS_EXPECTS(ats.size() == n * dims && class_begin.size() == classes + 1 && class_begin.back() == n);
    cache_ = std::make_shared<dist_b_cache>();
    cache_->d2.assign(n, std::numeric_limits<double>::quiet_NaN());
    // transposed ATs for the distance kernels
    at_t_.assign(dims * n, 0.0);
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t k = 0; k < dims; ++k) at_t_[k * n + i] = ats[i * dims + k];
    // variance filter
    auto variance = [&](std::size_t k, std::size_t b, std::size_t e) {
      double mean = 0;
      for (std::size_t i = b; i < e; ++i) mean += ats[i * dims + k];
      mean /= double(e - b);
      double v = 0;
      for (std::size_t i = b; i < e; ++i) v += (ats[i * dims + k] - mean) * (ats[i * dims + k] - mean);
      return v / double(e - b);
    };
    kept_.clear();
    double kept_var = 0;
    for (std::size_t k = 0; k < dims; ++k) {
      const double g = variance(k, 0, n);
      bool keep = g >= var_threshold;
      if (keep && filter == variance_filter::per_class_union)
        for (std::size_t c = 0; c < classes && keep; ++c)
          if (class_size(c) > 1 && variance(k, class_begin[c], class_begin[c + 1]) < var_threshold) keep = false;
      if (keep) {
        kept_.push_back(k);
        kept_var += g;
      }
    }
    const std::size_t d = kept_.size();
    if (d) kept_var /= double(d);
    kdes_.assign(classes, detail::gaussian_kde{});
    for (std::size_t c = 0; c < classes; ++c) fit_class(c, kept_var);
  }

  /// LSA of m queries: AT row q at at + q * stride (dims values), predicted class cls[q].
  void lsa(const double* at, std::size_t stride, const std::size_t* cls, std::size_t m, double* out, bool parallel) const {
    if (kept_.empty())
      throw data_error(detail::concat("lsa: no AT dimension of layer ", layer, " has a training variance >= ", var_threshold));
    const std::size_t d = kept_.size();
    std::vector<std::size_t> order(m);
    std::iota(order.begin(), order.end(), std::size_t(0));
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return cls[a] < cls[b]; });
    detail::sa_for_tiles(order, [&](std::size_t q) { return cls[q]; }, parallel, [&](std::size_t first, std::size_t cnt) {
      const std::size_t c = cls[order[first]];
      const detail::gaussian_kde& K = kdes_[c];
      if (K.n == 0) {
        for (std::size_t t = 0; t < cnt; ++t) out[order[first + t]] = std::numeric_limits<double>::infinity();
        return;
      }
      std::vector<double> ys(cnt * d);
      const double* yp[detail::sa_tile_q];
      for (std::size_t t = 0; t < cnt; ++t) {
        const double* x = at + order[first + t] * stride;
        double* y = ys.data() + t * d;
        K.whiten([&](std::size_t i) { return x[kept_[i]]; }, d, y);
        yp[t] = y;
      }
      double logp[detail::sa_tile_q];
      K.log_density(yp, cnt, d, logp);
      for (std::size_t t = 0; t < cnt; ++t) out[order[first + t]] = -logp[t];
    });
  }

  /// DSA of m queries (as lsa).
  void dsa(const double* at, std::size_t stride, const std::size_t* cls, std::size_t m, double* out, bool parallel) const {
    const std::size_t n = samples();
    std::size_t nonempty = 0;
    for (std::size_t c = 0; c < classes; ++c) nonempty += class_size(c) > 0;
    if (nonempty < 2) throw data_error("dsa: the training inputs are all predicted as one class (no dist_b)");
    std::vector<std::size_t> order(m);
    std::iota(order.begin(), order.end(), std::size_t(0));
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return cls[a] < cls[b]; });
    std::vector<double> da2(m, std::numeric_limits<double>::infinity());
    std::vector<std::size_t> xa(m, n);
    detail::sa_for_tiles(order, [&](std::size_t q) { return cls[q]; }, parallel, [&](std::size_t first, std::size_t cnt) {
      const std::size_t c = cls[order[first]];
      const double* yp[detail::sa_tile_q];
      for (std::size_t t = 0; t < cnt; ++t) yp[t] = at + order[first + t] * stride;
      nearest(yp, cnt, class_begin[c], class_begin[c + 1], &da2, &xa, order.data() + first);
    });
    // dist_b for each distinct x_a
    std::vector<std::size_t> as;
    for (std::size_t q = 0; q < m; ++q)
      if (xa[q] < n) as.push_back(xa[q]);
    std::sort(as.begin(), as.end());
    as.erase(std::unique(as.begin(), as.end()), as.end());
    std::vector<std::size_t> cls_of(as.size());
    for (std::size_t i = 0; i < as.size(); ++i)
      cls_of[i] = std::size_t(std::upper_bound(class_begin.begin(), class_begin.end(), as[i]) - class_begin.begin()) - 1;
    // dist_b^2 of a training row never changes: computed once per row and cached (shared by copies
    // of this model, made anew by fit(); values are identical with or without the cache)
    std::vector<double> db2(as.size(), std::numeric_limits<double>::quiet_NaN());
    std::vector<std::size_t> missing;
    {
      std::unique_lock lk(cache_ ? cache_->mu : dummy_mutex());
      for (std::size_t i = 0; i < as.size(); ++i) {
        if (cache_) db2[i] = cache_->d2[as[i]];
        if (std::isnan(db2[i])) missing.push_back(i);
      }
    }
    for (std::size_t i : missing) db2[i] = std::numeric_limits<double>::infinity();
    std::vector<std::size_t> dummy(as.size(), n);
    // `as` is sorted, so the rows of one class are contiguous in `missing`
    detail::sa_for_tiles(missing, [&](std::size_t i) { return cls_of[i]; }, parallel, [&](std::size_t first, std::size_t cnt) {
      const std::size_t c = cls_of[missing[first]];
      const double* yp[detail::sa_tile_q];
      for (std::size_t t = 0; t < cnt; ++t) yp[t] = ats.data() + as[missing[first + t]] * dims;
      nearest(yp, cnt, 0, class_begin[c], &db2, &dummy, missing.data() + first);
      nearest(yp, cnt, class_begin[c + 1], n, &db2, &dummy, missing.data() + first);
    });
    if (cache_ && !missing.empty()) {
      std::lock_guard lk(cache_->mu);
      for (std::size_t i : missing) cache_->d2[as[i]] = db2[i];
    }
    for (std::size_t q = 0; q < m; ++q) {
      if (xa[q] >= n) {
        out[q] = std::numeric_limits<double>::infinity();
        continue;
      }
      const std::size_t i = std::size_t(std::lower_bound(as.begin(), as.end(), xa[q]) - as.begin());
      const double a = std::sqrt(da2[q]), b = std::sqrt(db2[i]);
      out[q] = b > 0 ? a / b : (a == 0 ? 0.0 : std::numeric_limits<double>::infinity());
    }
  }

  /// The training-set index of the nearest same-class training AT of each query (n when none).
  std::vector<std::size_t> nearest_same_class(const double* at, std::size_t stride, const std::size_t* cls, std::size_t m) const {
    std::vector<double> d2(m, std::numeric_limits<double>::infinity());
    std::vector<std::size_t> xa(m, samples());
    for (std::size_t q = 0; q < m; ++q) {
      const double* y = at + q * stride;
      nearest(&y, 1, class_begin[cls[q]], class_begin[cls[q] + 1], &d2, &xa, &q);
    }
    for (auto& i : xa)
      if (i < samples()) i = index[i];
    return xa;
  }

 private:
  std::vector<std::size_t> kept_;
  std::vector<detail::gaussian_kde> kdes_;
  std::vector<double> at_t_;  // dims x samples
  struct dist_b_cache {
    std::mutex mu;
    std::vector<double> d2;  // per row: squared dist_b, NaN until computed
  };
  std::shared_ptr<dist_b_cache> cache_;
  static std::mutex& dummy_mutex() {
    static std::mutex m;
    return m;
  }

  void fit_class(std::size_t c, double kept_var) {
    const std::size_t b = class_begin[c];
    auto x = [&](std::size_t i, std::size_t k) { return ats[(b + i) * dims + kept_[k]]; };
    if (!kdes_[c].fit(class_size(c), kept_.size(), x, ridge, kept_var))
      throw data_error(detail::concat("surprise_model: the KDE covariance of class ", c,
                                      " is not positive definite even with a ridge"));
  }
  /// Updates (best[q], arg[q]) for q = slots[t], t < cnt, with the nearest training AT in rows [j0, j1)
  /// (strictly smaller distance wins: ties keep the earlier row).
  void nearest(const double* const* y, std::size_t cnt, std::size_t j0, std::size_t j1, std::vector<double>* best,
               std::vector<std::size_t>* arg, const std::size_t* slots) const {
    if (j0 >= j1) return;
    detail::sa_sqdist_chunks(y, cnt, dims, at_t_.data(), samples(), j0, j1, [&](std::size_t c0, std::size_t len, const double* acc) {
      for (std::size_t t = 0; t < cnt; ++t) {
        const double* a = acc + t * detail::sa_tile_c;
        double& bd = (*best)[slots[t]];
        std::size_t& ba = (*arg)[slots[t]];
        for (std::size_t j = 0; j < len; ++j)
          if (a[j] < bd) {
            bd = a[j];
            ba = c0 + j;
          }
      }
    });
  }
};

namespace detail {
inline void check_surprise_block(const surprise_model& m, const neuron_block& b, const char* who) {
  if (b.offsets.size() != 3 || b.neurons(0) != m.dims || b.neurons(1) != m.classes)
    throw shape_error(concat(who, ": a block of ", b.width, " neurons per row; the surprise model reads ", m.dims,
                             " AT neurons (layer ", m.layer, ") and ", m.classes, " outputs (layer ", m.output_layer,
                             "): stream its layers()"));
}
/// The ATs and predicted classes of a block's rows.
inline std::vector<std::size_t> surprise_block_classes(const surprise_model& m, const neuron_block& b, const char* who) {
  check_surprise_block(m, b, who);
  std::vector<std::size_t> cls(b.rows);
  for (std::size_t r = 0; r < b.rows; ++r) {
    const double* row = b.row(r);
    for (std::size_t i = 0; i < b.width; ++i) check_finite_neuron(row[i], b, r, i, who);
    cls[r] = sa_argmax(row + b.offset(1), m.classes);
  }
  return cls;
}
}  // namespace detail

/// LSA or DSA of each row of a block streamed for m.layers().
inline std::vector<double> surprise_values(const surprise_model& m, surprise_kind kind, const neuron_block& b,
                                           bool parallel = false) {
  const auto cls = detail::surprise_block_classes(m, b, "surprise_values");
  std::vector<double> out(b.rows);
  if (b.rows == 0) return out;
  if (kind == surprise_kind::lsa)
    m.lsa(b.row(0) + b.offset(0), b.width, cls.data(), b.rows, out.data(), parallel);
  else
    m.dsa(b.row(0) + b.offset(0), b.width, cls.data(), b.rows, out.data(), parallel);
  return out;
}

/// Collects the training ATs of `layer` and fits the KDEs (training set X: [N, input shape...]).
template <class Policy, class Net, class A>
  requires execution::is_execution_policy_v<Policy>
surprise_model prepare_surprise(const Policy& pol, const Net& net, const A& X, std::size_t layer, surprise_options o = {}) {
  check_layer_index(net, layer, "prepare_surprise");
  const std::size_t nl = layer_count(net);
  if (o.output_layer == std::size_t(-1)) o.output_layer = nl - 1;
  check_layer_index(net, o.output_layer, "prepare_surprise (output layer)");
  if (!(o.var_threshold >= 0) || !std::isfinite(o.var_threshold))
    throw value_error(detail::concat("prepare_surprise: var_threshold ", o.var_threshold, " must be finite and >= 0"));
  if (!(o.ridge > 0) || !std::isfinite(o.ridge)) throw value_error(detail::concat("prepare_surprise: ridge ", o.ridge, " must be > 0"));
  const std::size_t n = sample_count(net, X, "prepare_surprise");
  if (n == 0) throw data_error("prepare_surprise: the training set is empty");
  surprise_model m;
  m.fingerprint = detail::model_fingerprint(net);
  m.layer = layer;
  m.output_layer = o.output_layer;
  m.dims = coverage_neurons(shape_at(net, layer + 1));
  m.classes = coverage_neurons(shape_at(net, o.output_layer + 1));
  m.var_threshold = o.var_threshold;
  m.filter = o.filter;
  m.ridge = o.ridge;
  std::vector<double> rows(n * m.dims);
  std::vector<std::size_t> cls(n);
  const std::vector<std::size_t> ls = m.layers();
  stream_neurons(pol, net, std::span<const network_scalar_t<Net>>(X.data(), X.size()), n, ls, [&](const neuron_block& b) {
    const auto c = detail::surprise_block_classes(m, b, "prepare_surprise");
    for (std::size_t r = 0; r < b.rows; ++r) {
      std::copy_n(b.row(r) + b.offset(0), m.dims, rows.data() + (b.first + r) * m.dims);
      cls[b.first + r] = c[r];
    }
  });
  m.class_begin.assign(m.classes + 1, 0);
  for (std::size_t c : cls) ++m.class_begin[c + 1];
  for (std::size_t c = 0; c < m.classes; ++c) m.class_begin[c + 1] += m.class_begin[c];
  m.index.resize(n);
  m.ats.resize(n * m.dims);
  std::vector<std::size_t> pos(m.class_begin.begin(), m.class_begin.end() - 1);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t p = pos[cls[i]]++;
    m.index[p] = i;
    std::copy_n(rows.data() + i * m.dims, m.dims, m.ats.data() + p * m.dims);
  }
  m.fit();
  return m;
}
template <class Net, class A>
  requires(!execution::is_execution_policy_v<Net>)
surprise_model prepare_surprise(const Net& net, const A& X, std::size_t layer, surprise_options o = {}) {
  return execution::with_default_policy(net, [&](const auto& pol) { return prepare_surprise(pol, net, X, layer, o); });
}

namespace detail {
template <class Policy, class Net, class A>
std::vector<double> surprise_values_of(const Policy& pol, const Net& net, const surprise_model& m, const A& X, surprise_kind kind) {
  check_fingerprint(m.fingerprint, model_fingerprint(net), kind == surprise_kind::lsa ? "lsa_values" : "dsa_values");
  const std::size_t n = sample_count(net, X, kind == surprise_kind::lsa ? "lsa_values" : "dsa_values");
  std::vector<double> out(n);
  constexpr bool parallel = execution::is_host_parallel_policy_v<Policy>;
  const std::vector<std::size_t> ls = m.layers();
  stream_neurons(pol, net, std::span<const network_scalar_t<Net>>(X.data(), X.size()), n, ls, [&](const neuron_block& b) {
    const auto v = surprise_values(m, kind, b, parallel);
    std::copy(v.begin(), v.end(), out.begin() + std::ptrdiff_t(b.first));
  });
  return out;
}
}  // namespace detail

/// Per-input LSA of X ([N, input shape...]); m must be of this network (data_error otherwise).
template <class Policy, class Net, class A>
  requires execution::is_execution_policy_v<Policy>
std::vector<double> lsa_values(const Policy& pol, const Net& net, const surprise_model& m, const A& X) {
  return detail::surprise_values_of(pol, net, m, X, surprise_kind::lsa);
}
template <class Net, class A>
  requires(!execution::is_execution_policy_v<Net>)
std::vector<double> lsa_values(const Net& net, const surprise_model& m, const A& X) {
  return execution::with_default_policy(net, [&](const auto& pol) { return detail::surprise_values_of(pol, net, m, X, surprise_kind::lsa); });
}
/// Per-input DSA of X.
template <class Policy, class Net, class A>
  requires execution::is_execution_policy_v<Policy>
std::vector<double> dsa_values(const Policy& pol, const Net& net, const surprise_model& m, const A& X) {
  return detail::surprise_values_of(pol, net, m, X, surprise_kind::dsa);
}
template <class Net, class A>
  requires(!execution::is_execution_policy_v<Net>)
std::vector<double> dsa_values(const Net& net, const surprise_model& m, const A& X) {
  return execution::with_default_policy(net, [&](const auto& pol) { return detail::surprise_values_of(pol, net, m, X, surprise_kind::dsa); });
}

/// Writes the stored part of m as text ("nnlens-coverage-surprise 1"); doubles round-trip exactly.
inline void save_surprise(std::ostream& os, const surprise_model& m) {
  if (m.samples() == 0) throw data_error("save_surprise: the surprise model is empty");
  os << "nnlens-coverage-surprise 1\nfingerprint " << m.fingerprint << "\nlayer " << m.layer << "\noutput_layer "
     << m.output_layer << "\ndims " << m.dims << "\nclasses " << m.classes << "\nvar_threshold ";
  detail::write_doubles(os, std::span<const double>(&m.var_threshold, 1));
  os << "\nfilter " << (m.filter == variance_filter::global ? "global" : "per_class_union") << "\nridge ";
  detail::write_doubles(os, std::span<const double>(&m.ridge, 1));
  os << "\nsamples " << m.samples() << "\nclass_sizes";
  for (std::size_t c = 0; c < m.classes; ++c) os << ' ' << m.class_size(c);
  os << "\n";
  for (std::size_t i = 0; i < m.samples(); ++i) {
    os << "at " << m.index[i] << ' ';
    detail::write_doubles(os, std::span<const double>(m.ats.data() + i * m.dims, m.dims));
    os << '\n';
  }
  detail::end_state(os, "save_surprise");
}

/// Reads a model written by save_surprise, checks it was made on `net` and refits its KDEs.
template <class Net>
surprise_model load_surprise(std::istream& is, const Net& net) {
  detail::cov_text_reader rd(is, "load_surprise", "nnlens-coverage-surprise 1");
  surprise_model m;
  m.fingerprint = rd.u64_value("fingerprint");
  m.layer = std::size_t(rd.u64_value("layer"));
  m.output_layer = std::size_t(rd.u64_value("output_layer"));
  m.dims = std::size_t(rd.u64_value("dims"));
  m.classes = std::size_t(rd.u64_value("classes"));
  m.var_threshold = rd.f64(rd.value("var_threshold"), "var_threshold");
  const std::string f = rd.value("filter");
  if (f == "global") m.filter = variance_filter::global;
  else if (f == "per_class_union") m.filter = variance_filter::per_class_union;
  else throw rd.bad("filter must be global or per_class_union");
  m.ridge = rd.f64(rd.value("ridge"), "ridge");
  if (!(m.ridge > 0) || m.var_threshold < 0) throw rd.bad("ridge must be > 0 and var_threshold >= 0");
  const std::size_t n = std::size_t(rd.u64_value("samples"));
  if (n == 0) throw rd.bad("samples must be > 0");
  detail::check_fingerprint(m.fingerprint, detail::model_fingerprint(net), "load_surprise");
  const std::size_t nl = layer_count(net);
  if (m.layer >= nl || m.output_layer >= nl) throw rd.bad(detail::concat("a layer index is out of range (", nl, " layers)"));
  if (m.dims != coverage_neurons(shape_at(net, m.layer + 1)) || m.classes != coverage_neurons(shape_at(net, m.output_layer + 1)))
    throw data_error("load_surprise: the AT or output width does not match the network");
  if (m.dims == 0 || m.classes == 0) throw rd.bad("empty layers");
  const auto sizes = rd.sizes(rd.value("class_sizes"), m.classes, "class_sizes");
  m.class_begin.assign(m.classes + 1, 0);
  for (std::size_t c = 0; c < m.classes; ++c) m.class_begin[c + 1] = m.class_begin[c] + sizes[c];
  if (m.class_begin.back() != n) throw rd.bad("class_sizes do not add up to samples");
  for (std::size_t i = 0; i < n; ++i) {
    const std::string l = rd.value("at");
    const auto sp = l.find(' ');
    const std::size_t idx = std::size_t(rd.u64(std::string_view(l).substr(0, sp), "the training index"));
    if (idx >= n) throw rd.bad("training index out of range");
    const auto v = rd.doubles(sp == std::string::npos ? std::string_view() : std::string_view(l).substr(sp + 1), m.dims, "at");
    m.index.push_back(idx);
    m.ats.insert(m.ats.end(), v.begin(), v.end());
  }
  rd.end();
  std::vector<std::size_t> sorted = m.index;
  std::sort(sorted.begin(), sorted.end());
  for (std::size_t i = 0; i < n; ++i)
    if (sorted[i] != i) throw data_error("load_surprise: the training indices are not 0..samples-1 (repeated index)");
  m.fit();
  return m;
}

}  // namespace nnlens
