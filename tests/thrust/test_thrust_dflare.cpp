// DFlare on the thrust backend (nnlens/thrust/black_box.hpp, difftest/lockstep.hpp): a network
// wrapped as a black box on the thrust device answers as the host wrap does (float, |diff| <= 1e-5),
// and dflare(execution::thrust, ...) advances the seeds in lockstep, one batch per round.
// Tolerance: the device kernels sum in input-index order, the host GEMM in its own blocked order,
// so probabilities differ in the last bits.  DFlare compares them (top-1, D against delta,
// novelty against tau), so a bit can flip one acceptance and change a seed's path; the summaries of
// device and host black boxes are compared within a tolerance, and exactly with host black boxes.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include <nnlens/difftest/black_box.hpp>
#include <nnlens/difftest/dflare.hpp>
#include <nnlens/layers/all.hpp>
#include <nnlens/network/dynamic_network.hpp>
#include <nnlens/network/parameters.hpp>
#include <nnlens/thrust/black_box.hpp>

#include "../difftest/dflare_checks.hpp"

using namespace nnlens;
using namespace nnlens::difftest;

namespace {

using nnlens_test::check_identical;
using nnlens_test::pixels;

using LeNet5 = Sequential<Input<1, 28, 28>, Conv2D<6, 5, 1, 2>, ReLU, MaxPool2D<2>, Conv2D<16, 5>, ReLU, MaxPool2D<2>,
                          Flatten, Dense<120>, ReLU, Dense<84>, ReLU, Dense<10>>;
using Small = Sequential<Input<1, 8, 8>, Conv2D<4, 3>, ReLU, MaxPool2D<2>, Flatten, Dense<16>, ReLU, Dense<3>>;
using RGB = Sequential<Input<3, 6, 6>, Conv2D<20, 3, 1, 1>, ReLU, Flatten, Dense<5>>;  // wide conv: the GEMM kernel

double max_diff(const black_box& a, const black_box& b, std::span<const float> x, std::size_t n) {
  std::vector<float> p(n * a.classes), q(n * b.classes);
  a(x, n, p);
  b(x, n, q);
  double err = 0;
  for (std::size_t i = 0; i < p.size(); ++i) err = std::max(err, double(std::abs(p[i] - q[i])));
  return err;
}

/// g = f with the logits of classes 0 and 1 swapped (a pair that differs by construction).
template <class Net>
Net swap_01(Net g) {
  auto& last = g.template layer<std::tuple_size_v<typename Net::layer_types> - 1>();
  for (std::size_t i = 0; i < last.W.shape()[0]; ++i) std::swap(last.W(i, 0), last.W(i, 1));
  std::swap(last.b(0), last.b(1));
  return g;
}

/// Shifts the biases of classes 0 and 1 so that about 1 - `share` of the seeds have f's top-1 in
/// {0, 1} and the others fall short by a logit margin of at least `extra` (random weights put most
/// seeds in one class).  With g = swap_01(f), f and g then differ exactly where f's top-1 is 0 or 1.
template <class Net>
void near_classes_01(Net& f, std::span<const float> seeds, std::size_t n, const normalization& norm, double share,
                     double extra) {
  const black_box b = wrap(f, "f", norm);
  const std::size_t c = b.classes;
  std::vector<float> p(n * c);
  b(seeds, n, p);
  std::vector<double> margin(n);  // logit(top of 0, 1) - logit(top of the others) = log(p01 / p_other)
  for (std::size_t i = 0; i < n; ++i) {
    const float* q = p.data() + i * c;
    margin[i] = std::log(double(std::max(q[0], q[1])) / double(*std::max_element(q + 2, q + c)));
  }
  std::sort(margin.begin(), margin.end());
  const float shift = float(-margin[std::min(n - 1, std::size_t(share * double(n)))] - extra);
  auto& last = f.template layer<std::tuple_size_v<typename Net::layer_types> - 1>();
  last.b(0) += shift;
  last.b(1) += shift;
}


}  // namespace

TEST_CASE("thrust black box: wrap(execution::thrust, net) == the host wrap within 1e-5") {
  LeNet5 net;
  initialize(net, 3);
  const auto norm = normalization::divide_by(255);
  const auto x = pixels(37 * 784, 1);
  const black_box host = wrap(net, "lenet5", norm);
  const black_box dev = wrap(execution::thrust, net, "lenet5", norm);
  CHECK(dev.input_size == 784);
  CHECK(dev.classes == 10);
  CHECK(dev.name == "lenet5");
  const double e1 = max_diff(host, dev, x, 37);
  MESSAGE("LeNet-5, 37 images: max |thrust - host| probability = ", e1);
  CHECK(e1 <= 1e-5);
  // passes smaller than the batch; an owned (rvalue) network; a DynamicNetwork
  const black_box passes = wrap(thrust_policy{.batch = 5}, LeNet5(net), "owned", norm);
  CHECK(max_diff(host, passes, x, 37) <= 1e-5);
  const auto dyn = to_dynamic(net);
  CHECK(max_diff(host, wrap(execution::thrust, dyn, "dyn", norm), x, 37) <= 1e-5);
  CHECK(max_diff(host, dev, std::span<const float>(x).first(784), 1) <= 1e-5);
  std::vector<float> none;
  dev(none, 0, none);  // an empty batch
  // per-channel normalisation on 3 channels, the wide (GEMM) convolution kernel
  RGB rgb;
  initialize(rgb, 5);
  const normalization cifar{{125.3f, 122.9f, 113.9f}, {63.0f, 62.1f, 66.7f}};
  const auto xr = pixels(9 * 108, 2);
  CHECK(max_diff(wrap(rgb, "rgb", cifar), wrap(execution::thrust, rgb, "rgb", cifar), xr, 9) <= 1e-5);
  // the probabilities are probabilities
  std::vector<float> p(37 * 10);
  dev(x, 37, p);
  for (std::size_t r = 0; r < 37; ++r) {
    double s = 0;
    for (std::size_t c = 0; c < 10; ++c) s += p[r * 10 + c];
    CHECK(s == doctest::Approx(1.0).epsilon(1e-5));
  }
}

TEST_CASE("thrust black box: errors as the host wrap; safe from several threads") {
  Small net;
  initialize(net, 4);
  CHECK_THROWS_AS(wrap(execution::thrust, net, "bad", normalization{{}, {1.f, 2.f}}), shape_error);
  CHECK_THROWS_AS(wrap(execution::thrust, net, "zero", normalization{{}, {0.f}}), value_error);
  std::vector<float> p(3), bad(5);
  const auto x = pixels(64, 3);
  CHECK_THROWS_AS(wrap(execution::thrust, net)(x, 1, bad), shape_error);
  // a non-finite output: a huge bias overflows the logits
  Small inf = net;
  inf.layer<6>().b(0) = std::numeric_limits<float>::infinity();
  const auto bi = wrap(execution::thrust, inf, "inf");
  CHECK_THROWS_WITH_AS(bi(x, 1, p), doctest::Contains("'inf': output of sample 0 is not finite"), value_error);
  // a Softmax head runs on the device too (its sample_map): the black box returns its
  // distribution as is, as the host wrap does (no second softmax)
  using WithSoftmax = Sequential<Input<1, 8, 8>, Flatten, Dense<3>, Softmax>;
  WithSoftmax s;
  initialize(s, 1);
  const auto ds = to_dynamic(s);
  const auto xs2 = pixels(7 * 64, 9);
  CHECK(max_diff(wrap(ds, "softmax"), wrap(execution::thrust, ds, "softmax"), xs2, 7) <= 1e-6);
  // two threads querying one black box at once get what one thread gets
  const black_box dev = wrap(execution::thrust, net, "small", normalization::divide_by(255));
  const auto xs = pixels(50 * 64, 4);
  std::vector<float> ref(50 * 3);
  dev(xs, 50, ref);
  std::vector<std::vector<float>> got(2, std::vector<float>(50 * 3));
  std::vector<std::thread> ts;
  for (std::size_t t = 0; t < 2; ++t)
    ts.emplace_back([&, t] {
      for (int k = 0; k < 20; ++k) dev.predict(xs, 50, got[t]);
    });
  for (auto& t : ts) t.join();
  CHECK(got[0] == ref);
  CHECK(got[1] == ref);
}

TEST_CASE("thrust dflare: lockstep on the device finds every trigger of a constructed pair") {
  Small f;
  initialize(f, 9);
  const auto norm = normalization::divide_by(255);
  constexpr std::size_t n = 40;
  const auto seeds = pixels(n * 64, 6);
  near_classes_01(f, seeds, n, norm, 0.95, 0.03);
  const Small g = swap_01(f);
  const black_box hf = wrap(f, "f", norm), hg = wrap(g, "g", norm);
  const black_box df = wrap(execution::thrust, f, "f", norm), dg = wrap(execution::thrust, g, "g", norm);
  dflare_options o;
  o.image = {1, 8, 8};
  o.max_queries = 2000;
  o.max_seconds = 0;
  o.seed = 3;
  const auto seq = dflare(hf, hg, seeds, n, o);
  const auto dev = dflare(execution::thrust, df, dg, seeds, n, o);
  const auto s = seq.summary(), d = dev.summary();
  MESSAGE("host seq: ", s.found, "/", s.searched, " found, mean queries ", s.mean_queries, "; thrust lockstep: ", d.found,
          "/", d.searched, " found, mean queries ", d.mean_queries);
  REQUIRE(d.searched > 0);
  CHECK(d.success_rate == 1.0);
  CHECK(s.success_rate == 1.0);
  // The seed queries decide already_triggering: |thrust - host| ~ 1e-7 flips a top-1 only on a
  // near tie, which these seeds do not have.  A search can take another path when a rounding
  // difference flips an acceptance (D within delta of D(x_max), a novelty distance near tau):
  // count such seeds and bound the change of the mean.
  CHECK(d.already_triggering == s.already_triggering);
  std::size_t same = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const auto &a = seq.seeds[i], &b = dev.seeds[i];
    CHECK(a.status == b.status);
    if (b.found()) {
      CHECK(b.label_f != b.label_g);
      CHECK((b.label_f <= 1 && b.label_g <= 1));  // only classes 0 and 1 differ
    }
    same += a.queries == b.queries && a.input == b.input;
  }
  MESSAGE("seeds with the same path on host and device: ", same, "/", n);
  CHECK(same >= n * 3 / 4);
  CHECK(d.mean_queries == doctest::Approx(s.mean_queries).epsilon(0.25));
  // host black boxes through the thrust policy: the lockstep driver, the sequential result exactly
  check_identical(seq, dflare(execution::thrust, hf, hg, seeds, n, o));
}

TEST_CASE("thrust dflare: LeNet-5 on the device; f on the host and g on the device") {
  LeNet5 f;
  initialize(f, 11);
  const auto norm = normalization::divide_by(255);
  constexpr std::size_t n = 12;
  const auto seeds = pixels(n * 784, 8);
  near_classes_01(f, seeds, n, norm, 0.95, 0.01);
  const LeNet5 g = swap_01(f);
  dflare_options o;
  o.image = {1, 28, 28};
  o.max_queries = 300;
  o.max_seconds = 0;
  o.seed = 1;
  const black_box hf = wrap(f, "f", norm), hg = wrap(g, "g", norm);
  const black_box df = wrap(execution::thrust, f, "f", norm), dg = wrap(execution::thrust, g, "g", norm);
  const auto host = dflare(hf, hg, seeds, n, o);
  const auto dev = dflare(execution::thrust, df, dg, seeds, n, o);
  const auto s = host.summary(), d = dev.summary();
  MESSAGE("LeNet-5 pair: host ", s.found, "/", s.searched, " (", s.mean_queries, " queries), thrust ", d.found, "/",
          d.searched, " (", d.mean_queries, " queries)");
  CHECK(s.success_rate == 1.0);
  CHECK(d.success_rate == 1.0);
  CHECK(d.already_triggering == s.already_triggering);
  CHECK(d.mean_queries == doctest::Approx(s.mean_queries).epsilon(0.25));
  // The device kernels sum each output in a fixed order whatever the batch, so the device black
  // boxes answer a row alike alone and in a batch: lockstep == their sequential run, exactly.
  // (The host GEMM does not: from 3 rows on it sums in another order than for 1 or 2, so lockstep
  // with host wrap(net) matches the sequential run only up to rounding on such networks.)
  check_identical(dflare(df, dg, seeds, n, o), dev);
  // f on the host, g on the device (as with an int8 twin, which has no thrust kernels).  Here f(x)
  // and g(x) are no longer exact permutations of each other: D(x) is rounding noise (~1e-8)
  // instead of 0, so the paper's rule (ties pass) rejects about half the mutants and the walk is
  // slower; the run must work, not match.
  const auto mixed = dflare(execution::thrust, hf, dg, seeds, n, o);
  const auto m = mixed.summary();
  MESSAGE("host f + thrust g: ", m.found, "/", m.searched, " (", m.mean_queries, " queries)");
  CHECK(m.failed == 0);
  CHECK(m.already_triggering == s.already_triggering);
  CHECK(m.found > 0);
  for (const auto& r : mixed.seeds)
    if (r.found()) CHECK(r.label_f != r.label_g);
}
