// Pooling windows on the thrust device system, run from their property (core/properties.hpp:
// pool_reduction_v / PoolingWindow; the backend names no pooling op): AvgPool2D (any geometry:
// rectangular windows, strides, asymmetric padding, ceil_mode, count_include_pad on and off) in
// forward, NNSlicer's profile, LRP (every rule, every layer stop) and ExactLine (an affine layer),
// each against the host (execution::seq) and against values worked out by hand; MaxPool2D beside it.
// Tolerances: AvgPool2D alone: bit-identical (the device sums each window in the host's order and
// divides by the same divisor); with Conv2D / Dense in double: forward 1e-12, profile 1e-12,
// relevance 1e-10 relative to 1 + max |R| (an average-pooling net alone: 1e-12); in float:
// forward 1e-5, relevance 1e-4; ExactLine as tests/thrust/test_thrust_exactline.cpp.
#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
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

// rectangular, strided, asymmetric padding, ceil_mode (the last window hangs past the padding),
// the divisor without the padding
constexpr pool_geometry odd{.kh = 3, .kw = 2, .stride_h = 2, .stride_w = 1, .pad_top = 1, .pad_left = 1, .pad_bottom = 0,
                            .pad_right = 0, .ceil_mode = true, .count_include_pad = false};
// the same with the padding counted
constexpr pool_geometry odd_pad{.kh = 3, .kw = 2, .stride_h = 2, .stride_w = 1, .pad_top = 1, .pad_left = 1, .pad_bottom = 0,
                                .pad_right = 0, .ceil_mode = true, .count_include_pad = true};

using Pools = Sequential<Input<3, 9, 8>, AvgPool2DG<odd>, AvgPool2DG<odd_pad>, AvgPool2D<2>, Flatten>;
template <class T>
using Cnn = Sequential<Input<2, 11, 10>, Conv2D<5, 3, 1, 1, 1, 1, T>, ReLU, AvgPool2DG<odd>, Conv2D<4, 3, 1, 0, 1, 1, T>,
                       ReLU, MaxPool2D<2>, AvgPool2D<1>, Flatten, Dense<6, T>, ReLU, Dense<3, T>>;
template <class T>
using CntPad = Sequential<Input<2, 7, 7>, Conv2D<3, 3, 1, 1, 1, 1, T>, ReLU, AvgPool2DG<odd_pad>, Flatten, Dense<4, T>>;

template <class Net>
Net make(std::uint64_t seed) {
  Net n;
  initialize(n, seed);
  return n;
}

}  // namespace

TEST_CASE("thrust pooling: the property the backend reads") {
  static_assert(pool_reduction_v<MaxPool2D<2>> == pool_reduce::max && pool_reduction_v<MaxPool2D<dyn>> == pool_reduce::max);
  static_assert(pool_reduction_v<AvgPool2D<2>> == pool_reduce::mean && pool_reduction_v<AvgPool2DG<odd>> == pool_reduce::mean);
  static_assert(pool_reduction_v<AvgPool2D<dyn>> == pool_reduce::mean);
  static_assert(pool_reduction_v<Conv2D<4, 3>> == pool_reduce::none && pool_reduction_v<ReLU> == pool_reduce::none &&
                pool_reduction_v<GlobalAvgPool> == pool_reduce::mean);  // one window per plane (test_thrust_elementwise)
  static_assert(PoolingWindow<MaxPool2D<3, 2, 1>> && PoolingWindow<AvgPool2D<dyn>> && !PoolingWindow<Conv2D<4, 3>> &&
                !PoolingWindow<Dense<3>> && !PoolingWindow<Flatten>);
  static_assert(ThrustLayer<AvgPool2D<2>> && ThrustLayer<AvgPool2DG<odd>> && ThrustLayer<AvgPool2D<dyn>> &&
                ThrustLrpLayer<AvgPool2D<2>> && ThrustLrpLayer<AvgPool2D<dyn>>);
  static_assert(!thrust_lrp_layer<AvgPool2D<2>>::passthrough && !thrust_lrp_layer<MaxPool2D<2>>::passthrough);
  // a run-time network holding both: accepted by the device (no logic_error, no host fallback)
  CHECK(thrust_supported(to_dynamic(make<Cnn<float>>(1))));
  CHECK(thrust_supported(to_dynamic(Pools{})));
}

TEST_CASE("thrust pooling: AvgPool2D forward is bit-identical to the host's, and right by hand") {
  const Pools net;
  const auto x = random_x<float>(13, Pools::input_shape, 1, -2.f, 2.f);
  CHECK(bit_identical(forward(execution::seq, net, x), forward(execution::thrust, net, x)));
  const auto xd = random_x<double>(7, Pools::input_shape, 2, -2., 2.);
  CHECK(bit_identical(forward(execution::seq, net, xd), forward(thrust_policy{.batch = 3}, to_dynamic(net), xd)));

  // by hand: a 1x3x3 input 1..9, window 2x2, stride 1, padding 1 on every side: 4x4 outputs
  constexpr pool_geometry g{.kh = 2, .kw = 2, .stride_h = 1, .stride_w = 1, .pad_top = 1, .pad_left = 1};
  xt::xarray<double> in = xt::xarray<double>::from_shape({1, 1, 3, 3});
  for (std::size_t i = 0; i < 9; ++i) in.data()[i] = double(i + 1);
  Sequential<Input<1, 3, 3>, AvgPool2DG<g>> with_pad;
  // corner (0, 0) reads x[0][0] = 1 alone; (1, 1) reads 1, 2, 4, 5; (0, 1) reads 1, 2
  const auto yp = forward(execution::thrust, with_pad, in);
  REQUIRE(yp.size() == 16);
  CHECK(yp.data()[0] == 1.0 / 4);  // divisor 4: the padding counts
  CHECK(yp.data()[1] == 3.0 / 4);
  CHECK(yp.data()[5] == 12.0 / 4);
  constexpr pool_geometry gx{.kh = 2, .kw = 2, .stride_h = 1, .stride_w = 1, .pad_top = 1, .pad_left = 1,
                             .count_include_pad = false};
  Sequential<Input<1, 3, 3>, AvgPool2DG<gx>> without_pad;
  const auto yx = forward(execution::thrust, without_pad, in);
  CHECK(yx.data()[0] == 1.0);  // divisor 1: one input element
  CHECK(yx.data()[1] == 3.0 / 2);
  CHECK(yx.data()[5] == 12.0 / 4);
  CHECK(yx.data()[15] == 9.0);
}

TEST_CASE("thrust pooling: forward and profile with Conv2D / Dense around AvgPool2D") {
  const auto cnnd = make<Cnn<double>>(3);
  const auto xd = random_x<double>(17, Cnn<double>::input_shape, 4);
  CHECK(rel_diff(forward(execution::seq, cnnd, xd), forward(thrust_policy{.batch = 5}, cnnd, xd)) <= 1e-12);
  CHECK(rel_diff(forward(execution::seq, cnnd, xd), forward(execution::thrust, to_dynamic(cnnd), xd)) <= 1e-12);
  const auto cnn = make<Cnn<float>>(5);
  const auto x = random_x<float>(17, Cnn<float>::input_shape, 6);
  CHECK(rel_diff(forward(execution::seq, cnn, x), forward(execution::thrust, cnn, x)) <= 1e-5);
  const auto cp = make<CntPad<double>>(7);
  const auto xc = random_x<double>(9, CntPad<double>::input_shape, 8);
  CHECK(rel_diff(forward(execution::seq, cp, xc), forward(execution::thrust, cp, xc)) <= 1e-12);
  for (auto g : {granularity::element, granularity::channel}) {
    CAPTURE(int(g));
    CHECK(profile_diff(profile_network(execution::seq, cnnd, xd, {.grain = g}),
                       profile_network(thrust_policy{.batch = 8}, cnnd, xd, {.grain = g})) <= 1e-12);
    CHECK(profile_diff(profile_network(execution::seq, cnn, x, {.grain = g}),
                       profile_network(execution::thrust, to_dynamic(cnn), x, {.grain = g})) <= 1e-5);
  }
  const Pools pools;
  const auto xp = random_x<float>(11, Pools::input_shape, 9);
  CHECK(profile_diff(profile_network(execution::seq, pools, xp, {.grain = granularity::element}),
                     profile_network(execution::thrust, pools, xp, {.grain = granularity::element})) == 0.0);
}

TEST_CASE("thrust pooling: LRP through AvgPool2D is the host's linear rule") {
  const auto cnnd = make<Cnn<double>>(11);
  const auto xd = random_x<double>(9, Cnn<double>::input_shape, 12);
  const double dd = relevance_diff(cnnd, xd, {.batch = 4});
  MESSAGE("relevance, CNN with AvgPool2D in double: worst relative difference " << dd);
  CHECK(dd <= 1e-10);
  const auto cp = make<CntPad<double>>(13);
  const auto xc = random_x<double>(8, CntPad<double>::input_shape, 14);
  CHECK(relevance_diff(to_dynamic(cp), xc) <= 1e-10);
  const auto cnn = make<Cnn<float>>(15);
  const auto x = random_x<float>(9, Cnn<float>::input_shape, 16);
  const double df = relevance_diff(cnn, x);
  MESSAGE("relevance, CNN with AvgPool2D in float: worst relative difference " << df);
  CHECK(df <= 1e-4);

  // by hand: x = (1, 3; 2, 6) -> AvgPool2D<2> -> z = 3 -> Dense 1x1 (w = 1, b = 0) -> y = 3; the
  // epsilon rule (eps -> 0) hands R = 3 back in proportion to x: (0.25, 0.75; 0.5, 1.5)
  Sequential<Input<1, 2, 2>, AvgPool2D<2>, Flatten, Dense<1, double>> n;
  n.layer<2>().W = {{1.0}};
  n.layer<2>().b = {0.0};
  xt::xarray<double> in = xt::xarray<double>::from_shape({1, 1, 2, 2});
  in.data()[0] = 1, in.data()[1] = 3, in.data()[2] = 2, in.data()[3] = 6;
  const auto r = relevance(execution::thrust, n, in, lrp_input, {.rule = lrp_rule::epsilon, .epsilon = 1e-12});
  REQUIRE(r.size() == 4);
  CHECK(r.data()[0] == doctest::Approx(0.25).epsilon(1e-9));
  CHECK(r.data()[1] == doctest::Approx(0.75).epsilon(1e-9));
  CHECK(r.data()[2] == doctest::Approx(0.5).epsilon(1e-9));
  CHECK(r.data()[3] == doctest::Approx(1.5).epsilon(1e-9));
  CHECK(bit_identical(relevance(execution::seq, n, in), relevance(execution::thrust, n, in)));
}

TEST_CASE("thrust pooling: ExactLine runs AvgPool2D as an affine layer") {
  const auto cnnd = make<Cnn<double>>(21);
  const std::size_t d = Cnn<double>::input_shape.size();
  const rows A = random_rows(10, d, 22), B = random_rows(10, d, 23);
  std::size_t pieces = 0;
  for (bool fuse : {true, false}) {
    CAPTURE(fuse);
    line_options o;
    o.fuse_max_pool = fuse;
    pieces += check_same_lines(exact_lines(execution::seq, cnnd, A, B, o), exact_lines(thrust_policy{.batch = 32}, cnnd, A, B, o))
                  .pieces;
  }
  const auto cp = make<CntPad<double>>(24);
  const rows C = random_rows(8, CntPad<double>::input_shape.size(), 25), D = random_rows(8, CntPad<double>::input_shape.size(), 26);
  pieces += check_same_lines(exact_lines(execution::seq, cp, C, D), exact_lines(execution::thrust, to_dynamic(cp), C, D)).pieces;
  MESSAGE("ExactLine with AvgPool2D: " << pieces << " pieces compared");
  CHECK(pieces > 40);  // the ReLUs and the max pool do split the segments
  // an average-pooling net alone is affine: one piece, the values the host's
  const Pools pools;
  const std::size_t dp = Pools::input_shape.size();
  const auto one = exact_lines(execution::thrust, pools, random_rows(3, dp, 27), random_rows(3, dp, 28));
  for (const auto& l : one) CHECK(l.t == std::vector<double>{0.0, 1.0});
  check_same_lines(exact_lines(execution::seq, pools, random_rows(3, dp, 27), random_rows(3, dp, 28)), one);
}
