// nnlens/difftest/dflare.hpp -- DFlare: black-box search for inputs on which a compressed model g
// deviates from its original f (Tian et al., TOSEM 2023; spec dflare.md).
//
//   auto r = dflare(f, g, seeds, n, {.image = {1, 28, 28}, .max_queries = 1000, .seed = 1});
//   auto r = dflare(execution::par, f, g, seeds, n, opts);       // seeds on the thread pool
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
// An accepted x becomes x_max and counts as a success of its operator; the next operator comes
// from operator_selector (selection.hpp): for selection_rule::paper prev is the operator of this
// iteration, for `reference` and `last_accepted` the operator of the last accepted mutant.  Operator statistics and
// the corpus are reset for every seed.  The budget is per seed: max_queries mutant queries (the
// seed's query is not counted) and/or max_seconds of wall clock, timed from after the seed query.
//
// requires: f and g have the same input_size (= image.size()) and classes; seeds are n images of
//           raw pixels in [0,255], C x H x W; f.predict / g.predict thread-safe for execution::par.
// ensures:  with a query budget only (max_seconds = 0), the result depends only on (f, g, seeds,
//           options): every seed has its own RNG, derived from options.seed and the seed's index,
//           so seq == par and split runs merged == one run.  A black box that throws
//           nnlens::error (or std::exception) for a seed marks that seed `failed` with the message;
//           the other seeds still run.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "nnlens/core/error.hpp"
#include "nnlens/core/execution.hpp"
#include "nnlens/core/progress.hpp"
#include "nnlens/core/thread_pool.hpp"
#include "nnlens/difftest/black_box.hpp"
#include "nnlens/difftest/mutation.hpp"
#include "nnlens/difftest/selection.hpp"

namespace nnlens::difftest {

// ---- oracle, fitness, novelty ----------------------------------------------------------------------

/// argmax with ties resolved to the lowest index.
inline std::size_t top1(std::span<const float> p) {
  return std::size_t(std::max_element(p.begin(), p.end()) - p.begin());
}
/// The oracle: the top-1 labels differ.
inline bool is_triggering(std::span<const float> f, std::span<const float> g) { return top1(f) != top1(g); }
/// D(x) = |max f(x) - max g(x)| (each model's own top-1 probability).
inline double output_distance(std::span<const float> f, std::span<const float> g) {
  return std::abs(double(*std::max_element(f.begin(), f.end())) - double(*std::max_element(g.begin(), g.end())));
}

/// Exact nearest-neighbour novelty over states [f ‖ g]: novel iff the squared L2 distance to every
/// stored state exceeds tau.  test_and_insert stores a novel state.
class novelty_corpus {
 public:
  explicit novelty_corpus(double tau = 0.5) : tau_(tau) {}
  void clear() { data_.clear(), dim_ = 0; }
  std::size_t size() const { return dim_ ? data_.size() / dim_ : 0; }
  double tau() const { return tau_; }

  /// min over stored states of |s - state|^2 (+inf when empty).
  double distance(std::span<const float> f, std::span<const float> g) const {
    double best = INFINITY;
    const std::size_t d = f.size() + g.size();
    if (d != dim_) return best;
    for (std::size_t r = 0; r < data_.size(); r += d) {
      double s = 0;
      for (std::size_t i = 0; i < f.size(); ++i) s += sq(double(f[i]) - double(data_[r + i]));
      for (std::size_t i = 0; i < g.size(); ++i) s += sq(double(g[i]) - double(data_[r + f.size() + i]));
      best = std::min(best, s);
    }
    return best;
  }
  void insert(std::span<const float> f, std::span<const float> g) {
    if (dim_ == 0) dim_ = f.size() + g.size();
    if (f.size() + g.size() != dim_) throw shape_error("novelty_corpus: state of another size");
    data_.insert(data_.end(), f.begin(), f.end());
    data_.insert(data_.end(), g.begin(), g.end());
  }
  /// O(x): true (and stores the state) iff its distance to the corpus exceeds tau.
  bool test_and_insert(std::span<const float> f, std::span<const float> g) {
    if (!(distance(f, g) > tau_)) return false;
    insert(f, g);
    return true;
  }

 private:
  static double sq(double v) { return v * v; }
  double tau_;
  std::size_t dim_ = 0;
  std::vector<float> data_;
};

enum class acceptance : std::uint8_t { paper, reference, no_novelty };

/// The fitness record of an evaluated input: D and O.
struct fitness_record {
  double d = 0;
  bool novel = false;
};

/// ACCEPT(x, x_max) for each acceptance rule (header comment).
inline bool accepts(acceptance rule, const fitness_record& x, const fitness_record& best, double delta = 1e-3) {
  switch (rule) {
    case acceptance::paper: return x.d / delta + double(x.novel) >= best.d / delta + double(best.novel);
    case acceptance::reference: return std::abs(x.d - best.d) > delta || x.novel;
    case acceptance::no_novelty: return x.d > best.d;
  }
  return false;
}

// ---- options and results -----------------------------------------------------------------------------

enum class seed_status : std::uint8_t {
  found,               // a triggering input was found
  not_found,           // the budget ran out
  already_triggering,  // the seed itself triggers: skipped, not counted
  failed,              // a black box threw: see error
};

constexpr std::string_view to_string(seed_status s) {
  switch (s) {
    case seed_status::found: return "found";
    case seed_status::not_found: return "not_found";
    case seed_status::already_triggering: return "already_triggering";
    case seed_status::failed: return "failed";
  }
  return "?";
}

struct seed_result {
  std::size_t index = 0;                 // position in the seed set (first_index + i)
  seed_status status = seed_status::not_found;
  std::size_t queries = 0;               // mutant queries (both models once each), the seed's excluded
  double seconds = 0;                    // from after the seed query to the end of the search
  std::size_t seed_label = 0;            // top-1 of f on the seed
  std::size_t label_f = 0, label_g = 0;  // top-1 labels on the triggering input (or the last x_max)
  std::vector<float> input;              // the triggering input (raw pixels), if found and kept
  std::vector<float> probs_f, probs_g;   // f and g on that input
  std::size_t accepted = 0;              // mutants accepted as x_max
  std::size_t corpus = 0;                // final corpus size
  std::string error;                     // status failed: the exception's message
  bool found() const { return status == seed_status::found; }
};

struct dflare_options {
  image_shape image;                 // C x H x W of an input; its size must equal f.input_size
  std::vector<mutation> pool = {reference_pool.begin(), reference_pool.end()};
  mutation_options mutations;
  selection_rule selection = selection_rule::paper;
  acceptance accept = acceptance::paper;
  double delta = 1e-3;               // D's scale in H
  double tau = 0.5;                  // novelty threshold (squared L2 on [f ‖ g])
  double epsilon = 1e-7;             // ranking value's epsilon
  std::size_t max_queries = 0;       // per seed; 0: no query limit
  double max_seconds = 180;          // per seed; 0: no time limit (at least one limit must be set)
  std::uint64_t seed = 0;            // RNG seed (each input seed gets its own stream)
  std::size_t first_index = 0;       // index of seeds[0] (for runs over parts of a seed set)
  std::size_t threads = 0;           // execution::par: 0 = the process-wide pool
  bool keep_inputs = true;           // store each triggering input in its seed_result
  bool progress = false;             // a progress bar on stderr
  std::function<void(const seed_result&)> on_seed;  // called after each seed (any thread, serialised)
};

struct dflare_summary {
  std::size_t seeds = 0, searched = 0, found = 0, not_found = 0, already_triggering = 0, failed = 0;
  double success_rate = 0;  // found / (found + not_found)
  double mean_queries = 0;  // over the successful seeds
  double mean_seconds = 0;  // over the successful seeds
  std::size_t total_queries = 0;
};

struct dflare_result {
  std::vector<seed_result> seeds;  // sorted by index

  dflare_summary summary() const {
    dflare_summary s;
    s.seeds = seeds.size();
    double q = 0, t = 0;
    for (const auto& r : seeds) {
      s.total_queries += r.queries;
      switch (r.status) {
        case seed_status::found: ++s.found, q += double(r.queries), t += r.seconds; break;
        case seed_status::not_found: ++s.not_found; break;
        case seed_status::already_triggering: ++s.already_triggering; break;
        case seed_status::failed: ++s.failed; break;
      }
    }
    s.searched = s.found + s.not_found;
    if (s.searched) s.success_rate = double(s.found) / double(s.searched);
    if (s.found) s.mean_queries = q / double(s.found), s.mean_seconds = t / double(s.found);
    return s;
  }
};

/// The results of two disjoint seed sets, sorted by seed index.
inline dflare_result merge(dflare_result a, const dflare_result& b) {
  a.seeds.insert(a.seeds.end(), b.seeds.begin(), b.seeds.end());
  std::stable_sort(a.seeds.begin(), a.seeds.end(), [](const seed_result& x, const seed_result& y) { return x.index < y.index; });
  return a;
}

// ---- the search ----------------------------------------------------------------------------------

namespace detail {

inline std::uint64_t splitmix64(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

inline void check_dflare(const black_box& f, const black_box& g, std::size_t seed_floats, std::size_t n,
                         const dflare_options& o) {
  using nnlens::detail::concat;
  if (!f.predict || !g.predict) throw value_error("dflare: a black box has no predict function");
  if (f.input_size != g.input_size || f.classes != g.classes)
    throw shape_error(concat("dflare: '", f.name, "' (", f.input_size, " -> ", f.classes, ") and '", g.name, "' (",
                             g.input_size, " -> ", g.classes, ") differ in shape"));
  if (f.classes < 2) throw shape_error("dflare: the black boxes need at least 2 classes");
  if (o.image.size() != f.input_size)
    throw shape_error(concat("dflare: options.image is ", o.image.channels, "x", o.image.height, "x", o.image.width, " (",
                             o.image.size(), " values) but the black boxes read ", f.input_size));
  if (seed_floats != n * f.input_size)
    throw shape_error(concat("dflare: ", seed_floats, " seed values for ", n, " seeds of ", f.input_size));
  if (o.pool.empty()) throw value_error("dflare: empty mutation pool");
  if (o.max_queries == 0 && !(o.max_seconds > 0)) throw value_error("dflare: no budget (max_queries = max_seconds = 0)");
  if (!(o.delta > 0) || !(o.tau >= 0)) throw value_error("dflare: delta must be positive and tau non-negative");
}

/// Throws value_error unless p holds finite probabilities (a black box's answer).
inline void check_probs(std::span<const float> p, const black_box& b, std::size_t seed) {
  for (float v : p)
    if (!std::isfinite(v))
      throw value_error(nnlens::detail::concat("dflare: black box '", b.name, "' returned a non-finite probability for seed ", seed));
}

/// One seed's search (Algorithm 1).  Throws whatever the black boxes throw.
inline void dflare_one(const black_box& f, const black_box& g, std::span<const float> x_s, const dflare_options& o,
                       seed_result& r) {
  using clock = std::chrono::steady_clock;
  const std::size_t c = f.classes, isz = f.input_size;
  std::mt19937_64 rng(splitmix64(o.seed ^ splitmix64(r.index)));
  std::vector<float> pf(c), pg(c), x_max(x_s.begin(), x_s.end()), x(isz);
  for (float v : x_s)
    if (!(v >= 0.f && v <= 255.f))
      throw value_error(nnlens::detail::concat("dflare: seed ", r.index, " has a value ", v, " outside the pixel range [0,255]"));
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
  operator_selector sel(o.pool.size(), o.selection, o.epsilon);
  novelty_corpus corpus(o.tau);
  const bool use_novelty = o.accept != acceptance::no_novelty;
  if (use_novelty) corpus.insert(pf, pg);
  fitness_record best;
  if (o.accept == acceptance::paper) best = {output_distance(pf, pg), false};
  if (o.accept == acceptance::no_novelty) best = {-1.0, false};
  std::optional<std::size_t> last_accepted;
  std::size_t op = std::uniform_int_distribution<std::size_t>(0, o.pool.size() - 1)(rng);
  r.status = seed_status::not_found;
  for (;;) {
    if (o.max_queries && r.queries >= o.max_queries) break;
    if (o.max_seconds > 0 && elapsed() >= o.max_seconds) break;
    sel.record_selection(op);
    std::copy(x_max.begin(), x_max.end(), x.begin());
    mutate(o.pool[op], x, o.image, rng, o.mutations);
    f.predict(x, 1, pf);
    g.predict(x, 1, pg);
    ++r.queries;
    check_probs(pf, f, r.index);
    check_probs(pg, g, r.index);
    if (is_triggering(pf, pg)) {
      sel.record_success(op);
      r.status = seed_status::found;
      r.label_f = top1(pf);
      r.label_g = top1(pg);
      if (o.keep_inputs) r.input = x;
      r.probs_f = pf;
      r.probs_g = pg;
      break;
    }
    const fitness_record rec{output_distance(pf, pg), use_novelty && corpus.test_and_insert(pf, pg)};
    if (accepts(o.accept, rec, best, o.delta)) {
      x_max.swap(x);
      best = rec;
      sel.record_success(op);
      last_accepted = op;
      ++r.accepted;
      r.label_f = top1(pf);
      r.label_g = top1(pg);
    }
    const bool by_acceptance = o.selection == selection_rule::reference || o.selection == selection_rule::last_accepted;
    op = sel.select(by_acceptance ? last_accepted : std::optional<std::size_t>(op), rng);
  }
  r.seconds = elapsed();
  r.corpus = corpus.size();
}

}  // namespace detail

namespace detail {

/// The per-seed driver shared by dflare() and diffchaser(): search(seed, result) on each of the n
/// seeds (seq: in order; par: on the thread pool, o.threads of them if set), result.index =
/// o.first_index + i; an exception fails that seed only (status failed, the message kept); the
/// progress bar and o.on_seed see each finished seed (serialised).
template <class Policy, class Options, class Search>
dflare_result run_seeds(const char* label, std::size_t input_size, std::span<const float> seeds, std::size_t n, const Options& o,
                        Search&& search) {
  dflare_result res;
  res.seeds.resize(n);
  std::mutex m;
  std::size_t done = 0, found = 0, searched = 0;
  std::unique_ptr<progress_bar> bar;
  if (o.progress) bar = std::make_unique<progress_bar>(label, n);
  auto run = [&](std::size_t i) {
    seed_result& r = res.seeds[i];
    r.index = o.first_index + i;
    try {
      search(seeds.subspan(i * input_size, input_size), r);
    } catch (const std::exception& e) {
      r.status = seed_status::failed;
      r.error = e.what();
      r.input.clear();
    } catch (...) {
      r.status = seed_status::failed;
      r.error = "unknown exception";
      r.input.clear();
    }
    if (!bar && !o.on_seed) return;
    std::lock_guard lk(m);
    ++done;
    found += r.found();
    searched += r.found() || r.status == seed_status::not_found;
    if (o.on_seed) o.on_seed(r);
    if (bar) bar->update(done, [&] { return nnlens::detail::concat("found ", found, "/", searched); });
  };
  if constexpr (std::is_same_v<std::decay_t<Policy>, execution::parallel_policy>) {
    if (o.threads) {
      nnlens::detail::thread_pool pool(o.threads);
      pool.parallel_for(n, run);
    } else {
      nnlens::detail::default_pool().parallel_for(n, run);
    }
  } else {
    for (std::size_t i = 0; i < n; ++i) run(i);
  }
  if (bar) {
    const auto s = res.summary();
    bar->finish(nnlens::detail::concat("found ", s.found, "/", s.searched, "  mean queries ", s.mean_queries));
  }
  return res;
}

}  // namespace detail

/// DFlare over n seeds (raw pixel images, row-major), with the given execution policy.
template <class Policy>
  requires execution::is_execution_policy_v<Policy>
dflare_result dflare(const Policy&, const black_box& f, const black_box& g, std::span<const float> seeds, std::size_t n,
                     const dflare_options& o) {
  detail::check_dflare(f, g, seeds.size(), n, o);
  return detail::run_seeds<Policy>("dflare", f.input_size, seeds, n, o,
                                   [&](std::span<const float> x, seed_result& r) { detail::dflare_one(f, g, x, o, r); });
}

/// Sequential DFlare over n seeds.
inline dflare_result dflare(const black_box& f, const black_box& g, std::span<const float> seeds, std::size_t n,
                            const dflare_options& o) {
  return dflare(execution::seq, f, g, seeds, n, o);
}

}  // namespace nnlens::difftest
