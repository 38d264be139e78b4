// nnlens/train/fit.hpp -- the training loop (mini-batch, seeded, optionally multi-threaded) and
// evaluation.
//
//   auto report = fit(execution::par, net, opt, x, y, {.epochs = 8, .batch_size = 64, .seed = 1},
//                     [](const epoch_report& e) { ... });   // optional; may return false to stop
//   evaluation ev = evaluate(execution::par, net, x_test, y_test);   // ev.accuracy, ev.loss
//
// x is an xtensor container [N, in...] matching the network's input shape; y holds N integer
// class labels (e.g. std::vector<std::uint8_t> from io/idx.hpp).  The loss is softmax
// cross-entropy on the network's output (logits), averaged over each mini-batch; `opt` is any
// optimiser with step(net, grad, const parameter_mask*) (train/optimizer.hpp).
//
// Determinism: the epoch order comes from a Fisher-Yates shuffle driven by mt19937_64(seed) with a
// portable bounded draw, so the same seed, data and initial weights give bit-identical weights.
// Each mini-batch is split into `chunks` contiguous pieces (default: one per pool thread under
// execution::par, one under execution::seq); every piece has its own trace and gradient network,
// and the gradients are summed in piece order.  The result therefore depends on the number of
// chunks, never on thread timing; fit(seq, ...) and fit(par, ...) with the same `chunks` agree
// bit for bit.
// throws: data_error for an empty dataset, a label count that differs from the sample count, or a
//         label outside [0, classes) (naming the sample); shape_error for a wrong input shape;
//         value_error for NaN/Inf inputs or a zero batch size.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "nnlens/core/execution.hpp"
#include "nnlens/core/finite.hpp"
#include "nnlens/core/progress.hpp"
#include "nnlens/core/random.hpp"
#include "nnlens/core/thread_pool.hpp"
#include "nnlens/network/forward.hpp"
#include "nnlens/network/parameters.hpp"
#include "nnlens/network/trace.hpp"
#include "nnlens/train/loss.hpp"
#include "nnlens/train/mask.hpp"

namespace nnlens::train {

struct fit_options {
  std::size_t epochs = 1;
  std::size_t batch_size = 64;
  std::uint64_t seed = 0;       // shuffling
  bool shuffle = true;
  std::size_t chunks = 0;       // pieces per mini-batch; 0: pool threads (par) or 1 (seq)
  std::size_t threads = 0;      // par only: 0 uses the process-wide pool, n > 0 a pool of n threads
  bool progress = false;        // a progress bar on stderr
  progress_options progress_style{};
  const parameter_mask* mask = nullptr;  // frozen parameters receive no update
};

struct epoch_report {
  std::size_t epoch = 0, epochs = 0;  // 1-based
  double loss = 0;                    // mean training loss over the epoch
  double accuracy = 0;                // training accuracy over the epoch (while training)
  double seconds = 0;                 // wall time of this epoch
};

struct fit_report {
  std::vector<epoch_report> epochs;
  std::uint64_t steps = 0;
  double seconds = 0;  // wall time of the whole fit
};

struct evaluation {
  double loss = 0;      // mean cross-entropy
  double accuracy = 0;  // correct / samples
  std::size_t correct = 0, samples = 0;
};

namespace detail {

using nnlens::detail::shuffle;           // core/random.hpp (portable Fisher-Yates)
using nnlens::detail::contiguous_input;  // core/tensor.hpp

template <class Labels>
auto label_span(const Labels& y) {
  using Label = std::remove_cv_t<std::remove_reference_t<decltype(*std::data(y))>>;
  static_assert(std::is_integral_v<Label>, "labels must be integer class indices");
  return std::span<const Label>(std::data(y), std::size(y));
}

/// Validates a labelled dataset against the network; returns N.
template <class Net, class E, class Label>
std::size_t check_dataset(const Net& net, const E& x, std::span<const Label> y, const char* what) {
  const std::size_t n = nnlens::detail::check_batch_input(x, input_shape_of(net), what);
  if (n == 0) throw data_error(nnlens::detail::concat(what, ": the dataset is empty"));
  if (y.size() != n)
    throw data_error(nnlens::detail::concat(what, ": ", n, " samples but ", y.size(), " labels"));
  const std::size_t classes = output_shape_of(net).size();
  for (std::size_t i = 0; i < n; ++i) checked_label(y[i], classes, i);
  return n;
}

template <class F, class R>
bool call_epoch_callback(F& f, const R& r) {
  if constexpr (std::is_same_v<F, std::nullptr_t>) {
    return true;
  } else if constexpr (std::is_convertible_v<std::invoke_result_t<F&, const R&>, bool>) {
    return bool(f(r));
  } else {
    f(r);
    return true;
  }
}

/// Per-chunk state: a trace, a gradient network, logits gradient, partial results.
template <class Net, class T>
struct chunk_state {
  trace<T> tr;
  Net grad;
  std::vector<T> dlogits;
  T loss = 0;
  std::size_t correct = 0;
};

}  // namespace detail

/// Loss and correct predictions of one mini-batch step.
struct step_result {
  double loss = 0;  // mean cross-entropy over the mini-batch (before the update)
  std::size_t correct = 0;
};

/// One optimisation step on a mini-batch: forward, softmax cross-entropy, backward and the
/// optimiser's update.  The mini-batch is split into `chunks` contiguous pieces, each with its
/// own trace and gradient network (run on `pool` when given), and the gradients are summed in
/// piece order, so the result depends on the number of chunks and never on thread timing.
/// The traces and gradient networks persist between calls: after the first step at a given batch
/// size, a step allocates nothing.  fit() is a loop over this.
template <class Net>
class trainer {
 public:
  using scalar_type = network_scalar_t<Net>;

  explicit trainer(const Net& net, std::size_t chunks = 1, nnlens::detail::thread_pool* pool = nullptr)
      : st_(std::max<std::size_t>(1, chunks)), pool_(pool) {
    for (auto& c : st_) c.grad = zeros_like(net);
  }

  /// xb: nb = yb.size() samples [nb, in...], contiguous; labels are checked (data_error).
  template <class Opt, class Label>
  step_result step(Net& net, Opt& opt, const scalar_type* xb, std::span<const Label> yb,
                   const parameter_mask* mask = nullptr) {
    using T = scalar_type;
    const std::size_t nb = yb.size();
    if (nb == 0) throw data_error("trainer::step: empty mini-batch");
    const std::size_t in = input_shape_of(net).size(), classes = output_shape_of(net).size();
    const std::size_t nc = std::min(st_.size(), nb);
    const std::size_t per = (nb + nc - 1) / nc;
    auto work = [&](std::size_t c) {
      auto& cs = st_[c];
      fill_parameters(cs.grad, 0);
      cs.loss = 0;
      cs.correct = 0;
      const std::size_t c0 = c * per, c1 = std::min(nb, c0 + per);
      if (c0 >= c1) return;
      const std::size_t m = c1 - c0;
      forward_trace(net, m, xb + c0 * in, cs.tr);
      cs.dlogits.resize(m * classes);
      const auto out = cs.tr.output();
      const std::span<const Label> yl = yb.subspan(c0, m);
      cs.loss = softmax_cross_entropy<T, Label>(out, classes, yl, cs.dlogits, nb, c0);
      cs.correct = count_correct<T, Label>(out, classes, yl);
      backward(net, cs.tr, cs.dlogits.data(), &cs.grad, static_cast<T*>(nullptr));
    };
    if (pool_ && nc > 1)
      pool_->parallel_for(nc, work);
    else
      for (std::size_t c = 0; c < nc; ++c) work(c);
    // Sum the gradients in chunk order (deterministic), into chunk 0's network.
    T batch_loss = st_[0].loss;
    std::size_t batch_correct = st_[0].correct;
    if (nc > 1) {
      auto g0 = parameter_spans(st_[0].grad);
      for (std::size_t c = 1; c < nc; ++c) {
        const auto gc = parameter_spans(std::as_const(st_[c].grad));
        for (std::size_t k = 0; k < g0.size(); ++k) {
          T* a = g0[k].data();
          const T* b = gc[k].data();
          for (std::size_t i = 0, len = g0[k].size(); i < len; ++i) a[i] += b[i];
        }
        batch_loss += st_[c].loss;
        batch_correct += st_[c].correct;
      }
    }
    if (mask) mask->apply(st_[0].grad);
    opt.step(net, st_[0].grad, mask);
    return {double(batch_loss), batch_correct};
  }

  /// The summed (and masked) gradient of the last step.
  const Net& gradient() const { return st_[0].grad; }

 private:
  std::vector<detail::chunk_state<Net, scalar_type>> st_;
  nnlens::detail::thread_pool* pool_;
};

/// Trains `net` with `opt`; see the header comment.
template <class Policy, class Net, class Opt, class E, class Labels, class Callback = std::nullptr_t>
  requires execution::is_execution_policy_v<Policy>
fit_report fit(const Policy&, Net& net, Opt& opt, const E& x, const Labels& y, const fit_options& o = {},
               Callback&& on_epoch = nullptr) {
  using T = network_scalar_t<Net>;
  using clock = std::chrono::steady_clock;
  constexpr bool parallel = execution::is_host_parallel_policy_v<Policy>;
  const auto labels = detail::label_span(y);
  const std::size_t n = detail::check_dataset(net, x, labels, "fit");
  if (o.batch_size == 0) throw value_error("fit: batch_size must be at least 1");
  if (o.mask) o.mask->check(net);
  const std::size_t in = input_shape_of(net).size();
  detail::contiguous_input<T, E> xs(x);
  require_finite(std::span<const T>(xs.data(), n * in), in, "fit: input");

  std::unique_ptr<nnlens::detail::thread_pool> own_pool;
  nnlens::detail::thread_pool* pool = nullptr;
  if constexpr (parallel) {
    if (o.threads) own_pool = std::make_unique<nnlens::detail::thread_pool>(o.threads);
    pool = own_pool ? own_pool.get() : &nnlens::detail::default_pool();
  }
  const std::size_t batch = std::min(o.batch_size, n);
  const std::size_t chunks = std::min(batch, o.chunks ? o.chunks : (pool ? pool->size() : std::size_t(1)));

  trainer<Net> step(net, chunks, pool);
  std::vector<T> xb(batch * in);
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t(0));
  std::mt19937_64 rng(o.seed);
  using Label = typename decltype(labels)::value_type;
  std::vector<Label> yb(batch);

  fit_report report;
  const auto t_fit = clock::now();
  for (std::size_t epoch = 1; epoch <= o.epochs; ++epoch) {
    const auto t_epoch = clock::now();
    if (o.shuffle) detail::shuffle(order, rng);
    std::optional<progress_bar> bar;
    if (o.progress)
      bar.emplace(nnlens::detail::concat("epoch ", epoch, "/", o.epochs), n, o.progress_style);
    double loss_sum = 0;
    std::size_t correct = 0, seen = 0;
    auto fields = [&] {
      char buf[64];
      std::snprintf(buf, sizeof buf, "loss %.4f  acc %.2f%%", seen ? loss_sum / double(seen) : 0.0,
                    seen ? 100.0 * double(correct) / double(seen) : 0.0);
      return std::string(buf);
    };
    for (std::size_t b0 = 0; b0 < n; b0 += batch) {
      const std::size_t nb = std::min(batch, n - b0);
      for (std::size_t i = 0; i < nb; ++i) {
        const std::size_t s = order[b0 + i];
        std::copy_n(xs.data() + s * in, in, xb.data() + i * in);
        yb[i] = labels[s];
      }
      const step_result r = step.step(net, opt, xb.data(), std::span<const Label>(yb.data(), nb), o.mask);
      ++report.steps;
      loss_sum += r.loss * double(nb);
      correct += r.correct;
      seen += nb;
      if (bar) bar->update(seen, fields);
    }
    epoch_report er;
    er.epoch = epoch;
    er.epochs = o.epochs;
    er.loss = loss_sum / double(seen);
    er.accuracy = double(correct) / double(seen);
    er.seconds = std::chrono::duration<double>(clock::now() - t_epoch).count();
    if (bar) bar->finish(fields);
    report.epochs.push_back(er);
    if (!detail::call_epoch_callback(on_epoch, er)) break;
  }
  report.seconds = std::chrono::duration<double>(clock::now() - t_fit).count();
  return report;
}

/// Sequential training (the calling thread only).
template <class Net, class Opt, class E, class Labels, class Callback = std::nullptr_t>
  requires(!execution::is_execution_policy_v<Net>)
fit_report fit(Net& net, Opt& opt, const E& x, const Labels& y, const fit_options& o = {},
               Callback&& on_epoch = nullptr) {
  return fit(execution::seq, net, opt, x, y, o, std::forward<Callback>(on_epoch));
}

/// Mean cross-entropy and accuracy of `net` on (x, y), forwarding blocks of `block` samples with
/// forward(policy, ...).
template <class Policy, class Net, class E, class Labels>
  requires execution::is_execution_policy_v<Policy>
evaluation evaluate(const Policy& policy, const Net& net, const E& x, const Labels& y, std::size_t block = 1024) {
  using T = network_scalar_t<Net>;
  const auto labels = detail::label_span(y);
  using Label = typename decltype(labels)::value_type;
  const std::size_t n = detail::check_dataset(net, x, labels, "evaluate");
  if (block == 0) block = 1024;
  const shape ins = input_shape_of(net);
  const std::size_t in = ins.size(), classes = output_shape_of(net).size();
  detail::contiguous_input<T, E> xs(x);
  evaluation ev;
  double loss = 0;
  for (std::size_t b0 = 0; b0 < n; b0 += block) {
    const std::size_t nb = std::min(block, n - b0);
    auto view = xt::adapt(xs.data() + b0 * in, nb * in, xt::no_ownership(), ins.with_batch(nb));
    const auto logits = forward(policy, net, view);
    const std::span<const T> out(logits.data(), logits.size());
    const std::span<const Label> yl = labels.subspan(b0, nb);
    loss += double(softmax_cross_entropy<T, Label>(out, classes, yl, {}, 1, b0));
    ev.correct += count_correct<T, Label>(out, classes, yl);
  }
  ev.samples = n;
  ev.loss = loss / double(n);
  ev.accuracy = double(ev.correct) / double(n);
  return ev;
}
template <class Net, class E, class Labels>
  requires(!execution::is_execution_policy_v<Net>)
evaluation evaluate(const Net& net, const E& x, const Labels& y, std::size_t block = 1024) {
  return evaluate(execution::seq, net, x, y, block);
}

}  // namespace nnlens::train
