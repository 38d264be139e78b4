// nnlens/difftest/lockstep.hpp -- the lockstep driver: many per-seed searches advance together,
// one query each per round, and the queries of a round go to each black box as one batch.
//
//   auto r = dflare(execution::thrust, f, g, seeds, n, opts);  // a batching policy: lockstep
//   opts.lockstep = true;  dflare(f, g, seeds, n, opts);       // the same on the host (a black box
//                                                             // with a batching runtime behind it)
//   detail::run_lockstep(f, g, searches, finished, &stats)     // the driver itself (any search)
//
// A search is a resumable per-seed state machine (concept lockstep_search; DFlare's is
// detail::dflare_search in dflare.hpp):
//   s.propose(x)   writes the next input to query into x (input_size floats) and returns true, or
//                  returns false when the search is over without a query (e.g. its budget ran out)
//   s.observe(pf, pg)  takes f's and g's probabilities on that input
//   s.done()       true once the search is over (found, already triggering, budget)
// Sequentially, a search runs as `while (s.propose(x)) { f(x, 1); g(x, 1); s.observe(...); if
// (s.done()) break; }`.  run_lockstep runs m searches as rounds: every active search proposes one
// input; the k proposals go to f.predict(x, k, pf) and g.predict(x, k, pg) as one batch each;
// every search observes its row; searches that are done (or failed) leave.  A search never sees
// another's inputs or RNG, so every search takes exactly the steps it takes alone: results equal
// the sequential driver's whenever the black boxes answer a row the same in a batch and alone
// (per-sample callables, the thrust device kernels; the host GEMM behind wrap(net) sums larger
// layers in another order from 3 rows on, so there results agree only up to float rounding).
//
// Failures: an exception from propose or observe fails that search only.  A black box that throws
// on a batch gets the round again seed by seed (f's batch failed: f then g per seed; only g's:
// g per seed, f's batch answers kept), so only the seeds whose own query throws fail and the others
// keep their results and go on; a black box with side effects per call (an external process) sees
// the rows of such a round twice.  finished(i, error) is called once per search, in the order they
// finish, on the calling thread (error null: the search ended normally); an exception thrown by
// finished itself (e.g. from options.on_seed) leaves run_lockstep.
//
// requires: f and g have the same input_size and classes as the searches expect; predict follows
//           black_box's contract (n rows in, n rows out).
// ensures:  at most one f batch and one g batch per round (plus the retries above); batch sizes
//           are the numbers of active searches, each <= m.
#pragma once

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <exception>
#include <span>
#include <vector>

#include "nnlens/difftest/black_box.hpp"

namespace nnlens::difftest {

/// A resumable per-seed search (header comment).
template <class S>
concept lockstep_search = requires(S& s, const S& cs, std::span<float> x, std::span<const float> p) {
  { s.propose(x) } -> std::convertible_to<bool>;
  s.observe(p, p);
  { cs.done() } -> std::convertible_to<bool>;
};

/// What a lockstep run did (for tests and benchmarks).
struct lockstep_stats {
  std::size_t rounds = 0;          // rounds with at least one query
  std::size_t rows = 0;            // inputs queried (each to f and to g), seed queries included
  std::size_t max_batch = 0;       // the largest batch
  std::size_t retried_rounds = 0;  // rounds retried seed by seed after a batch threw

  /// The union of two runs' statistics (rounds and rows add, max_batch is the larger).
  friend lockstep_stats merge(lockstep_stats a, const lockstep_stats& b) {
    a.rounds += b.rounds, a.rows += b.rows, a.retried_rounds += b.retried_rounds;
    a.max_batch = std::max(a.max_batch, b.max_batch);
    return a;
  }
};

namespace detail {

/// Runs the searches in lockstep (header comment); finished(i, std::exception_ptr) once per search.
template <lockstep_search Search, class Finished>
void run_lockstep(const black_box& f, const black_box& g, std::span<Search> searches, Finished&& finished,
                  lockstep_stats* stats = nullptr) {
  const std::size_t m = searches.size(), isz = f.input_size, c = f.classes;
  std::vector<std::size_t> active(m), batch;
  for (std::size_t i = 0; i < m; ++i) active[i] = i;
  std::vector<char> alive;
  std::vector<float> x(m * isz), pf(m * c), pg(m * c);
  auto row = [](std::vector<float>& v, std::size_t j, std::size_t w) { return std::span<float>(v.data() + j * w, w); };
  // One model on row j alone; a throw fails row j's search.
  auto one_row = [&](const black_box& b, std::vector<float>& out, std::size_t j) {
    std::exception_ptr err;
    try {
      b.predict(row(x, j, isz), 1, row(out, j, c));
    } catch (...) {
      err = std::current_exception();
    }
    if (err) alive[j] = 0, finished(batch[j], err);
  };
  // One model over the batch; if the batch throws, row by row (one_row).
  auto query = [&](const black_box& b, std::vector<float>& out, std::size_t k, bool& retried) {
    try {
      b.predict(std::span<const float>(x.data(), k * isz), k, std::span<float>(out.data(), k * c));
      return;
    } catch (...) {
      retried = true;
    }
    for (std::size_t j = 0; j < k; ++j)
      if (alive[j]) one_row(b, out, j);
  };
  while (!active.empty()) {
    batch.clear();
    for (std::size_t i : active) {
      bool proposed = false;
      std::exception_ptr err;
      try {
        proposed = searches[i].propose(row(x, batch.size(), isz));
      } catch (...) {
        err = std::current_exception();
      }
      if (proposed)
        batch.push_back(i);
      else
        finished(i, err);  // outside the try: an exception of finished() itself propagates
    }
    const std::size_t k = batch.size();
    if (k == 0) break;
    alive.assign(k, 1);
    bool retried = false;
    query(f, pf, k, retried);
    if (retried) {  // f's rows came one by one; g's come one by one too (only where f answered)
      for (std::size_t j = 0; j < k; ++j)
        if (alive[j]) one_row(g, pg, j);
    } else {
      query(g, pg, k, retried);
    }
    if (stats) {
      ++stats->rounds;
      stats->rows += k;
      stats->max_batch = std::max(stats->max_batch, k);
      stats->retried_rounds += retried;
    }
    active.clear();
    for (std::size_t j = 0; j < k; ++j) {
      if (!alive[j]) continue;
      const std::size_t i = batch[j];
      bool over = true;
      std::exception_ptr err;
      try {
        searches[i].observe(row(pf, j, c), row(pg, j, c));
        over = searches[i].done();
      } catch (...) {
        err = std::current_exception();
      }
      if (over)
        finished(i, err);
      else
        active.push_back(i);
    }
  }
}

}  // namespace detail
}  // namespace nnlens::difftest
