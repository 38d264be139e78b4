// nnlens/difftest/dflare.hpp -- DFlare: black-box search for inputs on which a compressed model g
// deviates from its original f (Tian et al., TOSEM 2023; spec dflare.md).
//
//   auto r = dflare(f, g, seeds, n, {.image = {1, 28, 28}, .max_queries = 1000, .seed = 1});
//   auto r = dflare(execution::par, f, g, seeds, n, opts);       // seeds on the thread pool
//   auto r = dflare(execution::thrust, f, g, seeds, n, opts);    // seeds in lockstep: one batch of
//                                      queries per round (any batching policy; thrust/black_box.hpp
//                                      wraps a network to run those batches on the thrust device)
//   opts.lockstep = true; dflare(f, g, ...)  the same lockstep driver on the host (black boxes with
//                                      a batching runtime behind them; with execution::par, the
//                                      seeds are split into o.threads groups, one per thread)
//   r.seeds[i].status, .queries, .seconds, .label_f, .label_g, .input   (the triggering input)
//   r.summary()   success rate, mean queries / seconds over the successful seeds
//   merge(r1, r2) the results of disjoint seed sets (threads, processes), sorted by seed index
//
// Per seed (Algorithm 1): query f, g on the seed (a seed on which the top-1 labels already differ
// is skipped and flagged `already_triggering`); then repeatedly mutate the best input so far
// (x_max) with one operator (mutation.hpp), query both models once (one query), and stop at the
// first triggering input: argmax f(x) != argmax g(x) (ties: the lowest index).  Otherwise
//   D(x) = |max_i f(x)_i - max_i g(x)_i|,  O(x) = 1 iff min_{s in S} |s(x) - s|^2 > tau
// with s(x) = [f(x) ‖ g(x)] and S the corpus of novel states (the seed's first; a novel state is
// added whether or not x is accepted; tau = 0.5), H(x) = D(x)/delta + O(x), delta = 1e-3, and
// ACCEPT(x) (acceptance):
//   paper      H(x) >= H(x_max)  (O(x_max) as recorded; the seed's record is (D(x_s), O = 0))
//   reference  |D(x) - D(x_max)| > delta or O(x) = 1  (the reference code's better_than; the
//              seed's record is (D = 0, O = 0))
//   no_novelty DFlare_D (ablation, code mode "c"): H = D, accept iff D(x) > D(x_max) strictly,
//              the seed's record is D = -1 (the first mutant is always accepted); no corpus
// Beyond the spec (off by default): distance = distance_measure::logit_margin replaces D by
// |M_f - M_g| / max(M_f, M_g), M = log p_top - log p_second (the logit margin, recovered from the
// probabilities), in every acceptance rule.  skip_repeats never queries a mutant whose answer is already
// known: one equal to x_max or to a mutant already queried since x_max last changed (the blurs are
// deterministic for a size, and a size-1 blur, a 0-pixel change or noise on black pixels returns
// x_max itself).  Such a mutant cannot trigger (its twin did not) and no rule moves x_max to it
// (reference: |ΔD| = 0 or <= delta and not novel any more; paper: equal to x_max, or rejected
// before with O at least as large), so the queries are pure waste -- except that the paper's >=
// "accepts" a copy of x_max and credits its operator, which steers the selection to no-op
// operators.  A skipped mutant counts as a selection of its operator without success, and the
// next operator is drawn as after a rejection; it is not a query.  Mutants are compared by a
// 64-bit hash of their pixels (x_max also exactly); after max_repeat_skips skips in a row the
// mutant is queried anyway, so a search that no operator can move still ends by its budget.
// An accepted x becomes x_max and counts as a success of its operator; the next operator comes
// from operator_selector (selection.hpp): for selection_rule::paper prev is the operator of this
// iteration, for `reference` and `last_accepted` the operator of the last accepted mutant.  Operator statistics and
// the corpus are reset for every seed.  The budget is per seed: max_queries mutant queries (the
// seed's query is not counted) and/or max_seconds of wall clock, timed from after the seed query.
//
// Lockstep (lockstep.hpp): round 0 queries every seed (one batch per model), then each round every
// active seed proposes one mutant and the round's mutants go to f and to g as one batch each;
// finished seeds (found, budget, failure) drop out.  Each seed keeps its own RNG and state
// (detail::dflare_search), so it takes the same steps as alone.  Its time budget and `seconds`
// run from the end of round 0 (wall time, the other seeds' queries included: a seed's latency,
// not its share); on_seed and the progress bar see seeds in the order they finish.
//
// requires: f and g have the same input_size (= image.size()) and classes; seeds are n images of
//           raw pixels in [0,255], C x H x W; f.predict / g.predict thread-safe for execution::par.
// ensures:  with a query budget only (max_seconds = 0), the result depends only on (f, g, seeds,
//           options): every seed has its own RNG, derived from options.seed and the seed's index,
//           so seq == par and split runs merged == one run; lockstep == seq field for field
//           but `seconds` for black boxes that answer a row alike alone and in a batch (per-sample
//           callables, thrust/black_box.hpp's device kernels; not the host GEMM behind wrap(net)
//           on larger layers, which from 3 rows on sums in another order than for 1 or 2: there
//           the results agree up to rounding, ~1e-8 in a probability, which can flip an
//           acceptance and so change a seed's path; the rounding then also depends on a row's
//           place in its batch, so on the grouping: execution::par + lockstep splits the seeds
//           into o.threads (else the pool's size) contiguous groups).  A black box that throws
//           nnlens::error (or std::exception) for a seed marks that seed `failed` with the
//           message; the other seeds still run (in lockstep, a batch that throws is retried seed
//           by seed, so only the seeds whose own query throws fail: lockstep.hpp).
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_set>
#include <vector>

#include "nnlens/core/error.hpp"
#include "nnlens/core/execution.hpp"
#include "nnlens/core/progress.hpp"
#include "nnlens/core/random.hpp"
#include "nnlens/core/thread_pool.hpp"
#include "nnlens/difftest/black_box.hpp"
#include "nnlens/difftest/lockstep.hpp"
#include "nnlens/difftest/mutation.hpp"
#include "nnlens/difftest/oracle.hpp"
#include "nnlens/difftest/seeds.hpp"
#include "nnlens/difftest/selection.hpp"

namespace nnlens::difftest {

struct dflare_options {
  image_shape image;                 // C x H x W of an input; its size must equal f.input_size
  std::vector<mutation> pool = {reference_pool.begin(), reference_pool.end()};
  mutation_options mutations;
  selection_rule selection = selection_rule::paper;
  acceptance accept = acceptance::paper;
  double delta = 1e-3;               // D's scale in H
  distance_measure distance = distance_measure::top1_probability;  // D; logit_margin: beyond the spec
  double tau = 0.5;                  // novelty threshold (squared L2 on [f ‖ g])
  double epsilon = 1e-7;             // ranking value's epsilon
  std::size_t max_queries = 0;       // per seed; 0: no query limit
  double max_seconds = 180;          // per seed; 0: no time limit (at least one limit must be set)
  std::uint64_t seed = 0;            // RNG seed (each input seed gets its own stream)
  std::size_t first_index = 0;       // index of seeds[0] (for runs over parts of a seed set)
  std::size_t threads = 0;           // execution::par: 0 = the process-wide pool
  bool lockstep = false;             // advance all seeds together, one batch of queries per round
                                     // (lockstep.hpp); always so under a batching policy
  bool skip_repeats = false;         // beyond the spec: do not query a mutant equal to x_max or to a
                                     // mutant queried since x_max last changed (header comment)
  std::size_t max_repeat_skips = 1000;  // skip_repeats: query anyway after this many skips in a row
  bool keep_inputs = true;           // store each triggering input in its seed_result
  bool progress = false;             // a progress bar on stderr
  std::function<void(const seed_result&)> on_seed;  // called after each seed (any thread, serialised)
};

// ---- the search ----------------------------------------------------------------------------------

namespace detail {

using nnlens::detail::splitmix64;  // core/random.hpp

/// A 64-bit hash of an image's values (their bit patterns; +0 and -0 alike): skip_repeats' key.
inline std::uint64_t image_hash(std::span<const float> x) {
  std::uint64_t h = 0x243f6a8885a308d3ULL ^ x.size();
  for (float v : x) {
    std::uint32_t b = 0;
    const float w = v == 0.f ? 0.f : v;
    std::memcpy(&b, &w, sizeof b);
    h = splitmix64(h ^ b);
  }
  return h;
}

inline void check_dflare(const black_box& f, const black_box& g, std::size_t seed_floats, std::size_t n,
                         const dflare_options& o) {
  check_black_boxes("dflare", f, g, seed_floats, n, o.image);
  if (o.pool.empty()) throw value_error("dflare: empty mutation pool");
  if (o.max_queries == 0 && !(o.max_seconds > 0)) throw value_error("dflare: no budget (max_queries = max_seconds = 0)");
  if (!(o.delta > 0) || !(o.tau >= 0)) throw value_error("dflare: delta must be positive and tau non-negative");
}

/// One seed's search (Algorithm 1) as a resumable state (the concept lockstep_search of
/// lockstep.hpp): the first proposal is the seed itself, then one mutant per step; r is filled as
/// the search goes.  propose / observe throw what the checks throw (a seed outside [0,255], a
/// non-finite probability); the caller records a failure.  Runs in any driver: dflare_one below
/// (one seed, queries of one row) or run_lockstep (all seeds, one batch per round), with the same
/// steps, RNG draws and results.
class dflare_search {
 public:
  dflare_search(const black_box& f, const black_box& g, std::span<const float> x_s, const dflare_options& o,
                seed_result& r)
      : f_(&f), g_(&g), o_(&o), r_(&r), x_s_(x_s), rng_(splitmix64(o.seed ^ splitmix64(r.index))),
        sel_(o.pool.size(), o.selection, o.epsilon), corpus_(o.tau) {}

  bool done() const { return phase_ == phase::over; }

  /// Writes the next input to query into x (the seed, then mutants of x_max); false when the
  /// search is over (the budget ran out: r's seconds and corpus are set).
  bool propose(std::span<float> x) {
    if (phase_ == phase::seed) {
      for (float v : x_s_)
        if (!(v >= 0.f && v <= 255.f))
          throw value_error(nnlens::detail::concat("dflare: seed ", r_->index, " has a value ", v,
                                                   " outside the pixel range [0,255]"));
      std::copy(x_s_.begin(), x_s_.end(), x.begin());
      return true;
    }
    if (phase_ == phase::over) return false;
    if ((o_->max_queries && r_->queries >= o_->max_queries) || (o_->max_seconds > 0 && elapsed() >= o_->max_seconds)) {
      finish();
      return false;
    }
    for (std::size_t skips = 0;; ++skips) {
      sel_.record_selection(op_);
      x_.assign(x_max_.begin(), x_max_.end());
      mutate(o_->pool[op_], x_, o_->image, rng_, o_->mutations);
      if (!o_->skip_repeats) break;
      hash_ = image_hash(x_);
      if (skips >= o_->max_repeat_skips || (!seen_.contains(hash_) && x_ != x_max_)) break;
      op_ = next_operator();  // a known answer: as after a rejection, without a query
    }
    std::copy(x_.begin(), x_.end(), x.begin());
    return true;
  }

  /// f's and g's probabilities on the input last proposed.
  void observe(std::span<const float> pf, std::span<const float> pg) {
    seed_result& r = *r_;
    if (phase_ == phase::seed) {
      check_probs(pf, *f_, r.index);
      check_probs(pg, *g_, r.index);
      r.seed_label = top1(pf);
      r.label_f = r.seed_label;
      r.label_g = top1(pg);
      if (is_triggering(pf, pg)) {
        r.status = seed_status::already_triggering;
        phase_ = phase::over;
        return;
      }
      t0_ = clock::now();
      if (use_novelty()) corpus_.insert(pf, pg);
      if (o_->accept == acceptance::paper) best_ = {fitness_distance(o_->distance, pf, pg), false};
      if (o_->accept == acceptance::no_novelty) best_ = {-1.0, false};
      x_max_.assign(x_s_.begin(), x_s_.end());
      if (o_->skip_repeats) seen_ = {image_hash(x_max_)};
      op_ = std::uniform_int_distribution<std::size_t>(0, o_->pool.size() - 1)(rng_);
      r.status = seed_status::not_found;
      phase_ = phase::search;
      return;
    }
    ++r.queries;
    check_probs(pf, *f_, r.index);
    check_probs(pg, *g_, r.index);
    if (is_triggering(pf, pg)) {
      sel_.record_success(op_);
      r.status = seed_status::found;
      r.label_f = top1(pf);
      r.label_g = top1(pg);
      if (o_->keep_inputs) r.input = x_;
      r.probs_f.assign(pf.begin(), pf.end());
      r.probs_g.assign(pg.begin(), pg.end());
      finish();
      return;
    }
    const fitness_record rec{fitness_distance(o_->distance, pf, pg), use_novelty() && corpus_.test_and_insert(pf, pg)};
    const bool accepted = accepts(o_->accept, rec, best_, o_->delta);
    if (accepted) {
      x_max_.swap(x_);
      best_ = rec;
      sel_.record_success(op_);
      last_accepted_ = op_;
      ++r.accepted;
      r.label_f = top1(pf);
      r.label_g = top1(pg);
    }
    if (o_->skip_repeats) {
      if (accepted) seen_.clear();
      seen_.insert(hash_);
    }
    op_ = next_operator();
  }

 private:
  using clock = std::chrono::steady_clock;
  enum class phase : std::uint8_t { seed, search, over };
  bool use_novelty() const { return o_->accept != acceptance::no_novelty; }
  /// SELECT(prev) (selection.hpp): prev = this iteration's operator (paper) or the last accepted one.
  std::size_t next_operator() {
    const bool by_acceptance = o_->selection == selection_rule::reference || o_->selection == selection_rule::last_accepted;
    return sel_.select(by_acceptance ? last_accepted_ : std::optional<std::size_t>(op_), rng_);
  }
  double elapsed() const { return std::chrono::duration<double>(clock::now() - t0_).count(); }
  void finish() {
    r_->seconds = elapsed();
    r_->corpus = corpus_.size();
    phase_ = phase::over;
  }

  const black_box* f_;
  const black_box* g_;
  const dflare_options* o_;
  seed_result* r_;
  std::span<const float> x_s_;
  std::mt19937_64 rng_;
  operator_selector sel_;
  novelty_corpus corpus_;
  std::vector<float> x_max_, x_;
  fitness_record best_;
  std::optional<std::size_t> last_accepted_;
  std::size_t op_ = 0;
  std::uint64_t hash_ = 0;                 // skip_repeats: the hash of the mutant last proposed
  std::unordered_set<std::uint64_t> seen_;  // skip_repeats: x_max and the mutants queried since it changed
  clock::time_point t0_{};
  phase phase_ = phase::seed;
};

/// One seed's search, one query (of one row) per step.  Throws whatever the black boxes throw.
inline void dflare_one(const black_box& f, const black_box& g, std::span<const float> x_s, const dflare_options& o,
                       seed_result& r) {
  dflare_search s(f, g, x_s, o, r);
  std::vector<float> x(f.input_size), pf(f.classes), pg(f.classes);
  while (!s.done() && s.propose(x)) {
    f.predict(x, 1, pf);
    g.predict(x, 1, pg);
    s.observe(pf, pg);
  }
}

/// DFlare's lockstep driver (lockstep.hpp): the seeds in `groups` contiguous groups (for_each_group),
/// each group's searches advanced together, one batch of queries per round; stats (if given)
/// receives the merged lockstep statistics.
template <class Policy>
dflare_result dflare_lockstep(const black_box& f, const black_box& g, std::span<const float> seeds, std::size_t n,
                              const dflare_options& o, lockstep_stats* stats = nullptr) {
  dflare_result res;
  res.seeds.resize(n);
  seed_reporter<dflare_options> rep("dflare", n, o);
  std::size_t groups = n ? 1 : 0;
  if constexpr (execution::is_host_parallel_policy_v<Policy>)
    groups = std::min(n, o.threads ? o.threads : nnlens::detail::default_pool().size());
  std::mutex m;
  for_each_group<Policy>(groups, o, [&](std::size_t gi) {
    const std::size_t b = gi * n / groups, e = (gi + 1) * n / groups, isz = f.input_size;
    std::vector<dflare_search> searches;
    searches.reserve(e - b);
    for (std::size_t i = b; i < e; ++i) {
      res.seeds[i].index = o.first_index + i;
      searches.emplace_back(f, g, seeds.subspan(i * isz, isz), o, res.seeds[i]);
    }
    lockstep_stats st;
    run_lockstep(f, g, std::span<dflare_search>(searches), [&](std::size_t j, const std::exception_ptr& err) {
      seed_result& r = res.seeds[b + j];
      if (err) fail_seed(r, err);
      rep.report(r);
    }, &st);
    if (stats) {
      std::lock_guard lk(m);
      *stats = merge(*stats, st);
    }
  });
  rep.finish(res);
  return res;
}

}  // namespace detail

/// DFlare over n seeds (raw pixel images, row-major), with the given execution policy: seeds one
/// by one (seq: in order, par: on the pool), or in lockstep (a batching policy such as
/// execution::thrust, or options.lockstep: header comment).
template <class Policy>
  requires execution::is_execution_policy_v<Policy>
dflare_result dflare(const Policy&, const black_box& f, const black_box& g, std::span<const float> seeds, std::size_t n,
                     const dflare_options& o) {
  detail::check_dflare(f, g, seeds.size(), n, o);
  if (execution::is_batching_policy_v<Policy> || o.lockstep) return detail::dflare_lockstep<Policy>(f, g, seeds, n, o);
  return detail::run_seeds<Policy>("dflare", f.input_size, seeds, n, o,
                                   [&](std::span<const float> x, seed_result& r) { detail::dflare_one(f, g, x, o, r); });
}

/// DFlare over n seeds with the build's default policy (execution::seq; execution::thrust, i.e.
/// lockstep, in the *_thrust test builds: core/execution.hpp, default_dispatch).
inline dflare_result dflare(const black_box& f, const black_box& g, std::span<const float> seeds, std::size_t n,
                            const dflare_options& o) {
  return execution::with_default_policy([&](const auto& pol) { return dflare(pol, f, g, seeds, n, o); });
}

}  // namespace nnlens::difftest
