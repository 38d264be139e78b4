// nnlens/neusemslice/increment.hpp -- NeuSemSlice's incremental development (
// docs/specs/neusemslice.md#43-incremental-development, Eqs. 8-9): learn a new task while the old task's critical neurons stay frozen.
//
//   neuron_mask mA = semslice(net, X_A, y_A, {.categories = A}).mask;
//   set_output_classes(net, mA, A);                 // output unit: keep = task A's classes (A15)
//   auto r = increment([policy,] net, &mA, X_B, y_B, {.epochs = 5});   // NeuSemSlice
//   auto r = increment([policy,] net, nullptr, X_B, y_B, o);           // Retrain (every parameter)
//   auto mix = replay_mix(X_B, y_B, X_A, y_A, 0.10, seed);             // Replay 10%: B + 10% of A
//   auto r = increment(net, nullptr, mix.x, mix.y, o);                 //   (with &mA: NSS + R10%)
//   auto s = task_scores([policy,] r.model, X_A_test, y_A_test, X_B_test, y_B_test);  // old/new/mean
//   mask_union(mA, mB)                              // scenario II: freeze Omega_A u Omega_B
//
// Training: L = CE(x, y) on the given data (Eq. 8), shuffled mini-batches (train::fit), updating
// only theta_{N \ Omega} = neuron_parameter_mask(net, mask).inverted() (Eq. 9): every parameter of
// a kept neuron (incoming weights, bias, BatchNorm gamma/beta; in the output unit: the kept
// classes' rows) stays bit-identical, momentum / Adam state / weight decay included (spec §7
// oracle 9).  A single shared head: the output layer is the same 10-way layer for every task, the
// accuracy of a task is argmax over all outputs on that task's test samples (Table 7's
// "Original TaskB = 0%" reading, A15).
//   r.report.trained_parameters / total_parameters, frozen_changed (a check: frozen parameters
//   that differ after training; always 0), the fit report.
// requires: the mask made on net's architecture (data_error); epochs, batch >= 1 (value_error);
//           replay fraction in [0, 1] (value_error).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "nnlens/neusemslice/readapt.hpp"

namespace nnlens {

using increment_options = maintenance_training;

struct increment_report {
  std::size_t trained_parameters = 0, total_parameters = 0;
  double trained_fraction = 0;
  std::size_t frozen_changed = 0;  // frozen parameters that moved (a self-check: 0)
  std::size_t samples = 0;
  train::fit_report fit;
};

template <class Net>
struct increment_result {
  Net model;
  increment_report report;
};

/// Sets the output unit's keep to exactly `classes` (the old task's output neurons, frozen by
/// increment; the others stay trainable).  value_error for a class past the output width.
template <class Net>
void set_output_classes(const Net& net, neuron_mask& m, const std::vector<std::size_t>& classes) {
  const auto us = detail::checked_mask_units(net, m, "set_output_classes");
  auto& k = m.keep.back();
  std::fill(k.begin(), k.end(), std::uint8_t(0));
  for (auto c : classes) {
    if (c >= k.size()) throw value_error(detail::concat("set_output_classes: class ", c, " but the output has ", k.size()));
    k[c] = 1;
  }
}

/// A copy of net in which the kept neurons read only kept neurons: every weight from a masked
/// neuron of unit u into a kept neuron of unit u+1 (and into a kept output class) is set to 0.
/// Omega then computes the old task's logits on its own, so freezing theta_Omega (Eq. 9) freezes
/// Omega's function, not only its weights; the masked neurons still read the kept ones.  An
/// option beside the paper's Eq. 9 (which leaves these synapses in place and trainable only as
/// parameters of kept neurons, i.e. frozen, while their sources retrain): see
/// docs/neusemslice-increment.md.  The first unit reads the input and is unchanged.
template <class Net>
Net isolate_kept(const Net& net, const neuron_mask& m) {
  const auto us = detail::checked_mask_units(net, m, "isolate_kept");
  Net r = net;
  auto ps = parameter_spans(r);
  const auto kept_param = detail::kept_parameter_bits(net, us, m, 1);
  for (std::size_t u = 0; u + 1 < us.size(); ++u)
    for (std::size_t n = 0; n < us[u].neurons; ++n)
      if (!m.keep[u][n])
        detail::for_each_reader_parameter(net, us[u], us[u + 1], n, [&](std::size_t t, std::size_t e) {
          if (kept_param[t][e]) ps[t][e] = 0;
        });
  return r;
}

/// The union of two masks of the same architecture (a neuron kept by either is kept).
inline neuron_mask mask_union(const neuron_mask& a, const neuron_mask& b) {
  if (a.keep.size() != b.keep.size()) throw data_error("mask_union: the masks have different unit counts");
  neuron_mask r = a;
  for (std::size_t u = 0; u < a.keep.size(); ++u) {
    if (a.keep[u].size() != b.keep[u].size()) throw data_error(detail::concat("mask_union: unit ", u, " differs in width"));
    for (std::size_t n = 0; n < a.keep[u].size(); ++n) r.keep[u][n] = a.keep[u][n] || b.keep[u][n];
  }
  return r;
}

template <class T>
struct labelled_batch {
  xt::xarray<T> x;
  std::vector<std::uint32_t> y;
  std::size_t size() const { return y.size(); }
};

/// The new task's data followed by round(fraction * |old|) old samples (a seeded draw without
/// replacement): the Replay x% baseline's training set.
template <class EB, class LB, class EA, class LA>
auto replay_mix(const EB& XB, const LB& yB, const EA& XA, const LA& yA, double fraction, std::uint64_t seed) {
  using T = std::remove_cv_t<std::remove_reference_t<decltype(*XB.data())>>;
  if (!(fraction >= 0 && fraction <= 1)) throw value_error(detail::concat("replay_mix: fraction ", fraction, " outside [0, 1]"));
  const auto ybs = train::detail::label_span(yB);
  const auto yas = train::detail::label_span(yA);
  const std::size_t nb = ybs.size(), na = yas.size();
  if (XB.shape()[0] != nb || XA.shape()[0] != na) throw data_error("replay_mix: sample and label counts differ");
  const std::size_t d = nb ? XB.size() / nb : (na ? XA.size() / na : 0);
  if (na && XA.size() / na != d) throw shape_error("replay_mix: the tasks' samples differ in size");
  const auto pick = detail::draw_indices(na, std::size_t(fraction * double(na) + 0.5), seed);
  labelled_batch<T> r;
  auto sh = XB.shape();
  std::vector<std::size_t> s(sh.begin(), sh.end());
  s[0] = nb + pick.size();
  r.x = xt::xarray<T>::from_shape(s);
  xt::xarray<T> b = XB, a = XA;  // contiguous copies
  std::copy_n(b.data(), nb * d, r.x.data());
  for (std::size_t i = 0; i < pick.size(); ++i) std::copy_n(a.data() + pick[i] * d, d, r.x.data() + (nb + i) * d);
  r.y.reserve(nb + pick.size());
  for (auto v : ybs) r.y.push_back(std::uint32_t(v));
  for (auto i : pick) r.y.push_back(std::uint32_t(yas[i]));
  return r;
}

/// See the header comment.  mask == nullptr: every parameter trains (Retrain / Replay).
template <class Policy, class Net, class E, class Labels>
  requires execution::is_execution_policy_v<Policy>
increment_result<Net> increment(const Policy& policy, const Net& net, const neuron_mask* mask, const E& X, const Labels& y,
                                const increment_options& o = {}) {
  detail::check_training(o, "increment");
  train::parameter_mask pm = mask ? neuron_parameter_mask(net, *mask).inverted() : detail::trainable_mask(net, nullptr);
  increment_result<Net> r{net, {}};
  auto& rep = r.report;
  rep.total_parameters = pm.size();
  rep.trained_parameters = pm.trainable_count();
  rep.trained_fraction = rep.total_parameters ? double(rep.trained_parameters) / double(rep.total_parameters) : 0.0;
  detail::any_optimizer<Net> opt(net, o);
  train::fit_options fo;
  fo.epochs = o.epochs;
  fo.batch_size = o.batch;
  fo.seed = o.seed;
  fo.chunks = o.chunks;
  fo.mask = &pm;
  fo.progress = o.progress;  // fit's bar per epoch
  rep.fit = train::fit(policy, r.model, opt, X, y, fo);
  rep.samples = train::detail::label_span(y).size();
  const auto before = parameter_spans(net);
  const auto after = parameter_spans(std::as_const(r.model));
  for (std::size_t k = 0; k < before.size(); ++k)
    for (std::size_t i = 0; i < before[k].size(); ++i)
      if (!pm.trainable(k, i) && !(before[k][i] == after[k][i] || (before[k][i] != before[k][i] && after[k][i] != after[k][i])))
        ++rep.frozen_changed;
  return r;
}
template <class Net, class E, class Labels>
  requires(!execution::is_execution_policy_v<Net>)
increment_result<Net> increment(const Net& net, const neuron_mask* mask, const E& X, const Labels& y, const increment_options& o = {}) {
  return increment(execution::seq, net, mask, X, y, o);
}

struct task_scores_report {
  double old_task = 0, new_task = 0, mean = 0;  // accuracies in [0, 1]; mean = (old + new) / 2
};

/// Accuracy on the old task's and on the new task's test samples (argmax over every output: the
/// shared head), and their mean.
template <class Policy, class Net, class EA, class LA, class EB, class LB>
  requires execution::is_execution_policy_v<Policy>
task_scores_report task_scores(const Policy& policy, const Net& net, const EA& XA, const LA& yA, const EB& XB, const LB& yB) {
  task_scores_report s;
  s.old_task = train::evaluate(policy, net, XA, yA).accuracy;
  s.new_task = train::evaluate(policy, net, XB, yB).accuracy;
  s.mean = (s.old_task + s.new_task) / 2;
  return s;
}
template <class Net, class EA, class LA, class EB, class LB>
  requires(!execution::is_execution_policy_v<Net>)
task_scores_report task_scores(const Net& net, const EA& XA, const LA& yA, const EB& XB, const LB& yB) {
  return task_scores(execution::seq, net, XA, yA, XB, yB);
}

}  // namespace nnlens
