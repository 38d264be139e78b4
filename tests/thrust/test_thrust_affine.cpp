// Element-wise affine ops on the thrust device system, run from their property (core/properties.hpp:
// ElementwiseAffine, y = (x - center) * scale + shift; the backend names no op): BatchNorm after a
// Conv2D, after a Dense and elsewhere, and Affine per element, per channel (feature) and with one
// value, in forward, NNSlicer's profile, LRP (every rule, every layer stop: a BatchNorm right after
// a Conv2D/Dense folds into it unless the stop is that layer's output, as the host's lrp_engine)
// and ExactLine (an affine layer), each against the host (execution::seq) and by hand.
// Tolerances: nets of element-wise ops only: bit-identical (forward, profile, relevance), the
// device evaluates the host's expression on the host's coefficients; with Conv2D / Dense in
// double: forward and profile 1e-12, relevance 1e-10 relative to 1 + max |R|; in float: forward
// and profile 1e-5, relevance 1e-4 (the Conv2D / Dense kernels' summation order, as
// tests/thrust/test_thrust_pool.cpp); ExactLine as tests/thrust/test_thrust_exactline.cpp.
#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <type_traits>
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

// BatchNorm after Conv2D (folds for LRP) and after Dense (folds), Affine per channel after a pool
template <class T>
using BnNet = Sequential<Input<2, 9, 8>, Conv2D<4, 3, 1, 1, 1, 1, T>, BatchNorm<4, T>, ReLU, MaxPool2D<2>,
                         Affine<4, T>, Flatten, Dense<7, T>, BatchNorm<dyn, T>, ReLU, Dense<3, T>>;
// Affine per element (2*5*4 = 40), per channel, one value, per feature; BatchNorm first (no layer
// to fold into) and after a ReLU and an Affine (no fold)
template <class T>
using AffNet = Sequential<Input<2, 5, 4>, BatchNorm<2, T>, Affine<40, T>, Conv2D<3, 3, 1, 1, 1, 1, T>, ReLU, Affine<3, T>,
                          Affine<1, T>, BatchNorm<3, T>, Flatten, Dense<6, T>, LeakyReLU, Affine<6, T>, BatchNorm<6, T>,
                          Dense<3, T>>;
// element-wise ops only: the device's results are the host's bit for bit
template <class T>
using Elem = Sequential<Input<3, 4, 2>, BatchNorm<3, T>, Affine<24, T>, ReLU, Affine<3, T>, Affine<1, T>, BatchNorm<dyn, T>,
                        Flatten, Affine<24, T>>;

/// Random BatchNorm statistics (gamma of both signs, var in [0.3, 2]) and Affine coefficients.
template <class Net>
Net make(std::uint64_t seed) {
  Net n;
  initialize(n, seed);
  std::mt19937_64 rng(seed + 1000);
  std::uniform_real_distribution<double> u(-1.5, 1.5), v(0.3, 2.0);
  for_each_layer(n, [&](auto& l, auto, shape, shape) {
    if constexpr (requires { l.running_var; }) {
      for (auto& g : l.gamma) g = std::remove_cvref_t<decltype(g)>(u(rng));
      for (auto& b : l.beta) b = std::remove_cvref_t<decltype(b)>(u(rng));
      for (auto& m : l.running_mean) m = std::remove_cvref_t<decltype(m)>(u(rng) * 0.5);
      for (auto& s : l.running_var) s = std::remove_cvref_t<decltype(s)>(v(rng));
      l.eps = 1e-3;
    } else if constexpr (requires { l.s; l.t; }) {
      for (auto& s : l.s) s = std::remove_cvref_t<decltype(s)>(u(rng));
      for (auto& t : l.t) t = std::remove_cvref_t<decltype(t)>(u(rng));
    }
  });
  return n;
}

}  // namespace

TEST_CASE("thrust affine: the property the backend reads") {
  static_assert(ElementwiseAffine<BatchNorm<4>> && ElementwiseAffine<BatchNorm<dyn, double>> && ElementwiseAffine<Affine<1>> &&
                ElementwiseAffine<Affine<dyn, double>>);
  static_assert(!ElementwiseAffine<Dense<3>> && !ElementwiseAffine<ReLU> && !ElementwiseAffine<AvgPool2D<2>> &&
                !ElementwiseAffine<PReLU<>> && !ElementwiseAffine<Flatten>);
  static_assert(ThrustLayer<BatchNorm<4>> && ThrustLayer<BatchNorm<dyn, double>> && ThrustLayer<Affine<dyn>> &&
                ThrustLrpLayer<BatchNorm<4>> && ThrustLrpLayer<Affine<dyn, double>>);
  static_assert(!thrust_lrp_layer<BatchNorm<4>>::passthrough && !thrust_lrp_layer<Affine<3>>::passthrough);
  CHECK(thrust_supported(to_dynamic(make<BnNet<float>>(1))));
  CHECK(thrust_supported(to_dynamic(make<AffNet<double>>(1))));

  // BatchNorm: per channel, centred; the scale as its forward computes it
  BatchNorm<2, double> bn{{2.0, -1.0}, {0.5, 1.0}, {1.0, -2.0}, {3.0, 0.25}, 1.0};
  const auto c = layer_traits<BatchNorm<2, double>>::elementwise_affine<double>(bn, shape{2, 3, 3});
  CHECK(c.scale == std::vector<double>{1.0, -1.0 / std::sqrt(1.25)});
  CHECK(c.shift == std::vector<double>{0.5, 1.0});
  CHECK(c.center == std::vector<double>{1.0, -2.0});
  CHECK(c.per(shape{2, 3, 3}) == 9);
  // Affine: the three broadcasts, no centring
  Affine<dyn, float> one{{2.f}, {1.f}}, per_c{{1.f, 2.f}, {0.f, 3.f}};
  const auto a1 = layer_traits<Affine<dyn, float>>::elementwise_affine<float>(one, shape{2, 3, 3});
  CHECK(a1.center.empty());
  CHECK(a1.per(shape{2, 3, 3}) == 18);
  CHECK(layer_traits<Affine<dyn, float>>::elementwise_affine<double>(per_c, shape{2, 3, 3}).per(shape{2, 3, 3}) == 9);
}

TEST_CASE("thrust affine: forward by hand, and bit-identical to the host on element-wise nets") {
  // x = (1, 2 | 3, 4) as {2, 1, 2}: Affine per channel s = (2, -1), t = (1, 0) -> (3, 5 | -3, -4);
  // then BatchNorm gamma = (1, 2), beta = (0, 1), mean = (1, 0), var = (4, 1), eps = 0:
  // (3 - 1) / 2 = 1, (5 - 1) / 2 = 2 | -3 * 2 + 1 = -5, -4 * 2 + 1 = -7
  Sequential<Input<2, 1, 2>, Affine<2, double>, BatchNorm<2, double>> n;
  n.layer<0>().s = {2.0, -1.0};
  n.layer<0>().t = {1.0, 0.0};
  n.layer<1>() = BatchNorm<2, double>{{1.0, 2.0}, {0.0, 1.0}, {1.0, 0.0}, {4.0, 1.0}, 0.0};
  xt::xarray<double> in = xt::xarray<double>::from_shape({1, 2, 1, 2});
  in.data()[0] = 1, in.data()[1] = 2, in.data()[2] = 3, in.data()[3] = 4;
  const auto y = forward(execution::thrust, n, in);
  REQUIRE(y.size() == 4);
  CHECK(y.data()[0] == 1.0);
  CHECK(y.data()[1] == 2.0);
  CHECK(y.data()[2] == -5.0);
  CHECK(y.data()[3] == -7.0);
  // one value and per element
  Sequential<Input<3>, Affine<1, float>, Affine<3, float>> m;
  m.layer<0>().s = {-2.f};
  m.layer<0>().t = {0.5f};
  m.layer<1>().s = {1.f, 10.f, 100.f};
  m.layer<1>().t = {0.f, 1.f, 2.f};
  xt::xarray<float> x3 = xt::xarray<float>::from_shape({1, 3});
  x3.data()[0] = 1, x3.data()[1] = 2, x3.data()[2] = 3;
  const auto y3 = forward(execution::thrust, to_dynamic(m), x3);
  CHECK(y3.data()[0] == -1.5f);
  CHECK(y3.data()[1] == -34.f);
  CHECK(y3.data()[2] == -548.f);

  const auto ef = make<Elem<float>>(3);
  const auto xf = random_x<float>(37, Elem<float>::input_shape, 4, -3.f, 3.f);
  CHECK(bit_identical(forward(execution::seq, ef, xf), forward(thrust_policy{.batch = 5}, ef, xf)));
  CHECK(bit_identical(forward(execution::seq, ef, xf), forward(execution::thrust, to_dynamic(ef), xf)));
  const auto ed = make<Elem<double>>(5);
  const auto xd = random_x<double>(23, Elem<double>::input_shape, 6, -3., 3.);
  CHECK(bit_identical(forward(execution::seq, ed, xd), forward(execution::thrust, ed, xd)));
  for (auto g : {granularity::element, granularity::channel}) {
    CAPTURE(int(g));
    CHECK(profile_diff(profile_network(execution::seq, ef, xf, {.grain = g}),
                       profile_network(thrust_policy{.batch = 8}, ef, xf, {.grain = g})) == 0.0);
  }
}

TEST_CASE("thrust affine: forward and profile with Conv2D / Dense around BatchNorm and Affine") {
  const auto bnd = make<BnNet<double>>(7);
  const auto xd = random_x<double>(19, BnNet<double>::input_shape, 8);
  CHECK(rel_diff(forward(execution::seq, bnd, xd), forward(thrust_policy{.batch = 6}, bnd, xd)) <= 1e-12);
  CHECK(rel_diff(forward(execution::seq, bnd, xd), forward(execution::thrust, to_dynamic(bnd), xd)) <= 1e-12);
  const auto bnf = make<BnNet<float>>(9);
  const auto xf = random_x<float>(19, BnNet<float>::input_shape, 10);
  CHECK(rel_diff(forward(execution::seq, bnf, xf), forward(execution::thrust, bnf, xf)) <= 1e-5);
  const auto afd = make<AffNet<double>>(11);
  const auto xa = random_x<double>(13, AffNet<double>::input_shape, 12);
  CHECK(rel_diff(forward(execution::seq, afd, xa), forward(execution::thrust, afd, xa)) <= 1e-12);
  const auto aff = make<AffNet<float>>(13);
  const auto xaf = random_x<float>(13, AffNet<float>::input_shape, 14);
  CHECK(rel_diff(forward(execution::seq, aff, xaf), forward(execution::thrust, to_dynamic(aff), xaf)) <= 1e-5);
  for (auto g : {granularity::element, granularity::channel}) {
    CAPTURE(int(g));
    CHECK(profile_diff(profile_network(execution::seq, bnd, xd, {.grain = g}),
                       profile_network(thrust_policy{.batch = 8}, bnd, xd, {.grain = g})) <= 1e-12);
    CHECK(profile_diff(profile_network(execution::seq, afd, xa, {.grain = g}),
                       profile_network(execution::thrust, to_dynamic(afd), xa, {.grain = g})) <= 1e-12);
    CHECK(profile_diff(profile_network(execution::seq, bnf, xf, {.grain = g}),
                       profile_network(execution::thrust, bnf, xf, {.grain = g})) <= 1e-5);
    CHECK(profile_diff(profile_network(execution::seq, aff, xaf, {.grain = g}),
                       profile_network(execution::thrust, aff, xaf, {.grain = g})) <= 1e-5);
  }
}

TEST_CASE("thrust affine: LRP folds BatchNorm as the host does, Affine by its own rule") {
  const auto bnd = make<BnNet<double>>(21);
  const auto xd = random_x<double>(9, BnNet<double>::input_shape, 22);
  const double d1 = relevance_diff(bnd, xd, {.batch = 4});
  MESSAGE("relevance, BatchNorm after Conv2D and Dense, double: worst relative difference " << d1);
  CHECK(d1 <= 1e-10);
  const auto afd = make<AffNet<double>>(23);
  const auto xa = random_x<double>(9, AffNet<double>::input_shape, 24);
  const double d2 = relevance_diff(to_dynamic(afd), xa);
  MESSAGE("relevance, Affine (3 forms) and unfolded BatchNorm, double: worst relative difference " << d2);
  CHECK(d2 <= 1e-10);
  const auto bnf = make<BnNet<float>>(25);
  const auto xf = random_x<float>(9, BnNet<float>::input_shape, 26);
  const double d3 = relevance_diff(bnf, xf);
  const auto aff = make<AffNet<float>>(27);
  const auto xaf = random_x<float>(9, AffNet<float>::input_shape, 28);
  const double d4 = relevance_diff(aff, xaf);
  MESSAGE("relevance in float: BatchNorm net " << d3 << ", Affine net " << d4);
  CHECK(d3 <= 1e-4);
  CHECK(d4 <= 1e-4);
  // element-wise ops only: bit for bit, every rule and stop
  const auto ed = make<Elem<double>>(29);
  const auto xe = random_x<double>(11, Elem<double>::input_shape, 30, -2., 2.);
  for (const auto& o : lrp_rules)
    for (std::size_t l : {lrp_input, std::size_t(0), std::size_t(2), std::size_t(5)})
      CHECK(bit_identical(relevance(execution::seq, ed, xe, l, o), relevance(execution::thrust, ed, xe, l, o)));

  // by hand: x = (1, 2) -> Dense (identity, b = (0, 1)) -> z = (1, 3) -> BatchNorm a = (2, 1),
  // t = (0, -1) (gamma = (2, 1), beta = (0, -1), mean 0, var 1, eps 0) -> y = (2, 2); class 0.
  // Folded (stop: the input): R_1 = y_0 = 2 to input 0 only, epsilon with the folded weights:
  // z_00 = 1 * 2 * 1 = 2, R_in = (2, 0).  Unfolded at the Dense's output: R = (2, 0).
  Sequential<Input<2>, Dense<2, double>, BatchNorm<2, double>> f;
  f.layer<0>().W = {{1.0, 0.0}, {0.0, 1.0}};
  f.layer<0>().b = {0.0, 1.0};
  f.layer<1>() = BatchNorm<2, double>{{2.0, 1.0}, {0.0, -1.0}, {0.0, 0.0}, {1.0, 1.0}, 0.0};
  xt::xarray<double> in = xt::xarray<double>::from_shape({1, 2});
  in.data()[0] = 1, in.data()[1] = 2;
  const std::size_t cls[] = {0};
  const auto r = relevance(execution::thrust, f, in, lrp_input, {.epsilon = 1e-12}, cls);
  CHECK(r.data()[0] == doctest::Approx(2.0).epsilon(1e-9));
  CHECK(r.data()[1] == 0.0);
  const auto r0 = relevance(execution::thrust, f, in, 0, {.epsilon = 1e-12}, cls);
  CHECK(r0.data()[0] == doctest::Approx(2.0).epsilon(1e-9));
  CHECK(r0.data()[1] == 0.0);
  // zplus with a negative scale: the folded z_00 = 1 * (-2) * 1 < 0 takes nothing (unfolded: the
  // BatchNorm's own z = 1 * -2 < 0 neither)
  f.layer<1>().gamma = {-2.0, 1.0};
  for (std::size_t stop : {lrp_input, std::size_t(0)}) {
    CHECK(bit_identical(relevance(execution::seq, f, in, stop, {.rule = lrp_rule::zplus}, cls),
                        relevance(execution::thrust, f, in, stop, {.rule = lrp_rule::zplus}, cls)));
    const auto rz = relevance(execution::thrust, f, in, stop, {.rule = lrp_rule::zplus}, cls);
    CHECK(rz.data()[0] == 0.0);
  }
  CHECK(bit_identical(relevance(execution::seq, f, in), relevance(execution::thrust, f, in)));
}

TEST_CASE("thrust affine: ExactLine runs BatchNorm and Affine as affine layers") {
  std::size_t pieces = 0;
  const auto bnd = make<BnNet<double>>(31);
  const std::size_t d = BnNet<double>::input_shape.size();
  const rows A = random_rows(8, d, 32), B = random_rows(8, d, 33);
  for (bool fuse : {true, false}) {
    CAPTURE(fuse);
    line_options o;
    o.fuse_max_pool = fuse;
    pieces += check_same_lines(exact_lines(execution::seq, bnd, A, B, o), exact_lines(thrust_policy{.batch = 32}, bnd, A, B, o))
                  .pieces;
  }
  const auto afd = make<AffNet<double>>(34);
  const std::size_t da = AffNet<double>::input_shape.size();
  const rows C = random_rows(8, da, 35), D = random_rows(8, da, 36);
  pieces += check_same_lines(exact_lines(execution::seq, afd, C, D), exact_lines(execution::thrust, to_dynamic(afd), C, D)).pieces;
  // float values, double ratios
  const auto aff = make<AffNet<float>>(37);
  std::vector<std::vector<float>> Cf(C.size()), Df(D.size());
  for (std::size_t i = 0; i < C.size(); ++i) Cf[i].assign(C[i].begin(), C[i].end()), Df[i].assign(D[i].begin(), D[i].end());
  const auto hf = exact_lines<float>(execution::seq, aff, Cf, Df);
  const auto df = exact_lines<float>(execution::thrust, aff, Cf, Df);
  REQUIRE(hf.size() == df.size());
  for (std::size_t i = 0; i < hf.size(); ++i) CHECK(hf[i].t.size() == df[i].t.size());
  MESSAGE("ExactLine with BatchNorm / Affine: " << pieces << " pieces compared");
  CHECK(pieces > 40);  // the ReLUs and the max pool do split the segments
  // element-wise affine ops between the ReLU: splits only at the ReLU's knot
  const auto ed = make<Elem<double>>(38);
  const std::size_t de = Elem<double>::input_shape.size();
  check_same_lines(exact_lines(execution::seq, ed, random_rows(4, de, 39), random_rows(4, de, 40)),
                   exact_lines(execution::thrust, ed, random_rows(4, de, 39), random_rows(4, de, 40)));
}
