// The thrust backend (nnlens/thrust/): forward and NNSlicer profiling on the thrust device system
// (OMP in CI: g++ -fopenmp -DTHRUST_DEVICE_SYSTEM=THRUST_DEVICE_SYSTEM_OMP; CUDA when built with
// NNLENS_CUDA) against the host policy.  Tolerance: float, |thrust - host| <= 1e-5 * (1 + max|host|)
// for outputs, relative 1e-5 for profile sums (the kernels sum in another order than the host GEMM).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>

#include <nnlens/layers/all.hpp>
#include <nnlens/network/dynamic_network.hpp>
#include <nnlens/network/forward.hpp>
#include <nnlens/network/parameters.hpp>
#include <nnlens/nnslicer/profile.hpp>
#include <nnlens/thrust/forward.hpp>
#include <nnlens/thrust/profile.hpp>

#include "thrust_test_util.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif

using namespace nnlens;
using namespace nnlens_thrust_test;

namespace {

using LeNet5 = Sequential<Input<1, 28, 28>, Conv2D<6, 5, 1, 2>, ReLU, MaxPool2D<2>, Conv2D<16, 5>, ReLU, MaxPool2D<2>,
                          Flatten, Dense<120>, ReLU, Dense<84>, ReLU, Dense<10>>;
using MLP = Sequential<Input<784>, Dense<128>, ReLU, Dense<64>, ReLU, Dense<10>>;
// Every geometry the kernels handle: strides, dilation, asymmetric padding, groups, padded and
// overlapping pools, ceil mode, a 1x1 convolution.
using Odd = Sequential<Input<4, 13, 11>,
                       Conv2DG<6, conv_geometry{.kh = 3, .kw = 2, .stride_h = 2, .stride_w = 1, .pad_top = 1, .pad_left = 0,
                                                .pad_bottom = 2, .pad_right = 1, .groups = 2}>,
                       ReLU, Conv2DG<8, conv_geometry{.kh = 3, .stride_h = 1, .stride_w = 2, .pad_top = 2, .dilation_h = 2}>,
                       MaxPool2DG<pool_geometry{.kh = 3, .kw = 2, .stride_h = 1, .stride_w = 2, .pad_top = 1, .pad_left = 1,
                                                .ceil_mode = true}>,
                       Conv2D<3, 1>, ReLU, Flatten, Dense<7>>;
// Wide convolutions (>= 16 channels per group) take the implicit-GEMM kernel: partial tiles
// (18 channels per group, 35 pixels), groups, strides, dilation, asymmetric padding.
using Wide = Sequential<Input<3, 9, 10>,
                        Conv2DG<32, conv_geometry{.kh = 3, .kw = 2, .stride_h = 2, .stride_w = 1, .pad_top = 1, .pad_left = 2,
                                                  .pad_bottom = 0, .pad_right = 1, .dilation_h = 1, .dilation_w = 2}>,
                        ReLU, Conv2DG<36, conv_geometry{.kh = 3, .stride_h = 1, .pad_top = 1, .groups = 2}>, Flatten, Dense<5>>;

void check_close(const xt::xarray<float>& host, const xt::xarray<float>& dev) {
  CHECK(rel_diff(host, dev) <= 1e-5);  // observed <= 1.2e-7 (OMP, g++ 12)
}

void check_profiles(const profile& h, const profile& d) {
  CHECK(profile_diff(h, d) <= 1e-5);  // observed <= 4e-7
}

template <class Net>
Net make(std::uint64_t seed) {
  Net net;
  initialize(net, seed);
  return net;
}

}  // namespace

TEST_CASE("thrust: the pinned thrust, its device system, the policy") {
  std::printf("nnlens::thrust: THRUST_VERSION %d (%d.%d.%d), device system %d (CUDA %d, OMP %d, TBB %d, CPP %d)\n",
              THRUST_VERSION, THRUST_MAJOR_VERSION, THRUST_MINOR_VERSION, THRUST_SUBMINOR_VERSION, THRUST_DEVICE_SYSTEM,
              THRUST_DEVICE_SYSTEM_CUDA, THRUST_DEVICE_SYSTEM_OMP, THRUST_DEVICE_SYSTEM_TBB, THRUST_DEVICE_SYSTEM_CPP);
#if defined(NNLENS_THRUST_PINNED_VERSION)
  CHECK(THRUST_VERSION == NNLENS_THRUST_PINNED_VERSION);  // the CCCL headers CMake found, not another thrust
#endif
  CHECK(THRUST_VERSION >= 200000);  // CCCL (the CUDA toolkit's), not Debian's 1.17
  CHECK(nnlens::thrust_version == THRUST_VERSION);
  static_assert(execution::is_execution_policy_v<execution::thrust_policy>);
  static_assert(execution::is_execution_policy_v<const thrust_policy&>);
  static_assert(execution::is_execution_policy_v<execution::parallel_policy>);
  static_assert(!execution::is_execution_policy_v<MLP>);
}

TEST_CASE("thrust: LeNet-5 forward equals the host forward") {
  const auto net = make<LeNet5>(5);
  const auto x = random_x(37, LeNet5::input_shape, 1);  // 37: partial GEMM tiles
  const auto host = forward(execution::seq, net, x);
  check_close(host, forward(execution::thrust, net, x));
  check_close(host, forward(thrust_policy{.batch = 8}, net, x));  // several device passes
  SUBCASE("the dynamic form") {
    const auto d = to_dynamic(net);
    check_close(host, forward(execution::thrust, d, x));
  }
}

TEST_CASE("thrust: MLP forward equals the host forward") {
  const auto net = make<MLP>(7);
  const auto x = random_x(130, MLP::input_shape, 2);
  check_close(forward(execution::par, net, x), forward(execution::thrust, net, x));
  const auto x1 = random_x(1, MLP::input_shape, 3);
  check_close(forward(net, x1), forward(execution::thrust, net, x1));
}

TEST_CASE("thrust: strided, dilated, grouped, padded convolutions and pools") {
  const auto net = make<Odd>(11);
  const auto x = random_x(9, Odd::input_shape, 4);
  check_close(forward(net, x), forward(execution::thrust, net, x));
  check_close(forward(net, x), forward(execution::thrust, to_dynamic(net), x));
  const auto wide = make<Wide>(12);
  const auto xw = random_x(7, Wide::input_shape, 5);
  check_close(forward(wide, xw), forward(execution::thrust, wide, xw));
  check_close(forward(wide, xw), forward(execution::thrust, to_dynamic(wide), xw));
  check_profiles(profile_network(wide, xw, {.grain = granularity::element}),
                 profile_network(execution::thrust, wide, xw, {.grain = granularity::element}));
}

TEST_CASE("thrust: double networks") {
  using D = Sequential<Input<2, 6, 6>, Conv2D<3, 3, 1, 1, 1, 1, double>, ReLU, MaxPool2D<2>, Flatten, Dense<5, double>>;
  const auto net = make<D>(3);
  xt::xarray<double> x = random_x(6, D::input_shape, 9);
  const auto h = forward(net, x), t = forward(execution::thrust, net, x);
  double err = 0;
  for (std::size_t i = 0; i < h.size(); ++i) err = std::max(err, std::abs(h.data()[i] - t.data()[i]));
  CHECK(err <= 1e-12);
}

TEST_CASE("thrust: profile_network equals the host profile") {
  const auto net = make<LeNet5>(8);
  const auto x = random_x(300, LeNet5::input_shape, 5);
  for (granularity g : {granularity::channel, granularity::element}) {
    CAPTURE(granularity_name(g));
    const profile h = profile_network(execution::seq, net, x, {.grain = g});
    check_profiles(h, profile_network(execution::thrust, net, x, {.grain = g}));
    check_profiles(h, profile_network(thrust_policy{.batch = 64}, net, x, {.grain = g}));
  }
  const auto m = make<MLP>(2);
  const auto xm = random_x(70, MLP::input_shape, 6);
  check_profiles(profile_network(m, xm), profile_network(execution::thrust, m, xm));
#if !defined(__CUDACC__)  // nvcc 13's front end rejects network/graph.hpp's op_graph of a DynamicNetwork
                          // (the sign_is_composite concept, a lambda in a requires-expression)
  check_profiles(profile_network(m, xm), profile_network(execution::thrust, to_dynamic(m), xm));
#endif
}

#if defined(_OPENMP) && THRUST_DEVICE_SYSTEM == THRUST_DEVICE_SYSTEM_OMP
TEST_CASE("thrust: results do not depend on the number of OpenMP threads") {
  const auto net = make<LeNet5>(1);
  const auto x = random_x(21, LeNet5::input_shape, 8);
  const int before = omp_get_max_threads();
  omp_set_num_threads(1);
  const auto y1 = forward(execution::thrust, net, x);
  const auto p1 = profile_network(execution::thrust, net, x);
  omp_set_num_threads(2);
  const auto y2 = forward(execution::thrust, net, x);
  const auto p2 = profile_network(execution::thrust, net, x);
  omp_set_num_threads(before);
  CHECK(y1 == y2);
  CHECK(p1.sums == p2.sums);
}
#endif

TEST_CASE("thrust: the host forward's errors") {
  const auto net = make<MLP>(1);
  auto x = random_x(3, MLP::input_shape, 1);
  CHECK_THROWS_AS(forward(execution::thrust, net, random_x(2, shape(783), 1)), shape_error);
  x(1, 5) = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS_AS(forward(execution::thrust, net, x), value_error);
  CHECK_THROWS_AS(profile_network(execution::thrust, net, x), value_error);
  CHECK_THROWS_AS(profile_network(execution::thrust, net, random_x(0, MLP::input_shape, 1)), data_error);
  const auto e = forward(execution::thrust, net, random_x(0, MLP::input_shape, 1));
  CHECK(e.size() == 0);
}
