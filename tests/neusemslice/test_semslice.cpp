// NeuSemSlice (neusemslice/cka.hpp, neusemslice/semslice.hpp): the similarity forms, Algorithm 1's scan,
// the metrics and the slice (docs/specs/neusemslice.md#7-test-oracles oracles 1-5, 10, 11), errors, determinism.
#include <doctest/doctest.h>

#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include <nnlens/nnlens.hpp>
#include <nnlens/network/cast.hpp>
#include <nnlens/neusemslice/cka.hpp>
#include <nnlens/neusemslice/semslice.hpp>

using namespace nnlens;

namespace {

using Mlp = Sequential<Input<6>, Dense<12>, ReLU, Dense<8>, ReLU, Dense<3>>;
using LeakyMlp = Sequential<Input<6>, Dense<10>, LeakyReLU, Dense<7>, LeakyReLU, Dense<3>>;
using Cnn = Sequential<Input<2, 6, 6>, Conv2D<4, 3, 1, 1>, BatchNorm<4>, ReLU, AvgPool2D<2>, Conv2D<5, 3>, ReLU, Flatten, Dense<6>,
                       ReLU, Dense<3>>;
using MaxCnn = Sequential<Input<1, 6, 6>, Conv2D<3, 3, 1, 1>, ReLU, MaxPool2D<2>, Flatten, Dense<5>, ReLU, Dense<3>>;

std::vector<double> rand_vec(std::size_t n, std::uint64_t seed, double lo = 0, double hi = 1) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

template <class T>
xt::xarray<T> rand_x(std::size_t n, std::vector<std::size_t> s, std::uint64_t seed) {
  s.insert(s.begin(), n);
  xt::xarray<T> x = xt::xarray<T>::from_shape(s);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  for (auto& v : x) v = T(u(rng));
  return x;
}

std::vector<int> round_labels(std::size_t n, std::size_t classes) {
  std::vector<int> y(n);
  for (std::size_t i = 0; i < n; ++i) y[i] = int(i % classes);
  return y;
}

// Gram matrix of sample-major features [m][d] restricted to columns where keep[j].
std::vector<double> gram_of(const std::vector<double>& f, std::size_t m, std::size_t d, const std::vector<int>& keep) {
  std::vector<double> g(m * m, 0.0);
  for (std::size_t a = 0; a < m; ++a)
    for (std::size_t b = 0; b < m; ++b)
      for (std::size_t j = 0; j < d; ++j)
        if (keep[j]) g[a * m + b] += f[a * d + j] * f[b * d + j];
  return g;
}

// The hand example of §7.5: rows x_a, x_b, x_c, columns n1, n2, n3.
const std::vector<double> hand = {1, 0, 0.1, 0, 1, 0.1, 1, 1, 0.1};

}  // namespace

TEST_CASE("oracle 5: the 3x3 hand example, uncentred (Eq. 2) and centred CKA; the scans") {
  gram_scan u(std::span<const double>(hand), 3, 3, 1, similarity::uncentered);
  const std::size_t n1[] = {0}, n12[] = {0, 1}, n3[] = {2};
  CHECK(u.similarity_of(n1) == doctest::Approx(0.79056).epsilon(1e-5));
  CHECK(u.similarity_of(n12) == doctest::Approx(0.99999).epsilon(1e-5));
  CHECK(u.similarity_of(n12) < 1.0);
  CHECK(u.similarity_of(n3) == doctest::Approx(0.84598).epsilon(1e-5));
  gram_scan c(std::span<const double>(hand), 3, 3, 1, similarity::linear_cka);
  CHECK(c.similarity_of(n1) == doctest::Approx(0.79057).epsilon(1e-5));
  CHECK(c.similarity_of(n12) == doctest::Approx(1.0).epsilon(1e-12));
  CHECK(c.similarity_of(n3) == 0.0);  // a constant neuron: exactly 0
  const std::size_t ord[] = {0, 1, 2};
  for (gram_scan* g : {&u, &c}) {
    const auto r = linear_scan(*g, ord, 1, 0.9);
    CHECK(r.k == 2);  // Omega = {n1, n2}
    CHECK(r.trajectory.size() == 2);
  }
  const std::size_t ord3[] = {2, 0, 1};
  const auto ru = linear_scan(u, ord3, 1, 0.8);
  CHECK(ru.k == 1);  // the A8 pitfall: the constant neuron alone passes
  CHECK(ru.sim == doctest::Approx(0.84598).epsilon(1e-5));
  const auto rc = linear_scan(c, ord3, 1, 0.8);
  CHECK(rc.k == 3);  // centred: 0, then 0.79057 < 0.8, then everything
  CHECK(rc.trajectory[0] == 0.0);
  CHECK(rc.trajectory[1] == doctest::Approx(0.79057).epsilon(1e-5));
  CHECK(rc.sim == 1.0);
  // the same numbers from the Gram matrices directly
  const std::vector<int> k1 = {1, 0, 0}, all = {1, 1, 1}, k3 = {0, 0, 1};
  const auto m1 = gram_of(hand, 3, 3, k1), mf = gram_of(hand, 3, 3, all), m3 = gram_of(hand, 3, 3, k3);
  CHECK(gram_similarity(m1, mf, 3, similarity::uncentered) == doctest::Approx(0.79056).epsilon(1e-5));
  CHECK(gram_similarity(m1, mf, 3, similarity::linear_cka) == doctest::Approx(0.79057).epsilon(1e-5));
  CHECK(gram_similarity(m3, mf, 3, similarity::linear_cka) == 0.0);
  CHECK(gram_similarity(m3, mf, 3, similarity::uncentered) == doctest::Approx(0.84598).epsilon(1e-5));
}

TEST_CASE("oracle 1: sim of the whole layer is 1 in every form; 1 <= k <= |N|") {
  const std::size_t m = 9, w = 7, per = 4;
  const auto f = rand_vec(m * w * per, 11);
  std::vector<std::size_t> every(w);
  std::iota(every.begin(), every.end(), 0);
  for (auto s : {similarity::linear_cka, similarity::uncentered, similarity::unbiased}) {
    gram_scan g(std::span<const double>(f), m, w, per, s);
    CHECK(g.similarity_of(every) == 1.0);
    const auto mf = g.full();
    CHECK(gram_similarity(mf, mf, m, s == similarity::linear_cka ? similarity::uncentered : s) == doctest::Approx(1.0));
    for (double th : {0.01, 0.5, 0.9, 0.999, 1.0}) {
      for (std::size_t step : {1, 2, 3, 7, 20}) {
        const auto r = linear_scan(g, order_by_score(rand_vec(w, 5 + step)), step, th);
        CHECK(r.k >= 1);
        CHECK(r.k <= w);
        CHECK(g.added() == r.k);
      }
    }
  }
}

TEST_CASE("oracle 2: additivity -- the prefix Gram equals the Gram of the restricted and of the zeroed features") {
  const std::size_t m = 6, w = 5, per = 3, d = w * per;
  const auto f = rand_vec(m * d, 3, -1, 1);
  gram_scan g(std::span<const double>(f), m, w, per, similarity::uncentered);
  const std::size_t sub[] = {3, 0};
  g.add(sub);
  std::vector<int> keep(d, 0);
  for (auto n : sub)
    for (std::size_t p = 0; p < per; ++p) keep[n * per + p] = 1;
  const auto zeroed = gram_of(f, m, d, keep);
  // restricted: the features of Omega only, as their own matrix
  std::vector<double> r;
  for (std::size_t a = 0; a < m; ++a)
    for (std::size_t j = 0; j < d; ++j)
      if (keep[j]) r.push_back(f[a * d + j]);
  const auto restricted = gram_of(r, m, r.size() / m, std::vector<int>(r.size() / m, 1));
  for (std::size_t i = 0; i < m * m; ++i) {
    CHECK(g.prefix()[i] == doctest::Approx(zeroed[i]).epsilon(1e-12));
    CHECK(g.prefix()[i] == doctest::Approx(restricted[i]).epsilon(1e-12));
  }
  const std::vector<int> all(d, 1);
  const auto full = gram_of(f, m, d, all);
  for (std::size_t i = 0; i < m * m; ++i) CHECK(g.full()[i] == doctest::Approx(full[i]).epsilon(1e-12));
  // spatial_mean uses one value per neuron: the same as passing the means
  std::vector<double> means(m * w);
  for (std::size_t a = 0; a < m; ++a)
    for (std::size_t n = 0; n < w; ++n) means[a * w + n] = (f[a * d + n * per] + f[a * d + n * per + 1] + f[a * d + n * per + 2]) / 3;
  gram_scan sm(std::span<const double>(f), m, w, per, similarity::linear_cka, feature_map::spatial_mean);
  gram_scan pm(std::span<const double>(means), m, w, 1, similarity::linear_cka);
  CHECK(sm.per() == 1);
  CHECK(sm.similarity_of(sub) == doctest::Approx(pm.similarity_of(sub)).epsilon(1e-12));
}

TEST_CASE("oracle 4: scale invariance and sample-permutation invariance") {
  const std::size_t m = 8, w = 6;
  const auto f = rand_vec(m * w, 21);
  const std::size_t sub[] = {1, 4, 5};
  for (auto s : {similarity::linear_cka, similarity::uncentered, similarity::unbiased}) {
    gram_scan g(std::span<const double>(f), m, w, 1, s);
    const double base = g.similarity_of(sub);
    // sim(alpha F_Omega, beta F): Grams scale by alpha^2, beta^2
    std::vector<int> keep(w, 0);
    for (auto n : sub) keep[n] = 1;
    auto ko = gram_of(f, m, w, keep), kf = gram_of(f, m, w, std::vector<int>(w, 1));
    const double plain = gram_similarity(ko, kf, m, s);
    CHECK(plain == doctest::Approx(base).epsilon(1e-9));
    for (auto& v : ko) v *= 2.5 * 2.5;
    for (auto& v : kf) v *= 0.3 * 0.3;
    CHECK(gram_similarity(ko, kf, m, s) == doctest::Approx(base).epsilon(1e-9));
    // permuting the samples
    const std::size_t perm[] = {5, 2, 7, 0, 1, 6, 3, 4};
    std::vector<double> fp(m * w);
    for (std::size_t a = 0; a < m; ++a)
      for (std::size_t n = 0; n < w; ++n) fp[a * w + n] = f[perm[a] * w + n];
    gram_scan gp(std::span<const double>(fp), m, w, 1, s);
    CHECK(gp.similarity_of(sub) == doctest::Approx(base).epsilon(1e-9));
  }
}

TEST_CASE("zero norms: a constant-zero layer keeps its first block; a zero subset has sim 0") {
  const std::size_t m = 5, w = 4;
  const std::vector<double> zero(m * w, 0.0);
  const std::size_t ord[] = {0, 1, 2, 3};
  for (auto s : {similarity::linear_cka, similarity::uncentered, similarity::unbiased}) {
    gram_scan g(std::span<const double>(zero), m, w, 1, s);
    const auto r = linear_scan(g, ord, 1, 0.95);
    CHECK(r.k == 1);
    CHECK(r.sim == 1.0);
  }
  auto f = rand_vec(m * w, 2);
  for (std::size_t a = 0; a < m; ++a) f[a * w + 2] = 0.0;  // a dead neuron
  const std::size_t dead[] = {2};
  for (auto s : {similarity::linear_cka, similarity::uncentered, similarity::unbiased}) {
    gram_scan g(std::span<const double>(f), m, w, 1, s);
    CHECK(g.similarity_of(dead) == 0.0);
  }
}

TEST_CASE("the scan stops at the first block reaching theta; theta = 1 keeps every neuron") {
  const std::size_t m = 12, w = 10;
  const auto f = rand_vec(m * w, 8, 0.1, 1.0);
  const auto ord = order_by_score(rand_vec(w, 9));
  for (auto s : {similarity::linear_cka, similarity::uncentered}) {
    gram_scan g(std::span<const double>(f), m, w, 1, s);
    for (double th : {0.3, 0.7, 0.9, 0.97}) {
      const auto r = linear_scan(g, ord, 2, th);
      for (std::size_t b = 0; b + 1 < r.trajectory.size(); ++b) CHECK(r.trajectory[b] < th);
      if (r.k < w) CHECK(r.trajectory.back() >= th);
      CHECK(r.k == std::min(w, 2 * r.trajectory.size()));
    }
    const auto r1 = linear_scan(g, ord, 1, 1.0);
    CHECK(r1.k == w);
    CHECK(r1.sim == 1.0);
  }
  CHECK(default_step(1) == 1);
  CHECK(default_step(100) == 1);
  CHECK(default_step(101) == 2);
  CHECK(default_step(512) == 6);
  const std::vector<double> sc = {0.5, 2.0, 0.5, -1.0, 2.0};
  CHECK(order_by_score(sc) == std::vector<std::size_t>{1, 4, 0, 2, 3});
}

TEST_CASE("oracle 10: Avg and Var of a constant neuron are (value, 0); Ens lies in [0, 1]") {
  Mlp net;
  initialize(net, 4);
  auto& d0 = std::get<0>(net.layers);
  for (std::size_t i = 0; i < 6; ++i) d0.W(i, 0) = 0.f, d0.W(i, 1) = 0.f;
  d0.b(0) = 0.7f;   // constant 0.7 after the ReLU
  d0.b(1) = -1.0f;  // dead: constant 0
  const auto x = rand_x<float>(40, {6}, 5);
  const auto y = round_labels(40, 3);
  const auto avg = neuron_scores(net, x, y, metric::avg);
  const auto var = neuron_scores(net, x, y, metric::var);
  CHECK(avg[0][0] == double(0.7f));
  CHECK(var[0][0] == 0.0);
  CHECK(avg[0][1] == 0.0);
  CHECK(var[0][1] == 0.0);
  // population variance of a varying neuron, checked by hand
  trace<float> tr;
  forward_trace(net, 40, x.data(), tr);
  const auto a = tr.activation(2);
  double mean = 0, sq = 0;
  for (std::size_t s = 0; s < 40; ++s) mean += a[s * 12 + 5];
  mean /= 40;
  for (std::size_t s = 0; s < 40; ++s) sq += (a[s * 12 + 5] - mean) * (a[s * 12 + 5] - mean);
  CHECK(avg[0][5] == doctest::Approx(mean).epsilon(1e-9));
  CHECK(var[0][5] == doctest::Approx(sq / 40).epsilon(1e-9));
  for (const auto& cs : category_neuron_scores(net, x, y, metric::ens)) {
    for (const auto& u : cs)
      for (double v : u) {
        CHECK(v >= 0.0);
        CHECK(v <= 1.0);
      }
  }
  // conv channels: the spatial mean; chunking (batch) does not change the result
  Cnn cnn;
  initialize(cnn, 6);
  const auto xc = rand_x<float>(10, {2, 6, 6}, 7);
  const auto yc = round_labels(10, 3);
  const auto v1 = neuron_scores(cnn, xc, yc, metric::var, {.batch = 3});
  const auto v2 = neuron_scores(execution::par, cnn, xc, yc, metric::var, {.batch = 10});
  for (std::size_t u = 0; u < v1.size(); ++u)
    for (std::size_t n = 0; n < v1[u].size(); ++n) CHECK(v1[u][n] == doctest::Approx(v2[u][n]).epsilon(1e-10));
}

TEST_CASE("oracle 10: DeepLIFT completeness -- a layer's attributions sum to logit_c(x) - logit_c(0)") {
  auto check = [](const auto& net, const auto& x, std::size_t n) {
    const auto y = round_labels(n, 3);
    const auto sc = category_neuron_scores(net, x, y, metric::deeplift, {}, {.batch = 4});
    using T = network_scalar_t<std::decay_t<decltype(net)>>;
    const auto logits = forward(net, x);
    std::vector<std::size_t> one_shape(x.shape().begin(), x.shape().end());
    one_shape[0] = 1;
    const xt::xarray<T> z0 = xt::zeros<T>(one_shape);
    const auto l0 = forward(net, z0);
    for (std::size_t c = 0; c < 3; ++c) {
      double want = 0;
      std::size_t cnt = 0;
      for (std::size_t i = c; i < n; i += 3, ++cnt) want += double(logits(i, c)) - double(l0(0, c));
      want /= double(cnt);
      for (std::size_t u = 0; u < sc[c].size(); ++u) {
        const double got = std::accumulate(sc[c][u].begin(), sc[c][u].end(), 0.0);
        CHECK(got == doctest::Approx(want).epsilon(1e-6));
      }
    }
  };
  Mlp mlp;
  initialize(mlp, 12);
  for (auto& v : std::get<0>(mlp.layers).b) v = 0.2f;  // a non-trivial baseline
  const auto md = network_cast<double>(mlp);
  check(md, rand_x<double>(12, {6}, 13), 12);
  LeakyMlp lm;
  initialize(lm, 14);
  std::get<1>(lm.layers).alpha = 0.1;
  check(network_cast<double>(lm), rand_x<double>(9, {6}, 15), 9);
  Cnn cnn;
  initialize(cnn, 16);
  auto& bn = std::get<1>(cnn.layers);
  for (std::size_t c = 0; c < 4; ++c) bn.running_mean(c) = 0.1f * float(c), bn.beta(c) = 0.05f;
  check(network_cast<double>(cnn), rand_x<double>(6, {2, 6, 6}, 17), 6);
  // max pool: routed by x's arg-max (no completeness promised): it runs and is finite
  MaxCnn mc;
  initialize(mc, 18);
  const auto sc = category_neuron_scores(mc, rand_x<float>(6, {1, 6, 6}, 19), round_labels(6, 3), metric::deeplift);
  for (const auto& c : sc)
    for (const auto& u : c)
      for (double v : u) CHECK(std::isfinite(v));
}

TEST_CASE("Taylor: the gate form against finite differences of the mean cross-entropy") {
  Sequential<Input<3>, Dense<4>, ReLU, Dense<3>, ReLU, Dense<2>> f;
  initialize(f, 22);
  auto net = network_cast<double>(f);
  const auto x = rand_x<double>(10, {3}, 23);
  const auto y = round_labels(10, 2);
  const std::size_t bs = 3;
  const auto sc = category_neuron_scores(net, x, y, metric::taylor, {1}, {.batch = bs});
  const auto us = neuron_units(net);
  std::vector<std::size_t> d1;
  for (std::size_t i = 0; i < 10; ++i)
    if (y[i] == 1) d1.push_back(i);  // 5 samples: mini-batches of 3 and 2
  auto loss = [&](const auto& n, std::size_t lo, std::size_t b) {
    xt::xarray<double> xb = xt::zeros<double>({b, std::size_t(3)});
    for (std::size_t s = 0; s < b; ++s)
      for (std::size_t j = 0; j < 3; ++j) xb(s, j) = x(d1[lo + s], j);
    const auto lg = forward(n, xb);
    const std::vector<std::size_t> lab(b, 1);
    return train::softmax_cross_entropy<double, std::size_t>(std::span<const double>(lg.data(), lg.size()), 2, lab);
  };
  for (std::size_t u = 0; u < 2; ++u)
    for (std::size_t k = 0; k < us[u].neurons; ++k) {
      double want = 0;
      std::size_t batches = 0;
      for (std::size_t lo = 0; lo < d1.size(); lo += bs, ++batches) {
        const std::size_t b = std::min(bs, d1.size() - lo);
        double s = 0;
        detail::for_each_unit_parameter(net, us[u], k, [&](std::size_t t, std::size_t e) {
          auto p = net;
          auto ps = parameter_spans(p);
          const double w = ps[t][e], h = 1e-6;
          ps[t][e] = w + h;
          const double lp = loss(p, lo, b);
          ps[t][e] = w - h;
          const double lm = loss(p, lo, b);
          s += w * (lp - lm) / (2 * h);
        });
        want += s * s;
      }
      want /= double(batches);
      CHECK(sc[0][u][k] == doctest::Approx(want).epsilon(1e-5).scale(1e-9));
    }
}

TEST_CASE("semslice: oracles 3 (theta-monotone) and 11 (union); the output unit; determinism") {
  Mlp net;
  initialize(net, 31);
  const auto x = rand_x<float>(60, {6}, 32);
  const auto y = round_labels(60, 3);
  std::vector<semslice_result> rs;
  for (double th : {0.5, 0.8, 0.9, 0.95, 0.99, 1.0}) {
    semslice_options o;
    o.metric = metric::var;
    o.theta = th;
    rs.push_back(semslice(net, x, y, o));
  }
  const auto us = neuron_units(net);
  for (std::size_t i = 0; i < rs.size(); ++i) {
    const auto& r = rs[i];
    CHECK(r.report.categories == std::vector<std::size_t>{0, 1, 2});
    CHECK(r.report.samples == std::vector<std::size_t>{20, 20, 20});
    for (std::size_t u = 0; u < us.size(); ++u) {
      const auto& ur = r.report.units[u];
      if (us[u].output) {
        CHECK(r.mask.kept(u) == us[u].neurons);
        continue;
      }
      std::size_t sum = 0;
      for (std::size_t c = 0; c < 3; ++c) {
        CHECK(ur.k[c] >= 1);
        sum += ur.k[c];
        for (std::size_t j = 0; j < ur.k[c]; ++j) CHECK(r.mask.keep[u][ur.order[c][j]] == 1);  // union contains each
        if (i > 0) {  // theta-monotone per (unit, category): same order, k does not shrink
          CHECK(rs[i - 1].report.units[u].order[c] == ur.order[c]);
          CHECK(rs[i - 1].report.units[u].k[c] <= ur.k[c]);
        }
      }
      CHECK(r.mask.kept(u) <= sum);
      CHECK(ur.kept == r.mask.kept(u));
      if (i > 0)
        for (std::size_t n = 0; n < us[u].neurons; ++n) CHECK((rs[i - 1].mask.keep[u][n] <= r.mask.keep[u][n]));
    }
  }
  // par == seq; the same seed gives the same slice; m = samples_per_category when D_c is larger
  semslice_options o;
  o.metric = metric::taylor;
  o.samples_per_category = 7;
  o.seed = 5;
  o.theta = 0.9;
  const auto a = semslice(net, x, y, o);
  const auto b = semslice(execution::par, net, x, y, o);
  CHECK(a.mask.keep == b.mask.keep);
  CHECK(a.report.samples == std::vector<std::size_t>{7, 7, 7});
  for (std::size_t u = 0; u < us.size(); ++u) CHECK(a.report.units[u].sim == b.report.units[u].sim);
  o.metric = metric::deeplift;
  o.similarity = similarity::unbiased;
  const auto c1 = semslice(execution::par, net, x, y, o);
  const auto c2 = semslice(execution::par, net, x, y, o);
  CHECK(c1.mask.keep == c2.mask.keep);
  CHECK(c1.report.units[0].scores == c2.report.units[0].scores);
}

TEST_CASE("semslice on a CNN: channels as neurons, both feature maps, every metric") {
  Cnn net;
  initialize(net, 41);
  const auto x = rand_x<float>(18, {2, 6, 6}, 42);
  const auto y = round_labels(18, 3);
  for (auto mt : {metric::avg, metric::var, metric::ens, metric::taylor, metric::deeplift})
    for (auto fm : {feature_map::full, feature_map::spatial_mean}) {
      semslice_options o;
      o.metric = mt;
      o.features = fm;
      o.theta = 0.9;
      const auto r = semslice(execution::par, net, x, y, o);
      REQUIRE(r.mask.keep.size() == 4);
      CHECK(r.mask.keep[0].size() == 4);
      CHECK(r.mask.keep[1].size() == 5);
      for (std::size_t u = 0; u < 3; ++u) CHECK(r.mask.kept(u) >= 1);
      CHECK(r.mask.kept(3) == 3);
      CHECK(r.report.units[0].scores[0].size() == 4);
    }
}

TEST_CASE("baselines: global and category-wise top-k masks") {
  Mlp net;
  initialize(net, 51);
  const auto x = rand_x<float>(30, {6}, 52);
  const auto y = round_labels(30, 3);
  const auto g = neuron_scores(net, x, y, metric::avg);
  const auto m = global_topk_mask(net, g, 50);
  CHECK(m.kept(0) == 6);
  CHECK(m.kept(1) == 4);
  CHECK(m.kept(2) == 3);
  const auto ord = order_by_score(g[0]);
  for (std::size_t j = 0; j < 6; ++j) CHECK(m.keep[0][ord[j]] == 1);
  CHECK(global_topk_mask(net, g, 100).keep == full_mask(net).keep);
  CHECK(global_topk_mask(net, g, 10).kept(0) == 2);  // ceil(1.2)
  const auto cs = category_neuron_scores(net, x, y, metric::avg);
  const auto cm = category_topk_mask(net, cs, 30);
  std::size_t sum = 0;
  for (const auto& c : cs) {
    const auto mc = global_topk_mask(net, c, 30);
    sum += mc.kept(0);
    for (std::size_t n = 0; n < 12; ++n) CHECK(cm.keep[0][n] >= mc.keep[0][n]);
  }
  CHECK(cm.kept(0) <= sum);
  CHECK_THROWS_AS(global_topk_mask(net, g, 0), value_error);
  CHECK_THROWS_AS(global_topk_mask(net, g, 101), value_error);
  auto bad = g;
  bad[0].pop_back();
  CHECK_THROWS_AS(global_topk_mask(net, bad, 50), data_error);
}

TEST_CASE("errors: theta outside (0, 1]; a category without samples; bad inputs") {
  Mlp net;
  initialize(net, 61);
  const auto x = rand_x<float>(12, {6}, 62);
  const auto y = round_labels(12, 3);
  for (double th : {0.0, -0.5, 1.0000001, std::nan("")}) {
    semslice_options o;
    o.theta = th;
    CHECK_THROWS_AS(semslice(net, x, y, o), value_error);
  }
  gram_scan g(std::span<const double>(hand), 3, 3, 1);
  const std::size_t ord[] = {0, 1, 2};
  CHECK_THROWS_AS(linear_scan(g, ord, 1, 0.0), value_error);
  CHECK_THROWS_AS(linear_scan(g, ord, 1, 1.5), value_error);
  CHECK_THROWS_AS(linear_scan(g, ord, 0, 0.5), value_error);
  const std::size_t twice[] = {0, 0};
  CHECK_THROWS_AS(g.add(twice), value_error);
  std::vector<int> y2 = y;
  for (auto& v : y2)
    if (v == 2) v = 1;  // class 2 has no samples
  try {
    (void)semslice(net, x, y2);
    FAIL("expected data_error");
  } catch (const data_error& e) {
    CHECK(std::string(e.what()).find("category 2") != std::string::npos);
  }
  semslice_options o;
  o.categories = {0, 1};  // restricting the categories avoids it
  const auto r = semslice(net, x, y2, o);
  CHECK(r.report.categories == std::vector<std::size_t>{0, 1});
  o.categories = {0, 0};
  CHECK_THROWS_AS(semslice(net, x, y2, o), data_error);
  o.categories = {3};
  CHECK_THROWS_AS(semslice(net, x, y2, o), data_error);
  std::vector<int> y3 = y;
  y3[4] = 7;
  CHECK_THROWS_AS(semslice(net, x, y3), data_error);
  CHECK_THROWS_AS(semslice(net, x, std::vector<int>(5, 0)), data_error);
  auto xn = x;
  xn(3, 2) = std::nanf("");
  CHECK_THROWS_AS(semslice(net, xn, y), value_error);
  CHECK_THROWS_AS(semslice(net, rand_x<float>(4, {5}, 1), std::vector<int>(4, 0)), shape_error);
  semslice_options z;
  z.samples_per_category = 0;
  CHECK_THROWS_AS(semslice(net, x, y, z), value_error);
  // Taylor and DeepLIFT need the logits
  Sequential<Input<6>, Dense<4>, ReLU, Dense<3>, Softmax> sm;
  initialize(sm, 63);
  CHECK_THROWS_AS(neuron_scores(sm, x, y, metric::taylor), value_error);
  CHECK_THROWS_AS(neuron_scores(sm, x, y, metric::deeplift), value_error);
  CHECK_NOTHROW(neuron_scores(sm, x, y, metric::var));
}

TEST_CASE("a DynamicNetwork gives the Sequential's slice; a residual network slices its top-level units") {
  Cnn net;
  initialize(net, 71);
  auto& bn = std::get<1>(net.layers);
  for (std::size_t c = 0; c < 4; ++c) bn.beta(c) = 0.1f * float(c);
  const auto dnet = to_dynamic(net);
  const auto x = rand_x<float>(15, {2, 6, 6}, 72);
  const auto y = round_labels(15, 3);
  for (auto mt : {metric::ens, metric::taylor, metric::deeplift}) {
    semslice_options o;
    o.metric = mt;
    o.theta = 0.9;
    o.metrics.taylor_with_batch_norm = mt == metric::taylor;
    const auto a = semslice(net, x, y, o);
    const auto b = semslice(execution::par, dnet, x, y, o);
    CHECK(a.mask.keep == b.mask.keep);
    for (std::size_t u = 0; u < a.report.units.size(); ++u) {
      CHECK(a.report.units[u].k == b.report.units[u].k);
      for (std::size_t c = 0; c < 3; ++c)
        for (std::size_t n = 0; n < a.report.units[u].neurons; ++n)
          CHECK(a.report.units[u].scores[c][n] == doctest::Approx(b.report.units[u].scores[c][n]).epsilon(1e-6));
    }
  }
  Sequential<Input<6>, Dense<6>, ReLU, Residual<Block<Dense<6>, ReLU, Dense<6>>>, ReLU, Dense<5>, ReLU, Dense<3>> res;
  initialize(res, 73);
  const auto xr = rand_x<float>(21, {6}, 74);
  const auto yr = round_labels(21, 3);
  for (auto mt : {metric::taylor, metric::deeplift}) {
    semslice_options o;
    o.metric = mt;
    const auto r = semslice(res, xr, yr, o);
    CHECK(r.mask.keep.size() == 3);  // Dense<6>, Dense<5>, the output
    CHECK(r.mask.kept(0) >= 1);
    CHECK(r.mask.kept(2) == 3);
  }
}
