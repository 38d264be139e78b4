// The CART tree of NNSlicer's detection study (nnslicer/decision_tree.hpp): the root split against
// an exhaustive search, depth-1 stumps, XOR, fitting the training set, seq == par, max_features
// determinism, errors.
#include <doctest/doctest.h>

#include <nnlens/nnlens.hpp>
#include <nnlens/nnslicer/decision_tree.hpp>

#include <algorithm>
#include <random>
#include <vector>

using namespace nnlens;

namespace {
/// The best root split by exhaustive search (Gini decrease; midpoints between distinct values).
struct best_split {
  std::size_t feature = 0;
  double threshold = 0, score = -1;
};
best_split exhaustive(const std::vector<double>& X, std::size_t n, std::size_t d, const std::vector<int>& y, int classes) {
  best_split b;
  for (std::size_t f = 0; f < d; ++f) {
    std::vector<double> vals;
    for (std::size_t i = 0; i < n; ++i) vals.push_back(X[i * d + f]);
    std::sort(vals.begin(), vals.end());
    vals.erase(std::unique(vals.begin(), vals.end()), vals.end());
    for (std::size_t k = 0; k + 1 < vals.size(); ++k) {
      const double t = (vals[k] + vals[k + 1]) / 2;
      std::vector<double> l(classes, 0), r(classes, 0);
      double nl = 0, nr = 0;
      for (std::size_t i = 0; i < n; ++i) (X[i * d + f] <= t ? (l[y[i]] += 1, nl += 1) : (r[y[i]] += 1, nr += 1));
      double s = 0;
      for (int c = 0; c < classes; ++c) s += l[c] * l[c] / nl + r[c] * r[c] / nr;
      if (s > b.score + 1e-12) b = {f, t, s};
    }
  }
  return b;
}
}  // namespace

TEST_CASE("decision_tree: the root split is the exhaustive best; stumps; XOR; training set fit") {
  std::mt19937_64 rng(3);
  std::uniform_int_distribution<int> v(0, 9);
  const std::size_t n = 200, d = 5;
  std::vector<double> X(n * d);
  std::vector<int> y(n);
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t f = 0; f < d; ++f) X[i * d + f] = v(rng);
    y[i] = (X[i * d + 1] + X[i * d + 3] > 9 ? 1 : 0) + (X[i * d + 4] > 6 ? 1 : 0);
  }
  decision_tree t;
  t.fit(X.data(), n, d, y.data());
  const auto b = exhaustive(X, n, d, y, 3);
  REQUIRE(t.tree().size() > 1);
  CHECK(std::size_t(t.tree()[0].feature) == b.feature);
  CHECK(t.tree()[0].threshold == doctest::Approx(b.threshold));
  // a fully grown tree fits every training vector that is not shared with another label
  const auto pred = t.predict(X.data(), n);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < n; ++i) {
    bool clash = false;
    for (std::size_t j = 0; j < n && !clash; ++j)
      clash = y[j] != y[i] && std::equal(X.begin() + long(i * d), X.begin() + long((i + 1) * d), X.begin() + long(j * d));
    wrong += !clash && pred[i] != std::size_t(y[i]);
  }
  CHECK(wrong == 0);
  // seq == par
  decision_tree tp;
  tp.fit(execution::par, X.data(), n, d, y.data());
  CHECK(tp.predict(X.data(), n) == pred);
  CHECK(tp.nodes() == t.nodes());
  // depth-1 stump = the root split
  decision_tree s;
  s.fit(X.data(), n, d, y.data(), {.max_depth = 1});
  CHECK(s.depth() == 1);
  CHECK(s.leaves() == 2);
  // max_features: deterministic for a seed
  decision_tree m1, m2;
  m1.fit(X.data(), n, d, y.data(), {.max_features = 2, .seed = 5});
  m2.fit(X.data(), n, d, y.data(), {.max_features = 2, .seed = 5});
  CHECK(m1.predict(X.data(), n) == m2.predict(X.data(), n));
  // XOR needs two levels
  const std::vector<double> xo{0, 0, 0, 1, 1, 0, 1, 1};
  const std::vector<int> yo{0, 1, 1, 0};
  decision_tree tx;
  tx.fit(xo.data(), 4, 2, yo.data());
  CHECK(tx.predict(xo.data(), 4) == std::vector<std::size_t>{0, 1, 1, 0});
  CHECK(tx.depth() == 2);
  // constant features are dropped
  std::vector<double> xc(n * 3);
  for (std::size_t i = 0; i < n; ++i) xc[i * 3] = 1.0, xc[i * 3 + 1] = X[i * d + 4], xc[i * 3 + 2] = 2.0;
  decision_tree tc;
  tc.fit(xc.data(), n, 3, y.data());
  CHECK(tc.features_kept() == 1);
}

TEST_CASE("decision_tree: errors") {
  decision_tree t;
  const std::vector<double> x{1, 2};
  CHECK_THROWS_AS(t.predict_one(x.data()), logic_error);
  const std::vector<double> bad{1, NAN};
  const std::vector<int> y{0, 1};
  CHECK_THROWS_AS(t.fit(bad.data(), 2, 1, y.data()), value_error);
}
