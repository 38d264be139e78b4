// NaN / Inf weights in ONNX files: a NaN in the first Conv or in fc1 is absorbed
// by ReLU and the outputs look finite, so the importer must reject every non-finite initializer,
// Constant, bound input and float attribute that becomes a weight, naming the tensor, its node and
// the element.  Models are built in memory (ModelProto written here), plus DeepXplore's LeNet-5 with
// one weight replaced.  Clip's bounds may be infinite (no bound); integer constants read from floats
// (shapes, pads) must be in range.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "nnlens/io/onnx.hpp"
#include "nnlens/network/forward.hpp"
#include "onnx_builder.hpp"
#include "test_skip.hpp"

namespace fs = std::filesystem;
using namespace nnlens;
using namespace onnx_builder;

namespace {

const float nan_f = std::numeric_limits<float>::quiet_NaN();
const float inf_f = std::numeric_limits<float>::infinity();

std::vector<float> ramp(std::size_t n, float scale) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = scale * float(int(i % 7) - 3);
  return v;
}

/// x[1,1,6,6] -> Conv(conv1: 2x1x3x3) -> Relu -> Flatten -> Gemm(fc1: 4x32, transB) -> Relu -> Gemm(fc2: 3x4)
struct small_cnn {
  std::vector<float> conv1_w = ramp(18, 0.1f), conv1_b = ramp(2, 0.01f), fc1_w = ramp(4 * 32, 0.05f),
                     fc1_b = ramp(4, 0.01f), fc2_w = ramp(12, 0.2f), fc2_b = ramp(3, 0.1f);
  onnx::ModelProto model() const {
    onnx::ModelProto m = new_model(13);
    auto& g = *m.mutable_graph();
    set_value(g.add_input(), "x", {1, 1, 6, 6});
    set_value(g.add_output(), "y", {1, 3});
    add_init(g, "conv1.weight", {2, 1, 3, 3}, conv1_w);
    add_init(g, "conv1.bias", {2}, conv1_b);
    add_init(g, "fc1.weight", {4, 32}, fc1_w);
    add_init(g, "fc1.bias", {4}, fc1_b);
    add_init(g, "fc2.weight", {3, 4}, fc2_w);
    add_init(g, "fc2.bias", {3}, fc2_b);
    add_node(g, "Conv", {"x", "conv1.weight", "conv1.bias"}, "c1");
    add_node(g, "Relu", {"c1"}, "r1");
    add_node(g, "Flatten", {"r1"}, "f");
    auto* a = add_node(g, "Gemm", {"f", "fc1.weight", "fc1.bias"}, "h1");
    auto* tb = a->add_attribute();
    tb->set_name("transB"), tb->set_type(onnx::AttributeProto::INT), tb->set_i(1);
    add_node(g, "Relu", {"h1"}, "r2");
    auto* b = add_node(g, "Gemm", {"r2", "fc2.weight", "fc2.bias"}, "y");
    *b->add_attribute() = *tb;
    return m;
  }
};


bool has(const std::string& s, const std::string& part) {
  if (s.find(part) != std::string::npos) return true;
  MESSAGE("'" << part << "' not in: " << s);
  return false;
}

}  // namespace

TEST_CASE("onnx: a NaN in the first Conv or in fc1 is an io_error naming the initializer and the element") {
  small_cnn good;
  {
    const std::string bytes = good.model().SerializeAsString();
    const auto net = io::parse_onnx(bytes.data(), bytes.size(), "model.onnx");
    const auto y = forward(net, xt::xarray<float>(xt::ones<float>({1, 1, 6, 6})));
    CHECK(y.size() == 3);
  }
  {  // conv1.weight element 5 = [0,0,1,2]: ReLU would absorb it, the outputs would look finite
    small_cnn c = good;
    c.conv1_w[5] = nan_f;
    const std::string e = import_error(c.model());
    CHECK(has(e, "ONNX: model.onnx: initializer 'conv1.weight' (input 1 of node 'Conv_c1' (Conv)): element 5 "
                 "(index [0,0,1,2] of [2,1,3,3]) is NaN"));
  }
  {
    small_cnn c = good;
    c.fc1_w[37] = nan_f;  // [1,5] of [4,32]
    const std::string e = import_error(c.model());
    CHECK(has(e, "initializer 'fc1.weight' (input 1 of node 'Gemm_h1' (Gemm)): element 37 (index [1,5] of [4,32]) is NaN"));
  }
  {
    small_cnn c = good;
    c.fc1_b[3] = -inf_f;
    CHECK(has(import_error(c.model()), "initializer 'fc1.bias' (input 2 of node 'Gemm_h1' (Gemm)): element 3 is -Inf"));
  }
  {
    small_cnn c = good;
    c.conv1_b[0] = inf_f;
    CHECK(has(import_error(c.model()), "initializer 'conv1.bias' (input 2 of node 'Conv_c1' (Conv)): element 0 is +Inf"));
  }
}

TEST_CASE("onnx: non-finite Constant nodes, attributes and double initializers beyond float") {
  small_cnn good;
  {  // a Constant node's tensor, through Mul (an Affine)
    onnx::ModelProto m = good.model();
    auto& g = *m.mutable_graph();
    g.mutable_node(1)->set_input(0, "s");  // Relu reads Mul(c1, k)
    auto* k = add_node(g, "Constant", {}, "k");
    auto* a = k->add_attribute();
    a->set_name("value"), a->set_type(onnx::AttributeProto::TENSOR);
    a->mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
    a->mutable_t()->add_float_data(nan_f);
    add_node(g, "Mul", {"c1", "k"}, "s");
    // keep the nodes in topological order: Constant and Mul right after the Conv
    auto* nodes = g.mutable_node();
    for (int i = nodes->size() - 1; i > 1; --i) nodes->SwapElements(i, i - 1);  // Mul to 1
    for (int i = nodes->size() - 1; i > 1; --i) nodes->SwapElements(i, i - 1);  // Constant to 1, Mul to 2
    REQUIRE(g.node(1).op_type() == "Constant");
    REQUIRE(g.node(2).op_type() == "Mul");
    CHECK(has(import_error(m), "Constant 'k' (input 1 of node 'Mul_s' (Mul)): element 0 is NaN"));
  }
  {  // Gemm's alpha attribute
    onnx::ModelProto m = good.model();
    auto* al = m.mutable_graph()->mutable_node(3)->add_attribute();
    al->set_name("alpha"), al->set_type(onnx::AttributeProto::FLOAT), al->set_f(nan_f);
    CHECK(has(import_error(m), "node 'Gemm_h1' (Gemm): attribute 'alpha' is NaN"));
  }
  {  // a double initializer of 1e300 is finite, but not in float: the network would hold +Inf
    onnx::ModelProto m = good.model();
    auto* t = m.mutable_graph()->mutable_initializer(5);  // fc2.bias
    REQUIRE(t->name() == "fc2.bias");
    t->clear_float_data();
    t->set_data_type(onnx::TensorProto::DOUBLE);
    for (double v : {0.5, 1e300, -0.5}) t->add_double_data(v);
    const std::string e = import_error(m);
    CHECK(has(e, "ONNX: model.onnx: layer "));
    CHECK(has(e, "is Inf after import"));
  }
}

TEST_CASE("onnx: Clip's bounds may be infinite, never NaN; float shapes must be integers in range") {
  auto clip_model = [](float lo, float hi) {
    onnx::ModelProto m = new_model(13);
    auto& g = *m.mutable_graph();
    set_value(g.add_input(), "x", {1, 3});
    set_value(g.add_output(), "y", {1, 3});
    add_init(g, "lo", {}, {lo});
    add_init(g, "hi", {}, {hi});
    add_node(g, "Clip", {"x", "lo", "hi"}, "y");
    return m;
  };
  {
    const std::string bytes = clip_model(0.0f, inf_f).SerializeAsString();
    const auto net = io::parse_onnx(bytes.data(), bytes.size(), "clip.onnx");
    const xt::xarray<float> x = {{-2.0f, 3.0f, 1e30f}};
    const auto y = forward(net, x);
    CHECK(y(0, 0) == 0.0f);
    CHECK(y(0, 2) == 1e30f);
  }
  CHECK(has(import_error(clip_model(nan_f, 1.0f), "clip.onnx"),
            "initializer 'lo' (input 1 of node 'Clip_y' (Clip)): element 0 is NaN"));
  {  // Reshape with a float shape tensor holding 1e30 (converting it to int64 is undefined behaviour)
    onnx::ModelProto m = new_model(13);
    auto& g = *m.mutable_graph();
    set_value(g.add_input(), "x", {1, 2, 2, 2});
    set_value(g.add_output(), "y", {1, 8});
    add_init(g, "shape", {2}, {1.0f, 1e30f});
    add_node(g, "Reshape", {"x", "shape"}, "y");
    CHECK(has(import_error(m), "node 'Reshape_y' (Reshape): expected an integer, got 1e+30"));
    m.mutable_graph()->mutable_initializer(0)->set_float_data(1, nan_f);
    CHECK(has(import_error(m), "initializer 'shape' (input 1 of node 'Reshape_y' (Reshape)): element 1 is NaN"));
    m.mutable_graph()->mutable_initializer(0)->set_float_data(1, 8.0f);
    const std::string bytes = m.SerializeAsString();
    CHECK(io::parse_onnx(bytes.data(), bytes.size(), "reshape.onnx").output_shape() == shape(8));
  }
}

TEST_CASE("onnx: DeepXplore's LeNet-5 with one NaN weight in its first Conv or its first Dense is rejected") {
  const fs::path p = nnlens_test::shared_dir() / "models" / "deepxplore-mnist" / "lenet5.onnx";
  if (!fs::exists(p)) NNLENS_SKIP(p.string(), " not found");
  std::ifstream f(p, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  REQUIRE(!bytes.empty());
  onnx::ModelProto base;
  REQUIRE(base.ParseFromString(bytes));
  CHECK_NOTHROW(io::parse_onnx(bytes.data(), bytes.size(), "lenet5.onnx"));
  for (const std::vector<std::string>& ops : {std::vector<std::string>{"Conv"}, std::vector<std::string>{"Gemm", "MatMul"}}) {
    // the weight (input 1) of the first node of that type
    std::string weight;
    for (const auto& n : base.graph().node())
      if (std::find(ops.begin(), ops.end(), n.op_type()) != ops.end() && n.input_size() > 1) {
        weight = n.input(1);
        break;
      }
    REQUIRE(!weight.empty());
    onnx::ModelProto m = base;
    bool done = false;
    for (auto& t : *m.mutable_graph()->mutable_initializer()) {
      if (t.name() != weight) continue;
      REQUIRE(t.data_type() == onnx::TensorProto::FLOAT);
      if (t.has_raw_data()) {
        std::string raw = t.raw_data();
        REQUIRE(raw.size() >= 8);
        std::memcpy(raw.data() + 4, &nan_f, 4);  // element 1
        t.set_raw_data(raw);
      } else {
        REQUIRE(t.float_data_size() > 1);
        t.set_float_data(1, nan_f);
      }
      done = true;
    }
    REQUIRE(done);
    const std::string e = import_error(m, "lenet5.onnx");
    CHECK(has(e, "ONNX: lenet5.onnx: initializer '" + weight + "'"));
    CHECK(has(e, "element 1 "));
    CHECK(has(e, "is NaN"));
  }
}
