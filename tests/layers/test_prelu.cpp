// PReLU<C, T>: hand-computed forward / backward on rank-1 and rank-3 inputs with per-channel and
// shared slopes (PyTorch's convention at x = 0), slope checks, backward (dx and d/da) against
// central differences in double, init (0.25), static vs DynamicNetwork (bitwise) and from_dynamic,
// network_cast, ExactLine (breaks exactly where a pre-activation unit crosses 0, values equal to
// forward there), NNSlicer and LRP on a network with PReLU, and the codegen spelling.
#include <doctest/doctest.h>

#include <nnlens/io/codegen.hpp>
#include <nnlens/nnlens.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gradient_check.hpp"

using namespace nnlens;
using namespace nnlens_test;

namespace {
template <std::size_t C = dyn>
PReLU<C, double> prelu(std::vector<double> a) {
  PReLU<C, double> l;
  l.a = tensor<double, 1>::from_shape({a.size()});
  std::copy(a.begin(), a.end(), l.a.begin());
  return l;
}

struct eval_result {
  std::vector<double> y, dx, da;
};
/// y, dx = J^T dy and d/da (added onto zeros) of a batch.
template <class L>
eval_result eval(const L& l, shape in, std::size_t batch, const std::vector<double>& x, const std::vector<double>& dy) {
  auto f = run_forward(l, in, batch, x, true);
  eval_result r{f.y, std::vector<double>(x.size(), std::nan("")), {}};
  L g = l;
  zero_parameters(g);
  layer_traits<L>::backward(l, backward_args<double>{in, f.out, batch, x.data(), f.y.data(), dy.data(), nullptr, r.dx.data(), nullptr}, &g);
  r.da.assign(g.a.begin(), g.a.end());
  return r;
}

std::vector<double> away_from_zero(std::vector<double> x, double gap = 1e-3) {
  for (auto& v : x)
    if (std::abs(v) < gap) v = v < 0 ? -2 * gap : 2 * gap;
  return x;
}
}  // namespace

TEST_CASE("PReLU: hand-computed values, slopes per feature / channel / shared, the kink x = 0 takes a") {
  SUBCASE("rank 1, one slope per feature, batch 2") {
    const auto l = prelu({0.1, 2.0, -0.5});
    const std::vector<double> x{-1, 3, -2, /**/ 0, -4, 5}, dy{1, 1, 1, /**/ 2, 0.5, 3};
    const auto r = eval(l, shape(3), 2, x, dy);
    CHECK(r.y == std::vector<double>{-0.1, 3, 1, 0, -8, 5});
    CHECK(r.dx == std::vector<double>{0.1, 1, -0.5, /* x = 0: slope a */ 0.2, 1.0, 3});
    // d/da[f] = sum of dy * x over x <= 0: f0: 1*-1 + 2*0, f1: 0.5*-4, f2: 1*-2
    CHECK(r.da == std::vector<double>{-1, -2, -2});
  }
  SUBCASE("rank 3 {2, 1, 2}, one slope per channel") {
    const auto l = prelu({0.5, 3.0});
    const std::vector<double> x{-2, 4, -1, 1}, dy{1, 2, 3, 4};
    const auto r = eval(l, shape(2, 1, 2), 1, x, dy);
    CHECK(r.y == std::vector<double>{-1, 4, -3, 1});
    CHECK(r.dx == std::vector<double>{0.5, 2, 9, 4});
    CHECK(r.da == std::vector<double>{-2, -3});
  }
  SUBCASE("rank 3 {2, 1, 2} and rank 1, one shared slope") {
    const auto l = prelu({0.25});
    const std::vector<double> x{-2, 4, -1, 1}, dy{1, 2, 3, 4};
    const auto r = eval(l, shape(2, 1, 2), 1, x, dy);
    CHECK(r.y == std::vector<double>{-0.5, 4, -0.25, 1});
    CHECK(r.dx == std::vector<double>{0.25, 2, 0.75, 4});
    CHECK(r.da == std::vector<double>{-2 - 3});
    const auto r1 = eval(l, shape(4), 1, x, dy);
    CHECK(r1.y == r.y);
    CHECK(r1.da == r.da);
  }
  SUBCASE("slope checks") {
    using Tr = layer_traits<PReLU<dyn, double>>;
    CHECK(Tr::output_shape(prelu({1, 2}), shape(2, 3, 3)) == shape(2, 3, 3));
    CHECK(Tr::output_shape(prelu({1}), shape(5)) == shape(5));
    CHECK_THROWS_WITH_AS(Tr::output_shape(prelu({1, 2}), shape(3, 2, 2)), doctest::Contains("a has 2 slopes"), shape_error);
    CHECK_THROWS_AS(Tr::output_shape(prelu({}), shape(3)), shape_error);
    CHECK_THROWS_WITH_AS(Tr::output_shape(prelu({1, std::nan("")}), shape(2)), doctest::Contains("a[1]"), value_error);
    CHECK_THROWS_AS(Tr::output_shape(prelu({INFINITY}), shape(2)), value_error);
    using Tr3 = layer_traits<PReLU<3, double>>;
    CHECK_THROWS_WITH_AS(Tr3::output_shape(prelu<3>({0.5}), shape(3)), doctest::Contains("expected 3"), shape_error);
    static_assert(layer_traits<PReLU<3>>::infer(shape(3, 4, 4)).ok());
    static_assert(layer_traits<PReLU<1>>::infer(shape(7)).ok());
    static_assert(!layer_traits<PReLU<3>>::infer(shape(4)).ok());
    static_assert(layer_traits<PReLU<>>::infer(shape(9)).ok());
  }
}

TEST_CASE("PReLU: backward (dx and d/da) matches central differences, per channel and shared") {
  std::mt19937_64 r(1717);
  for (int t = 0; t < 12; ++t) {
    const shape in = random_shape(r);
    const std::size_t batch = 1 + r() % 3;
    const auto x = away_from_zero(randn(batch * in.size(), r, 2.0));
    CAPTURE(t);
    check_backward(prelu(randn(in[0], r, 0.7)), in, batch, x, r);
    check_backward(prelu({-0.3 + 0.1 * t}), in, batch, x, r);
  }
}

TEST_CASE("PReLU: init, static vs DynamicNetwork bitwise, from_dynamic, network_cast, parameters") {
  using Net = Sequential<Input<2, 3, 3>, PReLU<2>, Flatten, Dense<5>, PReLU<>, Dense<4>, PReLU<1>, Dense<3>>;
  Net net;
  initialize(net, 3);
  REQUIRE(net.layer<0>().a.size() == 2);
  CHECK(net.layer<0>().a(0) == 0.25f);
  CHECK(net.layer<0>().a(1) == 0.25f);
  CHECK(net.layer<3>().a.size() == 1);  // dyn: PyTorch's num_parameters = 1
  CHECK(net.layer<5>().a.size() == 1);
  CHECK(net.layer<5>().a(0) == 0.25f);
  net.layer<0>().a(0) = -0.3f, net.layer<0>().a(1) = 1.5f;
  net.layer<3>().a = xt::xtensor<float, 1>{0.1f, -0.2f, 0.3f, 0.4f, 2.0f};
  net.layer<5>().a(0) = 0.05f;
  CHECK(parameter_spans(net).size() == 1 + 2 + 1 + 2 + 1 + 2);
  std::mt19937_64 r(4);
  xt::xarray<float> x = xt::xarray<float>::from_shape({5, 2, 3, 3});
  for (auto& v : x) v = float(randn(1, r, 2.0)[0]);
  auto d = to_dynamic(net);
  CHECK(d.layer_name(0) == "PReLU");
  CHECK(d.layer_name(3) == "PReLU");
  const auto y = forward(net, x);
  check_bitwise(y, forward(d, x));
  check_bitwise(y, forward(execution::par, d, x));
  const auto back = from_dynamic<Net>(d);
  CHECK(back.layer<0>().a(0) == -0.3f);
  CHECK(back.layer<3>().a(4) == 2.0f);
  check_bitwise(y, forward(back, x));
  using Wrong = Sequential<Input<2, 3, 3>, PReLU<2>, Flatten, Dense<5>, PReLU<1>, Dense<4>, PReLU<1>, Dense<3>>;
  CHECK_THROWS_WITH_AS(from_dynamic<Wrong>(d), doctest::Contains("PReLU expects 1 slopes, the source has 5"), shape_error);
  using Right = Sequential<Input<2, 3, 3>, PReLU<2>, Flatten, Dense<5>, PReLU<5>, Dense<4>, PReLU<1>, Dense<3>>;
  check_bitwise(y, forward(from_dynamic<Right>(d), x));
  // the first layer by hand
  const auto y0 = forward(Sequential<Input<2, 3, 3>, PReLU<2>>{std::tuple{net.layer<0>()}}, x);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float s = (i / 9) % 2 == 0 ? -0.3f : 1.5f;
    CHECK(y0.data()[i] == (x.data()[i] > 0 ? x.data()[i] : s * x.data()[i]));
  }
  // double twin
  const auto nd = network_cast<double>(net);
  CHECK(nd.layer<3>().a(1) == double(-0.2f));
  xt::xarray<double> xd = xt::cast<double>(x);
  const auto yd = forward(nd, xd);
  for (std::size_t i = 0; i < y.size(); ++i) CHECK(yd.data()[i] == doctest::Approx(y.data()[i]).epsilon(1e-5));
}

TEST_CASE("PReLU: ExactLine breaks where a unit crosses 0 (any slope), values equal forward there") {
  using Net = Sequential<Input<3>, Dense<4, double>, PReLU<4, double>, Dense<2, double>, PReLU<1, double>, Dense<1, double>>;
  Net net;
  initialize(net, 11);
  net.layer<1>().a = xt::xtensor<double, 1>{1.0, -0.5, 0.2, 1.0};  // slope 1 on two units: still knots
  net.layer<3>().a(0) = 0.3;
  std::mt19937_64 r(12);
  std::size_t crossings = 0;
  for (int trial = 0; trial < 6; ++trial) {
    const auto P = randn(3, r, 2.0), Q = randn(3, r, 2.0);
    const auto res = exact_line(net, P, Q);
    // expected breaks: zero crossings of the 4 pre-activations (linear in t), then of the second
    // Dense's 2 outputs, which are piecewise linear: found piece by piece from forward values
    std::vector<double> want;
    auto pre1 = [&](double t) {
      std::vector<double> z(4);
      for (std::size_t k = 0; k < 4; ++k) {
        z[k] = net.layer<0>().b(k);
        for (std::size_t i = 0; i < 3; ++i) z[k] += (P[i] + t * (Q[i] - P[i])) * net.layer<0>().W(i, k);
      }
      return z;
    };
    const auto z0 = pre1(0), z1 = pre1(1);
    for (std::size_t k = 0; k < 4; ++k)
      if ((z0[k] > 0) != (z1[k] > 0) && z0[k] != z1[k]) want.push_back(z0[k] / (z0[k] - z1[k]));
    // every break of the result: a first-layer crossing, or a crossing of the second PReLU's input
    auto run = [&](double t, std::size_t upto) {
      std::vector<double> p(3);
      for (std::size_t i = 0; i < 3; ++i) p[i] = P[i] + t * (Q[i] - P[i]);
      trace<double> tr;
      forward_trace(net, 1, p.data(), tr);
      auto a = tr.activation(upto);
      return std::vector<double>(a.begin(), a.end());
    };
    std::size_t first = 0, second = 0;
    for (std::size_t j = 1; j + 1 < res.t.size(); ++j) {
      const double t = res.t[j];
      bool hit1 = std::any_of(want.begin(), want.end(), [&](double w) { return std::abs(w - t) < 1e-9; });
      const auto z2 = run(t, 3);  // the input of the second PReLU (after Dense<2>)
      bool hit2 = std::any_of(z2.begin(), z2.end(), [](double v) { return std::abs(v) < 1e-9; });
      CHECK((hit1 || hit2));
      first += hit1;
      second += hit2;
    }
    CHECK(first == want.size());  // every first-layer crossing is a break
    crossings += first;
    // values at the breaks (and the ends) are the forward outputs
    for (std::size_t j = 0; j < res.t.size(); ++j) {
      const auto y = run(res.t[j], 5);
      CHECK(res.output(j)[0] == doctest::Approx(y[0]).epsilon(1e-9));
    }
    // between breaks the network is affine: the midpoint value is the mean of the ends
    for (std::size_t j = 0; j + 1 < res.t.size(); ++j) {
      const double m = run(0.5 * (res.t[j] + res.t[j + 1]), 5)[0];
      CHECK(m == doctest::Approx(0.5 * (res.output(j)[0] + res.output(j + 1)[0])).epsilon(1e-9));
    }
    (void)second;
  }
  CHECK(crossings >= 3);  // the segments do cross kinks
}

TEST_CASE("PReLU: NNSlicer runs and LRP passes relevance through") {
  using Net = Sequential<Input<2>, Dense<2, double>, PReLU<2, double>, Dense<1, double>>;
  Net net;
  auto& d0 = net.layer<0>();
  d0.W = xt::xtensor<double, 2>{{1, 0}, {0, 1}};
  d0.b = xt::xtensor<double, 1>{0, 0};
  net.layer<1>().a = xt::xtensor<double, 1>{0.5, 2.0};
  auto& d2 = net.layer<2>();
  d2.W = xt::xtensor<double, 2>{{1}, {1}};
  d2.b = xt::xtensor<double, 1>{0};
  xt::xarray<double> x = {{-2.0, 3.0}};
  CHECK(forward(net, x)(0, 0) == doctest::Approx(-1.0 + 3.0));
  // LRP: the last Dense gives R = a_j w_j = (-1, 3); PReLU passes it; the identity Dense keeps it
  const auto R = relevance(net, x);
  CHECK(R(0, 0) == doctest::Approx(-1.0));
  CHECK(R(0, 1) == doctest::Approx(3.0));
  // NNSlicer on a random network with PReLU after a Dense and a Conv2D
  using Net2 = Sequential<Input<1, 4, 4>, Conv2D<2, 3, 1, 0, 1, 1, double>, PReLU<2, double>, Flatten, Dense<6, double>,
                          PReLU<1, double>, Dense<3, double>>;
  Net2 n2;
  initialize(n2, 21);
  n2.layer<1>().a = xt::xtensor<double, 1>{0.1, -0.4};
  std::mt19937_64 r(22);
  auto batch = [&](std::size_t n) {
    xt::xarray<double> X = xt::xarray<double>::from_shape({n, 1, 4, 4});
    for (auto& v : X) v = randn(1, r)[0];
    return X;
  };
  const auto D = batch(30), I = batch(8);
  const auto t = nnslicer(n2, profile_network(n2, D), I, criterion::predicted());
  std::size_t nz = 0;
  for (const auto& s : t.synapses)
    for (auto v : s) nz += v != 0;
  CHECK(nz > 0);
  CHECK(t.neurons.size() == 7);  // input + 6 layers
}

TEST_CASE("PReLU: codegen spells PReLU<C> and fills a") {
  using Net = Sequential<Input<3>, Dense<2>, PReLU<2>, Dense<2>, PReLU<1>>;
  Net net;
  initialize(net, 5);
  net.layer<1>().a = xt::xtensor<float, 1>{-0.5f, 0.75f};
  io::codegen_options o;
  o.name = "pr";
  const std::string h = io::generate_header(net, o);
  CHECK(h.find("nnlens::PReLU<2>") != std::string::npos);
  CHECK(h.find("nnlens::PReLU<1>") != std::string::npos);
  CHECK(h.find(".a, ") != std::string::npos);
  CHECK(h.find("-0x1p-1f") != std::string::npos);  // -0.5 as a hex-float literal
  const std::string hd = io::generate_header(network_cast<double>(net), o);
  CHECK(hd.find("nnlens::PReLU<2, double>") != std::string::npos);
}
