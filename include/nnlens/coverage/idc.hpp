// nnlens/coverage/idc.hpp -- DeepImportance's importance-driven coverage (IDC;
// docs/specs/deepimportance.md#23-clustering-the-important-neurons (§2.3-§2.5)).
//
//   idc c = prepare_idc([policy,] net, X_train, y_train, {.m = 6});
//                        T' = the correctly classified training inputs; the m most relevant
//                        neurons of the subject layer (importance.hpp); each clustered by
//                        cluster_neuron (kmeans1d.hpp: exact 1-D k-means, k in {2,3,4} by silhouette,
//                        the reference code's options on by default)
//   measure([policy,] net, X_test, c)   covers the INCC elements X_test maps to; c.result()
//   c.add(block) / merge(a, b) / c.reset()      the CoverageCriterion interface (criterion.hpp)
//   save_idc(os, c) / load_idc(is[, net])       the prepared state and the covered set
//
// INCC = Π_n centroids_n; an input maps to the INCC element nearest to its vector of important
// activations (Euclidean), which, the distance being separable, is the nearest centroid of each
// neuron on its own (ties to the lower centroid, §2.4).  A combination is a mixed-radix integer
// while |INCC| fits in 64 bits, else a tuple.  IDC = |covered| / |INCC| × 100.  result().total is
// |INCC| up to 2^64 - 1; past that it is SIZE_MAX and total_capped() is true (incc_exact() gives
// the count as a decimal string).
// Errors: value_error for m = 0 or m larger than the layer, a layer out of range; data_error for an
// empty training set, merging states of different preparations, a state file of another model,
// and a malformed state file (naming the line).
#pragma once

#include <cmath>
#include <cstdint>
#include <istream>
#include <limits>
#include <ostream>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "nnlens/core/error.hpp"
#include "nnlens/coverage/activations.hpp"
#include "nnlens/coverage/criterion.hpp"
#include "nnlens/coverage/importance.hpp"
#include "nnlens/coverage/kmeans1d.hpp"

namespace nnlens {

struct idc_options {
  std::size_t layer = std::size_t(-1);  // subject layer; npos: subject_layer(net)
  std::size_t m = 6;                    // important neurons
  importance_options importance{};      // its layer is ignored (the subject layer above)
  cluster_options clusters{};
};

class idc {
 public:
  idc() = default;
  /// From explicit parts: `width` neurons in `layer`, the important ones and their centroids
  /// (each list sorted ascending and non-empty).
  idc(std::size_t layer, std::size_t width, std::vector<std::size_t> neurons, std::vector<std::vector<double>> centroids,
      std::uint64_t fingerprint = 0)
      : layer_(layer), width_(width), neurons_(std::move(neurons)), centroids_(std::move(centroids)), fingerprint_(fingerprint) {
    init();
  }

  // -- CoverageCriterion
  std::vector<std::size_t> layers() const { return {layer_}; }
  std::string_view name() const { return "idc"; }
  void add(const neuron_block& b) {
    if (b.width != width_)
      throw shape_error("idc: a block of " + std::to_string(b.width) + " neurons per row, the subject layer has " +
                        std::to_string(width_));
    std::vector<std::uint16_t> key(neurons_.size());
    for (std::size_t r = 0; r < b.rows; ++r) {
      const double* row = b.row(r);
      if (small_) {
        std::uint64_t code = 0;
        for (std::size_t q = 0; q < neurons_.size(); ++q) code = code * centroids_[q].size() + nearest(q, row[neurons_[q]]);
        codes_.insert(code);
      } else {
        for (std::size_t q = 0; q < neurons_.size(); ++q) key[q] = std::uint16_t(nearest(q, row[neurons_[q]]));
        tuples_.insert(key);
      }
    }
  }
  coverage_result result() const {
    coverage_result r;
    r.covered = covered();
    // |INCC| >= 2^64 does not fit: total is then SIZE_MAX and total_capped() says so.  (`<`, not `<=`:
    // double(SIZE_MAX) rounds up to 2^64, and converting 2^64 to size_t is undefined.)
    r.total = total_capped() ? std::numeric_limits<std::size_t>::max() : std::size_t(incc_);
    r.percent = incc_ > 0 ? 100.0 * double(r.covered) / incc_ : 0.0;
    return r;
  }
  void merge(const idc& o) {
    if (o.layer_ != layer_ || o.width_ != width_ || o.neurons_ != neurons_ || o.centroids_ != centroids_ || o.fingerprint_ != fingerprint_)
      throw data_error("idc: merging coverage states of different preparations (layer, neurons, centroids or model)");
    codes_.insert(o.codes_.begin(), o.codes_.end());
    tuples_.insert(o.tuples_.begin(), o.tuples_.end());
  }
  void reset() { codes_.clear(), tuples_.clear(); }

  // -- what was prepared
  std::size_t layer() const { return layer_; }
  std::size_t width() const { return width_; }
  const std::vector<std::size_t>& neurons() const { return neurons_; }
  const std::vector<std::vector<double>>& centroids() const { return centroids_; }
  /// |INCC| (a double: it can exceed 2^64 for large m).
  double incc_size() const { return incc_; }
  /// Whether |INCC| >= 2^64, so that result().total (SIZE_MAX) is a cap, not the count.
  bool total_capped() const { return !(incc_ < double(std::numeric_limits<std::size_t>::max())); }
  /// |INCC| exactly, in decimal ("18446744073709551616" for 64 neurons of 2 clusters); past 400
  /// digits, "about 1.2e+500" from the sum of the logarithms.
  std::string incc_exact() const {
    std::vector<std::uint32_t> limbs{1};  // base 1e9, least significant first
    double log10_sum = 0;
    for (const auto& c : centroids_) log10_sum += std::log10(double(c.size()));
    if (centroids_.empty()) return "0";
    if (log10_sum > 400) {
      const double e = std::floor(log10_sum);
      return detail::concat("about ", std::pow(10.0, log10_sum - e), "e+", std::uint64_t(e));
    }
    for (const auto& c : centroids_) {
      std::uint64_t carry = 0;
      for (auto& l : limbs) {
        const std::uint64_t v = std::uint64_t(l) * c.size() + carry;
        l = std::uint32_t(v % 1000000000u), carry = v / 1000000000u;
      }
      if (carry) limbs.push_back(std::uint32_t(carry));
    }
    std::string s = std::to_string(limbs.back());
    for (std::size_t i = limbs.size() - 1; i-- > 0;) {
      const std::string d = std::to_string(limbs[i]);
      s += std::string(9 - d.size(), '0') + d;
    }
    return s;
  }
  std::size_t covered() const { return small_ ? codes_.size() : tuples_.size(); }
  std::uint64_t fingerprint() const { return fingerprint_; }
  /// Relevance scores of every neuron of the layer (from preparation; empty for a hand-made idc).
  const std::vector<double>& scores() const { return scores_; }
  std::size_t training_inputs() const { return training_inputs_; }
  /// The INCC element of one row of the layer's neurons: per important neuron, its centroid index.
  std::vector<std::size_t> combination(const double* row) const {
    std::vector<std::size_t> c(neurons_.size());
    for (std::size_t q = 0; q < neurons_.size(); ++q) c[q] = nearest(q, row[neurons_[q]]);
    return c;
  }
  /// Every covered combination (as centroid indices), sorted.
  std::vector<std::vector<std::size_t>> covered_combinations() const {
    std::vector<std::vector<std::size_t>> r;
    if (small_) {
      std::vector<std::uint64_t> cs(codes_.begin(), codes_.end());
      std::sort(cs.begin(), cs.end());
      for (auto code : cs) {
        std::vector<std::size_t> c(neurons_.size());
        for (std::size_t q = neurons_.size(); q-- > 0;) c[q] = code % centroids_[q].size(), code /= centroids_[q].size();
        r.push_back(std::move(c));
      }
    } else {
      for (const auto& t : tuples_) r.emplace_back(t.begin(), t.end());
    }
    return r;
  }

  friend void save_idc(std::ostream& os, const idc& c);
  friend idc load_idc(std::istream& is);
  template <class Policy, class Net, class Labels>
  friend idc prepare_idc(const Policy&, const Net&, std::span<const network_scalar_t<Net>>, std::size_t, const Labels&, const idc_options&);

 private:
  std::size_t layer_ = 0, width_ = 0;
  std::vector<std::size_t> neurons_;
  std::vector<std::vector<double>> centroids_;
  std::uint64_t fingerprint_ = 0;
  std::vector<double> scores_;
  std::size_t training_inputs_ = 0;
  double incc_ = 0;
  bool small_ = true;
  std::unordered_set<std::uint64_t> codes_;
  std::set<std::vector<std::uint16_t>> tuples_;

  void init() {
    if (neurons_.size() != centroids_.size()) throw value_error("idc: one centroid list per important neuron");
    if (neurons_.empty()) throw value_error("idc: no important neurons (m = 0)");
    incc_ = 1;
    long double prod = 1;
    for (std::size_t q = 0; q < neurons_.size(); ++q) {
      if (neurons_[q] >= width_)
        throw value_error("idc: neuron " + std::to_string(neurons_[q]) + " out of range (the layer has " + std::to_string(width_) + ")");
      const auto& c = centroids_[q];
      if (c.empty() || c.size() > 65535) throw value_error("idc: neuron " + std::to_string(neurons_[q]) + " has no centroid");
      if (!std::is_sorted(c.begin(), c.end())) throw value_error("idc: centroids must be sorted ascending");
      incc_ *= double(c.size());
      prod *= (long double)c.size();
    }
    small_ = prod < 1.8e19L;
  }
  std::size_t nearest(std::size_t q, double v) const { return nearest_centroid(centroids_[q], v); }
};

/// IDC prepared on the n training inputs at x with labels.
template <class Policy, class Net, class Labels>
idc prepare_idc(const Policy& pol, const Net& net, std::span<const network_scalar_t<Net>> x, std::size_t n, const Labels& labels,
                const idc_options& o) {
  importance_options io = o.importance;
  io.layer = o.layer == std::size_t(-1) ? subject_layer(net) : o.layer;
  check_layer_index(net, io.layer, "prepare_idc");
  const std::size_t width = coverage_neurons(shape_at(net, io.layer + 1));
  if (o.m == 0) throw value_error("prepare_idc: m must be at least 1");
  if (o.m > width)
    throw value_error("prepare_idc: m = " + std::to_string(o.m) + " is larger than layer " + std::to_string(io.layer) + " (" +
                      std::to_string(width) + " neurons)");
  std::vector<double> acts;
  const neuron_relevance rel = detail::importance_backend<Policy>::run(pol, net, x, n, labels, io, &acts);
  const auto top = important_neurons(rel, o.m);
  const std::size_t rows = rel.samples;
  std::vector<std::vector<double>> cents(top.size());
  auto cluster_one = [&](std::size_t q) {
    std::vector<double> col(rows);
    for (std::size_t r = 0; r < rows; ++r) col[r] = acts[r * width + top[q]];
    cents[q] = cluster_neuron(col, o.clusters).centroids;
  };
  if constexpr (execution::is_host_parallel_policy_v<Policy>)
    detail::default_pool().parallel_for(top.size(), cluster_one);
  else
    for (std::size_t q = 0; q < top.size(); ++q) cluster_one(q);
  idc c(io.layer, width, top, std::move(cents), rel.fingerprint);
  c.scores_ = rel.scores();
  c.training_inputs_ = rows;
  return c;
}

template <class Policy, class Net, class A, class Labels>
  requires execution::is_execution_policy_v<Policy>
idc prepare_idc(const Policy& pol, const Net& net, const A& X, const Labels& labels, const idc_options& o = {}) {
  const std::size_t n = X.dimension() ? X.shape()[0] : 0;
  return prepare_idc(pol, net, std::span<const network_scalar_t<Net>>(X.data(), X.size()), n, labels, o);
}

template <class Net, class A, class Labels>
  requires(!execution::is_execution_policy_v<Net>)
idc prepare_idc(const Net& net, const A& X, const Labels& labels, const idc_options& o = {}) {
  return execution::with_default_policy(net, [&](const auto& pol) { return prepare_idc(pol, net, X, labels, o); });
}

/// Text format "nnlens-idc 1": the preparation and the covered combinations.
inline void save_idc(std::ostream& os, const idc& c) {
  os.precision(17);
  os << "nnlens-idc 1\nfingerprint " << c.fingerprint_ << "\nlayer " << c.layer_ << "\nwidth " << c.width_ << "\ntraining "
     << c.training_inputs_ << "\nm " << c.neurons_.size() << "\n";
  for (std::size_t q = 0; q < c.neurons_.size(); ++q) {
    os << "neuron " << c.neurons_[q] << " " << c.centroids_[q].size();
    for (double v : c.centroids_[q]) os << " " << v;
    os << "\n";
  }
  os << "scores " << c.scores_.size();
  for (double v : c.scores_) os << " " << v;
  os << "\n";
  const auto cov = c.covered_combinations();
  os << "covered " << cov.size() << "\n";
  for (const auto& k : cov) {
    for (std::size_t q = 0; q < k.size(); ++q) os << (q ? " " : "") << k[q];
    os << "\n";
  }
  if (!os) throw io_error("save_idc: write failed");
}

inline idc load_idc(std::istream& is) {
  std::size_t line_no = 0;
  std::string line;
  auto next = [&](const char* what) {
    if (!std::getline(is, line)) throw data_error(detail::concat("idc state: truncated before ", what, " (line ", line_no + 1, ")"));
    ++line_no;
    return std::istringstream(line);
  };
  auto bad = [&](const std::string& what) { return data_error(detail::concat("idc state, line ", line_no, ": ", what)); };
  auto keyed = [&](const char* key) {
    auto ss = next(key);
    std::string k;
    ss >> k;
    if (k != key) throw bad(detail::concat("expected '", key, "'"));
    return ss;
  };
  {
    auto ss = next("the header");
    std::string a, b;
    ss >> a >> b;
    if (a != "nnlens-idc" || b != "1") throw bad("not an nnlens-idc 1 file");
  }
  auto read_u = [&](std::istringstream& ss, const char* what, std::uint64_t limit) {
    std::uint64_t v;
    if (!(ss >> v) || v > limit) throw bad(detail::concat("bad ", what));
    return v;
  };
  idc c;
  { auto ss = keyed("fingerprint"); c.fingerprint_ = read_u(ss, "fingerprint", std::numeric_limits<std::uint64_t>::max()); }
  { auto ss = keyed("layer"); c.layer_ = read_u(ss, "layer", 1u << 20); }
  { auto ss = keyed("width"); c.width_ = read_u(ss, "width", 1u << 26); }
  { auto ss = keyed("training"); c.training_inputs_ = read_u(ss, "training", std::uint64_t(1) << 40); }
  std::size_t m;
  { auto ss = keyed("m"); m = read_u(ss, "m", c.width_); }
  if (m == 0) throw bad("m = 0");
  for (std::size_t q = 0; q < m; ++q) {
    auto ss = keyed("neuron");
    c.neurons_.push_back(read_u(ss, "neuron index", c.width_ ? c.width_ - 1 : 0));
    const std::size_t k = read_u(ss, "centroid count", 65535);
    std::vector<double> cs(k);
    for (auto& v : cs)
      if (!(ss >> v) || !std::isfinite(v)) throw bad("bad centroid");
    c.centroids_.push_back(std::move(cs));
  }
  {
    auto ss = keyed("scores");
    const std::size_t k = read_u(ss, "score count", c.width_);
    c.scores_.resize(k);
    for (auto& v : c.scores_)
      if (!(ss >> v)) throw bad("bad score");
  }
  try {
    c.init();
  } catch (const value_error& e) {
    throw bad(e.what());
  }
  std::size_t ncov;
  { auto ss = keyed("covered"); ncov = read_u(ss, "covered count", std::uint64_t(1) << 32); }
  neuron_block b;
  std::vector<double> row(c.width_, 0.0);
  b.rows = 1, b.width = c.width_, b.offsets = {0, c.width_}, b.data = row.data();
  for (std::size_t i = 0; i < ncov; ++i) {
    auto ss = next("a covered combination");
    for (std::size_t q = 0; q < m; ++q) {
      const std::size_t j = read_u(ss, "centroid index", c.centroids_[q].size() - 1);
      row[c.neurons_[q]] = c.centroids_[q][j];
    }
    c.add(b);
  }
  return c;
}

/// Loads a state and checks that it was prepared on `net`.
template <class Net>
idc load_idc(std::istream& is, const Net& net) {
  idc c = load_idc(is);
  if (c.fingerprint() != detail::model_fingerprint(net))
    throw data_error("idc state: prepared on another model (the model fingerprints differ)");
  check_layer_index(net, c.layer(), "idc state");
  if (coverage_neurons(shape_at(net, c.layer() + 1)) != c.width())
    throw data_error("idc state: its layer has " + std::to_string(c.width()) + " neurons, this model's has " +
                     std::to_string(coverage_neurons(shape_at(net, c.layer() + 1))));
  return c;
}

}  // namespace nnlens
