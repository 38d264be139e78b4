// Shared by the DFlare tests (test_dflare, test_lockstep, test_thrust_dflare): check_identical (two
// DFlare results are the same search, every field but the wall-clock seconds) and the brightness
// pair on 4x4 images (a pair of black boxes that differ by construction where the mean is between
// their thresholds); pixels (seeded random images in [0, 255]) and search_options (a query
// budget per seed, no time budget, an RNG seed).
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <nnlens/difftest/black_box.hpp>
#include <nnlens/difftest/dflare.hpp>

namespace nnlens_test {

inline void check_identical(const nnlens::difftest::dflare_result& a, const nnlens::difftest::dflare_result& b) {
  REQUIRE(a.seeds.size() == b.seeds.size());
  for (std::size_t i = 0; i < a.seeds.size(); ++i) {
    CAPTURE(i);
    const auto &x = a.seeds[i], &y = b.seeds[i];
    CHECK(x.index == y.index);
    CHECK(x.status == y.status);
    CHECK(x.queries == y.queries);
    CHECK(x.seed_label == y.seed_label);
    CHECK(x.label_f == y.label_f);
    CHECK(x.label_g == y.label_g);
    CHECK(x.input == y.input);
    CHECK(x.probs_f == y.probs_f);
    CHECK(x.probs_g == y.probs_g);
    CHECK(x.accepted == y.accepted);
    CHECK(x.corpus == y.corpus);
    CHECK(x.error == y.error);
  }
  const auto s = a.summary(), t = b.summary();
  CHECK(s.found == t.found);
  CHECK(s.already_triggering == t.already_triggering);
  CHECK(s.failed == t.failed);
  CHECK(s.total_queries == t.total_queries);
  CHECK(s.mean_queries == t.mean_queries);
}

/// The images of the brightness pair.
inline const nnlens::difftest::image_shape brightness_img{1, 4, 4};

inline double mean_of(std::span<const float> x) {
  double s = 0;
  for (float v : x) s += v;
  return s / double(x.size());
}

/// Class 0 iff the mean brightness is above `threshold` (a soft step of width 10), batched.
inline nnlens::difftest::black_box brightness(double threshold, std::string name) {
  return nnlens::difftest::wrap([threshold](std::span<const float> x, std::span<float> p) {
    const double t = 1.0 / (1.0 + std::exp(-(mean_of(x) - threshold) / 10.0));
    p[0] = float(t);
    p[1] = float(1 - t);
  }, brightness_img.size(), 2, std::move(name));
}

/// count pixel values, uniform integers in [0, 255] from seed.
inline std::vector<float> pixels(std::size_t count, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> v(0, 255);
  std::vector<float> x(count);
  for (auto& e : x) e = float(v(rng));
  return x;
}

/// Options for images of shape img: a query budget of q per seed, no time budget, RNG seed.
inline nnlens::difftest::dflare_options search_options(nnlens::difftest::image_shape img, std::size_t q,
                                                       std::uint64_t seed) {
  nnlens::difftest::dflare_options o;
  o.image = img;
  o.max_queries = q;
  o.max_seconds = 0;
  o.seed = seed;
  return o;
}

/// Options for the brightness pair: a query budget of q per seed, no time budget, RNG seed 7.
inline nnlens::difftest::dflare_options brightness_budget(std::size_t q) { return search_options(brightness_img, q, 7); }

/// One brightness_img per value, every pixel that value.
inline std::vector<float> constant_seeds(std::initializer_list<float> values) {
  std::vector<float> s;
  for (float v : values) s.insert(s.end(), brightness_img.size(), v);
  return s;
}

}  // namespace nnlens_test
