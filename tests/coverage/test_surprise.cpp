// LSA / DSA and LSC / DSC (coverage/surprise.hpp): LSA against a direct KDE formula, DSA on a 2-D
// hand example, buckets, the covered-set properties, degenerate covariances, save/load and errors.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nnlens/coverage/surprise.hpp>
#include <nnlens/nnlens.hpp>

#include <xtensor/xview.hpp>

namespace {

using namespace nnlens;

template <std::size_t Out>
Dense<Out, double> dense_A(const std::vector<std::vector<double>>& A) {
  Dense<Out, double> d;
  const std::size_t in = A.at(0).size();
  d.W = tensor<double, 2>::from_shape({in, Out});
  d.b = tensor<double, 1>::from_shape({Out});
  for (std::size_t o = 0; o < Out; ++o) {
    for (std::size_t i = 0; i < in; ++i) d.W(i, o) = A.at(o).at(i);
    d.b(o) = 0;
  }
  return d;
}

xt::xarray<double> rows_of(const std::vector<std::vector<double>>& rows) {
  xt::xarray<double> x = xt::xarray<double>::from_shape({rows.size(), rows.at(0).size()});
  std::size_t k = 0;
  for (const auto& r : rows)
    for (double v : r) x.data()[k++] = v;
  return x;
}

// AT = x (layer 0, identity), logits = x (layer 1): class 0 when x0 >= x1, else class 1.
using Net2 = Sequential<Input<2>, Dense<2, double>, Dense<2, double>>;
Net2 net2() {
  Net2 n;
  std::get<0>(n.layers) = dense_A<2>({{1, 0}, {0, 1}});
  std::get<1>(n.layers) = dense_A<2>({{1, 0}, {0, 1}});
  return n;
}
// 3-D ATs, class = argmax(x0, x1)
using Net3 = Sequential<Input<3>, Dense<3, double>, Dense<2, double>>;
Net3 net3() {
  Net3 n;
  std::get<0>(n.layers) = dense_A<3>({{1, 0, 0}, {0, 1, 0}, {0, 0, 1}});
  std::get<1>(n.layers) = dense_A<2>({{1, 0, 0}, {0, 1, 0}});
  return n;
}

/// -log of scipy's gaussian_kde (Scott) of the 2-D points P at x, directly (O(N)).
double direct_lsa_2d(const std::vector<std::vector<double>>& P, std::vector<double> x) {
  const double n = double(P.size());
  double m0 = 0, m1 = 0;
  for (const auto& p : P) m0 += p[0], m1 += p[1];
  m0 /= n, m1 /= n;
  double a = 0, b = 0, c = 0;  // cov [[a, b], [b, c]], ddof 1
  for (const auto& p : P) a += (p[0] - m0) * (p[0] - m0), b += (p[0] - m0) * (p[1] - m1), c += (p[1] - m1) * (p[1] - m1);
  const double f2 = std::pow(n, -2.0 / 6.0);
  a *= f2 / (n - 1), b *= f2 / (n - 1), c *= f2 / (n - 1);
  const double det = a * c - b * b;
  double dens = 0;
  for (const auto& p : P) {
    const double u = x[0] - p[0], v = x[1] - p[1];
    const double q = (c * u * u - 2 * b * u * v + a * v * v) / det;
    dens += std::exp(-0.5 * q) / (2 * std::numbers::pi * std::sqrt(det));
  }
  return -std::log(dens / n);
}

const std::vector<std::vector<double>> class0 = {{3, 1}, {4, 0.5}, {5, 2}, {3.5, -1}, {6, 1}, {4.5, 3}};
const std::vector<std::vector<double>> class1 = {{0, 2}, {1, 3}, {-1, 1.5}, {0.5, 4}, {2, 2.5}};

xt::xarray<double> train2() {
  std::vector<std::vector<double>> all;
  // interleaved, so grouping by class reorders
  for (std::size_t i = 0; i < 6; ++i) {
    all.push_back(class0[i]);
    if (i < class1.size()) all.push_back(class1[i]);
  }
  return rows_of(all);
}

xt::xarray<double> random_rows(std::size_t n, std::size_t d, std::uint64_t seed, double s = 1) {
  xt::xarray<double> x = xt::xarray<double>::from_shape({n, d});
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> u(0, s);
  for (auto& v : x) v = u(rng);
  return x;
}
xt::xarray<double> take(const xt::xarray<double>& X, const std::vector<std::size_t>& idx) {
  xt::xarray<double> r = xt::xarray<double>::from_shape({idx.size(), X.shape()[1]});
  for (std::size_t i = 0; i < idx.size(); ++i) xt::view(r, i) = xt::view(X, idx[i]);
  return r;
}

}  // namespace

TEST_CASE("surprise_model: grouping by predicted class, default layers") {
  const auto net = net2();
  const auto m = prepare_surprise(net, train2(), 0);
  CHECK(m.layers() == std::vector<std::size_t>{0, 1});
  CHECK(m.dims == 2);
  CHECK(m.classes == 2);
  CHECK(m.samples() == 11);
  CHECK(m.class_size(0) == 6);
  CHECK(m.class_size(1) == 5);
  // rows of class 0 first, in training order: training indices 0, 2, 4, 6, 8, 10
  CHECK(m.index == std::vector<std::size_t>{0, 2, 4, 6, 8, 10, 1, 3, 5, 7, 9});
  CHECK(m.kept() == std::vector<std::size_t>{0, 1});
  CHECK(m.class_ridge(0) == 0);
  // LeNet-like default: the output feeding the last weighted layer
  Sequential<Input<4>, Dense<5, double>, ReLU, Dense<3, double>> mlp;
  CHECK(surprise_default_layer(mlp) == 1);
}

TEST_CASE("LSA equals the direct O(N) Gaussian KDE formula (Scott's bandwidth)") {
  const auto net = net2();
  const auto m = prepare_surprise(net, train2(), 0);
  const std::vector<std::vector<double>> qs = {{4, 1}, {3, 2.5}, {5.5, 0}, {0, 1}, {1, 2}, {-0.5, 3}};
  const auto v = lsa_values(net, m, rows_of(qs));
  REQUIRE(v.size() == qs.size());
  for (std::size_t i = 0; i < qs.size(); ++i) {
    CAPTURE(i);
    const auto& P = qs[i][0] >= qs[i][1] ? class0 : class1;
    CHECK(v[i] == doctest::Approx(direct_lsa_2d(P, qs[i])).epsilon(1e-10));
  }
  // far away: the direct density underflows to 0 (LSA = inf), log-sum-exp stays finite
  const auto far = lsa_values(net, m, rows_of({{400, 0}}));
  CHECK(std::isinf(direct_lsa_2d(class0, {400, 0})));
  CHECK(std::isfinite(far[0]));
  CHECK(far[0] > 1000);
  // par == seq, exactly
  CHECK(lsa_values(execution::par, net, m, rows_of(qs)) == v);
}

TEST_CASE("DSA: 2-D hand example") {
  const auto net = net2();
  // class 0: (3,1) (5,2); class 1: (0,2) (1,4)
  const auto m = prepare_surprise(net, rows_of({{3, 1}, {0, 2}, {5, 2}, {1, 4}}), 0);
  // (4,1), class 0: x_a = (3,1) (1 < sqrt 2), dist_a = 1; dist_b = |(3,1) - (0,2)| = sqrt 10
  // (1,3), class 1: x_a = (1,4) (1 < sqrt 2), dist_a = 1; dist_b = |(1,4) - (3,1)| = sqrt 13
  // (3,1) itself: dist_a = 0
  const auto v = dsa_values(net, m, rows_of({{4, 1}, {1, 3}, {3, 1}, {9, 2}}));
  CHECK(v[0] == doctest::Approx(1 / std::sqrt(10.0)).epsilon(1e-14));
  CHECK(v[1] == doctest::Approx(1 / std::sqrt(13.0)).epsilon(1e-14));
  CHECK(v[2] == 0);
  // (9,2): x_a = (5,2), dist_a = 4; dist_b = |(5,2) - (1,4)| = sqrt 20
  CHECK(v[3] == doctest::Approx(4 / std::sqrt(20.0)).epsilon(1e-14));
  const double q[2] = {4, 1};
  const std::size_t c = 0;
  CHECK(m.nearest_same_class(q, 2, &c, 1) == std::vector<std::size_t>{0});
  CHECK(dsa_values(execution::par, net, m, rows_of({{4, 1}, {1, 3}, {3, 1}, {9, 2}})) == v);
}

TEST_CASE("LSC / DSC: buckets, overflow, hand-worked") {
  const auto net = net2();
  const auto m = std::make_shared<const surprise_model>(prepare_surprise(net, rows_of({{3, 1}, {0, 2}, {5, 2}, {1, 4}}), 0));
  dsc_criterion dsc(m, {.buckets = 10, .lower = 0, .upper = 1});
  CHECK(dsc.name() == "dsc");
  // DSA 0.316 -> bucket 3, 0.277 -> 2, 0 -> 0, 0.894 -> 8
  auto r = measure(net, rows_of({{4, 1}, {1, 3}}), dsc);
  CHECK(r.covered == 2);
  CHECK(r.total == 10);
  CHECK(dsc.covered().test(3));
  CHECK(dsc.covered().test(2));
  r = measure(net, rows_of({{3, 1}, {9, 2}, {4, 1}}), dsc);
  CHECK(r.covered == 4);
  // (30, 2): x_a = (5,2), DSA = 25 / sqrt 20 = 5.6 > 1: ignored, unless count_overflow
  CHECK(measure(net, rows_of({{30, 2}}), dsc).covered == 4);
  dsc_criterion over(m, {.buckets = 10, .lower = 0, .upper = 1, .count_overflow = true});
  r = measure(net, rows_of({{30, 2}, {4, 1}}), over);
  CHECK(r.covered == 2);
  CHECK(r.total == 12);
  CHECK(over.covered().test(11));
  CHECK(over.bucket(-1) == 10);
  CHECK(over.bucket(1.0) == 9);  // the top edge is in the last bucket
  // defaults: 1000 buckets on [0, 2] (DSA), [0, 2000] (LSA)
  dsc_criterion d0(m);
  CHECK(d0.options().upper == 2);
  CHECK(d0.result().total == 1000);
  const auto m2 = std::make_shared<const surprise_model>(prepare_surprise(net, train2(), 0));
  lsc_criterion lsc(m2);
  CHECK(lsc.name() == "lsc");
  CHECK(lsc.options().upper == 2000);
  const auto qs = rows_of({{4, 1}, {3, 2.5}, {0, 1}});
  const auto lv = lsa_values(net, *m2, qs);
  r = measure(net, qs, lsc);
  std::vector<std::size_t> bs;
  for (double v : lv) bs.push_back(std::size_t(v / 2));  // bucket width 2
  std::sort(bs.begin(), bs.end());
  bs.erase(std::unique(bs.begin(), bs.end()), bs.end());
  CHECK(r.covered == bs.size());
  for (auto b : bs) CHECK(lsc.covered().test(b));
}

TEST_CASE("LSC / DSC: monotone, mergeable, order and duplicate invariant, deterministic") {
  using Mlp = Sequential<Input<4>, Dense<8, double>, ReLU, Dense<6, double>, ReLU, Dense<3, double>>;
  Mlp net;
  initialize(net, 7);
  const auto train = random_rows(400, 4, 41);
  const auto test = random_rows(60, 4, 42, 1.5);
  const auto m = std::make_shared<const surprise_model>(prepare_surprise(net, train, surprise_default_layer(net)));
  CHECK(m->layer == 3);
  auto check = [&](auto fresh) {
    using C = decltype(fresh);
    C whole = fresh;
    const auto rw = measure(net, test, whole);
    CHECK(rw.covered > 3);
    C inc = fresh;
    std::size_t last = 0;
    for (std::size_t i = 0; i < 60; ++i) {
      const auto r = measure(net, take(test, {i}), inc);
      CHECK(r.covered >= last);
      last = r.covered;
    }
    CHECK(inc.covered() == whole.covered());
    std::vector<std::size_t> a, b, rev;
    for (std::size_t i = 0; i < 60; ++i) (i % 2 ? a : b).push_back(i);
    C ca = fresh, cb = fresh;
    measure(net, take(test, a), ca);
    measure(net, take(test, b), cb);
    CHECK(merge(ca, cb).covered() == whole.covered());
    for (std::size_t i = 60; i-- > 0;) rev.insert(rev.end(), {i, i});
    C cr = fresh;
    measure(net, take(test, rev), cr);
    CHECK(cr.covered() == whole.covered());
    C cp = fresh;
    measure(execution::par, net, test, cp);
    CHECK(cp.covered() == whole.covered());
  };
  SUBCASE("lsc") { check(lsc_criterion(m, {.buckets = 200, .lower = -20, .upper = 40})); }
  SUBCASE("dsc") { check(dsc_criterion(m, {.buckets = 200})); }
  SUBCASE("raw values: block splits and threads change nothing") {
    const auto l1 = lsa_values(net, *m, test);
    const auto d1 = dsa_values(net, *m, test);
    std::vector<double> l2, d2;
    for (std::size_t i = 0; i < 60; ++i) {
      l2.push_back(lsa_values(net, *m, take(test, {i}))[0]);
      d2.push_back(dsa_values(execution::par, net, *m, take(test, {i}))[0]);
    }
    CHECK(l1 == l2);
    CHECK(d1 == d2);
    for (double v : l1) CHECK(std::isfinite(v));
    for (double v : d1) CHECK((std::isfinite(v) && v >= 0));
  }
}

TEST_CASE("LSA: singular class covariances fall back to a ridge, deterministically") {
  const auto net = net3();
  // class 0 (x0 >= x1): 2 samples in 3 dims (n < d); class 1: collinear (on a line)
  const auto X = rows_of({{3, 1, 0.5}, {4, 0, 2}, {0, 1, 1}, {0, 2, 2}, {0, 3, 3}, {0, 4, 4}});
  const surprise_options glob{.filter = variance_filter::global};
  const auto m = prepare_surprise(net, X, 0, glob);
  CHECK(m.kept().size() == 3);
  CHECK(m.class_ridge(0) > 0);
  CHECK(m.class_ridge(1) > 0);
  const auto q = rows_of({{3.5, 0.5, 1.2}, {0, 2.5, 2.5}, {0, 2.5, 1}, {5, 5, 5}});
  const auto v = lsa_values(net, m, q);
  for (double x : v) CHECK(std::isfinite(x));
  CHECK(v[2] > v[1]);  // off the line is more surprising than on it
  CHECK(lsa_values(net, prepare_surprise(net, X, 0, glob), q) == v);
  // one training input in a class: S = 0, still finite (it does not vote in the per-class filter)
  const auto m1 = prepare_surprise(net, rows_of({{3, 1, 0.5}, {0, 1, 1}, {0, 2, 3}, {0, 4, 4}}), 0);
  CHECK(m1.class_size(0) == 1);
  CHECK(m1.class_ridge(0) > 0);
  CHECK(std::isfinite(lsa_values(net, m1, rows_of({{3, 1, 0.6}}))[0]));
  // no training input of the predicted class: LSA = DSA = +inf (ignored by the buckets)
  const auto m0 = prepare_surprise(net, rows_of({{0, 1, 1}, {0, 2, 3}, {0, 4, 4}, {1, 2, 3}}), 0);
  CHECK(m0.class_size(0) == 0);
  CHECK(std::isinf(lsa_values(net, m0, rows_of({{3, 1, 0}}))[0]));
  lsc_criterion lsc(m0);
  CHECK(measure(net, rows_of({{3, 1, 0}}), lsc).covered == 0);
  CHECK_THROWS_AS(dsa_values(net, m0, rows_of({{3, 1, 0}})), data_error);  // one class only: no dist_b
}

TEST_CASE("variance filter: global vs per-class union") {
  const auto net = net3();
  // x2 is constant (7) within class 0 but varies in class 1; x1 varies everywhere
  const auto X = rows_of({{3, 1, 7}, {4, 0, 7}, {5, 2, 7}, {0, 1, 1}, {0, 2, 3}, {1, 4, 2}});
  const auto g = prepare_surprise(net, X, 0, {.filter = variance_filter::global});
  CHECK(g.kept() == std::vector<std::size_t>{0, 1, 2});
  CHECK(g.class_ridge(0) > 0);  // x2 constant within class 0: singular
  const auto u = prepare_surprise(net, X, 0);  // the default: per_class_union
  CHECK(u.kept() == std::vector<std::size_t>{0, 1});  // x2 dropped: its variance within class 0 is 0
  CHECK(u.class_ridge(0) == 0);
  CHECK(u.class_ridge(1) == 0);
}

TEST_CASE("save_surprise / load_surprise: round trip; other models, truncated and garbage files") {
  const auto net = net2();
  const auto m = prepare_surprise(net, train2(), 0, {.filter = variance_filter::per_class_union});
  std::stringstream ss;
  save_surprise(ss, m);
  const std::string text = ss.str();
  CHECK(text.rfind("nnlens-coverage-surprise 1\n", 0) == 0);
  std::istringstream in(text);
  const auto l = load_surprise(in, net);
  CHECK(l.same_preparation(m));
  const auto q = rows_of({{4, 1}, {3, 2.5}, {0, 1}, {7, -3}});
  CHECK(lsa_values(net, l, q) == lsa_values(net, m, q));
  CHECK(dsa_values(net, l, q) == dsa_values(net, m, q));
  lsc_criterion a(m), b(l);
  measure(net, q, a);
  CHECK_NOTHROW(b.merge(a));
  // another model
  auto other = net2();
  std::get<1>(other.layers).W(0, 0) = 2;
  {
    std::istringstream i2(text);
    try {
      (void)load_surprise(i2, other);
      FAIL("expected a data_error");
    } catch (const data_error& e) {
      CHECK(std::string(e.what()).find("another model") != std::string::npos);
    }
  }
  for (std::size_t cut = 0; cut < text.size(); cut += 3) {
    std::istringstream t(text.substr(0, cut));
    CHECK_THROWS_AS((void)load_surprise(t, net), data_error);
  }
  for (const std::string& g : {std::string(), std::string("x\n"), std::string("nnlens-coverage-surprise 1\nfingerprint 1 2\n"),
                               text.substr(0, text.find("at ")) + "at 0 1 2\n"}) {
    std::istringstream t(g);
    CHECK_THROWS_AS((void)load_surprise(t, net), data_error);
  }
  std::string dup = text;
  const auto p = dup.find("\nat 2 ");
  REQUIRE(p != std::string::npos);
  dup.replace(p, 6, "\nat 0 ");
  std::istringstream t(dup);
  CHECK_THROWS_AS((void)load_surprise(t, net), data_error);
}

TEST_CASE("surprise: errors") {
  const auto net = net2();
  CHECK_THROWS_AS(prepare_surprise(net, train2(), 2), value_error);
  CHECK_THROWS_AS(prepare_surprise(net, train2(), 0, {.output_layer = 5}), value_error);
  const xt::xarray<double> empty = xt::xarray<double>::from_shape({0, 2});
  CHECK_THROWS_AS(prepare_surprise(net, empty, 0), data_error);
  const auto m = std::make_shared<const surprise_model>(prepare_surprise(net, train2(), 0));
  CHECK_THROWS_AS(lsc_criterion(m, {.buckets = 0}), value_error);
  CHECK_THROWS_AS(lsc_criterion(m, {.lower = 5, .upper = 1}), value_error);
  CHECK_THROWS_AS(dsc_criterion(std::shared_ptr<const surprise_model>()), value_error);
  CHECK_THROWS_AS(merge(lsc_criterion(m), lsc_criterion(m, {.buckets = 10})), data_error);
  const auto m2 = std::make_shared<const surprise_model>(prepare_surprise(net, rows_of({{3, 1}, {0, 2}, {5, 2}}), 0));
  CHECK_THROWS_AS(merge(dsc_criterion(m), dsc_criterion(m2)), data_error);
  auto other = net2();
  std::get<0>(other.layers).b(0) = 1;
  CHECK_THROWS_AS(lsa_values(other, *m, train2()), data_error);
  // all AT dimensions filtered out: LSA is undefined, DSA is not
  const auto mc = prepare_surprise(net, train2(), 0, {.var_threshold = 1e6});
  CHECK(mc.kept().empty());
  CHECK_THROWS_AS(lsa_values(net, mc, train2()), data_error);
  CHECK_NOTHROW(dsa_values(net, mc, train2()));
}

TEST_CASE("DSA: ties go to the earlier training input; a DynamicNetwork gives the same values") {
  const auto net = net2();
  // class 0: (3,1) (5,1) (training rows 0, 2); class 1: (0,2) (1,4)
  const auto m = prepare_surprise(net, rows_of({{3, 1}, {0, 2}, {5, 1}, {1, 4}}), 0);
  const double q[2] = {4, 1};  // equidistant from (3,1) and (5,1)
  const std::size_t c = 0;
  CHECK(m.nearest_same_class(q, 2, &c, 1) == std::vector<std::size_t>{0});
  // x_a = (3,1), dist_a = 1, dist_b = |(3,1) - (0,2)| = sqrt 10
  CHECK(dsa_values(net, m, rows_of({{4, 1}}))[0] == doctest::Approx(1 / std::sqrt(10.0)).epsilon(1e-14));
  const auto dnet = to_dynamic(net);
  const auto md = prepare_surprise(dnet, train2(), 0);
  const auto ms = prepare_surprise(net, train2(), 0);
  CHECK(md.same_preparation(ms));
  const auto qs = rows_of({{4, 1}, {3, 2.5}, {0, 1}});
  CHECK(lsa_values(dnet, md, qs) == lsa_values(net, ms, qs));
  CHECK(dsa_values(dnet, md, qs) == dsa_values(net, ms, qs));
}

TEST_CASE("LSC: range() counts the inputs below, inside and above the range; the reference code's range") {
  const auto net = net2();
  const auto m = std::make_shared<const surprise_model>(prepare_surprise(net, train2(), 0));
  const auto qs = rows_of({{4, 1}, {3, 2.5}, {0, 1}, {1, 1}});
  auto lv = lsa_values(net, *m, qs);
  std::vector<double> s = lv;
  std::sort(s.begin(), s.end());
  REQUIRE(s[0] < s[1]);
  REQUIRE(s[1] < s[2]);
  REQUIRE(s[2] < s[3]);
  // [between the 1st and 2nd, between the 3rd and 4th]: 1 below, 2 inside, 1 above
  lsc_criterion c(m, {.buckets = 10, .lower = (s[0] + s[1]) / 2, .upper = (s[2] + s[3]) / 2});
  CHECK(c.range().inputs == 0);
  CHECK(c.range().in_range_fraction() == 0.0);
  const auto r = measure(net, qs, c);
  CHECK(c.range().inputs == 4);
  CHECK(c.range().below == 1);
  CHECK(c.range().in_range == 2);
  CHECK(c.range().above == 1);
  CHECK(c.range().nan == 0);
  CHECK(c.range().in_range_fraction() == 0.5);
  CHECK(r.covered >= 1);
  CHECK(r.covered <= 2);
  lsc_criterion d = c;
  d.merge(c);
  CHECK(d.range().inputs == 8);
  CHECK(d.range().in_range == 4);
  d.reset();
  CHECK(d.range().inputs == 0);
  CHECK(d.result().covered == 0);

  // the default range [0, 2000] ignores negative LSA (a density above 1) -- and says so
  lsc_criterion def(m);
  measure(net, qs, def);
  std::size_t negative = 0;
  for (double v : lv) negative += v < 0;
  CHECK(def.range().below == negative);
  CHECK(def.range().in_range == 4 - negative);
  CHECK(def.result().covered <= 4 - negative);

  // the reference code's reading: lower = the minimum LSA of the target set, so every input counts
  const auto ro = reference_surprise_range(lv, surprise_kind::lsa);
  CHECK(ro.lower == s[0]);
  CHECK(ro.upper == 2000);
  CHECK(ro.buckets == 1000);
  lsc_criterion ref(m, ro);
  measure(net, qs, ref);
  CHECK(ref.range().in_range == 4);
  CHECK(ref.range().in_range_fraction() == 1.0);
  CHECK(ref.covered().test(0));  // the minimum opens the first bucket
  CHECK(ref.result().covered >= 1);  // (wider buckets: not necessarily more than the default's)
  lv.push_back(std::numeric_limits<double>::infinity());  // non-finite values are ignored
  CHECK(reference_surprise_range(lv, surprise_kind::lsa, 100, 50).lower == s[0]);
  CHECK(reference_surprise_range(lv, surprise_kind::lsa, 100, 50).upper == 100);
  CHECK(reference_surprise_range(std::vector<double>{0.5, 0.25}, surprise_kind::dsa).upper == 2);
  CHECK_THROWS_AS(reference_surprise_range(std::vector<double>{}, surprise_kind::lsa), value_error);
  CHECK_THROWS_AS(reference_surprise_range(std::vector<double>{NAN, INFINITY}, surprise_kind::lsa), value_error);
  CHECK_THROWS_AS(reference_surprise_range(std::vector<double>{3000}, surprise_kind::lsa), value_error);
}
