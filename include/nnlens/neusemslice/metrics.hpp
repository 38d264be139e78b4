// nnlens/neusemslice/metrics.hpp -- the five neuron metrics NeuSemSlice ranks neurons by
// (docs/specs/neusemslice.md#22-contribution-metrics): avg, var, ens, taylor and deeplift.
//
//   detail::metric_over(parallel, net, units, x, idx, target, metric, o)   [unit][neuron]: the metric
//                 of every neuron of neuron_units(net) over the samples idx of x (rows of
//                 input_shape_of(net).size() values), sample idx[i] with target class target[i]
//   detail::metric_engine<Net>      one thread's engine: the partial metric of one mini-batch
//   detail::merge_partial / finish_partial   mini-batch partials merged in batch order, then the
//                 metric (the same result on one thread or many)
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
// requires: net ends at the logits for taylor and deeplift (a trailing Softmax: value_error);
//           metric_options::batch >= 1 (value_error otherwise).
// ensures:  the result does not depend on `parallel` (per-batch partials merged in batch order).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>
#include <type_traits>
#include <vector>

#include "nnlens/core/error.hpp"
#include "nnlens/core/properties.hpp"
#include "nnlens/core/thread_pool.hpp"
#include "nnlens/network/forward.hpp"
#include "nnlens/network/trace.hpp"
#include "nnlens/network/units.hpp"
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

}  // namespace detail

}  // namespace nnlens
