// The L-inf attacks of NNSlicer's detection study (train/attacks.hpp): FGSM, BIM, PGD.
// Bounds, the FGSM step against finite differences of the loss, loss increase, determinism
// (seq == par, seeds), errors.
#include <doctest/doctest.h>

#include <nnlens/nnlens.hpp>
#include <nnlens/train/attacks.hpp>

#include <cmath>
#include <random>
#include <vector>

using namespace nnlens;

namespace {

using Net = Sequential<Input<6>, Dense<8, double>, ReLU, Dense<3, double>>;

Net small_net() {
  Net net;
  initialize(net, 3);
  return net;
}

double loss(const Net& net, const std::vector<double>& x, int label) {
  xt::xarray<double> X = xt::adapt(x, std::vector<std::size_t>{1, x.size()});
  const auto y = forward(net, X);
  double m = y(0, 0);
  for (std::size_t k = 1; k < 3; ++k) m = std::max(m, y(0, k));
  double s = 0;
  for (std::size_t k = 0; k < 3; ++k) s += std::exp(y(0, k) - m);
  return -(y(0, label) - m - std::log(s));
}

xt::xarray<double> random_inputs(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.1, 0.9);
  xt::xarray<double> X = xt::xarray<double>::from_shape({n, 6});
  for (auto& v : X) v = u(rng);
  return X;
}

}  // namespace

TEST_CASE("attacks: FGSM moves every input by eps along the sign of the loss gradient") {
  const Net net = small_net();
  const auto X = random_inputs(20, 5);
  std::vector<int> y(20);
  for (std::size_t i = 0; i < 20; ++i) y[i] = int(i % 3);
  const double eps = 0.05;
  const auto A = fgsm(net, X, y, eps);
  REQUIRE(A.shape() == X.shape());
  std::size_t agree = 0, total = 0;
  for (std::size_t i = 0; i < 20; ++i) {
    std::vector<double> x(X.data() + i * 6, X.data() + (i + 1) * 6);
    for (std::size_t j = 0; j < 6; ++j) {
      const double h = 1e-6;
      auto xp = x, xm = x;
      xp[j] += h, xm[j] -= h;
      const double g = (loss(net, xp, y[i]) - loss(net, xm, y[i])) / (2 * h);
      const double step = A(i, j) - X(i, j);
      if (std::abs(g) > 1e-7) {
        ++total;
        agree += std::abs(step - (g > 0 ? eps : -eps)) < 1e-12;  // inputs in [0.1, 0.9]: no clipping
      }
    }
  }
  CHECK(total > 60);
  CHECK(agree == total);
}

TEST_CASE("attacks: BIM and PGD stay in the eps-ball and [0, 1], raise the loss, and are deterministic") {
  const Net net = small_net();
  const auto X = random_inputs(40, 7);
  std::vector<int> y(40);
  for (std::size_t i = 0; i < 40; ++i) y[i] = int((i * 7) % 3);
  linf_attack_options o;
  o.eps = 0.1;
  o.steps = 10;
  o.alpha = 0.02;
  o.chunk = 7;  // several chunks
  const auto B = bim(net, X, y, o);
  o.random_start = true;
  o.seed = 11;
  const auto P = pgd(net, X, y, o);
  const auto Ppar = pgd(execution::par, net, X, y, o);
  CHECK(P == Ppar);
  const auto P2 = pgd(net, X, y, o);
  CHECK(P == P2);
  o.seed = 12;
  CHECK(!(pgd(net, X, y, o) == P));
  double gain_b = 0, gain_p = 0;
  for (std::size_t i = 0; i < 40; ++i) {
    std::vector<double> x(X.data() + i * 6, X.data() + (i + 1) * 6), b(B.data() + i * 6, B.data() + (i + 1) * 6),
        p(P.data() + i * 6, P.data() + (i + 1) * 6);
    for (std::size_t j = 0; j < 6; ++j) {
      CHECK(std::abs(b[j] - x[j]) <= 0.1 + 1e-12);
      CHECK(std::abs(p[j] - x[j]) <= 0.1 + 1e-12);
      CHECK(b[j] >= 0.0);
      CHECK(b[j] <= 1.0);
      CHECK(p[j] >= 0.0);
      CHECK(p[j] <= 1.0);
    }
    gain_b += loss(net, b, y[i]) - loss(net, x, y[i]);
    gain_p += loss(net, p, y[i]) - loss(net, x, y[i]);
  }
  CHECK(gain_b > 0);
  CHECK(gain_p > 0);
}

TEST_CASE("attacks: bad labels and options are errors") {
  const Net net = small_net();
  const auto X = random_inputs(3, 1);
  CHECK_THROWS_AS(fgsm(net, X, std::vector<int>{0, 1}, 0.1), data_error);
  CHECK_THROWS_AS(fgsm(net, X, std::vector<int>{0, 1, 7}, 0.1), data_error);
  CHECK_THROWS_AS(fgsm(net, X, std::vector<int>{0, 1, 2}, -0.1), value_error);
}
