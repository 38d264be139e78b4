// nnlens/difftest/diffchaser.hpp -- DiffChaser: the genetic-algorithm baseline DFlare is compared
// with (Xie et al., "DiffChaser: Detecting Disagreements for Deep Neural Networks", IJCAI 2019;
// spec dflare.md §7).
//
//   auto r = diffchaser(f, g, seeds, n, {.image = {1, 28, 28}, .max_queries = 10000, .seed = 1});
//   auto r = diffchaser(execution::par, f, g, seeds, n, opts);
//   r.seeds[i].status, .queries, .seconds, .label_f, .label_g, .input     (difftest/seeds.hpp's seed_result)
//   r.summary()                                                          (difftest/seeds.hpp's summary)
//
// Per seed: query f, g on the seed (already triggering: skipped, as in DFlare).  Then
//   1. initial population: `population` mutants of the seed, each one operator from the pool
//      (mutation.hpp, the operators DFlare shares with DiffChaser), each queried;
//   2. each generation makes `offspring` children: two parents by tournament selection on the
//      fitness, with probability crossover_rate a pixel-wise crossover of them (else a copy of the
//      first), with probability mutation_rate one more mutation; the children are queried (one
//      batch per generation), and the best `population` of parents ∪ children survive ((mu+lambda):
//      DFlare's description, "selectively feeds them back to the pool");
//   3. stop at the first individual, in evaluation order, with argmax f(x) != argmax g(x) (ties:
//      the lowest index), or when the budget runs out.
// Fitness (lower is better): the k-uncertainty  U_k(p) = p_(1) - p_(k), the gap between the highest
// and the k-th highest probability of a probability vector (k = 2: the top-1 margin; a small gap
// means close to a decision boundary), taken on f(x) or g(x): uncertainty_of::either uses
// min(U_k(f(x)), U_k(g(x))) (default), ::f and ::g one model, ::sum both.  It does not compare the
// two models (which is DFlare's point against it).
// Budget and counting are DFlare's (dflare_options): one query = one input through both models,
// the seed's query excluded; max_queries and/or max_seconds per seed, timed from after the seed
// query; a trigger found at position j of a generation's batch counts the queries up to j only.
//
// Spec readings (the DFlare paper gives no DiffChaser parameters; the DiffChaser paper is not in
// seeds/): population 100, offspring 100 per generation, tournament size 2, crossover_rate 0.8
// (uniform pixel-wise: each pixel from either parent with probability 1/2; single_point also
// offered), mutation_rate 0.5, k = 2.  These are this library's proposals, not numbers checked
// against DiffChaser's tool, so Table 4's DiffChaser column is not claimed to be reproduced.
//
// requires: as dflare(): same shapes, raw pixels in [0,255], thread-safe predict for par.
// ensures:  with a query budget only, the result depends only on (f, g, seeds, options) (a per-seed
//           RNG from options.seed and the seed index), so seq == par.  seed_result.accepted counts
//           the children that entered the population; seed_result.corpus the generations run.  A
//           black box that throws (or answers a non-finite probability) marks its seed `failed`;
//           the others still run.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "nnlens/core/error.hpp"
#include "nnlens/core/execution.hpp"
#include "nnlens/core/progress.hpp"
#include "nnlens/core/random.hpp"
#include "nnlens/core/thread_pool.hpp"
#include "nnlens/difftest/black_box.hpp"
#include "nnlens/difftest/mutation.hpp"
#include "nnlens/difftest/oracle.hpp"
#include "nnlens/difftest/seeds.hpp"

namespace nnlens::difftest {

namespace detail {
using nnlens::detail::draw_below;  // core/random.hpp
using nnlens::detail::draw_unit;
using nnlens::detail::splitmix64;
}  // namespace detail

/// U_k(p) = p_(1) - p_(k): the highest minus the k-th highest value (1 <= k <= p.size()).
inline double k_uncertainty(std::span<const float> p, std::size_t k = 2) {
  if (k == 0 || k > p.size())
    throw value_error(nnlens::detail::concat("k_uncertainty: k = ", k, " for ", p.size(), " classes"));
  std::vector<float> s(p.begin(), p.end());
  std::nth_element(s.begin(), s.begin() + std::ptrdiff_t(k - 1), s.end(), std::greater<float>());
  const float kth = s[k - 1];
  const float top = *std::max_element(p.begin(), p.end());
  return double(top) - double(kth);
}

enum class uncertainty_of : std::uint8_t { either, f, g, sum };
enum class crossover_kind : std::uint8_t { uniform, single_point };

/// DiffChaser's fitness of an evaluated input (lower is better).
inline double diffchaser_fitness(std::span<const float> pf, std::span<const float> pg, std::size_t k = 2,
                                 uncertainty_of which = uncertainty_of::either) {
  switch (which) {
    case uncertainty_of::f: return k_uncertainty(pf, k);
    case uncertainty_of::g: return k_uncertainty(pg, k);
    case uncertainty_of::sum: return k_uncertainty(pf, k) + k_uncertainty(pg, k);
    case uncertainty_of::either: break;
  }
  return std::min(k_uncertainty(pf, k), k_uncertainty(pg, k));
}

/// Crossover of two parents into `child` (all the same size): uniform takes each element from a
/// or b with probability 1/2; single_point takes a[0, c) and b[c, size) for c ~ U{1..size-1}.
inline void crossover(std::span<const float> a, std::span<const float> b, std::span<float> child, std::mt19937_64& rng,
                      crossover_kind kind = crossover_kind::uniform) {
  if (a.size() != b.size() || a.size() != child.size())
    throw shape_error(nnlens::detail::concat("crossover: parents of ", a.size(), " and ", b.size(), " values, child of ",
                                             child.size()));
  const std::size_t n = a.size();
  if (kind == crossover_kind::single_point && n > 1) {
    const std::size_t c = 1 + detail::draw_below(rng, n - 1);
    std::copy_n(a.begin(), c, child.begin());
    std::copy(b.begin() + std::ptrdiff_t(c), b.end(), child.begin() + std::ptrdiff_t(c));
    return;
  }
  for (std::size_t i = 0; i < n;) {  // 64 coin flips per draw
    std::uint64_t bits = rng();
    for (int j = 0; j < 64 && i < n; ++j, ++i, bits >>= 1) child[i] = (bits & 1u) ? b[i] : a[i];
  }
}

struct diffchaser_options {
  image_shape image;  // C x H x W of an input; its size must equal f.input_size
  std::vector<mutation> pool = {reference_pool.begin(), reference_pool.end()};
  mutation_options mutations;
  std::size_t population = 100;   // individuals kept
  std::size_t offspring = 100;    // children per generation (each one query)
  std::size_t tournament = 2;     // tournament size of the parent selection
  double crossover_rate = 0.8;
  crossover_kind crossover = crossover_kind::uniform;
  double mutation_rate = 0.5;     // probability that a child gets one more mutation
  std::size_t k = 2;              // k of the k-uncertainty
  uncertainty_of fitness_of = uncertainty_of::either;
  std::size_t max_queries = 0;    // per seed; 0: no query limit
  double max_seconds = 180;       // per seed; 0: no time limit (at least one limit must be set)
  std::uint64_t seed = 0;         // RNG seed (each input seed gets its own stream)
  std::size_t first_index = 0;    // index of seeds[0]
  std::size_t threads = 0;        // execution::par: 0 = the process-wide pool
  bool keep_inputs = true;        // store each triggering input in its seed_result
  bool progress = false;          // a progress bar on stderr
  std::function<void(const seed_result&)> on_seed;  // called after each seed (serialised)
};

/// DiffChaser's results have DFlare's per-seed type, summary and merge().
using diffchaser_result = dflare_result;

namespace detail {

inline void check_diffchaser(const black_box& f, const black_box& g, std::size_t seed_floats, std::size_t n,
                             const diffchaser_options& o) {
  using nnlens::detail::concat;
  check_black_boxes("diffchaser", f, g, seed_floats, n, o.image);
  if (o.pool.empty()) throw value_error("diffchaser: empty mutation pool");
  if (o.population == 0 || o.offspring == 0 || o.tournament == 0)
    throw value_error("diffchaser: population, offspring and tournament must be positive");
  if (o.k < 1 || o.k > f.classes)
    throw value_error(concat("diffchaser: k = ", o.k, " must lie in [1, ", f.classes, "]"));
  if (!(o.crossover_rate >= 0 && o.crossover_rate <= 1) || !(o.mutation_rate >= 0 && o.mutation_rate <= 1))
    throw value_error("diffchaser: crossover_rate and mutation_rate must lie in [0, 1]");
  if (o.max_queries == 0 && !(o.max_seconds > 0))
    throw value_error("diffchaser: no budget (max_queries = max_seconds = 0)");
}

/// One seed's genetic search.  Throws whatever the black boxes throw.
inline void diffchaser_one(const black_box& f, const black_box& g, std::span<const float> x_s,
                           const diffchaser_options& o, seed_result& r) {
  using clock = std::chrono::steady_clock;
  const std::size_t c = f.classes, isz = f.input_size;
  std::mt19937_64 rng(splitmix64(o.seed ^ splitmix64(r.index) ^ 0xd1ffc4a5e5ULL));
  for (float v : x_s)
    if (!(v >= 0.f && v <= 255.f))
      throw value_error(nnlens::detail::concat("diffchaser: seed ", r.index, " has a value ", v,
                                               " outside the pixel range [0,255]"));
  std::vector<float> pf(c), pg(c);
  f.predict(x_s, 1, pf);
  g.predict(x_s, 1, pg);
  check_probs(pf, f, r.index);
  check_probs(pg, g, r.index);
  r.seed_label = top1(pf);
  r.label_f = r.seed_label;
  r.label_g = top1(pg);
  if (is_triggering(pf, pg)) {
    r.status = seed_status::already_triggering;
    return;
  }
  const auto t0 = clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(clock::now() - t0).count(); };
  auto out_of_budget = [&] {
    return (o.max_queries && r.queries >= o.max_queries) || (o.max_seconds > 0 && elapsed() >= o.max_seconds);
  };
  r.status = seed_status::not_found;

  // Population: pixels (pop x isz) and fitness; children in a batch buffer.
  std::vector<float> pop, pop_fit, kids, kid_f, kid_g, kid_fit;
  std::size_t pop_n = 0;
  // Queries a batch of m individuals (kids[0, m*isz)); returns true if one triggers (r filled).
  auto evaluate = [&](std::size_t m) {
    kid_f.resize(m * c);
    kid_g.resize(m * c);
    f.predict(std::span<const float>(kids.data(), m * isz), m, kid_f);
    g.predict(std::span<const float>(kids.data(), m * isz), m, kid_g);
    check_probs(kid_f, f, r.index);
    check_probs(kid_g, g, r.index);
    kid_fit.resize(m);
    for (std::size_t j = 0; j < m; ++j) {
      const std::span<const float> a(kid_f.data() + j * c, c), b(kid_g.data() + j * c, c);
      ++r.queries;
      if (is_triggering(a, b)) {
        r.status = seed_status::found;
        r.label_f = top1(a);
        r.label_g = top1(b);
        if (o.keep_inputs) r.input.assign(kids.begin() + std::ptrdiff_t(j * isz), kids.begin() + std::ptrdiff_t((j + 1) * isz));
        r.probs_f.assign(a.begin(), a.end());
        r.probs_g.assign(b.begin(), b.end());
        return true;
      }
      kid_fit[j] = float(diffchaser_fitness(a, b, o.k, o.fitness_of));
    }
    return false;
  };
  auto batch_size = [&](std::size_t want) {
    return o.max_queries ? std::min(want, o.max_queries - r.queries) : want;
  };

  // 1. The initial population: mutants of the seed.
  {
    const std::size_t m = batch_size(o.population);
    kids.resize(m * isz);
    for (std::size_t j = 0; j < m; ++j) {
      const std::span<float> x(kids.data() + j * isz, isz);
      std::copy(x_s.begin(), x_s.end(), x.begin());
      mutate(o.pool[draw_below(rng, o.pool.size())], x, o.image, rng, o.mutations);
    }
    if (m > 0 && evaluate(m)) {
      r.seconds = elapsed();
      return;
    }
    pop.assign(kids.begin(), kids.begin() + std::ptrdiff_t(m * isz));
    pop_fit.assign(kid_fit.begin(), kid_fit.begin() + std::ptrdiff_t(m));
    pop_n = m;
  }
  // 2. Generations.
  std::vector<std::size_t> order;
  std::vector<float> next, next_fit;
  auto tournament = [&] {
    std::size_t best = draw_below(rng, pop_n);
    for (std::size_t t = 1; t < o.tournament; ++t) {
      const std::size_t cand = draw_below(rng, pop_n);
      if (pop_fit[cand] < pop_fit[best]) best = cand;
    }
    return best;
  };
  std::size_t generations = 0;
  while (pop_n > 0 && !out_of_budget()) {
    const std::size_t m = batch_size(o.offspring);
    kids.resize(m * isz);
    for (std::size_t j = 0; j < m; ++j) {
      const std::span<float> x(kids.data() + j * isz, isz);
      const std::size_t a = tournament();
      const std::span<const float> pa(pop.data() + a * isz, isz);
      if (draw_unit(rng) < o.crossover_rate) {
        const std::size_t b = tournament();
        crossover(pa, std::span<const float>(pop.data() + b * isz, isz), x, rng, o.crossover);
      } else {
        std::copy(pa.begin(), pa.end(), x.begin());
      }
      if (draw_unit(rng) < o.mutation_rate) mutate(o.pool[draw_below(rng, o.pool.size())], x, o.image, rng, o.mutations);
    }
    ++generations;
    if (evaluate(m)) break;
    // (mu + lambda): the best `population` of parents and children survive (stable: parents first).
    const std::size_t total = pop_n + m;
    order.resize(total);
    std::iota(order.begin(), order.end(), std::size_t(0));
    auto fit_of = [&](std::size_t i) { return i < pop_n ? pop_fit[i] : kid_fit[i - pop_n]; };
    std::stable_sort(order.begin(), order.end(), [&](std::size_t i, std::size_t j) { return fit_of(i) < fit_of(j); });
    const std::size_t keep = std::min(o.population, total);
    next.resize(keep * isz);
    next_fit.resize(keep);
    for (std::size_t s = 0; s < keep; ++s) {
      const std::size_t i = order[s];
      const float* src = i < pop_n ? pop.data() + i * isz : kids.data() + (i - pop_n) * isz;
      std::copy_n(src, isz, next.data() + s * isz);
      next_fit[s] = fit_of(i);
      r.accepted += i >= pop_n;
    }
    pop.swap(next);
    pop_fit.swap(next_fit);
    pop_n = keep;
  }
  r.corpus = generations;
  r.seconds = elapsed();
}

}  // namespace detail

/// DiffChaser over n seeds (raw pixel images, row-major), with the given execution policy.
template <class Policy>
  requires execution::is_execution_policy_v<Policy>
diffchaser_result diffchaser(const Policy&, const black_box& f, const black_box& g, std::span<const float> seeds,
                             std::size_t n, const diffchaser_options& o) {
  detail::check_diffchaser(f, g, seeds.size(), n, o);
  return detail::run_seeds<Policy>("diffchaser", f.input_size, seeds, n, o,
                                   [&](std::span<const float> x, seed_result& r) { detail::diffchaser_one(f, g, x, o, r); });
}

/// Sequential DiffChaser over n seeds.
inline diffchaser_result diffchaser(const black_box& f, const black_box& g, std::span<const float> seeds, std::size_t n,
                                    const diffchaser_options& o) {
  return diffchaser(execution::seq, f, g, seeds, n, o);
}

}  // namespace nnlens::difftest
