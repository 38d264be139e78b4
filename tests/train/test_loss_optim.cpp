// Training building blocks: cross-entropy (hand values, finite differences), SGD / Adam (hand
// computed PyTorch updates), parameter masks, the progress bar.
#include <doctest/doctest.h>

#include <nnlens/core/progress.hpp>
#include <nnlens/nnlens.hpp>
#include <nnlens/train/loss.hpp>
#include <nnlens/train/mask.hpp>
#include <nnlens/train/optimizer.hpp>

#include <cmath>
#include <random>
#include <sstream>
#include <vector>

using namespace nnlens;
using namespace nnlens::train;

namespace {
using MLPd = Sequential<Input<4>, Dense<5, double>, ReLU, Dense<3, double>>;
using MLPf = Sequential<Input<4>, Dense<5>, ReLU, Dense<3>>;
using One = Sequential<Input<1>, Dense<1, double>>;  // W: 1 element, b: 1 element

One one_param(double w, double b) {
  One n;
  n.layer<0>().W = {{w}};
  n.layer<0>().b = {b};
  return n;
}
}  // namespace

TEST_CASE("cross-entropy: hand-computed value and gradient") {
  const std::vector<double> z = {1, 2, 3, 0, 0, 0};
  const std::vector<int> y = {2, 0};
  std::vector<double> d(6);
  const double loss = softmax_cross_entropy<double, int>(z, 3, y, d);
  // sample 0: lse = 3 + log(e^-2 + e^-1 + 1) = 3.40760596..., loss 0.40760596; sample 1: log 3
  CHECK(loss == doctest::Approx((0.4076059644443806 + std::log(3.0)) / 2).epsilon(1e-14));
  const double s0[3] = {0.09003057317038046, 0.24472847105479764, 0.6652409557748219};
  CHECK(d[0] == doctest::Approx(s0[0] / 2).epsilon(1e-14));
  CHECK(d[1] == doctest::Approx(s0[1] / 2).epsilon(1e-14));
  CHECK(d[2] == doctest::Approx((s0[2] - 1) / 2).epsilon(1e-14));
  CHECK(d[3] == doctest::Approx((1.0 / 3 - 1) / 2).epsilon(1e-14));
  CHECK(d[4] == doctest::Approx(1.0 / 6).epsilon(1e-14));
  // mean_over: the chunk of a larger mini-batch
  const double l4 = softmax_cross_entropy<double, int>(z, 3, y, d, 4);
  CHECK(l4 == doctest::Approx(loss / 2));
  CHECK(d[2] == doctest::Approx((s0[2] - 1) / 4).epsilon(1e-14));
}

TEST_CASE("cross-entropy is numerically stable for huge logits") {
  const std::vector<float> z = {1000.f, 0.f, -1000.f, 1000.f};
  const std::vector<std::uint8_t> y = {1, 0};
  std::vector<float> d(4);
  const float l = softmax_cross_entropy<float, std::uint8_t>(z, 2, y, d);
  CHECK(std::isfinite(l));
  CHECK(l == doctest::Approx((1000.0 + 2000.0) / 2));
  CHECK(d[0] == doctest::Approx(0.5f));
  CHECK(d[1] == doctest::Approx(-0.5f));
  CHECK(d[2] == doctest::Approx(-0.5f));
  CHECK(d[3] == doctest::Approx(0.5f));
}

TEST_CASE("cross-entropy gradient matches finite differences") {
  std::mt19937_64 r(7);
  std::normal_distribution<double> nd(0, 3);
  const std::size_t n = 5, k = 7;
  std::vector<double> z(n * k), d(n * k);
  for (auto& v : z) v = nd(r);
  std::vector<long> y = {0, 6, 3, 3, 1};
  softmax_cross_entropy<double, long>(z, k, y, d);
  const double h = 1e-6;
  for (std::size_t i = 0; i < z.size(); ++i) {
    auto zp = z, zm = z;
    zp[i] += h;
    zm[i] -= h;
    const double fd = (softmax_cross_entropy<double, long>(zp, k, y) - softmax_cross_entropy<double, long>(zm, k, y)) /
                      (2 * h);
    CHECK(d[i] == doctest::Approx(fd).epsilon(1e-7));
  }
}

TEST_CASE("cross-entropy and accuracy reject bad labels") {
  const std::vector<double> z = {1, 2, 3, 0, 0, 0};
  CHECK_THROWS_WITH_AS((softmax_cross_entropy<double, int>(z, 3, std::vector<int>{2, 3})),
                       doctest::Contains("label of sample 1 is 3, expected 0..2"), data_error);
  CHECK_THROWS_WITH_AS((softmax_cross_entropy<double, int>(z, 3, std::vector<int>{-1, 0})),
                       doctest::Contains("label of sample 0 is -1"), data_error);
  CHECK_THROWS_AS((softmax_cross_entropy<double, int>(z, 3, std::vector<int>{1})), data_error);
  CHECK((count_correct<double, int>(z, 3, std::vector<int>{2, 0})) == 2);  // tie -> first index
  CHECK((count_correct<double, int>(z, 3, std::vector<int>{1, 1})) == 0);
  xt::xarray<double> logits = {{0.1, 0.9}, {0.8, 0.2}, {0.3, 0.7}, {0.6, 0.4}};
  CHECK(accuracy(logits, std::vector<std::uint8_t>{1, 0, 0, 0}) == doctest::Approx(0.75));
  CHECK_THROWS_AS(accuracy(logits, std::vector<std::uint8_t>{}), data_error);
  CHECK_THROWS_AS(accuracy(logits, std::vector<std::uint8_t>{1, 0, 2, 0}), data_error);
}

TEST_CASE("SGD matches hand-computed PyTorch steps") {
  struct Case {
    sgd_options o;
    double p1, p2;
  };
  // p = 1, grad = 0.5 twice; values from torch.optim.SGD's formulas evaluated by hand.
  const Case cases[] = {
      {{.lr = 0.1, .momentum = 0.9, .dampening = 0, .weight_decay = 0.01}, 0.949, 0.852151},
      {{.lr = 0.1, .momentum = 0.9, .dampening = 0, .weight_decay = 0.01, .nesterov = true}, 0.9031, 0.76507411},
      {{.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01}, 0.949, 0.8572459},
      {{.lr = 0.1}, 0.95, 0.9},
  };
  for (const auto& c : cases) {
    One net = one_param(1.0, 1.0), g = one_param(0.5, 0.5);
    sgd opt(net, c.o);
    opt.step(net, g);
    CHECK(net.layer<0>().W(0, 0) == doctest::Approx(c.p1).epsilon(1e-14));
    opt.step(net, g);
    CHECK(net.layer<0>().W(0, 0) == doctest::Approx(c.p2).epsilon(1e-14));
    CHECK(net.layer<0>().b(0) == doctest::Approx(c.p2).epsilon(1e-14));
    CHECK(opt.steps() == 2);
  }
  One net = one_param(1, 1);
  CHECK_THROWS_AS(sgd(net, {.lr = 0.1, .momentum = 0, .nesterov = true}), value_error);
  CHECK_THROWS_AS(sgd(net, {.lr = -1}), value_error);
}

TEST_CASE("Adam matches hand-computed PyTorch steps") {
  struct Case {
    adam_options o;
    double p0;
    std::vector<double> g, p, m, v;
  };
  const Case cases[] = {
      {{.lr = 0.1}, 1.0, {0.5, -0.2, 0.3}, {0.900000002, 0.8654394181165108, 0.8109953836811554},
       {0.05, 0.025, 0.0525}, {0.00025, 0.00028975, 0.00037946025}},
      {{.lr = 0.01, .weight_decay = 0.1}, 1.0, {0.5, -0.2, 0.3}, {0.9900000001666667, 0.984628324547652, 0.9776534201003168},
       {0.06, 0.043900000001666654, 0.0793562832469765}, {0.00036, 0.00036984099999663365, 0.0005282437878445115}},
      {{.lr = 0.001, .beta1 = 0.5, .beta2 = 0.9, .eps = 1e-3}, -2.0, {1e-3, 1e-3}, {-2.0005, -2.001}, {5e-4, 7.5e-4},
       {1e-7, 1.9e-7}},
  };
  for (const auto& c : cases) {
    One net = one_param(c.p0, c.p0);
    adam opt(net, c.o);
    for (std::size_t t = 0; t < c.g.size(); ++t) {
      One g = one_param(c.g[t], c.g[t]);
      opt.step(net, g);
      CHECK(net.layer<0>().W(0, 0) == doctest::Approx(c.p[t]).epsilon(1e-13));
      CHECK(net.layer<0>().b(0) == doctest::Approx(c.p[t]).epsilon(1e-13));
      CHECK(opt.first_moment().layer<0>().W(0, 0) == doctest::Approx(c.m[t]).epsilon(1e-12));
      CHECK(opt.second_moment().layer<0>().W(0, 0) == doctest::Approx(c.v[t]).epsilon(1e-12));
    }
  }
  One net = one_param(1, 1);
  CHECK_THROWS_AS(adam(net, {.beta1 = 1.0}), value_error);
  CHECK_THROWS_AS(adam(net, {.beta2 = -0.1}), value_error);
}

TEST_CASE("optimisers reject a gradient of another shape") {
  MLPd net;
  initialize(net, 1);
  auto dn = to_dynamic(net);
  auto g = zeros_like(dn);
  adam opt(dn);
  g.layers().pop_back();
  g.validate();
  CHECK_THROWS_WITH_AS(opt.step(dn, g), doctest::Contains("adam: gradient: 2 parameter tensors, the network has 4"), shape_error);
}

TEST_CASE("parameter masks: frozen parameters are bit-identical after training steps") {
  MLPf net;
  initialize(net, 3);
  const MLPf before = net;
  std::mt19937_64 r(11);
  std::normal_distribution<float> nd(0, 1);
  auto random_grad = [&] {
    MLPf g = zeros_like(net);
    for (auto s : parameter_spans(g))
      for (auto& v : s) v = nd(r);
    return g;
  };
  SUBCASE("freeze a whole layer, with SGD momentum and weight decay") {
    const parameter_mask m = freeze(layer_mask(net, {0}));
    CHECK(m.frozen_count() == 4 * 5 + 5);
    sgd opt(net, {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.1});
    for (int i = 0; i < 5; ++i) {
      MLPf g = random_grad();
      m.apply(g);
      CHECK(g.layer<0>().W(1, 1) == 0.0f);
      opt.step(net, g, &m);
    }
    CHECK(net.layer<0>().W == before.layer<0>().W);
    CHECK(net.layer<0>().b == before.layer<0>().b);
    for (std::size_t i = 0; i < net.layer<2>().W.size(); ++i) CHECK(net.layer<2>().W.data()[i] != before.layer<2>().W.data()[i]);
  }
  SUBCASE("train only chosen elements, with Adam and weight decay") {
    MLPf bits = mask_like(net, 0);
    bits.layer<2>().W(0, 0) = 1;
    bits.layer<2>().W(3, 2) = 1;
    bits.layer<2>().b(1) = 1;
    const parameter_mask m = train_only(bits);
    CHECK(m.trainable_count() == 3);
    adam opt(net, {.lr = 0.01, .weight_decay = 0.5});
    for (int i = 0; i < 5; ++i) opt.step(net, random_grad(), &m);  // unmasked gradient: step must skip
    auto a = parameter_spans(std::as_const(net));
    auto b = parameter_spans(before);
    std::size_t changed = 0;
    for (std::size_t k = 0; k < a.size(); ++k)
      for (std::size_t i = 0; i < a[k].size(); ++i) {
        if (m.trainable(k, i))
          CHECK(a[k][i] != b[k][i]);
        else
          CHECK(std::memcmp(&a[k][i], &b[k][i], sizeof(float)) == 0);
        changed += a[k][i] != b[k][i];
      }
    CHECK(changed == 3);
    CHECK(opt.second_moment().layer<0>().W(0, 0) == 0.0f);  // frozen: state untouched
  }
  SUBCASE("bit ranges and inversion") {
    std::vector<std::vector<bool>> bits = {std::vector<bool>(20, true), std::vector<bool>(5, false),
                                           std::vector<bool>(15, false), std::vector<bool>(3, true)};
    const parameter_mask m = freeze(bits);
    CHECK(m.frozen_count() == 23);
    CHECK(m.inverted().trainable_count() == 23);
    CHECK_NOTHROW(m.check(net));
    bits.pop_back();
    CHECK_THROWS_WITH_AS(train_only(bits).check(net), doctest::Contains("3 tensors, the network has 4"), shape_error);
    CHECK_THROWS_AS(layer_mask(net, {7}), value_error);
  }
}

TEST_CASE("progress bar: content, rate limit, plain lines") {
  double now = 0;
  std::ostringstream os;
  SUBCASE("terminal: redrawn in place at most every min_interval") {
    {
      progress_bar bar("epoch 1/2", 100, {.os = &os, .tty = 1, .min_interval = 0.1, .width = 10, .clock = [&] { return now; }});
      int calls = 0;
      for (int i = 1; i <= 100; ++i) {
        now = i * 0.01;  // 1 s in total: at most ~10 redraws
        bar.update(std::size_t(i), [&] {
          ++calls;
          return std::string("loss 0.5");
        });
      }
      CHECK(bar.redraws() <= 11);
      CHECK(bar.redraws() >= 9);
      CHECK(calls == int(bar.redraws()));  // fields are formatted only when drawn
      bar.finish("loss 0.25");
    }
    const std::string s = os.str();
    CHECK(s.find('\r') != std::string::npos);
    CHECK(s.back() == '\n');
    CHECK(s.find("epoch 1/2 [##########] 100/100  loss 0.25  1.0s") != std::string::npos);
  }
  SUBCASE("not a terminal: plain lines") {
    progress_bar bar("run", 4, {.os = &os, .tty = 0, .plain_interval = 10, .width = 4, .clock = [&] { return now; }});
    now = 1;
    bar.update(1, "x");  // too early for a plain line
    CHECK(os.str().empty());
    now = 20;
    bar.update(2, "x");
    CHECK(os.str() == "run [##..] 2/4  x  20.0s  ETA 20.0s\n");
    now = 25;
    bar.finish();
    CHECK(os.str().find("\r") == std::string::npos);
    CHECK(os.str().substr(os.str().find('\n') + 1) == "run [####] 4/4  25.0s\n");
  }
  CHECK(format_duration(0.25) == "250ms");
  CHECK(format_duration(125) == "2m05s");
  CHECK(format_duration(3725) == "1h02m");
}
