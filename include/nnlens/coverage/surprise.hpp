// nnlens/coverage/surprise.hpp -- Surprise Adequacy (Kim et al., ICSE 2019) and its coverage
// criteria LSC and DSC, as baselines of IDC (docs/specs/deepimportance.md#3-hyperparameters, docs/specs/deepimportance.md#7-baselines).
//
//   (the preparation, LSA and DSA: coverage/surprise_model.hpp, included here)
//   lsc_criterion lsc(m, {.buckets = 1000, .lower = 0, .upper = 2000})   LSC (a CoverageCriterion)
//   dsc_criterion dsc(m, {.buckets = 1000, .lower = 0, .upper = 2})      DSC
//   lsc.range().in_range_fraction()   the share of the inputs fed whose LSA fell inside [lower, upper]
//   reference_surprise_range(lsa_values(net, m, X), surprise_kind::lsa)  the reference code's range
//                           for the target set X: lower = min LSA of X (see the note below)
//
// Coverage: K equal buckets on [lower, upper]; a value v inside covers bucket
// min(floor((v - lower) / (upper - lower) * K), K - 1); values outside are ignored (the spec's
// proposal) unless count_overflow, which adds a "below" and an "above" bucket (total K + 2).
// Note: LSA is minus a log-density, which is negative wherever the density exceeds 1 (common with
// tens of dimensions: on the project's LeNet-5 / Fashion-MNIST penultimate layer, surprise model on
// 5,000 training images, 57.5% of the test set's LSA is below 0, min -53.8, median -3.5; docs/
// deepimportance-study.md), so with lower = 0 those inputs cover nothing.  The default range stays [0, U] (the spec's
// proposal, §7), but it is never silent: range() counts the inputs fed that fell below, inside and
// above [lower, upper] (range().in_range_fraction(); a report of LSC should print it beside the
// percentage).  The reference code's reading (L = the minimum SA of the target set) is
//   lsc_criterion lsc(m, reference_surprise_range(lsa_values(net, m, X_target), surprise_kind::lsa));
// Errors: value_error for buckets = 0 and lower >= upper; data_error for merging criteria of
// different preparations.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <memory>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "nnlens/core/error.hpp"
#include "nnlens/coverage/activations.hpp"
#include "nnlens/coverage/covered_set.hpp"
#include "nnlens/coverage/criterion.hpp"
#include "nnlens/coverage/surprise_model.hpp"

namespace nnlens {

struct surprise_coverage_options {
  std::size_t buckets = 1000;
  double lower = 0;
  double upper = 0;             // 0: the kind's default (2000 for LSA, 2 for DSA)
  bool count_overflow = false;  // add a "below lower" and an "above upper" bucket (np.digitize-like)
  bool parallel = true;         // split add()'s queries over the thread pool
};

/// Where the values fed to a surprise coverage fell against its range [lower, upper].
struct surprise_range_counts {
  std::size_t inputs = 0;                                   // values fed (one per input)
  std::size_t below = 0, in_range = 0, above = 0, nan = 0;  // inputs = below + in_range + above + nan
  /// in_range / inputs (0 before any input): the share of inputs that can cover a bucket.
  double in_range_fraction() const { return inputs ? double(in_range) / double(inputs) : 0.0; }
};

/// The default upper bound of a surprise kind (LSA 2000, DSA 2: spec §3).
constexpr double default_surprise_upper(surprise_kind k) { return k == surprise_kind::lsa ? 2000.0 : 2.0; }

/// The reference code's bucket range for a target set (SA reference code, `get_sc(lower, upper, k, sa)`
/// with lower = np.amin(target_sa)): lower = the smallest finite value of target_sa, upper = the
/// given one (0: the kind's default), `buckets` buckets.
/// throws: value_error when target_sa has no finite value or its minimum is not below upper.
inline surprise_coverage_options reference_surprise_range(std::span<const double> target_sa, surprise_kind kind,
                                                          double upper = 0, std::size_t buckets = 1000) {
  const double u = upper == 0 ? default_surprise_upper(kind) : upper;
  double lo = std::numeric_limits<double>::infinity();
  for (double v : target_sa)
    if (std::isfinite(v)) lo = std::min(lo, v);
  const char* what = kind == surprise_kind::lsa ? "LSA" : "DSA";
  if (!std::isfinite(lo))
    throw value_error(detail::concat("reference_surprise_range: none of the ", target_sa.size(), " target ", what, " values is finite"));
  if (!(lo < u))
    throw value_error(detail::concat("reference_surprise_range: the smallest target ", what, " (", lo, ") is not below the upper bound ", u));
  surprise_coverage_options o;
  o.buckets = buckets, o.lower = lo, o.upper = u;
  return o;
}

/// Surprise coverage: the buckets of [lower, upper] that some input's LSA (or DSA) falls in;
/// range() says how many of the inputs fed fell inside the range at all.
template <surprise_kind Kind>
class surprise_coverage {
 public:
  surprise_coverage() = default;
  explicit surprise_coverage(std::shared_ptr<const surprise_model> m, surprise_coverage_options o = {}) : m_(std::move(m)), o_(o) {
    const char* who = Kind == surprise_kind::lsa ? "lsc_criterion" : "dsc_criterion";
    if (!m_) throw value_error(detail::concat(who, ": no surprise model"));
    if (m_->samples() == 0) throw data_error(detail::concat(who, ": the surprise model is empty"));
    if (o_.upper == 0 && o_.lower == 0) o_.upper = default_surprise_upper(Kind);
    if (o_.buckets == 0) throw value_error(detail::concat(who, ": buckets must be >= 1"));
    if (!(o_.lower < o_.upper) || !std::isfinite(o_.lower) || !std::isfinite(o_.upper))
      throw value_error(detail::concat(who, ": the bucket range [", o_.lower, ", ", o_.upper, "] is empty or not finite"));
    covered_ = detail::cov_bitset(o_.buckets + (o_.count_overflow ? 2 : 0));
  }
  explicit surprise_coverage(const surprise_model& m, surprise_coverage_options o = {})
      : surprise_coverage(std::make_shared<const surprise_model>(m), o) {}

  std::vector<std::size_t> layers() const { return m_ ? m_->layers() : std::vector<std::size_t>{}; }
  std::string_view name() const { return Kind == surprise_kind::lsa ? "lsc" : "dsc"; }
  const surprise_model& model() const { return *m_; }
  const surprise_coverage_options& options() const { return o_; }
  const detail::cov_bitset& covered() const { return covered_; }
  /// How the values fed so far fell against [lower, upper] (summed over merged states).
  const surprise_range_counts& range() const { return range_; }

  /// The bucket of value v: buckets() for "below", buckets() + 1 for "above" (only counted with
  /// count_overflow), std::size_t(-1) for NaN.
  std::size_t bucket(double v) const {
    if (std::isnan(v)) return std::size_t(-1);
    if (v < o_.lower) return o_.buckets;
    if (v > o_.upper) return o_.buckets + 1;
    const double s = (v - o_.lower) / (o_.upper - o_.lower) * double(o_.buckets);
    return std::min(std::size_t(s), o_.buckets - 1);
  }
  void add(const neuron_block& b) {
    for (double v : surprise_values(*m_, Kind, b, o_.parallel)) {
      const std::size_t k = bucket(v);
      ++range_.inputs;
      if (k < o_.buckets) ++range_.in_range;
      else if (k == o_.buckets) ++range_.below;
      else if (k == o_.buckets + 1) ++range_.above;
      else ++range_.nan;
      if (k < o_.buckets || (o_.count_overflow && k < o_.buckets + 2)) covered_.set(k);
    }
  }
  coverage_result result() const { return make_coverage_result(covered_.count(), covered_.bits); }
  void merge(const surprise_coverage& o) {
    if (!(m_ == o.m_ || (m_ && o.m_ && m_->same_preparation(*o.m_))) || o.o_.buckets != o_.buckets ||
        o.o_.lower != o_.lower || o.o_.upper != o_.upper || o.o_.count_overflow != o_.count_overflow)
      throw data_error(detail::concat(name(), "::merge: criteria of different surprise models or buckets"));
    covered_.merge(o.covered_);
    range_.inputs += o.range_.inputs, range_.below += o.range_.below, range_.in_range += o.range_.in_range;
    range_.above += o.range_.above, range_.nan += o.range_.nan;
  }
  void reset() { covered_.clear(), range_ = {}; }

 private:
  std::shared_ptr<const surprise_model> m_;
  surprise_coverage_options o_;
  detail::cov_bitset covered_;
  surprise_range_counts range_;
};

using lsc_criterion = surprise_coverage<surprise_kind::lsa>;
using dsc_criterion = surprise_coverage<surprise_kind::dsa>;
static_assert(CoverageCriterion<lsc_criterion> && CoverageCriterion<dsc_criterion>);

}  // namespace nnlens
