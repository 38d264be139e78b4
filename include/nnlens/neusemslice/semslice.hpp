// nnlens/neusemslice/semslice.hpp -- NeuSemSlice: neuron-level semantic slicing (specs/neusemslice.md
// §2.2-§2.6, Algorithm 1).
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
// Metrics (§2.2), computed on D_c (all of it unless semslice_options::metric_samples caps it):
//   metric::avg       mean of the neuron's value (a conv channel: the spatial mean of its
//                     post-activation map, A3; a dense unit: its post-activation value)
//   metric::var       population variance of the same value (Welford per mini-batch, Chan's merge:
//                     a constant neuron gives exactly (value, 0))
//   metric::ens       (minmax(avg) + minmax(var)) / 2, min-max within the layer (a layer where all
//                     values are equal normalises to 0), in [0, 1]
//   metric::taylor    Molchanov et al. 2019, pre-activation gate form: per mini-batch B of D_c,
//                     I_n = (sum over the Dense/Conv2D parameters w of neuron n of w * dL/dw)^2 with L
//                     the mean cross-entropy of B with label c (= (sum over positions z * dL/dz)^2
//                     at the pre-activation z); averaged over the mini-batches.  With
//                     taylor_with_batch_norm the following BatchNorm's gamma and beta of the channel
//                     are in the sum too.
//   metric::deeplift  DeepLIFT Rescale, zero baseline x0 = 0, target = output c of the network (its
//                     logit: the network must end at the logits): multipliers from the target
//                     backwards; a layer with pwl_rule<L>::knots (ReLU, LeakyReLU, HardTanh, Clamp)
//                     takes the secant (y - y0)/(x - x0), its ordinary derivative where
//                     |x - x0| < 1e-6; every other layer its ordinary backward (max pool routes by
//                     x's arg-max; a Residual block's inner activations use their gradients: the
//                     spec's simplification).  Attribution of neuron n = sum over its positions of
//                     (a - a0) * m, averaged over D_c.  Ranked by the signed value.
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
#include "nnlens/core/thread_pool.hpp"
#include "nnlens/network/forward.hpp"
#include "nnlens/network/trace.hpp"
#include "nnlens/neusemslice/cka.hpp"
#include "nnlens/neusemslice/neuron_mask.hpp"
#include "nnlens/train/loss.hpp"

namespace nnlens {

enum class metric { avg, var, ens, taylor, deeplift };

inline const char* to_string(metric m) {
  constexpr const char* names[] = {"avg", "var", "ens", "taylor", "deeplift"};
  return std::size_t(m) < 5 ? names[std::size_t(m)] : "?";
}

struct metric_options {
  std::size_t batch = 64;               // forward chunk and Taylor's mini-batch
  bool taylor_with_batch_norm = false;  // Taylor: also the following BatchNorm's gamma/beta
  double deeplift_eps = 1e-6;           // DeepLIFT: |x - x0| below this takes the derivative
};

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

template <class L>
concept deeplift_elementwise = requires(const L& l) { pwl_rule<L>::knots(l); };


/// Per-unit, per-neuron partial sums of one mini-batch (mergeable).  avg/var/ens: a = mean, b = M2,
/// n = samples; taylor: a = sum of I_n, n = mini-batches; deeplift: a = sum, n = samples.
struct metric_partial {
  std::vector<std::vector<double>> a, b;
  double n = 0;
};

inline void merge_partial(metric_partial& x, const metric_partial& y, metric mt) {
  if (y.n == 0) return;
  if (x.n == 0) {
    x = y;
    return;
  }
  const bool moments = mt == metric::avg || mt == metric::var || mt == metric::ens;
  const double n = x.n + y.n;
  for (std::size_t u = 0; u < x.a.size(); ++u)
    for (std::size_t k = 0; k < x.a[u].size(); ++k) {
      if (moments) {  // Chan et al.: exact for equal means
        const double d = y.a[u][k] - x.a[u][k];
        x.a[u][k] += d * (y.n / n);
        x.b[u][k] += y.b[u][k] + d * d * (x.n * y.n / n);
      } else {
        x.a[u][k] += y.a[u][k];
      }
    }
  x.n = n;
}

inline std::vector<std::vector<double>> finish_partial(const metric_partial& p, metric mt) {
  std::vector<std::vector<double>> r = p.a;
  for (std::size_t u = 0; u < r.size(); ++u) {
    auto& s = r[u];
    if (mt == metric::var || mt == metric::ens) {
      std::vector<double> var(s.size());
      for (std::size_t k = 0; k < s.size(); ++k) var[k] = p.b[u][k] / p.n;
      if (mt == metric::var) {
        s = var;
      } else {
        auto norm = [](std::vector<double>& v) {
          const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
          const double l = *lo, h = *hi;
          for (auto& x : v) x = h > l ? (x - l) / (h - l) : 0.0;
        };
        norm(s);
        norm(var);
        for (std::size_t k = 0; k < s.size(); ++k) s[k] = (s[k] + var[k]) / 2;
      }
    } else if (mt != metric::avg) {
      for (auto& v : s) v /= p.n;
    }
  }
  return r;
}

/// Per-thread engine computing the partial metric of one mini-batch.
template <class Net>
class metric_engine {
  using T = network_scalar_t<Net>;

 public:
  metric_engine(const Net& net, const std::vector<neuron_unit>& us, metric mt, const metric_options& o)
      : net_(net), us_(us), mt_(mt), o_(o) {
    if (mt == metric::taylor || mt == metric::deeplift) {
      bool distribution = false;  // the last layer's output is a distribution (Softmax)
      for_each_layer(net, [&](const auto& l, auto, shape, shape) {
        (void)l;
        distribution = output_is_distribution_v<std::decay_t<decltype(l)>>;
      });
      if (distribution)
        throw value_error(concat("semslice: the ", to_string(mt), " metric needs the logits; drop the trailing Softmax"));
    }
    if (mt == metric::taylor) {
      grads_ = std::make_unique<Net>(zeros_like(net));
      plist_.resize(us.size());
      for (std::size_t u = 0; u < us.size(); ++u) {
        neuron_unit own = us[u];
        if (!o.taylor_with_batch_norm) own.followers.clear();
        plist_[u].resize(us[u].neurons);
        for (std::size_t k = 0; k < us[u].neurons; ++k)
          for_each_unit_parameter(net, own, k, [&](std::size_t t, std::size_t e) { plist_[u][k].push_back({t, e}); });
      }
    }
    if (mt == metric::deeplift) {
      const std::vector<T> zero(input_shape_of(net).size(), T(0));
      forward_trace(net, 1, zero.data(), base_);
      lowest_ = us.front().feature;
      for (const auto& u : us) lowest_ = std::min(lowest_, u.feature);
    }
  }

  /// x: [b, input] samples; target[i]: the class of sample i.
  metric_partial run(const T* x, std::size_t b, std::span<const std::size_t> target) {
    metric_partial p;
    p.a.resize(us_.size());
    for (std::size_t u = 0; u < us_.size(); ++u) p.a[u].assign(us_[u].neurons, 0.0);
    p.b = p.a;
    forward_trace(net_, b, x, tr_);
    if (mt_ == metric::taylor) {
      taylor(p, b, target);
    } else if (mt_ == metric::deeplift) {
      deeplift(p, b, target);
    } else {
      for (std::size_t u = 0; u < us_.size(); ++u) {
        const auto a = tr_.activation(us_[u].feature + 1);
        const std::size_t w = us_[u].neurons, per = us_[u].out.size() / w;
        for (std::size_t s = 0; s < b; ++s)
          for (std::size_t k = 0; k < w; ++k) {
            double v = 0;  // the neuron's value: a channel's spatial mean (per = 1: exact)
            for (std::size_t q = 0; q < per; ++q) v += double(a[(s * w + k) * per + q]);
            if (per > 1) v /= double(per);
            const double d = v - p.a[u][k];  // Welford
            p.a[u][k] += d / double(s + 1);
            p.b[u][k] += d * (v - p.a[u][k]);
          }
      }
      p.n = double(b);
    }
    return p;
  }

 private:
  void taylor(metric_partial& p, std::size_t b, std::span<const std::size_t> target) {
    const std::size_t classes = output_shape_of(net_).size();
    dlog_.assign(b * classes, T(0));
    train::softmax_cross_entropy<T, std::size_t>(tr_.output(), classes, target, dlog_);
    fill_parameters(*grads_, 0);
    backward(net_, tr_, dlog_.data(), grads_.get(), static_cast<T*>(nullptr));
    const auto w = parameter_spans(net_);
    const auto g = parameter_spans(std::as_const(*grads_));
    for (std::size_t u = 0; u < us_.size(); ++u)
      for (std::size_t k = 0; k < plist_[u].size(); ++k) {
        double s = 0;
        for (auto [t, e] : plist_[u][k]) s += double(w[t][e]) * double(g[t][e]);
        p.a[u][k] = s * s;
      }
    p.n = 1;
  }

  void deeplift(metric_partial& p, std::size_t b, std::span<const std::size_t> target) {
    std::size_t max_act = 0;
    for (std::size_t i = 0; i <= tr_.layers(); ++i) max_act = std::max(max_act, tr_.shape_at(i).size());
    m0_.assign(b * max_act, T(0));
    m1_.assign(b * max_act, T(0));
    const std::size_t classes = output_shape_of(net_).size();
    for (std::size_t s = 0; s < b; ++s) m0_[s * classes + target[s]] = T(1);
    T* cur = m0_.data();
    T* nxt = m1_.data();
    const double eps = o_.deeplift_eps;
    for_each_layer_reverse(net_, [&](const auto& l, auto idx, shape in, shape out) {
      using L = std::decay_t<decltype(l)>;
      const std::size_t i = idx;
      if (i < lowest_) return;
      for (std::size_t u = 0; u < us_.size(); ++u) {
        if (us_[u].feature != i) continue;
        const auto a = tr_.activation(i + 1);
        const auto a0 = base_.activation(i + 1);
        const std::size_t w = us_[u].neurons, per = out.size() / w;
        for (std::size_t s = 0; s < b; ++s)
          for (std::size_t k = 0; k < w; ++k) {
            double v = 0;
            for (std::size_t q = 0; q < per; ++q) {
              const std::size_t e = k * per + q;
              v += (double(a[s * out.size() + e]) - double(a0[e])) * double(cur[s * out.size() + e]);
            }
            p.a[u][k] += v;
          }
      }
      if (i == lowest_) return;
      layer_traits<L>::backward(l, backward_args<T>{in, out, b, tr_.act_ptr(i), tr_.act_ptr(i + 1), cur, tr_.cache_ptr(i), nxt,
                                                    tr_.scratch_ptr()},
                                static_cast<L*>(nullptr));
      if constexpr (deeplift_elementwise<L>) {  // Rescale: the secant slope
        const auto x0 = base_.activation(i), y0 = base_.activation(i + 1);
        const T* x = tr_.act_ptr(i);
        const T* y = tr_.act_ptr(i + 1);
        const std::size_t n = in.size();
        for (std::size_t s = 0; s < b; ++s)
          for (std::size_t e = 0; e < n; ++e) {
            const std::size_t j = s * n + e;
            const double dx = double(x[j]) - double(x0[e]);
            if (std::abs(dx) >= eps) nxt[j] = T(double(cur[j]) * ((double(y[j]) - double(y0[e])) / dx));
          }
      }
      std::swap(cur, nxt);
    });
    p.n = double(b);
  }

  const Net& net_;
  const std::vector<neuron_unit>& us_;
  metric mt_;
  metric_options o_;
  trace<T> tr_, base_;
  std::unique_ptr<Net> grads_;
  std::vector<std::vector<std::vector<std::pair<std::size_t, std::size_t>>>> plist_;
  std::vector<T> dlog_, m0_, m1_;
  std::size_t lowest_ = 0;
};

/// The metric over the samples idx (targets: one class per entry of idx), [unit][neuron].
template <class Net>
std::vector<std::vector<double>> metric_over(bool parallel, const Net& net, const std::vector<neuron_unit>& us,
                                             const network_scalar_t<Net>* x, std::span<const std::size_t> idx,
                                             std::span<const std::size_t> target, metric mt, const metric_options& o) {
  using T = network_scalar_t<Net>;
  if (o.batch == 0) throw value_error("semslice: metric_options::batch must be >= 1");
  const std::size_t in = input_shape_of(net).size(), bs = o.batch;
  const std::size_t batches = (idx.size() + bs - 1) / bs;
  std::vector<metric_partial> part(batches);
  auto& pool = default_pool();
  const std::size_t tasks = parallel ? std::min(pool.size(), batches) : 1;
  auto work = [&](std::size_t t) {
    metric_engine<Net> e(net, us, mt, o);
    std::vector<T> xb;
    for (std::size_t c = t; c < batches; c += tasks) {
      const std::size_t lo = c * bs, b = std::min(bs, idx.size() - lo);
      xb.resize(b * in);
      for (std::size_t s = 0; s < b; ++s) std::copy_n(x + idx[lo + s] * in, in, xb.data() + s * in);
      part[c] = e.run(xb.data(), b, target.subspan(lo, b));
    }
  };
  if (tasks > 1)
    pool.parallel_for(tasks, work);
  else
    work(0);
  metric_partial all;
  for (const auto& p : part) merge_partial(all, p, mt);
  return finish_partial(all, mt);
}

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

/// The high 64 bits of a * b (Lemire's bounded draw: portable, unlike std's distributions).
constexpr std::uint64_t mulhi64_semslice(std::uint64_t a, std::uint64_t b) {
  const std::uint64_t al = a & 0xffffffffu, ah = a >> 32, bl = b & 0xffffffffu, bh = b >> 32;
  const std::uint64_t p0 = al * bl, p1 = al * bh, p2 = ah * bl, p3 = ah * bh;
  const std::uint64_t mid = (p0 >> 32) + (p1 & 0xffffffffu) + (p2 & 0xffffffffu);
  return p3 + (p1 >> 32) + (p2 >> 32) + (mid >> 32);
}

/// m of the members, without replacement (portable Fisher-Yates), in dataset order.
inline std::vector<std::size_t> draw_samples(std::vector<std::size_t> members, std::size_t m, std::uint64_t seed, std::size_t c) {
  if (members.size() <= m) return members;
  std::mt19937_64 rng(seed ^ (0x9E3779B97F4A7C15ull * (std::uint64_t(c) + 1)));
  for (std::size_t i = 0; i < m; ++i) {  // partial shuffle: the first m are a uniform draw
    const std::size_t r = members.size() - i;
    const std::size_t j = i + std::size_t(mulhi64_semslice(rng(), r));
    std::swap(members[i], members[j]);
  }
  members.resize(m);
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
