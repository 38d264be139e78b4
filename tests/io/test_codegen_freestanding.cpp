// io/codegen_freestanding.hpp and kernels/freestanding.hpp on the host: the firmware kernels against
// the host's layers (convolution and pooling geometries the firmware check's two models do not
// reach), the piece tables of the element-wise maps, and the refusals.  The generated header itself
// is compiled for a Cortex-M and run under qemu by tests/firmware/firmware_check.py.
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "nnlens/io/codegen_freestanding.hpp"
#include "nnlens/kernels/freestanding.hpp"
#include "nnlens/nnlens.hpp"

using namespace nnlens;

namespace {

template <class E>
std::vector<float> random_input(const E& shape_like, unsigned seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(shape_like);
  for (auto& x : v) x = u(g);
  return v;
}

template <class Net>
tensor<float, 2> run_host(const Net& net, const std::vector<float>& x, std::size_t C, std::size_t H, std::size_t W) {
  tensor<float, 4> X = tensor<float, 4>::from_shape({1, C, H, W});
  std::copy(x.begin(), x.end(), X.begin());
  const auto y = forward(net, X);
  return tensor<float, 2>(xt::reshape_view(y, {std::size_t(1), y.size()}));
}

void check_close(const float* got, const tensor<float, 2>& want) {
  for (std::size_t i = 0; i < want.size(); ++i) CHECK(got[i] == doctest::Approx(want.data()[i]).epsilon(1e-5));
}

}  // namespace

template <conv_geometry G>
void check_conv(unsigned seed) {
  Sequential<Input<4, 9, 8>, Conv2DG<6, G>> net;
  initialize(net, seed);
  auto& c = std::get<0>(net.layers);
  for (auto& v : c.b) v = 0.25f;  // a non-zero bias
  const auto x = random_input(4 * 9 * 8, seed);
  const auto want = run_host(net, x, 4, 9, 8);
  const std::size_t OH = G.out_h(9), OW = G.out_w(8);
  const fw::conv_dims d{4, 9, 8, 6, OH, OW, G.kh, G.kw, G.stride_h, G.stride_w, G.pad_top, G.pad_left,
                        G.dilation_h, G.dilation_w, G.groups};
  std::vector<float> y(6 * OH * OW);
  fw::conv2d(x.data(), d, c.W.data(), c.b.data(), y.data());
  REQUIRE(y.size() == want.size());
  check_close(y.data(), want);
}

TEST_CASE("freestanding: conv2d matches Conv2D (stride, padding, dilation, groups)") {
  check_conv<conv_geometry{3, 2, 2, 1, 1, 0, 2, 1, 2, 1, 2}>(7);  // rows contiguous (stride_w 1): axpy
  check_conv<conv_geometry{3, 3, 1, 2, 2, 1, 0, 2, 1, 2, 1}>(8);  // stride_w 2, dilation_w 2
  check_conv<conv_geometry{5, 5, 1, 1, 2, 2, 2, 2, 1, 1, 1}>(9);  // LeNet-5's first layer
}

TEST_CASE("freestanding: pool matches MaxPool2D and AvgPool2D (padding, ceil mode, divisors)") {
  constexpr pool_geometry P{3, 3, 2, 2, 1, 1, 1, 1, true, false};  // ceil mode, count_include_pad false
  constexpr pool_geometry PM{3, 3, 2, 2, 1, 1, 1, 1, true, true};  // the same for MaxPool2D (no divisor)
  constexpr pool_geometry Q{3, 2, 2, 2, 1, 0, 1, 0, false, true};
  const auto x = random_input(3 * 7 * 6, 2);
  auto one = [&](const auto& net, const pool_geometry& g, bool mean) {
    const auto want = run_host(net, x, 3, 7, 6);
    const fw::pool_dims d{3, 7, 6, g.out_h(7), g.out_w(6), g.kh, g.kw, g.stride_h, g.stride_w,
                          g.pad_top, g.pad_left, g.pad_bottom, g.pad_right, mean, g.count_include_pad};
    std::vector<float> y(3 * d.OH * d.OW);
    fw::pool(x.data(), d, y.data());
    REQUIRE(y.size() == want.size());
    check_close(y.data(), want);
  };
  one(Sequential<Input<3, 7, 6>, MaxPool2DG<PM>>{}, PM, false);
  one(Sequential<Input<3, 7, 6>, MaxPool2DG<Q>>{}, Q, false);
  one(Sequential<Input<3, 7, 6>, AvgPool2DG<P>>{}, P, true);
  one(Sequential<Input<3, 7, 6>, AvgPool2DG<Q>>{}, Q, true);
}

TEST_CASE("freestanding: the piece tables reproduce the element-wise maps exactly") {
  std::vector<double> slope, icept;
  const auto leaky = layer_traits<LeakyReLU>::scalar_map(LeakyReLU{0.125});
  io::detail::pwl_pieces({0.0}, [&](double v) { return leaky(v); }, slope, icept, "t");
  CHECK(slope == std::vector<double>{0.125, 1.0});
  CHECK(icept == std::vector<double>{0.0, 0.0});
  slope.clear(), icept.clear();
  const auto ht = layer_traits<HardTanh>::scalar_map(HardTanh{-2.0, 0.5});
  io::detail::pwl_pieces({-2.0, 0.5}, [&](double v) { return ht(v); }, slope, icept, "t");
  CHECK(slope == std::vector<double>{0.0, 1.0, 0.0});
  CHECK(icept == std::vector<double>{-2.0, 0.0, 0.5});
  // a map that is not piecewise linear on the knots it states is refused
  slope.clear(), icept.clear();
  CHECK_THROWS_WITH_AS(io::detail::pwl_pieces({0.0}, [](double v) { return v * v; }, slope, icept, "layer 9 (X)"),
                       doctest::Contains("layer 9 (X): the element-wise map is not piecewise linear"), value_error);
}

TEST_CASE("freestanding: every supported form is generated; the rest is refused naming the layer") {
  Sequential<Input<2, 6, 6>, Conv2D<3, 3, 1, 1>, BatchNorm<3>, LeakyReLU, MaxPool2D<2>, AvgPool2D<1>, PReLU<3>,
             HardTanh, Flatten, Dense<4>, Clamp>
      net;
  initialize(net, 3);
  io::codegen_options o;
  o.name = "m", o.ns = "fw::models";
  const std::string h = io::generate_freestanding_header(net, o);
  for (const char* call : {"nnlens::fw::conv2d(", "nnlens::fw::affine(", "nnlens::fw::pwl_map(", "nnlens::fw::pool(",
                           "nnlens::fw::dense(", "reshape only", "namespace fw::models {", "work_size = "})
    CHECK_MESSAGE(h.find(call) != std::string::npos, call);
  CHECK(h.find("#include <nnlens/kernels/freestanding.hpp>") != std::string::npos);
  CHECK(h.find("xtensor") == std::string::npos);
  CHECK(h.find("#include <nnlens/nnlens.hpp>") == std::string::npos);

  Sequential<Input<4>, Dense<3>, Softmax> soft;
  initialize(soft, 1);
  CHECK_THROWS_WITH_AS(io::generate_freestanding_header(soft), doctest::Contains("layer 1 (Softmax): has no freestanding form (its output is a distribution)"), value_error);
  Sequential<Input<4>, Residual<Block<Dense<4>, ReLU>>> res;
  initialize(res, 1);
  CHECK_THROWS_WITH_AS(io::generate_freestanding_header(res), doctest::Contains("layer 0 (Residual): has no freestanding form"), value_error);
  o.name = "1bad";
  CHECK_THROWS_AS(io::generate_freestanding_header(soft, o), value_error);
}

TEST_CASE("freestanding: dense and the status checks") {
  const float W[6] = {1, 2, 3, 4, 5, 6};  // [3, 2]
  const float b[2] = {0.5f, -1};
  const float x[3] = {1, -1, 2};
  float y[2];
  fw::dense(x, 3, W, b, 2, y);
  CHECK(y[0] == 1 - 3 + 10 + 0.5f);
  CHECK(y[1] == 2 - 4 + 12 - 1);
  const float bad[2] = {1, std::nanf("")};
  CHECK(fw::all_finite(x, 3));
  CHECK_FALSE(fw::all_finite(bad, 2));
  CHECK(std::string(fw::status_message(fw::status::non_finite_input)).find("NaN") != std::string::npos);
}
