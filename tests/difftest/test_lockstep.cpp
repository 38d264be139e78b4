// DFlare's lockstep driver (difftest/lockstep.hpp, dflare.hpp): every seed advances one query per
// round and the round's queries go to each black box as one batch; the results equal the
// sequential driver's field for field (but wall-clock seconds) for query budgets.
#include <doctest/doctest.h>

#include <nnlens/difftest/black_box.hpp>
#include <nnlens/difftest/dflare.hpp>
#include <nnlens/difftest/lockstep.hpp>
#include <nnlens/nnlens.hpp>

#include "dflare_checks.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <memory>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

using namespace nnlens;
using namespace nnlens::difftest;

namespace {

using nnlens_test::check_identical;

const image_shape img = nnlens_test::brightness_img;
using nnlens_test::brightness;
using nnlens_test::constant_seeds;
using nnlens_test::mean_of;

std::vector<float> random_seeds(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> v(0, 255);
  std::vector<float> s(n * img.size());
  for (auto& e : s) e = float(v(rng));
  return s;
}

dflare_options budget(std::size_t q) { return nnlens_test::brightness_budget(q); }


/// Counts the calls and rows a black box receives.
struct counter {
  std::mutex m;
  std::size_t calls = 0, rows = 0, max_batch = 0;
};
black_box counted(const black_box& b, std::shared_ptr<counter> c) {
  black_box r = b;
  r.predict = [p = b.predict, c](std::span<const float> x, std::size_t n, std::span<float> probs) {
    {
      std::lock_guard lk(c->m);
      ++c->calls, c->rows += n, c->max_batch = std::max(c->max_batch, n);
    }
    p(x, n, probs);
  };
  return r;
}

dflare_result lockstep_run(const black_box& f, const black_box& g, std::span<const float> seeds, std::size_t n,
                           dflare_options o) {
  o.lockstep = true;
  return dflare(f, g, seeds, n, o);
}

using MLP = Sequential<Input<1, 4, 4>, Flatten, Dense<8>, ReLU, Dense<3>>;

}  // namespace

TEST_CASE("lockstep: equals the sequential driver field for field on a pair that differs by construction") {
  const auto f = brightness(100, "f"), g = brightness(104, "g");  // narrow band: searches of many lengths
  // 101 and 102 trigger at once (already_triggering); the others search
  const auto seeds = constant_seeds({200, 101, 180, 60, 102, 230, 20, 150});
  for (acceptance a : {acceptance::paper, acceptance::reference, acceptance::no_novelty}) {
    for (selection_rule s : {selection_rule::paper, selection_rule::reference}) {
      CAPTURE(int(a));
      CAPTURE(int(s));
      auto o = budget(400);
      o.accept = a;
      o.selection = s;
      const auto seq = dflare(f, g, seeds, 8, o);
      const auto lock = lockstep_run(f, g, seeds, 8, o);
      check_identical(seq, lock);
      CHECK(lock.seeds[1].status == seed_status::already_triggering);
      CHECK(lock.seeds[4].status == seed_status::already_triggering);
      CHECK(lock.summary().found >= 5);
    }
  }
  // a budget that runs out for some seeds; par + lockstep (groups of seeds on 2 threads)
  auto o = budget(6);
  const auto seq = dflare(f, g, seeds, 8, o);
  CHECK(seq.summary().not_found > 0);
  check_identical(seq, lockstep_run(f, g, seeds, 8, o));
  o.threads = 2;
  o.lockstep = true;
  check_identical(seq, dflare(execution::par, f, g, seeds, 8, o));
}

// wrap(net) on the host answers a row alike alone and in a batch for this small network; from 3
// rows on, the host GEMM of larger layers (LeNet-5: 784 -> 128) sums in another order than for 1
// or 2 rows, and lockstep then matches the sequential run only up to rounding (docs: dflare.hpp).
TEST_CASE("lockstep: equals the sequential driver on small networks (wrap(net) on the host)") {
  MLP f;
  initialize(f, 3);
  // g1: f with two logits swapped (differs by construction); g2: f with perturbed weights
  MLP g1 = f, g2 = f;
  auto& last = g1.layer<3>();
  for (std::size_t i = 0; i < last.W.shape()[0]; ++i) std::swap(last.W(i, 0), last.W(i, 1));
  std::swap(last.b(0), last.b(1));
  std::mt19937_64 rng(11);
  std::normal_distribution<float> noise(0.f, 0.05f);
  for (auto& w : g2.layer<1>().W) w += noise(rng);
  const auto norm = normalization::divide_by(255);
  const auto bf = wrap(f, "f", norm), bg1 = wrap(g1, "g1", norm), bg2 = wrap(g2, "g2", norm);
  const auto seeds = random_seeds(24, 5);
  for (const black_box* g : {&bg1, &bg2}) {
    CAPTURE(g->name);
    const auto o = budget(300);
    auto cf = std::make_shared<counter>(), cg = std::make_shared<counter>();
    const auto seq = dflare(bf, *g, seeds, 24, o);
    const auto lock = lockstep_run(counted(bf, cf), counted(*g, cg), seeds, 24, o);
    check_identical(seq, lock);
    const auto s = lock.summary();
    CHECK(s.already_triggering + s.searched == 24);
    if (g == &bg1) CHECK(s.success_rate == 1.0);
    // the batches are real: round 0 holds all 24 seeds; one call per round and model
    CHECK(cf->max_batch == 24);
    CHECK(cg->max_batch == 24);
    CHECK(cf->rows == s.total_queries + 24);
    CHECK(cf->calls == cg->calls);
    std::size_t longest = 0;
    for (const auto& r : lock.seeds) longest = std::max(longest, r.queries);
    CHECK(cf->calls == longest + 1);  // rounds = the longest search + the seed round
    CHECK(cf->calls < cf->rows);
    MESSAGE(g->name, ": ", s.found, "/", s.searched, " found, ", cf->rows, " rows in ", cf->calls, " batches");
  }
}

TEST_CASE("lockstep: the driver's statistics and a batching policy through dflare_lockstep") {
  const auto f = brightness(100, "f"), g = brightness(120, "g");
  const auto seeds = constant_seeds({200, 180, 60, 230, 110});
  lockstep_stats st;
  const auto r = difftest::detail::dflare_lockstep<execution::sequenced_policy>(f, g, seeds, 5, budget(300), &st);
  check_identical(dflare(f, g, seeds, 5, budget(300)), r);
  CHECK(st.max_batch == 5);
  CHECK(st.rows == r.summary().total_queries + 5);
  CHECK(st.retried_rounds == 0);
  std::size_t longest = 0;
  for (const auto& sr : r.seeds) longest = std::max(longest, sr.queries);
  CHECK(st.rounds == longest + 1);
  CHECK(merge(st, st).rows == 2 * st.rows);
  CHECK(merge(st, st).max_batch == st.max_batch);
}

TEST_CASE("lockstep: a black box that throws on a batch fails only the seeds whose own query throws") {
  const auto f = brightness(100, "f"), g0 = brightness(120, "g");
  // throws when any row of the batch is the all-50 image (seed 1 before any mutation)
  auto flaky_predict = [](const black_box& b) {
    return [p = b.predict](std::span<const float> x, std::size_t n, std::span<float> probs) {
      for (std::size_t i = 0; i < n; ++i) {
        const auto row = x.subspan(i * img.size(), img.size());
        if (std::all_of(row.begin(), row.end(), [](float v) { return v == 50.f; }))
          throw nnlens::error("external model crashed");
      }
      p(x, n, probs);
    };
  };
  const auto seeds = constant_seeds({200, 50, 210, 230, 180});
  for (bool flaky_f : {false, true}) {
    CAPTURE(flaky_f);
    black_box f2 = f, g2 = g0;
    (flaky_f ? f2 : g2).predict = flaky_predict(flaky_f ? f : g0);
    auto o = budget(300);
    std::size_t calls = 0;
    o.on_seed = [&](const seed_result&) { ++calls; };
    const auto seq = dflare(f2, g2, seeds, 5, o);
    lockstep_stats st;
    o.lockstep = true;
    const auto lock = difftest::detail::dflare_lockstep<execution::sequenced_policy>(f2, g2, seeds, 5, o, &st);
    CHECK(calls == 10);
    check_identical(seq, lock);
    CHECK(lock.seeds[1].status == seed_status::failed);
    CHECK(lock.seeds[1].error == "external model crashed");
    for (std::size_t i : {0, 2, 3, 4}) CHECK(lock.seeds[i].status == seed_status::found);
    CHECK(st.retried_rounds == 1);  // round 0 only: seed 1 left after it
  }
  // a black box that refuses every batch of more than one row: every round is retried row by row,
  // and the results still equal the sequential ones
  black_box single = g0;
  single.predict = [p = g0.predict](std::span<const float> x, std::size_t n, std::span<float> probs) {
    if (n > 1) throw nnlens::error("batches unsupported");
    p(x, n, probs);
  };
  lockstep_stats st;
  const auto lock = difftest::detail::dflare_lockstep<execution::sequenced_policy>(f, single, seeds, 5, budget(300), &st);
  check_identical(dflare(f, single, seeds, 5, budget(300)), lock);
  CHECK(lock.summary().failed == 0);
  CHECK(st.retried_rounds > 0);
  // a non-finite answer in one row fails that seed only (the check runs per row)
  auto nan_on_50 = wrap([p = g0.predict](std::span<const float> x, std::size_t n, std::span<float> probs) {
    p(x, n, probs);
    for (std::size_t i = 0; i < n; ++i)
      if (x[i * img.size()] == 50.f) probs[2 * i] = NAN;
  }, img.size(), 2, "nan");
  const auto rn = lockstep_run(f, nan_on_50, seeds, 5, budget(300));
  check_identical(dflare(f, nan_on_50, seeds, 5, budget(300)), rn);
  CHECK(rn.seeds[1].status == seed_status::failed);
  CHECK(rn.seeds[1].error.find("non-finite") != std::string::npos);
  // a seed outside [0,255] fails in its first proposal; the others run
  auto bad = constant_seeds({200, 300, 210});
  const auto rb = lockstep_run(f, g0, bad, 3, budget(300));
  CHECK(rb.seeds[1].status == seed_status::failed);
  CHECK(rb.seeds[0].status == seed_status::found);
  CHECK(rb.seeds[2].status == seed_status::found);
}

TEST_CASE("lockstep: n = 0 and n = 1; first_index; input checks as the sequential driver") {
  const auto f = brightness(100, "f"), g = brightness(120, "g");
  auto o = budget(300);
  o.lockstep = true;
  const std::vector<float> none;
  CHECK(dflare(f, g, none, 0, o).seeds.empty());
  CHECK(dflare(execution::par, f, g, none, 0, o).seeds.empty());
  const auto one = constant_seeds({200});
  o.first_index = 41;
  auto cf = std::make_shared<counter>();
  const auto r1 = dflare(counted(f, cf), g, one, 1, o);
  o.lockstep = false;
  check_identical(dflare(f, g, one, 1, o), r1);
  CHECK(r1.seeds[0].index == 41);
  CHECK(r1.seeds[0].found());
  CHECK(cf->max_batch == 1);
  o.lockstep = true;
  CHECK_THROWS_AS(dflare(f, g, one, 2, o), shape_error);
  o.max_queries = 0;
  CHECK_THROWS_AS(dflare(f, g, one, 1, o), value_error);
}

TEST_CASE("lockstep: a time budget stops every seed; on_seed and the progress bar see every seed") {
  const auto f = brightness(100, "f");
  const auto seeds = constant_seeds({200, 40, 220});
  auto o = budget(0);
  o.max_seconds = 0.02;
  o.lockstep = true;
  std::vector<std::size_t> seen;
  o.on_seed = [&](const seed_result& r) { seen.push_back(r.index); };
  const auto r = dflare(f, f, seeds, 3, o);
  CHECK(seen.size() == 3);
  // an exception from on_seed itself is the caller's: it leaves dflare (as in the sequential driver)
  auto o2 = budget(300);
  o2.on_seed = [](const seed_result&) { throw std::runtime_error("stop"); };
  const auto g = brightness(120, "g");
  CHECK_THROWS_WITH(dflare(f, g, seeds, 3, o2), "stop");
  o2.lockstep = true;
  CHECK_THROWS_WITH(dflare(f, g, seeds, 3, o2), "stop");
  for (const auto& sr : r.seeds) {
    CHECK(sr.status == seed_status::not_found);
    CHECK(sr.seconds >= 0.02);
    CHECK(sr.queries > 0);
  }
}

// skip_repeats (dflare.hpp, beyond the spec): a mutant equal to x_max or to a mutant queried since
// x_max last changed is not queried.  On constant seeds every blur returns x_max, so the spec's
// search queries copies of x_max (and the paper's >= credits the blur for them).
TEST_CASE("skip_repeats: no query repeats the one before it; fewer queries, the same seeds found; lockstep == seq") {
  const auto f = brightness(100, "f"), g0 = brightness(104, "g");
  // the rows g answers, one seed at a time (sequential driver: one row per call, in order)
  auto rows = std::make_shared<std::vector<std::vector<float>>>();
  black_box g = g0;
  g.predict = [p = g0.predict, rows](std::span<const float> x, std::size_t n, std::span<float> probs) {
    for (std::size_t i = 0; i < n; ++i) rows->emplace_back(x.begin() + std::ptrdiff_t(i * img.size()), x.begin() + std::ptrdiff_t((i + 1) * img.size()));
    p(x, n, probs);
  };
  const auto seeds = constant_seeds({200, 180, 60, 230, 20, 150});
  for (acceptance a : {acceptance::paper, acceptance::reference}) {
    CAPTURE(int(a));
    std::size_t queries[2] = {0, 0}, found[2] = {0, 0}, repeats[2] = {0, 0};
    for (bool skip : {false, true}) {
      auto o = budget(2000);
      o.accept = a;
      o.selection = a == acceptance::paper ? selection_rule::paper : selection_rule::reference;
      o.skip_repeats = skip;
      for (std::size_t i = 0; i < 6; ++i) {
        rows->clear();
        o.first_index = i;
        const auto r = dflare(execution::seq, f, g, std::span<const float>(seeds).subspan(i * img.size(), img.size()), 1, o);
        REQUIRE(rows->size() == r.seeds[0].queries + 1);  // the seed's query and one row per query
        for (std::size_t q = 1; q < rows->size(); ++q) repeats[skip] += (*rows)[q] == (*rows)[q - 1];
        queries[skip] += r.seeds[0].queries;
        found[skip] += r.seeds[0].found();
      }
      o.first_index = 0;
      const auto all = dflare(f, g0, seeds, 6, o);  // the seeds together: the same searches
      CHECK(all.summary().total_queries == queries[skip]);
      check_identical(all, lockstep_run(f, g0, seeds, 6, o));
    }
    MESSAGE("acceptance ", int(a), ": ", queries[0], " queries (", repeats[0], " repeats) without skip_repeats, ", queries[1],
            " with it; found ", found[0], " / ", found[1]);
    CHECK(repeats[0] > 0);   // the spec's search does query repeats here...
    CHECK(repeats[1] == 0);  // ...skip_repeats never does
    CHECK(found[1] == 6);
    CHECK(found[1] >= found[0]);
    CHECK(queries[1] < queries[0]);
  }
}

TEST_CASE("skip_repeats: a search no operator can move still ends by its query budget") {
  // a constant black image and only blurs: every mutant is x_max; the guard queries after 1000 skips
  const auto f = brightness(100, "f"), g = brightness(104, "g");
  auto o = budget(3);
  o.pool = {mutation::average_blur, mutation::median_blur};
  o.skip_repeats = true;
  const auto r = dflare(f, g, constant_seeds({0}), 1, o);
  CHECK(r.seeds[0].status == seed_status::not_found);
  CHECK(r.seeds[0].queries == 3);
}

// distance_measure::logit_margin (dflare.hpp, beyond the spec): D = |M_f - M_g| / max(M_f, M_g),
// M = log p_top - log p_second.
TEST_CASE("logit_margin distance: hand values; it moves where D is 0; lockstep == seq under it") {
  const std::vector<float> f = {0.7f, 0.2f, 0.1f}, g = {0.6f, 0.3f, 0.1f};
  const double mf = std::log(0.7 / 0.2), mg = std::log(2.0);
  CHECK(logit_margin(f) == doctest::Approx(mf).epsilon(1e-6));
  CHECK(margin_distance(f, g) == doctest::Approx((mf - mg) / mf).epsilon(1e-6));
  CHECK(margin_distance(g, f) == margin_distance(f, g));
  CHECK(margin_distance(f, f) == 0.0);
  // both saturated: D = 0, but the margins (second probabilities 0 -> the smallest float, 1e-30) differ
  const std::vector<float> s1 = {1.f, 0.f}, s2 = {1.f, 1e-30f};
  CHECK(output_distance(s1, s2) == 0.0);
  const double m1 = -std::log(double(std::numeric_limits<float>::denorm_min())), m2 = -std::log(double(1e-30f));
  CHECK(margin_distance(s1, s2) == doctest::Approx((m1 - m2) / m1).epsilon(1e-6));
  CHECK(fitness_distance(distance_measure::top1_probability, f, g) == output_distance(f, g));
  CHECK(fitness_distance(distance_measure::logit_margin, f, g) == margin_distance(f, g));
  // one model on its boundary: distance 1
  const std::vector<float> tie = {0.5f, 0.5f};
  CHECK(margin_distance(std::vector<float>{0.9f, 0.1f}, tie) == 1.0);

  const auto bf = brightness(100, "f"), bg = brightness(104, "g");
  const auto seeds = constant_seeds({200, 180, 60, 230, 20, 150});
  auto o = budget(2000);
  o.distance = distance_measure::logit_margin;
  const auto seq = dflare(bf, bg, seeds, 6, o);
  check_identical(seq, lockstep_run(bf, bg, seeds, 6, o));
  CHECK(seq.summary().found == 6);
  MESSAGE("brightness pair, logit_margin: ", seq.summary().total_queries, " queries for 6 seeds");
}

// The option's effect where D is flat: a steep brightness pair (softmax saturated far from the
// thresholds, so both top-1 probabilities are 1.0f and D = 0) -- the logit margin still guides.
TEST_CASE("logit_margin + skip_repeats: fewer queries than the spec's search where the softmax saturates") {
  auto steep = [](double threshold, std::string name) {
    return wrap([threshold](std::span<const float> x, std::span<float> p) {
      const double z = (mean_of(x) - threshold) / 2.0;  // logits (z, 0): a softmax keeps the small one
      p[0] = float(1.0 / (1.0 + std::exp(-z)));
      p[1] = float(1.0 / (1.0 + std::exp(z)));
    }, img.size(), 2, std::move(name));
  };
  const auto f = steep(100, "f"), g = steep(104, "g");
  const auto seeds = constant_seeds({200, 230, 20, 250, 60, 180});
  std::vector<float> p0(2), p1(2);
  f(std::span<const float>(seeds).first(img.size()), 1, p0);
  g(std::span<const float>(seeds).first(img.size()), 1, p1);
  CHECK(output_distance(p0, p1) == 0.0);  // saturated: D cannot tell the seed from its neighbours
  CHECK(margin_distance(p0, p1) > 0.0);
  auto o = budget(3000);
  const auto spec = dflare(f, g, seeds, 6, o).summary();
  o.distance = distance_measure::logit_margin;
  o.skip_repeats = true;
  const auto opt = dflare(f, g, seeds, 6, o).summary();
  MESSAGE("steep pair: spec ", spec.found, "/6 found, ", spec.total_queries, " queries; logit_margin + skip_repeats ", opt.found,
          "/6, ", opt.total_queries, " queries");
  CHECK(opt.found == 6);
  CHECK(opt.found >= spec.found);
  CHECK(opt.total_queries < spec.total_queries);
}
