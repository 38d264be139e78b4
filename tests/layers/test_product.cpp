// Product<Block<...>, Block<...>> (layers/product.hpp), the squeeze-and-excitation gate: hand-
// computed forward and backward, broadcasting (same shape, per channel, one value), compile-time
// and run-time shape errors, backward against central differences in double, static vs
// DynamicNetwork bitwise, the analyses' readings (NNSlicer's first-order items, LRP's
// signal-takes-all rule, ExactLine's refusal naming the node), codegen's spelling, the int8 twin,
// and ONNX export read back into the same network.
#include <doctest/doctest.h>

#include <nnlens/compress.hpp>
#include <nnlens/io/codegen.hpp>
#include <nnlens/nnlens.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "gradient_check.hpp"

using namespace nnlens;
using namespace nnlens_test;

namespace {
constexpr bool says(const shape_check& c, std::string_view what) {
  return !c.ok() && std::string_view(c.error).find(what) != std::string_view::npos;
}

/// Squeeze-and-excitation as torchvision writes it: mean per channel, 1x1 conv down, ReLU, 1x1 conv
/// up, a gate (HardSigmoid in MobileNetV3, Sigmoid in EfficientNet), times the input.
template <class Gate, class T = double>
using SE = Product<Block<>, Block<GlobalAvgPool, Conv2D<2, 1, 1, 0, 1, 1, T>, ReLU, Conv2D<4, 1, 1, 0, 1, 1, T>, Gate>>;
using SENet = Sequential<Input<3, 5, 5>, Conv2D<4, 3, 1, 1, 1, 1, double>, ReLU, SE<HardSigmoid>, GlobalAvgPool, Flatten,
                         Dense<3, double>>;

/// A scalar gate: y = x * (w . x + b) on two features.
using ScalarGate = Product<Block<>, Block<Dense<1, double>>>;
ScalarGate scalar_gate(double w0, double w1, double b) {
  ScalarGate p;
  auto& d = p.gate.layer<0>();
  d.W = tensor<double, 2>{{w0}, {w1}};
  d.b = tensor<double, 1>{b};
  return p;
}
}  // namespace

TEST_CASE("Product: hand-computed forward and backward of a one-value gate") {
  const auto p = scalar_gate(2.0, 1.0, 0.5);
  const std::vector<double> x{1.0, -1.0}, dy{1.0, 2.0};
  // g = 2 - 1 + 0.5 = 1.5; y = x * g
  const auto f = run_forward(p, shape(2), 1, x, true);
  CHECK(f.y == std::vector<double>{1.5, -1.5});
  using Tr = layer_traits<ScalarGate>;
  std::vector<double> dx(2), scratch(Tr::scratch_size(&p, shape(2), shape(2), 1));
  auto g = p;
  zero_parameters(g);
  Tr::backward(p, backward_args<double>{shape(2), shape(2), 1, x.data(), f.y.data(), dy.data(), f.cache.data(), dx.data(),
                                        scratch.data()},
               &g);
  // ds = dy g = (1.5, 3); dg = dy . x = 1 - 2 = -1; dx = ds + dg W^T = (1.5 - 2, 3 - 1)
  CHECK(dx == std::vector<double>{-0.5, 2.0});
  CHECK(g.gate.layer<0>().W == tensor<double, 2>{{-1.0}, {1.0}});
  CHECK(g.gate.layer<0>().b == tensor<double, 1>{-1.0});
}

TEST_CASE("Product: broadcasting per channel, shape inference and errors") {
  using Tr = layer_traits<SE<HardSigmoid>>;
  static_assert(Tr::infer(shape(4, 5, 5)).out == shape(4, 5, 5));
  // on 3 channels the gate still makes 4 (its up-convolution): [4,1,1] against a [3,5,5] signal
  static_assert(says(layer_traits<SE<HardSigmoid>>::infer(shape(3, 5, 5)), "does not broadcast"));
  using Bad = Product<Block<>, Block<GlobalAvgPool, Conv2D<3, 1, 1, 0, 1, 1, double>>>;
  static_assert(says(layer_traits<Bad>::infer(shape(4, 2, 2)), "does not broadcast"));
  using Same = Product<Block<Dense<3, double>>, Block<Dense<3, double>, Sigmoid>>;
  static_assert(layer_traits<Same>::infer(shape(5)).out == shape(3));
  static_assert(std::is_same_v<dynamic_form_t<SE<HardSigmoid>>, DynamicProduct<double>>);
  static_assert(Tr::parameter_tensors == 4);
  // the per-channel gate: y[c, h, w] = x[c, h, w] g[c]
  auto se = initialised<SE<Sigmoid>>(shape(4, 5, 5), 3);
  std::mt19937_64 r(4);
  const auto x = randn(2 * 100, r);
  const auto f = run_forward(se, shape(4, 5, 5), 2, x, false);
  for (std::size_t n = 0; n < 2; ++n)
    for (std::size_t c = 0; c < 4; ++c) {
      const double g = f.y[n * 100 + c * 25] / x[n * 100 + c * 25];
      CHECK(g > 0);
      CHECK(g < 1);
      for (std::size_t i = 1; i < 25; ++i)
        CHECK(f.y[n * 100 + c * 25 + i] == doctest::Approx(x[n * 100 + c * 25 + i] * g).epsilon(1e-12));
    }
  // a run-time gate that does not broadcast: shape_error naming both shapes
  DynamicProduct<double> d;
  Dense<dyn, double> w;
  w.W = tensor<double, 2>::from_shape({4, 3});
  w.b = tensor<double, 1>::from_shape({3});
  d.gate.layers.push_back(w);
  try {
    (void)layer_traits<DynamicProduct<double>>::output_shape(d, shape(4));
    FAIL("no error");
  } catch (const shape_error& e) {
    const std::string m = e.what();
    CHECK(m.find("[4]") != std::string::npos);
    CHECK(m.find("[3]") != std::string::npos);
  }
}

TEST_CASE("Product: backward matches central differences") {
  std::mt19937_64 r(11);
  SUBCASE("SE with a HardSigmoid gate (MobileNetV3)") {
    auto l = initialised<SE<HardSigmoid>>(shape(4, 3, 3), 1);
    check_backward(l, shape(4, 3, 3), 2, randn(72, r), r);
  }
  SUBCASE("SE with a Sigmoid gate (EfficientNet) after a convolution in the signal") {
    using P = Product<Block<Conv2D<4, 3, 1, 1, 1, 1, double>>, Block<GlobalAvgPool, Conv2D<4, 1, 1, 0, 1, 1, double>, Sigmoid>>;
    auto l = initialised<P>(shape(2, 4, 4), 2);
    check_backward(l, shape(2, 4, 4), 2, randn(64, r), r);
  }
  SUBCASE("same shape: two Dense branches") {
    using P = Product<Block<Dense<3, double>>, Block<Dense<3, double>, Tanh>>;
    check_backward(initialised<P>(shape(4), 3), shape(4), 3, randn(12, r), r);
  }
  SUBCASE("one value: x * (w . x + b)") { check_backward(scalar_gate(0.3, -0.7, 0.2), shape(2), 3, randn(6, r), r); }
}

TEST_CASE("Product: static and DynamicNetwork agree bitwise; the op graph's join is a Mul") {
  SENet net;
  initialize(net, 21);
  std::mt19937_64 r(22);
  const auto X = batch_of(6, {3, 5, 5}, r);
  const auto d = to_dynamic(net);
  check_bitwise(forward(net, X), forward(d, X));
  check_bitwise(forward(execution::par, net, X), forward(net, X));
  const auto back = from_dynamic<SENet>(d);
  check_bitwise(forward(back, X), forward(net, X));
  const op_graph<double> g(net);
  // nodes: conv, relu, gate: pool conv relu conv hardsigmoid, Mul, pool, flatten, dense
  REQUIRE(g.nodes().size() == 11);
  CHECK(g.nodes()[2].name == "2.gate.0 GlobalAvgPool");
  CHECK(g.nodes()[7].type == "Mul");
  CHECK(g.nodes()[7].operands.ins == std::vector<std::size_t>{2, 7});  // the signal: the ReLU's output
  std::vector<std::vector<double>> buf;
  g.run(6, X.data(), buf);
  const auto y = forward(net, X);
  for (std::size_t i = 0; i < y.size(); ++i) CHECK(buf[g.output()][i] == y.data()[i]);
}

TEST_CASE("Product: NNSlicer reads it to first order; a constant gate votes as the Affine it equals") {
  // y = x * g with g the gate's bias (its weights 0: Δg = 0): the signal's items are g Δx, the
  // items of Affine{s = g}, so the input's votes equal those of the network with that Affine, for
  // either sign of g; the gate's own layer receives none (s Δg = 0)
  using Net = Sequential<Input<2>, ScalarGate, Dense<1, double>>;
  using Ref = Sequential<Input<2>, Affine<dyn, double>, Dense<1, double>>;
  std::mt19937_64 r(31);
  const auto D = batch_of(40, {2}, r), I = batch_of(8, {2}, r);
  for (const double b : {0.8, -0.8}) {
    Net net;
    net.layer<0>() = scalar_gate(0.0, 0.0, b);
    net.layer<1>().W = tensor<double, 2>{{1.0}, {-2.0}};
    net.layer<1>().b = tensor<double, 1>{0.0};
    Ref ref;
    ref.layer<0>().s = tensor<double, 1>{b};
    ref.layer<0>().t = tensor<double, 1>{0.0};
    ref.layer<1>() = net.layer<1>();
    const auto t = nnslicer(net, profile_network(net, D), I, criterion::target(0), {.theta = 1.0});
    const auto u = nnslicer(ref, profile_network(ref, D), I, criterion::target(0), {.theta = 1.0});
    // tensors: 0 input, 1 gate Dense, 2 Mul, 3 Dense (the reference: 0 input, 1 Affine, 2 Dense)
    REQUIRE(t.neurons.size() == 4);
    CHECK(t.neurons[1][0] == 0);
    CHECK(t.neurons[0] == u.neurons[0]);
    CHECK(t.neurons[2] == u.neurons[1]);
    CHECK(std::any_of(t.neurons[0].begin(), t.neurons[0].end(), [](auto v) { return v != 0; }));
  }
  SENet se;
  initialize(se, 32);
  // a gate that varies gets votes (θ = 0: every item counts), at element and channel granularity
  const auto DS = batch_of(30, {3, 5, 5}, r), IS = batch_of(5, {3, 5, 5}, r);
  for (const auto grain : {granularity::channel, granularity::element}) {
    const auto t = nnslicer(se, profile_network(se, DS, {.grain = grain}), IS, criterion::predicted(), {.theta = 0.0});
    const op_graph<double> g(se);
    const std::size_t gate_out = g.nodes()[6].out;  // the HardSigmoid
    CHECK(std::any_of(t.neurons[gate_out].begin(), t.neurons[gate_out].end(), [](auto v) { return v != 0; }));
  }
}

TEST_CASE("Product: LRP gives the signal all of the relevance and the gate none") {
  // y = x * g, then Dense with unit weights and no bias, epsilon 0: R at the product = y, and the
  // input (the signal, an empty branch) receives exactly x_i g
  using Net = Sequential<Input<2>, ScalarGate, Dense<1, double>>;
  Net net;
  net.layer<0>() = scalar_gate(0.5, 0.25, 1.0);
  net.layer<1>().W = tensor<double, 2>{{1.0}, {1.0}};
  net.layer<1>().b = tensor<double, 1>{0.0};
  xt::xarray<double> x = {{2.0, -4.0}};
  lrp_options o;
  o.epsilon = 0;
  const auto R = relevance(net, x, lrp_input, o);
  const double g = 0.5 * 2.0 + 0.25 * -4.0 + 1.0;  // 1
  CHECK(R(0, 0) == doctest::Approx(2.0 * g));
  CHECK(R(0, 1) == doctest::Approx(-4.0 * g));
  // IDC runs through an SE network
  SENet se;
  initialize(se, 41);
  std::mt19937_64 r(42);
  const auto X = batch_of(30, {3, 5, 5}, r);
  std::vector<std::size_t> lab(30);
  for (std::size_t i = 0; i < 30; ++i) lab[i] = i % 3;
  idc_options io;
  io.m = 3;
  const auto c = prepare_idc(se, X, lab, io);
  CHECK(c.neurons().size() == 3);
}

TEST_CASE("Product: ExactLine refuses it in a DynamicNetwork, naming the layer, before any work") {
  SENet net;
  initialize(net, 51);
  const auto d = to_dynamic(net);
  std::vector<double> P(75, 0.0), Q(75, 1.0);
  try {
    (void)exact_line(d, P, Q);
    FAIL("no error");
  } catch (const logic_error& e) {
    const std::string w = e.what();
    CAPTURE(w);
    CHECK(w.find("Product") != std::string::npos);
    CHECK(w.find("layer 2") != std::string::npos);
    CHECK(w.find("not piecewise-linear") != std::string::npos);
  }
}

TEST_CASE("Product: codegen spells it; the int8 twin quantises the gate's convolutions; NeuSemSlice runs") {
  SENet net;
  initialize(net, 61);
  io::codegen_options o;
  o.name = "se";
  const std::string h = io::generate_header(to_dynamic(net), o);
  CHECK(h.find("nnlens::Product<nnlens::Block<>, nnlens::Block<nnlens::GlobalAvgPool, ") != std::string::npos);
  CHECK(h.find(".gate.layers") != std::string::npos);
  std::mt19937_64 r(62);
  const auto X = batch_of(30, {3, 5, 5}, r);
  const auto q = compress::quantize(net, X);
  CHECK(q.forward(X).shape() == std::vector<std::size_t>{30, 3});
  // the Product (its gate inside) and the GlobalAvgPool have no int8 rule: float between a
  // dequantise and a requantise; the convolution and the Dense are int8, ReLU and Flatten move codes
  CHECK(q.float_layers() == std::vector<std::size_t>{2, 3});
  CHECK(q.layer(2).name == "Product");
  CHECK(q.layer(2).inner_quantized == 2);
  std::vector<std::size_t> lab(30);
  for (std::size_t i = 0; i < 30; ++i) lab[i] = i % 3;
  semslice_options so;
  so.theta = 0.9;
  const auto s = semslice(net, X, lab, so);
  CHECK(s.report.categories == std::vector<std::size_t>{0, 1, 2});
}
