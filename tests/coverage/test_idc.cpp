// IDC (coverage/importance.hpp, coverage/idc.hpp): the oracles of docs/specs/deepimportance.md#6-testable-properties-and-oracles (5, 8-11),
// the CoverageCriterion properties (monotone, mergeable, order- and duplicate-invariant, incremental
// = batch), the state file, and the errors.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <sstream>
#include <vector>

#include <nnlens/coverage/idc.hpp>
#include <nnlens/nnlens.hpp>

#include <xtensor/xview.hpp>

using namespace nnlens;

namespace {

neuron_block block_of(const std::vector<std::vector<double>>& rows, std::vector<double>& store) {
  neuron_block b;
  b.rows = rows.size();
  b.width = rows.at(0).size();
  b.offsets = {0, b.width};
  store.clear();
  for (const auto& r : rows) store.insert(store.end(), r.begin(), r.end());
  b.data = store.data();
  return b;
}

using Mlp = Sequential<Input<6>, Dense<10, double>, ReLU, Dense<8, double>, ReLU, Dense<3, double>>;

struct toy_data {
  xt::xarray<double> X;
  std::vector<std::size_t> y;
};

/// Inputs labelled by the network itself (so all are "correct"), except every 7th, mislabelled.
toy_data toy(const Mlp& net, std::size_t n, std::uint64_t seed) {
  toy_data d;
  d.X = xt::xarray<double>::from_shape({n, 6});
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  for (auto& v : d.X) v = u(rng);
  const auto z = forward(net, d.X);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t p = std::size_t(std::max_element(z.data() + i * 3, z.data() + i * 3 + 3) - (z.data() + i * 3));
    d.y.push_back(i % 7 == 6 ? (p + 1) % 3 : p);
  }
  return d;
}

}  // namespace

TEST_CASE("oracle 8: the hand example (centroids {0,1} and {0,5,10}: 2 of 6 combinations)") {
  idc c(0, 2, {0, 1}, {{0, 1}, {0, 5, 10}});
  CHECK(c.incc_size() == 6);
  std::vector<double> s;
  c.add(block_of({{0.2, 4}, {0.9, 9}, {0.1, 6}}, s));
  const auto r = c.result();
  CHECK(r.covered == 2);
  CHECK(r.total == 6);
  CHECK(r.percent == doctest::Approx(100.0 / 3));
  const std::vector<std::vector<std::size_t>> expect{{0, 1}, {1, 2}};
  CHECK(c.covered_combinations() == expect);
  // ties go to the lower centroid: 0.5 between 0 and 1, 2.5 between 0 and 5
  const double row[2] = {0.5, 2.5};
  CHECK(c.combination(row) == std::vector<std::size_t>{0, 0});
}

TEST_CASE("oracle 9 and 10: monotone, order/duplicate invariant, incremental = batch; nearest = brute force") {
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> u(-1, 12);
  const std::vector<std::vector<double>> cents{{0, 1}, {0, 5, 10}, {-1, 2, 3, 7}};
  std::vector<std::vector<double>> rows;
  for (int i = 0; i < 300; ++i) rows.push_back({u(rng), u(rng), u(rng), u(rng)});
  idc batch(0, 4, {3, 0, 2}, cents);
  std::vector<double> s;
  batch.add(block_of(rows, s));
  idc inc(0, 4, {3, 0, 2}, cents), rev(0, 4, {3, 0, 2}, cents);
  std::size_t prev = 0;
  for (const auto& r : rows) {
    inc.add(block_of({r, r}, s));  // duplicates change nothing
    CHECK(inc.covered() >= prev);
    prev = inc.covered();
  }
  for (std::size_t i = rows.size(); i-- > 0;) rev.add(block_of({rows[i]}, s));
  CHECK(inc.covered_combinations() == batch.covered_combinations());
  CHECK(rev.covered_combinations() == batch.covered_combinations());
  CHECK(batch.covered() <= std::min<std::size_t>(rows.size(), 24));
  // halves merge to the whole
  idc a(0, 4, {3, 0, 2}, cents), b(0, 4, {3, 0, 2}, cents);
  a.add(block_of(std::vector<std::vector<double>>(rows.begin(), rows.begin() + 150), s));
  b.add(block_of(std::vector<std::vector<double>>(rows.begin() + 150, rows.end()), s));
  CHECK(merge(a, b).covered_combinations() == batch.covered_combinations());
  // the per-neuron nearest centroid is the argmin over all INCC tuples of the Euclidean distance
  const std::vector<std::size_t> nn{3, 0, 2};
  for (const auto& r : rows) {
    double best = INFINITY;
    std::vector<std::size_t> arg;
    for (std::size_t i = 0; i < 4; ++i)
      for (std::size_t j = 0; j < 2; ++j)
        for (std::size_t k = 0; k < 3; ++k) {
          const double d = std::pow(r[nn[0]] - cents[0][j], 2) + std::pow(r[nn[1]] - cents[1][k], 2) + std::pow(r[nn[2]] - cents[2][i], 2);
          if (d < best) best = d, arg = {j, k, i};
        }
    CHECK(batch.combination(r.data()) == arg);
  }
  batch.reset();
  CHECK(batch.covered() == 0);
  idc other(0, 4, {3, 0, 1}, cents);
  CHECK_THROWS_AS(batch.merge(other), data_error);
}

TEST_CASE("large INCC: tuples instead of a 64-bit code") {
  std::vector<std::size_t> neurons(40);
  std::iota(neurons.begin(), neurons.end(), std::size_t(0));
  idc c(0, 40, neurons, std::vector<std::vector<double>>(40, {0.0, 1.0, 2.0, 3.0}));  // 4^40 > 2^64
  CHECK(c.incc_size() == doctest::Approx(std::pow(4.0, 40)));
  std::vector<double> s;
  c.add(block_of({std::vector<double>(40, 0.1), std::vector<double>(40, 2.9), std::vector<double>(40, 0.2)}, s));
  CHECK(c.covered() == 2);
  CHECK(c.result().percent > 0);
}

TEST_CASE("|INCC| of 2^63, 2^64 and 2^65 (m = 63, 64, 65 neurons of 2 clusters): a capped total says so") {
  // Before: `incc <= double(SIZE_MAX) ? size_t(incc) : SIZE_MAX` converted 2^64 to size_t (undefined;
  // 0 on x86-64, caught by -fsanitize=float-cast-overflow), and a capped total looked like a count.
  auto make = [](std::size_t m) {
    std::vector<std::size_t> neurons(m);
    std::iota(neurons.begin(), neurons.end(), std::size_t(0));
    return idc(0, 65, neurons, std::vector<std::vector<double>>(m, {0.0, 1.0}));
  };
  std::vector<double> s;
  const std::vector<double> low(65, 0.1), high(65, 0.9);
  {
    idc c = make(63);
    c.add(block_of({low, high}, s));
    const coverage_result r = c.result();
    CHECK(r.total == std::size_t(1) << 63);
    CHECK_FALSE(c.total_capped());
    CHECK(c.incc_exact() == "9223372036854775808");
    CHECK(r.covered == 2);
    CHECK(r.percent == doctest::Approx(100.0 * 2 / std::pow(2.0, 63)));
  }
  {
    idc c = make(64);
    c.add(block_of({low, high}, s));
    const coverage_result r = c.result();
    CHECK(r.total == std::numeric_limits<std::size_t>::max());  // the cap, never 0
    CHECK(c.total_capped());
    CHECK(c.incc_exact() == "18446744073709551616");
    CHECK(r.covered == 2);
    CHECK(r.percent == doctest::Approx(100.0 * 2 / std::pow(2.0, 64)));
  }
  {
    idc c = make(65);
    c.add(block_of({low}, s));
    const coverage_result r = c.result();
    CHECK(r.total == std::numeric_limits<std::size_t>::max());
    CHECK(c.total_capped());
    CHECK(c.incc_exact() == "36893488147419103232");
    CHECK(r.covered == 1);
  }
  // a mixed radix: 3^41 = 36472996377170786403 (> 2^64), 10^9 limbs carried
  std::vector<std::size_t> n41(41);
  std::iota(n41.begin(), n41.end(), std::size_t(0));
  idc t(0, 41, n41, std::vector<std::vector<double>>(41, {0.0, 1.0, 2.0}));
  CHECK(t.incc_exact() == "36472996377170786403");
  CHECK(t.total_capped());
  idc one(0, 1, {0}, {{0.0, 1.0, 2.0}});
  CHECK(one.incc_exact() == "3");
  CHECK(one.result().total == 3);
}

TEST_CASE("important neurons: top m by relevance, ties to the lower index; aggregations") {
  neuron_relevance r;
  r.total = {1, 5, 5, -2, 3};
  CHECK(important_neurons(r, 3) == std::vector<std::size_t>{1, 2, 4});
  CHECK_THROWS_AS(important_neurons(r, 6), value_error);
  CHECK_THROWS_AS(important_neurons(r, 0), value_error);
  Mlp net;
  initialize(net, 5);
  const auto d = toy(net, 140, 6);
  importance_options o;
  o.layer = 3;
  const auto sum = neuron_relevance_of(net, d.X, d.y, o);
  CHECK(sum.samples == 120);  // every 7th is mislabelled
  CHECK(sum.seen == 140);
  CHECK(sum.total.size() == 8);
  // the sum equals the relevance() totals over the correct rows
  std::vector<std::size_t> rows;
  for (std::size_t i = 0; i < 140; ++i)
    if (i % 7 != 6) rows.push_back(i);
  xt::xarray<double> Xc = xt::xarray<double>::from_shape({rows.size(), 6});
  for (std::size_t k = 0; k < rows.size(); ++k) std::copy_n(d.X.data() + rows[k] * 6, 6, Xc.data() + k * 6);
  const auto R = relevance(net, Xc, 3);
  for (std::size_t q = 0; q < 8; ++q) {
    double t = 0;
    for (std::size_t k = 0; k < rows.size(); ++k) t += R(k, q);
    CHECK(sum.total[q] == doctest::Approx(t).epsilon(1e-12));
  }
  o.aggregation = importance_aggregation::count;
  o.count_m = 2;
  const auto cnt = neuron_relevance_of(net, d.X, d.y, o);
  CHECK(std::accumulate(cnt.total.begin(), cnt.total.end(), 0.0) == 240);
  o.aggregation = importance_aggregation::mean_abs;
  const auto ma = neuron_relevance_of(net, d.X, d.y, o);
  for (double v : ma.scores()) CHECK(v >= 0);
  // parallel == sequential, bit for bit (fixed chunks)
  const auto par = neuron_relevance_of(execution::par, net, d.X, d.y, importance_options{.layer = 3});
  CHECK(par.total == sum.total);
  // halves merge to the whole (up to rounding)
  const auto h = merge(neuron_relevance_of(net, xt::xarray<double>(xt::view(d.X, xt::range(0, 70))),
                                           std::vector<std::size_t>(d.y.begin(), d.y.begin() + 70), importance_options{.layer = 3}),
                       neuron_relevance_of(net, xt::xarray<double>(xt::view(d.X, xt::range(70, 140))),
                                           std::vector<std::size_t>(d.y.begin() + 70, d.y.end()), importance_options{.layer = 3}));
  for (std::size_t q = 0; q < 8; ++q) CHECK(h.total[q] == doctest::Approx(sum.total[q]).epsilon(1e-12));
}

TEST_CASE("prepare_idc: determinism, thread independence, the state file, and measuring") {
  Mlp net;
  initialize(net, 9);
  const auto d = toy(net, 400, 10);
  idc_options o;
  o.m = 4;
  const idc a = prepare_idc(net, d.X, d.y, o);
  const idc b = prepare_idc(execution::par, net, d.X, d.y, o);
  CHECK(a.layer() == subject_layer(net));
  CHECK(a.layer() == 3);
  CHECK(a.width() == 8);
  CHECK(a.neurons() == b.neurons());
  CHECK(a.centroids() == b.centroids());
  CHECK(a.training_inputs() == 343);
  for (const auto& c : a.centroids()) {
    CHECK(!c.empty());
    CHECK(c.size() <= 4);
    CHECK(std::is_sorted(c.begin(), c.end()));
    for (double v : c) CHECK(std::abs(v * 100 - std::round(v * 100)) < 1e-6);  // 2 decimals
  }
  const auto top = important_neurons(neuron_relevance_of(net, d.X, d.y), 4);
  CHECK(a.neurons() == top);
  // measuring: the training set covers, a second pass adds nothing, the result is a percentage
  idc m = a;
  const auto r1 = measure(net, d.X, m);
  const auto r2 = measure(execution::par, net, d.X, m);
  CHECK(r1.covered == r2.covered);
  CHECK(r1.covered > 0);
  CHECK(r1.percent <= 100);
  CHECK(r1.total == std::size_t(a.incc_size()));
  // save / load: the same preparation and covered set
  std::stringstream ss;
  save_idc(ss, m);
  const idc l = load_idc(ss, net);
  CHECK(l.neurons() == m.neurons());
  CHECK(l.centroids() == m.centroids());
  CHECK(l.covered_combinations() == m.covered_combinations());
  CHECK(l.scores().size() == 8);
  // another model's state
  Mlp other;
  initialize(other, 10);
  std::stringstream s2;
  save_idc(s2, m);
  CHECK_THROWS_WITH_AS(load_idc(s2, other), doctest::Contains("another model"), data_error);
  // truncated and garbled files
  const std::string txt = ss.str();
  for (std::size_t cut : {std::size_t(0), std::size_t(5), txt.size() / 3, txt.size() / 2}) {
    std::istringstream t(txt.substr(0, cut));
    CHECK_THROWS_AS(load_idc(t), data_error);
  }
  std::string g = txt;
  g.replace(g.find("neuron "), 7, "neurox ");
  std::istringstream t(g);
  CHECK_THROWS_WITH_AS(load_idc(t), doctest::Contains("line"), data_error);
}

TEST_CASE("oracle 11 and bad input: degenerate neurons, m too large, empty training set, bad layer") {
  Mlp net;
  initialize(net, 12);
  const auto d = toy(net, 50, 13);
  // a dead neuron (never active) becomes the single centroid {0} and a factor 1 of |INCC|
  auto dead = net;
  auto& l2 = std::get<2>(dead.layers);
  for (std::size_t i = 0; i < l2.W.shape(0); ++i) l2.W(i, 0) = 0;
  l2.b(0) = -1;
  idc_options o;
  o.m = 8;
  const auto d2 = toy(dead, 50, 13);
  const idc c = prepare_idc(dead, d2.X, d2.y, o);
  std::size_t singles = 0;
  for (std::size_t q = 0; q < 8; ++q)
    if (c.neurons()[q] == 0) CHECK(c.centroids()[q] == std::vector<double>{0.0});
  for (const auto& cs : c.centroids()) singles += cs.size() == 1;
  CHECK(singles >= 1);
  o.m = 9;
  CHECK_THROWS_WITH_AS(prepare_idc(net, d.X, d.y, o), doctest::Contains("larger than layer"), value_error);
  o.m = 2;
  o.layer = 17;
  CHECK_THROWS_WITH_AS(prepare_idc(net, d.X, d.y, o), doctest::Contains("out of range"), value_error);
  o.layer = std::size_t(-1);
  xt::xarray<double> empty = xt::xarray<double>::from_shape({0, 6});
  CHECK_THROWS_WITH_AS(prepare_idc(net, empty, std::vector<std::size_t>{}, o), doctest::Contains("empty"), data_error);
  CHECK_THROWS_AS(prepare_idc(net, d.X, std::vector<std::size_t>(3, 0), o), shape_error);
}
