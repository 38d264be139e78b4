// DRepair (difftest/repair.hpp): metrics by hand, training h, the repaired black box end to end.
#include <doctest/doctest.h>

#include <nnlens/difftest/repair.hpp>

#include <cmath>
#include <random>
#include <vector>

using namespace nnlens;
using namespace nnlens::difftest;

namespace {

/// 2 classes decided by the mean brightness of a 1x4x4 image: class 1 iff mean > threshold.
black_box brightness(float threshold, const char* name) {
  return wrap([threshold](std::span<const float> x, std::span<float> p) {
    double m = 0;
    for (float v : x) m += v;
    m /= double(x.size());
    p[1] = float(1.0 / (1.0 + std::exp(-(m - threshold) / 8.0)));
    p[0] = 1.f - p[1];
  }, 16, 2, name);
}

/// h on 2-class probability vectors: class 1 iff p[1] > t (as one-hot probabilities).
black_box threshold_h(float t) {
  return wrap([t](std::span<const float> p, std::span<float> out) {
    out[1] = p[1] > t ? 1.f : 0.f;
    out[0] = 1.f - out[1];
  }, 2, 2, "h");
}

repair_pairs toy() {
  repair_pairs p;  // pair A: the trigger is fixable by a threshold of 0.3; pair B's is not
  p.add(std::vector<float>{0.9f, 0.1f}, 0, std::vector<float>{0.6f, 0.4f}, 1);
  p.add(std::vector<float>{0.2f, 0.8f}, 1, std::vector<float>{0.8f, 0.2f}, 1);
  return p;
}

}  // namespace

TEST_CASE("drepair: metrics on a 4-sample toy set, by hand") {
  const repair_pairs p = toy();
  CHECK(p.size() == 2);
  // h = argmax (identity): nothing repaired, nothing induced, improvement 0 (spec §6.10).
  auto m = evaluate_repair(threshold_h(0.5f), p);
  CHECK(m.repaired == 0);
  CHECK(m.induced == 0);
  CHECK(m.repair_ratio == 0.0);
  CHECK(m.inducing_ratio == 0.0);
  CHECK(m.improvement_ratio == 0.0);
  CHECK(m.deviation_before == 0.5);
  CHECK(m.deviation_after == 0.5);
  // threshold 0.3: A's trigger repaired; seeds intact -> 1/2, 0, (2 - 1)/2
  m = evaluate_repair(threshold_h(0.3f), p);
  CHECK(m.repair_ratio == 0.5);
  CHECK(m.inducing_ratio == 0.0);
  CHECK(m.improvement_ratio == 0.5);
  CHECK(m.deviation_after == 0.25);
  // threshold 0.95: everything is class 0: triggers: A wrong, B wrong; seed B induced
  m = evaluate_repair(threshold_h(0.95f), p);
  CHECK(m.repair_ratio == 0.0);
  CHECK(m.inducing_ratio == 0.5);
  CHECK(m.improvement_ratio == -0.5);  // (2 - 3) / 2: the repair made it worse
  CHECK_THROWS_AS(p.subset(std::vector<std::size_t>{0}).add(std::vector<float>{1, 0, 0}, 0, std::vector<float>{1, 0, 0}, 0),
                  shape_error);
  repair_pairs q;
  CHECK_THROWS_AS(q.add(std::vector<float>{0.5f, 0.5f}, 2, std::vector<float>{0.5f, 0.5f}, 0), data_error);
  CHECK_THROWS_AS(train_repair(q), data_error);
}

TEST_CASE("drepair: h learns a systematic deviation of g; deterministic; cross-validation") {
  // 3 classes; g confuses class 1 for class 0 when its top probability is below 0.6.
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  repair_pairs pairs;
  while (pairs.size() < 100) {
    float s[3] = {u(rng), u(rng), u(rng)}, t[3] = {0.f, 0.f, 0.f};
    const float sum = s[0] + s[1] + s[2];
    for (float& v : s) v /= sum;
    const std::size_t ls = top1(s);
    if (ls == 0 && s[0] < 0.6f) continue;  // a seed must be non-triggering
    // the trigger: g says 0 (weakly), f says 1
    t[0] = 0.4f + 0.15f * u(rng);
    t[1] = t[0] - 0.05f - 0.1f * u(rng);
    t[2] = 1.f - t[0] - t[1];
    if (t[2] >= t[0]) continue;
    pairs.add(s, ls, t, 1);
  }
  repair_options o;
  o.epochs = 300;
  o.lr = 1e-2;
  o.seed = 1;
  const auto h = train_repair(pairs, o);
  const auto m = evaluate_repair(h, pairs);
  MESSAGE("train: repair ", m.repair_ratio, " inducing ", m.inducing_ratio, " improvement ", m.improvement_ratio);
  CHECK(m.repair_ratio > 0.8);
  CHECK(m.inducing_ratio < 0.1);
  CHECK(h.train_accuracy > 0.85);
  const auto h2 = train_repair(pairs, o);
  std::vector<float> a(3), b(3);
  h.h(std::span<const float>(pairs.g_trigger.data(), 3), 1, a);
  h2.h(std::span<const float>(pairs.g_trigger.data(), 3), 1, b);
  CHECK(a == b);
  o.hidden = 0;  // softmax regression cannot carve the band [0.4, 0.55] out of class 0: only
  const auto lin = evaluate_repair(train_repair(pairs, o), pairs);  // a sanity bound
  CHECK(lin.improvement_ratio <= 1.0);
  o.hidden = 100;
  o.epochs = 150;
  const auto folds = cross_validate_repair(pairs, 5, 0, o);
  REQUIRE(folds.size() == 5);
  for (const auto& f : folds) CHECK(f.triggers == 20);
  const auto avg = mean(std::span<const repair_metrics>(folds));
  MESSAGE("5-fold: repair ", avg.repair_ratio, " inducing ", avg.inducing_ratio, " improvement ", avg.improvement_ratio);
  CHECK(avg.improvement_ratio > 0.6);
  CHECK_THROWS_AS(cross_validate_repair(pairs, 1), value_error);
}

TEST_CASE("drepair: DFlare pairs -> h -> repaired g deviates less on a test set") {
  const black_box f = brightness(128, "f"), g = brightness(116, "g");
  // Seeds: constant images spread over [0,255], skipping the deviating band.
  std::vector<float> seeds;
  std::size_t n = 0;
  for (int v = 4; v < 256; v += 4) {
    if (v > 110 && v < 134) continue;
    seeds.insert(seeds.end(), 16, float(v));
    ++n;
  }
  dflare_options d;
  d.image = {1, 4, 4};
  d.max_queries = 3000;
  d.max_seconds = 0;
  d.seed = 1;
  const auto r = dflare(f, g, seeds, n, d);
  const auto pairs = collect_repair_pairs(g, r, seeds);
  MESSAGE("dflare: ", pairs.size(), " pairs from ", n, " seeds, mean queries ", r.summary().mean_queries);
  REQUIRE(pairs.size() >= n / 2);
  repair_options o;
  o.epochs = 400;
  o.lr = 1e-2;
  o.seed = 2;
  const auto h = train_repair(pairs, o);
  const black_box g2 = repaired(g, h);
  CHECK(g2.name == "g+drepair");
  // Test set: 1000 random-brightness images (noise around a uniform mean).
  std::mt19937_64 rng(9);
  std::uniform_real_distribution<float> mean(0.f, 255.f), noise(-20.f, 20.f);
  std::vector<float> x(1000 * 16);
  for (std::size_t i = 0; i < 1000; ++i) {
    const float m = mean(rng);
    for (std::size_t j = 0; j < 16; ++j) x[i * 16 + j] = std::clamp(std::round(m + noise(rng)), 0.f, 255.f);
  }
  const double before = deviation_rate(f, g, x, 1000), after = deviation_rate(f, g2, x, 1000);
  const auto m = evaluate_repair(h, pairs);
  MESSAGE("deviation rate on 1000 test images: before ", before, ", after ", after, "; on the pairs: repair ",
          m.repair_ratio, " inducing ", m.inducing_ratio);
  CHECK(before > 0.02);
  CHECK(after < before);
  const black_box three = wrap([](std::span<const float>, std::span<float> p) { p[0] = 1, p[1] = p[2] = 0; }, 16, 3, "three");
  CHECK_THROWS_AS(repaired(three, h), shape_error);
}
