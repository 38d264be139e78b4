// ONNX Sigmoid, Tanh, HardSigmoid, HardSwish (opset 14), Gelu (opset 20, approximate) and SiLU
// (written as x * Sigmoid(x)): export then re-import gives the same layers and bit-identical
// outputs; the exported opset is the newest node's; HardSigmoid without attributes takes ONNX's
// defaults; a Mul of two activations other than x * Sigmoid(x) is refused, naming the node.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "nnlens/io/onnx.hpp"
#include "nnlens/io/onnx_export.hpp"
#include "nnlens/layers/all.hpp"
#include "nnlens/network/forward.hpp"
#include "nnlens/network/parameters.hpp"
#include "nnlens/network/sequential.hpp"
#include "onnx_builder.hpp"

using namespace nnlens;
using namespace onnx_builder;

namespace {
std::int64_t opset_of(const onnx::ModelProto& m) {
  REQUIRE(m.opset_import_size() == 1);
  return m.opset_import(0).version();
}
template <class Net>
void check_round_trip(const Net& net, const DynamicNetwork& back, std::size_t C) {
  std::mt19937 r(5);
  std::uniform_real_distribution<float> u(-6, 6);
  xt::xarray<float> X = xt::xarray<float>::from_shape({7, C, 3, 3});
  for (auto& v : X) v = u(r);
  const auto y = forward(net, X), yb = forward(back, X);
  REQUIRE(y.size() == yb.size());
  std::size_t diff = 0;
  for (std::size_t i = 0; i < y.size(); ++i) diff += !(yb.data()[i] == y.data()[i]);
  CHECK(diff == 0);
}
}  // namespace

TEST_CASE("onnx Sigmoid, Tanh, HardSigmoid: opset 13 nodes, round trip bit for bit") {
  using Net = Sequential<Input<2, 3, 3>, Sigmoid, Flatten, Dense<6>, Tanh, Dense<5>, HardSigmoid, Dense<3>, HardSigmoid>;
  Net net;
  initialize(net, 2);
  net.layer<7>() = HardSigmoid{0.25, 0.375};  // representable in float: the attribute is exact
  const onnx::ModelProto m = io::to_onnx(net);
  CHECK(opset_of(m) == 13);
  const auto ops = ops_of(m);
  CHECK(std::count(ops.begin(), ops.end(), "Sigmoid") == 1);
  CHECK(std::count(ops.begin(), ops.end(), "Tanh") == 1);
  CHECK(std::count(ops.begin(), ops.end(), "HardSigmoid") == 2);
  const auto back = parse_model(m);
  REQUIRE(back.size() == net.size);
  CHECK(back.layer_name(0) == "Sigmoid");
  CHECK(back.layer_name(3) == "Tanh");
  CHECK(back.layer_name(5) == "HardSigmoid");
  CHECK(std::get<HardSigmoid>(back.layer(5)).alpha == 1.0 / 6.0);  // the float next to 1/6 is read as 1/6
  CHECK(std::get<HardSigmoid>(back.layer(7)).alpha == 0.25);
  CHECK(std::get<HardSigmoid>(back.layer(7)).beta == 0.375);
  // the default 1/6 is rounded to float by the file, so compare layer 7's part exactly only
  Net net2 = net;
  net2.layer<5>() = HardSigmoid{double(float(1.0 / 6.0)), 0.5};
  check_round_trip(net2, back, 2);
}

TEST_CASE("onnx HardSwish (opset 14) and Gelu (opset 20): the model's opset is the newest node's") {
  {
    using Net = Sequential<Input<2, 3, 3>, HardSwish, Flatten, Dense<4>>;
    Net net;
    initialize(net, 3);
    const onnx::ModelProto m = io::to_onnx(net);
    CHECK(opset_of(m) == 14);
    const auto back = parse_model(m);
    CHECK(back.layer_name(0) == "HardSwish");
    check_round_trip(net, back, 2);
  }
  {
    using Net = Sequential<Input<3, 3, 3>, GELU, Flatten, Dense<4>, GELU, HardSwish>;
    Net net;
    initialize(net, 4);
    net.layer<3>().tanh_approximation = true;
    const onnx::ModelProto m = io::to_onnx(net);
    CHECK(opset_of(m) == 20);
    std::vector<std::string> forms;
    for (const auto& n : m.graph().node())
      if (n.op_type() == "Gelu")
        for (const auto& a : n.attribute())
          if (a.name() == "approximate") forms.push_back(a.s());
    CHECK(forms == std::vector<std::string>{"none", "tanh"});
    const auto back = parse_model(m);
    CHECK(std::get<GELU>(back.layer(0)).tanh_approximation == false);
    CHECK(std::get<GELU>(back.layer(3)).tanh_approximation == true);
    check_round_trip(net, back, 3);
  }
  // an approximate ONNX does not define is refused, naming the node
  onnx::ModelProto m = new_model(20);
  auto& g = *m.mutable_graph();
  set_value(g.add_input(), "x", {1, 4});
  set_value(g.add_output(), "y", {1, 4});
  auto* n = add_node(g, "Gelu", {"x"}, "y");
  auto* a = n->add_attribute();
  a->set_name("approximate");
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s("sigmoid");
  CHECK_THROWS_WITH_AS(parse_model(m), doctest::Contains("Gelu"), io_error);
}

TEST_CASE("onnx SiLU: written as x * Sigmoid(x), read back as one SiLU") {
  using Net = Sequential<Input<2, 3, 3>, SiLU, Flatten, Dense<5>, SiLU, Dense<3>>;
  Net net;
  initialize(net, 6);
  const onnx::ModelProto m = io::to_onnx(net);
  CHECK(opset_of(m) == 13);
  const auto ops = ops_of(m);
  CHECK(std::count(ops.begin(), ops.end(), "Sigmoid") == 2);
  CHECK(std::count(ops.begin(), ops.end(), "Mul") == 2);
  const auto back = parse_model(m);
  REQUIRE(back.size() == net.size);
  CHECK(back.layer_name(0) == "SiLU");
  CHECK(back.layer_name(3) == "SiLU");
  check_round_trip(net, back, 2);

  // Sigmoid(x) * x (the other order, as torch writes it) reads the same
  onnx::ModelProto t = new_model(13);
  auto& g = *t.mutable_graph();
  set_value(g.add_input(), "x", {1, 4});
  set_value(g.add_output(), "y", {1, 4});
  add_node(g, "Sigmoid", {"x"}, "s");
  add_node(g, "Mul", {"s", "x"}, "y");
  const auto d = parse_model(t);
  REQUIRE(d.size() == 1);
  CHECK(d.layer_name(0) == "SiLU");

  // x * Tanh(x) is not a SiLU: a Product of the value and its Tanh (layers/product.hpp)
  onnx::ModelProto other = new_model(13);
  auto& gb = *other.mutable_graph();
  set_value(gb.add_input(), "x", {1, 4});
  set_value(gb.add_output(), "y", {1, 4});
  add_node(gb, "Tanh", {"x"}, "s");
  add_node(gb, "Mul", {"x", "s"}, "y");
  const auto p = parse_model(other);
  REQUIRE(p.size() == 1);
  CHECK(p.layer_name(0) == "Product");
  const xt::xarray<float> x = {{-2.0f, -0.5f, 0.0f, 3.0f}};
  const xt::xarray<float> y = forward(p, x);
  for (std::size_t i = 0; i < 4; ++i) CHECK(y(0, i) == doctest::Approx(x(0, i) * std::tanh(x(0, i))).epsilon(1e-6));
}

TEST_CASE("onnx HardSigmoid without attributes: ONNX's defaults alpha = 0.2, beta = 0.5") {
  onnx::ModelProto m = new_model(13);
  auto& g = *m.mutable_graph();
  set_value(g.add_input(), "x", {1, 5});
  set_value(g.add_output(), "y", {1, 5});
  add_node(g, "HardSigmoid", {"x"}, "y");
  const auto d = parse_model(m);
  REQUIRE(d.size() == 1);
  const auto& h = std::get<HardSigmoid>(d.layer(0));
  CHECK(h.alpha == double(0.2f));
  CHECK(h.beta == 0.5);
  xt::xarray<float> X = {{-3.0f, -1.0f, 0.0f, 1.0f, 3.0f}};
  const auto y = forward(d, X);
  CHECK(y(0, 0) == 0.0f);
  CHECK(y(0, 2) == 0.5f);
  CHECK(y(0, 4) == 1.0f);
}
