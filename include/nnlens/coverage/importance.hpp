// nnlens/coverage/importance.hpp -- DeepImportance's important neurons (
// docs/specs/deepimportance.md#22-neuron-relevance-by-lrp, Algorithm 1): relevance of a layer's neurons accumulated over the correctly classified
// training inputs, and the top m.
//
//   auto rt = neuron_relevance([policy,] net, X, labels, {.layer = L});   mergeable totals
//   auto top = important_neurons(rt, m);        the m largest scores, ties to the lower index
//
// A conv neuron is a channel: its relevance is the sum over its spatial positions (§2.6 (4)).
// Aggregations: sum (the paper's cumulative relevance, signed; default), count (how often the
// neuron is among the input's top `count_m`), mean_abs (mean |R|).  Only inputs the model
// classifies correctly count (T', `correct_only`); relevance starts from the predicted logit.
// Work is split in fixed chunks of rows whose partial sums add up in chunk order, so the result
// does not depend on the number of threads.
// Errors: value_error for m = 0 or m larger than the layer, a layer index out of range;
// data_error for an empty training set or one with no correctly classified input; shape_error for
// labels of the wrong length.
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "nnlens/core/error.hpp"
#include "nnlens/core/execution.hpp"
#include "nnlens/core/thread_pool.hpp"
#include "nnlens/coverage/activations.hpp"
#include "nnlens/coverage/lrp.hpp"
#include "nnlens/network/fingerprint.hpp"

namespace nnlens {

enum class importance_aggregation { sum, count, mean_abs };

inline const char* aggregation_name(importance_aggregation a) {
  return a == importance_aggregation::sum ? "sum" : a == importance_aggregation::count ? "count" : "mean_abs";
}

struct importance_options {
  std::size_t layer = std::size_t(-1);  // top-level layer; npos: subject_layer(net)
  lrp_options lrp{};
  importance_aggregation aggregation = importance_aggregation::sum;
  std::size_t count_m = 6;  // count: the per-input top-m
  bool correct_only = true;  // T': the inputs the model classifies correctly
};

/// Relevance totals of one layer's neurons: a mergeable value.
struct neuron_relevance {
  std::size_t layer = 0;
  importance_aggregation aggregation = importance_aggregation::sum;
  std::uint64_t fingerprint = 0;
  std::size_t samples = 0;   // inputs that contributed (T')
  std::size_t seen = 0;      // inputs looked at
  std::vector<double> total;  // per neuron: Σ R (sum), count, or Σ |R| (mean_abs)
  /// The ranking score: total, or total / samples for mean_abs.
  std::vector<double> scores() const {
    std::vector<double> s = total;
    if (aggregation == importance_aggregation::mean_abs && samples)
      for (auto& v : s) v /= double(samples);
    return s;
  }
};

inline neuron_relevance merge(neuron_relevance a, const neuron_relevance& b) {
  if (a.layer != b.layer || a.aggregation != b.aggregation || a.fingerprint != b.fingerprint || a.total.size() != b.total.size())
    throw data_error("merge(neuron_relevance): totals of different layers, aggregations or models");
  for (std::size_t i = 0; i < a.total.size(); ++i) a.total[i] += b.total[i];
  a.samples += b.samples;
  a.seen += b.seen;
  return a;
}

/// The m neurons with the largest scores (descending; ties to the lower index).
inline std::vector<std::size_t> important_neurons(const neuron_relevance& r, std::size_t m) {
  const std::size_t w = r.total.size();
  if (m == 0) throw value_error("important_neurons: m must be at least 1");
  if (m > w)
    throw value_error("important_neurons: m = " + std::to_string(m) + " is larger than layer " + std::to_string(r.layer) +
                      " (" + std::to_string(w) + " neurons)");
  const auto s = r.scores();
  std::vector<std::size_t> idx(w);
  std::iota(idx.begin(), idx.end(), std::size_t(0));
  std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) { return s[a] > s[b]; });
  idx.resize(m);
  return idx;
}

namespace detail {

/// Adds one sample's per-neuron relevance agg[0, width) to the totals P by o.aggregation (sum,
/// mean_abs, or +1 for each of the count_m largest, ties to the lower index); order: scratch of
/// width indices.  Shared by the host pass below and the thrust one (thrust/coverage.hpp).
inline void add_importance(const importance_options& o, const double* agg, std::size_t width, std::vector<std::size_t>& order,
                           double* P) {
  switch (o.aggregation) {
    case importance_aggregation::sum:
      for (std::size_t q = 0; q < width; ++q) P[q] += agg[q];
      break;
    case importance_aggregation::mean_abs:
      for (std::size_t q = 0; q < width; ++q) P[q] += std::abs(agg[q]);
      break;
    case importance_aggregation::count: {
      order.resize(width);
      std::iota(order.begin(), order.end(), std::size_t(0));
      const std::size_t m = std::min(o.count_m, width);
      std::partial_sort(order.begin(), order.begin() + std::ptrdiff_t(m), order.end(), [&](std::size_t a, std::size_t b) {
        return agg[a] > agg[b] || (agg[a] == agg[b] && a < b);
      });
      for (std::size_t q = 0; q < m; ++q) P[order[q]] += 1;
      break;
    }
  }
}

/// The checks every importance pass starts with (n > 0, one label per input, the layer exists);
/// returns the subject layer.  Shared by the host pass below and the thrust one.
template <class Net, class Labels>
std::size_t importance_layer(const Net& net, std::size_t n, const Labels& labels, const importance_options& o) {
  if (n == 0) throw data_error("neuron_relevance: the training set is empty");
  if (std::size_t(labels.size()) != n)
    throw shape_error("neuron_relevance: " + std::to_string(labels.size()) + " labels for " + std::to_string(n) + " inputs");
  const std::size_t layer = o.layer == std::size_t(-1) ? subject_layer(net) : o.layer;
  check_layer_index(net, layer, "neuron_relevance");
  return layer;
}

/// The result of a pass over n inputs before any total is added.
template <class Net>
neuron_relevance empty_relevance(const Net& net, std::size_t layer, const importance_options& o, std::size_t width,
                                 std::size_t n) {
  neuron_relevance res;
  res.layer = layer;
  res.aggregation = o.aggregation;
  res.fingerprint = model_fingerprint(net);
  res.total.assign(width, 0.0);
  res.seen = n;
  return res;
}

/// One pass over X: relevance totals of `layer`'s neurons over T' and, when `acts` is given, the
/// neuron values (channel means) of the T' rows, row-major [|T'|, width], in input order.
template <class Policy, class Net, class Labels>
neuron_relevance importance_pass(const Policy&, const Net& net, std::span<const network_scalar_t<Net>> x, std::size_t n,
                                 const Labels& labels, const importance_options& o, std::vector<double>* acts) {
  using T = network_scalar_t<Net>;
  const std::size_t layer = importance_layer(net, n, labels, o);
  const lrp_graph<T> g(net);
  const shape in = g.acts()[0];
  if (x.size() != n * in.size()) throw shape_error("neuron_relevance: input is not [N, " + in.str() + "]");
  require_finite(x, in.size(), "neuron_relevance: input");
  const std::size_t stop = g.layer_tensor(layer);
  const shape st = g.acts()[stop];
  const std::size_t width = coverage_neurons(st), per = st.size() / width;
  neuron_relevance res = empty_relevance(net, layer, o, width, n);
  constexpr std::size_t chunk = 256;
  const std::size_t chunks = (n + chunk - 1) / chunk;
  std::vector<std::vector<double>> part(chunks, std::vector<double>(width, 0.0));
  std::vector<std::uint8_t> correct(n, 0);
  std::vector<double> all_acts;
  if (acts) all_acts.resize(n * width);
  constexpr bool parallel = execution::is_host_parallel_policy_v<Policy>;
  auto& pool = default_pool();
  const std::size_t tasks = parallel ? std::min(pool.size(), chunks) : 1;
  auto work = [&](std::size_t t) {
    lrp_engine<T> e(g, o.lrp);
    std::vector<std::vector<T>> buf;
    std::vector<double> agg(width);
    std::vector<std::size_t> order(width);
    for (std::size_t c = t; c < chunks; c += tasks) {
      const std::size_t b0 = c * chunk, nb = std::min(chunk, n - b0);
      g.run(nb, x.data() + b0 * in.size(), buf);
      const auto& out = buf[g.output()];
      const std::size_t nc = g.acts()[g.output()].size();
      for (std::size_t r = 0; r < nb; ++r) {
        const T* z = out.data() + r * nc;
        const std::size_t pred = std::size_t(std::max_element(z, z + nc) - z);
        const std::size_t i = b0 + r;
        const bool ok = !o.correct_only || pred == std::size_t(labels[i]);
        correct[i] = ok;
        if (!ok) continue;
        if (acts) neuron_values(st, false, buf[stop].data() + r * st.size(), all_acts.data() + i * width);
        const auto R = e.run(net, buf, r, stop, pred);
        for (std::size_t q = 0; q < width; ++q) {
          double s = 0;
          for (std::size_t p = q * per; p < (q + 1) * per; ++p) s += R[p];
          agg[q] = s;
        }
        add_importance(o, agg.data(), width, order, part[c].data());
      }
    }
  };
  if (tasks > 1)
    pool.parallel_for(tasks, work);
  else
    work(0);
  for (const auto& P : part)
    for (std::size_t q = 0; q < width; ++q) res.total[q] += P[q];
  for (auto c : correct) res.samples += c;
  if (res.samples == 0)
    throw data_error("neuron_relevance: none of the " + std::to_string(n) +
                     " training inputs is classified correctly (labels of another dataset?)");
  if (acts) {
    acts->clear();
    acts->reserve(res.samples * width);
    for (std::size_t i = 0; i < n; ++i)
      if (correct[i]) acts->insert(acts->end(), all_acts.begin() + std::ptrdiff_t(i * width), all_acts.begin() + std::ptrdiff_t((i + 1) * width));
  }
  return res;
}

/// Where the importance pass runs for a policy: importance_pass above, unless a backend
/// specialises this for its policy (thrust/coverage.hpp does for execution::thrust_policy).  A
/// class template, so a backend header may come after this one: the specialisation is looked up
/// when prepare_idc / neuron_relevance_of are instantiated, not when they are defined.
template <class Policy>
struct importance_backend {
  template <class Net, class Labels>
  static neuron_relevance run(const Policy& pol, const Net& net, std::span<const network_scalar_t<Net>> x, std::size_t n,
                              const Labels& labels, const importance_options& o, std::vector<double>* acts) {
    return importance_pass(pol, net, x, n, labels, o, acts);
  }
};

}  // namespace detail

/// Relevance totals of a layer's neurons over the correctly classified inputs of X (labels: any
/// indexable range of class indices, one per row).
template <class Policy, class Net, class A, class Labels>
  requires execution::is_execution_policy_v<Policy>
neuron_relevance neuron_relevance_of(const Policy& pol, const Net& net, const A& X, const Labels& labels, const importance_options& o = {}) {
  const std::size_t n = X.dimension() ? X.shape()[0] : 0;
  return detail::importance_backend<Policy>::run(pol, net, std::span<const network_scalar_t<Net>>(X.data(), X.size()), n, labels, o,
                                                 nullptr);
}

template <class Net, class A, class Labels>
  requires(!execution::is_execution_policy_v<Net>)
neuron_relevance neuron_relevance_of(const Net& net, const A& X, const Labels& labels, const importance_options& o = {}) {
  return execution::with_default_policy(net, [&](const auto& pol) { return neuron_relevance_of(pol, net, X, labels, o); });
}

}  // namespace nnlens
