// PReLU on the thrust device system, from its ParametricMap property (core/properties.hpp: the
// op's own functor and its slopes; the backend names no op): shared, per-channel and per-feature
// slopes, in forward, NNSlicer's profile, LRP (pass-through rule) and ExactLine (a knot at 0), and
// inside a Residual, each against the host (execution::seq) and by hand.
// Tolerances as tests/thrust/test_thrust_elementwise.cpp: networks of element-wise ops only are
// bit-identical; with Dense / Conv2D in float 1e-5, in double forward 1e-12 and relevance 1e-10;
// ExactLine: the same pieces and stats, ratios within 1e-9 (check_same_lines).
#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <vector>

#include <nnlens/coverage/lrp.hpp>
#include <nnlens/exactline/line.hpp>
#include <nnlens/layers/all.hpp>
#include <nnlens/network/dynamic_network.hpp>
#include <nnlens/network/forward.hpp>
#include <nnlens/network/parameters.hpp>
#include <nnlens/nnslicer/profile.hpp>
#include <nnlens/thrust/default.hpp>
#include <nnlens/thrust/exactline.hpp>
#include <nnlens/thrust/forward.hpp>
#include <nnlens/thrust/profile.hpp>
#include <nnlens/thrust/relevance.hpp>

#include "thrust_test_util.hpp"

using namespace nnlens;
using namespace nnlens_thrust_test;

namespace {

template <class T>
using Mlp = Sequential<Input<6>, Dense<8, T>, PReLU<8, T>, Dense<8, T>, PReLU<1, T>, Dense<3, T>>;
template <class T>
using Cnn = Sequential<Input<2, 7, 7>, Conv2D<4, 3, 1, 1, 1, 1, T>, PReLU<4, T>, MaxPool2D<2>, Conv2D<3, 3, 1, 1, 1, 1, T>,
                       PReLU<1, T>, Flatten, Dense<4, T>>;
// weightless but for the slopes: the device runs the host's functor on the host's slopes
using Maps = Sequential<Input<3, 2, 2>, PReLU<3, double>, LeakyReLU, PReLU<1, double>, Flatten, PReLU<12, double>>;

/// Slopes of both signs and above 1 (PReLU does not require 0 <= a <= 1).
template <class Net>
Net make(std::uint64_t seed) {
  Net n;
  initialize(n, seed);
  std::mt19937_64 rng(seed + 7);
  std::uniform_real_distribution<double> u(-0.8, 1.6);
  for_each_layer(n, [&](auto& l, auto, shape, shape) {
    if constexpr (requires { l.a; })
      for (auto& a : l.a) a = std::remove_cvref_t<decltype(a)>(u(rng));
  });
  return n;
}

}  // namespace

TEST_CASE("thrust PReLU: the property the backend reads, and the functor by hand") {
  static_assert(ParametricMap<PReLU<>> && ParametricMap<PReLU<4, double>> && !ParametricMap<LeakyReLU> &&
                !ParametricMap<Dense<3>>);
  static_assert(ThrustLayer<PReLU<>> && ThrustLrpLayer<PReLU<3, double>>);
  PReLU<dyn, double> l;
  l.a = tensor<double, 1>::from_shape({2});
  l.a(0) = 0.5, l.a(1) = -2.0;
  const auto f = layer_traits<PReLU<dyn, double>>::param_map(l);
  CHECK(f(3.0, 0.5) == 3.0);
  CHECK(f(-3.0, 0.5) == -1.5);
  CHECK(f(-1.0, -2.0) == 2.0);
  CHECK(f(0.0, -2.0) == 0.0);
  CHECK(layer_traits<PReLU<dyn, double>>::map_parameters<float>(l, shape(2, 3, 3)) == std::vector<float>{0.5f, -2.0f});
  // by hand on the device: channel 0 slope 0.5, channel 1 slope -2 (an image of 2 x 1 x 2)
  const Sequential<Input<2, 1, 2>, PReLU<2, double>> net{std::tuple{PReLU<2, double>{l.a}}};
  xt::xarray<double> x = xt::xarray<double>::from_shape({1, 2, 1, 2});
  x(0, 0, 0, 0) = -4, x(0, 0, 0, 1) = 3, x(0, 1, 0, 0) = -1.5, x(0, 1, 0, 1) = 2;
  const auto y = forward(execution::thrust, net, x);
  CHECK(y(0, 0, 0, 0) == -2.0);
  CHECK(y(0, 0, 0, 1) == 3.0);
  CHECK(y(0, 1, 0, 0) == 3.0);
  CHECK(y(0, 1, 0, 1) == 2.0);
}

TEST_CASE("thrust PReLU: forward, profile and LRP against the host") {
  const auto maps = make<Maps>(1);
  const auto xm = random_x<double>(23, Maps::input_shape, 2, -2, 2);
  CHECK(bit_identical(forward(execution::seq, maps, xm), forward(thrust_policy{.batch = 5}, maps, xm)));
  CHECK(bit_identical(forward(execution::seq, maps, xm), forward(execution::thrust, to_dynamic(maps), xm)));
  CHECK(profile_diff(profile_network(execution::seq, maps, xm, {.grain = granularity::element}),
                     profile_network(execution::thrust, maps, xm, {.grain = granularity::element})) == 0.0);
  CHECK(bit_identical(relevance(execution::seq, maps, xm), relevance(execution::thrust, maps, xm)));

  const auto mlp = make<Mlp<float>>(3);
  const auto mlpd = make<Mlp<double>>(3);
  const auto cnn = make<Cnn<float>>(4);
  const auto cnnd = make<Cnn<double>>(4);
  const auto x = random_x<float>(19, Mlp<float>::input_shape, 5);
  const auto xd = random_x<double>(19, Mlp<double>::input_shape, 5);
  const auto xc = random_x<float>(17, Cnn<float>::input_shape, 6);
  const auto xcd = random_x<double>(17, Cnn<double>::input_shape, 6);
  CHECK(rel_diff(forward(execution::seq, mlp, x), forward(thrust_policy{.batch = 8}, mlp, x)) <= 1e-5);
  CHECK(rel_diff(forward(execution::seq, mlpd, xd), forward(execution::thrust, to_dynamic(mlpd), xd)) <= 1e-12);
  CHECK(rel_diff(forward(execution::seq, cnn, xc), forward(thrust_policy{.batch = 8}, to_dynamic(cnn), xc)) <= 1e-5);
  CHECK(rel_diff(forward(execution::seq, cnnd, xcd), forward(execution::thrust, cnnd, xcd)) <= 1e-12);
  for (granularity g : {granularity::channel, granularity::element}) {
    CHECK(profile_diff(profile_network(execution::seq, cnnd, xcd, {.grain = g}),
                       profile_network(execution::thrust, cnnd, xcd, {.grain = g})) <= 1e-12);
    CHECK(profile_diff(profile_network(execution::seq, mlp, x, {.grain = g}),
                       profile_network(execution::thrust, to_dynamic(mlp), x, {.grain = g})) <= 1e-5);
  }
  CHECK(relevance_diff(mlpd, xd) <= 1e-10);
  CHECK(relevance_diff(cnnd, xcd, {.batch = 5}) <= 1e-10);
  CHECK(relevance_diff(to_dynamic(cnn), xc) <= 1e-4);
  // inside a Residual: forward and profile on the device
  using Res = Sequential<Input<6>, Dense<6, double>, Residual<Block<Dense<6, double>, PReLU<6, double>>>, PReLU<1, double>,
                         Dense<2, double>>;
  const auto res = make<Res>(7);
  const auto xr = random_x<double>(11, Res::input_shape, 8);
  CHECK(rel_diff(forward(execution::seq, res, xr), forward(execution::thrust, res, xr)) <= 1e-12);
  CHECK(profile_diff(profile_network(execution::seq, res, xr, {.grain = granularity::element}),
                     profile_network(execution::thrust, to_dynamic(res), xr, {.grain = granularity::element})) <= 1e-12);
}

TEST_CASE("thrust PReLU: ExactLine splits at 0 on the device as on the host") {
  const auto mlpd = make<Mlp<double>>(9);
  const auto cnnd = make<Cnn<double>>(10);
  const rows A = random_rows(12, 6, 11, -2, 2), B = random_rows(12, 6, 12, -2, 2);
  const rows C = random_rows(6, Cnn<double>::input_shape.size(), 13), D = random_rows(6, Cnn<double>::input_shape.size(), 14);
  std::size_t pieces = check_same_lines(exact_lines(execution::seq, mlpd, A, B), exact_lines(thrust_policy{.batch = 16}, mlpd, A, B)).pieces;
  pieces += check_same_lines(exact_lines(execution::seq, cnnd, C, D), exact_lines(execution::thrust, to_dynamic(cnnd), C, D)).pieces;
  MESSAGE("ExactLine with PReLU: " << pieces << " pieces compared");
  CHECK(pieces > 60);  // the PReLUs do split the segments
  // by hand: one PReLU (slope -2), the segment x = -1 + 3t crosses 0 at t = 1/3
  PReLU<dyn, double> p;
  p.a = tensor<double, 1>::from_shape({1});
  p.a(0) = -2.0;
  const Sequential<Input<1>, PReLU<1, double>> one{std::tuple{PReLU<1, double>{p.a}}};
  const auto l = exact_lines(execution::thrust, one, rows{{-1.0}}, rows{{2.0}});
  REQUIRE(l.size() == 1);
  REQUIRE(l[0].t.size() == 3);
  CHECK(l[0].t[1] == doctest::Approx(1.0 / 3.0).epsilon(1e-15));
}
