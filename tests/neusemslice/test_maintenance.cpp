// NeuSemSlice's maintenance drivers (neusemslice/readapt.hpp, neusemslice/increment.hpp): spec
// docs/specs/neusemslice.md#7-test-oracles oracle 9 (frozen parameters bit-identical through training with momentum
// and weight decay), TPR = the parameter mask's trainable fraction, the replay and mask helpers,
// determinism.  Small synthetic data; runs in well under a second.
#include <doctest/doctest.h>

#include <nnlens/nnlens.hpp>
#include <nnlens/neusemslice/increment.hpp>
#include <nnlens/neusemslice/readapt.hpp>

#include <cstring>
#include <random>
#include <vector>

using namespace nnlens;

namespace {
using Mlp = Sequential<Input<8>, Dense<16>, ReLU, Dense<12>, ReLU, Dense<4>>;

/// n samples in [0, 1]^8; the label is the argmax of a fixed random linear map of x - 0.5.
std::pair<xt::xarray<float>, std::vector<std::uint8_t>> synthetic(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 r(seed);
  std::normal_distribution<double> nd(0, 1);
  std::uniform_real_distribution<double> u(0, 1);
  std::mt19937_64 rm(42);
  double A[4][8];
  for (auto& row : A)
    for (auto& a : row) a = nd(rm);
  xt::xarray<float> x = xt::xarray<float>::from_shape({n, 8});
  std::vector<std::uint8_t> y(n);
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = 0; j < 8; ++j) x(i, j) = float(u(r));
    double best = -1e300;
    for (std::uint8_t c = 0; c < 4; ++c) {
      double s = 0;
      for (std::size_t j = 0; j < 8; ++j) s += A[c][j] * (double(x(i, j)) - 0.5);
      if (s > best) best = s, y[i] = c;
    }
  }
  return {x, y};
}

Mlp trained_net() {
  Mlp net;
  initialize(net, 3);
  auto [x, y] = synthetic(400, 1);
  train::adam opt(net, {.lr = 1e-2});
  train::fit(net, opt, x, y, {.epochs = 10, .batch_size = 32, .seed = 2});
  return net;
}

/// A mask keeping about half of each hidden layer (a fixed pattern) and the given output classes.
neuron_mask half_mask(const Mlp& net, std::vector<std::size_t> out) {
  neuron_mask m = full_mask(net);
  for (std::size_t u = 0; u + 1 < m.keep.size(); ++u)
    for (std::size_t n = 0; n < m.keep[u].size(); ++n) m.keep[u][n] = (n * 7 + u) % 3 != 0;
  for (auto& v : m.keep.back()) v = 0;
  for (auto c : out) m.keep.back()[c] = 1;
  return m;
}

/// (frozen parameters that changed, trainable parameters that changed).
std::pair<std::size_t, std::size_t> moved(const Mlp& a, const Mlp& b, const train::parameter_mask& trainable) {
  const auto pa = parameter_spans(a), pb = parameter_spans(b);
  std::size_t frozen = 0, trained = 0;
  for (std::size_t k = 0; k < pa.size(); ++k)
    for (std::size_t i = 0; i < pa[k].size(); ++i) {
      const bool same = std::memcmp(&pa[k][i], &pb[k][i], sizeof(float)) == 0;
      if (!same) (trainable.trainable(k, i) ? trained : frozen) += 1;
    }
  return {frozen, trained};
}

const maintenance_training sgd_wd{.epochs = 3, .lr = 0.05, .batch = 16, .seed = 7, .optimizer = optimizer_kind::sgd,
                                  .momentum = 0.9, .weight_decay = 0.01};
const maintenance_training adam_wd{.epochs = 3, .lr = 1e-2, .batch = 16, .seed = 7, .optimizer = optimizer_kind::adam,
                                   .weight_decay = 0.01};
}  // namespace

TEST_CASE("readapt: only the critical neurons' parameters move (oracle 9), TPR = the mask's trainable fraction") {
  const Mlp net = trained_net();
  auto [x, y] = synthetic(300, 11);
  auto [xt_, yt] = synthetic(200, 12);
  const neuron_mask m = half_mask(net, {0, 1, 2, 3});
  const auto pm = neuron_parameter_mask(net, m);
  for (const auto& o : {sgd_wd, adam_wd}) {
    for (const auto& atk : {fgsm_attack(0.1, 100), pgd_attack(0.1, 5, 100)}) {
      CAPTURE(atk.name);
      const auto r = readapt(net, &m, x, y, xt_, yt, atk, o);
      const auto [frozen, trained] = moved(net, r.model, pm);
      CHECK(frozen == 0);
      CHECK(trained > pm.trainable_count() / 2);
      CHECK(r.report.trained_parameters == pm.trainable_count());
      CHECK(r.report.total_parameters == pm.size());
      CHECK(r.report.tpr == doctest::Approx(double(pm.trainable_count()) / double(pm.size())));
      CHECK(r.report.adversarial == 100);
      for (double a : {r.report.ra, r.report.raa, r.report.adv_before, r.report.clean_before, r.report.clean_after}) {
        CHECK(a >= 0.0);
        CHECK(a <= 1.0);
      }
      // repair helps on the samples it was trained on
      CHECK(r.report.ra >= r.report.adv_before);
    }
  }
}

TEST_CASE("readapt: full retraining trains everything; the mask's frozen weight decay is masked too") {
  const Mlp net = trained_net();
  auto [x, y] = synthetic(200, 21);
  auto [xt_, yt] = synthetic(100, 22);
  const auto r = readapt(net, nullptr, x, y, xt_, yt, fgsm_attack(0.1, 50), sgd_wd);
  CHECK(r.report.tpr == 1.0);
  CHECK(r.report.trained_parameters == r.report.total_parameters);
  // A mask keeping nothing but the output unit: with lr > 0 and weight decay, the hidden layers
  // still do not move at all.
  neuron_mask m = full_mask(net);
  for (std::size_t u = 0; u + 1 < m.keep.size(); ++u) std::fill(m.keep[u].begin(), m.keep[u].end(), 0);
  const auto pm = neuron_parameter_mask(net, m);
  const auto r2 = readapt(net, &m, x, y, xt_, yt, fgsm_attack(0.1, 50), sgd_wd);
  CHECK(moved(net, r2.model, pm).first == 0);
  CHECK(r2.report.trained_parameters == 4 * 12 + 4);
}

TEST_CASE("readapt: deterministic; execution::par equals execution::seq with the same chunks") {
  const Mlp net = trained_net();
  auto [x, y] = synthetic(200, 31);
  auto [xt_, yt] = synthetic(100, 32);
  const neuron_mask m = half_mask(net, {0, 1, 2, 3});
  maintenance_training o = adam_wd;
  o.chunks = 2;
  const auto a = readapt(execution::seq, net, &m, x, y, xt_, yt, pgd_attack(0.1, 3, 64), o);
  const auto b = readapt(execution::par, net, &m, x, y, xt_, yt, pgd_attack(0.1, 3, 64), o);
  const auto pa = parameter_spans(a.model), pb = parameter_spans(b.model);
  bool same = true;
  for (std::size_t k = 0; k < pa.size(); ++k) same = same && std::memcmp(pa[k].data(), pb[k].data(), pa[k].size() * sizeof(float)) == 0;
  CHECK(same);
  CHECK(a.report.raa == b.report.raa);
}

TEST_CASE("increment: the old task's critical neurons never move (oracle 9); the rest trains") {
  const Mlp net = trained_net();
  auto [x, y] = synthetic(300, 41);
  const neuron_mask m = half_mask(net, {0, 1});  // task A = classes {0, 1}
  const auto frozen = neuron_parameter_mask(net, m);  // 1 = frozen here
  const auto trainable = frozen.inverted();
  for (const auto& o : {sgd_wd, adam_wd}) {
    const auto r = increment(net, &m, x, y, o);
    const auto [f, t] = moved(net, r.model, trainable);
    CHECK(f == 0);
    CHECK(r.report.frozen_changed == 0);
    CHECK(t > trainable.trainable_count() / 2);
    CHECK(r.report.trained_parameters == trainable.trainable_count());
    CHECK(r.report.trained_fraction == doctest::Approx(double(trainable.trainable_count()) / double(frozen.size())));
    CHECK(r.report.trained_parameters + frozen.trainable_count() == frozen.size());
  }
  // the output rows of task A's classes are frozen, those of the other classes train
  const auto r = increment(net, &m, x, y, sgd_wd);
  const auto& W0 = std::get<4>(net.layers).W;
  const auto& W1 = std::get<4>(r.model.layers).W;
  const auto& b0 = std::get<4>(net.layers).b;
  const auto& b1 = std::get<4>(r.model.layers).b;
  CHECK(b0(0) == b1(0));
  CHECK(b0(1) == b1(1));
  CHECK(b0(2) != b1(2));
  CHECK(b0(3) != b1(3));
  (void)W0, (void)W1;
  // Retrain: no mask, everything trains
  const auto rr = increment(net, nullptr, x, y, sgd_wd);
  CHECK(rr.report.trained_fraction == 1.0);
}

TEST_CASE("increment: isolate_kept cuts masked -> kept synapses, so the old task's logits survive training bit for bit") {
  const Mlp net = trained_net();
  auto [x, y] = synthetic(300, 43);
  const neuron_mask m = half_mask(net, {0, 1});
  const Mlp iso = isolate_kept(net, m);
  // hand check of the cut: layer 2's kept unit reads masked layer-0 unit n as 0, the others as before
  const auto& W0 = std::get<2>(net.layers).W;
  const auto& Wi = std::get<2>(iso.layers).W;
  std::size_t cut = 0;
  for (std::size_t i = 0; i < 16; ++i)
    for (std::size_t o = 0; o < 12; ++o) {
      const bool zero = !m.keep[0][i] && m.keep[1][o];
      CHECK(Wi(i, o) == (zero ? 0.0f : W0(i, o)));
      cut += zero;
    }
  CHECK(cut > 0);
  CHECK(std::get<0>(iso.layers).W == std::get<0>(net.layers).W);  // the first unit reads the input
  const auto& H0 = std::get<4>(net.layers).W;
  const auto& Hi = std::get<4>(iso.layers).W;
  for (std::size_t i = 0; i < 12; ++i)
    for (std::size_t c = 0; c < 4; ++c) CHECK(Hi(i, c) == ((!m.keep[1][i] && c < 2) ? 0.0f : H0(i, c)));
  // training the rest on new data leaves classes 0 and 1's logits exactly as they were
  const auto r = increment(iso, &m, x, y, sgd_wd);
  CHECK(r.report.frozen_changed == 0);
  const xt::xarray<float> before = forward(iso, x), after = forward(r.model, x);
  std::size_t differ = 0, moved_b = 0;
  for (std::size_t i = 0; i < x.shape()[0]; ++i) {
    differ += before(i, 0) != after(i, 0) || before(i, 1) != after(i, 1);
    moved_b += before(i, 2) != after(i, 2);
  }
  CHECK(differ == 0);
  CHECK(moved_b > 0);
  neuron_mask bad = m;
  bad.keep.pop_back();
  CHECK_THROWS_AS(isolate_kept(net, bad), data_error);
}

TEST_CASE("increment helpers: set_output_classes, mask_union, replay_mix, task_scores") {
  const Mlp net = trained_net();
  neuron_mask m = full_mask(net);
  set_output_classes(net, m, {1, 3});
  CHECK(m.keep.back() == std::vector<std::uint8_t>{0, 1, 0, 1});
  CHECK_THROWS_AS(set_output_classes(net, m, {4}), value_error);
  neuron_mask a = half_mask(net, {0}), b = half_mask(net, {2});
  b.keep[0][0] = 1;
  a.keep[0][0] = 0;
  const auto u = mask_union(a, b);
  CHECK(u.keep[0][0] == 1);
  CHECK(u.keep.back() == std::vector<std::uint8_t>{1, 0, 1, 0});
  for (std::size_t l = 0; l < u.keep.size(); ++l)
    for (std::size_t n = 0; n < u.keep[l].size(); ++n) CHECK(u.keep[l][n] == (a.keep[l][n] || b.keep[l][n]));

  auto [xb, yb] = synthetic(50, 51);
  auto [xa, ya] = synthetic(200, 52);
  const auto mix = replay_mix(xb, yb, xa, ya, 0.10, 9);
  REQUIRE(mix.size() == 70);
  CHECK(mix.x.shape()[0] == 70);
  CHECK(mix.x.shape()[1] == 8);
  for (std::size_t i = 0; i < 50; ++i) CHECK(mix.y[i] == yb[i]);
  // every replayed sample is one of task A's, with its label, and none twice
  std::vector<int> used(200, 0);
  for (std::size_t i = 50; i < 70; ++i) {
    bool found = false;
    for (std::size_t j = 0; j < 200 && !found; ++j)
      if (std::equal(&mix.x(i, 0), &mix.x(i, 0) + 8, &xa(j, 0)) && mix.y[i] == ya[j] && !used[j]) found = true, used[j] = 1;
    CHECK(found);
  }
  CHECK(replay_mix(xb, yb, xa, ya, 0.0, 9).size() == 50);
  CHECK(replay_mix(xb, yb, xa, ya, 1.0, 9).size() == 250);
  CHECK_THROWS_AS(replay_mix(xb, yb, xa, ya, 1.5, 9), value_error);

  const auto s = task_scores(net, xa, ya, xb, yb);
  CHECK(s.mean == doctest::Approx((s.old_task + s.new_task) / 2));
  CHECK(s.old_task == train::evaluate(net, xa, ya).accuracy);
}

TEST_CASE("readapt / increment: errors") {
  const Mlp net = trained_net();
  auto [x, y] = synthetic(50, 61);
  neuron_mask bad = full_mask(net);
  bad.keep.pop_back();
  CHECK_THROWS_AS(readapt(net, &bad, x, y, x, y, fgsm_attack(0.1, 10)), data_error);
  CHECK_THROWS_AS(increment(net, &bad, x, y), data_error);
  maintenance_training o;
  o.epochs = 0;
  CHECK_THROWS_AS(readapt(net, nullptr, x, y, x, y, fgsm_attack(0.1, 10), o), value_error);
  CHECK_THROWS_AS(increment(net, nullptr, x, y, o), value_error);
}
