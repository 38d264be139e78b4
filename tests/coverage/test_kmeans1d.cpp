// kmeans1d.hpp: exact 1-D k-means, the exact 1-D silhouette and Algorithm 2 for one neuron
// (docs/specs/deepimportance.md#23-clustering-the-important-neurons, docs/specs/deepimportance.md#6-testable-properties-and-oracles items 6, 7, 11), against hand values and brute force.
#include <doctest/doctest.h>

#include <nnlens/coverage/kmeans1d.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

using namespace nnlens;

namespace {

std::vector<double> normal_values(std::size_t n, std::uint64_t seed, double spread = 1.0) {
  std::mt19937_64 r(seed);
  std::normal_distribution<double> g(0.0, spread);
  std::vector<double> v(n);
  for (auto& x : v) x = g(r);
  return v;
}

// O(N^2) silhouette straight from the definition (L1 distance, sklearn's conventions).
std::vector<double> brute_silhouette(const std::vector<double>& x, const std::vector<std::size_t>& l,
                                     std::size_t k) {
  const std::size_t n = x.size();
  std::vector<std::size_t> size(k, 0);
  for (auto c : l) ++size[c];
  std::vector<double> s(n, 0.0);
  for (std::size_t i = 0; i < n; ++i) {
    if (size[l[i]] < 2) continue;
    std::vector<double> sum(k, 0.0);
    for (std::size_t j = 0; j < n; ++j) sum[l[j]] += std::abs(x[i] - x[j]);
    const double a = sum[l[i]] / double(size[l[i]] - 1);
    double b = std::numeric_limits<double>::infinity();
    for (std::size_t c = 0; c < k; ++c)
      if (c != l[i] && size[c] > 0) b = std::min(b, sum[c] / double(size[c]));
    const double den = std::max(a, b);
    s[i] = den > 0 ? (b - a) / den : 0.0;
  }
  return s;
}

double mean(const std::vector<double>& v) {
  return std::accumulate(v.begin(), v.end(), 0.0) / double(v.size());
}

// Minimum SSE over all partitions of sorted x into k contiguous non-empty runs (exhaustive).
double brute_kmeans_sse(const std::vector<double>& x, std::size_t k) {
  const std::size_t n = x.size();
  double best = std::numeric_limits<double>::infinity();
  std::vector<std::size_t> cut(k + 1);
  // enumerate k-1 cut points 0 < c1 < ... < c_{k-1} < n via bitmask of the n-1 gaps
  for (std::uint32_t mask = 0; mask < (1u << (n - 1)); ++mask) {
    if (std::size_t(__builtin_popcount(mask)) != k - 1) continue;
    std::size_t start = 0;
    double sse = 0;
    for (std::size_t g = 0; g <= n - 1; ++g) {
      const bool end = g == n - 1 || (mask >> g & 1u);
      if (!end) continue;
      const std::size_t stop = g + 1;
      double mu = 0;
      for (std::size_t i = start; i < stop; ++i) mu += x[i];
      mu /= double(stop - start);
      for (std::size_t i = start; i < stop; ++i) sse += (x[i] - mu) * (x[i] - mu);
      start = stop;
    }
    best = std::min(best, sse);
  }
  return best;
}

// Seeded Lloyd's algorithm (k-means++ start), its final SSE.
double lloyd_sse(const std::vector<double>& x, std::size_t k, std::uint64_t seed) {
  std::mt19937_64 r(seed);
  std::vector<double> c;
  c.push_back(x[std::uniform_int_distribution<std::size_t>(0, x.size() - 1)(r)]);
  std::vector<double> d2(x.size());
  while (c.size() < k) {
    for (std::size_t i = 0; i < x.size(); ++i) {
      double m = std::numeric_limits<double>::infinity();
      for (double cc : c) m = std::min(m, (x[i] - cc) * (x[i] - cc));
      d2[i] = m;
    }
    std::discrete_distribution<std::size_t> pick(d2.begin(), d2.end());
    c.push_back(x[pick(r)]);
  }
  std::vector<std::size_t> lab(x.size());
  double sse = 0;
  for (int it = 0; it < 100; ++it) {
    sse = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      std::size_t b = 0;
      for (std::size_t j = 1; j < k; ++j)
        if (std::abs(x[i] - c[j]) < std::abs(x[i] - c[b])) b = j;
      lab[i] = b;
      sse += (x[i] - c[b]) * (x[i] - c[b]);
    }
    std::vector<double> sum(k, 0.0);
    std::vector<std::size_t> cnt(k, 0);
    for (std::size_t i = 0; i < x.size(); ++i) sum[lab[i]] += x[i], ++cnt[lab[i]];
    for (std::size_t j = 0; j < k; ++j)
      if (cnt[j]) c[j] = sum[j] / double(cnt[j]);
  }
  return sse;
}

template <class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return {};
}

}  // namespace

TEST_CASE("silhouette_1d: spec §6.6 hand example {0,1,10,11}") {
  const std::vector<double> x = {0, 1, 10, 11};
  const std::vector<std::size_t> l2 = {0, 0, 1, 1};
  const auto s = silhouette_samples_1d(x, l2, 2);
  REQUIRE(s.size() == 4);
  CHECK(s[0] == doctest::Approx(0.9048).epsilon(1e-4));
  CHECK(s[1] == doctest::Approx(0.8947).epsilon(1e-4));
  CHECK(s[2] == doctest::Approx(0.8947).epsilon(1e-4));
  CHECK(s[3] == doctest::Approx(0.9048).epsilon(1e-4));
  CHECK(s[0] == doctest::Approx(19.0 / 21.0));  // A = 1, B = 10.5
  CHECK(s[1] == doctest::Approx(17.0 / 19.0));  // A = 1, B = 9.5
  CHECK(silhouette_1d(x, l2, 2) == doctest::Approx(0.8997).epsilon(1e-4));

  const std::vector<std::size_t> l3 = {0, 0, 1, 2};  // {0,1}, {10}, {11}
  const auto s3 = silhouette_samples_1d(x, l3, 3);
  CHECK(s3[2] == 0.0);  // singletons
  CHECK(s3[3] == 0.0);
  CHECK(s3[0] == doctest::Approx(0.9));
  CHECK(s3[1] == doctest::Approx(8.0 / 9.0));
  CHECK(silhouette_1d(x, l3, 3) == doctest::Approx(0.447).epsilon(1e-3));

  // kmeans_1d finds exactly these partitions.
  const auto r2 = kmeans_1d(x, 2);
  CHECK(r2.labels == l2);
  CHECK(r2.centroids == std::vector<double>{0.5, 10.5});
  CHECK(r2.sse == doctest::Approx(1.0));
  const auto r3 = kmeans_1d(x, 3);
  CHECK(r3.sse == doctest::Approx(0.5));
  CHECK(r3.sizes.size() == 3);

  // Algorithm 2 picks k = 2 (options off for the tiny input; k = 4 skipped: 4 distinct values).
  cluster_options o;
  o.drop_zeros = false;
  o.min_samples = 0;
  o.round_decimals = -1;
  const auto c = cluster_neuron(x, o);
  CHECK(c.k == 2);
  CHECK(c.centroids == std::vector<double>{0.5, 10.5});
  CHECK(c.n_used == 4);
  REQUIRE(c.silhouettes.size() == 3);
  CHECK(c.silhouettes[0] == doctest::Approx(0.8997).epsilon(1e-4));
  CHECK(c.silhouettes[1] == doctest::Approx(0.447).epsilon(1e-3));
  CHECK(std::isnan(c.silhouettes[2]));

  // The same with the defaults, the points replicated 5 times (20 values, no zeros dropped... the
  // zeros are dropped, leaving 15 values {1,10,11}: k = 2 gives {1}, {10,11}).
  std::vector<double> rep;
  for (int i = 0; i < 5; ++i) rep.insert(rep.end(), x.begin(), x.end());
  const auto d = cluster_neuron(rep);
  CHECK(d.n_used == 15);
  CHECK(d.k == 2);
  CHECK(d.centroids == std::vector<double>{1.0, 10.5});
  CHECK(std::isnan(d.silhouettes[1]));  // k = 3 == distinct values: skipped
}

TEST_CASE("silhouette_1d: singletons give 0, S in [-1, 1], equals brute force on random labels") {
  std::mt19937_64 r(11);
  for (int trial = 0; trial < 60; ++trial) {
    const std::size_t n = 2 + r() % 150, k = 2 + r() % 5;
    auto x = normal_values(n, 100 + std::uint64_t(trial), trial % 3 == 0 ? 1e3 : 1.0);
    if (trial % 4 == 1)  // duplicates
      for (auto& v : x) v = std::round(v * 2) / 2;
    std::vector<std::size_t> l(n);
    for (auto& c : l) c = r() % k;
    l[0] = 0;
    l[n - 1] = 1;  // at least two non-empty clusters
    const auto s = silhouette_samples_1d(x, l, k);
    const auto b = brute_silhouette(x, l, k);
    std::vector<std::size_t> size(k, 0);
    for (auto c : l) ++size[c];
    for (std::size_t i = 0; i < n; ++i) {
      CHECK(s[i] >= -1.0);
      CHECK(s[i] <= 1.0);
      CHECK(std::abs(s[i] - b[i]) <= 1e-12 * std::max(1.0, std::abs(b[i])));
      if (size[l[i]] == 1) CHECK(s[i] == 0.0);
    }
    const double S = silhouette_1d(x, l, k);
    CHECK(std::abs(S - mean(b)) <= 1e-12 * std::max(1.0, std::abs(mean(b))));
    CHECK(S >= -1.0);
    CHECK(S <= 1.0);
  }
  // max(A, B) == 0: all members equal and every other cluster at distance 0 cannot happen with
  // distinct clusters, but A = 0 with B > 0 gives exactly 1.
  const std::vector<double> x = {2, 2, 2, 5, 5};
  const std::vector<std::size_t> l = {1, 1, 1, 0, 0};
  CHECK(silhouette_1d(x, l, 2) == 1.0);
  // Empty cluster indices are ignored.
  const std::vector<std::size_t> l4 = {3, 3, 3, 0, 0};
  CHECK(silhouette_1d(x, l4, 4) == 1.0);
}

TEST_CASE("kmeans_1d: optimal against brute force over contiguous partitions (N <= 10, k <= 4)") {
  std::mt19937_64 r(5);
  for (int trial = 0; trial < 200; ++trial) {
    const std::size_t n = 1 + r() % 10;
    auto x = normal_values(n, 1000 + std::uint64_t(trial));
    if (trial % 3 == 0)
      for (auto& v : x) v = std::round(v * 2);  // duplicates
    std::vector<double> sorted = x;
    std::sort(sorted.begin(), sorted.end());
    const std::size_t distinct =
        std::size_t(std::unique(sorted.begin(), sorted.end()) - sorted.begin());
    std::sort(sorted.begin(), sorted.end());
    for (std::size_t k = 1; k <= std::min<std::size_t>(4, distinct); ++k) {
      const auto res = kmeans_1d(x, k);
      std::vector<double> sx = x;
      std::sort(sx.begin(), sx.end());
      const double best = brute_kmeans_sse(sx, k);
      CHECK(res.sse <= best + 1e-12 * (1 + best));
      CHECK(res.sse >= best - 1e-12 * (1 + best));
      CHECK(std::is_sorted(res.centroids.begin(), res.centroids.end()));
      CHECK(std::adjacent_find(res.centroids.begin(), res.centroids.end()) == res.centroids.end());
      REQUIRE(res.labels.size() == n);
      std::size_t total = 0;
      for (std::size_t c = 0; c < k; ++c) {
        CHECK(res.sizes[c] >= 1);
        total += res.sizes[c];
      }
      CHECK(total == n);
    }
  }
}

TEST_CASE("kmeans_1d: <= seeded Lloyd on larger inputs; labels consistent with centroids") {
  for (std::uint64_t seed = 1; seed <= 6; ++seed) {
    // mixture of three Gaussians
    std::mt19937_64 r(seed);
    std::normal_distribution<double> g(0.0, 1.0);
    std::vector<double> x(2000 + 500 * seed);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = g(r) + 4.0 * double(i % 3) * double(seed % 2 + 1);
    std::shuffle(x.begin(), x.end(), r);
    for (std::size_t k = 1; k <= 6; ++k) {
      const auto res = kmeans_1d(x, k);
      double lloyd = std::numeric_limits<double>::infinity();
      for (std::uint64_t s = 0; s < 3; ++s) lloyd = std::min(lloyd, lloyd_sse(x, k, 77 + s));
      CHECK(res.sse <= lloyd * (1 + 1e-12));
      CHECK(std::is_sorted(res.centroids.begin(), res.centroids.end()));
      // labels, sizes, centroids and sse agree with each other
      std::vector<double> sum(k, 0.0);
      std::vector<std::size_t> cnt(k, 0);
      double sse = 0;
      bool nearest = true;
      for (std::size_t i = 0; i < x.size(); ++i) {
        const std::size_t c = res.labels[i];
        REQUIRE(c < k);
        sum[c] += x[i];
        ++cnt[c];
        sse += (x[i] - res.centroids[c]) * (x[i] - res.centroids[c]);
        const double d = std::abs(x[i] - res.centroids[c]);
        for (std::size_t j = 0; j < k; ++j)
          if (std::abs(x[i] - res.centroids[j]) < d * (1 - 1e-12)) nearest = false;
      }
      CHECK(nearest);
      CHECK(sse == doctest::Approx(res.sse).epsilon(1e-10));
      for (std::size_t c = 0; c < k; ++c) {
        CHECK(cnt[c] == res.sizes[c]);
        CHECK(sum[c] / double(cnt[c]) == doctest::Approx(res.centroids[c]).epsilon(1e-12));
      }
    }
  }
  // well separated: the known answer
  std::vector<double> x;
  for (int i = 0; i < 100; ++i) x.push_back(i % 2 ? 0.1 : -0.1), x.push_back(i % 2 ? 5.1 : 4.9),
                                x.push_back(i % 2 ? 20.1 : 19.9);
  const auto r3 = kmeans_1d(x, 3);
  REQUIRE(r3.centroids.size() == 3);
  CHECK(r3.centroids[0] == doctest::Approx(0.0));
  CHECK(r3.centroids[1] == doctest::Approx(5.0));
  CHECK(r3.centroids[2] == doctest::Approx(20.0));
  CHECK(r3.sizes == std::vector<std::size_t>{100, 100, 100});
  // deterministic
  CHECK(kmeans_1d(x, 3).labels == r3.labels);
  // duplicates: equal values share a cluster; k == distinct gives sse 0
  const std::vector<double> d = {3, 1, 3, 1, 2, 3};
  const auto rd = kmeans_1d(d, 3);
  CHECK(rd.sse == 0.0);
  CHECK(rd.centroids == std::vector<double>{1, 2, 3});
  CHECK(rd.labels == std::vector<std::size_t>{2, 0, 2, 0, 1, 2});
}

TEST_CASE("cluster_neuron: contiguous silhouettes equal silhouette_1d on kmeans_1d labels") {
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    auto x = normal_values(3000, seed);
    for (std::size_t i = 0; i < x.size(); i += 3) x[i] += 6.0;
    cluster_options o;
    o.drop_zeros = false;
    o.round_decimals = -1;
    o.ks = {2, 3, 4, 5};
    const auto c = cluster_neuron(x, o);
    double best = -2;
    std::size_t best_k = 0;
    for (std::size_t i = 0; i < o.ks.size(); ++i) {
      const auto r = kmeans_1d(x, o.ks[i]);
      const double s = silhouette_1d(x, r.labels, o.ks[i]);
      CHECK(c.silhouettes[i] == doctest::Approx(s).epsilon(1e-12));
      if (s > best) best = s, best_k = o.ks[i];
    }
    CHECK(c.k == best_k);
    CHECK(c.centroids == kmeans_1d(x, best_k).centroids);
  }
}

TEST_CASE("cluster_neuron: the reference code's fidelity options") {
  SUBCASE("zeros are dropped; fewer than 10 samples left -> {0}") {
    std::vector<double> x(100, 0.0);
    for (int i = 0; i < 9; ++i) x[std::size_t(i * 7)] = 1.0 + i;
    auto c = cluster_neuron(x);
    CHECK(c.centroids == std::vector<double>{0.0});
    CHECK(c.k == 1);
    CHECK(c.n_used == 9);
    for (double s : c.silhouettes) CHECK(std::isnan(s));
    x[99] = -0.0;  // -0 is a zero too
    CHECK(cluster_neuron(x).n_used == 9);
    x[98] = 50.0;  // 10 non-zero values: clustered
    c = cluster_neuron(x);
    CHECK(c.n_used == 10);
    CHECK(c.k >= 2);
    CHECK(c.centroids.back() == 50.0);
    // with the options off the zeros are clustered too
    cluster_options keep;
    keep.drop_zeros = false;
    c = cluster_neuron(x, keep);
    CHECK(c.n_used == 100);
    CHECK(c.centroids.front() < 1.0);  // the zeros' cluster
    // all zeros, min_samples off: still {0}
    keep.min_samples = 0;
    cluster_options drop0 = keep;
    drop0.drop_zeros = true;
    CHECK(cluster_neuron(std::vector<double>(20, 0.0), drop0).centroids == std::vector<double>{0.0});
  }
  SUBCASE("rounding to 2 decimals, then sorted and deduplicated") {
    // clusters at 1.001 / 1.004 (equal after rounding: merged) and 7.123
    std::vector<double> x;
    for (int i = 0; i < 20; ++i) x.push_back(1.001), x.push_back(1.004), x.push_back(7.123);
    x.push_back(7.124);  // a 4th distinct value (k = 3 needs 4), joins 7.123's cluster
    cluster_options o;
    o.ks = {3};
    auto c = cluster_neuron(x, o);
    CHECK(c.k == 3);
    CHECK(c.centroids == std::vector<double>{1.0, 7.12});
    o.round_decimals = -1;
    c = cluster_neuron(x, o);
    REQUIRE(c.centroids.size() == 3);
    CHECK(c.centroids[0] == 1.001);
    CHECK(c.centroids[1] == 1.004);
    CHECK(c.centroids[2] == doctest::Approx((20 * 7.123 + 7.124) / 21).epsilon(1e-14));
    o.round_decimals = 1;
    CHECK(cluster_neuron(x, o).centroids == std::vector<double>{1.0, 7.1});
    // negative centroids round symmetrically, -0.001 -> +0
    std::vector<double> y;
    for (int i = 0; i < 10; ++i) y.push_back(-0.001), y.push_back(-3.456), y.push_back(-3.457);
    cluster_options p;
    p.ks = {2};
    c = cluster_neuron(y, p);
    CHECK(c.centroids == std::vector<double>{-3.46, 0.0});
    CHECK(!std::signbit(c.centroids[1]));
  }
  SUBCASE("k >= number of distinct values is skipped; none left -> the rounded mean") {
    std::vector<double> x;
    for (int i = 0; i < 12; ++i) x.push_back(i % 3 == 0 ? 1.0 : 2.0);  // two distinct values
    auto c = cluster_neuron(x);
    CHECK(c.k == 1);
    CHECK(c.centroids == std::vector<double>{std::round(100 * (4.0 + 16.0) / 12.0) / 100});
    for (double s : c.silhouettes) CHECK(std::isnan(s));
    x.push_back(3.0);  // three distinct: only k = 2 fits
    c = cluster_neuron(x);
    CHECK(c.k == 2);
    CHECK(!std::isnan(c.silhouettes[0]));
    CHECK(std::isnan(c.silhouettes[1]));
    CHECK(std::isnan(c.silhouettes[2]));
  }
  SUBCASE("ties between silhouettes go to the smaller k") {
    // two candidate lists in different orders give the same choice
    const auto x = normal_values(500, 9);
    cluster_options a, b;
    a.ks = {2, 3, 4};
    b.ks = {4, 3, 2, 3};
    CHECK(cluster_neuron(x, a).k == cluster_neuron(x, b).k);
    CHECK(cluster_neuron(x, a).centroids == cluster_neuron(x, b).centroids);
  }
}

TEST_CASE("nearest_centroid: binary search, ties to the lower centroid (spec §2.4)") {
  const std::vector<double> c = {0.0, 5.0, 10.0};
  CHECK(nearest_centroid(c, -3.0) == 0);
  CHECK(nearest_centroid(c, 2.4) == 0);
  CHECK(nearest_centroid(c, 2.5) == 0);  // tie -> lower
  CHECK(nearest_centroid(c, 2.6) == 1);
  CHECK(nearest_centroid(c, 5.0) == 1);
  CHECK(nearest_centroid(c, 7.5) == 1);  // tie -> lower
  CHECK(nearest_centroid(c, 9.0) == 2);
  CHECK(nearest_centroid(c, 99.0) == 2);
  CHECK(nearest_centroid(std::vector<double>{4.0}, -1.0) == 0);
  // the spec's IDC example (§6.8): n2 = {0,5,10}: 4 -> 5, 9 -> 10, 6 -> 5
  CHECK(c[nearest_centroid(c, 4.0)] == 5.0);
  CHECK(c[nearest_centroid(c, 9.0)] == 10.0);
  CHECK(c[nearest_centroid(c, 6.0)] == 5.0);
  CHECK_THROWS_AS(nearest_centroid(std::vector<double>{}, 1.0), value_error);
  CHECK_THROWS_AS(nearest_centroid(c, std::nan("")), value_error);
}

TEST_CASE("bad input: clear errors") {
  const std::vector<double> empty;
  const std::vector<double> x = {1, 2, 3, 4};
  CHECK_THROWS_AS(kmeans_1d(empty, 2), value_error);
  CHECK(message_of([&] { kmeans_1d(empty, 2); }).find("empty") != std::string::npos);
  CHECK_THROWS_AS(kmeans_1d(x, 0), value_error);
  CHECK(message_of([&] { kmeans_1d(x, 0); }).find("k = 0") != std::string::npos);
  CHECK_THROWS_AS(kmeans_1d(x, 5), value_error);
  CHECK(message_of([&] { kmeans_1d(x, 5); }).find("distinct") != std::string::npos);

  std::vector<double> bad = {1, 2, std::nan(""), 4};
  CHECK_THROWS_AS(kmeans_1d(bad, 2), value_error);
  CHECK(message_of([&] { kmeans_1d(bad, 2); }).find("values[2]") != std::string::npos);
  bad[2] = std::numeric_limits<double>::infinity();
  CHECK(message_of([&] { kmeans_1d(bad, 2); }).find("values[2] is inf") != std::string::npos);
  CHECK_THROWS_AS(cluster_neuron(bad), value_error);
  CHECK(message_of([&] { cluster_neuron(bad); }).find("activations[2]") != std::string::npos);

  const std::vector<std::size_t> l = {0, 0, 1, 1};
  CHECK_THROWS_AS(silhouette_1d(empty, std::vector<std::size_t>{}, 2), value_error);
  CHECK(message_of([&] { silhouette_1d(bad, l, 2); }).find("values[2]") != std::string::npos);
  CHECK_THROWS_AS(silhouette_1d(x, std::vector<std::size_t>{0, 1}, 2), value_error);
  CHECK(message_of([&] { silhouette_1d(x, std::vector<std::size_t>{0, 1}, 2); })
            .find("2 labels for 4 values") != std::string::npos);
  CHECK(message_of([&] { silhouette_1d(x, std::vector<std::size_t>{0, 0, 2, 1}, 2); })
            .find("labels[2] = 2") != std::string::npos);
  CHECK(message_of([&] { silhouette_1d(x, std::vector<std::size_t>{1, 1, 1, 1}, 2); })
            .find("1 non-empty cluster") != std::string::npos);
  CHECK_THROWS_AS(silhouette_samples_1d(x, l, 0), value_error);

  cluster_options o;
  o.ks = {1, 2};
  CHECK_THROWS_AS(cluster_neuron(x, o), value_error);
  CHECK(message_of([&] { cluster_neuron(x, o); }).find("ks[0] = 1") != std::string::npos);
}

TEST_CASE("cluster_neuron: a reused workspace gives the same results") {
  cluster_workspace ws;
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    auto x = normal_values(200 * seed, seed);  // sizes up and down
    if (seed == 3) x.resize(50);
    for (std::size_t i = 0; i < x.size(); i += 2) x[i] += 5.0;
    for (std::size_t i = 0; i < x.size(); i += 5) x[i] = 0.0;
    cluster_options o;
    o.ks = seed % 2 ? std::vector<std::size_t>{2, 3, 4} : std::vector<std::size_t>{3, 2};
    const auto a = cluster_neuron(x, o, ws), b = cluster_neuron(x, o);
    CHECK(a.centroids == b.centroids);
    CHECK(a.k == b.k);
    CHECK(a.n_used == b.n_used);
    for (std::size_t i = 0; i < o.ks.size(); ++i) CHECK(a.silhouettes[i] == b.silhouettes[i]);
  }
}
