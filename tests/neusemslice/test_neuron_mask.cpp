// Neuron masks (neusemslice/neuron_mask.hpp): NeuSemSlice's units, masking, parameter accounting and
// freezing (docs/specs/neusemslice.md#7-test-oracles oracles 6, 7, 9), the mask file and its errors.
#include <doctest/doctest.h>

#include <cstring>
#include <random>
#include <sstream>

#include <nnlens/nnlens.hpp>
#include <nnlens/neusemslice/neuron_mask.hpp>
#include <nnlens/train/optimizer.hpp>

using namespace nnlens;

namespace {
using Mlp = Sequential<Input<784>, Dense<512>, ReLU, Dense<256>, ReLU, Dense<10>>;
using Cnn = Sequential<Input<1, 12, 12>, Conv2D<4, 3, 1, 1>, BatchNorm<4>, ReLU, MaxPool2D<2>, Conv2D<6, 3>, ReLU, Dropout, Flatten,
                       Dense<8>, ReLU, Dense<3>>;

xt::xarray<float> rand_x(std::size_t n, std::vector<std::size_t> s, std::uint64_t seed) {
  s.insert(s.begin(), n);
  xt::xarray<float> x = xt::xarray<float>::from_shape(s);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(0, 1);
  for (auto& v : x) v = u(rng);
  return x;
}
}  // namespace

TEST_CASE("units: Dense/Conv2D with their BatchNorm, activation and Dropout; the output unit") {
  Cnn net;
  initialize(net, 1);
  const auto us = neuron_units(net);
  REQUIRE(us.size() == 4);
  CHECK(us[0].layer == 0);
  CHECK(us[0].feature == 2);  // Conv2D, BatchNorm, ReLU
  CHECK(us[0].followers == std::vector<std::size_t>{1});
  CHECK(us[0].neurons == 4);
  CHECK(us[1].feature == 6);  // Conv2D, ReLU, Dropout
  CHECK(us[1].neurons == 6);
  CHECK(us[2].neurons == 8);
  CHECK(us[3].output);
  CHECK(!us[2].output);
}

TEST_CASE("oracle 7: compression-rate accounting of the MLP 784-512-256-10 (56.11%)") {
  Mlp net;
  initialize(net, 1);
  auto m = full_mask(net);
  for (std::size_t i = 256; i < 512; ++i) m.keep[0][i] = 0;
  for (std::size_t i = 128; i < 256; ++i) m.keep[1][i] = 0;
  const auto r = parameter_accounting(net, m);
  CHECK(r.total == 535818);
  CHECK(r.kept == 235146);
  CHECK(r.compression == doctest::Approx(56.11).epsilon(1e-4));
  CHECK(parameter_accounting(net, full_mask(net)).removed == 0);
}

TEST_CASE("oracle 6: masking everything-kept is bit-identical; a masked neuron equals its removal") {
  Cnn net;
  initialize(net, 3);
  auto& bn = std::get<1>(net.layers);
  for (std::size_t c = 0; c < 4; ++c) bn.beta(c) = 0.3f, bn.running_mean(c) = 0.1f;
  const auto x = rand_x(5, {1, 12, 12}, 4);
  const auto y0 = forward(net, x);
  const auto same = apply_neuron_mask(net, full_mask(net));
  const auto y1 = forward(same, x);
  CHECK(std::memcmp(y0.data(), y1.data(), y0.size() * sizeof(float)) == 0);
  // masked neurons output exactly 0 after their activation (BatchNorm's shift zeroed too)
  auto m = full_mask(net);
  m.keep[0][1] = 0, m.keep[1][4] = 0, m.keep[2][3] = 0;
  const auto masked = apply_neuron_mask(net, m);
  trace<float> tr;
  forward_trace(masked, 5, x.data(), tr);
  const auto a2 = tr.activation(3);  // after the first ReLU: [4, 12, 12]
  for (std::size_t r = 0; r < 5; ++r)
    for (std::size_t i = 0; i < 144; ++i) CHECK(a2[r * 576 + 144 + i] == 0.f);
  const auto a9 = tr.activation(10);  // after the ReLU of Dense<8>
  for (std::size_t r = 0; r < 5; ++r) CHECK(a9[r * 8 + 3] == 0.f);
  // removing dense neuron 3 of Dense<8> physically gives the same logits as masking it
  auto mm = full_mask(net);
  mm.keep[2][3] = 0;
  const auto yd = forward(apply_neuron_mask(net, mm), x);
  Sequential<Input<1, 12, 12>, Conv2D<4, 3, 1, 1>, BatchNorm<4>, ReLU, MaxPool2D<2>, Conv2D<6, 3>, ReLU, Dropout, Flatten, Dense<7>,
             ReLU, Dense<3>>
      small;
  initialize(small, 1);
  std::get<0>(small.layers) = std::get<0>(net.layers);
  std::get<1>(small.layers) = std::get<1>(net.layers);
  std::get<4>(small.layers) = std::get<4>(net.layers);
  const auto& d8 = std::get<8>(net.layers);
  const auto& d3 = std::get<10>(net.layers);
  auto& s7 = std::get<8>(small.layers);
  auto& s3 = std::get<10>(small.layers);
  for (std::size_t i = 0; i < d8.W.shape(0); ++i)
    for (std::size_t j = 0, k = 0; j < 8; ++j)
      if (j != 3) s7.W(i, k++) = d8.W(i, j);
  for (std::size_t j = 0, k = 0; j < 8; ++j)
    if (j != 3) {
      s7.b(k) = d8.b(j);
      for (std::size_t o = 0; o < 3; ++o) s3.W(k, o) = d3.W(j, o);
      ++k;
    }
  s3.b = d3.b;
  const auto ys = forward(small, x);
  for (std::size_t i = 0; i < ys.size(); ++i) CHECK(ys.data()[i] == doctest::Approx(yd.data()[i]).epsilon(1e-5));
}

TEST_CASE("oracle 9: the kept neurons' parameters train, the rest stay bit-identical (momentum, decay)") {
  Cnn net;
  initialize(net, 7);
  auto m = full_mask(net);
  for (std::size_t n = 0; n < 4; n += 2) m.keep[0][n] = 0;
  m.keep[2][0] = m.keep[2][5] = 0;
  const auto pm = neuron_parameter_mask(net, m);
  CHECK(pm.trainable_count() < pm.size());
  auto grad = net;
  for (auto s : parameter_spans(grad))
    for (auto& v : s) v = 0.5f;
  for (bool freeze_kept : {false, true}) {
    auto n2 = net;
    train::parameter_mask mask = freeze_kept ? pm.inverted() : pm;
    train::sgd opt(n2, {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01});
    for (int s = 0; s < 3; ++s) opt.step(n2, grad, &mask);
    const auto a = parameter_spans(std::as_const(net));
    const auto b = parameter_spans(std::as_const(n2));
    std::size_t changed = 0, frozen_moved = 0;
    for (std::size_t t = 0; t < a.size(); ++t)
      for (std::size_t i = 0; i < a[t].size(); ++i) {
        const bool moved = a[t][i] != b[t][i];
        changed += moved;
        if (!mask.trainable(t, i)) frozen_moved += moved;
      }
    CHECK(changed > 0);
    CHECK(frozen_moved == 0);
  }
}

TEST_CASE("mask files: round trip; another model's mask; malformed files") {
  Cnn net;
  initialize(net, 9);
  auto m = full_mask(net);
  m.keep[1][2] = 0;
  std::stringstream ss;
  save_neuron_mask(ss, m);
  const auto l = load_neuron_mask(ss, net);
  CHECK(l.keep == m.keep);
  Cnn other;
  initialize(other, 10);
  std::stringstream s2(ss.str());
  CHECK_THROWS_WITH_AS(load_neuron_mask(s2, other), doctest::Contains("another model"), data_error);
  std::stringstream s3(ss.str());
  CHECK_NOTHROW(load_neuron_mask(s3, other, false));  // same architecture: accepted when asked
  Mlp mlp;
  initialize(mlp, 1);
  CHECK_THROWS_AS(apply_neuron_mask(mlp, m), data_error);
  const std::string txt = ss.str();
  for (std::size_t cut : {std::size_t(0), std::size_t(10), txt.size() / 2}) {
    std::istringstream t(txt.substr(0, cut));
    CHECK_THROWS_AS(load_neuron_mask(t), data_error);
  }
  std::string g = txt;
  g[g.rfind('1')] = '7';
  std::istringstream t(g);
  CHECK_THROWS_WITH_AS(load_neuron_mask(t), doctest::Contains("line"), data_error);
}

TEST_CASE("masks across ShuffleNet's blocks: a composite or a channel shuffle between two units moves no reader weights") {
  // conv0 (4 channels) -> [channels 0..1 | conv(2..3)] -> ChannelShuffle -> conv2: conv2 reads
  // conv0's channels through the block and the shuffle, not one to one, so masking a conv0 neuron
  // removes its own weights only, and semslice's accounting runs
  using Shuffle = Sequential<Input<2, 4, 4>, Conv2D<4, 1>, ReLU,
                             Concat<Block<ChannelSlice<0, 2>>, Block<ChannelSlice<2, 4>, Conv2D<2, 1>, ReLU>>, ChannelShuffle,
                             Conv2D<4, 1>, ReLU, GlobalAvgPool, Flatten, Dense<3>>;
  Shuffle net;
  initialize(net, 3);
  net.layer<3>() = ChannelShuffle{2};
  const auto us = neuron_units(net);
  REQUIRE(us.size() >= 2);
  neuron_mask m = full_mask(net);
  m.keep[0][1] = 0;
  const auto r = parameter_accounting(net, m);
  // conv0's neuron 1: its 2 input weights and its bias; nothing of conv2 (not a direct reader)
  CHECK(r.removed == 3);
  const Shuffle masked = apply_neuron_mask(net, m);
  const auto y = forward(masked, xt::ones<float>({2, 2, 4, 4}));
  CHECK(y.shape()[1] == 3);
}

TEST_CASE("units: a channel shuffle ends the unit before it, so a masked neuron's values are its own channel") {
  // conv0 -> ReLU -> ChannelShuffle(2) -> conv1: channel 1 of the shuffle's output is conv0's channel 2
  using Net = Sequential<Input<2, 4, 4>, Conv2D<4, 1>, ReLU, ChannelShuffle, Conv2D<4, 1>, ReLU, GlobalAvgPool, Flatten,
                         Dense<3>>;
  Net net;
  initialize(net, 5);
  net.layer<2>() = ChannelShuffle{2};
  const auto us = neuron_units(net);
  REQUIRE(us.size() == 3);
  CHECK(us[0].layer == 0);
  CHECK(us[0].feature == 1);  // the ReLU, not the shuffle
  CHECK(us[1].layer == 3);
  neuron_mask m = full_mask(net);
  m.keep[0][1] = 0;
  // conv0's neuron 1 (2 weights, a bias); conv1 reads it through the shuffle, not one to one
  CHECK(parameter_accounting(net, m).removed == 3);
}
