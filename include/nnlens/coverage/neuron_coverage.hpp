// nnlens/coverage/neuron_coverage.hpp -- the neuron-level baselines IDC is compared with
// (docs/specs/deepimportance.md#3-hyperparameters, docs/specs/deepimportance.md#7-baselines): DeepXplore's NC, DeepGauge's KMNC, NBC, SNAC and TKNC.
//
//   nc_criterion   nc(net, {.threshold = 0.75, .layers = {}})    NC: per input and layer, min-max
//                                              scale the layer's neurons to [0,1] (a constant layer
//                                              scales to 0); a neuron is covered once scaled > t
//   tknc_criterion tk(net, {.k = 3, .layers = {}})               TKNC: per input and layer the k
//                                              largest neurons (ties: the lower index); |union| / N
//   auto b = prepare_neuron_bounds([policy,] net, Xtrain[, layers])   per-neuron [low, high] over
//                                              the training set (streamed; mergeable; shared below)
//   kmnc_criterion km(b, 1000)                 KMNC: k equal sections of [low, high]; only values in
//                                              [low, high] count, high belongs to the last section;
//                                              covered (neuron, section) pairs / (k N)
//   nbc_criterion  nb(b)                       NBC: (#{some value > high} + #{some value < low}) / 2N
//   snac_criterion sn(b)                       SNAC: #{some value > high} / N
//   save_neuron_bounds(os, b) / load_neuron_bounds(is, net)   text "nnlens-coverage-bounds 1"
//
// Each criterion is a CoverageCriterion (criterion.hpp): feed it with measure([policy,] net, X, c)
// or with add(block) on blocks streamed for its layers(); merge() ORs two covered sets.
// Layers: by default every coverage_layers(net) (all top-level layers except Flatten: pooling and
// the output included, as the reference code); `layers` chooses others.  A conv layer's neuron is a
// channel (its spatial mean), as in activations.hpp.
//
// Choices where the spec is silent:
//  - KMNC, a neuron with low == high (constant over the training set): its range is the single point
//    low; a value equal to low covers its section 0 and nothing else can, so it still counts k
//    sections in the total (the spec's k N) and contributes at most 1 of them.  NBC/SNAC treat it
//    like any other neuron (a value above high is a corner case).
//  - KMNC section of v in [low, high]: floor((v - low) / (high - low) * k), clamped to k - 1.
//  - TKNC with a layer of fewer than k neurons: all its neurons are its top-k.
//  - NC on a conv layer scales the channel means (the neurons activations.hpp streams).  DeepXplore's
//    and DeepImportance's code scale the whole feature map element-wise and then average each
//    channel; the two readings differ on conv layers only.
//  - NaN/Inf neuron values: value_error (bounds and every criterion).
// Errors: value_error for a threshold outside (0,1), k = 0, a layer index out of range or a
// non-finite neuron; data_error for an empty training set, bounds of another model (on load),
// and merging criteria of different preparations; shape_error for a block of other layers.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <istream>
#include <limits>
#include <memory>
#include <numeric>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "nnlens/core/error.hpp"
#include "nnlens/core/execution.hpp"
#include "nnlens/coverage/activations.hpp"
#include "nnlens/coverage/covered_set.hpp"
#include "nnlens/coverage/criterion.hpp"
#include "nnlens/coverage/state_file.hpp"
#include "nnlens/network/fingerprint.hpp"

namespace nnlens {

// =================================================================================================
// neuron bounds: the preparation of KMNC, NBC and SNAC
// =================================================================================================

/// Per-neuron [low, high] over a training set (min/max of each neuron's values).  A value:
/// add() more blocks, merge() two halves; low/high are +inf/-inf before the first sample.
struct neuron_bounds {
  std::uint64_t fingerprint = 0;   // detail::model_fingerprint of the network
  detail::cov_layer_set cols;      // the layers and their columns
  std::vector<double> low, high;   // per neuron (column)
  std::size_t samples = 0;

  std::vector<std::size_t> layers() const { return cols.layers; }
  std::size_t neurons() const { return low.size(); }

  void add(const neuron_block& b) {
    detail::for_each_neuron_value(b, cols, "neuron_bounds", [&](std::size_t i, double v) {
      low[i] = std::min(low[i], v);
      high[i] = std::max(high[i], v);
    });
    samples += b.rows;
  }
  /// Union of the two sets of samples (same model and layers, else data_error).
  void merge(const neuron_bounds& o) {
    if (o.fingerprint != fingerprint || !(o.cols == cols))
      throw data_error("merge(neuron_bounds): bounds of different models or layers");
    for (std::size_t i = 0; i < low.size(); ++i) {
      low[i] = std::min(low[i], o.low[i]);
      high[i] = std::max(high[i], o.high[i]);
    }
    samples += o.samples;
  }
  /// data_error unless these bounds were made on `net`.
  template <class Net>
  void check_compatible(const Net& net) const {
    detail::check_fingerprint(fingerprint, detail::model_fingerprint(net), "neuron_bounds");
  }
  bool operator==(const neuron_bounds&) const = default;
};

inline neuron_bounds merge(neuron_bounds a, const neuron_bounds& b) {
  a.merge(b);
  return a;
}

/// Empty bounds (no sample yet) for `layers` of net (empty: every coverage layer).
template <class Net>
neuron_bounds make_neuron_bounds(const Net& net, std::vector<std::size_t> layers = {}) {
  neuron_bounds b;
  b.fingerprint = detail::model_fingerprint(net);
  b.cols = detail::resolve_cov_layers(net, std::move(layers), "neuron_bounds");
  b.low.assign(b.cols.width(), std::numeric_limits<double>::infinity());
  b.high.assign(b.cols.width(), -std::numeric_limits<double>::infinity());
  return b;
}

/// Per-neuron min/max of net's neurons over the training set X ([N, input shape...]).
template <class Policy, class Net, class A>
  requires execution::is_execution_policy_v<Policy>
neuron_bounds prepare_neuron_bounds(const Policy& pol, const Net& net, const A& X, std::vector<std::size_t> layers = {}) {
  neuron_bounds b = make_neuron_bounds(net, std::move(layers));
  const std::size_t n = sample_count(net, X, "prepare_neuron_bounds");
  if (n == 0) throw data_error("prepare_neuron_bounds: the training set is empty");
  stream_neurons(pol, net, std::span<const network_scalar_t<Net>>(X.data(), X.size()), n, b.cols.layers,
                 [&](const neuron_block& blk) { b.add(blk); });
  return b;
}
template <class Net, class A>
  requires(!execution::is_execution_policy_v<Net>)
neuron_bounds prepare_neuron_bounds(const Net& net, const A& X, std::vector<std::size_t> layers = {}) {
  return execution::with_default_policy(net, [&](const auto& pol) { return prepare_neuron_bounds(pol, net, X, std::move(layers)); });
}

/// Writes b as text ("nnlens-coverage-bounds 1"); every double round-trips exactly.
inline void save_neuron_bounds(std::ostream& os, const neuron_bounds& b) {
  if (b.samples == 0) throw data_error("save_neuron_bounds: the bounds have no sample");
  os << "nnlens-coverage-bounds 1\nfingerprint " << b.fingerprint << "\nsamples " << b.samples << "\nlayers "
     << b.cols.count();
  for (std::size_t l : b.cols.layers) os << ' ' << l;
  os << "\nneurons";
  for (std::size_t k = 0; k < b.cols.count(); ++k) os << ' ' << b.cols.offsets[k + 1] - b.cols.offsets[k];
  os << "\nlow ";
  detail::write_doubles(os, b.low);
  os << "\nhigh ";
  detail::write_doubles(os, b.high);
  os << '\n';
  detail::end_state(os, "save_neuron_bounds");
}

/// Reads bounds written by save_neuron_bounds and checks they were made on `net` (data_error naming
/// the mismatch or the bad line otherwise).
template <class Net>
neuron_bounds load_neuron_bounds(std::istream& is, const Net& net) {
  detail::cov_text_reader rd(is, "load_neuron_bounds", "nnlens-coverage-bounds 1");
  neuron_bounds b;
  b.fingerprint = rd.u64_value("fingerprint");
  b.samples = std::size_t(rd.u64_value("samples"));
  if (b.samples == 0) throw rd.bad("samples must be > 0");
  const std::string ls = rd.value("layers");
  const std::size_t sp = ls.find(' ');
  const std::size_t nl = std::size_t(rd.u64(std::string_view(ls).substr(0, sp), "the layer count"));
  if (nl == 0 || nl > 100000) throw rd.bad("bad layer count");
  const auto layers = rd.sizes(sp == std::string::npos ? std::string_view() : std::string_view(ls).substr(sp + 1), nl, "layers");
  const auto counts = rd.sizes(rd.value("neurons"), nl, "neurons");
  detail::check_fingerprint(b.fingerprint, detail::model_fingerprint(net), "load_neuron_bounds");
  for (std::size_t l : layers)
    if (l >= layer_count(net)) throw rd.bad(detail::concat("layer index ", l, " out of range"));
  b.cols = detail::resolve_cov_layers(net, layers, "load_neuron_bounds");
  for (std::size_t k = 0; k < nl; ++k)
    if (b.cols.offsets[k + 1] - b.cols.offsets[k] != counts[k])
      throw data_error(detail::concat("load_neuron_bounds: layer ", layers[k], " has ", counts[k], " neurons in the file, ",
                              b.cols.offsets[k + 1] - b.cols.offsets[k], " in the network"));
  b.low = rd.doubles(rd.value("low"), b.cols.width(), "low");
  b.high = rd.doubles(rd.value("high"), b.cols.width(), "high");
  for (std::size_t i = 0; i < b.low.size(); ++i)
    if (!(b.low[i] <= b.high[i])) throw rd.bad(detail::concat("neuron ", i, ": low > high"));
  rd.end();
  return b;
}

namespace detail {
/// What NC and TKNC share: the model they were made for, the layers they read and one covered bit
/// per neuron of those layers.
class layerwise_coverage {
 public:
  std::vector<std::size_t> layers() const { return cols_.layers; }
  const cov_bitset& covered() const { return covered_; }
  coverage_result result() const { return make_coverage_result(covered_.count(), covered_.bits); }
  void reset() { covered_.clear(); }

 protected:
  layerwise_coverage() = default;
  explicit layerwise_coverage(std::uint64_t fingerprint) : fingerprint_(fingerprint) {}
  template <class Net>
  void set_layers(const Net& net, std::vector<std::size_t> layers, const char* who) {
    cols_ = resolve_cov_layers(net, std::move(layers), who);
    covered_ = cov_bitset(cols_.width());
  }
  /// ORs o's covered set into this one; data_error(what) unless both read the same layers of the
  /// same model and same_parameters.
  void merge_covered(const layerwise_coverage& o, bool same_parameters, const char* what) {
    if (o.fingerprint_ != fingerprint_ || !(o.cols_ == cols_) || !same_parameters) throw data_error(what);
    covered_.merge(o.covered_);
  }

  std::uint64_t fingerprint_ = 0;
  cov_layer_set cols_;
  cov_bitset covered_;
};
}  // namespace detail

// =================================================================================================
// NC
// =================================================================================================

struct nc_options {
  double threshold = 0.75;          // covered once the scaled value is > threshold, in (0, 1)
  std::vector<std::size_t> layers{};  // empty: every coverage layer
};

/// DeepXplore's neuron coverage.
class nc_criterion : public detail::layerwise_coverage {
 public:
  nc_criterion() = default;
  template <class Net>
  explicit nc_criterion(const Net& net, nc_options o = {})
      : layerwise_coverage(detail::model_fingerprint(net)), threshold_(o.threshold) {
    if (!(o.threshold > 0 && o.threshold < 1))
      throw value_error(detail::concat("nc_criterion: threshold ", o.threshold, " is outside (0, 1)"));
    set_layers(net, std::move(o.layers), "nc_criterion");
  }
  std::string_view name() const { return "nc"; }
  double threshold() const { return threshold_; }

  void add(const neuron_block& b) {
    detail::check_cov_block(b, cols_, "nc_criterion");
    for (std::size_t r = 0; r < b.rows; ++r) {
      const double* row = b.row(r);
      for (std::size_t k = 0; k < cols_.count(); ++k) {
        const std::size_t o0 = cols_.offsets[k], o1 = cols_.offsets[k + 1];
        double mn = std::numeric_limits<double>::infinity(), mx = -mn;
        for (std::size_t i = o0; i < o1; ++i) {
          detail::check_finite_neuron(row[i], b, r, i, "nc_criterion");
          mn = std::min(mn, row[i]);
          mx = std::max(mx, row[i]);
        }
        if (!(mx > mn)) continue;  // a constant layer scales to 0: nothing above a threshold > 0
        for (std::size_t i = o0; i < o1; ++i)
          if ((row[i] - mn) / (mx - mn) > threshold_) covered_.set(i);
      }
    }
  }
  void merge(const nc_criterion& o) {
    merge_covered(o, o.threshold_ == threshold_, "nc_criterion::merge: criteria of different models, layers or thresholds");
  }

 private:
  double threshold_ = 0.75;
};

// =================================================================================================
// TKNC
// =================================================================================================

struct tknc_options {
  std::size_t k = 3;                // neurons per layer and input, >= 1
  std::vector<std::size_t> layers{};  // empty: every coverage layer
};

/// DeepGauge's top-k neuron coverage.
class tknc_criterion : public detail::layerwise_coverage {
 public:
  tknc_criterion() = default;
  template <class Net>
  explicit tknc_criterion(const Net& net, tknc_options o = {}) : layerwise_coverage(detail::model_fingerprint(net)), k_(o.k) {
    if (o.k == 0) throw value_error("tknc_criterion: k must be >= 1");
    set_layers(net, std::move(o.layers), "tknc_criterion");
  }
  std::string_view name() const { return "tknc"; }
  std::size_t k() const { return k_; }

  void add(const neuron_block& b) {
    detail::check_cov_block(b, cols_, "tknc_criterion");
    std::vector<std::size_t> idx;
    for (std::size_t r = 0; r < b.rows; ++r) {
      const double* row = b.row(r);
      for (std::size_t k = 0; k < cols_.count(); ++k) {
        const std::size_t o0 = cols_.offsets[k], o1 = cols_.offsets[k + 1];
        idx.resize(o1 - o0);
        for (std::size_t i = o0; i < o1; ++i) {
          detail::check_finite_neuron(row[i], b, r, i, "tknc_criterion");
          idx[i - o0] = i;
        }
        const std::size_t top = std::min(k_, idx.size());
        std::partial_sort(idx.begin(), idx.begin() + std::ptrdiff_t(top), idx.end(), [&](std::size_t a, std::size_t c) {
          return row[a] > row[c] || (row[a] == row[c] && a < c);
        });
        for (std::size_t t = 0; t < top; ++t) covered_.set(idx[t]);
      }
    }
  }
  void merge(const tknc_criterion& o) {
    merge_covered(o, o.k_ == k_, "tknc_criterion::merge: criteria of different models, layers or k");
  }

 private:
  std::size_t k_ = 3;
};

// =================================================================================================
// KMNC, NBC, SNAC: criteria over shared neuron bounds
// =================================================================================================

namespace detail {
inline std::shared_ptr<const neuron_bounds> checked_bounds(std::shared_ptr<const neuron_bounds> b, const char* who) {
  if (!b) throw value_error(concat(who, ": no neuron bounds"));
  if (b->samples == 0 || b->low.empty())
    throw data_error(concat(who, ": the neuron bounds are empty (prepared on an empty training set?)"));
  return b;
}
inline bool same_bounds(const std::shared_ptr<const neuron_bounds>& a, const std::shared_ptr<const neuron_bounds>& b) {
  return a == b || (a && b && *a == *b);
}
}  // namespace detail

/// DeepGauge's k-multisection neuron coverage.
class kmnc_criterion {
 public:
  kmnc_criterion() = default;
  explicit kmnc_criterion(std::shared_ptr<const neuron_bounds> b, std::size_t k = 1000)
      : b_(detail::checked_bounds(std::move(b), "kmnc_criterion")), k_(k) {
    if (k == 0) throw value_error("kmnc_criterion: k (sections per neuron) must be >= 1");
    covered_ = detail::cov_bitset(b_->neurons() * k_);
  }
  explicit kmnc_criterion(const neuron_bounds& b, std::size_t k = 1000)
      : kmnc_criterion(std::make_shared<const neuron_bounds>(b), k) {}
  std::vector<std::size_t> layers() const { return b_ ? b_->layers() : std::vector<std::size_t>{}; }
  std::string_view name() const { return "kmnc"; }
  std::size_t k() const { return k_; }
  const neuron_bounds& bounds() const { return *b_; }
  const detail::cov_bitset& covered() const { return covered_; }

  /// The section of value v of neuron i, or k when v is outside [low, high].
  std::size_t section(std::size_t i, double v) const {
    const double lo = b_->low[i], hi = b_->high[i];
    if (!(v >= lo && v <= hi)) return k_;
    if (!(hi > lo)) return 0;
    const double s = (v - lo) / (hi - lo) * double(k_);
    return std::min(std::size_t(s), k_ - 1);
  }
  void add(const neuron_block& b) {
    detail::for_each_neuron_value(b, b_->cols, "kmnc_criterion", [&](std::size_t i, double v) {
      const std::size_t s = section(i, v);
      if (s < k_) covered_.set(i * k_ + s);
    });
  }
  coverage_result result() const { return make_coverage_result(covered_.count(), covered_.bits); }
  void merge(const kmnc_criterion& o) {
    if (o.k_ != k_ || !detail::same_bounds(b_, o.b_))
      throw data_error("kmnc_criterion::merge: criteria of different neuron bounds or k");
    covered_.merge(o.covered_);
  }
  void reset() { covered_.clear(); }

 private:
  std::shared_ptr<const neuron_bounds> b_;
  std::size_t k_ = 1000;
  detail::cov_bitset covered_;
};

/// DeepGauge's boundary coverage (upper and lower corner regions).
class nbc_criterion {
 public:
  nbc_criterion() = default;
  explicit nbc_criterion(std::shared_ptr<const neuron_bounds> b)
      : b_(detail::checked_bounds(std::move(b), "nbc_criterion")), upper_(b_->neurons()), lower_(b_->neurons()) {}
  explicit nbc_criterion(const neuron_bounds& b) : nbc_criterion(std::make_shared<const neuron_bounds>(b)) {}
  std::vector<std::size_t> layers() const { return b_ ? b_->layers() : std::vector<std::size_t>{}; }
  std::string_view name() const { return "nbc"; }
  const neuron_bounds& bounds() const { return *b_; }
  const detail::cov_bitset& upper() const { return upper_; }  // neurons seen above high
  const detail::cov_bitset& lower() const { return lower_; }  // neurons seen below low

  void add(const neuron_block& b) {
    detail::for_each_neuron_value(b, b_->cols, "nbc_criterion", [&](std::size_t i, double v) {
      if (v > b_->high[i]) upper_.set(i);
      if (v < b_->low[i]) lower_.set(i);
    });
  }
  coverage_result result() const { return make_coverage_result(upper_.count() + lower_.count(), 2 * upper_.bits); }
  void merge(const nbc_criterion& o) {
    if (!detail::same_bounds(b_, o.b_)) throw data_error("nbc_criterion::merge: criteria of different neuron bounds");
    upper_.merge(o.upper_);
    lower_.merge(o.lower_);
  }
  void reset() {
    upper_.clear();
    lower_.clear();
  }

 private:
  std::shared_ptr<const neuron_bounds> b_;
  detail::cov_bitset upper_, lower_;
};

/// DeepGauge's strong neuron activation coverage (the upper corner region only).
class snac_criterion {
 public:
  snac_criterion() = default;
  explicit snac_criterion(std::shared_ptr<const neuron_bounds> b)
      : b_(detail::checked_bounds(std::move(b), "snac_criterion")), upper_(b_->neurons()) {}
  explicit snac_criterion(const neuron_bounds& b) : snac_criterion(std::make_shared<const neuron_bounds>(b)) {}
  std::vector<std::size_t> layers() const { return b_ ? b_->layers() : std::vector<std::size_t>{}; }
  std::string_view name() const { return "snac"; }
  const neuron_bounds& bounds() const { return *b_; }
  const detail::cov_bitset& upper() const { return upper_; }

  void add(const neuron_block& b) {
    detail::for_each_neuron_value(b, b_->cols, "snac_criterion", [&](std::size_t i, double v) {
      if (v > b_->high[i]) upper_.set(i);
    });
  }
  coverage_result result() const { return make_coverage_result(upper_.count(), upper_.bits); }
  void merge(const snac_criterion& o) {
    if (!detail::same_bounds(b_, o.b_)) throw data_error("snac_criterion::merge: criteria of different neuron bounds");
    upper_.merge(o.upper_);
  }
  void reset() { upper_.clear(); }

 private:
  std::shared_ptr<const neuron_bounds> b_;
  detail::cov_bitset upper_;
};

static_assert(CoverageCriterion<nc_criterion> && CoverageCriterion<tknc_criterion> && CoverageCriterion<kmnc_criterion> &&
              CoverageCriterion<nbc_criterion> && CoverageCriterion<snac_criterion>);

}  // namespace nnlens
