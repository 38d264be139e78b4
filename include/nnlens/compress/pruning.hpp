// nnlens/compress/pruning.hpp -- unstructured magnitude pruning of the weight tensors, with the
// four layer-wise allocators of docs/specs/neusemslice.md#41-model-restructure (DeepArc's setup).
//
//   auto ws = weight_tensors(net);        the first parameter tensor (the weights) of every
//                                         Dense/Conv2D unit (neuron_units(net)), with its fan-in,
//                                         fan-out and kernel size
//   pruning_mask m = make_pruning_mask(net [, present]);
//                                         alive[t][i] = 1: parameter i of tensor t is still there.
//                                         `present` (a train::parameter_mask, 1 = present) marks
//                                         parameters already removed by other means (a neuron
//                                         mask's, §2.7 A11): they are not prunable and do not count
//   prune_step(net, m, p, method [, keep_mask])
//                                         prunes round(p * R) of the R alive weights (p in (0,1)),
//                                         allocated over the layers by `method`, smallest |w|
//                                         first within a layer; sets them to 0 in net and to 0 in m.
//                                         keep_mask (1 = present) is ANDed into m first.
//   m.trainable()                         train::parameter_mask (1 = alive) for train::fit: pruned
//                                         (and structurally removed) parameters never move again
//
// Allocators (the number of weights pruned this step is the same for all four):
//   lamp          Lee et al. ICLR'21: score(u) = w_u^2 / sum_{v in layer, alive, |w_v| >= |w_u|} w_v^2;
//                 the globally smallest scores go (ties: smaller |w|, then tensor and index order)
//   global        Morcos et al.: one magnitude threshold over all layers (the smallest |w| go)
//   uniform_plus  Gale et al.: the same fraction of each layer's alive weights; the first layer
//                 stays dense when it is a convolution; the last layer keeps at least 20% of its
//                 base weights (those present when the mask was made) when it is a Dense
//   erk           Evci et al. (RigL): the survivors of layer l proportional to
//                 (n_in + n_out + k_h + k_w) (density proportional to that / (n_in n_out k_h k_w);
//                 a Dense has no kernel terms), scaled to the step's global target; a layer that
//                 would need more survivors than it has stays dense and the rest is redistributed
//                 (repeated until no layer overflows)
// Per-layer quotas are real numbers rounded by largest remainder so they sum to exactly the
// step's count.  After NI steps of p, 1 - (1-p)^NI of the prunable weights are pruned, up to the
// per-step rounding (spec §7 oracle 8).
// Errors: p outside (0, 1) or NaN -> value_error; a mask of another network -> shape_error;
// uniform_plus with nothing left to prune outside the dense first layer / capped last layer ->
// value_error.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "nnlens/core/error.hpp"
#include "nnlens/network/parameters.hpp"
#include "nnlens/network/units.hpp"
#include "nnlens/train/mask.hpp"

namespace nnlens::compress {

enum class pruning_method { lamp, global, uniform_plus, erk };

inline std::string_view pruning_method_name(pruning_method m) {
  switch (m) {
    case pruning_method::lamp: return "LAMP";
    case pruning_method::global: return "Global";
    case pruning_method::uniform_plus: return "Uniform+";
    case pruning_method::erk: return "ERK";
  }
  return "?";
}

/// A prunable weight tensor: parameter_spans(net)[tensor] is the weights of unit `unit`.
struct weight_tensor {
  std::size_t tensor = 0;  // index into parameter_spans(net)
  std::size_t layer = 0;   // top-level layer index
  std::size_t unit = 0;    // index into neuron_units(net)
  std::string name;        // "3 Dense"
  std::size_t size = 0;
  std::size_t n_in = 0, n_out = 0, k_h = 0, k_w = 0;  // k_h = k_w = 0: a Dense (no kernel terms)
  bool convolution = false;                           // a rank-3 (C, H, W) output
  bool first = false, last = false;
};

template <class Net>
std::vector<weight_tensor> weight_tensors(const Net& net) {
  const auto us = neuron_units(net);
  std::vector<weight_tensor> r;
  std::size_t t0 = 0, u = 0;
  for_each_layer(net, [&](const auto& l, auto idx, shape, shape out) {
    using L = std::decay_t<decltype(l)>;
    if constexpr (HasParameters<L>) {
      const auto ps = layer_traits<L>::parameters(l);
      while (u < us.size() && us[u].layer < std::size_t(idx)) ++u;
      if (u < us.size() && us[u].layer == std::size_t(idx) && !ps.empty()) {
        weight_tensor w;
        w.tensor = t0, w.layer = idx, w.unit = u, w.name = us[u].name;
        w.size = ps[0].size();
        w.n_out = us[u].neurons;
        w.convolution = out.rank == 3;
        if constexpr (requires { l.W.shape(); l.W.dimension(); }) {
          if (l.W.dimension() == 4) {  // [out, in/groups, kh, kw]
            w.n_in = l.W.shape()[1], w.k_h = l.W.shape()[2], w.k_w = l.W.shape()[3];
          }
        }
        if (w.n_in == 0) w.n_in = w.n_out ? w.size / w.n_out : 0;
        r.push_back(std::move(w));
      }
      t0 += ps.size();
    } else {
      (void)l, (void)idx, (void)out;
    }
  });
  if (!r.empty()) r.front().first = true, r.back().last = true;
  return r;
}

/// Which parameters are still there (1) -- and how many weights each weight tensor had when the
/// mask was made (the base of Uniform+'s last-layer cap).
struct pruning_mask {
  std::vector<std::vector<std::uint8_t>> alive;  // per parameter tensor (parameter_spans order)
  std::vector<std::size_t> base;                 // per parameter tensor: alive count at creation

  std::size_t alive_count(std::size_t t) const {
    std::size_t n = 0;
    for (auto v : alive.at(t)) n += v != 0;
    return n;
  }
  /// 1 = trainable (alive), for train::fit_options::mask.
  train::parameter_mask trainable() const { return train::parameter_mask(alive); }
};

namespace detail {
template <class Net>
void check_pruning_mask(const Net& net, const pruning_mask& m, const char* who) {
  const auto ps = parameter_spans(net);
  if (ps.size() != m.alive.size() || m.base.size() != m.alive.size())
    throw shape_error(nnlens::detail::concat(who, ": the mask has ", m.alive.size(), " tensors, the network ", ps.size()));
  for (std::size_t k = 0; k < ps.size(); ++k)
    if (ps[k].size() != m.alive[k].size())
      throw shape_error(nnlens::detail::concat(who, ": tensor ", k, " has ", ps[k].size(), " elements, the mask ",
                                               m.alive[k].size()));
}

/// Rounds real quotas q (sum = n, each <= cap) to integers summing to exactly n: floors, then the
/// largest remainders (ties: lower index), never above cap.
inline std::vector<std::size_t> round_quotas(const std::vector<double>& q, const std::vector<std::size_t>& cap, std::size_t n) {
  std::vector<std::size_t> r(q.size());
  std::size_t sum = 0;
  for (std::size_t i = 0; i < q.size(); ++i) {
    const double v = std::max(0.0, q[i]);
    r[i] = std::min(cap[i], std::size_t(std::floor(v + 1e-9)));
    sum += r[i];
  }
  std::vector<std::size_t> idx(q.size());
  std::iota(idx.begin(), idx.end(), std::size_t(0));
  std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) {
    return (q[a] - double(r[a])) > (q[b] - double(r[b]));
  });
  while (sum < n) {  // hand out the remainder; a second round if caps stop the first
    bool any = false;
    for (std::size_t i : idx)
      if (sum < n && r[i] < cap[i]) ++r[i], ++sum, any = true;
    if (!any) break;
  }
  while (sum > n) {  // only from rounding noise
    bool any = false;
    for (auto it = idx.rbegin(); it != idx.rend() && sum > n; ++it)
      if (r[*it] > 0) --r[*it], --sum, any = true;
    if (!any) break;
  }
  return r;
}
}  // namespace detail

/// Every parameter alive, or those with present[t][i] = 1 (e.g. a neuron mask's survivors).
template <class Net>
pruning_mask make_pruning_mask(const Net& net, const train::parameter_mask* present = nullptr) {
  const auto ps = parameter_spans(net);
  if (present) present->check(net);
  pruning_mask m;
  for (std::size_t k = 0; k < ps.size(); ++k) {
    auto& a = m.alive.emplace_back(ps[k].size(), std::uint8_t(1));
    if (present)
      for (std::size_t i = 0; i < a.size(); ++i) a[i] = present->trainable(k, i) ? 1 : 0;
    m.base.push_back(m.alive_count(k));
  }
  return m;
}
template <class Net>
pruning_mask make_pruning_mask(const Net& net, const train::parameter_mask& present) {
  return make_pruning_mask(net, &present);
}

struct prune_step_report {
  std::size_t remaining_before = 0;  // alive prunable weights before the step
  std::size_t pruned = 0;            // this step
  std::vector<std::size_t> per_tensor;  // pruned this step, per weight_tensors(net) entry
  std::size_t remaining() const { return remaining_before - pruned; }
};

/// The number of weights each weight tensor loses when `n` of the alive ones are pruned by
/// `method` (before picking which): exposed for tests.  alive_w[l][j]: the alive weights of tensor
/// l (any order); base[l]: Uniform+'s base count.
template <class T>
std::vector<std::size_t> allocate_pruning(pruning_method method, const std::vector<weight_tensor>& ws,
                                          const std::vector<std::vector<T>>& alive_w, const std::vector<std::size_t>& base,
                                          std::size_t n) {
  const std::size_t L = ws.size();
  std::vector<std::size_t> R(L);
  std::size_t total = 0;
  for (std::size_t l = 0; l < L; ++l) R[l] = alive_w[l].size(), total += R[l];
  if (n > total) throw value_error(nnlens::detail::concat("prune: ", n, " weights to prune, only ", total, " left"));
  std::vector<std::size_t> out(L, 0);
  if (n == 0) return out;

  if (method == pruning_method::global || method == pruning_method::lamp) {
    struct key {
      double score, mag;
      std::size_t l, j;
    };
    std::vector<key> ks;
    ks.reserve(total);
    for (std::size_t l = 0; l < L; ++l) {
      const auto& w = alive_w[l];
      if (method == pruning_method::global) {
        for (std::size_t j = 0; j < w.size(); ++j) ks.push_back({std::abs(double(w[j])), std::abs(double(w[j])), l, j});
      } else {
        std::vector<std::size_t> o(w.size());
        std::iota(o.begin(), o.end(), std::size_t(0));
        std::stable_sort(o.begin(), o.end(), [&](std::size_t a, std::size_t b) { return std::abs(double(w[a])) < std::abs(double(w[b])); });
        // suffix sums of w^2 over |w_v| >= |w_u| (equal magnitudes share one denominator)
        std::vector<double> suffix(o.size() + 1, 0.0);
        for (std::size_t i = o.size(); i-- > 0;) suffix[i] = suffix[i + 1] + double(w[o[i]]) * double(w[o[i]]);
        std::size_t i = 0;
        while (i < o.size()) {
          std::size_t e = i;
          while (e < o.size() && std::abs(double(w[o[e]])) == std::abs(double(w[o[i]]))) ++e;
          const double den = suffix[i];
          for (std::size_t k = i; k < e; ++k) {
            const double sq = double(w[o[k]]) * double(w[o[k]]);
            ks.push_back({den > 0 ? sq / den : 0.0, std::abs(double(w[o[k]])), l, o[k]});
          }
          i = e;
        }
      }
    }
    std::nth_element(ks.begin(), ks.begin() + std::ptrdiff_t(n - 1), ks.end(), [](const key& a, const key& b) {
      if (a.score != b.score) return a.score < b.score;
      if (a.mag != b.mag) return a.mag < b.mag;
      if (a.l != b.l) return a.l < b.l;
      return a.j < b.j;
    });
    // nth_element leaves the n smallest (in the total order above) in front
    for (std::size_t i = 0; i < n; ++i) ++out[ks[i].l];
    return out;
  }

  std::vector<double> q(L, 0.0);
  if (method == pruning_method::uniform_plus) {
    std::vector<bool> eligible(L, true);
    for (std::size_t l = 0; l < L; ++l)
      if (ws[l].first && ws[l].convolution && L > 1) eligible[l] = false;
    double pool = 0;
    for (std::size_t l = 0; l < L; ++l)
      if (eligible[l]) pool += double(R[l]);
    if (pool <= 0) throw value_error("prune (Uniform+): no prunable weights outside the dense first convolution");
    double frac = double(n) / pool;
    const std::size_t last = L - 1;
    if (!ws[last].convolution && eligible[last] && L > 1) {
      const double min_keep = std::round(0.2 * double(base[last]));
      const double planned = (1.0 - frac) * double(R[last]);
      if (planned < min_keep) {
        const double last_prune = std::max(0.0, double(R[last]) - min_keep);
        double mid = 0;
        for (std::size_t l = 0; l < last; ++l)
          if (eligible[l]) mid += double(R[l]);
        const double fm = mid > 0 ? (double(n) - last_prune) / mid : 2.0;
        if (fm > 1.0)
          throw value_error("prune (Uniform+): cannot prune further (the first convolution stays dense and the last "
                            "layer keeps 20%)");
        for (std::size_t l = 0; l < last; ++l)
          if (eligible[l]) q[l] = fm * double(R[l]);
        q[last] = last_prune;
        return detail::round_quotas(q, R, n);
      }
    }
    if (frac > 1.0) throw value_error("prune (Uniform+): cannot prune further (the first convolution stays dense)");
    for (std::size_t l = 0; l < L; ++l)
      if (eligible[l]) q[l] = frac * double(R[l]);
    return detail::round_quotas(q, R, n);
  }

  // ERK: survivors proportional to e_l = n_in + n_out + k_h + k_w; overflowing layers stay dense
  std::vector<double> e(L);
  for (std::size_t l = 0; l < L; ++l) e[l] = double(ws[l].n_in + ws[l].n_out + ws[l].k_h + ws[l].k_w);
  std::vector<bool> dense(L, false);
  const double survive = double(total - n);
  std::vector<double> surv(L, 0.0);
  for (;;) {
    double to_survive = survive, esum = 0;
    for (std::size_t l = 0; l < L; ++l) {
      if (dense[l] || R[l] == 0)
        to_survive -= double(R[l]);
      else
        esum += e[l];
    }
    std::size_t worst = L;
    double worst_ratio = 1.0;
    for (std::size_t l = 0; l < L; ++l) {
      if (dense[l] || R[l] == 0) {
        surv[l] = double(R[l]);
        continue;
      }
      surv[l] = esum > 0 ? to_survive * e[l] / esum : 0.0;
      const double ratio = surv[l] / double(R[l]);
      if (ratio > worst_ratio) worst_ratio = ratio, worst = l;
    }
    if (worst == L) break;
    dense[worst] = true;
  }
  for (std::size_t l = 0; l < L; ++l) q[l] = std::max(0.0, double(R[l]) - surv[l]);
  return detail::round_quotas(q, R, n);
}

/// One pruning step: round(p * R) of the R alive prunable weights.  See the header comment.
template <class Net>
prune_step_report prune_step(Net& net, pruning_mask& m, double p, pruning_method method) {
  if (!(p > 0.0 && p < 1.0))
    throw value_error(nnlens::detail::concat("prune_step: the fraction p must lie in (0, 1), got ", p));
  detail::check_pruning_mask(net, m, "prune_step");
  using T = network_scalar_t<Net>;
  const auto ws = weight_tensors(net);
  auto ps = parameter_spans(net);
  std::vector<std::vector<T>> alive_w(ws.size());
  std::vector<std::vector<std::size_t>> where(ws.size());
  std::vector<std::size_t> base(ws.size());
  prune_step_report r;
  for (std::size_t l = 0; l < ws.size(); ++l) {
    const std::size_t t = ws[l].tensor;
    base[l] = m.base[t];
    for (std::size_t i = 0; i < ps[t].size(); ++i)
      if (m.alive[t][i]) alive_w[l].push_back(ps[t][i]), where[l].push_back(i);
    r.remaining_before += alive_w[l].size();
  }
  const std::size_t n = std::size_t(std::llround(p * double(r.remaining_before)));
  const auto per_layer = allocate_pruning(method, ws, alive_w, base, n);
  r.per_tensor.assign(ws.size(), 0);
  // within a layer both LAMP's score and the global threshold are monotone in |w|: the chosen
  // weights of a layer are its smallest |w| (ties: lower index), as in the global order
  for (std::size_t l = 0; l < ws.size(); ++l) {
    const std::size_t k = per_layer[l];
    if (k == 0) continue;
    const auto& w = alive_w[l];
    std::vector<std::size_t> o(w.size());
    std::iota(o.begin(), o.end(), std::size_t(0));
    std::stable_sort(o.begin(), o.end(), [&](std::size_t a, std::size_t b) { return std::abs(double(w[a])) < std::abs(double(w[b])); });
    const std::size_t t = ws[l].tensor;
    for (std::size_t j = 0; j < k; ++j) {
      const std::size_t i = where[l][o[j]];
      ps[t][i] = T(0);
      m.alive[t][i] = 0;
    }
    r.per_tensor[l] = k;
    r.pruned += k;
  }
  return r;
}

/// The same, with keep_mask (1 = present: e.g. the parameters a neuron mask leaves) ANDed into m
/// first: parameters it marks 0 are zeroed, never counted and never pruned again.
template <class Net>
prune_step_report prune_step(Net& net, pruning_mask& m, double p, pruning_method method, const train::parameter_mask& keep_mask) {
  detail::check_pruning_mask(net, m, "prune_step");
  keep_mask.check(net);
  auto ps = parameter_spans(net);
  using T = network_scalar_t<Net>;
  for (std::size_t k = 0; k < ps.size(); ++k)
    for (std::size_t i = 0; i < ps[k].size(); ++i)
      if (!keep_mask.trainable(k, i) && m.alive[k][i]) {
        m.alive[k][i] = 0, ps[k][i] = T(0);
        if (m.base[k]) --m.base[k];
      }
  return prune_step(net, m, p, method);
}

/// Zeroes every parameter the mask marks as gone (e.g. after an optimiser without a mask).
template <class Net>
void apply_pruning_mask(Net& net, const pruning_mask& m) {
  detail::check_pruning_mask(net, m, "apply_pruning_mask");
  using T = network_scalar_t<Net>;
  auto ps = parameter_spans(net);
  for (std::size_t k = 0; k < ps.size(); ++k)
    for (std::size_t i = 0; i < ps[k].size(); ++i)
      if (!m.alive[k][i]) ps[k][i] = T(0);
}

/// Prunable weights (of weight_tensors) that are alive / were there at creation.
template <class Net>
std::pair<std::size_t, std::size_t> prunable_weights(const Net& net, const pruning_mask& m) {
  detail::check_pruning_mask(net, m, "prunable_weights");
  std::size_t alive = 0, base = 0;
  for (const auto& w : weight_tensors(net)) alive += m.alive_count(w.tensor), base += m.base[w.tensor];
  return {alive, base};
}

}  // namespace nnlens::compress
