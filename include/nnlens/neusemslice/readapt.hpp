// nnlens/neusemslice/readapt.hpp -- NeuSemSlice's model re-adaptation (docs/specs/neusemslice.md#42-model-re-adaptation,
// Eqs. 6-7): adversarial repair that trains only the critical neurons' parameters.
//
//   auto r = readapt([policy,] net, &mask, X, y, X_test, y_test, attack, {.epochs = 5});
//   auto r = readapt([policy,] net, nullptr, ...);          // full retraining (every parameter)
//       r.model    the repaired copy of net (net itself is not changed)
//       r.report   TPR, RA, RAA, clean accuracy before/after, the attack's effect before repair
//
// Algorithm:
//   1. sources: `attack.samples` clean training samples (a seeded draw without replacement from
//      X; all of X when it is smaller); adv = attack(net, sources) with the ORIGINAL model.
//   2. training: pairs (x_i, adv_i), shuffled each epoch (seeded), mini-batches of `batch` pairs
//      = 2*batch samples; the step minimises the batch mean of CE(x) and CE(adv_x), i.e.
//      L = CE(x) + CE(adv_x) of Eq. 6 up to the constant factor 1/2 (absorbed in lr).  Only the
//      parameters of the kept neurons move (neuron_parameter_mask(net, mask): weight rows /
//      filters, bias, BatchNorm gamma/beta; Eq. 7); the optimiser's state and weight decay are
//      masked too, so every other parameter is bit-identical to net's (spec §7 oracle 9).
//   3. metrics (A14, the reading taken here):
//        TPR  trained parameters / all parameters (the mask's trainable fraction; 1 without mask)
//        RA   accuracy of the repaired model on the adversarial samples it was trained on
//        RAA  accuracy of the repaired model on `attack.samples` NEW adversarial samples,
//             generated against the repaired model from clean test samples (seeded draw from
//             X_test)
//        clean accuracy on all of X_test, before and after
//        adv_before: the original model's accuracy on the training adversarial samples (the
//             paper's 18.53% FGSM / 3.8% PGD before repair)
//
// requires: a network ending at the logits (attacks.hpp); the mask made on net's architecture
//           (data_error otherwise); epochs, batch >= 1 (value_error); lr >= 0.
// ensures:  deterministic for a given seed; execution::par gives the same bits as execution::seq
//           when `chunks` is the same (chunks = 0 picks the pool size under par, 1 under seq).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "nnlens/core/error.hpp"
#include "nnlens/core/execution.hpp"
#include "nnlens/core/progress.hpp"
#include "nnlens/core/random.hpp"
#include "nnlens/core/thread_pool.hpp"
#include "nnlens/network/parameters.hpp"
#include "nnlens/train/attacks.hpp"
#include "nnlens/neusemslice/neuron_mask.hpp"
#include "nnlens/train/fit.hpp"
#include "nnlens/train/mask.hpp"
#include "nnlens/train/optimizer.hpp"

namespace nnlens {

enum class optimizer_kind { adam, sgd };

/// The training shared by readapt and increment (A14/A15: the paper gives no optimiser).
struct maintenance_training {
  std::size_t epochs = 5;
  double lr = 1e-3;
  std::size_t batch = 64;             // readapt: pairs per step (2*batch samples); increment: samples
  std::uint64_t seed = 1;             // sample draws, shuffles, PGD's random start
  optimizer_kind optimizer = optimizer_kind::adam;
  double momentum = 0.9;              // sgd only
  double weight_decay = 0;            // both (L2, masked like the gradient)
  std::size_t chunks = 0;             // pieces per mini-batch: 0 = pool size (par) or 1 (seq)
  bool progress = false;              // a progress bar per epoch on stderr (core/progress.hpp)
};

struct readapt_attack {
  std::string name = "FGSM";          // for reports
  linf_attack_options options{.eps = 0.1, .alpha = 0.1, .steps = 1};
  std::size_t samples = 1000;         // adversarial samples for training, and new ones for RAA
};

/// FGSM with radius eps (the paper's cleverhans FGSM), `samples` of them.
inline readapt_attack fgsm_attack(double eps, std::size_t samples = 1000) {
  return {"FGSM", {.eps = eps, .alpha = eps, .steps = 1, .random_start = false}, samples};
}
/// PGD with radius eps, `steps` steps of eps/4 (A14 proposal: 10-40 steps), random start.
inline readapt_attack pgd_attack(double eps, std::size_t steps = 10, std::size_t samples = 1000, std::uint64_t seed = 1) {
  return {"PGD", {.eps = eps, .alpha = eps / 4, .steps = steps, .random_start = true, .seed = seed}, samples};
}

using readapt_options = maintenance_training;

struct readapt_report {
  std::string attack;
  std::size_t trained_parameters = 0, total_parameters = 0;
  double tpr = 0;           // trained / total
  double adv_before = 0;    // original model on the training adversarial samples
  double ra = 0;            // repaired model on the training adversarial samples (A14)
  double raa = 0;           // repaired model on new adversarial samples made against it
  double clean_before = 0, clean_after = 0;  // on X_test
  std::size_t adversarial = 0;               // samples used for training (= new ones for RAA)
  double train_seconds = 0, seconds = 0;
};

template <class Net>
struct readapt_result {
  Net model;
  readapt_report report;
};

namespace detail {

/// k indices drawn without replacement from [0, n) (portable Fisher-Yates), in drawn order;
/// all of [0, n) in order when k >= n.
inline std::vector<std::size_t> draw_indices(std::size_t n, std::size_t k, std::uint64_t seed) {
  std::vector<std::size_t> idx(n);
  std::iota(idx.begin(), idx.end(), std::size_t(0));
  std::mt19937_64 rng(seed);
  nnlens::detail::partial_shuffle(idx, k, rng);
  return idx;
}

/// Rows `idx` of a batch X (any xtensor expression [N, input...]) as an xarray [k, input...].
template <class Net, class E>
xt::xarray<network_scalar_t<Net>> gather_rows(const Net& net, const E& X, const std::vector<std::size_t>& idx) {
  using T = network_scalar_t<Net>;
  const shape in = input_shape_of(net);
  const std::size_t d = in.size();
  check_batch_input(X, in, "gather_rows");
  train::detail::contiguous_input<T, E> xs(X);
  xt::xarray<T> r = xt::xarray<T>::from_shape(in.with_batch(idx.size()));
  for (std::size_t i = 0; i < idx.size(); ++i) std::copy_n(xs.data() + idx[i] * d, d, r.data() + i * d);
  return r;
}

template <class Labels>
std::vector<std::uint32_t> gather_labels(const Labels& y, const std::vector<std::size_t>& idx) {
  const auto ys = train::detail::label_span(y);
  std::vector<std::uint32_t> r(idx.size());
  for (std::size_t i = 0; i < idx.size(); ++i) {
    if (idx[i] >= ys.size()) throw data_error(concat("gather_labels: sample ", idx[i], " has no label"));
    r[i] = std::uint32_t(ys[idx[i]]);
  }
  return r;
}

/// An optimiser of either kind behind one step() (the state lives in the chosen member).
template <class Net>
struct any_optimizer {
  std::optional<train::adam<Net>> a;
  std::optional<train::sgd<Net>> s;
  any_optimizer(const Net& net, const maintenance_training& o) {
    if (!(o.lr >= 0) || !(o.weight_decay >= 0)) throw value_error(concat("maintenance training: lr = ", o.lr, ", weight_decay = ", o.weight_decay));
    if (o.optimizer == optimizer_kind::adam)
      a.emplace(net, train::adam_options{.lr = o.lr, .weight_decay = o.weight_decay});
    else
      s.emplace(net, train::sgd_options{.lr = o.lr, .momentum = o.momentum, .weight_decay = o.weight_decay});
  }
  void step(Net& net, const Net& grad, const train::parameter_mask* m) {
    if (a) a->step(net, grad, m);
    else s->step(net, grad, m);
  }
};

template <class Policy>
nnlens::detail::thread_pool* pool_for(const Policy&) {
  if constexpr (execution::is_host_parallel_policy_v<Policy>) return &default_pool();
  else return nullptr;
}

inline void check_training(const maintenance_training& o, const char* who) {
  if (o.epochs == 0 || o.batch == 0) throw value_error(concat(who, ": epochs and batch must be at least 1"));
}

template <class Net>
train::parameter_mask trainable_mask(const Net& net, const neuron_mask* m) {
  if (m) return neuron_parameter_mask(net, *m);
  std::vector<std::vector<std::uint8_t>> bits;
  for (auto s : parameter_spans(net)) bits.emplace_back(s.size(), std::uint8_t(1));
  return train::parameter_mask(std::move(bits));
}

}  // namespace detail

/// See the header comment.  mask == nullptr: full retraining.
template <class Policy, class Net, class E, class Labels, class ET, class LabelsT>
  requires execution::is_execution_policy_v<Policy>
readapt_result<Net> readapt(const Policy& policy, const Net& net, const neuron_mask* mask, const E& X, const Labels& y,
                            const ET& X_test, const LabelsT& y_test, const readapt_attack& attack,
                            const readapt_options& o = {}) {
  using T = network_scalar_t<Net>;
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  detail::check_training(o, "readapt");
  if (attack.samples == 0) throw value_error("readapt: attack.samples must be at least 1");
  const std::size_t n = train::detail::check_dataset(net, X, train::detail::label_span(y), "readapt: training data");
  const std::size_t nt = train::detail::check_dataset(net, X_test, train::detail::label_span(y_test), "readapt: test data");
  const train::parameter_mask pm = detail::trainable_mask(net, mask);

  readapt_result<Net> r{net, {}};
  readapt_report& rep = r.report;
  rep.attack = attack.name;
  rep.total_parameters = pm.size();
  rep.trained_parameters = pm.trainable_count();
  rep.tpr = rep.total_parameters ? double(rep.trained_parameters) / double(rep.total_parameters) : 0.0;
  rep.clean_before = train::evaluate(policy, net, X_test, y_test).accuracy;

  // 1. the training pairs
  const auto src = detail::draw_indices(n, attack.samples, o.seed ^ 0x5eed5eedull);
  const auto xs = detail::gather_rows(net, X, src);
  const auto ys = detail::gather_labels(y, src);
  linf_attack_options ao = attack.options;
  const auto adv = linf_attack(policy, net, xs, ys, ao);
  const std::size_t m = src.size(), d = input_shape_of(net).size();
  rep.adversarial = m;
  rep.adv_before = train::evaluate(policy, net, adv, ys).accuracy;

  // 2. training on the pairs
  const auto t_train = clock::now();
  detail::any_optimizer<Net> opt(net, o);
  auto* pool = detail::pool_for(policy);
  const std::size_t bp = std::min(o.batch, m);
  const std::size_t chunks = std::min(2 * bp, o.chunks ? o.chunks : (pool ? pool->size() : std::size_t(1)));
  train::trainer<Net> step(net, chunks, pool);
  std::vector<std::size_t> order(m);
  std::iota(order.begin(), order.end(), std::size_t(0));
  std::mt19937_64 rng(o.seed);
  std::vector<T> xb(2 * bp * d);
  std::vector<std::uint32_t> yb(2 * bp);
  for (std::size_t e = 0; e < o.epochs; ++e) {
    train::detail::shuffle(order, rng);
    std::optional<progress_bar> bar;
    if (o.progress) bar.emplace(detail::concat("readapt epoch ", e + 1, "/", o.epochs), m);
    for (std::size_t b0 = 0; b0 < m; b0 += bp) {
      const std::size_t nb = std::min(bp, m - b0);
      for (std::size_t i = 0; i < nb; ++i) {  // clean first, then the adversarial twins
        const std::size_t s = order[b0 + i];
        std::copy_n(xs.data() + s * d, d, xb.data() + i * d);
        std::copy_n(adv.data() + s * d, d, xb.data() + (nb + i) * d);
        yb[i] = yb[nb + i] = ys[s];
      }
      step.step(r.model, opt, xb.data(), std::span<const std::uint32_t>(yb.data(), 2 * nb), &pm);
      if (bar) bar->update(b0 + nb);
    }
    if (bar) bar->finish();
  }
  rep.train_seconds = std::chrono::duration<double>(clock::now() - t_train).count();

  // 3. metrics
  rep.ra = train::evaluate(policy, r.model, adv, ys).accuracy;
  const auto tsrc = detail::draw_indices(nt, attack.samples, o.seed ^ 0x7e57ull);
  const auto xt_ = detail::gather_rows(net, X_test, tsrc);
  const auto yt_ = detail::gather_labels(y_test, tsrc);
  ao.seed = attack.options.seed + 1;  // PGD: a fresh random start
  const auto adv_new = linf_attack(policy, r.model, xt_, yt_, ao);
  rep.raa = train::evaluate(policy, r.model, adv_new, yt_).accuracy;
  rep.clean_after = train::evaluate(policy, r.model, X_test, y_test).accuracy;
  rep.seconds = std::chrono::duration<double>(clock::now() - t0).count();
  return r;
}

template <class Net, class E, class Labels, class ET, class LabelsT>
  requires(!execution::is_execution_policy_v<Net>)
readapt_result<Net> readapt(const Net& net, const neuron_mask* mask, const E& X, const Labels& y, const ET& X_test,
                            const LabelsT& y_test, const readapt_attack& attack, const readapt_options& o = {}) {
  return readapt(execution::seq, net, mask, X, y, X_test, y_test, attack, o);
}

}  // namespace nnlens
