// nnlens/nnslicer/decision_tree.hpp -- a CART classification tree (Gini impurity), the detector of
// NNSlicer's adversarial-input study (docs/specs/nnslicer.md#41-adversarial-input-detection) and of its baselines.
//
//   decision_tree t;
//   t.fit([policy,] X, n, d, y, {.max_features = 0, .seed = 1});   // X: n x d row-major, y: n labels
//   std::size_t c = t.predict_one(x);                              // x: d values
//   auto cs = t.predict(X, n);                                     // n predictions
//   t.depth(), t.leaves(), t.nodes(), t.features_kept()
//
// The algorithm is scikit-learn's DecisionTreeClassifier with its defaults (criterion "gini",
// splitter "best", max_depth None, min_samples_split 2, min_samples_leaf 1, max_features None):
// - a node becomes a leaf when it is pure, has fewer than min_samples_split (or 2 min_samples_leaf)
//   samples, is at max_depth, or no feature splits it; its class is the majority (the smallest
//   class on ties);
// - otherwise the split (feature f, threshold t: x_f <= t goes left) maximises the Gini impurity
//   decrease (equivalently the proxy sum_l |c_l|^2 / n_l + sum_r |c_r|^2 / n_r), over every
//   boundary between two consecutive distinct values of f in the node that leaves min_samples_leaf
//   samples on each side; t is the midpoint of those two values (the lower value if the midpoint
//   rounds up to the higher one).
// Features are examined in order (max_features = 0: all of them) or, with max_features = k, in a
// random order per node (std::mt19937_64 seeded with `seed`, consumed in the fixed depth-first
// node order): the first k, and further ones only while no valid split has been found (as
// scikit-learn).  Ties in the score go to the feature examined first, so fitting is
// deterministic, with the same result for execution::seq and execution::par (which splits the
// features of a large node over the thread pool).
//
// Exact speed-ups: features constant over the training set are dropped first (they can never
// split); each kept feature is stored once as the ranks of its distinct values (1, 2 or 4 bytes a
// value, column-major), so a node's best split on a feature is a counting pass over the node's
// samples when the node's rank range is small (few distinct values, e.g. CONTRIB in {-1, 0, 1})
// and a sort of the node's ranks otherwise.  Memory: n x (kept features) x (1, 2 or 4) bytes.
//
// requires: n >= 1, d >= 1, X finite (value_error otherwise), labels integers in [0, 2^31);
//           min_samples_split >= 2, min_samples_leaf >= 1.  T: any arithmetic type.
// ensures:  predict returns a class seen in training; on the training set itself a fully grown
//           tree (defaults) predicts every sample whose feature vector is not shared with a
//           differently labelled sample correctly.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <random>
#include <type_traits>
#include <vector>

#include "nnlens/core/error.hpp"
#include "nnlens/core/execution.hpp"
#include "nnlens/core/thread_pool.hpp"

namespace nnlens {

struct tree_options {
  std::size_t max_depth = 0;          // 0: none
  std::size_t min_samples_split = 2;
  std::size_t min_samples_leaf = 1;
  std::size_t max_features = 0;       // features examined per node; 0: all (kept) features
  std::uint64_t seed = 1;             // the per-node feature order when max_features > 0
};

class decision_tree {
 public:
  struct node {
    std::int64_t feature = -1;  // -1: leaf
    double threshold = 0;       // x[feature] <= threshold goes left
    std::uint32_t left = 0, right = 0;
    std::uint32_t cls = 0;      // the majority class (every node)
    std::uint32_t samples = 0;
  };

  template <class Policy, class T, class Label>
    requires execution::is_execution_policy_v<Policy>
  void fit(const Policy&, const T* X, std::size_t n, std::size_t d, const Label* y, const tree_options& o = {});
  template <class T, class Label>
  void fit(const T* X, std::size_t n, std::size_t d, const Label* y, const tree_options& o = {}) {
    fit(execution::seq, X, n, d, y, o);
  }

  template <class T>
  std::size_t predict_one(const T* x) const {
    if (nodes_.empty()) throw logic_error("decision_tree::predict: the tree is not fitted");
    std::uint32_t k = 0;
    while (nodes_[k].feature >= 0) k = double(x[nodes_[k].feature]) <= nodes_[k].threshold ? nodes_[k].left : nodes_[k].right;
    return nodes_[k].cls;
  }
  template <class T>
  std::vector<std::size_t> predict(const T* X, std::size_t n) const {
    std::vector<std::size_t> r(n);
    for (std::size_t i = 0; i < n; ++i) r[i] = predict_one(X + i * d_);
    return r;
  }

  std::size_t dims() const { return d_; }
  std::size_t classes() const { return classes_; }
  std::size_t nodes() const { return nodes_.size(); }
  std::size_t leaves() const {
    return std::size_t(std::count_if(nodes_.begin(), nodes_.end(), [](const node& x) { return x.feature < 0; }));
  }
  std::size_t depth() const { return depth_; }
  /// Features left after dropping those constant over the training set.
  std::size_t features_kept() const { return kept_; }
  const std::vector<node>& tree() const { return nodes_; }

 private:
  std::vector<node> nodes_;
  std::size_t d_ = 0, classes_ = 0, depth_ = 0, kept_ = 0;
};

namespace detail {

/// The training set as per-feature value ranks, column-major.
struct tree_columns {
  std::size_t n = 0;
  std::vector<std::size_t> feature;            // original index of kept feature j
  std::vector<std::vector<double>> values;     // kept feature j's distinct values, ascending
  std::vector<std::uint8_t> width;             // bytes per rank: 1, 2 or 4
  std::vector<std::size_t> offset;             // into the pool of that width
  std::vector<std::uint8_t> r8;
  std::vector<std::uint16_t> r16;
  std::vector<std::uint32_t> r32;

  template <class F>
  decltype(auto) with_ranks(std::size_t j, F&& f) const {
    if (width[j] == 1) return f(r8.data() + offset[j]);
    if (width[j] == 2) return f(r16.data() + offset[j]);
    return f(r32.data() + offset[j]);
  }
};

template <class Policy, class T>
tree_columns make_tree_columns(const Policy&, const T* X, std::size_t n, std::size_t d) {
  tree_columns tc;
  tc.n = n;
  // 1. constant features (exact pre-filter)
  std::vector<std::uint8_t> varies(d, 0);
  for (std::size_t i = 1; i < n; ++i) {
    const T* r = X + i * d;
    for (std::size_t f = 0; f < d; ++f) varies[f] |= r[f] != X[f];
  }
  for (std::size_t f = 0; f < d; ++f)
    if (varies[f]) tc.feature.push_back(f);
  const std::size_t F = tc.feature.size();
  tc.values.resize(F);
  tc.width.resize(F);
  tc.offset.resize(F);
  // 2. ranks, a block of features at a time (a cache-friendly transpose)
  constexpr std::size_t B = 64;
  const std::size_t blocks = (F + B - 1) / B;
  std::vector<std::vector<double>> cols(blocks);  // filled per block below
  std::vector<std::vector<std::uint32_t>> ranks(F);
  auto do_block = [&](std::size_t b) {
    const std::size_t j0 = b * B, j1 = std::min(F, j0 + B);
    std::vector<double> col((j1 - j0) * n);
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = j0; j < j1; ++j) col[(j - j0) * n + i] = double(X[i * d + tc.feature[j]]);
    std::vector<double> s;
    for (std::size_t j = j0; j < j1; ++j) {
      const double* c = col.data() + (j - j0) * n;
      auto& vals = tc.values[j];
      auto& rk = ranks[j];
      rk.resize(n);
      const double lo = *std::min_element(c, c + n), hi = *std::max_element(c, c + n);
      bool small_int = false;
      if constexpr (std::is_integral_v<T>) small_int = hi - lo <= 65536;
      if (small_int) {  // counting: O(n + range)
        std::vector<std::int64_t> map(std::size_t(hi - lo) + 1, -1);
        for (std::size_t i = 0; i < n; ++i) map[std::size_t(c[i] - lo)] = 0;
        std::int64_t r = 0;
        for (std::size_t v = 0; v < map.size(); ++v)
          if (map[v] == 0) map[v] = r++, vals.push_back(lo + double(v));
        for (std::size_t i = 0; i < n; ++i) rk[i] = std::uint32_t(map[std::size_t(c[i] - lo)]);
      } else {
        s.assign(c, c + n);
        std::sort(s.begin(), s.end());
        s.erase(std::unique(s.begin(), s.end()), s.end());
        vals = s;
        for (std::size_t i = 0; i < n; ++i) rk[i] = std::uint32_t(std::lower_bound(vals.begin(), vals.end(), c[i]) - vals.begin());
      }
      tc.width[j] = vals.size() <= 256 ? 1 : (vals.size() <= 65536 ? 2 : 4);
    }
  };
  if constexpr (execution::is_host_parallel_policy_v<Policy>)
    default_pool().parallel_for(blocks, do_block);
  else
    for (std::size_t b = 0; b < blocks; ++b) do_block(b);
  std::size_t c8 = 0, c16 = 0, c32 = 0;
  for (std::size_t j = 0; j < F; ++j) tc.offset[j] = tc.width[j] == 1 ? (c8 += n) - n : tc.width[j] == 2 ? (c16 += n) - n : (c32 += n) - n;
  tc.r8.resize(c8), tc.r16.resize(c16), tc.r32.resize(c32);
  for (std::size_t j = 0; j < F; ++j) {
    if (tc.width[j] == 1) std::copy(ranks[j].begin(), ranks[j].end(), tc.r8.begin() + std::ptrdiff_t(tc.offset[j]));
    else if (tc.width[j] == 2) std::copy(ranks[j].begin(), ranks[j].end(), tc.r16.begin() + std::ptrdiff_t(tc.offset[j]));
    else std::copy(ranks[j].begin(), ranks[j].end(), tc.r32.begin() + std::ptrdiff_t(tc.offset[j]));
    std::vector<std::uint32_t>().swap(ranks[j]);
  }
  return tc;
}

struct tree_split {
  double score = -1;             // the Gini proxy; -1: none
  std::size_t pos = std::size_t(-1);  // position in the node's feature order (ties: smaller wins)
  std::size_t j = 0;             // kept feature
  std::uint32_t rank = 0;        // ranks <= rank go left
  std::uint32_t next = 0;        // the next distinct rank present in the node
  bool better_than(const tree_split& o) const { return score > o.score || (score == o.score && pos < o.pos); }
};

/// Scratch of one thread's split search.
struct tree_scratch {
  std::vector<std::uint32_t> hist, lc, rc;
  std::vector<std::uint64_t> pairs;
};

/// The best split of the node's samples idx[0, m) on kept feature j (score -1 if none).
template <class R>
void best_split_on(const R* rk, const std::uint32_t* idx, std::size_t m, const std::uint32_t* y, std::size_t C,
                   const std::vector<std::uint32_t>& total, std::size_t min_leaf, tree_scratch& s, tree_split& out) {
  out.score = -1;
  std::uint32_t lo = rk[idx[0]], hi = lo;
  for (std::size_t i = 1; i < m; ++i) lo = std::min<std::uint32_t>(lo, rk[idx[i]]), hi = std::max<std::uint32_t>(hi, rk[idx[i]]);
  if (lo == hi) return;
  s.lc.assign(C, 0);
  std::int64_t sl = 0;  // sum of squared left counts
  std::int64_t sr = 0;
  for (std::size_t c = 0; c < C; ++c) sr += std::int64_t(total[c]) * total[c];
  std::size_t nl = 0;
  auto consider = [&](std::uint32_t r, std::uint32_t next) {
    const std::size_t nr = m - nl;
    if (nl < min_leaf || nr < min_leaf) return;
    const double sc = double(sl) / double(nl) + double(sr) / double(nr);
    if (sc > out.score) out.score = sc, out.rank = r, out.next = next;
  };
  auto move_left = [&](std::uint32_t cls, std::uint32_t cnt) {  // cnt samples of class cls go left
    const std::int64_t a = s.lc[cls], b = std::int64_t(total[cls]) - a;
    sl += (a + cnt) * (a + cnt) - a * a;
    sr += (b - cnt) * (b - cnt) - b * b;
    s.lc[cls] += cnt;
    nl += cnt;
  };
  const std::size_t range = std::size_t(hi - lo) + 1;
  if (range * C <= 4 * m + 64) {  // counting
    s.hist.assign(range * C, 0);
    for (std::size_t i = 0; i < m; ++i) ++s.hist[std::size_t(rk[idx[i]] - lo) * C + y[idx[i]]];
    std::int64_t prev = -1;
    for (std::size_t v = 0; v < range; ++v) {
      const std::uint32_t* h = s.hist.data() + v * C;
      bool any = false;
      for (std::size_t c = 0; c < C; ++c) any |= h[c] != 0;
      if (!any) continue;
      if (prev >= 0) consider(std::uint32_t(prev) + lo, std::uint32_t(v) + lo);
      for (std::size_t c = 0; c < C; ++c)
        if (h[c]) move_left(std::uint32_t(c), h[c]);
      prev = std::int64_t(v);
    }
  } else {  // sort (rank, class) pairs
    s.pairs.resize(m);
    for (std::size_t i = 0; i < m; ++i) s.pairs[i] = (std::uint64_t(rk[idx[i]]) << 32) | y[idx[i]];
    std::sort(s.pairs.begin(), s.pairs.end());
    for (std::size_t i = 0; i < m; ++i) {
      const std::uint32_t r = std::uint32_t(s.pairs[i] >> 32);
      if (i > 0) {
        const std::uint32_t pr = std::uint32_t(s.pairs[i - 1] >> 32);
        if (pr != r) consider(pr, r);
      }
      move_left(std::uint32_t(s.pairs[i] & 0xffffffffu), 1);
    }
  }
}

}  // namespace detail

template <class Policy, class T, class Label>
  requires execution::is_execution_policy_v<Policy>
void decision_tree::fit(const Policy& pol, const T* X, std::size_t n, std::size_t d, const Label* y_in, const tree_options& o) {
  static_assert(std::is_arithmetic_v<T>, "decision_tree: features must be numbers");
  static_assert(std::is_integral_v<Label>, "decision_tree: labels must be integers");
  if (n == 0 || d == 0) throw data_error(nnlens::detail::concat("decision_tree::fit: ", n, " samples of ", d, " features"));
  if (o.min_samples_split < 2 || o.min_samples_leaf < 1)
    throw value_error("decision_tree::fit: min_samples_split must be >= 2 and min_samples_leaf >= 1");
  if constexpr (std::is_floating_point_v<T>)
    for (std::size_t i = 0; i < n * d; ++i)
      if (!std::isfinite(X[i])) throw value_error(nnlens::detail::concat("decision_tree::fit: sample ", i / d, " feature ", i % d, " is not finite"));
  std::vector<std::uint32_t> y(n);
  std::size_t C = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (y_in[i] < 0 || std::uint64_t(y_in[i]) >= (1ull << 31))
      throw data_error(nnlens::detail::concat("decision_tree::fit: label of sample ", i, " is ", std::int64_t(y_in[i]), ", expected 0 <= label < 2^31"));
    y[i] = std::uint32_t(y_in[i]);
    C = std::max<std::size_t>(C, y[i] + 1);
  }
  d_ = d, classes_ = C, depth_ = 0;
  nodes_.clear();
  const detail::tree_columns tc = detail::make_tree_columns(pol, X, n, d);
  const std::size_t F = tc.feature.size();
  kept_ = F;
  const std::size_t min_leaf = o.min_samples_leaf;
  const std::size_t k_feat = o.max_features == 0 ? F : std::min(o.max_features, F);
  const bool par = execution::is_host_parallel_policy_v<Policy>;
  auto& pool = detail::default_pool();
  const std::size_t T_ = par ? pool.size() : 1;
  std::vector<detail::tree_scratch> scratch(T_);
  std::vector<std::uint32_t> idx(n), tmp(n), order(F);
  std::iota(idx.begin(), idx.end(), 0u);
  std::iota(order.begin(), order.end(), 0u);
  std::mt19937_64 rng(o.seed);

  struct pending {
    std::size_t b, e, depth, node;
  };
  std::vector<pending> stack;
  nodes_.push_back({});
  stack.push_back({0, n, 0, 0});
  std::vector<std::uint32_t> total(C);
  while (!stack.empty()) {
    const pending p = stack.back();
    stack.pop_back();
    const std::size_t m = p.e - p.b;
    depth_ = std::max(depth_, p.depth);
    std::fill(total.begin(), total.end(), 0u);
    for (std::size_t i = p.b; i < p.e; ++i) ++total[y[idx[i]]];
    std::size_t nonzero = 0;
    for (std::size_t c = 0; c < C; ++c) nonzero += total[c] != 0;
    {
      node& nd = nodes_[p.node];
      nd.cls = std::uint32_t(std::max_element(total.begin(), total.end()) - total.begin());
      nd.samples = std::uint32_t(m);
    }
    if (nonzero <= 1 || m < o.min_samples_split || m < 2 * min_leaf || (o.max_depth && p.depth >= o.max_depth) || F == 0) continue;
    const std::uint32_t* ni = idx.data() + p.b;
    // the feature order of this node
    const bool sample = k_feat < F;
    if (sample) std::iota(order.begin(), order.end(), 0u);
    std::size_t pos0 = 0;
    detail::tree_split best;
    auto search = [&](std::size_t from, std::size_t to) {  // positions [from, to) of `order`
      const std::size_t tasks = (par && m * (to - from) >= 200000) ? std::min(T_, to - from) : 1;
      std::vector<detail::tree_split> part(tasks);
      auto task = [&](std::size_t t) {
        const std::size_t a = from + (to - from) * t / tasks, b = from + (to - from) * (t + 1) / tasks;
        detail::tree_split cur;
        auto& s = scratch[par ? t : 0];
        for (std::size_t q = a; q < b; ++q) {
          const std::size_t j = order[q];
          tc.with_ranks(j, [&](const auto* rk) { detail::best_split_on(rk, ni, m, y.data(), C, total, min_leaf, s, cur); });
          cur.pos = q, cur.j = j;
          if (cur.score >= 0 && cur.better_than(part[t])) part[t] = cur;
        }
      };
      if (tasks > 1)
        pool.parallel_for(tasks, task);
      else
        task(0);
      for (const auto& s : part)
        if (s.score >= 0 && s.better_than(best)) best = s;
    };
    while (pos0 < F) {
      const std::size_t want = pos0 == 0 ? k_feat : std::min(F - pos0, std::max<std::size_t>(1, k_feat));
      if (sample)  // partial Fisher-Yates: positions [pos0, pos0 + want) drawn from the rest
        for (std::size_t q = pos0; q < pos0 + want; ++q) {
          std::uniform_int_distribution<std::size_t> u(q, F - 1);
          std::swap(order[q], order[u(rng)]);
        }
      search(pos0, pos0 + want);
      pos0 += want;
      if (best.score >= 0) break;
    }
    if (best.score < 0) continue;  // no feature splits the node: a leaf
    // partition (stable) and record the split
    std::size_t nl = 0, nr = 0;
    tc.with_ranks(best.j, [&](const auto* rk) {
      for (std::size_t i = p.b; i < p.e; ++i)
        if (rk[idx[i]] <= best.rank) idx[p.b + nl++] = idx[i];
        else tmp[nr++] = idx[i];
    });
    std::copy_n(tmp.begin(), nr, idx.begin() + std::ptrdiff_t(p.b + nl));
    const auto& vals = tc.values[best.j];
    const double a = vals[best.rank], bnext = vals[best.next];
    double thr = a + (bnext - a) / 2;
    if (thr >= bnext || !(thr >= a)) thr = a;
    const std::uint32_t L = std::uint32_t(nodes_.size()), R = L + 1;
    nodes_.push_back({});
    nodes_.push_back({});
    node& nd = nodes_[p.node];
    nd.feature = std::int64_t(tc.feature[best.j]);
    nd.threshold = thr;
    nd.left = L, nd.right = R;
    stack.push_back({p.b + nl, p.e, p.depth + 1, R});  // left first (depth-first, left to right)
    stack.push_back({p.b, p.b + nl, p.depth + 1, L});
  }
}

}  // namespace nnlens
