// ONNX forms of ChannelSlice, LayerNorm and ChannelShuffle: a slice is written as one Slice node
// (starts, ends, axes as Constant inputs) and read back as the same op, bit for bit; LayerNorm over
// features is one opset-17 LayerNormalization both ways; LayerNorm over an image's channels and
// the channel shuffle are written as torch.onnx writes them (Transpose -> LayerNormalization ->
// Transpose; Reshape -> Transpose -> Reshape), checked node by node.  The Slice and
// LayerNormalization import rules on hand-built graphs: ONNX's clamping of starts and ends, a
// negative axis, and the refusals, naming the node.
#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
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
std::vector<std::int64_t> ints_of(const onnx::NodeProto& n, const std::string& name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return {a.ints().begin(), a.ints().end()};
  return {};
}
template <class Net>
void check_same_outputs(const Net& net, const DynamicNetwork& back, shape in) {
  std::mt19937 r(3);
  std::uniform_real_distribution<float> u(-3, 3);
  xt::xarray<float> X = xt::xarray<float>::from_shape(in.with_batch(5));
  for (auto& v : X) v = u(r);
  const auto y = forward(net, X), yb = forward(back, X);
  REQUIRE(y.size() == yb.size());
  std::size_t diff = 0;
  for (std::size_t i = 0; i < y.size(); ++i) diff += !(y.data()[i] == yb.data()[i]);
  CHECK(diff == 0);
}
/// x [xdims] -> Slice(x, starts, ends[, axes[, steps]]) -> y [ydims], the constants as initializers.
onnx::ModelProto slice_model(std::vector<std::int64_t> xdims, std::vector<std::vector<std::int64_t>> consts,
                             std::vector<std::int64_t> ydims) {
  onnx::ModelProto m = new_model(13);
  auto& g = *m.mutable_graph();
  set_value(g.add_input(), "x", xdims);
  set_value(g.add_output(), "y", ydims);
  std::vector<std::string> in{"x"};
  const char* names[] = {"starts", "ends", "axes", "steps"};
  for (std::size_t i = 0; i < consts.size(); ++i) {
    auto* t = g.add_initializer();
    t->set_name(names[i]);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(std::int64_t(consts[i].size()));
    for (auto v : consts[i]) t->add_int64_data(v);
    in.push_back(names[i]);
  }
  add_node(g, "Slice", in, "y");
  return m;
}
}  // namespace

TEST_CASE("onnx ChannelSlice: one Slice node (opset 13), read back as the same op, bit for bit") {
  using Net = Sequential<Input<6, 3, 3>, ChannelSlice<1, 5>, Conv2D<4, 1>, Flatten, Dense<8>, ChannelSlice<2, 7>, Dense<3>>;
  Net net;
  initialize(net, 2);
  const onnx::ModelProto m = io::to_onnx(net);
  CHECK(m.opset_import(0).version() == 13);
  const auto ops = ops_of(m);
  CHECK(std::count(ops.begin(), ops.end(), "Slice") == 2);
  const auto back = parse_model(m);
  REQUIRE(back.size() == net.size);
  CHECK(back.layer_name(0) == "ChannelSlice");
  CHECK(back.layer_name(4) == "ChannelSlice");
  CHECK(std::get<ChannelSlice<>>(back.layer(0)).begin == 1);
  CHECK(std::get<ChannelSlice<>>(back.layer(4)).end == 7);
  check_same_outputs(net, back, shape(6, 3, 3));
}

TEST_CASE("onnx Slice import: ONNX's clamping, a negative axis, no axes, and the refusals") {
  auto range = [](const DynamicNetwork& n) {
    REQUIRE(n.size() == 1);
    const auto& s = std::get<ChannelSlice<>>(n.layer(0));
    return std::vector<std::size_t>{s.begin, s.end};
  };
  const std::int64_t big = std::numeric_limits<std::int64_t>::max();
  CHECK(range(parse_model(slice_model({1, 8, 2, 2}, {{-3}, {big}, {-3}}, {1, 3, 2, 2}))) == std::vector<std::size_t>{5, 8});
  CHECK(range(parse_model(slice_model({1, 8, 2, 2}, {{2}, {-2}, {1}, {1}}, {1, 4, 2, 2}))) == std::vector<std::size_t>{2, 6});
  CHECK(range(parse_model(slice_model({2, 10}, {{0}, {4}, {-1}}, {2, 4}))) == std::vector<std::size_t>{0, 4});
  CHECK(range(parse_model(slice_model({10}, {{3}, {20}}, {7}))) == std::vector<std::size_t>{3, 10});  // no batch axis, axes default 0
  CHECK_THROWS_WITH_AS(parse_model(slice_model({1, 8, 2, 2}, {{0}, {1}, {2}}, {1, 8, 1, 2})), doctest::Contains("channel"), io_error);
  CHECK_THROWS_WITH_AS(parse_model(slice_model({1, 8, 2, 2}, {{0}, {8}, {1}, {2}}, {1, 4, 2, 2})), doctest::Contains("step 1"), io_error);
  CHECK_THROWS_WITH_AS(parse_model(slice_model({1, 8, 2, 2}, {{5}, {3}, {1}}, {1, 0, 2, 2})), doctest::Contains("empty"), io_error);
  CHECK_THROWS_WITH_AS(parse_model(slice_model({1, 8, 2, 2}, {{0, 0}, {4, 1}, {1, 2}}, {1, 4, 1, 2})), doctest::Contains("one axis"),
                       io_error);
}

TEST_CASE("onnx LayerNorm: features as one LayerNormalization (opset 17) both ways; an image's channels as torch writes them") {
  {
    using Net = Sequential<Input<6>, Dense<5>, LayerNorm<5>, Dense<3>>;
    Net net;
    initialize(net, 4);
    auto& ln = net.layer<1>();
    for (std::size_t c = 0; c < 5; ++c) ln.gamma(c) = 0.5f + 0.25f * float(c), ln.beta(c) = 0.125f * float(c) - 0.25f;
    ln.eps = 1e-5;  // written as the float 1e-5f, read back as the decimal it rounds from (onnx_intended)
    const onnx::ModelProto m = io::to_onnx(net);
    CHECK(m.opset_import(0).version() == 17);
    const auto ops = ops_of(m);
    CHECK(std::count(ops.begin(), ops.end(), "LayerNormalization") == 1);
    CHECK(std::count(ops.begin(), ops.end(), "Transpose") == 0);
    const auto back = parse_model(m);
    REQUIRE(back.size() == net.size);
    CHECK(back.layer_name(1) == "LayerNorm");
    CHECK(std::get<LayerNorm<>>(back.layer(1)).eps == 1e-5);
    check_same_outputs(net, back, shape(6));
  }
  {
    using Net = Sequential<Input<4, 3, 3>, Conv2D<6, 3, 1, 1>, LayerNorm<6>, Flatten, Dense<3>>;
    Net net;
    initialize(net, 5);
    const onnx::ModelProto m = io::to_onnx(net);
    CHECK(m.opset_import(0).version() == 17);
    std::vector<std::string> seq;
    std::vector<std::vector<std::int64_t>> perms;
    for (const auto& n : m.graph().node())
      if (n.op_type() == "Transpose" || n.op_type() == "LayerNormalization") {
        seq.push_back(n.op_type());
        if (n.op_type() == "Transpose") perms.push_back(ints_of(n, "perm"));
      }
    CHECK(seq == std::vector<std::string>{"Transpose", "LayerNormalization", "Transpose"});
    CHECK(perms == std::vector<std::vector<std::int64_t>>{{0, 2, 3, 1}, {0, 3, 1, 2}});
    // the importer reads the three nodes back by its own patterns, when it has them: then the same outputs
    try {
      const auto back = parse_model(m);
      check_same_outputs(net, back, shape(4, 3, 3));
    } catch (const io_error& e) {
      MESSAGE("the image LayerNorm's three nodes are not read back yet: " << e.what());
    }
  }
  // LayerNormalization's own refusals
  onnx::ModelProto m = new_model(17);
  auto& g = *m.mutable_graph();
  set_value(g.add_input(), "x", {1, 3, 2, 2});
  set_value(g.add_output(), "y", {1, 3, 2, 2});
  add_init(g, "s", {2}, {1.f, 1.f});
  add_node(g, "LayerNormalization", {"x", "s"}, "y");
  CHECK_THROWS_WITH_AS(parse_model(m), doctest::Contains("LayerNormalization"), io_error);
}

TEST_CASE("onnx ChannelShuffle: Reshape [N, g, C/g, H, W] -> Transpose(0, 2, 1, 3, 4) -> Reshape [N, C, H, W]") {
  using Net = Sequential<Input<6, 2, 3>, ChannelShuffle, Flatten, Dense<4>>;
  Net net;
  initialize(net, 6);
  net.layer<0>().groups = 3;
  const onnx::ModelProto m = io::to_onnx(net);
  std::vector<std::string> seq;
  std::vector<std::vector<std::int64_t>> shapes;
  for (const auto& n : m.graph().node()) {
    if (n.op_type() == "Flatten") break;
    seq.push_back(n.op_type());
    if (n.op_type() == "Constant") shapes.push_back(ints_of(n, "value_ints"));
    if (n.op_type() == "Transpose") CHECK(ints_of(n, "perm") == std::vector<std::int64_t>{0, 2, 1, 3, 4});
  }
  CHECK(seq == std::vector<std::string>{"Constant", "Reshape", "Transpose", "Constant", "Reshape"});
  CHECK(shapes == std::vector<std::vector<std::int64_t>>{{0, 3, 2, 2, 3}, {0, 6, 2, 3}});
  try {
    const auto back = parse_model(m);
    check_same_outputs(net, back, shape(6, 2, 3));
  } catch (const io_error& e) {
    MESSAGE("the channel shuffle's three nodes are not read back yet: " << e.what());
  }
}
