// nnlens/difftest/seeds.hpp -- the per-seed results of a black-box search and the driver DFlare
// and DiffChaser share.
//
//   seed_result / seed_status      one seed's outcome: found, not_found, already_triggering, failed
//   dflare_result r; r.summary()   every seed's result (sorted by index); success rate, mean queries
//   merge(r1, r2)                  the results of disjoint seed sets, sorted by seed index
//   detail::check_black_boxes(who, f, g, seed_floats, n, image)   the checks both searches make
//   detail::run_seeds<Policy>(label, input_size, seeds, n, o, search)   search(seed, result) on each
//                                  seed, seq in order or par on the pool; a throw fails that seed only
//
// requires: Options (dflare_options, diffchaser_options) has first_index, threads, progress and
//           on_seed; search(x, r) fills r for the seed x.
// ensures:  result.index = o.first_index + i; the progress bar and o.on_seed see each finished seed
//           (serialised); a seed whose search throws is `failed` with the message, no input.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "nnlens/core/error.hpp"
#include "nnlens/core/execution.hpp"
#include "nnlens/core/progress.hpp"
#include "nnlens/core/thread_pool.hpp"
#include "nnlens/difftest/black_box.hpp"
#include "nnlens/difftest/mutation.hpp"

namespace nnlens::difftest {

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

namespace detail {

/// The checks of a search over n seeds (seed_floats values) common to DFlare and DiffChaser; `who`
/// prefixes the messages.
inline void check_black_boxes(const char* who, const black_box& f, const black_box& g, std::size_t seed_floats, std::size_t n,
                              const image_shape& image) {
  using nnlens::detail::concat;
  if (!f.predict || !g.predict) throw value_error(concat(who, ": a black box has no predict function"));
  if (f.input_size != g.input_size || f.classes != g.classes)
    throw shape_error(concat(who, ": '", f.name, "' (", f.input_size, " -> ", f.classes, ") and '", g.name, "' (",
                             g.input_size, " -> ", g.classes, ") differ in shape"));
  if (f.classes < 2) throw shape_error(concat(who, ": the black boxes need at least 2 classes"));
  if (image.size() != f.input_size)
    throw shape_error(concat(who, ": options.image is ", image.channels, "x", image.height, "x", image.width, " (",
                             image.size(), " values) but the black boxes read ", f.input_size));
  if (seed_floats != n * f.input_size)
    throw shape_error(concat(who, ": ", seed_floats, " seed values for ", n, " seeds of ", f.input_size));
}

/// Records the exception e as seed r's failure (status failed, the message, no input).
inline void fail_seed(seed_result& r, const std::exception_ptr& e) {
  r.status = seed_status::failed;
  r.input.clear();
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    r.error = ex.what();
  } catch (...) {
    r.error = "unknown exception";
  }
}

/// The progress bar and options.on_seed of a run over n seeds: report(r) after each finished seed
/// (any thread; serialised), finish(result) at the end.
template <class Options>
class seed_reporter {
 public:
  seed_reporter(const char* label, std::size_t n, const Options& o) : o_(&o) {
    if (o.progress) bar_ = std::make_unique<progress_bar>(label, n);
  }
  void report(const seed_result& r) {
    if (!bar_ && !o_->on_seed) return;
    std::lock_guard lk(m_);
    ++done_;
    found_ += r.found();
    searched_ += r.found() || r.status == seed_status::not_found;
    if (o_->on_seed) o_->on_seed(r);
    if (bar_) bar_->update(done_, [&] { return nnlens::detail::concat("found ", found_, "/", searched_); });
  }
  void finish(const dflare_result& res) {
    if (!bar_) return;
    const auto s = res.summary();
    bar_->finish(nnlens::detail::concat("found ", s.found, "/", s.searched, "  mean queries ", s.mean_queries));
  }

 private:
  const Options* o_;
  std::unique_ptr<progress_bar> bar_;
  std::mutex m_;
  std::size_t done_ = 0, found_ = 0, searched_ = 0;
};

/// Runs work(i) for i in [0, groups) on the pool the policy names (execution::par: o.threads
/// threads if set, else the process-wide pool); in order on the calling thread otherwise.
template <class Policy, class Options, class Work>
void for_each_group(std::size_t groups, const Options& o, Work&& work) {
  if constexpr (execution::is_host_parallel_policy_v<Policy>) {
    if (o.threads) {
      nnlens::detail::thread_pool pool(o.threads);
      pool.parallel_for(groups, work);
    } else {
      nnlens::detail::default_pool().parallel_for(groups, work);
    }
  } else {
    for (std::size_t i = 0; i < groups; ++i) work(i);
  }
}

/// The per-seed driver shared by dflare() and diffchaser(): search(seed, result) on each of the n
/// seeds (seq: in order; par: on the thread pool, o.threads of them if set), result.index =
/// o.first_index + i; an exception fails that seed only (status failed, the message kept); the
/// progress bar and o.on_seed see each finished seed (serialised).
template <class Policy, class Options, class Search>
dflare_result run_seeds(const char* label, std::size_t input_size, std::span<const float> seeds, std::size_t n, const Options& o,
                        Search&& search) {
  dflare_result res;
  res.seeds.resize(n);
  seed_reporter<Options> rep(label, n, o);
  for_each_group<Policy>(n, o, [&](std::size_t i) {
    seed_result& r = res.seeds[i];
    r.index = o.first_index + i;
    try {
      search(seeds.subspan(i * input_size, input_size), r);
    } catch (...) {
      fail_seed(r, std::current_exception());
    }
    rep.report(r);
  });
  rep.finish(res);
  return res;
}

}  // namespace detail

}  // namespace nnlens::difftest
