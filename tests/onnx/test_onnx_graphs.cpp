// ONNX graphs as exporters write them, beyond one fork per join: DenseNet's concatenation of every
// earlier map of a block (each layer's Concat repeats the previous one's inputs), a one-operand
// Concat, and Inception's Concat whose operands fork from a value inside one branch.  Each imports
// and computes what the graph says (checked against a direct evaluation of the same graph); operands
// of an inner fork that are not next to each other are refused, naming the node.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "nnlens/io/onnx.hpp"
#include "nnlens/network/forward.hpp"
#include "nnlens/network/parameters.hpp"
#include "onnx_builder.hpp"

using namespace nnlens;
using namespace onnx_builder;

namespace {
constexpr std::size_t H = 3, W = 3, P = H * W;  // 3x3 maps

/// A map of C channels, channel-major, as one sample of an NCHW tensor.
using maps = std::vector<float>;

maps cat(std::initializer_list<const maps*> parts) {
  maps r;
  for (const maps* p : parts) r.insert(r.end(), p->begin(), p->end());
  return r;
}
/// A 1x1 convolution with weights w [out, in] and no bias.
maps conv1x1(const maps& x, const std::vector<float>& w, std::size_t out) {
  const std::size_t in = x.size() / P;
  maps y(out * P, 0.0f);
  for (std::size_t o = 0; o < out; ++o)
    for (std::size_t c = 0; c < in; ++c)
      for (std::size_t p = 0; p < P; ++p) y[o * P + p] += w[o * in + c] * x[c * P + p];
  return y;
}
maps relu(maps x) {
  for (auto& v : x) v = v > 0 ? v : 0;
  return x;
}
std::vector<float> weights(std::size_t n, float seed) {
  std::vector<float> w(n);
  for (std::size_t i = 0; i < n; ++i) w[i] = std::sin(seed + 0.7f * float(i));
  return w;
}
onnx::NodeProto* concat_node(onnx::GraphProto& g, std::vector<std::string> in, std::string out) {
  auto* c = add_node(g, "Concat", std::move(in), std::move(out));
  auto* a = c->add_attribute();
  a->set_name("axis");
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(1);
  return c;
}
maps run(const DynamicNetwork& net, const maps& x) {
  xt::xarray<float> X = xt::xarray<float>::from_shape({1, x.size() / P, H, W});
  std::copy(x.begin(), x.end(), X.begin());
  const xt::xarray<float> Y = forward(net, X);
  return maps(Y.begin(), Y.end());
}
void check_close(const maps& got, const maps& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-6));
}
const maps input = weights(2 * P, 0.3f);
}  // namespace

TEST_CASE("ONNX graphs: DenseNet's block concatenates every earlier map at each layer") {
  // c1 = Concat(x); n1 = Relu(c1); c2 = Concat(x, n1); n2 = Conv1x1(c2); c3 = Concat(x, n1, n2);
  // n3 = Conv1x1(c3); y = Concat(x, n1, n2, n3), as torchvision's _DenseBlock exports
  onnx::ModelProto m = new_model(13);
  auto& g = *m.mutable_graph();
  set_value(g.add_input(), "x", {1, 2, H, W});
  set_value(g.add_output(), "y", {1, 8, H, W});
  const auto w2 = weights(2 * 4, 1.0f), w3 = weights(2 * 6, 2.0f);
  add_init(g, "W2", {2, 4, 1, 1}, w2);
  add_init(g, "W3", {2, 6, 1, 1}, w3);
  concat_node(g, {"x"}, "c1");
  add_node(g, "Relu", {"c1"}, "n1");
  concat_node(g, {"x", "n1"}, "c2");
  add_node(g, "Conv", {"c2", "W2"}, "n2");
  concat_node(g, {"x", "n1", "n2"}, "c3");
  add_node(g, "Conv", {"c3", "W3"}, "n3");
  concat_node(g, {"x", "n1", "n2", "n3"}, "y");
  const DynamicNetwork net = parse_model(m);
  CHECK(net.output_shape() == shape(8, H, W));

  const maps n1 = relu(input);
  const maps n2 = conv1x1(cat({&input, &n1}), w2, 2);
  const maps n3 = conv1x1(cat({&input, &n1, &n2}), w3, 2);
  check_close(run(net, input), cat({&input, &n1, &n2, &n3}));
  // every weight once: the layers are not copied into several branches (each Conv2D also holds a
  // bias of its 2 channels, zero when the node has none)
  std::size_t params = 0;
  for (auto s : parameter_spans(net)) params += s.size();
  CHECK(params == w2.size() + w3.size() + 2 + 2);
}

TEST_CASE("ONNX graphs: Inception's Concat of operands that fork inside a branch") {
  // a = Relu(x); b = Conv1x1(x) read by b1 = Relu(b) and b2 = Conv1x1(b); d = Sigmoid(x);
  // y = Concat(a, b1, b2, d): b1 and b2 fork from b, the others from x (torchvision's InceptionE)
  auto make = [](std::vector<std::string> order) {
    onnx::ModelProto m = new_model(13);
    auto& g = *m.mutable_graph();
    set_value(g.add_input(), "x", {1, 2, H, W});
    set_value(g.add_output(), "y", {1, 7, H, W});
    add_init(g, "Wb", {2, 2, 1, 1}, weights(4, 3.0f));
    add_init(g, "Wc", {1, 2, 1, 1}, weights(2, 4.0f));
    add_node(g, "Relu", {"x"}, "a");
    add_node(g, "Conv", {"x", "Wb"}, "b");
    add_node(g, "Relu", {"b"}, "b1");
    add_node(g, "Conv", {"b", "Wc"}, "b2");
    add_node(g, "Sigmoid", {"x"}, "d");
    concat_node(g, std::move(order), "y");
    return m;
  };
  const DynamicNetwork net = parse_model(make({"a", "b1", "b2", "d"}));
  CHECK(net.output_shape() == shape(7, H, W));
  const maps a = relu(input), b = conv1x1(input, weights(4, 3.0f), 2), b1 = relu(b), b2 = conv1x1(b, weights(2, 4.0f), 1);
  maps d = input;
  for (auto& v : d) v = 1.0f / (1.0f + std::exp(-v));
  check_close(run(net, input), cat({&a, &b1, &b2, &d}));

  // the inner fork's operands apart: no join of them is the node's operands in order
  const std::string e = import_error(make({"b1", "a", "b2", "d"}));
  CHECK(e.find("Concat_y") != std::string::npos);
  CHECK(e.find("do not fork from one value") != std::string::npos);
}
