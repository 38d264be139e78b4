// The graphs of torchvision's CNNs that are more than one node per op, built here as torch.onnx
// writes them and checked against a direct evaluation: squeeze-and-excitation (Mul of a value and
// its gate -> Product), x * HardSigmoid(x) (-> HardSwish), ReduceMean over H, W (-> GlobalAvgPool),
// the decomposed layer_norm on an image seen channels-last (-> LayerNorm), the Erf GELU (-> GELU),
// ConvNeXt's MatMul on a channels-last image (-> a 1x1 Conv2D), channel_shuffle (Reshape, Transpose,
// Reshape -> ChannelShuffle), the channel split by Slice with its ends from shape arithmetic (Shape,
// Gather, Div -> ChannelSlice).  Refusals name the node.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "nnlens/io/onnx.hpp"
#include "nnlens/network/forward.hpp"
#include "onnx_builder.hpp"

using namespace nnlens;
using namespace onnx_builder;

namespace {
std::vector<float> values(std::size_t n, float seed) {
  std::vector<float> w(n);
  for (std::size_t i = 0; i < n; ++i) w[i] = std::sin(seed + 0.7f * float(i));
  return w;
}
std::vector<float> run(const DynamicNetwork& net, const std::vector<float>& x, std::vector<std::size_t> dims) {
  xt::xarray<float> X = xt::xarray<float>::from_shape(dims);
  std::copy(x.begin(), x.end(), X.begin());
  const xt::xarray<float> Y = forward(net, X);
  return {Y.begin(), Y.end()};
}
void check_close(const std::vector<float>& got, const std::vector<double>& want, double eps = 1e-5) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (eps == 0) CHECK(double(got[i]) == want[i]);  // copies: exact
    else CHECK(double(got[i]) == doctest::Approx(want[i]).epsilon(eps));
  }
}
void scalar(onnx::GraphProto& g, const std::string& name, float v) { add_init(g, name, {}, {v}); }
void int64s(onnx::GraphProto& g, const std::string& name, std::vector<std::int64_t> v) {
  auto* t = g.add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT64);
  t->add_dims(std::int64_t(v.size()));
  for (auto x : v) t->add_int64_data(x);
}
constexpr std::size_t C = 4, H = 3, W = 3, P = H * W;
const std::vector<float> x = values(C * P, 0.4f);
}  // namespace

TEST_CASE("ONNX patterns: squeeze-and-excitation is a Product; x * HardSigmoid(x) is HardSwish") {
  onnx::ModelProto m = new_model(13);
  auto& g = *m.mutable_graph();
  set_value(g.add_input(), "x", {1, C, H, W});
  set_value(g.add_output(), "y", {1, C, H, W});
  const auto w1 = values(2 * C, 1.0f), w2 = values(C * 2, 2.0f);
  add_init(g, "w1", {2, C, 1, 1}, w1);
  add_init(g, "w2", {C, 2, 1, 1}, w2);
  add_node(g, "GlobalAveragePool", {"x"}, "p");
  add_node(g, "Conv", {"p", "w1"}, "c1");
  add_node(g, "Relu", {"c1"}, "r");
  add_node(g, "Conv", {"r", "w2"}, "c2");
  auto* hs = add_node(g, "HardSigmoid", {"c2"}, "s");
  auto* al = hs->add_attribute();
  al->set_name("alpha"), al->set_type(onnx::AttributeProto::FLOAT), al->set_f(1.0f / 6.0f);
  add_node(g, "Mul", {"s", "x"}, "y");  // the gate first, as torchvision's SqueezeExcitation writes it
  const auto net = parse_model(m);
  REQUIRE(net.size() == 1);
  CHECK(net.layer_name(0) == "Product");
  // direct: y[c, p] = x[c, p] * hardsigmoid(w2 relu(w1 mean(x)))[c]
  std::vector<double> mean(C), hid(2), gate(C), want(C * P);
  for (std::size_t c = 0; c < C; ++c)
    for (std::size_t p = 0; p < P; ++p) mean[c] += x[c * P + p] / double(P);
  for (std::size_t o = 0; o < 2; ++o) {
    for (std::size_t c = 0; c < C; ++c) hid[o] += w1[o * C + c] * mean[c];
    hid[o] = std::max(0.0, hid[o]);
  }
  for (std::size_t c = 0; c < C; ++c) {
    double z = 0;
    for (std::size_t o = 0; o < 2; ++o) z += w2[c * 2 + o] * hid[o];
    gate[c] = std::clamp(z / 6 + 0.5, 0.0, 1.0);
    for (std::size_t p = 0; p < P; ++p) want[c * P + p] = x[c * P + p] * gate[c];
  }
  check_close(run(net, x, {1, C, H, W}), want);

  onnx::ModelProto h = new_model(13);
  auto& gh = *h.mutable_graph();
  set_value(gh.add_input(), "x", {1, 5});
  set_value(gh.add_output(), "y", {1, 5});
  auto* n = add_node(gh, "HardSigmoid", {"x"}, "s");
  auto* a = n->add_attribute();
  a->set_name("alpha"), a->set_type(onnx::AttributeProto::FLOAT), a->set_f(1.0f / 6.0f);
  add_node(gh, "Mul", {"x", "s"}, "y");
  const auto hn = parse_model(h);
  REQUIRE(hn.size() == 1);
  CHECK(hn.layer_name(0) == "HardSwish");
}

TEST_CASE("ONNX patterns: ReduceMean over H, W is GlobalAvgPool; other axes are refused, naming them") {
  onnx::ModelProto m = new_model(13);
  auto& g = *m.mutable_graph();
  set_value(g.add_input(), "x", {1, C, H, W});
  set_value(g.add_output(), "y", {1, 2});
  auto* r = add_node(g, "ReduceMean", {"x"}, "m");
  add_ints(r, "axes", {-1, 2});
  auto* k = r->add_attribute();
  k->set_name("keepdims"), k->set_type(onnx::AttributeProto::INT), k->set_i(0);
  const auto w = values(C * 2, 3.0f);
  add_init(g, "w", {C, 2}, w);
  add_node(g, "MatMul", {"m", "w"}, "y");
  const auto net = parse_model(m);
  CHECK(net.layer_name(0) == "GlobalAvgPool");
  std::vector<double> want(2);
  for (std::size_t o = 0; o < 2; ++o)
    for (std::size_t c = 0; c < C; ++c)
      for (std::size_t p = 0; p < P; ++p) want[o] += w[c * 2 + o] * x[c * P + p] / double(P);
  check_close(run(net, x, {1, C, H, W}), want);
  onnx::ModelProto bad = new_model(13);
  auto& gb = *bad.mutable_graph();
  set_value(gb.add_input(), "x", {1, C, H, W});
  set_value(gb.add_output(), "y", {1, 1, H, W});
  add_ints(add_node(gb, "ReduceMean", {"x"}, "y"), "axes", {1});
  const std::string e = import_error(bad);
  CHECK(e.find("ReduceMean_y") != std::string::npos);
  CHECK(e.find("axes [1]") != std::string::npos);
}

TEST_CASE("ONNX patterns: ConvNeXt's block: layer_norm decomposed channels-last, MatMul, Erf GELU, layer scale") {
  // x -> Transpose(0,2,3,1) -> LN over C (ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul,
  // Add) -> MatMul [C, 2C] + bias -> GELU (Div, Erf, Add, Mul, Mul) -> MatMul [2C, C] ->
  // Transpose(0,3,1,2) -> Mul by the layer scale [C,1,1]
  onnx::ModelProto m = new_model(13);
  auto& g = *m.mutable_graph();
  set_value(g.add_input(), "x", {1, C, H, W});
  set_value(g.add_output(), "y", {1, C, H, W});
  const auto gamma = values(C, 4.0f), beta = values(C, 5.0f), w1 = values(C * 2 * C, 6.0f), b1 = values(2 * C, 7.0f),
             w2 = values(2 * C * C, 8.0f), ls = values(C, 9.0f);
  add_init(g, "gamma", {C}, gamma), add_init(g, "beta", {C}, beta);
  add_init(g, "w1", {C, 2 * C}, w1), add_init(g, "b1", {2 * C}, b1), add_init(g, "w2", {2 * C, C}, w2);
  add_init(g, "ls", {C, 1, 1}, ls);
  scalar(g, "two", 2.0f), scalar(g, "eps", 1e-6f), scalar(g, "sqrt2", 1.4142135f), scalar(g, "one", 1.0f),
      scalar(g, "half", 0.5f);
  add_ints(add_node(g, "Transpose", {"x"}, "t"), "perm", {0, 2, 3, 1});
  add_ints(add_node(g, "ReduceMean", {"t"}, "mu"), "axes", {-1});
  add_node(g, "Sub", {"t", "mu"}, "d");
  add_node(g, "Pow", {"d", "two"}, "d2");
  add_ints(add_node(g, "ReduceMean", {"d2"}, "var"), "axes", {-1});
  add_node(g, "Add", {"var", "eps"}, "ve");
  add_node(g, "Sqrt", {"ve"}, "sd");
  add_node(g, "Div", {"d", "sd"}, "nrm");
  add_node(g, "Mul", {"nrm", "gamma"}, "sc");
  add_node(g, "Add", {"sc", "beta"}, "ln");
  add_node(g, "MatMul", {"ln", "w1"}, "h0");
  add_node(g, "Add", {"b1", "h0"}, "h");
  add_node(g, "Div", {"h", "sqrt2"}, "hs");
  add_node(g, "Erf", {"hs"}, "er");
  add_node(g, "Add", {"er", "one"}, "e1");
  add_node(g, "Mul", {"h", "e1"}, "he");
  add_node(g, "Mul", {"he", "half"}, "ge");
  add_node(g, "MatMul", {"ge", "w2"}, "o");
  add_ints(add_node(g, "Transpose", {"o"}, "ob"), "perm", {0, 3, 1, 2});
  add_node(g, "Mul", {"ls", "ob"}, "y");
  const auto net = parse_model(m);
  std::vector<std::string> names;
  for (std::size_t i = 0; i < net.size(); ++i) names.push_back(std::string(net.layer_name(i)));
  CAPTURE(names.size());
  CHECK(std::find(names.begin(), names.end(), "LayerNorm") != names.end());
  CHECK(std::find(names.begin(), names.end(), "GELU") != names.end());
  CHECK(std::count(names.begin(), names.end(), "Conv2D") == 2);
  // direct, position by position
  std::vector<double> want(C * P);
  for (std::size_t p = 0; p < P; ++p) {
    double mu = 0, var = 0;
    for (std::size_t c = 0; c < C; ++c) mu += x[c * P + p] / double(C);
    for (std::size_t c = 0; c < C; ++c) var += (x[c * P + p] - mu) * (x[c * P + p] - mu) / double(C);
    std::vector<double> ln(C), hid(2 * C);
    for (std::size_t c = 0; c < C; ++c) ln[c] = (x[c * P + p] - mu) / std::sqrt(var + double(1e-6f)) * gamma[c] + beta[c];
    for (std::size_t o = 0; o < 2 * C; ++o) {
      double z = b1[o];
      for (std::size_t c = 0; c < C; ++c) z += ln[c] * w1[c * 2 * C + o];
      hid[o] = 0.5 * z * (1 + std::erf(z / std::sqrt(2.0)));
    }
    for (std::size_t c = 0; c < C; ++c) {
      double z = 0;
      for (std::size_t o = 0; o < 2 * C; ++o) z += hid[o] * w2[o * C + c];
      want[c * P + p] = z * ls[c];
    }
  }
  check_close(run(net, x, {1, C, H, W}), want, 1e-4);
}

TEST_CASE("ONNX patterns: channel_shuffle is a ChannelShuffle; the channel split's ends come from shape arithmetic") {
  // x [1,4,3,3]: a = x[:, :C/2], b = x[:, C/2:] (Slice, the ends Shape -> Gather(1) -> Div 2 -> Mul),
  // y = shuffle(cat(a, relu(b)), 2): Reshape [1,2,2,3,3] -> Transpose(0,2,1,3,4) -> Reshape [1,4,3,3]
  onnx::ModelProto m = new_model(13);
  auto& g = *m.mutable_graph();
  set_value(g.add_input(), "x", {1, C, H, W});
  set_value(g.add_output(), "y", {1, C, H, W});
  int64s(g, "i1", {1}), int64s(g, "two", {2}), int64s(g, "zero", {0}), int64s(g, "axis", {1}), int64s(g, "big", {1 << 30});
  int64s(g, "s5", {1, 2, 2, 3, 3}), int64s(g, "s4", {1, 4, 3, 3});
  add_node(g, "Shape", {"x"}, "sh");
  add_node(g, "Gather", {"sh", "i1"}, "ch");
  add_node(g, "Div", {"ch", "two"}, "half");
  add_node(g, "Slice", {"x", "zero", "half", "axis"}, "a");
  add_node(g, "Slice", {"x", "half", "big", "axis"}, "b");
  add_node(g, "Relu", {"b"}, "rb");
  auto* cat = add_node(g, "Concat", {"a", "rb"}, "c");
  auto* ax = cat->add_attribute();
  ax->set_name("axis"), ax->set_type(onnx::AttributeProto::INT), ax->set_i(1);
  add_node(g, "Reshape", {"c", "s5"}, "r5");
  add_ints(add_node(g, "Transpose", {"r5"}, "t5"), "perm", {0, 2, 1, 3, 4});
  add_node(g, "Reshape", {"t5", "s4"}, "y");
  const auto net = parse_model(m);
  REQUIRE(net.size() == 2);
  CHECK(net.layer_name(0) == "Concat");
  CHECK(net.layer_name(1) == "ChannelShuffle");
  // cat = [x0, x1, relu(x2), relu(x3)]; shuffled by 2: channels 0, 2, 1, 3 of cat
  const std::size_t src[C] = {0, 2, 1, 3};
  std::vector<double> want(C * P);
  for (std::size_t c = 0; c < C; ++c)
    for (std::size_t p = 0; p < P; ++p) {
      const std::size_t s = src[c];
      const double v = x[s * P + p];
      want[c * P + p] = s >= 2 ? std::max(0.0, v) : v;
    }
  check_close(run(net, x, {1, C, H, W}), want, 0);

  // a transpose that permutes channels otherwise is refused, naming the Reshape: 8 channels as
  // [2,2,2] with the axes reversed (each channel's index bits reversed: no channel shuffle)
  onnx::ModelProto bad = new_model(13);
  auto& gb = *bad.mutable_graph();
  set_value(gb.add_input(), "x", {1, 8, 1, 1});
  set_value(gb.add_output(), "y", {1, 8, 1, 1});
  int64s(gb, "s6", {1, 2, 2, 2, 1, 1}), int64s(gb, "s4", {1, 8, 1, 1});
  add_node(gb, "Reshape", {"x", "s6"}, "r6");
  add_ints(add_node(gb, "Transpose", {"r6"}, "t6"), "perm", {0, 3, 2, 1, 4, 5});
  add_node(gb, "Reshape", {"t6", "s4"}, "y");
  const std::string e = import_error(bad);
  CAPTURE(e);
  CHECK(e.find("Reshape_y") != std::string::npos);
  CHECK(e.find("not as a channel shuffle") != std::string::npos);
}
