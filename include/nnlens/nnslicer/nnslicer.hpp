// nnlens/nnslicer/nnslicer.hpp -- NNSlicer: dynamic slicing by data-flow analysis (docs/specs/nnslicer.md).
//
//   auto prof = profile_network(execution::par, net, train_images);          // once per model
//   auto tab  = nnslicer(execution::par, net, prof, images, criterion::predicted(), {.theta = 0.3});
//   tab.neurons[a][i]    CONTRIB of neuron i of tensor a (0 = the input), summed over the samples
//   tab.synapses[k][s]   CONTRIB of synapse s (flat index of the first parameter tensor) of node k
//   merge(t1, t2)        tables of disjoint sample sets add up (threads, processes)
//   relative_activations(net, prof, X)   the forward analysis alone: Δ per sample, tensor, neuron
//
// Per sample (Algorithm 1, layer-wise): forward pass over the op graph (network/graph.hpp);
// Δ = neuron value - profile mean; C[o] = +1 for each criterion output o; then for every node in
// reverse order and every output neuron n with C[n] != 0: the layer's sign_rule lists the items
// (pred, synapse, c); the θ filter drops the smallest ones whose combined influence stays within θ;
// each kept item adds v = sign(C[n]) sign(Δy_n) sign(c) to C[pred] and C[synapse].  A join node
// (core/composite.hpp) is a unit-weight sum of the operand neurons that feed n: both operands of a
// Residual's Add, the one branch neuron of a Concat (a copy).  The tables of the samples are summed
// (signed, or |C| with abs_sum).
//
// Options (the spec's readings, §2.9): θ (default 0.3); the filter's denominator D = Σ c (default)
// or |y_n| (the paper's literal formula, A10); the cut-off j* = the largest j with |S_j| <= θ|D|
// (literal "max j", default) or the first violation (A11); ties in |c| by item order (A12);
// BatchNorm's scaled item (default) or the literal one (A6).
// Errors: data_error for an empty criterion or a profile of another model; value_error for an
// output neuron (target class) out of range; shape_error for a wrong input shape.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "nnlens/core/error.hpp"
#include "nnlens/core/execution.hpp"
#include "nnlens/core/finite.hpp"
#include "nnlens/core/thread_pool.hpp"
#include "nnlens/network/forward.hpp"
#include "nnlens/network/graph.hpp"
#include "nnlens/nnslicer/profile.hpp"

namespace nnlens {

enum class theta_denominator { sum, activation };
enum class theta_cutoff { max_index, first_violation };

struct slice_options {
  double theta = 0.3;
  theta_denominator denominator = theta_denominator::sum;
  theta_cutoff cutoff = theta_cutoff::max_index;
  bool abs_sum = false;     // sum |CONTRIB(ξ)| over samples instead of the signed sum (A13)
  bool bn_literal = false;  // BatchNorm's literal item (x, Δx) (A6)
  std::size_t batch = 64;   // samples per forward pass
  /// Called with each sample's own tables (index into X, neuron tables per tensor, synapse tables
  /// per node) before they are added to the total: per-sample features without one nnslicer call
  /// per sample.  With execution::par it runs on the pool's threads, concurrently.
  std::function<void(std::size_t, const std::vector<std::vector<std::int64_t>>&,
                     const std::vector<std::vector<std::int64_t>>&)>
      on_sample = nullptr;
};

/// The criterion's output neurons: the predicted class of each sample (the paper's detection
/// criterion), one target class, or an explicit list (the same for every sample).
/// predicted(): the output neuron of largest value, at the profile's granularity -- for a rank-3
/// output at channel granularity the channel of largest spatial mean (its neurons are channels,
/// §2.1); at element granularity, or for a vector output, the largest element.  Ties: the first.
struct criterion {
  enum class kind { predicted, fixed } k = kind::predicted;
  std::vector<std::size_t> outputs;
  static criterion predicted() { return {}; }
  static criterion target(std::size_t c) { return {kind::fixed, {c}}; }
  static criterion fixed(std::vector<std::size_t> o) { return {kind::fixed, std::move(o)}; }
};

struct contrib_table {
  granularity grain = granularity::channel;
  std::size_t samples = 0;
  std::vector<std::vector<std::int64_t>> neurons;   // per tensor (0 = input)
  std::vector<std::vector<std::int64_t>> synapses;  // per node (empty when it has none)
  std::vector<std::string> tensor_names, node_names;
};

inline contrib_table merge(const contrib_table& a, const contrib_table& b) {
  if (a.neurons.size() != b.neurons.size() || a.synapses.size() != b.synapses.size() || a.grain != b.grain)
    throw data_error("merge(contrib_table, contrib_table): the tables are of different models or granularities");
  contrib_table r = a;
  for (std::size_t t = 0; t < r.neurons.size(); ++t)
    for (std::size_t i = 0; i < r.neurons[t].size(); ++i) r.neurons[t][i] += b.neurons[t].at(i);
  for (std::size_t k = 0; k < r.synapses.size(); ++k)
    for (std::size_t i = 0; i < r.synapses[k].size(); ++i) r.synapses[k][i] += b.synapses[k].at(i);
  r.samples += b.samples;
  return r;
}

namespace detail {

inline int sgn(double v) { return (v > 0) - (v < 0); }

/// The θ filter of docs/specs/nnslicer.md#26-threshold-filter: keeps items, in place.
inline void theta_filter(std::vector<sign_item>& items, double theta, theta_denominator den, theta_cutoff cut, double yn,
                         std::vector<std::size_t>& order) {
  items.erase(std::remove_if(items.begin(), items.end(), [](const sign_item& it) { return it.c == 0; }), items.end());
  const std::size_t k = items.size();
  if (k <= 1) return;
  double D = 0;
  if (den == theta_denominator::sum)
    for (const auto& it : items) D += it.c;
  else
    D = yn;
  if (D == 0) return;
  order.resize(k);
  std::iota(order.begin(), order.end(), std::size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return std::abs(items[a].c) < std::abs(items[b].c); });
  const double lim = theta * std::abs(D);
  std::size_t jstar = 0;  // number of smallest items dropped
  double S = 0;
  for (std::size_t j = 1; j <= k; ++j) {
    S += items[order[j - 1]].c;
    if (std::abs(S) <= lim)
      jstar = j;
    else if (cut == theta_cutoff::first_violation)
      break;
  }
  if (jstar == 0) return;
  if (jstar >= k) jstar = k - 1;  // never drop everything (only possible when θ >= 1)
  std::vector<char> drop(k, 0);
  for (std::size_t j = 0; j < jstar; ++j) drop[order[j]] = 1;
  std::size_t w = 0;
  for (std::size_t i = 0; i < k; ++i)
    if (!drop[i]) items[w++] = items[i];
  items.resize(w);
}

template <class T>
class slicer_engine {
 public:
  slicer_engine(const op_graph<T>& g, const profile& p, const slice_options& o) : g_(g), o_(o) {
    el_ = p.grain == granularity::element;
    for (std::size_t a = 0; a < g.acts().size(); ++a) means_.push_back(p.mean(a));
  }

  contrib_table empty_table() const {
    contrib_table t;
    t.grain = el_ ? granularity::element : granularity::channel;
    for (std::size_t a = 0; a < g_.acts().size(); ++a) {
      t.neurons.emplace_back(neuron_count(g_.acts()[a], el_), 0);
      t.tensor_names.push_back(g_.act_name(a));
    }
    for (const auto& nd : g_.nodes()) {
      t.synapses.emplace_back(nd.synapses, 0);
      t.node_names.push_back(nd.name);
    }
    return t;
  }

  /// Adds the slices of samples [0, n) of X to `total`; `first` is the index of X[0] in the
  /// caller's data (for on_sample).
  /// net: the network g was built from (its nodes are walked last first by for_each_node_reverse:
  /// for a Sequential a compile-time fold calling each layer's sign_rule directly).
  template <class Net>
  void run(const Net& net, std::size_t n, const T* X, const criterion& cr, contrib_table& total, std::size_t first = 0) {
    const std::size_t in = g_.acts()[0].size();
    for (std::size_t b0 = 0; b0 < n; b0 += o_.batch) {
      const std::size_t nb = std::min(o_.batch, n - b0);
      g_.run(nb, X + b0 * in, buf_);
      for (std::size_t i = 0; i < nb; ++i) {
        one(net, i, cr, total);
        if (o_.on_sample) o_.on_sample(first + b0 + i, C_, syn_);
      }
      total.samples += nb;
    }
  }

 private:
  const op_graph<T>& g_;
  const slice_options& o_;
  bool el_ = false;
  std::vector<std::vector<double>> means_;
  std::vector<std::vector<T>> buf_;
  // per-sample work space
  std::vector<std::vector<double>> x_, nv_, d_;
  std::vector<std::vector<std::int64_t>> C_, syn_;
  std::vector<sign_item> items_;
  std::vector<std::size_t> order_;

  template <class Net>
  void one(const Net& net, std::size_t i, const criterion& cr, contrib_table& total) {
    const auto& acts = g_.acts();
    const std::size_t A = acts.size();
    x_.resize(A), nv_.resize(A), d_.resize(A), C_.resize(A);
    for (std::size_t a = 0; a < A; ++a) {
      const shape s = acts[a];
      const T* v = buf_[a].data() + i * s.size();
      x_[a].resize(s.size());
      for (std::size_t e = 0; e < s.size(); ++e) x_[a][e] = double(v[e]);
      const std::size_t nn = neuron_count(s, el_);
      nv_[a].resize(nn);
      neuron_values(s, el_, v, nv_[a].data());
      d_[a].resize(nn);
      for (std::size_t k = 0; k < nn; ++k) d_[a][k] = nv_[a][k] - means_[a][k];
      C_[a].assign(nn, 0);
    }
    syn_.resize(g_.nodes().size());
    for (std::size_t k = 0; k < syn_.size(); ++k) syn_[k].assign(g_.nodes()[k].synapses, 0);
    // the criterion's outputs
    const std::size_t out = g_.output(), nout = C_[out].size();
    if (cr.k == criterion::kind::predicted) {
      // the predicted class is the output neuron of largest value: at channel granularity a
      // rank-3 output's neurons are its channels, valued by their spatial means (nv_), so the
      // argmax runs over the channel means, never over raw elements (docs/specs/nnslicer.md#21-granularity)
      const auto& yo = nv_[out];
      std::size_t best = 0;
      for (std::size_t k = 1; k < nout; ++k)
        if (yo[k] > yo[best]) best = k;
      C_[out][best] = 1;
    } else {
      for (std::size_t o : cr.outputs) C_[out][o] = 1;
    }
    // backward, in reverse topological order (the nodes are in forward order)
    for_each_node_reverse(net, g_.nodes().size(), [&](std::size_t k, const auto& l, shape, shape) {
      using L = std::remove_cvref_t<decltype(l)>;
      constexpr bool join = is_join_node_v<L>;
      if constexpr (!join && !SignLayer<L>) {
        return false;  // not reached: the graph refuses a layer without a sign rule
      } else {
        const auto& nd = g_.nodes()[k];
        const auto& Cn = C_[nd.out];
        const auto& dy = d_[nd.out];
        sign_ctx ctx;
        ctx.in = acts[nd.in];
        ctx.out = acts[nd.out];
        ctx.element = el_;
        ctx.x = x_[nd.in].data();
        ctx.y = x_[nd.out].data();
        ctx.dx = d_[nd.in].data();
        ctx.dy = dy.data();
        ctx.yn = nv_[nd.out].data();
        ctx.bn_literal = o_.bn_literal;
        // elements per neuron of the output (a join's offsets are in elements)
        const std::size_t unit = el_ ? 1 : acts[nd.out].size() / neuron_count(acts[nd.out], false);
        for (std::size_t n = 0; n < Cn.size(); ++n) {
          if (Cn[n] == 0) continue;
          const int head = sgn(double(Cn[n])) * sgn(dy[n]);
          if (head == 0) continue;
          items_.clear();
          if constexpr (join) {  // one item per operand neuron feeding n (pred: the operand's index,
                                 // synapse: its neuron); a product's operand by the other's value
            const auto& ops = nd.operands;
            ops.feeding(
                n,
                [&](std::size_t q, std::size_t e) {
                  const double w = ops.slope(q, n, unit, [&](std::size_t t, std::size_t m) { return nv_[t][m]; });
                  items_.push_back({q, e, w * d_[ops.ins[q]][e]});
                },
                unit);
          } else {
            sign_rule<L>::items(l, ctx, n, items_);
          }
          theta_filter(items_, o_.theta, o_.denominator, o_.cutoff, nv_[nd.out][n], order_);
          for (const auto& it : items_) {
            const int v = head * sgn(it.c);
            if constexpr (join) {
              C_[nd.operands.ins[it.pred]][it.synapse] += v;
            } else {
              C_[nd.in][it.pred] += v;
              if (it.synapse != sign_item::none) syn_[k][it.synapse] += v;
            }
          }
        }
        return true;
      }
    });
    for (std::size_t a = 0; a < A; ++a)
      for (std::size_t q = 0; q < C_[a].size(); ++q) total.neurons[a][q] += o_.abs_sum ? std::abs(C_[a][q]) : C_[a][q];
    for (std::size_t k = 0; k < syn_.size(); ++k)
      for (std::size_t q = 0; q < syn_[k].size(); ++q) total.synapses[k][q] += o_.abs_sum ? std::abs(syn_[k][q]) : syn_[k][q];
  }
};

}  // namespace detail

/// Forward analysis (Eq. 2): Δy = y(ξ) - profile mean for every neuron of every tensor, per sample:
/// result[sample][tensor][neuron], at the profile's granularity.
template <class Net, class E>
std::vector<std::vector<std::vector<double>>> relative_activations(const Net& net, const profile& p, const E& X) {
  using T = network_scalar_t<Net>;
  check_shapes(net);
  const shape in = input_shape_of(net);
  const std::size_t n = detail::check_batch_input(X, in, "relative_activations");
  p.check_compatible(net);
  const op_graph<T> g(net);
  const xt::xarray<T> x = X;
  require_finite(std::span<const T>(x.data(), x.size()), in.size(), "relative_activations: input");
  const bool el = p.grain == granularity::element;
  std::vector<std::vector<T>> buf;
  g.run(n, x.data(), buf);
  std::vector<std::vector<std::vector<double>>> r(n);
  for (std::size_t a = 0; a < g.acts().size(); ++a) {
    const shape s = g.acts()[a];
    const auto m = p.mean(a);
    for (std::size_t i = 0; i < n; ++i) {
      std::vector<double> v(neuron_count(s, el));
      neuron_values(s, el, buf[a].data() + i * s.size(), v.data());
      for (std::size_t k = 0; k < v.size(); ++k) v[k] -= m[k];
      r[i].push_back(std::move(v));
    }
  }
  return r;
}

namespace detail {
/// nnslicer after its input checks: x holds n row-major samples in T.  One instantiation per policy
/// and network, whatever container the caller had (the forms of nnlens/precompiled/nnslicer.hpp).
template <class Policy, class Net>
contrib_table nnslicer_rows(const Policy&, const Net& net, const profile& p, std::span<const network_scalar_t<Net>> x,
                            std::size_t n, const criterion& cr, const slice_options& o) {
  using T = network_scalar_t<Net>;
  const shape in = input_shape_of(net);
  if (!(o.theta >= 0) || !std::isfinite(o.theta)) throw value_error(detail::concat("nnslicer: theta is ", o.theta, ", expected >= 0"));
  if (o.batch == 0) throw value_error("nnslicer: slice_options::batch is 0, expected at least 1 sample per forward pass");
  p.check_compatible(net);
  const op_graph<T> g(net);
  const std::size_t nout = neuron_count(g.acts()[g.output()], p.grain == granularity::element);
  if (cr.k == criterion::kind::fixed) {
    if (cr.outputs.empty()) throw data_error("nnslicer: the criterion has no output neurons");
    for (std::size_t c : cr.outputs)
      if (c >= nout) throw value_error(detail::concat("nnslicer: output neuron (target class) ", c, " out of range: the network has ", nout, " outputs"));
  }
  require_finite(x, in.size(), "nnslicer: input");
  if constexpr (execution::is_host_parallel_policy_v<Policy>) {
    auto& pool = detail::default_pool();
    const std::size_t tasks = std::min(pool.size(), n);
    std::vector<contrib_table> parts(tasks);
    pool.parallel_for(tasks, [&](std::size_t t) {
      detail::slicer_engine<T> eng(g, p, o);
      parts[t] = eng.empty_table();
      const std::size_t b0 = n * t / tasks, b1 = n * (t + 1) / tasks;
      eng.run(net, b1 - b0, x.data() + b0 * in.size(), cr, parts[t], b0);
    });
    contrib_table r = parts[0];
    for (std::size_t t = 1; t < tasks; ++t) r = merge(r, parts[t]);
    return r;
  } else {
    detail::slicer_engine<T> eng(g, p, o);
    contrib_table r = eng.empty_table();
    eng.run(net, n, x.data(), cr, r);
    return r;
  }
}
}  // namespace detail

/// The CONTRIB table of the criterion (samples X [n, input...], outputs cr) on net with profile p.
template <class Policy, class Net, class E>
  requires execution::is_execution_policy_v<Policy>
contrib_table nnslicer(const Policy& pol, const Net& net, const profile& p, const E& X, const criterion& cr,
                       const slice_options& o = {}) {
  using T = network_scalar_t<Net>;
  check_shapes(net);
  const std::size_t n = detail::check_batch_input(X, input_shape_of(net), "nnslicer");
  if (n == 0) throw data_error("nnslicer: the criterion has no samples");
  const auto& x = detail::row_major_input<T>(X);  // X itself, or a row-major copy in T
  return detail::nnslicer_rows(pol, net, p, std::span<const T>(x.data(), x.size()), n, cr, o);
}
template <class Net, class E>
  requires(!execution::is_execution_policy_v<Net>)
contrib_table nnslicer(const Net& net, const profile& p, const E& X, const criterion& cr, const slice_options& o = {}) {
  return nnslicer(execution::seq, net, p, X, cr, o);
}

}  // namespace nnlens
