// DFlare (difftest/dflare.hpp): black boxes, operator selection, fitness and novelty, the search.
#include <doctest/doctest.h>

#include <nnlens/difftest/black_box.hpp>
#include <nnlens/nnlens.hpp>

#include <cmath>
#include <numeric>
#include <random>
#include <vector>

using namespace nnlens;
using namespace nnlens::difftest;

namespace {
using MLP = Sequential<Input<5>, Dense<7>, ReLU, Dense<3>>;
}  // namespace

TEST_CASE("black_box: wrap(net) is the softmax of forward, for Sequential and DynamicNetwork") {
  MLP net;
  initialize(net, 7);
  auto dnet = to_dynamic(net);
  std::vector<float> x(2 * 5);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(i) / 10.f - 0.3f;
  xt::xarray<float> xa = xt::adapt(x, std::vector<std::size_t>{2, 5});
  auto logits = forward(net, xa);
  for (const black_box& b : {wrap(net, "s"), wrap(dnet, "d"), wrap(MLP(net), "owned")}) {
    CHECK(b.input_size == 5);
    CHECK(b.classes == 3);
    std::vector<float> p(6);
    b(x, 2, p);
    for (std::size_t r = 0; r < 2; ++r) {
      double s = 0;
      for (std::size_t c = 0; c < 3; ++c) s += std::exp(double(logits(r, c)));
      for (std::size_t c = 0; c < 3; ++c) CHECK(p[r * 3 + c] == doctest::Approx(std::exp(double(logits(r, c))) / s));
    }
    std::vector<float> bad(5);
    CHECK_THROWS_AS(b(x, 2, bad), shape_error);
  }
  CHECK(wrap(net, "named").name == "named");
}

TEST_CASE("black_box: normalization divides inputs before the query") {
  MLP net;
  initialize(net, 7);
  std::vector<float> raw(5), scaled(5);
  for (std::size_t i = 0; i < 5; ++i) raw[i] = 255.f * float(i) / 5.f, scaled[i] = raw[i] / 255.f;
  std::vector<float> p1(3), p2(3);
  wrap(net, "n", normalization::divide_by(255))(raw, 1, p1);
  wrap(net)(scaled, 1, p2);
  for (std::size_t c = 0; c < 3; ++c) CHECK(p1[c] == doctest::Approx(p2[c]));
  CHECK_THROWS_AS(wrap(net, "bad", normalization{{}, {1.f, 2.f}}), shape_error);
}

TEST_CASE("black_box: wrap(callable) for batched and per-sample callables") {
  auto per = wrap([](std::span<const float> x, std::span<float> p) { p[0] = x[0]; p[1] = 1 - x[0]; }, 2, 2, "per");
  auto bat = wrap([](std::span<const float> x, std::size_t n, std::span<float> p) {
    for (std::size_t i = 0; i < n; ++i) p[2 * i] = x[2 * i], p[2 * i + 1] = 1 - x[2 * i];
  }, 2, 2, "batched");
  std::vector<float> x = {0.25f, 0.f, 0.75f, 0.f}, p(4), q(4);
  per(x, 2, p);
  bat(x, 2, q);
  CHECK(p == std::vector<float>{0.25f, 0.75f, 0.75f, 0.25f});
  CHECK(p == q);
  CHECK_THROWS_AS(wrap([](std::span<const float>, std::span<float>) {}, 0, 2), shape_error);
}
