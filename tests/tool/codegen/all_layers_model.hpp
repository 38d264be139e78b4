// tests/tool/codegen/all_layers_model.hpp -- a small network with every layer type the code
// generator supports, built in code with fixed seeds (shared by the fixture writer and the test).
#pragma once

#include <cstdint>
#include <limits>
#include <random>

#include <nnlens/nnlens.hpp>

namespace nnlens::test {

using AllLayers = Sequential<
    Input<2, 12, 12>, Affine<2>, Conv2D<4, 3, 1, 1>, BatchNorm<4>, LeakyReLU,
    Conv2DG<4, conv_geometry{3, 2, 1, 2, 1, 0, 0, 1, 1, 1, 2}>,            // rectangular, grouped -> 4x11x6
    MaxPool2D<2>,                                                           // 4x5x3
    Residual<Block<Conv2D<4, 3, 1, 1>, ReLU>>,                              // identity shortcut
    Residual<Block<Conv2D<8, 1>, HardTanh>, Block<Conv2D<8, 1>, BatchNorm<8>>>,  // projection -> 8x5x3
    AvgPool2D<2, 1, 1, false>,                                              // 8x6x4
    MaxPool2DG<pool_geometry{2, 3, 2, 1, 0, 0, 0, 0, true, true}>,          // ceil_mode -> 8x3x2
    Clamp, Conv2D<6, 1, 1, 0, 1, 2>, GlobalAvgPool, Flatten,                // 6
    Dense<6>, Dropout, Identity, BatchNorm<6>, Affine<1>, HardTanh, Dense<3>, Softmax>;

/// The network, initialised from `seed`, with non-trivial normalisation statistics and
/// hyper-parameters (so that a forgotten value shows in the outputs).
inline AllLayers make_all_layers(std::uint64_t seed = 7) {
  AllLayers net;
  initialize(net, seed);
  std::mt19937_64 rng(seed + 1);
  std::uniform_real_distribution<float> u(-1.f, 1.f), pos(0.5f, 2.f);
  auto perturb_bn = [&](auto& bn) {
    for (auto& v : bn.gamma) v = pos(rng);
    for (auto& v : bn.beta) v = u(rng);
    for (auto& v : bn.running_mean) v = u(rng);
    for (auto& v : bn.running_var) v = pos(rng);
    bn.eps = 1e-3;
  };
  auto perturb_affine = [&](auto& a) {
    for (auto& v : a.s) v = pos(rng);
    for (auto& v : a.t) v = u(rng);
  };
  perturb_affine(std::get<0>(net.layers));
  perturb_bn(std::get<2>(net.layers));
  std::get<3>(net.layers).alpha = 0.125;
  std::get<7>(net.layers).block.layer<1>().lo = -0.5;
  std::get<7>(net.layers).block.layer<1>().hi = 0.75;
  perturb_bn(std::get<7>(net.layers).shortcut.layer<1>());
  std::get<10>(net.layers).lo = 0.0;
  std::get<10>(net.layers).hi = 0.6;
  std::get<15>(net.layers).p = 0.3;
  perturb_bn(std::get<17>(net.layers));
  perturb_affine(std::get<18>(net.layers));
  std::get<19>(net.layers).lo = -std::numeric_limits<double>::infinity();
  std::get<19>(net.layers).hi = 2.0;
  return net;
}

/// Deterministic inputs in [-2, 2].
inline xt::xarray<float> all_layers_inputs(std::size_t batch, std::uint64_t seed = 11) {
  xt::xarray<float> x = xt::xarray<float>::from_shape({batch, 2, 12, 12});
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  for (auto& v : x) v = u(rng);
  return x;
}

}  // namespace nnlens::test
