// BatchNorm (inference form, per feature / per channel) and Affine (per element / channel / one
// value): hand-computed cases, backward (dx, dgamma, dbeta, ds, dt) against central finite
// differences on random shapes, static vs DynamicNetwork (outputs bitwise, gradients to 1e-12),
// from_dynamic, initialisation, shape and value errors naming the layer.
#include <doctest/doctest.h>

#include <nnlens/nnlens.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <utility>
#include <vector>

#include "gradient_check.hpp"

using namespace nnlens;

using namespace nnlens_test;

namespace {
using BN = BatchNorm<dyn, double>;
using AF = Affine<dyn, double>;

tensor<double, 1> vec(std::vector<double> v) {
  tensor<double, 1> t = tensor<double, 1>::from_shape({v.size()});
  std::copy(v.begin(), v.end(), t.begin());
  return t;
}

BN random_bn(std::size_t c, std::mt19937_64& r) {
  std::uniform_real_distribution<double> pos(0.2, 3.0);
  BN l{vec(randn(c, r)), vec(randn(c, r)), vec(randn(c, r)), tensor<double, 1>::from_shape({c}), 1e-5};
  for (auto& v : l.running_var) v = pos(r);
  return l;
}

/// Fills every BatchNorm / Affine of a static float network with random statistics and parameters.
template <class Net>
void randomise_norms(Net& net, std::uint64_t seed) {
  std::mt19937_64 r(seed);
  for_each_layer(net, [&](auto& l, auto, shape, shape) {
    using L = std::decay_t<decltype(l)>;
    if constexpr (requires { l.running_var; }) {
      std::uniform_real_distribution<double> pos(0.2, 3.0);
      for (auto& v : l.gamma) v = float(1 + 0.3 * randn(1, r)[0]);
      for (auto& v : l.beta) v = float(randn(1, r)[0]);
      for (auto& v : l.running_mean) v = float(randn(1, r)[0]);
      for (auto& v : l.running_var) v = float(pos(r));
    } else if constexpr (requires { l.s; }) {
      for (auto& v : l.s) v = float(1 + 0.3 * randn(1, r)[0]);
      for (auto& v : l.t) v = float(randn(1, r)[0]);
    }
    (void)sizeof(L);
  });
}
}  // namespace

TEST_CASE("BatchNorm per feature (rank 1): hand-computed forward and backward") {
  // s = gamma / sqrt(var) = [1.5, 1]
  BN l{vec({3.0, 0.5}), vec({1.0, -1.0}), vec({1.0, 2.0}), vec({4.0, 0.25}), 0.0};
  const std::vector<double> x{3.0, 2.5, 1.0, 0.0};  // batch 2
  auto f = run_forward(l, shape(2), 2, x, true);
  CHECK(f.y == std::vector<double>{4.0, -0.5, 1.0, -3.0});
  const std::vector<double> dy{1.0, 1.0, 2.0, -1.0};
  std::vector<double> dx(4), scratch(layer_traits<BN>::scratch_size(&l, shape(2), shape(2), 2));
  BN g{vec({0.5, 0.5}), vec({1.0, 1.0}), {}, {}, 0.0};  // gradients are ADDED to what is there
  layer_traits<BN>::backward(l, backward_args<double>{shape(2), shape(2), 2, x.data(), f.y.data(), dy.data(), nullptr, dx.data(), scratch.data()},
                             &g);
  CHECK(dx == std::vector<double>{1.5, 1.0, 3.0, -1.0});
  // dgamma = sum dy (x - mean) / sqrt(var) = [1*2/2 + 2*0/2, 1*0.5/0.5 + (-1)(-2)/0.5] = [1, 5]
  CHECK(g.gamma(0) == doctest::Approx(0.5 + 1.0));
  CHECK(g.gamma(1) == doctest::Approx(0.5 + 5.0));
  CHECK(g.beta(0) == doctest::Approx(1.0 + 3.0));
  CHECK(g.beta(1) == doctest::Approx(1.0 + 0.0));
  auto ps = layer_traits<BN>::parameters(l);
  REQUIRE(ps.size() == 2);  // gamma and beta only: the running statistics are not trained
  CHECK(ps[0].data() == l.gamma.data());
  CHECK(ps[1].data() == l.beta.data());
}

TEST_CASE("BatchNorm per channel (rank 3) with the default eps") {
  BN l{vec({1.0, 2.0}), vec({0.0, 1.0}), vec({0.0, 1.0}), vec({1.0, 4.0})};
  CHECK(l.eps == 1e-5);
  const std::vector<double> x{1.0, 2.0, 3.0, 5.0};  // one sample [2,1,2]
  auto f = run_forward(l, shape(2, 1, 2), 1, x, false);
  const double s0 = 1.0 / std::sqrt(1.0 + 1e-5), s1 = 2.0 / std::sqrt(4.0 + 1e-5);
  CHECK(f.y[0] == doctest::Approx(1.0 * s0).epsilon(1e-14));
  CHECK(f.y[1] == doctest::Approx(2.0 * s0).epsilon(1e-14));
  CHECK(f.y[2] == doctest::Approx(2.0 * s1 + 1.0).epsilon(1e-14));
  CHECK(f.y[3] == doctest::Approx(4.0 * s1 + 1.0).epsilon(1e-14));
  CHECK(f.y[0] != 1.0);  // eps is applied
}

TEST_CASE("Affine: the three broadcast rules, hand-computed") {
  SUBCASE("per channel of [2,1,2]") {
    AF l{vec({2.0, 3.0}), vec({1.0, -1.0})};
    auto f = run_forward(l, shape(2, 1, 2), 1, {1.0, 2.0, 3.0, 4.0}, false);
    CHECK(f.y == std::vector<double>{3.0, 5.0, 8.0, 11.0});
  }
  SUBCASE("per element of [2,1,2] and per feature of [3]") {
    AF l{vec({1.0, 2.0, 3.0, 4.0}), vec({0.0, 0.0, 1.0, 1.0})};
    auto f = run_forward(l, shape(2, 1, 2), 2, {1.0, 1.0, 1.0, 1.0, 2.0, 0.0, -1.0, 0.5}, false);
    CHECK(f.y == std::vector<double>{1.0, 2.0, 4.0, 5.0, 2.0, 0.0, -2.0, 3.0});
    AF m{vec({1.0, 2.0, 3.0}), vec({0.0, 0.0, 1.0})};
    CHECK(run_forward(m, shape(3), 1, {1.0, 1.0, 1.0}, false).y == std::vector<double>{1.0, 2.0, 4.0});
  }
  SUBCASE("one value: MNIST's (x - 0.1307) / 0.3081") {
    AF l{vec({1 / 0.3081}), vec({-0.1307 / 0.3081})};
    auto f = run_forward(l, shape(1, 2, 2), 1, {0.0, 0.1307, 1.0, 0.5}, false);
    CHECK(f.y[0] == doctest::Approx(-0.1307 / 0.3081));
    CHECK(f.y[1] == doctest::Approx(0.0));
    CHECK(f.y[2] == doctest::Approx((1 - 0.1307) / 0.3081));
  }
  SUBCASE("backward, per channel: ds = sum dy x, dt = sum dy") {
    AF l{vec({2.0, 3.0}), vec({1.0, -1.0})};
    const std::vector<double> x{1.0, 2.0, 3.0, 4.0}, dy{1.0, -1.0, 0.5, 2.0};
    auto f = run_forward(l, shape(2, 1, 2), 1, x, false);
    std::vector<double> dx(4);
    AF g{vec({0.0, 0.0}), vec({0.0, 0.0})};
    layer_traits<AF>::backward(l, backward_args<double>{shape(2, 1, 2), shape(2, 1, 2), 1, x.data(), f.y.data(), dy.data(), nullptr, dx.data(), nullptr},
                               &g);
    CHECK(dx == std::vector<double>{2.0, -2.0, 1.5, 6.0});
    CHECK(g.s(0) == -1.0);
    CHECK(g.s(1) == 9.5);
    CHECK(g.t(0) == 0.0);
    CHECK(g.t(1) == 2.5);
  }
}

TEST_CASE("BatchNorm and Affine backward match finite differences on random shapes") {
  std::mt19937_64 r(77);
  for (int t = 0; t < 16; ++t) {
    const shape in = random_shape(r);
    const std::size_t batch = 1 + r() % 3, C = in[0];
    CAPTURE(t);
    const auto x = randn(batch * in.size(), r, 2.0);
    check_backward(random_bn(C, r), in, batch, x, r);
    for (std::size_t n : {std::size_t(1), C, in.size()}) {
      AF a{vec(randn(n, r)), vec(randn(n, r))};
      check_backward(a, in, batch, x, r);
    }
  }
}

TEST_CASE("initialisation follows PyTorch (BatchNorm) and gives the identity (Affine)") {
  using Net = Sequential<Input<3, 2, 2>, BatchNorm<>, Affine<>, Affine<12>, Affine<1>, Flatten, BatchNorm<12>, Affine<>>;
  Net net;
  initialize(net, 1);
  const auto& bn = net.layer<0>();
  CHECK(bn.gamma == xt::xtensor<float, 1>{1, 1, 1});
  CHECK(bn.beta == xt::xtensor<float, 1>{0, 0, 0});
  CHECK(bn.running_mean == xt::xtensor<float, 1>{0, 0, 0});
  CHECK(bn.running_var == xt::xtensor<float, 1>{1, 1, 1});
  CHECK(net.layer<1>().s.size() == 3);  // Affine<>: one value per channel
  CHECK(net.layer<2>().s.size() == 12);
  CHECK(net.layer<3>().s.size() == 1);
  CHECK(net.layer<5>().gamma.size() == 12);
  CHECK(net.layer<6>().t.size() == 12);  // per feature after Flatten
  CHECK(parameter_count(net) == 2 * (3 + 3 + 12 + 1 + 12 + 12));
  std::mt19937_64 r(1);
  xt::xarray<float> x = xt::xarray<float>::from_shape({4, 3, 2, 2});
  for (auto& v : x) v = float(randn(1, r)[0]);
  auto y = forward(net, x);  // two BatchNorms with unit statistics: x / (1 + 1e-5)
  for (std::size_t i = 0; i < y.size(); ++i) CHECK(y.data()[i] == doctest::Approx(x.data()[i] / (1 + 1e-5)).epsilon(1e-6));
}

TEST_CASE("BatchNorm and Affine: static and dynamic networks agree (outputs bitwise, gradients to 1e-12)") {
  using Net = Sequential<Input<3, 6, 6>, Affine<3>, Conv2D<4, 3, 1, 1>, BatchNorm<>, ReLU, MaxPool2D<2>, Flatten,
                         Dense<10>, BatchNorm<10>, ReLU, Affine<>, Dense<3>, Affine<1>>;
  Net net;
  initialize(net, 3);
  randomise_norms(net, 4);
  std::mt19937_64 r(5);
  xt::xarray<float> x = xt::xarray<float>::from_shape({7, 3, 6, 6});
  for (auto& v : x) v = float(randn(1, r)[0]);
  auto d = to_dynamic(net);
  CHECK(d.layer_name(0) == "Affine");
  CHECK(d.layer_name(2) == "BatchNorm");
  const auto y = forward(net, x);
  check_bitwise(y, forward(d, x));
  check_bitwise(y, forward(execution::par, net, x));
  auto back = from_dynamic<Net>(d);
  check_bitwise(y, forward(back, x));
  CHECK(back.layer<7>().running_var == net.layer<7>().running_var);
  CHECK(back.layer<7>().eps == net.layer<7>().eps);

  using NetD = rebind_scalar_t<Net, double>;
  static_assert(std::is_same_v<std::tuple_element_t<2, NetD::layer_types>, BatchNorm<dyn, double>>);
  static_assert(std::is_same_v<network_scalar_t<NetD>, double>);
  NetD nd;
  initialize(nd, 3);
  randomise_norms(nd, 4);
  auto dd = to_dynamic(nd);
  const xt::xarray<double> xd = x;
  trace<double> t1, t2;
  forward_trace(nd, 7, xd.data(), t1);
  forward_trace(dd, 7, xd.data(), t2);
  const auto c = randn(7 * 3, r);
  NetD g1 = zeros_like(nd);
  auto g2 = zeros_like(dd);
  std::vector<double> dx1(xd.size()), dx2(xd.size());
  backward(nd, t1, c.data(), &g1, dx1.data());
  backward(dd, t2, c.data(), &g2, dx2.data());
  check_close(dx1, dx2);
  auto p1 = parameter_spans(g1);
  auto p2 = parameter_spans(g2);
  REQUIRE(p1.size() == p2.size());
  for (std::size_t k = 0; k < p1.size(); ++k) check_close(p1[k], p2[k]);
}

TEST_CASE("BatchNorm and Affine shape errors name the layer") {
  // compile time: the static channel count / value count must fit the input
  static_assert(!layer_traits<BatchNorm<3>>::infer(shape(4)).ok());
  static_assert(!layer_traits<BatchNorm<3>>::infer(shape(4, 2, 2)).ok());
  static_assert(layer_traits<BatchNorm<4>>::infer(shape(4, 2, 2)).ok());
  static_assert(layer_traits<BatchNorm<>>::infer(shape(9, 2, 2)).out == shape(9, 2, 2));
  static_assert(!layer_traits<Affine<5>>::infer(shape(3, 2, 2)).ok());
  static_assert(layer_traits<Affine<12>>::infer(shape(3, 2, 2)).ok());

  DynamicNetwork d(shape(4, 2, 2));
  BatchNorm<> bn{xt::ones<float>({3}), xt::zeros<float>({4}), xt::zeros<float>({4}), xt::ones<float>({4})};
  CHECK_THROWS_WITH_AS(d.add(bn),
                       doctest::Contains("layer 0 (BatchNorm): BatchNorm: gamma has 3 elements, expected 4 (one per channel of input [4,2,2])"),
                       shape_error);
  bn.gamma = xt::ones<float>({4});
  bn.running_var = xt::ones<float>({5});
  CHECK_THROWS_WITH_AS(d.add(bn), doctest::Contains("running_var has 5 elements, expected 4"), shape_error);
  bn.running_var = xt::ones<float>({4});
  bn.running_var(2) = -1.0f;
  CHECK_THROWS_WITH_AS(d.add(bn), doctest::Contains("running_var[2] + eps"), value_error);
  bn.running_var(2) = 2.0f;
  d.add(bn);
  CHECK_THROWS_WITH_AS(d.add(Affine<>{xt::ones<float>({5}), xt::zeros<float>({5})}),
                       doctest::Contains("layer 1 (Affine): Affine: s and t have 5 elements; for input [4,2,2] expected 1, 4 (per channel) or 16 (per element)"),
                       shape_error);
  CHECK_THROWS_WITH_AS(d.add(Affine<>{xt::ones<float>({4}), xt::zeros<float>({1})}),
                       doctest::Contains("layer 1 (Affine): Affine: s has 4 elements but t has 1"), shape_error);
  CHECK(d.size() == 1);

  // a static BatchNorm<4> refuses a run-time layer with another channel count
  CHECK_THROWS_WITH_AS(dynamic_form<BatchNorm<3>>::from_dynamic(bn, "layer 7 (BatchNorm)"),
                       doctest::Contains("layer 7 (BatchNorm): BatchNorm expects 3 channels, the source has 4"), shape_error);
  // hand-set weights of the wrong size in a static network: the checked forward names the layer
  using Net = Sequential<Input<4, 2, 2>, BatchNorm<>, Flatten, Dense<2>>;
  Net net;
  initialize(net, 1);
  net.layer<0>().beta = xt::zeros<float>({2});
  xt::xarray<float> x = xt::zeros<float>({1, 4, 2, 2});
  CHECK_THROWS_WITH_AS(forward(net, x), doctest::Contains("layer 0 (BatchNorm): BatchNorm: beta has 2 elements, expected 4"),
                       shape_error);
  // rebinding keeps the static channel count
  static_assert(std::is_same_v<rebind_scalar_t<BatchNorm<4>, double>, BatchNorm<4, double>>);
  static_assert(std::is_same_v<rebind_scalar_t<Affine<1>, double>, Affine<1, double>>);
}
