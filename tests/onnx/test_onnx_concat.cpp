// ONNX Concat of activations forked from one value -> DynamicConcat (layers/concat.hpp's join rule).
// Three models exported by PyTorch (tests/onnx/data/make_concat_models.py: DenseNet-style growth
// with a negative axis, a four-branch Inception block with a padded average pool, concatenated
// feature vectors) import and reproduce PyTorch's own outputs on 20 inputs; ExactLine on the
// imported model agrees with forward; export writes one Concat node and re-imports to the same
// outputs; a Concat along another axis and branches of different spatial sizes are refused with
// messages naming the node.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "nnlens/exactline.hpp"
#include "nnlens/io/onnx.hpp"
#include "nnlens/io/onnx_export.hpp"
#include "nnlens/network/forward.hpp"
#include "onnx_builder.hpp"

using namespace nnlens;
using namespace onnx_builder;

namespace {
const std::string data_dir = std::string(NNLENS_SOURCE_DIR) + "/tests/onnx/data/";

std::vector<float> read_f32(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  REQUIRE(f.good());
  f.seekg(0, std::ios::end);
  const auto n = std::size_t(f.tellg()) / 4;
  f.seekg(0);
  std::vector<float> v(n);
  f.read(reinterpret_cast<char*>(v.data()), std::streamsize(n * 4));
  return v;
}

std::size_t concats(const DynamicNetwork& net) {
  std::size_t k = 0;
  for (const auto& l : net.layers()) k += std::holds_alternative<DynamicConcat<float>>(l);
  return k;
}

xt::xarray<float> batch(const std::vector<float>& x, shape in) {
  std::vector<std::size_t> sh{x.size() / in.size()};
  for (std::size_t i = 0; i < in.rank; ++i) sh.push_back(in[i]);
  xt::xarray<float> X = xt::xarray<float>::from_shape(sh);
  std::copy(x.begin(), x.end(), X.begin());
  return X;
}

}  // namespace

TEST_CASE("ONNX Concat: PyTorch-exported models import and reproduce PyTorch's outputs") {
  struct model {
    const char* name;
    shape in;
    std::size_t concat_layers;
  };
  for (const model& m : {model{"concat_densenet", shape(3, 8, 8), 2}, model{"concat_inception", shape(3, 8, 8), 1},
                         model{"concat_features", shape(6), 1}}) {
    INFO(m.name);
    const DynamicNetwork net = io::load_onnx(data_dir + m.name + ".onnx");
    CHECK(net.input_shape() == m.in);
    CHECK(concats(net) == m.concat_layers);
    const auto X = batch(read_f32(data_dir + m.name + ".x.f32"), m.in);
    const auto want = read_f32(data_dir + m.name + ".y.f32");
    const auto Y = forward(net, X);
    REQUIRE(Y.size() == want.size());
    double worst = 0;
    for (std::size_t i = 0; i < want.size(); ++i)
      worst = std::max(worst, std::abs(double(Y.data()[i]) - double(want[i])) / (1.0 + std::abs(double(want[i]))));
    CHECK(worst < 1e-5);
    // ExactLine between two of the inputs: the values at the breaks are the forward outputs
    const std::size_t D = m.in.size();
    std::vector<float> P(X.data(), X.data() + D), Q(X.data() + D, X.data() + 2 * D);
    const auto line = exact_line(net, P, Q);
    CHECK(line.t.size() >= 2);
    for (std::size_t j = 0; j < line.t.size(); j += std::max<std::size_t>(1, line.t.size() / 5)) {
      std::vector<float> p(D);
      for (std::size_t i = 0; i < D; ++i) p[i] = float(P[i] + line.t[j] * (Q[i] - P[i]));
      const auto y = forward(net, batch(p, m.in));
      for (std::size_t k = 0; k < y.size(); ++k)
        CHECK(double(line.output(j)[k]) == doctest::Approx(double(y.data()[k])).epsilon(1e-4));
    }
    // export: one Concat node per DynamicConcat; the re-import gives the same outputs bitwise
    const onnx::ModelProto out = io::to_onnx(net);
    std::size_t nodes = 0;
    for (const auto& n : out.graph().node()) nodes += n.op_type() == "Concat";
    CHECK(nodes == m.concat_layers);
    std::string bytes;
    REQUIRE(out.SerializeToString(&bytes));
    const DynamicNetwork back = io::parse_onnx(bytes.data(), bytes.size(), "re-export.onnx");
    CHECK(concats(back) == m.concat_layers);
    const auto Y2 = forward(back, X);
    std::size_t diff = 0;
    for (std::size_t i = 0; i < Y.size(); ++i) diff += Y.data()[i] != Y2.data()[i];
    CHECK(diff == 0);
  }
}

TEST_CASE("ONNX Concat: another axis and different spatial sizes are refused, naming the node") {
  // x [1,2,4,4] -> Relu -> a; MaxPool(x) -> b; Concat(a, b, axis)
  auto make = [](std::int64_t axis, bool pool) {
    onnx::ModelProto m = new_model(13);
    auto& g = *m.mutable_graph();
    set_value(g.add_input(), "x", {1, 2, 4, 4});
    set_value(g.add_output(), "y", {1, 4, 4, 4});
    add_node(g, "Relu", {"x"}, "a");
    auto* p = add_node(g, pool ? "MaxPool" : "Relu", {"x"}, "b");
    if (pool) add_ints(p, "kernel_shape", {2, 2}), add_ints(p, "strides", {2, 2});
    auto* c = add_node(g, "Concat", {"a", "b"}, "y");
    auto* at = c->add_attribute();
    at->set_name("axis");
    at->set_type(onnx::AttributeProto::INT);
    at->set_i(axis);
    return m;
  };
  std::string ok_bytes;
  REQUIRE(make(1, false).SerializeToString(&ok_bytes));
  const auto net = io::parse_onnx(ok_bytes.data(), ok_bytes.size(), "ok.onnx");
  CHECK(concats(net) == 1);
  CHECK(net.output_shape() == shape(4, 4, 4));
  const std::string e2 = import_error(make(2, false));
  CHECK(e2.find("Concat_y") != std::string::npos);
  CHECK(e2.find("concatenates along axis 2") != std::string::npos);
  const std::string e3 = import_error(make(1, true));
  CHECK(e3.find("Concat_y") != std::string::npos);
  CHECK(e3.find("[2,4,4]") != std::string::npos);
  CHECK(e3.find("[2,2,2]") != std::string::npos);
}
