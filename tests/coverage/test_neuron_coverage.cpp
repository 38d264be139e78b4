// NC, KMNC, NBC, SNAC, TKNC (coverage/neuron_coverage.hpp): hand-worked examples on a tiny network,
// the covered-set properties (monotone, mergeable, order and duplicate invariant), bounds save/load
// and the error cases.
#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nnlens/coverage/neuron_coverage.hpp>
#include <nnlens/nnlens.hpp>

#include <xtensor/xview.hpp>

namespace {

using namespace nnlens;

/// Dense<Out, double> for y = A x + b (A: out x in); nnlens stores W = A^T.
template <std::size_t Out>
Dense<Out, double> dense_A(const std::vector<std::vector<double>>& A, std::vector<double> b = {}) {
  Dense<Out, double> d;
  const std::size_t in = A.at(0).size();
  d.W = tensor<double, 2>::from_shape({in, Out});
  d.b = tensor<double, 1>::from_shape({Out});
  for (std::size_t o = 0; o < Out; ++o) {
    for (std::size_t i = 0; i < in; ++i) d.W(i, o) = A.at(o).at(i);
    d.b(o) = b.empty() ? 0.0 : b.at(o);
  }
  return d;
}

xt::xarray<double> rows2(const std::vector<std::vector<double>>& rows) {
  xt::xarray<double> x = xt::xarray<double>::from_shape({rows.size(), rows.at(0).size()});
  std::size_t k = 0;
  for (const auto& r : rows)
    for (double v : r) x.data()[k++] = v;
  return x;
}

using Tiny = Sequential<Input<2>, Dense<3, double>, ReLU, Dense<2, double>>;

// Dense1 A = [[1,0],[0,1],[1,-1]]; Dense2 A = [[1,1,0],[0,0,1]]; no biases.
// Coverage layers: 0 Dense (cols 0-2), 1 ReLU (cols 3-5), 2 Dense (cols 6-7): N = 8.
Tiny tiny() {
  Tiny net;
  std::get<0>(net.layers) = dense_A<3>({{1, 0}, {0, 1}, {1, -1}});
  std::get<2>(net.layers) = dense_A<2>({{1, 1, 0}, {0, 0, 1}});
  return net;
}

// The training set of the bounds: (1,2), (2,1), (-1,0) give
//   Dense1 (1,2,-1) (2,1,1) (-1,0,-1); ReLU (1,2,0) (2,1,1) (0,0,0); Dense2 (3,0) (3,1) (0,0)
// low  = {-1, 0, -1,  0, 0, 0,  0, 0}; high = {2, 2, 1,  2, 2, 1,  3, 1}.
xt::xarray<double> tiny_train() { return rows2({{1, 2}, {2, 1}, {-1, 0}}); }

template <class C>
coverage_result feed(const Tiny& net, C& c, const std::vector<std::vector<double>>& rows) {
  return measure(net, rows2(rows), c);
}

/// A block over given rows (layers of the given widths).
struct owned_block {
  std::vector<double> data;
  neuron_block b;
  owned_block(const std::vector<std::vector<double>>& rows, const std::vector<std::size_t>& widths) {
    b.offsets.push_back(0);
    for (auto w : widths) b.offsets.push_back(b.offsets.back() + w);
    b.width = b.offsets.back();
    for (const auto& r : rows) {
      REQUIRE(r.size() == b.width);
      data.insert(data.end(), r.begin(), r.end());
    }
    b.rows = rows.size();
    b.data = data.data();
  }
};

}  // namespace

TEST_CASE("coverage_layers of the tiny network: every layer, 8 neurons") {
  const auto net = tiny();
  const auto ls = coverage_layers(net);
  REQUIRE(ls.size() == 3);
  const auto b = prepare_neuron_bounds(net, tiny_train());
  CHECK(b.layers() == std::vector<std::size_t>{0, 1, 2});
  CHECK(b.samples == 3);
  CHECK(b.low == std::vector<double>{-1, 0, -1, 0, 0, 0, 0, 0});
  CHECK(b.high == std::vector<double>{2, 2, 1, 2, 2, 1, 3, 1});
}

TEST_CASE("NC: hand-worked") {
  const auto net = tiny();
  nc_criterion nc(net);
  CHECK(nc.name() == "nc");
  // (1,2): Dense1 (1,2,-1) scaled (2/3,1,0) -> col 1; ReLU (1,2,0) -> (.5,1,0) -> col 4; Dense2 (3,0) -> col 6
  auto r = feed(net, nc, {{1, 2}});
  CHECK(r.covered == 3);
  CHECK(r.total == 8);
  CHECK(r.percent == doctest::Approx(37.5));
  // (2,1): Dense1 (2,1,1) -> col 0; ReLU (2,1,1) -> col 3; Dense2 (3,1) -> col 6
  r = feed(net, nc, {{2, 1}});
  CHECK(r.covered == 5);
  // (-1,0): Dense1 (-1,0,-1) -> col 1; ReLU and Dense2 constant (0): nothing
  r = feed(net, nc, {{-1, 0}});
  CHECK(r.covered == 5);
  for (std::size_t i : {0, 1, 3, 4, 6}) CHECK(nc.covered().test(i));
  // threshold 0.5: (1,2) covers Dense1 cols 0 (2/3) and 1, ReLU col 4 only (0.5 is not > 0.5), col 6
  nc_criterion half(net, {.threshold = 0.5});
  r = feed(net, half, {{1, 2}});
  CHECK(r.covered == 4);
  for (std::size_t i : {0, 1, 4, 6}) CHECK(half.covered().test(i));
  // chosen layers: only the ReLU
  nc_criterion relu(net, {.layers = {1}});
  CHECK(relu.layers() == std::vector<std::size_t>{1});
  r = feed(net, relu, {{1, 2}, {2, 1}});
  CHECK(r.covered == 2);
  CHECK(r.total == 3);
  // reset keeps the preparation, forgets the covered set
  nc.reset();
  CHECK(nc.result().covered == 0);
  CHECK(nc.result().total == 8);
}

TEST_CASE("TKNC: hand-worked, ties to the lower index") {
  const auto net = tiny();
  tknc_criterion t1(net, {.k = 1});
  CHECK(t1.name() == "tknc");
  // (1,2): cols 1, 4, 6; (2,1): cols 0, 3, 6; (-1,0): Dense1 (-1,0,-1) col 1, ReLU (0,0,0) col 3 (tie), Dense2 (0,0) col 6
  CHECK(feed(net, t1, {{1, 2}}).covered == 3);
  CHECK(feed(net, t1, {{2, 1}, {-1, 0}}).covered == 5);
  for (std::size_t i : {0, 1, 3, 4, 6}) CHECK(t1.covered().test(i));
  // k = 2 on (2,1): Dense1 (2,1,1) cols 0,1 (tie 1 = 1: the lower); ReLU cols 3,4; Dense2 cols 6,7
  tknc_criterion t2(net, {.k = 2});
  const auto r = feed(net, t2, {{2, 1}});
  CHECK(r.covered == 6);
  CHECK(!t2.covered().test(2));
  CHECK(!t2.covered().test(5));
  // k = 3 (the default): every layer has <= 3 neurons, so one input covers everything
  tknc_criterion t3(net);
  CHECK(t3.k() == 3);
  CHECK(feed(net, t3, {{-1, 0}}).percent == doctest::Approx(100.0));
}

TEST_CASE("KMNC: hand-worked sections, only values inside [low, high]") {
  const auto net = tiny();
  const auto b = std::make_shared<const neuron_bounds>(prepare_neuron_bounds(net, tiny_train()));
  kmnc_criterion km(b, 4);
  CHECK(km.name() == "kmnc");
  CHECK(km.layers() == std::vector<std::size_t>{0, 1, 2});
  // (0,1): Dense1 (0,1,-1): n0 (0+1)/3*4 = 1.33 -> 1; n1 1/2*4 -> 2; n2 -> 0
  //        ReLU (0,1,0): n3 0; n4 2; n5 0.  Dense2 (1,0): n6 4/3 -> 1; n7 0.      8 pairs of 32
  auto r = feed(net, km, {{0, 1}});
  CHECK(r.covered == 8);
  CHECK(r.total == 32);
  CHECK(r.percent == doctest::Approx(25.0));
  CHECK(km.covered().test(0 * 4 + 1));
  CHECK(km.covered().test(6 * 4 + 1));
  // (1,2): n0 2/3*4 = 2.67 -> 2; n1 2 = high -> 3 (the top edge is in the last section); n2 dup;
  //        n3 1 -> 2; n4 2 -> 3; n5 dup; n6 3 -> 3; n7 dup: 5 new
  r = feed(net, km, {{1, 2}});
  CHECK(r.covered == 13);
  CHECK(km.covered().test(1 * 4 + 3));
  // (3,0): Dense1 (3,0,3), ReLU (3,0,3), Dense2 (3,3): n0, n2, n3, n5, n7 are above high (ignored);
  //        n1 0 -> 0 (new), n4 0 -> 0 (new), n6 3 -> 3 (dup)
  r = feed(net, km, {{3, 0}});
  CHECK(r.covered == 15);
  CHECK(km.section(0, 2.5) == 4);   // outside: "k"
  CHECK(km.section(0, -1.0) == 0);  // low
  CHECK(km.section(0, 2.0) == 3);   // high
}

TEST_CASE("KMNC: a constant neuron (low == high) has one reachable section") {
  neuron_bounds nb;
  nb.cols.layers = {0};
  nb.cols.offsets = {0, 2};
  nb.low = {0, 1};
  nb.high = {1, 1};
  nb.samples = 1;
  kmnc_criterion km(nb, 10);
  owned_block blk({{0.55, 1.0}, {0.05, 1.5}, {1.0, 0.5}}, {2});
  km.add(blk.b);
  // n0: 0.55 -> 5, 0.05 -> 0, 1.0 -> 9; n1: 1.0 -> section 0, 1.5 and 0.5 outside
  const auto r = km.result();
  CHECK(r.covered == 4);
  CHECK(r.total == 20);
  CHECK(km.covered().test(10 + 0));
  nbc_criterion nb2(nb);
  nb2.add(blk.b);
  CHECK(nb2.result().covered == 2);  // n1 above (1.5) and below (0.5)
  CHECK(nb2.result().total == 4);
}

TEST_CASE("NBC and SNAC: hand-worked") {
  const auto net = tiny();
  const auto b = std::make_shared<const neuron_bounds>(prepare_neuron_bounds(net, tiny_train()));
  nbc_criterion nbc(b);
  snac_criterion snac(b);
  CHECK(nbc.name() == "nbc");
  CHECK(snac.name() == "snac");
  // training inputs are inside their own bounds
  CHECK(feed(net, nbc, {{1, 2}, {2, 1}, {-1, 0}}).covered == 0);
  CHECK(feed(net, snac, {{1, 2}, {2, 1}, {-1, 0}}).covered == 0);
  // (3,0): Dense1 (3,0,3), ReLU (3,0,3), Dense2 (3,3): above high: n0 (3>2), n2 (3>1), n3, n5, n7
  auto r = feed(net, nbc, {{3, 0}});
  CHECK(r.covered == 5);
  CHECK(r.total == 16);
  CHECK(feed(net, snac, {{3, 0}}).covered == 5);
  CHECK(snac.result().total == 8);
  CHECK(snac.result().percent == doctest::Approx(62.5));
  // (-2,-2): Dense1 (-2,-2,0): n0 < -1, n1 < 0 below low; ReLU (0,0,0) and Dense2 (0,0) inside
  r = feed(net, nbc, {{-2, -2}});
  CHECK(r.covered == 7);
  CHECK(r.percent == doctest::Approx(100.0 * 7 / 16));
  CHECK(nbc.lower().test(0));
  CHECK(nbc.lower().test(1));
  CHECK(feed(net, snac, {{-2, -2}}).covered == 5);
}

namespace {
using Mlp = Sequential<Input<4>, Dense<6, double>, ReLU, Dense<5, double>, ReLU, Dense<3, double>>;

xt::xarray<double> random_rows(std::size_t n, std::size_t d, std::uint64_t seed, double s = 1) {
  xt::xarray<double> x = xt::xarray<double>::from_shape({n, d});
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> u(0, s);
  for (auto& v : x) v = u(rng);
  return x;
}

xt::xarray<double> take(const xt::xarray<double>& X, std::vector<std::size_t> idx) {
  xt::xarray<double> r = xt::xarray<double>::from_shape({idx.size(), X.shape()[1]});
  for (std::size_t i = 0; i < idx.size(); ++i) xt::view(r, i) = xt::view(X, idx[i]);
  return r;
}

/// Monotone, merge of halves = whole, order and duplicate invariance, determinism.
template <class C>
void check_properties(const Mlp& net, const C& fresh, const xt::xarray<double>& T) {
  const std::size_t n = T.shape()[0];
  C whole = fresh;
  const auto rw = measure(net, T, whole);
  CHECK(rw.covered > 0);
  // monotone, one input at a time
  C inc = fresh;
  std::size_t last = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const auto r = measure(net, take(T, {i}), inc);
    CHECK(r.covered >= last);
    last = r.covered;
  }
  CHECK(inc.result().covered == rw.covered);
  // merge of two halves
  std::vector<std::size_t> a, b;
  for (std::size_t i = 0; i < n; ++i) (i % 3 == 0 ? a : b).push_back(i);
  C ca = fresh, cb = fresh;
  measure(net, take(T, a), ca);
  measure(net, take(T, b), cb);
  const C m = merge(ca, cb);
  CHECK(m.result().covered == rw.covered);
  CHECK(m.result().total == rw.total);
  // reversed order with every input twice
  std::vector<std::size_t> rev;
  for (std::size_t i = n; i-- > 0;) {
    rev.push_back(i);
    rev.push_back(i);
  }
  C cr = fresh;
  CHECK(measure(net, take(T, rev), cr).covered == rw.covered);
  // par == seq, and the same again
  C cp = fresh;
  CHECK(measure(execution::par, net, T, cp).covered == rw.covered);
  C again = fresh;
  CHECK(measure(net, T, again).covered == rw.covered);
}
}  // namespace

TEST_CASE("NC, TKNC, KMNC, NBC, SNAC: monotone, mergeable, order and duplicate invariant") {
  Mlp net;
  initialize(net, 3);
  const auto train = random_rows(200, 4, 11);
  const auto test = random_rows(40, 4, 12, 1.6);
  const auto b = std::make_shared<const neuron_bounds>(prepare_neuron_bounds(net, train));
  CHECK(b->neurons() == 6 + 6 + 5 + 5 + 3);
  SUBCASE("nc") { check_properties(net, nc_criterion(net), test); }
  SUBCASE("tknc") { check_properties(net, tknc_criterion(net, {.k = 2}), test); }
  SUBCASE("kmnc") { check_properties(net, kmnc_criterion(b, 50), test); }
  SUBCASE("nbc") { check_properties(net, nbc_criterion(b), test); }
  SUBCASE("snac") { check_properties(net, snac_criterion(b), test); }
}

TEST_CASE("neuron_bounds: streamed and merged bounds equal the whole; par == seq") {
  Mlp net;
  initialize(net, 4);
  const auto train = random_rows(300, 4, 21);
  const auto whole = prepare_neuron_bounds(net, train);
  std::vector<std::size_t> a, b;
  for (std::size_t i = 0; i < 300; ++i) (i < 120 ? a : b).push_back(i);
  const auto m = merge(prepare_neuron_bounds(net, take(train, a)), prepare_neuron_bounds(net, take(train, b)));
  CHECK(m == whole);
  CHECK(prepare_neuron_bounds(execution::par, net, train) == whole);
  // chosen layers
  const auto two = prepare_neuron_bounds(net, train, {1, 4});
  CHECK(two.neurons() == 6 + 3);
  CHECK(two.low[0] == whole.low[6]);
  CHECK(two.high[8] == whole.high[whole.neurons() - 1]);
  CHECK_THROWS_AS(merge(whole, two), data_error);
}

TEST_CASE("neuron_bounds: save / load round trip; other models, truncated and garbage files") {
  Mlp net;
  initialize(net, 5);
  const auto train = random_rows(100, 4, 31);
  const auto test = random_rows(30, 4, 32, 2);
  const auto b = prepare_neuron_bounds(net, train);
  std::stringstream ss;
  save_neuron_bounds(ss, b);
  const std::string text = ss.str();
  CHECK(text.rfind("nnlens-coverage-bounds 1\n", 0) == 0);
  std::istringstream in(text);
  const auto l = load_neuron_bounds(in, net);
  CHECK(l == b);
  kmnc_criterion k1(b, 100), k2(l, 100);
  CHECK(measure(net, test, k1).covered == measure(net, test, k2).covered);
  CHECK(k1.covered() == k2.covered());
  k1.merge(k2);  // identical preparations (other objects): fine
  // another model: same shapes, other weights
  Mlp other;
  initialize(other, 6);
  {
    std::istringstream i2(text);
    try {
      (void)load_neuron_bounds(i2, other);
      FAIL("expected a data_error");
    } catch (const data_error& e) {
      CHECK(std::string(e.what()).find("another model") != std::string::npos);
    }
  }
  // every truncation is a data_error, never a crash
  for (std::size_t cut = 0; cut < text.size(); cut += std::max<std::size_t>(1, text.size() / 97)) {
    std::istringstream t(text.substr(0, cut));
    CHECK_THROWS_AS((void)load_neuron_bounds(t, net), data_error);
  }
  // garbage
  for (std::string g : {std::string("hello\n"), std::string("nnlens-coverage-bounds 1\nfingerprint x\n"),
                        std::string("nnlens-coverage-bounds 2\n"), text.substr(0, text.size() / 2) + "abc\n" + text}) {
    std::istringstream t(g);
    CHECK_THROWS_AS((void)load_neuron_bounds(t, net), data_error);
  }
  std::string swapped = text;
  const auto p = swapped.find("low ");
  swapped.replace(p + 4, 1, "nan");
  std::istringstream t(swapped);
  CHECK_THROWS_AS((void)load_neuron_bounds(t, net), data_error);
}

TEST_CASE("neuron coverage: errors") {
  const auto net = tiny();
  CHECK_THROWS_AS(nc_criterion(net, {.threshold = 0}), value_error);
  CHECK_THROWS_AS(nc_criterion(net, {.threshold = 1}), value_error);
  CHECK_THROWS_AS(nc_criterion(net, {.threshold = -0.2}), value_error);
  CHECK_THROWS_AS(nc_criterion(net, {.threshold = std::numeric_limits<double>::quiet_NaN()}), value_error);
  CHECK_THROWS_AS(tknc_criterion(net, {.k = 0}), value_error);
  CHECK_THROWS_AS(nc_criterion(net, {.layers = {3}}), value_error);
  CHECK_THROWS_AS(tknc_criterion(net, {.layers = {0, 7}}), value_error);
  CHECK_THROWS_AS(prepare_neuron_bounds(net, tiny_train(), {9}), value_error);
  const xt::xarray<double> empty = xt::xarray<double>::from_shape({0, 2});
  CHECK_THROWS_AS(prepare_neuron_bounds(net, empty), data_error);
  const auto b = prepare_neuron_bounds(net, tiny_train());
  CHECK_THROWS_AS(kmnc_criterion(b, 0), value_error);
  CHECK_THROWS_AS(kmnc_criterion(make_neuron_bounds(net)), data_error);
  CHECK_THROWS_AS(nbc_criterion(std::shared_ptr<const neuron_bounds>()), value_error);
  // merging states of different preparations
  auto b2 = b;
  b2.high[0] += 1;
  CHECK_THROWS_AS(merge(kmnc_criterion(b, 4), kmnc_criterion(b2, 4)), data_error);
  CHECK_THROWS_AS(merge(kmnc_criterion(b, 4), kmnc_criterion(b, 5)), data_error);
  CHECK_THROWS_AS(merge(snac_criterion(b), snac_criterion(b2)), data_error);
  CHECK_THROWS_AS(merge(nbc_criterion(b), nbc_criterion(b2)), data_error);
  CHECK_THROWS_AS(merge(nc_criterion(net), nc_criterion(net, {.threshold = 0.5})), data_error);
  CHECK_THROWS_AS(merge(tknc_criterion(net), tknc_criterion(net, {.layers = {1}})), data_error);
  // a block of other layers
  nc_criterion nc(net);
  owned_block blk({{1, 2, 3}}, {3});
  CHECK_THROWS_AS(nc.add(blk.b), shape_error);
  // non-finite neurons
  owned_block nan_blk({{1, 2, std::numeric_limits<double>::quiet_NaN(), 0, 0, 0, 0, 0}}, {3, 3, 2});
  CHECK_THROWS_AS(nc.add(nan_blk.b), value_error);
  kmnc_criterion km(b, 4);
  CHECK_THROWS_AS(km.add(nan_blk.b), value_error);
}

TEST_CASE("neuron coverage: a DynamicNetwork gives the Sequential's results") {
  Mlp net;
  initialize(net, 8);
  const auto dnet = to_dynamic(net);
  const auto train = random_rows(120, 4, 51);
  const auto test = random_rows(30, 4, 52, 2);
  const auto bs = prepare_neuron_bounds(net, train);
  const auto bd = prepare_neuron_bounds(dnet, train);
  CHECK(bs.low == bd.low);
  CHECK(bs.high == bd.high);
  CHECK(bs.layers() == bd.layers());
  kmnc_criterion ks(bs, 20), kd(bd, 20);
  CHECK(measure(net, test, ks).covered == measure(dnet, test, kd).covered);
  CHECK(ks.covered() == kd.covered());
  nc_criterion ns(net), nd(dnet);
  measure(net, test, ns);
  measure(dnet, test, nd);
  CHECK(ns.covered() == nd.covered());
  tknc_criterion ts(net), td(dnet);
  measure(net, test, ts);
  measure(dnet, test, td);
  CHECK(ts.covered() == td.covered());
}
