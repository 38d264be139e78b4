// ONNX PRelu: import with the slope shaped [C,1,1], [1,C,1,1], [1] on an image and [F] on
// features, each against a plain loop; a slope that does not broadcast per channel is refused;
// export of PReLU (per channel, shared, rank 1) writes PRelu with a broadcasting initializer and
// re-imports to the same outputs.
#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "nnlens/io/onnx.hpp"
#include "nnlens/io/onnx_export.hpp"
#include "nnlens/network/forward.hpp"
#include "nnlens/network/sequential.hpp"
#include "onnx_builder.hpp"

using namespace nnlens;
using namespace onnx_builder;

namespace {

/// x [1, dims...] -> PRelu(x, slope) -> y.
onnx::ModelProto prelu_model(std::vector<std::int64_t> xdims, std::vector<std::int64_t> sdims, const std::vector<float>& s) {
  onnx::ModelProto m = new_model(13);
  auto& g = *m.mutable_graph();
  set_value(g.add_input(), "x", xdims);
  set_value(g.add_output(), "y", xdims);
  add_init(g, "slope", sdims, s);
  add_node(g, "PRelu", {"x", "slope"}, "y");
  return m;
}

std::vector<float> random_values(std::size_t n, std::mt19937& r) {
  std::uniform_real_distribution<float> u(-2, 2);
  std::vector<float> v(n);
  for (auto& e : v) e = u(r);
  return v;
}

/// The plain reference: slope of element i is s[(i / per) % count] (count 1: shared).
std::vector<double> reference(const std::vector<float>& x, const std::vector<float>& s, std::size_t per) {
  std::vector<double> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double a = s.size() == 1 ? s[0] : s[(i / per) % s.size()];
    y[i] = x[i] > 0 ? double(x[i]) : a * double(x[i]);
  }
  return y;
}

void check_forward(const DynamicNetwork& net, shape in, std::size_t batch, const std::vector<float>& x,
                   const std::vector<double>& want) {
  std::vector<std::size_t> sh{batch};
  for (std::size_t i = 0; i < in.rank; ++i) sh.push_back(in[i]);
  xt::xarray<float> X = xt::xarray<float>::from_shape(sh);
  std::copy(x.begin(), x.end(), X.begin());
  const auto y = forward(net, X);
  REQUIRE(y.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) CHECK(double(y.data()[i]) == doctest::Approx(want[i]).epsilon(1e-6));
}
}  // namespace

TEST_CASE("onnx PRelu import: [C,1,1], [1,C,1,1], [1] on an image; [F] on features; against a loop") {
  std::mt19937 r(31);
  const std::size_t C = 3, H = 2, W = 4;
  const auto x = random_values(C * H * W, r);
  const std::vector<float> s{0.1f, -0.7f, 1.3f};
  for (auto sd : {std::vector<std::int64_t>{3, 1, 1}, std::vector<std::int64_t>{1, 3, 1, 1}}) {
    const auto net = parse_model(prelu_model({1, 3, 2, 4}, sd, s));
    REQUIRE(net.size() == 1);
    CHECK(net.layer_name(0) == "PReLU");
    check_forward(net, shape(C, H, W), 1, x, reference(x, s, H * W));
  }
  const auto shared = parse_model(prelu_model({1, 3, 2, 4}, {1}, {0.2f}));
  check_forward(shared, shape(C, H, W), 1, x, reference(x, {0.2f}, H * W));
  const std::vector<float> f{0.5f, -0.25f, 2.0f, 0.0f, 0.3f};
  const auto xf = random_values(5, r);
  const auto feat = parse_model(prelu_model({1, 5}, {5}, f));
  check_forward(feat, shape(5), 1, xf, reference(xf, f, 1));
  // [C] on an image broadcasts along W, not C: refused, naming the node
  CHECK_THROWS_WITH_AS(parse_model(prelu_model({1, 3, 2, 4}, {3}, s)), doctest::Contains("PRelu"), io_error);
  CHECK_THROWS_AS(parse_model(prelu_model({1, 3, 2, 4}, {2, 1, 1}, {1, 2})), io_error);
  CHECK_THROWS_AS(parse_model(prelu_model({1, 3, 2, 4}, {3, 1, 1}, {1, NAN, 2})), io_error);
}

TEST_CASE("onnx PRelu export: broadcasting initializers, re-import gives the same outputs") {
  using Net = Sequential<Input<2, 3, 3>, PReLU<2>, Flatten, Dense<4>, PReLU<4>, Dense<3>, PReLU<1>>;
  Net net;
  initialize(net, 8);
  net.layer<0>().a = xt::xtensor<float, 1>{-0.3f, 0.6f};
  net.layer<3>().a = xt::xtensor<float, 1>{0.1f, 0.2f, -0.5f, 1.0f};
  net.layer<5>().a(0) = 0.05f;
  const onnx::ModelProto m = io::to_onnx(net);
  std::vector<std::vector<std::int64_t>> slope_dims;
  for (const auto& n : m.graph().node())
    if (n.op_type() == "PRelu")
      for (const auto& t : m.graph().initializer())
        if (t.name() == n.input(1)) slope_dims.emplace_back(t.dims().begin(), t.dims().end());
  REQUIRE(slope_dims.size() == 3);
  CHECK(slope_dims[0] == std::vector<std::int64_t>{2, 1, 1});
  CHECK(slope_dims[1] == std::vector<std::int64_t>{4});
  CHECK(slope_dims[2] == std::vector<std::int64_t>{1});
  const auto back = parse_model(m);
  std::mt19937 r(9);
  xt::xarray<float> X = xt::xarray<float>::from_shape({4, 2, 3, 3});
  for (auto& v : X) v = random_values(1, r)[0];
  const auto y = forward(net, X), yb = forward(back, X);
  REQUIRE(y.size() == yb.size());
  for (std::size_t i = 0; i < y.size(); ++i) CHECK(yb.data()[i] == y.data()[i]);
  // the first layer against the loop
  const auto y0 = forward(Sequential<Input<2, 3, 3>, PReLU<2>>{std::tuple{net.layer<0>()}}, X);
  const auto want = reference(std::vector<float>(X.begin(), X.end()), {-0.3f, 0.6f}, 9);
  for (std::size_t i = 0; i < want.size(); ++i) CHECK(double(y0.data()[i]) == doctest::Approx(want[i]));
}
