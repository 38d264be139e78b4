// nnlens/nnslicer/slice.hpp -- NNSlicer's slices as sets, sizes and runnable masked networks.
//
//   slice_sizes(table)                 per node: neurons / neurons in the slice (CONTRIB != 0) of
//                                      its output tensor, synapses / synapses in the slice; the
//                                      input tensor first (one consistent unit: neurons at the
//                                      table's granularity, synapses = weights)
//   synapse_mask(table, keep)          per node, 1 for the synapses to keep: those in the slice
//                                      (keep = 1), or per layer the fraction `keep` with the
//                                      largest |CONTRIB| (ties by |weight|, the larger kept)
//   apply_slice(net, table[, keep[, dead_neurons]])
//                                      a copy of net whose weights outside the mask are 0, and the
//                                      biases of neurons with no synapse left: a network that runs
//                                      (forward, evaluate, fine-tune with a mask)
// (docs/specs/nnslicer.md#27-aggregation-and-slice-extraction and docs/specs/nnslicer.md#42-targeted-pruning: pruning keeps, per layer, the synapses of largest |CONTRIB|.)
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "nnlens/core/error.hpp"
#include "nnlens/network/graph.hpp"
#include "nnlens/nnslicer/nnslicer.hpp"

namespace nnlens {

struct slice_size {
  std::string name;                  // the node ("input" for the input tensor)
  std::size_t neurons = 0, neurons_in_slice = 0;
  std::size_t synapses = 0, synapses_in_slice = 0;
};

inline std::vector<slice_size> slice_sizes(const contrib_table& t) {
  std::vector<slice_size> r;
  auto count_nz = [](const std::vector<std::int64_t>& v) {
    return std::size_t(std::count_if(v.begin(), v.end(), [](std::int64_t x) { return x != 0; }));
  };
  r.push_back({"input", t.neurons.at(0).size(), count_nz(t.neurons[0]), 0, 0});
  for (std::size_t k = 0; k < t.synapses.size(); ++k) {
    // node k writes tensor k + 1 (the graph appends one tensor per node)
    const auto& nv = t.neurons.at(k + 1);
    r.push_back({t.node_names.at(k), nv.size(), count_nz(nv), t.synapses[k].size(), count_nz(t.synapses[k])});
  }
  return r;
}

/// Per node, 1 for the synapses to keep.  keep >= 1: the slice (CONTRIB != 0); keep in [0, 1): per
/// layer the floor(keep * S) + ... synapses of largest |CONTRIB| are kept, i.e. exactly
/// S - floor((1 - keep) S) (pruning ratio r = 1 - keep prunes floor(r S) per layer, as §4.2).
template <class Net>
std::vector<std::vector<std::uint8_t>> synapse_mask(const Net& net, const contrib_table& t, double keep = 1.0) {
  using T = network_scalar_t<Net>;
  if (!(keep >= 0) || std::isnan(keep)) throw value_error(detail::concat("synapse_mask: keep is ", keep, ", expected a fraction >= 0"));
  const op_graph<T> g(net);
  if (t.synapses.size() != g.nodes().size()) throw data_error("synapse_mask: the table is of another model");
  std::vector<std::vector<std::uint8_t>> m(g.nodes().size());
  for (std::size_t k = 0; k < g.nodes().size(); ++k) {
    const auto& c = t.synapses[k];
    const std::size_t S = c.size();
    if (S != g.nodes()[k].synapses) throw data_error("synapse_mask: the table is of another model");
    m[k].assign(S, 0);
    if (keep >= 1.0) {
      for (std::size_t s = 0; s < S; ++s) m[k][s] = c[s] != 0;
      continue;
    }
    // floor(r S) with r = 1 - keep; the 1e-9 absorbs 1 - (1 - r) != r (r = 0.1, 0.2, 0.45 ...)
    const std::size_t prune = std::min(S, std::size_t(std::floor(std::max(0.0, 1.0 - keep) * double(S) + 1e-9)));
    std::vector<std::size_t> idx(S);
    std::iota(idx.begin(), idx.end(), std::size_t(0));
    const auto w = g.nodes()[k].weights;
    std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) {
      const auto ca = std::llabs(c[a]), cb = std::llabs(c[b]);
      if (ca != cb) return ca < cb;
      return w.empty() ? false : std::abs(double(w[a])) < std::abs(double(w[b]));
    });
    for (std::size_t j = prune; j < S; ++j) m[k][idx[j]] = 1;
  }
  return m;
}

/// What apply_slice does with a neuron whose synapses are all pruned (docs/specs/nnslicer.md#42-targeted-pruning [D]).
enum class dead_neurons {
  zero_bias,  // its bias goes too, so its output is 0 (before the activation): the neuron is gone
  keep_bias,  // only the synapses are zeroed; the neuron still emits its bias
};

/// A copy of net with the weights outside synapse_mask(net, t, keep) set to 0, and (by default) the
/// bias of every output neuron -- a channel, for a convolution -- whose synapses are all outside
/// the mask set to 0 too.  Layers whose sign_rule names no bias parameter keep theirs.
template <class Net>
Net apply_slice(const Net& net, const contrib_table& t, double keep = 1.0, dead_neurons dn = dead_neurons::zero_bias) {
  using T = network_scalar_t<Net>;
  const auto m = synapse_mask(net, t, keep);
  Net r = net;
  const op_graph<T> g(r);  // built on our own copy: its spans point into r
  std::vector<sign_item> items;
  std::vector<double> zeros;
  for (std::size_t k = 0; k < g.nodes().size(); ++k) {
    const auto& nd = g.nodes()[k];
    T* wp = const_cast<T*>(nd.weights.data());
    for (std::size_t s = 0; s < m[k].size(); ++s)
      if (!m[k][s]) wp[s] = T(0);
    if (dn != dead_neurons::zero_bias || nd.bias.empty() || nd.synapses == 0) continue;
    // the synapses of output neuron n are the synapse indices of its sign items (channel level);
    // the items' influence values are not needed, so the context sees zeros
    sign_ctx ctx;
    ctx.in = g.acts()[nd.in], ctx.out = g.acts()[nd.out], ctx.element = false;
    zeros.assign(std::max(ctx.in.size(), ctx.out.size()), 0.0);
    ctx.x = ctx.dx = ctx.y = ctx.dy = ctx.yn = zeros.data();
    T* bp = const_cast<T*>(nd.bias.data());
    for (std::size_t n = 0; n < nd.bias.size(); ++n) {
      items.clear();
      nd.items(ctx, n, items);
      bool any = false, all_pruned = true;
      for (const auto& it : items)
        if (it.synapse != sign_item::none) any = true, all_pruned = all_pruned && !m[k][it.synapse];
      if (any && all_pruned) bp[n] = T(0);
    }
  }
  return r;
}

}  // namespace nnlens
