// DiffChaser (difftest/diffchaser.hpp): k-uncertainty, crossover, the genetic search.
#include <doctest/doctest.h>

#include <nnlens/difftest/diffchaser.hpp>

#include <cmath>
#include <random>
#include <vector>

using namespace nnlens;
using namespace nnlens::difftest;

namespace {

/// Two classes decided by the mean brightness of a 1x4x4 image: class 1 iff mean > threshold.
black_box brightness(float threshold, const char* name) {
  return wrap([threshold](std::span<const float> x, std::span<float> p) {
    double m = 0;
    for (float v : x) m += v;
    m /= double(x.size());
    const double z = (m - threshold) / 8.0;  // logit of class 1 minus that of class 0
    p[1] = float(1.0 / (1.0 + std::exp(-z)));
    p[0] = 1.f - p[1];
  }, 16, 2, name);
}

diffchaser_options small_options() {
  diffchaser_options o;
  o.image = {1, 4, 4};
  o.population = 20;
  o.offspring = 20;
  o.max_queries = 3000;
  o.max_seconds = 0;
  o.seed = 3;
  return o;
}

}  // namespace

TEST_CASE("diffchaser: k-uncertainty on hand examples") {
  const std::vector<float> p = {0.2f, 0.5f, 0.3f};
  CHECK(k_uncertainty(p, 1) == 0.0);
  CHECK(k_uncertainty(p, 2) == doctest::Approx(0.2));
  CHECK(k_uncertainty(p, 3) == doctest::Approx(0.3));
  const std::vector<float> tie = {0.4f, 0.2f, 0.4f};
  CHECK(k_uncertainty(tie, 2) == 0.0);  // on the boundary
  CHECK(k_uncertainty(tie, 3) == doctest::Approx(0.2));
  CHECK_THROWS_AS(k_uncertainty(p, 0), value_error);
  CHECK_THROWS_AS(k_uncertainty(p, 4), value_error);
  const std::vector<float> sure = {0.9f, 0.1f}, unsure = {0.55f, 0.45f};
  CHECK(diffchaser_fitness(sure, unsure) == doctest::Approx(0.1));  // either: the smaller gap
  CHECK(diffchaser_fitness(sure, unsure, 2, uncertainty_of::f) == doctest::Approx(0.8));
  CHECK(diffchaser_fitness(sure, unsure, 2, uncertainty_of::g) == doctest::Approx(0.1));
  CHECK(diffchaser_fitness(sure, unsure, 2, uncertainty_of::sum) == doctest::Approx(0.9));
}

TEST_CASE("diffchaser: crossover takes every element from a parent, deterministically for a seed") {
  std::vector<float> a(1000), b(1000);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = float(i), b[i] = -float(i) - 1;
  for (crossover_kind kind : {crossover_kind::uniform, crossover_kind::single_point}) {
    std::vector<float> c1(1000), c2(1000);
    std::mt19937_64 r1(42), r2(42);
    crossover(a, b, c1, r1, kind);
    crossover(a, b, c2, r2, kind);
    CHECK(c1 == c2);
    std::size_t from_a = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
      REQUIRE((c1[i] == a[i] || c1[i] == b[i]));
      from_a += c1[i] == a[i];
    }
    if (kind == crossover_kind::uniform) {
      CHECK(from_a > 400);  // binomial(1000, 1/2): 500 +- 16
      CHECK(from_a < 600);
    } else {
      CHECK(from_a >= 1);
      CHECK(from_a <= 999);
      for (std::size_t i = 0; i < from_a; ++i) REQUIRE(c1[i] == a[i]);  // a prefix, then b
    }
    std::mt19937_64 r3(43);
    std::vector<float> c3(1000);
    crossover(a, b, c3, r3, kind);
    CHECK(c3 != c1);
  }
  std::vector<float> shorter(10);
  std::mt19937_64 r(1);
  CHECK_THROWS_AS(crossover(a, shorter, shorter, r), shape_error);
}

TEST_CASE("diffchaser: finds a constructed deviation within the budget; deterministic; seq == par") {
  const black_box f = brightness(128, "f"), g = brightness(116, "g");
  // Triggers: mean in (116, 128).  Seeds: dark images (mean 40 and 70) and one already triggering.
  std::vector<float> seeds(3 * 16, 40.f);
  for (std::size_t i = 16; i < 32; ++i) seeds[i] = 70.f;
  for (std::size_t i = 32; i < 48; ++i) seeds[i] = 120.f;
  const auto o = small_options();
  const auto r = diffchaser(f, g, seeds, 3, o);
  REQUIRE(r.seeds.size() == 3);
  for (std::size_t i = 0; i < 2; ++i) {
    CAPTURE(i);
    const auto& s = r.seeds[i];
    CHECK(s.status == seed_status::found);
    CHECK(s.queries >= 1);
    CHECK(s.queries <= o.max_queries);
    CHECK(s.label_f == 0);
    CHECK(s.label_g == 1);
    REQUIRE(s.input.size() == 16);
    double m = 0;
    for (float v : s.input) {
      CHECK(v >= 0.f);
      CHECK(v <= 255.f);
      CHECK(v == std::floor(v));
      m += v;
    }
    m /= 16;
    CHECK(m > 116);
    CHECK(m < 128);
  }
  CHECK(r.seeds[2].status == seed_status::already_triggering);
  CHECK(r.seeds[2].queries == 0);
  const auto sum = r.summary();
  CHECK(sum.found == 2);
  CHECK(sum.success_rate == 1.0);
  MESSAGE("diffchaser on the brightness pair: mean queries ", sum.mean_queries);
  // The same options give the same result; execution::par gives it too.
  const auto again = diffchaser(f, g, seeds, 3, o);
  const auto par = diffchaser(execution::par, f, g, seeds, 3, o);
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(again.seeds[i].queries == r.seeds[i].queries);
    CHECK(again.seeds[i].input == r.seeds[i].input);
    CHECK(par.seeds[i].queries == r.seeds[i].queries);
    CHECK(par.seeds[i].input == r.seeds[i].input);
  }
}

TEST_CASE("diffchaser: g = f never triggers and spends exactly the query budget") {
  const black_box f = brightness(128, "f");
  std::vector<float> seed(16, 90.f);
  auto o = small_options();
  o.max_queries = 250;  // 20 initial + 11 generations of 20 + a truncated last one of 10
  const auto r = diffchaser(f, f, seed, 1, o);
  CHECK(r.seeds[0].status == seed_status::not_found);
  CHECK(r.seeds[0].queries == 250);
  CHECK(r.seeds[0].corpus == 12);  // generations
  CHECK(r.summary().success_rate == 0.0);
}

TEST_CASE("diffchaser: a throwing black box fails its seed only; bad options throw") {
  const black_box f = brightness(128, "f");
  int calls = 0;
  const black_box bad = wrap([&calls](std::span<const float>, std::size_t n, std::span<float> p) {
    if (++calls > 1) throw io_error("device unplugged");
    for (std::size_t i = 0; i < n; ++i) p[2 * i] = 1, p[2 * i + 1] = 0;
  }, 16, 2, "bad");
  std::vector<float> seed(16, 50.f);
  const auto r = diffchaser(f, bad, seed, 1, small_options());
  CHECK(r.seeds[0].status == seed_status::failed);
  CHECK(r.seeds[0].error == "device unplugged");
  const black_box nan = wrap([](std::span<const float>, std::size_t n, std::span<float> p) {
    for (std::size_t i = 0; i < n; ++i) p[2 * i] = std::nanf(""), p[2 * i + 1] = 0;
  }, 16, 2, "nan");
  const auto rn = diffchaser(f, nan, seed, 1, small_options());
  CHECK(rn.seeds[0].status == seed_status::failed);
  CHECK(rn.seeds[0].error.find("non-finite") != std::string::npos);
  auto o = small_options();
  o.image = {1, 4, 5};
  CHECK_THROWS_AS(diffchaser(f, f, seed, 1, o), shape_error);
  o = small_options();
  o.k = 3;
  CHECK_THROWS_AS(diffchaser(f, f, seed, 1, o), value_error);
  o = small_options();
  o.max_queries = 0;
  CHECK_THROWS_AS(diffchaser(f, f, seed, 1, o), value_error);
  CHECK_THROWS_AS(diffchaser(f, f, std::vector<float>(15), 1, small_options()), shape_error);
}
