// nnlens/neusemslice/restructure.hpp -- NeuSemSlice's model restructure (docs/specs/neusemslice.md#41-model-restructure):
// mask the non-critical neurons, then iterative magnitude pruning with fine-tuning.
//
//   auto r = restructure([policy,] net, &mask /* or nullptr: the pruner alone */,
//                        x_train, y_train, x_test, y_test,
//                        {.method = compress::pruning_method::lamp, .p = 0.05, .tolerance = 1.0,
//                         .epochs = 1, .max_iterations = 40, .seed = 1});
//
// 1. With a neuron mask: net = apply_neuron_mask(net, mask), and every parameter the mask removes
//    (§2.7 A11: a masked neuron's own parameters and the next layer's weights that read it) is set
//    to 0 and taken out of the pruning pool.  This removes the fraction s of the parameters.
// 2. Each iteration prunes round(p R) of the R remaining weights (compress::prune_step with
//    `method`), fine-tunes `epochs` epochs (Adam, lr, batch_size; the shuffle seeded from `seed`
//    and the iteration) with every removed or pruned parameter frozen at 0, and measures the test
//    accuracy.
// 3. Stopping rule (A13): an iteration is accepted while its test accuracy is >= the reference
//    accuracy - tolerance (points); the first one below ends the loop (it is reported with
//    accepted = false and undone).  The reference is the accuracy of the network as passed in
//    (before the mask) unless reference_accuracy >= 0 is given.  NI = accepted iterations.
// On return `net` is the last accepted network (the masked one if none was accepted).
// CR counts each parameter once: removed by the mask (A11) or pruned; CR = removed / all
// parameters (weights, biases, every layer).  weight_pruned is the pruned share of the prunable
// weights alone (1 - (1-p)^NI up to rounding: §7 oracle 8).
// Errors: p outside (0, 1), negative tolerance, epochs or batch_size 0 -> value_error; a mask of
// another architecture -> data_error (neuron_mask.hpp).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "nnlens/compress/pruning.hpp"
#include "nnlens/core/error.hpp"
#include "nnlens/core/execution.hpp"
#include "nnlens/neusemslice/neuron_mask.hpp"
#include "nnlens/train/fit.hpp"
#include "nnlens/train/optimizer.hpp"

namespace nnlens {

struct restructure_iteration {
  std::size_t iteration = 0;     // 1-based
  double compression = 0;        // CR (%) of this iteration's network
  double weight_pruned = 0;      // pruned / prunable weights (%)
  double accuracy = 0;           // test accuracy (%) after fine-tuning
  bool accepted = false;
  std::size_t pruned = 0;        // weights pruned in this step
  double seconds = 0;
};

struct restructure_options {
  compress::pruning_method method = compress::pruning_method::lamp;
  double p = 0.05;                    // spec §3: 0.10 for MLP-MNIST, 0.05 elsewhere
  double tolerance = 1.0;             // accuracy points (A13)
  double reference_accuracy = -1;     // < 0: the accuracy of the network passed in
  std::size_t epochs = 1;             // fine-tuning per iteration
  std::size_t batch_size = 64;
  double lr = 1e-4;                   // Adam (the LeNet-5 recipe's final rate)
  std::size_t max_iterations = 60;
  std::uint64_t seed = 0;
  std::size_t threads = 0;            // par: 0 = the process-wide pool
  std::function<void(const restructure_iteration&)> on_iteration;
};

struct restructure_report {
  compress::pruning_method method{};
  double reference_accuracy = 0;   // %
  double start_accuracy = 0;       // % after the neuron mask, before pruning
  double start_compression = 0;    // s: CR of the neuron mask alone (%)
  std::size_t parameters = 0;      // all parameters of the network
  std::size_t prunable = 0;        // weights in the pruning pool at the start
  std::vector<restructure_iteration> iterations;
  std::size_t ni = 0;              // accepted iterations
  double compression = 0;          // final CR (%)
  double weight_pruned = 0;        // final pruned share of the pool (%)
  double accuracy = 0;             // final test accuracy (%)
  double seconds = 0;
};

/// 1 on the parameters a neuron mask leaves, 0 on those it removes (§2.7 A11: the masked neurons'
/// own parameters and the next unit's weights that read them).  Its frozen_count() is
/// parameter_accounting(net, m).removed.
template <class Net>
train::parameter_mask neuron_mask_present(const Net& net, const neuron_mask& m) {
  const auto us = detail::checked_mask_units(net, m, "neuron_mask_present");
  const auto ps = parameter_spans(net);
  std::vector<std::vector<std::uint8_t>> bits;
  for (const auto& s : ps) bits.emplace_back(s.size(), std::uint8_t(1));
  for (std::size_t u = 0; u < us.size(); ++u)
    for (std::size_t n = 0; n < us[u].neurons; ++n)
      if (!m.keep[u][n]) {
        detail::for_each_unit_parameter(net, us[u], n, [&](std::size_t t, std::size_t e) { bits[t][e] = 0; });
        if (u + 1 < us.size())
          detail::for_each_reader_parameter(net, us[u], us[u + 1], n, [&](std::size_t t, std::size_t e) { bits[t][e] = 0; });
      }
  return train::parameter_mask(std::move(bits));
}

namespace detail {
inline double removed_percent(const compress::pruning_mask& m) {
  std::size_t all = 0, alive = 0;
  for (std::size_t t = 0; t < m.alive.size(); ++t) all += m.alive[t].size(), alive += m.alive_count(t);
  return all ? 100.0 * double(all - alive) / double(all) : 0.0;
}
}  // namespace detail

template <class Policy, class Net, class E, class Labels>
  requires execution::is_execution_policy_v<Policy>
restructure_report restructure(const Policy& policy, Net& net, const neuron_mask* mask, const E& x_train,
                               const Labels& y_train, const E& x_test, const Labels& y_test,
                               const restructure_options& o = {}) {
  if (!(o.p > 0 && o.p < 1)) throw value_error(detail::concat("restructure: p must lie in (0, 1), got ", o.p));
  if (!(o.tolerance >= 0)) throw value_error("restructure: the tolerance must be >= 0");
  if (o.epochs == 0 || o.batch_size == 0) throw value_error("restructure: epochs and batch_size must be > 0");
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  restructure_report r;
  r.method = o.method;
  r.parameters = parameter_count(net);
  r.reference_accuracy =
      o.reference_accuracy >= 0 ? o.reference_accuracy : 100.0 * train::evaluate(policy, net, x_test, y_test).accuracy;

  compress::pruning_mask pm;
  if (mask) {
    net = apply_neuron_mask(net, *mask);
    pm = compress::make_pruning_mask(net, neuron_mask_present(net, *mask));
    compress::apply_pruning_mask(net, pm);  // the readers of masked neurons: they multiply zeros
  } else {
    pm = compress::make_pruning_mask(net);
  }
  r.start_compression = detail::removed_percent(pm);
  r.prunable = compress::prunable_weights(net, pm).second;
  r.start_accuracy = mask ? 100.0 * train::evaluate(policy, net, x_test, y_test).accuracy : r.reference_accuracy;
  r.compression = r.start_compression;
  r.accuracy = r.start_accuracy;
  const double bound = r.reference_accuracy - o.tolerance;

  for (std::size_t it = 1; it <= o.max_iterations; ++it) {
    const auto ti = clock::now();
    Net cand = net;
    compress::pruning_mask cm = pm;
    const auto step = compress::prune_step(cand, cm, o.p, o.method);
    const auto frozen = cm.trainable();
    train::adam opt(cand, {.lr = o.lr});
    train::fit_options fo;
    fo.epochs = o.epochs;
    fo.batch_size = o.batch_size;
    fo.seed = o.seed * 1000003ull + it;
    fo.threads = o.threads;
    fo.mask = &frozen;
    train::fit(policy, cand, opt, x_train, y_train, fo);
    restructure_iteration ri;
    ri.iteration = it;
    ri.compression = detail::removed_percent(cm);
    const auto [alive, base] = compress::prunable_weights(cand, cm);
    ri.weight_pruned = base ? 100.0 * double(base - alive) / double(base) : 0.0;
    ri.accuracy = 100.0 * train::evaluate(policy, cand, x_test, y_test).accuracy;
    ri.accepted = ri.accuracy >= bound;
    ri.pruned = step.pruned;
    ri.seconds = std::chrono::duration<double>(clock::now() - ti).count();
    r.iterations.push_back(ri);
    if (o.on_iteration) o.on_iteration(ri);
    if (!ri.accepted) break;
    net = std::move(cand);
    pm = std::move(cm);
    ++r.ni;
    r.compression = ri.compression;
    r.weight_pruned = ri.weight_pruned;
    r.accuracy = ri.accuracy;
    if (alive == 0) break;
  }
  r.seconds = std::chrono::duration<double>(clock::now() - t0).count();
  return r;
}

template <class Net, class E, class Labels>
restructure_report restructure(Net& net, const neuron_mask* mask, const E& x_train, const Labels& y_train,
                               const E& x_test, const Labels& y_test, const restructure_options& o = {}) {
  return restructure(execution::seq, net, mask, x_train, y_train, x_test, y_test, o);
}

}  // namespace nnlens
