// LeakyReLU, HardTanh, Clamp, Softmax, Dropout, Identity: hand-computed cases (including the
// derivative conventions at the kinks), backward against central finite differences on random
// shapes (inputs kept away from the kinks), static vs DynamicNetwork (bitwise), from_dynamic,
// Softmax's normalisation and stability, Dropout as the identity, hyper-parameter errors.
#include <doctest/doctest.h>

#include <nnlens/nnlens.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "gradient_check.hpp"

using namespace nnlens;

using namespace nnlens_test;

namespace {
/// Random inputs at least `gap` away from every point in `kinks`.
std::vector<double> away_from(std::vector<double> x, std::initializer_list<double> kinks, double gap = 1e-3) {
  for (auto& v : x)
    for (double k : kinks)
      if (std::abs(v - k) < gap) v = k + (v < k ? -2 * gap : 2 * gap);
  return x;
}

/// y = L(x) and dx = J^T dy for one sample of a rank-1 input.
template <class L>
std::pair<std::vector<double>, std::vector<double>> eval1(const L& l, const std::vector<double>& x,
                                                          const std::vector<double>& dy) {
  const shape in(x.size());
  auto f = run_forward(l, in, 1, x, true);
  std::vector<double> dx(x.size(), std::nan(""));
  layer_traits<L>::backward(l, backward_args<double>{in, f.out, 1, x.data(), f.y.data(), dy.data(), f.cache.data(), dx.data(), nullptr},
                            nullptr);
  return {f.y, dx};
}
}  // namespace

TEST_CASE("LeakyReLU: hand-computed values and the slope alpha at the kink (PyTorch)") {
  LeakyReLU l{0.1};
  auto [y, dx] = eval1(l, {-2.0, 0.0, 3.0, -0.5}, {1.0, 1.0, 1.0, 2.0});
  CHECK(y == std::vector<double>{-0.2, 0.0, 3.0, -0.05});
  CHECK(dx == std::vector<double>{0.1, 0.1, 1.0, 0.2});  // x = 0 takes alpha
  CHECK(LeakyReLU{}.alpha == 0.01);
  auto [y2, dx2] = eval1(LeakyReLU{}, {-100.0}, {1.0});
  CHECK(y2[0] == doctest::Approx(-1.0));
  CHECK(dx2[0] == doctest::Approx(0.01));
  CHECK_THROWS_AS(layer_traits<LeakyReLU>::output_shape(LeakyReLU{std::nan("")}, shape(3)), value_error);
}

TEST_CASE("HardTanh and Clamp: hand-computed values and derivatives at the bounds") {
  SUBCASE("HardTanh defaults to [-1, 1]; derivative 0 at both bounds (hardtanh_backward)") {
    HardTanh l;
    CHECK(l.lo == -1.0);
    CHECK(l.hi == 1.0);
    auto [y, dx] = eval1(l, {-2.0, -1.0, 0.5, 1.0, 3.0}, {1, 1, 1, 1, 1});
    CHECK(y == std::vector<double>{-1.0, -1.0, 0.5, 1.0, 1.0});
    CHECK(dx == std::vector<double>{0.0, 0.0, 1.0, 0.0, 0.0});
  }
  SUBCASE("ReLU6 as PyTorch's nn.ReLU6 = HardTanh{0, 6}") {
    auto [y, dx] = eval1(HardTanh{0, 6}, {-1.0, 0.0, 3.0, 6.0, 7.0}, {1, 1, 1, 1, 1});
    CHECK(y == std::vector<double>{0.0, 0.0, 3.0, 6.0, 6.0});
    CHECK(dx == std::vector<double>{0.0, 0.0, 1.0, 0.0, 0.0});
  }
  SUBCASE("ReLU6 = Clamp{0, 6}: derivative 1 on the closed interval (torch.clamp)") {
    auto [y, dx] = eval1(Clamp{0, 6}, {-1.0, 0.0, 3.0, 6.0, 7.0}, {2, 2, 2, 2, 2});
    CHECK(y == std::vector<double>{0.0, 0.0, 3.0, 6.0, 6.0});
    CHECK(dx == std::vector<double>{0.0, 2.0, 2.0, 2.0, 0.0});
  }
  SUBCASE("infinite bounds") {
    const double inf = std::numeric_limits<double>::infinity();
    auto [y, dx] = eval1(Clamp{-inf, 2.0}, {-1e30, 1.5, 5.0}, {1, 1, 1});
    CHECK(y == std::vector<double>{-1e30, 1.5, 2.0});
    CHECK(dx == std::vector<double>{1.0, 1.0, 0.0});
    auto [y2, dx2] = eval1(Clamp{}, {-1e300, 1e300}, {1, 1});  // default: no bounds at all
    CHECK(y2 == std::vector<double>{-1e300, 1e300});
    CHECK(dx2 == std::vector<double>{1.0, 1.0});
    auto [y3, dx3] = eval1(HardTanh{0.0, inf}, {-3.0, 0.0, 4.0}, {1, 1, 1});  // ReLU in both passes
    CHECK(y3 == std::vector<double>{0.0, 0.0, 4.0});
    CHECK(dx3 == std::vector<double>{0.0, 0.0, 1.0});
  }
  SUBCASE("float kernels") {
    const std::vector<float> x{-3.0f, 0.25f, 7.0f};
    std::vector<float> y(3);
    layer_traits<Clamp>::forward(Clamp{-1, 6}, forward_args<float>{shape(3), shape(3), 1, x.data(), y.data(), nullptr, nullptr});
    CHECK(y == std::vector<float>{-1.0f, 0.25f, 6.0f});
  }
  CHECK_THROWS_WITH_AS(layer_traits<Clamp>::output_shape(Clamp{2, 1}, shape(3)), doctest::Contains("Clamp: bounds [2, 1]"),
                       value_error);
  CHECK_THROWS_AS(layer_traits<HardTanh>::output_shape(HardTanh{std::nan(""), 1}, shape(3)), value_error);
  CHECK_NOTHROW(layer_traits<HardTanh>::output_shape(HardTanh{1, 1}, shape(3)));
}

TEST_CASE("Softmax: hand-computed values, rows sum to 1, stable for large logits") {
  auto [y, dx] = eval1(Softmax{}, {0.0, std::log(2.0), std::log(3.0)}, {1.0, 0.0, 0.0});
  CHECK(y[0] == doctest::Approx(1.0 / 6));
  CHECK(y[1] == doctest::Approx(2.0 / 6));
  CHECK(y[2] == doctest::Approx(3.0 / 6));
  // dx = y * (dy - y.dy): dy = e_0 gives y0 (1 - y0), -y0 y1, -y0 y2
  CHECK(dx[0] == doctest::Approx(1.0 / 6 * 5.0 / 6));
  CHECK(dx[1] == doctest::Approx(-1.0 / 6 * 2.0 / 6));
  CHECK(dx[2] == doctest::Approx(-1.0 / 6 * 3.0 / 6));

  SUBCASE("logits of 1e4 (float and double)") {
    auto [yl, dxl] = eval1(Softmax{}, {1e4, 1e4, -1e4, 1e4 - std::log(2.0)}, {0, 0, 0, 0});
    CHECK(yl[0] == doctest::Approx(0.4));
    CHECK(yl[1] == doctest::Approx(0.4));
    CHECK(yl[2] == 0.0);
    CHECK(yl[3] == doctest::Approx(0.2));
    const std::vector<float> xf{1e4f, -1e4f, 1e4f, 9999.0f};
    std::vector<float> yf(4);
    layer_traits<Softmax>::forward(Softmax{}, forward_args<float>{shape(4), shape(4), 1, xf.data(), yf.data(), nullptr, nullptr});
    for (float v : yf) CHECK(std::isfinite(v));
    const double e = std::exp(-1.0);
    CHECK(yf[0] == doctest::Approx(1.0 / (2 + e)).epsilon(1e-6));
    CHECK(yf[3] == doctest::Approx(e / (2 + e)).epsilon(1e-6));
    auto [ylow, dxlow] = eval1(Softmax{}, {-1e4, -1e4}, {1, 0});
    CHECK(ylow[0] == 0.5);
    CHECK(ylow[1] == 0.5);
  }
  SUBCASE("random batches: every row sums to 1, entries in (0, 1]") {
    std::mt19937_64 r(11);
    for (int t = 0; t < 10; ++t) {
      const std::size_t F = 1 + r() % 9, B = 1 + r() % 4;
      auto x = randn(F * B, r, 30.0);
      auto f = run_forward(Softmax{}, shape(F), B, x, false);
      for (std::size_t n = 0; n < B; ++n) {
        double s = 0;
        for (std::size_t i = 0; i < F; ++i) {
          CHECK(f.y[n * F + i] >= 0.0);
          CHECK(f.y[n * F + i] <= 1.0);
          s += f.y[n * F + i];
        }
        CHECK(s == doctest::Approx(1.0).epsilon(1e-12));
      }
    }
  }
  static_assert(!layer_traits<Softmax>::infer(shape(3, 2, 2)).ok());
  CHECK_THROWS_WITH_AS(layer_traits<Softmax>::output_shape(Softmax{}, shape(3, 2, 2)), doctest::Contains("rank-1"), shape_error);
}

TEST_CASE("Dropout and Identity are the identity (forward and backward)") {
  static_assert(layer_traits<Dropout>::inference_only);
  static_assert(!layer_traits<Identity>::inference_only);
  static_assert(!layer_traits<ReLU>::inference_only);
  CHECK(Dropout{}.p == 0.5);
  std::mt19937_64 r(3);
  const auto x = randn(2 * 12, r);
  for (auto [y, dx] : {eval1(Dropout{0.3}, x, x), eval1(Identity{}, x, x)}) {
    CHECK(y == x);
    CHECK(dx == x);
  }
  using A = Sequential<Input<3, 2, 2>, Flatten, Dense<5>, ReLU, Dense<4>>;
  using B = Sequential<Input<3, 2, 2>, Dropout, Flatten, Dense<5>, Identity, Dropout, ReLU, Dense<4>, Dropout>;
  A a;
  initialize(a, 7);
  B b;
  b.layer<2>() = a.layer<1>();
  b.layer<6>() = a.layer<3>();
  xt::xarray<float> xin = xt::xarray<float>::from_shape({5, 3, 2, 2});
  for (auto& v : xin) v = float(randn(1, r)[0]);
  check_bitwise(forward(a, xin), forward(b, xin));
  CHECK_THROWS_WITH_AS(layer_traits<Dropout>::output_shape(Dropout{1.0}, shape(2)), doctest::Contains("0 <= p < 1"),
                       value_error);
  CHECK_THROWS_AS(layer_traits<Dropout>::output_shape(Dropout{-0.1}, shape(2)), value_error);
}

TEST_CASE("backward of the element-wise activations and Softmax matches finite differences") {
  std::mt19937_64 r(2024);
  for (int t = 0; t < 12; ++t) {
    const shape in = random_shape(r);
    const std::size_t batch = 1 + r() % 3;
    const auto x0 = randn(batch * in.size(), r, 2.0);
    CAPTURE(t);
    check_backward(LeakyReLU{0.07}, in, batch, away_from(x0, {0.0}), r);
    check_backward(LeakyReLU{-0.5}, in, batch, away_from(x0, {0.0}), r);
    check_backward(HardTanh{}, in, batch, away_from(x0, {-1.0, 1.0}), r);
    check_backward(HardTanh{-0.3, 2.0}, in, batch, away_from(x0, {-0.3, 2.0}), r);
    check_backward(Clamp{0.0, 6.0}, in, batch, away_from(x0, {0.0, 6.0}), r);
    check_backward(Clamp{-std::numeric_limits<double>::infinity(), 0.5}, in, batch, away_from(x0, {0.5}), r);
    check_backward(Dropout{0.2}, in, batch, x0, r);
    check_backward(Identity{}, in, batch, x0, r);
    const shape flat(in.size());
    check_backward(Softmax{}, flat, batch, x0, r);
  }
}

TEST_CASE("static and dynamic networks with the activations agree bitwise; from_dynamic round-trips") {
  using Net = Sequential<Input<2, 3, 3>, LeakyReLU, Dropout, Flatten, Dense<8>, HardTanh, Dense<7>, Clamp, Identity,
                         Dense<5>, Softmax>;
  Net net;
  initialize(net, 5);
  net.layer<0>().alpha = 0.2;
  net.layer<1>().p = 0.25;
  net.layer<4>() = HardTanh{-0.5, 0.75};
  net.layer<6>() = Clamp{0.0, 0.3};  // ReLU6-like, small enough to clamp
  std::mt19937_64 r(9);
  xt::xarray<float> x = xt::xarray<float>::from_shape({6, 2, 3, 3});
  for (auto& v : x) v = float(randn(1, r, 2.0)[0]);
  auto d = to_dynamic(net);
  CHECK(d.layer_name(0) == "LeakyReLU");
  CHECK(d.layer_name(4) == "HardTanh");
  CHECK(d.layer_name(6) == "Clamp");
  CHECK(d.layer_name(9) == "Softmax");
  const auto y = forward(net, x);
  check_bitwise(y, forward(d, x));
  check_bitwise(y, forward(execution::par, d, x));
  auto back = from_dynamic<Net>(d);
  CHECK(back.layer<0>().alpha == 0.2);
  CHECK(back.layer<1>().p == 0.25);
  CHECK(back.layer<4>().lo == -0.5);
  CHECK(back.layer<6>().hi == 0.3);
  check_bitwise(y, forward(back, x));
  // Clamp really clamps something in this network
  trace<float> tr;
  forward_trace(net, 6, x.data(), tr);
  auto a7 = tr.activation(7);
  CHECK(std::count(a7.begin(), a7.end(), 0.3f) > 0);
  // the same layer kinds in another order are rejected, naming the layer
  using Other = Sequential<Input<2, 3, 3>, HardTanh, Dropout, Flatten, Dense<8>, HardTanh, Dense<7>, Clamp, Identity,
                           Dense<5>, Softmax>;
  CHECK_THROWS_WITH_AS(from_dynamic<Other>(d), doctest::Contains("layer 0 (HardTanh): the network has a LeakyReLU"),
                       shape_error);
  // a dynamic network checks hyper-parameters when a layer is added (DynamicNetwork prefixes the
  // layer index to shape errors only; the message names the layer type)
  DynamicNetwork dn(shape(4));
  CHECK_THROWS_WITH_AS(dn.add(Clamp{3, 1}), doctest::Contains("Clamp: bounds [3, 1]"), value_error);
  CHECK(dn.size() == 0);
}
