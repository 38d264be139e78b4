// ChannelShuffle, ChannelSlice and LayerNorm on the thrust device system, from their properties
// (core/properties.hpp: ChannelMap, PositionMap; thrust/index_map.hpp names no op): forward and
// NNSlicer's profile against the host, LRP through the channel maps (and the refusal of LayerNorm,
// which has no device LRP step), ExactLine through the channel maps.
// Tolerances: the channel maps copy, so networks of them are bit-identical everywhere; LayerNorm
// runs the host's functor on the host's parameters: bit-identical on the OMP system, within 4e-7
// (float) and 1e-15 (double) relative to 1 + |host| under nvcc; with Conv2D / Dense in float
// 1e-5, in double forward 1e-12 and relevance 1e-10 (as tests/thrust/test_thrust_elementwise.cpp).
#include <doctest/doctest.h>

#include <cmath>
#include <string>
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
bool same_norm(const xt::xarray<T>& h, const xt::xarray<T>& d) {
#if defined(__CUDACC__)
  const double tol = sizeof(T) == 4 ? 4e-7 : 1e-15;
  if (h.shape() != d.shape()) return false;
  for (std::size_t i = 0; i < h.size(); ++i)
    if (!(std::abs(double(h.data()[i]) - double(d.data()[i])) <= tol * (1 + std::abs(double(h.data()[i]))))) return false;
  return true;
#else
  return bit_identical(h, d);
#endif
}

/// Convolutions with the channel maps between them (no LayerNorm: the device LRP runs it).
template <class T>
using Cnn = Sequential<Input<4, 5, 5>, Conv2D<8, 3, 1, 1, 1, 1, T>, ReLU, ChannelShuffle, ChannelSlice<2, 6>,
                       Conv2D<6, 1, 1, 0, 1, 1, T>, ReLU, ChannelShuffle, Flatten, Dense<12, T>, ReLU, ChannelSlice<3, 10>,
                       Dense<3, T>>;
template <class T>
Cnn<T> make_cnn(std::uint64_t seed) {
  Cnn<T> n;
  initialize(n, seed);
  n.template layer<2>().groups = 4;
  n.template layer<6>().groups = 2;
  return n;
}
/// ConvNeXt's pattern: a convolution, LayerNorm over the channels, a pointwise MLP; and LayerNorm
/// over features at the end.
template <class T>
using NormNet = Sequential<Input<3, 4, 4>, Conv2D<6, 3, 1, 1, 1, 1, T>, LayerNorm<6, T>, Conv2D<12, 1, 1, 0, 1, 1, T>, GELU,
                           ChannelShuffle, ChannelSlice<0, 6>, Flatten, Dense<8, T>, LayerNorm<8, T>, Dense<3, T>>;
template <class T>
NormNet<T> make_norm_net(std::uint64_t seed) {
  NormNet<T> n;
  initialize(n, seed);
  std::mt19937_64 r(seed);
  std::normal_distribution<double> g(0, 0.3);
  for (auto& v : n.template layer<1>().gamma) v = T(1 + g(r));
  for (auto& v : n.template layer<1>().beta) v = T(g(r));
  n.template layer<4>().groups = 3;
  n.template layer<8>().eps = 1e-5;
  return n;
}
}  // namespace

TEST_CASE("thrust channel ops: the properties give every one a kernel; the channel maps an LRP step") {
  static_assert(ThrustLayer<ChannelShuffle> && ThrustLayer<ChannelSlice<>> && ThrustLayer<ChannelSlice<1, 3>> &&
                ThrustLayer<LayerNorm<>> && ThrustLayer<LayerNorm<6, double>>);
  static_assert(ThrustLrpLayer<ChannelShuffle> && ThrustLrpLayer<ChannelSlice<>> && !ThrustLrpLayer<LayerNorm<>>);
  static_assert(detail::thrust_supported_type<DynamicNetwork>());  // every op of the run-time variant
  static_assert(detail::thrust_supported_type<basic_dynamic_network<double>>());
}

TEST_CASE("thrust channel ops: weightless nets of them and LayerNorm alone against the host, float and double") {
  Sequential<Input<6, 3, 2>, ChannelShuffle, ChannelSlice<1, 5>, ChannelShuffle, ChannelSlice<1, 3>, Flatten, ChannelSlice<2, 11>> maps;
  maps.layer<0>().groups = 3;
  maps.layer<2>().groups = 2;
  const auto x = random_x<float>(7, shape(6, 3, 2), 21, -4.f, 4.f);
  CHECK(bit_identical(forward(execution::seq, maps, x), forward(execution::thrust, maps, x)));
  CHECK(bit_identical(forward(execution::seq, maps, x), forward(thrust_policy{.batch = 3}, to_dynamic(maps), x)));
  const auto xd = random_x<double>(7, shape(6, 3, 2), 22, -4., 4.);
  CHECK(bit_identical(forward(execution::seq, maps, xd), forward(execution::thrust, to_dynamic(maps), xd)));

  Sequential<Input<6, 3, 4>, LayerNorm<6, double>> ln;
  initialize(ln, 1);
  std::mt19937_64 r(2);
  std::normal_distribution<double> g(0, 1);
  for (auto& v : ln.layer<0>().gamma) v = g(r);
  for (auto& v : ln.layer<0>().beta) v = g(r);
  const auto xl = random_x<double>(5, shape(6, 3, 4), 23, -3., 3.);
  CHECK(same_norm(forward(execution::seq, ln, xl), forward(execution::thrust, ln, xl)));
  CHECK(same_norm(forward(execution::seq, ln, xl), forward(execution::thrust, to_dynamic(ln), xl)));
  const auto lf = network_cast<float>(to_dynamic(ln));
  const auto xf = random_x<float>(5, shape(6, 3, 4), 24, -3.f, 3.f);
  CHECK(same_norm(forward(execution::seq, lf, xf), forward(execution::thrust, lf, xf)));
  Sequential<Input<7>, LayerNorm<7>> feat;  // one position: the features
  initialize(feat, 3);
  const auto xv = random_x<float>(9, shape(7), 25, -5.f, 5.f);
  CHECK(same_norm(forward(execution::seq, feat, xv), forward(execution::thrust, feat, xv)));
}

TEST_CASE("thrust channel ops: with convolutions, forward and profile against the host; ConvNeXt's LayerNorm pattern") {
  const auto cnn = make_cnn<float>(4);
  const auto x = random_x<float>(40, shape(4, 5, 5), 5, -2.f, 2.f);
  CHECK(rel_diff(forward(execution::seq, cnn, x), forward(thrust_policy{.batch = 16}, cnn, x)) <= 1e-5);
  CHECK(rel_diff(forward(execution::seq, cnn, x), forward(execution::thrust, to_dynamic(cnn), x)) <= 1e-5);
  const auto nn = make_norm_net<float>(6);
  const auto xn = random_x<float>(30, shape(3, 4, 4), 7, -2.f, 2.f);
  CHECK(rel_diff(forward(execution::seq, nn, xn), forward(thrust_policy{.batch = 8}, nn, xn)) <= 1e-5);
  CHECK(rel_diff(forward(execution::seq, nn, xn), forward(execution::thrust, to_dynamic(nn), xn)) <= 1e-5);
  for (auto g : {granularity::element, granularity::channel}) {
    CHECK(profile_diff(profile_network(execution::seq, cnn, x, {.grain = g}), profile_network(thrust_policy{.batch = 16}, cnn, x, {.grain = g})) <=
          1e-5);
    CHECK(profile_diff(profile_network(execution::seq, nn, xn, {.grain = g}), profile_network(thrust_policy{.batch = 8}, nn, xn, {.grain = g})) <=
          1e-5);
  }
  const auto nd = make_norm_net<double>(8);
  const auto xd = random_x<double>(12, shape(3, 4, 4), 9, -2., 2.);
  CHECK(rel_diff(forward(execution::seq, nd, xd), forward(execution::thrust, nd, xd)) <= 1e-12);
}

TEST_CASE("thrust channel ops: LRP through the channel maps against the host; LayerNorm is refused, naming it") {
  const auto cnn = make_cnn<double>(10);
  const auto x = random_x<double>(9, shape(4, 5, 5), 11, -2., 2.);
  const double dd = relevance_diff(cnn, x, {.batch = 4});
  MESSAGE("relevance, conv / shuffle / slice net in double: worst relative difference " << dd);
  CHECK(dd <= 1e-10);
  CHECK(relevance_diff(to_dynamic(cnn), x) <= 1e-10);
  // weightless: the gather adds exactly what the host adds
  Sequential<Input<4, 2, 2>, ChannelShuffle, ChannelSlice<1, 4>, Flatten, Dense<2, double>> small;
  initialize(small, 12);
  small.layer<0>().groups = 2;
  const auto xs = random_x<double>(6, shape(4, 2, 2), 13, -1., 1.);
  for (const auto& o : lrp_rules)
    CHECK(bit_identical(relevance(execution::seq, small, xs, lrp_input, o), relevance(execution::thrust, small, xs, lrp_input, o)));
  const auto nn = to_dynamic(make_norm_net<double>(14));
  try {
    (void)relevance(execution::thrust, nn, random_x<double>(2, shape(3, 4, 4), 15));
    FAIL("no error");
  } catch (const logic_error& e) {
    const std::string w = e.what();
    CAPTURE(w);
    CHECK(w.find("LayerNorm") != std::string::npos);
    CHECK(w.find("no device LRP step") != std::string::npos);
  }
}

TEST_CASE("thrust channel ops: ExactLine through the channel maps matches the host's") {
  const auto cnn = make_cnn<double>(16);
  const auto a = random_rows(4, 100, 17, -1.5, 1.5), b = random_rows(4, 100, 18, -1.5, 1.5);
  const auto h = exact_lines(execution::seq, cnn, a, b);
  const auto d = exact_lines(execution::thrust, cnn, a, b);
  const auto r = check_same_lines(h, d);
  CHECK(r.pieces > 4);
  check_same_lines(h, exact_lines(execution::thrust, to_dynamic(cnn), a, b));
}
