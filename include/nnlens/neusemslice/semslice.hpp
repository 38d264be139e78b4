// nnlens/neusemslice/semslice.hpp -- NeuSemSlice: neuron-level semantic slicing (
// docs/specs/neusemslice.md#22-contribution-metrics (§2.2-§2.6), Algorithm 1).
//
//   auto r = semslice([policy,] net, X, labels, {.metric = metric::taylor, .theta = 0.95});
//       r.mask    neuron_mask: per unit (neuron_units(net)) the union over categories of the
//                 critical neurons; the output unit keeps every neuron
//       r.report  per unit and category: k, the final sim, the blocks scanned, the order and the
//                 scores; m (samples in the Gram matrices) per category
//   neuron_scores([policy,] net, X, labels, metric, o)           [unit][neuron] on all of X, each
//                 sample's target = its label (global slicing)
//   category_neuron_scores([policy,] net, X, labels, metric, categories, o)  [category][unit][neuron]
//   global_topk_mask(net, scores, k)      the top k% of each layer (§2.6 global slicing)
//   category_topk_mask(net, scores_c, k)  the top k% per category, then the union (category-wise)
//
// Metrics (§2.2: avg, var, ens, taylor, deeplift): neusemslice/metrics.hpp, computed on D_c (all
// of it unless semslice_options::metric_samples caps it).
// The scan (Algorithm 1, cka.hpp): order by score descending (ties to the lower index), blocks of
// step (0: default_step(width) = max(1, ceil(1%))) until sim >= theta or every neuron is in.
// Samples per category for the Gram matrices: m = min(|D_c|, samples_per_category), drawn without
// replacement by a portable Fisher-Yates with mt19937_64(seed mixed with c) (all of D_c when it is
// small enough), then taken in dataset order (sim does not depend on the order).
// execution::par runs categories in parallel (neuron_scores: mini-batches); the result is the same
// as with execution::seq (per-batch partial results are merged in batch order).
// Errors: theta outside (0, 1] -> value_error; samples_per_category or batch == 0 -> value_error;
// a category with no samples (or out of range, or repeated) -> data_error naming it; X not
// [N, input] -> shape_error; NaN/Inf input -> value_error; a label out of range -> data_error.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "nnlens/core/error.hpp"
#include "nnlens/core/properties.hpp"
#include "nnlens/core/execution.hpp"
#include "nnlens/core/finite.hpp"
#include "nnlens/core/random.hpp"
#include "nnlens/core/thread_pool.hpp"
#include "nnlens/network/forward.hpp"
#include "nnlens/network/trace.hpp"
#include "nnlens/neusemslice/cka.hpp"
#include "nnlens/neusemslice/metrics.hpp"
#include "nnlens/neusemslice/neuron_mask.hpp"
#include "nnlens/train/loss.hpp"

namespace nnlens {

struct semslice_options {
  nnlens::metric metric = nnlens::metric::taylor;  // A12
  double theta = 0.95;
  nnlens::similarity similarity = nnlens::similarity::linear_cka;
  nnlens::feature_map features = nnlens::feature_map::full;
  std::size_t step = 0;                    // 0: default_step(width)
  std::size_t samples_per_category = 500;  // m = min(|D_c|, this)  (A9)
  std::uint64_t seed = 0;
  std::vector<std::size_t> categories;     // empty: every output class (each must have samples)
  std::size_t metric_samples = 0;          // 0: metrics on all of D_c; else at most this many
  metric_options metrics{};
};

struct semslice_unit_report {
  std::size_t unit = 0;          // index into neuron_units(net)
  std::string name;              // "3 Dense"
  std::size_t neurons = 0, step = 0, kept = 0;  // kept: the union
  bool output = false;           // the output unit: never sliced, all kept
  std::vector<std::size_t> k;    // per category: neurons chosen
  std::vector<double> sim;       // per category: sim after the last block
  std::vector<std::size_t> blocks;                 // per category: blocks scanned
  std::vector<std::vector<std::size_t>> order;     // per category: the ranking (Omega = first k)
  std::vector<std::vector<double>> scores;         // per category: the metric of every neuron
};

struct semslice_report {
  nnlens::metric metric{};
  nnlens::similarity similarity{};
  double theta = 0;
  std::vector<std::size_t> categories;  // in the order of the per-category vectors
  std::vector<std::size_t> members;     // |D_c|
  std::vector<std::size_t> samples;     // m per category
  std::vector<nnlens::similarity> used; // per category (unbiased needs m >= 4, else linear_cka)
  std::vector<semslice_unit_report> units;
};

struct semslice_result {
  neuron_mask mask;
  semslice_report report;
};

namespace detail {

/// Features of the non-output units for the samples idx: [unit] -> [m][neurons][per] (empty for
/// the output unit).
template <class Net>
std::vector<std::vector<network_scalar_t<Net>>> unit_features(const Net& net, const std::vector<neuron_unit>& us,
                                                              const network_scalar_t<Net>* x, std::span<const std::size_t> idx,
                                                              std::size_t bs) {
  using T = network_scalar_t<Net>;
  const std::size_t in = input_shape_of(net).size();
  std::vector<std::vector<T>> f(us.size());
  for (std::size_t u = 0; u < us.size(); ++u)
    if (!us[u].output) f[u].resize(idx.size() * us[u].out.size());
  trace<T> tr;
  std::vector<T> xb;
  for (std::size_t lo = 0; lo < idx.size(); lo += bs) {
    const std::size_t b = std::min(bs, idx.size() - lo);
    xb.resize(b * in);
    for (std::size_t s = 0; s < b; ++s) std::copy_n(x + idx[lo + s] * in, in, xb.data() + s * in);
    forward_trace(net, b, xb.data(), tr);
    for (std::size_t u = 0; u < us.size(); ++u) {
      if (us[u].output) continue;
      const auto a = tr.activation(us[u].feature + 1);
      std::copy(a.begin(), a.end(), f[u].begin() + std::ptrdiff_t(lo * us[u].out.size()));
    }
  }
  return f;
}

/// m of the members, without replacement (portable Fisher-Yates), in dataset order.
inline std::vector<std::size_t> draw_samples(std::vector<std::size_t> members, std::size_t m, std::uint64_t seed, std::size_t c) {
  if (members.size() <= m) return members;
  std::mt19937_64 rng(seed ^ (0x9E3779B97F4A7C15ull * (std::uint64_t(c) + 1)));
  partial_shuffle(members, m, rng);  // the first m are a uniform draw
  std::sort(members.begin(), members.end());
  return members;
}

struct labelled_data {
  std::vector<std::vector<std::size_t>> members;  // per class, in dataset order
  std::size_t n = 0, classes = 0;
};

template <class Net, class E, class Labels>
labelled_data check_labelled(const Net& net, const E& X, const Labels& labels, const network_scalar_t<Net>* x, const char* who) {
  labelled_data d;
  d.n = check_batch_input(X, input_shape_of(net), who);
  if (d.n == 0) throw data_error(concat(who, ": the dataset is empty"));
  if (std::size(labels) != d.n) throw data_error(concat(who, ": ", d.n, " samples but ", std::size(labels), " labels"));
  require_finite(std::span<const network_scalar_t<Net>>(x, d.n * input_shape_of(net).size()), input_shape_of(net).size(),
                 std::string(who) + ": input");
  d.classes = output_shape_of(net).size();
  d.members.resize(d.classes);
  using Label = std::remove_cv_t<std::remove_reference_t<decltype(*std::data(labels))>>;
  const std::span<const Label> y(std::data(labels), d.n);
  for (std::size_t i = 0; i < d.n; ++i) d.members[train::detail::checked_label(y[i], d.classes, i)].push_back(i);
  return d;
}

inline std::vector<std::size_t> checked_categories(const labelled_data& d, const std::vector<std::size_t>& asked, const char* who) {
  std::vector<std::size_t> cs = asked;
  if (cs.empty())
    for (std::size_t c = 0; c < d.classes; ++c) cs.push_back(c);
  std::vector<std::uint8_t> seen(d.classes, 0);
  for (auto c : cs) {
    if (c >= d.classes) throw data_error(concat(who, ": category ", c, " is not an output class (0..", d.classes - 1, ")"));
    if (seen[c]) throw data_error(concat(who, ": category ", c, " is listed twice"));
    seen[c] = 1;
    if (d.members[c].empty())
      throw data_error(concat(who, ": category ", c, " has no samples (restrict semslice_options::categories)"));
  }
  return cs;
}

template <class Net>
void check_unit_scores(const std::vector<neuron_unit>& us, const std::vector<std::vector<double>>& s, const char* who) {
  if (s.size() != us.size()) throw data_error(concat(who, ": scores for ", s.size(), " units, the model has ", us.size()));
  for (std::size_t u = 0; u < us.size(); ++u)
    if (s[u].size() != us[u].neurons)
      throw data_error(concat(who, ": unit ", us[u].name, " has ", us[u].neurons, " neurons, the scores ", s[u].size()));
}

/// f(0..n-1): on the pool under execution::par, in order otherwise.
template <class Policy, class F>
void run_each(std::size_t n, F&& f) {
  if constexpr (execution::is_host_parallel_policy_v<Policy>)
    default_pool().parallel_for(n, f);
  else
    for (std::size_t i = 0; i < n; ++i) f(i);
}

inline std::size_t topk_count(double k_percent, std::size_t width) {
  return std::min(width, std::size_t(std::ceil(k_percent / 100.0 * double(width) - 1e-9)));
}

}  // namespace detail

/// NeuSemSlice (see the header comment).
template <class Policy, class Net, class E, class Labels>
  requires execution::is_execution_policy_v<Policy>
semslice_result semslice(const Policy&, const Net& net, const E& X, const Labels& labels, const semslice_options& o = {}) {
  using T = network_scalar_t<Net>;
  constexpr const char* who = "semslice";
  if (!(o.theta > 0 && o.theta <= 1)) throw value_error(detail::concat(who, ": theta = ", o.theta, ", expected 0 < theta <= 1"));
  if (o.samples_per_category == 0) throw value_error("semslice: samples_per_category must be >= 1");
  if (o.metrics.batch == 0) throw value_error("semslice: metrics.batch must be >= 1");
  const auto us = neuron_units(net);
  detail::contiguous_input<T, E> xin(X);
  const auto d = detail::check_labelled(net, X, labels, xin.data(), who);
  const auto cats = detail::checked_categories(d, o.categories, who);
  const std::size_t nc = cats.size();

  semslice_result res;
  res.mask = full_mask(net);
  auto& rep = res.report;
  rep.metric = o.metric, rep.similarity = o.similarity, rep.theta = o.theta, rep.categories = cats;
  rep.members.resize(nc), rep.samples.resize(nc), rep.used.resize(nc);
  rep.units.resize(us.size());
  for (std::size_t u = 0; u < us.size(); ++u) {
    auto& ur = rep.units[u];
    ur.unit = u, ur.name = us[u].name, ur.neurons = us[u].neurons, ur.output = us[u].output;
    ur.step = o.step ? o.step : default_step(us[u].neurons);
    ur.k.resize(nc), ur.sim.resize(nc), ur.blocks.resize(nc), ur.order.resize(nc), ur.scores.resize(nc);
  }
  auto one = [&](std::size_t ci) {
    const std::size_t c = cats[ci];
    const auto& mem = d.members[c];
    std::vector<std::size_t> midx = mem;
    if (o.metric_samples && midx.size() > o.metric_samples)
      midx = detail::draw_samples(midx, o.metric_samples, o.seed + 0x5bd1e995u, c);
    const std::vector<std::size_t> tgt(midx.size(), c);
    auto scores = detail::metric_over(false, net, us, xin.data(), midx, tgt, o.metric, o.metrics);
    const auto sidx = detail::draw_samples(mem, o.samples_per_category, o.seed, c);
    const std::size_t m = sidx.size();
    auto feats = detail::unit_features(net, us, xin.data(), sidx, o.metrics.batch);
    rep.members[ci] = mem.size(), rep.samples[ci] = m;
    rep.used[ci] = o.similarity == similarity::unbiased && m < 4 ? similarity::linear_cka : o.similarity;
    for (std::size_t u = 0; u < us.size(); ++u) {
      auto& ur = rep.units[u];
      ur.order[ci] = order_by_score(scores[u]);
      ur.scores[ci] = std::move(scores[u]);
      if (us[u].output) {
        ur.k[ci] = us[u].neurons, ur.sim[ci] = 1.0, ur.blocks[ci] = 0;
        continue;
      }
      const std::span<const T> fu(feats[u]);
      gram_scan g(fu, m, us[u].neurons, us[u].out.size() / us[u].neurons, o.similarity, o.features);
      std::vector<T>().swap(feats[u]);
      const auto r = linear_scan(g, ur.order[ci], ur.step, o.theta);
      ur.k[ci] = r.k, ur.sim[ci] = r.sim, ur.blocks[ci] = r.trajectory.size();
    }
  };
  detail::run_each<Policy>(nc, one);

  for (std::size_t u = 0; u < us.size(); ++u) {
    auto& ur = rep.units[u];
    if (!us[u].output) {
      std::fill(res.mask.keep[u].begin(), res.mask.keep[u].end(), std::uint8_t(0));
      for (std::size_t ci = 0; ci < nc; ++ci)
        for (std::size_t j = 0; j < ur.k[ci]; ++j) res.mask.keep[u][ur.order[ci][j]] = 1;
    }
    ur.kept = res.mask.kept(u);
  }
  return res;
}

template <class Net, class E, class Labels>
  requires(!execution::is_execution_policy_v<Net>)
semslice_result semslice(const Net& net, const E& X, const Labels& labels, const semslice_options& o = {}) {
  return semslice(execution::seq, net, X, labels, o);
}

/// The metric of every neuron over all of X, each sample's target its own label: [unit][neuron].
template <class Policy, class Net, class E, class Labels>
  requires execution::is_execution_policy_v<Policy>
std::vector<std::vector<double>> neuron_scores(const Policy&, const Net& net, const E& X, const Labels& labels, metric mt,
                                               const metric_options& o = {}) {
  using T = network_scalar_t<Net>;
  const auto us = neuron_units(net);
  detail::contiguous_input<T, E> xin(X);
  const auto d = detail::check_labelled(net, X, labels, xin.data(), "neuron_scores");
  std::vector<std::size_t> idx(d.n), tgt(d.n);
  for (std::size_t c = 0; c < d.classes; ++c)
    for (auto i : d.members[c]) tgt[i] = c;
  for (std::size_t i = 0; i < d.n; ++i) idx[i] = i;
  return detail::metric_over(execution::is_host_parallel_policy_v<Policy>, net, us, xin.data(), idx, tgt, mt, o);
}
template <class Net, class E, class Labels>
  requires(!execution::is_execution_policy_v<Net>)
std::vector<std::vector<double>> neuron_scores(const Net& net, const E& X, const Labels& labels, metric mt, const metric_options& o = {}) {
  return neuron_scores(execution::seq, net, X, labels, mt, o);
}

/// The metric on each category's samples (target c): [category][unit][neuron], categories as in
/// semslice (empty: every output class; a category without samples is a data_error).
template <class Policy, class Net, class E, class Labels>
  requires execution::is_execution_policy_v<Policy>
std::vector<std::vector<std::vector<double>>> category_neuron_scores(const Policy&, const Net& net, const E& X, const Labels& labels,
                                                                     metric mt, const std::vector<std::size_t>& categories = {},
                                                                     const metric_options& o = {}) {
  using T = network_scalar_t<Net>;
  const auto us = neuron_units(net);
  detail::contiguous_input<T, E> xin(X);
  const auto d = detail::check_labelled(net, X, labels, xin.data(), "category_neuron_scores");
  const auto cats = detail::checked_categories(d, categories, "category_neuron_scores");
  std::vector<std::vector<std::vector<double>>> r(cats.size());
  auto one = [&](std::size_t ci) {
    const std::vector<std::size_t> tgt(d.members[cats[ci]].size(), cats[ci]);
    r[ci] = detail::metric_over(false, net, us, xin.data(), d.members[cats[ci]], tgt, mt, o);
  };
  detail::run_each<Policy>(cats.size(), one);
  return r;
}
template <class Net, class E, class Labels>
  requires(!execution::is_execution_policy_v<Net>)
std::vector<std::vector<std::vector<double>>> category_neuron_scores(const Net& net, const E& X, const Labels& labels, metric mt,
                                                                     const std::vector<std::size_t>& categories = {},
                                                                     const metric_options& o = {}) {
  return category_neuron_scores(execution::seq, net, X, labels, mt, categories, o);
}

/// Global slicing (§2.6): per sliced unit the top ceil(k% of its width) neurons by score (ties to
/// the lower index); the output unit keeps everything.  k in (0, 100].
template <class Net>
neuron_mask global_topk_mask(const Net& net, const std::vector<std::vector<double>>& scores, double k_percent) {
  if (!(k_percent > 0 && k_percent <= 100)) throw value_error(detail::concat("global_topk_mask: k = ", k_percent, "%, expected 0 < k <= 100"));
  const auto us = neuron_units(net);
  detail::check_unit_scores<Net>(us, scores, "global_topk_mask");
  neuron_mask m = full_mask(net);
  for (std::size_t u = 0; u < us.size(); ++u) {
    if (us[u].output) continue;
    std::fill(m.keep[u].begin(), m.keep[u].end(), std::uint8_t(0));
    const auto ord = order_by_score(scores[u]);
    for (std::size_t j = 0; j < detail::topk_count(k_percent, us[u].neurons); ++j) m.keep[u][ord[j]] = 1;
  }
  return m;
}

/// Category-wise slicing (§2.6): the same top k% per category, then the union.
template <class Net>
neuron_mask category_topk_mask(const Net& net, const std::vector<std::vector<std::vector<double>>>& scores, double k_percent) {
  if (scores.empty()) throw data_error("category_topk_mask: no categories");
  neuron_mask m = global_topk_mask(net, scores.front(), k_percent);
  for (std::size_t c = 1; c < scores.size(); ++c) {
    const auto mc = global_topk_mask(net, scores[c], k_percent);
    for (std::size_t u = 0; u < m.keep.size(); ++u)
      for (std::size_t n = 0; n < m.keep[u].size(); ++n) m.keep[u][n] |= mc.keep[u][n];
  }
  return m;
}

}  // namespace nnlens
