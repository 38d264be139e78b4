// NNSlicer: every op's sign rule on tiny hand-made networks with hand-computed CONTRIB tables
// (channel and element granularity), the θ filter's options, static vs dynamic networks, and
// bad input.  Unless stated otherwise the profile is a single all-zero sample (every mean is the
// bias path's value, 0 here), so Δ = the sample's own activation.
#include "nnslicer_test_util.hpp"

#include <string>

using namespace slicetest;

namespace {

template <class Net>
contrib_table slice1(const Net& net, const std::vector<double>& prof_row, const std::vector<double>& x, shape s, std::size_t target,
                     slice_options o = {.theta = 0.0}, granularity g = granularity::channel) {
  const auto p = profile_network(net, batch({prof_row}, s), {.grain = g});
  return nnslicer(net, p, batch({x}, s), criterion::target(target), o);
}

template <std::size_t C, std::size_t H, std::size_t W>
std::vector<double> zeros() {
  return std::vector<double>(C * H * W, 0.0);
}

}  // namespace

TEST_CASE("Dense: items (x_i, W[i, j], W[i, j] Δx_i); synapse index i * out + j") {
  Sequential<Input<3>, Dense<2, double>> net;
  std::get<0>(net.layers) = dense_A<2>({{1, -2, 0}, {3, 1, -1}}, {5, -7});  // the bias never matters
  // unit 1: Δy = 3*1 + 1*2 - 1*(-1) = 6 > 0; items 3, 2, 1 (θ = 0: all kept, all +)
  auto t = slice1(net, {0, 0, 0}, {1, 2, -1}, shape(3), 1);
  CHECK(t.neurons[1] == I64{0, 1});
  CHECK(t.neurons[0] == I64{1, 1, 1});
  CHECK(t.synapses[0] == I64{0, 1, 0, 1, 0, 1});
  // unit 0: Δy = 1 - 4 + 0 = -3; items 1, -4, 0 (dropped); votes sgn(Δy) sgn(c) = -1, +1
  t = slice1(net, {0, 0, 0}, {1, 2, -1}, shape(3), 0);
  CHECK(t.neurons[0] == I64{-1, 1, 0});
  CHECK(t.synapses[0] == I64{-1, 0, 1, 0, 0, 0});
}

TEST_CASE("Conv2D, channel level: one vote per kernel weight, Δx of the input channel") {
  using Net = Sequential<Input<2, 2, 2>, Conv2D<1, 2, 1, 0, 1, 1, double>>;
  Net net;
  auto& c = std::get<0>(net.layers);
  c.W = tensor<double, 4>::from_shape({1, 2, 2, 2});
  const double w[8] = {1, -1, 0, 2, 0.5, 1, -1, -3};
  std::copy(w, w + 8, c.W.begin());
  c.b = xt::zeros<double>({1});
  const std::vector<double> x{1, 1, 1, 1, -2, -2, -2, -2};  // channel means 1, -2; y = 2 + 5 = 7
  auto t = slice1(net, zeros<2, 2, 2>(), x, shape(2, 2, 2), 0);
  // c = W * Δx_c = (1, -1, 0, 2 | -1, -2, 2, 6).  θ = 0 with the literal max-j cut-off still drops
  // the prefix (1, -1) in |c| order, whose sum is exactly 0 (spec §2.6)
  CHECK(t.synapses[0] == I64{0, 0, 0, 1, -1, -1, 1, 1});
  CHECK(t.neurons[0] == I64{1, 0});
  CHECK(t.neurons[1] == I64{1});
  // first_violation stops at S_1 = 1 > 0: every non-zero item is kept, one vote per weight
  t = slice1(net, zeros<2, 2, 2>(), x, shape(2, 2, 2), 0, {.theta = 0.0, .cutoff = theta_cutoff::first_violation});
  CHECK(t.synapses[0] == I64{1, -1, 0, 1, -1, -1, 1, 1});
  CHECK(t.neurons[0] == I64{1, 0});
  // θ = 0.3: D = 7, prefix sums in |c| order (ties by item order) 1, 0, -1, 1, -1, 1 stay <= 2.1:
  // only the largest item (synapse 7, c = 6) is kept
  t = slice1(net, zeros<2, 2, 2>(), x, shape(2, 2, 2), 0, {.theta = 0.3});
  CHECK(t.synapses[0] == I64{0, 0, 0, 0, 0, 0, 0, 1});
  CHECK(t.neurons[0] == I64{0, 1});
}

TEST_CASE("Conv2D, element level: the receptive field, with stride and padding") {
  Sequential<Input<1, 3, 3>, Conv2D<1, 3, 2, 1, 1, 1, double>> net;  // 3x3, stride 2, pad 1 -> 2x2
  auto& c = std::get<0>(net.layers);
  c.W = tensor<double, 4>::from_shape({1, 1, 3, 3});
  for (std::size_t k = 0; k < 9; ++k) c.W.data()[k] = double(k) - 4;  // -4 .. 4
  c.b = xt::zeros<double>({1});
  std::vector<double> x(9);
  for (std::size_t i = 0; i < 9; ++i) x[i] = double(i + 1);
  // output (0,0): kernel taps (1..2, 1..2) see inputs (0..1, 0..1); tap 4 has w = 0 -> dropped;
  // items: tap 5 (w 1) x[1] = 2, tap 7 (w 3) x[3] = 4, tap 8 (w 4) x[4] = 5: all +, Δy = 34
  auto t = slice1(net, zeros<1, 3, 3>(), x, shape(1, 3, 3), 0, {.theta = 0.0}, granularity::element);
  CHECK(t.neurons[1] == I64{1, 0, 0, 0});
  CHECK(t.neurons[0] == I64{0, 1, 0, 1, 1, 0, 0, 0, 0});
  CHECK(t.synapses[0] == I64{0, 0, 0, 0, 0, 1, 0, 1, 1});
  // output (1,1): taps (0..1, 0..1) see inputs (1..2, 1..2): w -4 -3 -1 0 on x 5 6 8 9:
  // c = -20, -18, -8, (0) ; Δy = -46; votes sgn(Δy) sgn(c) = +1
  t = slice1(net, zeros<1, 3, 3>(), x, shape(1, 3, 3), 3, {.theta = 0.0}, granularity::element);
  CHECK(t.neurons[0] == I64{0, 0, 0, 0, 1, 1, 0, 1, 0});
  CHECK(t.synapses[0] == I64{1, 1, 0, 1, 0, 0, 0, 0, 0});
}

TEST_CASE("Conv2D, grouped and depthwise: only the group's input channels") {
  SUBCASE("groups = 2, 4 outputs, 1x1") {
    Sequential<Input<2, 1, 1>, Conv2D<4, 1, 1, 0, 1, 2, double>> net;
    auto& c = std::get<0>(net.layers);
    c.W = tensor<double, 4>::from_shape({4, 1, 1, 1});
    const double w[4] = {1, -2, 3, 4};
    std::copy(w, w + 4, c.W.begin());
    c.b = xt::zeros<double>({4});
    const auto p = profile_network(net, batch({{0, 0}}, shape(2, 1, 1)));
    // y = (1, -2, -3, -4) for x = (1, -1); o = 1 reads channel 0, o = 2 reads channel 1
    const auto t = nnslicer(net, p, batch({{1, -1}}, shape(2, 1, 1)), criterion::fixed({1, 2}), {.theta = 0.0});
    CHECK(t.neurons[1] == I64{0, 1, 1, 0});
    CHECK(t.neurons[0] == I64{1, 1});
    CHECK(t.synapses[0] == I64{0, 1, 1, 0});
  }
  SUBCASE("depthwise 3x3, padding 1, channel level") {
    Sequential<Input<2, 3, 3>, Conv2D<2, 3, 1, 1, 1, 2, double>> net;
    initialize(net, 4);
    const auto X = random_batch(1, shape(2, 3, 3), 5, 0.5, 1.0);
    const auto p = profile_network(net, random_batch(10, shape(2, 3, 3), 6));
    for (std::size_t o : {0u, 1u}) {
      const auto t = nnslicer(net, p, X, criterion::target(o), {.theta = 0.0});
      CHECK(t.neurons[0][1 - o] == 0);  // the other channel is not in o's group
      CHECK(t.neurons[0][o] != 0);
      for (std::size_t s = 0; s < 18; ++s) {
        CAPTURE(s);
        if (s / 9 != o) CHECK(t.synapses[0][s] == 0);
        else CHECK(std::llabs(t.synapses[0][s]) == 1);  // exactly one vote per kernel weight
      }
    }
  }
}

TEST_CASE("pooling: AvgPool2D, MaxPool2D, GlobalAvgPool at channel and element level") {
  SUBCASE("AvgPool2D") {
    Sequential<Input<1, 2, 2>, AvgPool2D<2>, Flatten, Dense<1, double>> net;
    std::get<2>(net.layers) = dense_A<1>({{1}});
    const std::vector<double> x{8, 1, -2, 0};  // Δy = 7/4
    // element: items Δx_i / 4 = 2, 0.25, -0.5, (0)
    auto t = slice1(net, zeros<1, 2, 2>(), x, shape(1, 2, 2), 0, {.theta = 0.0}, granularity::element);
    CHECK(t.neurons[0] == I64{1, 1, -1, 0});
    // θ = 0.3: prefix sums 0.25, -0.25 stay within 0.525: only x0 is kept
    t = slice1(net, zeros<1, 2, 2>(), x, shape(1, 2, 2), 0, {.theta = 0.3}, granularity::element);
    CHECK(t.neurons[0] == I64{1, 0, 0, 0});
    // channel: one item, Δx_c = 7/4
    t = slice1(net, zeros<1, 2, 2>(), x, shape(1, 2, 2), 0);
    CHECK(t.neurons[0] == I64{1});
    CHECK(t.neurons[1] == I64{1});
  }
  SUBCASE("MaxPool2D: channel level takes Δ of the channel mean (no gate), element level the arg-max") {
    Sequential<Input<1, 2, 2>, MaxPool2D<2>, Flatten, Dense<1, double>> net;
    std::get<2>(net.layers) = dense_A<1>({{1}});
    // profile (1,1,1,1): means 1, pool 1; sample (3,-3,-3,-3): mean -1.5 (Δx = -2.5), pool 3 (Δ = 2)
    auto t = slice1(net, {1, 1, 1, 1}, {3, -3, -3, -3}, shape(1, 2, 2), 0);
    CHECK(t.neurons[1] == I64{1});
    CHECK(t.neurons[0] == I64{-1});
    t = slice1(net, {1, 1, 1, 1}, {3, -3, -3, -3}, shape(1, 2, 2), 0, {.theta = 0.0}, granularity::element);
    CHECK(t.neurons[0] == I64{1, 0, 0, 0});
    // a tie in the window: the first maximal element
    t = slice1(net, {0, 0, 0, 0}, {1, 2, 2, 0}, shape(1, 2, 2), 0, {.theta = 0.0}, granularity::element);
    CHECK(t.neurons[0] == I64{0, 1, 0, 0});
  }
  SUBCASE("GlobalAvgPool") {
    Sequential<Input<1, 2, 2>, GlobalAvgPool, Flatten, Dense<1, double>> net;
    std::get<2>(net.layers) = dense_A<1>({{1}});
    // Δx = (2, -4, -4, -4), mean -2.5
    auto t = slice1(net, {1, 1, 1, 1}, {3, -3, -3, -3}, shape(1, 2, 2), 0);
    CHECK(t.neurons[1] == I64{1});
    CHECK(t.neurons[0] == I64{1});
    t = slice1(net, {1, 1, 1, 1}, {3, -3, -3, -3}, shape(1, 2, 2), 0, {.theta = 0.0}, granularity::element);
    CHECK(t.neurons[0] == I64{-1, 1, 1, 1});
    // θ = 0.3: items 0.5, -1, -1, -1 (D = -2.5): prefixes 0.5, -0.5 within 0.75: x0, x1 dropped
    t = slice1(net, {1, 1, 1, 1}, {3, -3, -3, -3}, shape(1, 2, 2), 0, {.theta = 0.3}, granularity::element);
    CHECK(t.neurons[0] == I64{0, 0, 1, 1});
  }
}

TEST_CASE("ReLU gate at channel level (post-ReLU channel mean > 0) and element level") {
  Sequential<Input<2, 2, 2>, ReLU, Flatten, Dense<1, double>> net;
  std::get<2>(net.layers) = dense_A<1>({{1, 1, 1, 1, 1, 1, 1, 1}});
  // (not {1,1,1,1,0,0,0,0}: GCC 12.2 with -mavx512f stores that constant as a broadcast of 1.0)
  const std::vector<double> prof{2, 1, 1, 1, 0, 0, 0, 0};
  const std::vector<double> x{-1, -2, -3, -4, -1, 2, -3, -4};
  // ReLU out: ch0 0 (closed), ch1 (0,2,0,0) mean 0.5 (open); Δflat = (-2,-1,-1,-1 | 0,2,0,0), Δy = -3
  auto t = slice1(net, prof, x, shape(2, 2, 2), 0);
  CHECK(t.neurons[2] == I64{1, 1, 1, 1, 0, -1, 0, 0});
  CHECK(t.neurons[1] == I64{4, -1});  // the Flatten elements add into their channels
  CHECK(t.neurons[0] == I64{0, 1});   // ch0 closed; ch1: Δx_c = -1.5 (pre-activation mean)
  t = slice1(net, prof, x, shape(2, 2, 2), 0, {.theta = 0.0}, granularity::element);
  CHECK(t.neurons[1] == I64{1, 1, 1, 1, 0, -1, 0, 0});
  CHECK(t.neurons[0] == I64{0, 0, 0, 0, 0, -1, 0, 0});
}

TEST_CASE("LeakyReLU, HardTanh, Clamp, Dropout, Identity pass the sign through (no gate)") {
  const auto id = dense_A<2>({{1, 0}, {0, 1}});
  const auto sum = dense_A<1>({{1, 1}});
  const std::vector<double> x{-2, 0.5};
  SUBCASE("LeakyReLU") {
    Sequential<Input<2>, Dense<2, double>, LeakyReLU, Dense<1, double>> net;
    std::get<0>(net.layers) = id, std::get<2>(net.layers) = sum;
    const auto t = slice1(net, {0, 0}, x, shape(2), 0);  // out (-0.02, 0.5), Δy = 0.48
    CHECK(t.neurons[2] == I64{-1, 1});
    CHECK(t.neurons[1] == I64{-1, 1});  // x < 0 still passes (c = Δx)
    CHECK(t.neurons[0] == I64{-1, 1});
  }
  SUBCASE("HardTanh and Clamp") {
    Sequential<Input<2>, Dense<2, double>, HardTanh, Dense<1, double>> net;
    std::get<0>(net.layers) = id, std::get<2>(net.layers) = sum;
    const auto t = slice1(net, {0, 0}, x, shape(2), 0);  // out (-1, 0.5), Δy = -0.5
    CHECK(t.neurons[2] == I64{1, -1});
    CHECK(t.neurons[1] == I64{1, -1});  // saturated at -1, still passes
    CHECK(t.neurons[0] == I64{1, -1});
    Sequential<Input<2>, Dense<2, double>, Clamp, Dense<1, double>> net2;
    std::get<0>(net2.layers) = id, std::get<1>(net2.layers) = Clamp{-1, 1}, std::get<2>(net2.layers) = sum;
    const auto t2 = slice1(net2, {0, 0}, x, shape(2), 0);
    CHECK(t2.neurons == t.neurons);
    CHECK(t2.synapses == t.synapses);
  }
  SUBCASE("Dropout and Identity") {
    Sequential<Input<2>, Dense<2, double>, Dropout, Identity, Dense<1, double>> net;
    std::get<0>(net.layers) = id, std::get<3>(net.layers) = sum;
    const auto t = slice1(net, {0, 0}, x, shape(2), 0);  // Δy = -1.5
    CHECK(t.neurons[3] == I64{1, -1});
    CHECK(t.neurons[2] == I64{1, -1});
    CHECK(t.neurons[1] == I64{1, -1});
    CHECK(t.neurons[0] == I64{1, -1});
    CHECK(t.synapses[0] == I64{1, 0, 0, -1});
  }
}

TEST_CASE("BatchNorm: the scaled item vs bn_literal with a negative gamma") {
  Sequential<Input<1>, BatchNorm<1, double>, Dense<1, double>> net;
  auto& bn = std::get<0>(net.layers);
  bn.gamma = {-2.0};
  bn.beta = {0.3};
  bn.running_mean = {0.5};
  bn.running_var = {4.0};
  std::get<1>(net.layers) = dense_A<1>({{1}});
  // Δx = 1, ΔBN = -2/sqrt(4 + eps) < 0, Δy < 0
  auto t = slice1(net, {0}, {1}, shape(1), 0);
  CHECK(t.neurons[1] == I64{1});
  CHECK(t.neurons[0] == I64{1});  // scaled: c = a Δx < 0, so the vote keeps the sign
  t = slice1(net, {0}, {1}, shape(1), 0, {.theta = 0.0, .bn_literal = true});
  CHECK(t.neurons[1] == I64{1});
  CHECK(t.neurons[0] == I64{-1});  // literal: c = Δx > 0
  // positive gamma: both readings agree
  bn.gamma = {2.0};
  CHECK(slice1(net, {0}, {1}, shape(1), 0).neurons[0] == slice1(net, {0}, {1}, shape(1), 0, {.theta = 0, .bn_literal = true}).neurons[0]);
  CHECK(t.synapses[0].empty());  // BN parameters are not synapses
}

TEST_CASE("Affine: c = s Δx (the channel's mean scale at channel level)") {
  Sequential<Input<2, 1, 2>, Affine<4, double>, Flatten, Dense<1, double>> net;
  auto& a = std::get<0>(net.layers);
  a.s = {1.0, -3.0, 2.0, 2.0};
  a.t = {0.0, 0.0, 0.0, 0.0};
  std::get<2>(net.layers) = dense_A<1>({{0, 1, 1, 1}});
  const std::vector<double> x{1, 1, 1, 1};
  // Affine out (1, -3, 2, 2); Dense items (0), -3, 2, 2: D = 1 > 0; votes (0, -1, +1, +1)
  auto t = slice1(net, zeros<2, 1, 2>(), x, shape(2, 1, 2), 0);
  CHECK(t.neurons[2] == I64{0, -1, 1, 1});
  CHECK(t.neurons[1] == I64{-1, 2});  // channel 0: Δ = mean(1, -3) = -1
  CHECK(t.neurons[0] == I64{-1, 1});  // channel 0: c = mean(s) Δx = -1 with ΔAffine = -1: vote -1
  t = slice1(net, zeros<2, 1, 2>(), x, shape(2, 1, 2), 0, {.theta = 0.0}, granularity::element);
  CHECK(t.neurons[1] == I64{0, -1, 1, 1});
  CHECK(t.neurons[0] == I64{0, -1, 1, 1});
}

TEST_CASE("Flatten: element neurons feed their channel at channel level") {
  Sequential<Input<2, 2, 2>, Flatten, Dense<1, double>> net;
  std::get<1>(net.layers) = dense_A<1>({{1, -1, 2, 0.5, -1, -1, 3, 1}});
  const std::vector<double> x{1, 1, 1, 1, 2, -1, 1, 1};
  // c = (1, -1, 2, 0.5 | -2, 1, 3, 1): D = 5.5 > 0, votes = sgn(c)
  auto t = slice1(net, zeros<2, 2, 2>(), x, shape(2, 2, 2), 0);
  CHECK(t.neurons[1] == I64{1, -1, 1, 1, -1, 1, 1, 1});
  CHECK(t.neurons[0] == I64{2, 2});
  t = slice1(net, zeros<2, 2, 2>(), x, shape(2, 2, 2), 0, {.theta = 0.0}, granularity::element);
  CHECK(t.neurons[0] == I64{1, -1, 1, 1, -1, 1, 1, 1});
}

TEST_CASE("Residual: the Add node, identity and projection shortcuts, fork accumulation") {
  // h = a x, b = w h (block), s = h or p h (shortcut), z = b + s, o = z; x = 1, zero profile.
  SUBCASE("identity shortcut: the two votes on h cancel, so h is never expanded") {
    Sequential<Input<1>, Dense<1, double>, Residual<Block<Dense<1, double>>>, Dense<1, double>> net;
    std::get<0>(net.layers) = dense_A<1>({{1}});
    std::get<1>(net.layers).block = Block<Dense<1, double>>{std::tuple{dense_A<1>({{-0.5}})}};
    std::get<2>(net.layers) = dense_A<1>({{1}});
    // tensors: 0 x, 1 h, 2 b, 3 z, 4 o; nodes: 0 Dense, 1 block Dense, 2 Add, 3 Dense
    const op_graph<double> g(net);
    REQUIRE(g.nodes().size() == 4);
    CHECK(g.nodes()[2].type == "Add");
    CHECK(g.nodes()[2].in == 2);
    CHECK(g.nodes()[2].operands.ins == std::vector<std::size_t>{2, 1});
    CHECK(g.nodes()[2].operands.offsets == std::vector<std::size_t>{0, 0});
    // Add: Δz = 0.5, items b: -0.5, h: 1 (both kept at θ = 0.3): C[b] = -1, C[h] += 1;
    // block Dense: C[b] = -1, Δb = -0.5, c = -0.5: C[h] += -1 -> 0; so x and a get nothing
    const auto t = slice1(net, {0}, {1}, shape(1), 0, {.theta = 0.3});
    CHECK(t.neurons == std::vector<I64>{{0}, {0}, {-1}, {1}, {1}});
    CHECK(t.synapses == std::vector<I64>{{0}, {-1}, {}, {1}});
  }
  SUBCASE("projection shortcut") {
    Sequential<Input<1>, Dense<1, double>, Residual<Block<Dense<1, double>>, Block<Dense<1, double>>>, Dense<1, double>> net;
    std::get<0>(net.layers) = dense_A<1>({{1}});
    std::get<1>(net.layers).block = Block<Dense<1, double>>{std::tuple{dense_A<1>({{-0.5}})}};
    std::get<1>(net.layers).shortcut = Block<Dense<1, double>>{std::tuple{dense_A<1>({{2}})}};
    std::get<2>(net.layers) = dense_A<1>({{1}});
    // tensors: 0 x, 1 h, 2 b, 3 s, 4 z, 5 o; Δz = 1.5; Add items -0.5, 2 (0.5 > 0.45: both kept)
    auto t = slice1(net, {0}, {1}, shape(1), 0, {.theta = 0.3});
    CHECK(t.neurons == std::vector<I64>{{0}, {0}, {-1}, {1}, {1}, {1}});
    CHECK(t.synapses == std::vector<I64>{{0}, {-1}, {1}, {}, {1}});
    // θ = 0.4 (limit 0.6): the block's item is dropped at the Add; h gets only the shortcut's +1
    t = slice1(net, {0}, {1}, shape(1), 0, {.theta = 0.4});
    CHECK(t.neurons == std::vector<I64>{{1}, {1}, {0}, {1}, {1}, {1}});
    CHECK(t.synapses == std::vector<I64>{{1}, {0}, {1}, {}, {1}});
  }
}

namespace {
using ResNet = Sequential<Input<2, 6, 6>, Conv2D<4, 3, 1, 1, 1, 1, double>, BatchNorm<4, double>, ReLU,
                          Residual<Block<Conv2D<4, 3, 1, 1, 1, 1, double>, BatchNorm<4, double>, ReLU, Conv2D<4, 3, 1, 1, 1, 1, double>>>,
                          ReLU, Residual<Block<Conv2D<6, 3, 2, 1, 1, 1, double>, ReLU>, Block<Conv2D<6, 1, 2, 0, 1, 1, double>>>,
                          MaxPool2D<3>, AvgPool2D<1>, GlobalAvgPool, Flatten, Dropout, Dense<3, double>>;
ResNet make_resnet() {
  ResNet net;
  initialize(net, 77);
  auto& bn = std::get<1>(net.layers);
  bn.gamma = {1.5, -0.7, 0.9, -1.2};
  bn.running_mean = {0.1, -0.2, 0.05, 0.0};
  bn.running_var = {0.5, 2.0, 1.0, 0.8};
  return net;
}
}  // namespace

TEST_CASE("DynamicNetwork gives the Sequential's tables (to_dynamic)") {
  const auto net = make_resnet();
  const auto dnet = to_dynamic(net);
  const auto D = random_batch(30, shape(2, 6, 6), 81);
  const auto I = random_batch(10, shape(2, 6, 6), 82);
  for (auto g : {granularity::channel, granularity::element}) {
    CAPTURE(granularity_name(g));
    const auto p = profile_network(net, D, {.grain = g});
    const auto pd = profile_network(dnet, D, {.grain = g});
    CHECK(p.sums == pd.sums);
    CHECK(p.fingerprint == pd.fingerprint);
    for (bool lit : {false, true}) {
      const auto t = nnslicer(net, p, I, criterion::predicted(), {.bn_literal = lit});
      const auto td = nnslicer(dnet, pd, I, criterion::predicted(), {.bn_literal = lit});
      CHECK(tables_equal(t, td));
      CHECK(t.node_names == td.node_names);
      CHECK(nonzero(t.synapses[0]) > 0);
    }
  }
}

TEST_CASE("granularity: element and channel agree where every tensor is rank 1 or 1x1") {
  SUBCASE("MLP") {
    Sequential<Input<5>, Dense<7, double>, ReLU, Dense<4, double>, LeakyReLU, Dense<3, double>> net;
    initialize(net, 91);
    const auto D = random_batch(40, shape(5), 92);
    const auto I = random_batch(15, shape(5), 93);
    const auto tc = nnslicer(net, profile_network(net, D), I, criterion::predicted());
    const auto te = nnslicer(net, profile_network(net, D, {.grain = granularity::element}), I, criterion::predicted());
    CHECK(tables_equal(tc, te));
    CHECK(te.grain == granularity::element);
    CHECK(nonzero(tc.synapses[0]) > 0);
  }
  SUBCASE("1x1 feature maps") {
    Sequential<Input<3, 1, 1>, Conv2D<4, 1, 1, 0, 1, 1, double>, ReLU, BatchNorm<4, double>, Conv2D<3, 1, 1, 0, 1, 1, double>> net;
    initialize(net, 94);
    const auto D = random_batch(40, shape(3, 1, 1), 95);
    const auto I = random_batch(15, shape(3, 1, 1), 96);
    const auto tc = nnslicer(net, profile_network(net, D), I, criterion::target(1));
    const auto te = nnslicer(net, profile_network(net, D, {.grain = granularity::element}), I, criterion::target(1));
    CHECK(tables_equal(tc, te));
  }
}

namespace {
using ExNet = Sequential<Input<2>, Dense<2, double>, Dense<1, double>>;
ExNet example_net() {
  ExNet net;
  std::get<0>(net.layers) = dense_A<2>({{1, 1}, {1, -1}});
  std::get<1>(net.layers) = dense_A<1>({{1, 2}});
  return net;
}
}  // namespace

TEST_CASE("θ filter: cut-off max_index vs first_violation on mixed-sign items") {
  Sequential<Input<3>, Dense<1, double>> net;
  std::get<0>(net.layers) = dense_A<1>({{0.5, 0.6, 3}});
  // c = (0.5, -0.6, 3), D = 2.9; θ = 0.1 (limit 0.29): S_1 = 0.5 violates, S_2 = -0.1 does not
  auto t = slice1(net, {0, 0, 0}, {1, -1, 1}, shape(3), 0, {.theta = 0.1});
  CHECK(t.synapses[0] == I64{0, 0, 1});  // literal max j = 2
  t = slice1(net, {0, 0, 0}, {1, -1, 1}, shape(3), 0, {.theta = 0.1, .cutoff = theta_cutoff::first_violation});
  CHECK(t.synapses[0] == I64{1, -1, 1});  // stops at j = 1 violating: nothing dropped
  CHECK(t.neurons[0] == I64{1, -1, 1});
}

TEST_CASE("θ filter: denominator Σc vs the activation |y_n|") {
  Sequential<Input<3>, Dense<1, double>> net;
  std::get<0>(net.layers) = dense_A<1>({{0.5, 0.6, 3}});
  // profile x = (0, 0, -1): ybar = -3; sample (1, -1, 0): Δx = (1, -1, 1), y = -0.1, Δy = 2.9
  auto t = slice1(net, {0, 0, -1}, {1, -1, 0}, shape(3), 0, {.theta = 0.3});
  CHECK(t.synapses[0] == I64{0, 0, 1});  // limit 0.87: the two small items go
  t = slice1(net, {0, 0, -1}, {1, -1, 0}, shape(3), 0, {.theta = 0.3, .denominator = theta_denominator::activation});
  CHECK(t.synapses[0] == I64{1, -1, 1});  // limit 0.03: nothing goes
  // with bias 10: y = 9.9, limit 2.97 covers every prefix; at least one item is kept
  std::get<0>(net.layers).b(0) = 10;
  t = slice1(net, {0, 0, -1}, {1, -1, 0}, shape(3), 0, {.theta = 0.3, .denominator = theta_denominator::activation});
  CHECK(t.synapses[0] == I64{0, 0, 1});
}

TEST_CASE("θ filter: ties in |c| are broken by item order") {
  Sequential<Input<4>, Dense<1, double>> net;
  std::get<0>(net.layers) = dense_A<1>({{1, 1, 1, 1}});
  CHECK(slice1(net, {0, 0, 0, 0}, {1, 1, 1, 1}, shape(4), 0, {.theta = 0.5}).synapses[0] == I64{0, 0, 1, 1});
  CHECK(slice1(net, {0, 0, 0, 0}, {1, 1, 1, 1}, shape(4), 0, {.theta = 0.25}).synapses[0] == I64{0, 1, 1, 1});
  std::get<0>(net.layers) = dense_A<1>({{2, 1, 1, 1}});
  // c = (2, 1, 1, 1), limit 2: the first two of the three ties (items 1, 2) go
  CHECK(slice1(net, {0, 0, 0, 0}, {1, 1, 1, 1}, shape(4), 0, {.theta = 0.4}).synapses[0] == I64{1, 0, 0, 1});
}

TEST_CASE("abs_sum: Σ|CONTRIB(ξ)| instead of the signed sum") {
  const auto net = example_net();
  const auto p = profile_network(net, batch1({{0, 0}, {2, 2}}));
  // example 2 alone: x2 cancels within the sample (|0| = 0); h1 = -1 -> 1
  auto t = nnslicer(net, p, batch1({{1.5, -0.5}}), criterion::target(0), {.abs_sum = true});
  CHECK(t.neurons[1] == I64{1, 1});
  CHECK(t.neurons[0] == I64{1, 0});
  CHECK(t.synapses[0] == I64{1, 0, 1, 1});
  // across samples: ξ = (2.5, 1.5) gives C[h1] = +1, example 2 gives -1
  const auto I = batch1({{1.5, -0.5}, {2.5, 1.5}});
  const auto ts = nnslicer(net, p, I, criterion::target(0));
  const auto ta = nnslicer(net, p, I, criterion::target(0), {.abs_sum = true});
  CHECK(ts.neurons[1] == I64{0, 2});
  CHECK(ta.neurons[1] == I64{2, 2});
}

TEST_CASE("bad input") {
  const auto net = example_net();
  const auto p = profile_network(net, batch1({{0, 0}, {2, 2}}));
  const auto x = batch1({{1, 2}});
  CHECK_THROWS_AS(nnslicer(net, p, xt::xarray<double>::from_shape({0, 2}), criterion::predicted()), data_error);
  CHECK_THROWS_AS(profile_network(net, xt::xarray<double>::from_shape({0, 2})), data_error);
  CHECK_THROWS_AS(nnslicer(net, p, x, criterion::fixed({})), data_error);
  CHECK_THROWS_AS(nnslicer(net, p, x, criterion::target(1)), value_error);
  CHECK_THROWS_AS(nnslicer(net, p, x, criterion::fixed({0, 7})), value_error);
  CHECK_THROWS_AS(nnslicer(net, p, x, criterion::target(0), {.theta = -0.1}), value_error);
  CHECK_THROWS_AS(nnslicer(net, p, x, criterion::target(0), {.theta = std::nan("")}), value_error);
  CHECK_THROWS_AS(nnslicer(net, p, batch1({{1, std::nan("")}}), criterion::target(0)), value_error);
  CHECK_THROWS_AS(profile_network(net, batch1({{1, std::numeric_limits<double>::infinity()}})), value_error);
  CHECK_THROWS_AS(nnslicer(net, p, batch1({{1, 2, 3}}), criterion::target(0)), shape_error);
  CHECK_THROWS_AS(profile_network(net, batch1({{1, 2, 3}})), shape_error);
  // a profile of another model
  Sequential<Input<2>, Dense<3, double>, Dense<1, double>> other;
  initialize(other, 1);
  CHECK_THROWS_AS(nnslicer(net, profile_network(other, x), x, criterion::target(0)), data_error);
  // the same table works with predicted too
  CHECK(nnslicer(net, p, x, criterion::predicted()).samples == 1);
}

TEST_CASE("a DynamicNetwork with Softmax: logic_error naming Softmax") {
  Sequential<Input<2>, Dense<2, double>, Softmax> net;
  initialize(net, 2);
  const auto d = to_dynamic(net);
  const auto x = batch1({{1, 2}});
  auto expect_softmax = [](auto&& f) {
    try {
      f();
      FAIL("no exception");
    } catch (const nnlens::logic_error& e) {
      CHECK(std::string(e.what()).find("Softmax") != std::string::npos);
    }
  };
  expect_softmax([&] { (void)profile_network(d, x); });
  expect_softmax([&] { (void)op_graph<double>(d); });
  // slicing with a profile of the logits' network still rejects the Softmax network
  Sequential<Input<2>, Dense<2, double>> logits;
  std::get<0>(logits.layers) = std::get<0>(net.layers);
  const auto p = profile_network(to_dynamic(logits), x);
  expect_softmax([&] { (void)nnslicer(d, p, x, criterion::target(0)); });
}
