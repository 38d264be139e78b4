// nnlens/compress/magnitude.hpp -- magnitude pruning twins (DFlare's "prune" pairs,
// docs/specs/dflare.md#4-evaluation-setup-and-headline-numbers (§4-§5): pruning is zeroed weights, so the pruned twin is a network of the same type and runs on
// the same kernels).
//
//   Net p = compress::magnitude_prune(net, ratio [, opts]);   unstructured: the round(ratio * n)
//                                      smallest |w| become 0, over each weight tensor separately
//                                      (scope::layerwise, the default) or over all of them at once
//                                      (scope::global, one threshold)
//   Net c = compress::channel_prune(net, ratio [, opts]);     structured: in each Dense/Conv2D
//                                      layer, the round(ratio * C) output channels (conv filters /
//                                      dense units) with the smallest L1 norm of their weights lose
//                                      their weights and bias; the last layer (the classes) is kept
//                                      unless opts.include_last
//   compress::weight_sparsity(net)     zero weights / weights, over the Dense/Conv2D weight tensors
//
// "Weight tensors" are the W of the Dense and Conv2D layers, top-level and inside Residual blocks
// (biases are not pruned by magnitude_prune).  Ties in |w| or in L1 norm go to the
// lower (tensor, index): the result is deterministic.  A weight that is already 0 counts among
// the smallest, so on a network without zero weights exactly round(ratio * n) weights are zero
// afterwards (per tensor for layerwise).  NeuSemSlice's iterative allocators (LAMP, Global,
// Uniform+, ERK) are in compress/pruning.hpp.
// throws: value_error for a ratio outside [0, 1] or NaN.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numeric>
#include <string_view>
#include <utility>
#include <vector>

#include "nnlens/core/composite.hpp"
#include "nnlens/core/error.hpp"
#include "nnlens/core/properties.hpp"
#include "nnlens/layers/residual.hpp"
#include "nnlens/network/dynamic_network.hpp"
#include "nnlens/network/visit.hpp"

namespace nnlens::compress {

enum class prune_scope { layerwise, global };

struct magnitude_options {
  prune_scope scope = prune_scope::layerwise;
};
struct channel_prune_options {
  bool include_last = false;  // also prune the output layer's units (its classes)
};

namespace detail {
template <class L>
inline constexpr bool prunable_v = WeightLayer<L>;  // core/properties.hpp: output_channel_axis

inline void check_ratio(double r, const char* who) {
  if (!(r >= 0.0 && r <= 1.0))
    throw value_error(nnlens::detail::concat(who, ": the pruning ratio must lie in [0, 1], got ", r));
}

/// f(layer, top-level index, is_conv, channels) for a prunable layer, or for each prunable layer
/// inside a composite (Residual, Concat: every branch, nested composites too).
template <class L, class F>
void visit_weight_layer(L& l, std::size_t idx, F& f) {
  if constexpr (prunable_v<std::remove_const_t<L>>) {
    constexpr bool conv = has_window_geometry<std::remove_const_t<L>>;
    f(l, idx, conv, l.W.shape(std::size_t(output_channel_axis_v<std::remove_const_t<L>>)));
  } else if constexpr (Composite<std::remove_const_t<L>>) {
    layer_traits<std::remove_const_t<L>>::for_each_inner(l, [&](auto& in) { visit_weight_layer(in, idx, f); });
  } else {
    (void)l, (void)idx, (void)f;
  }
}

/// f(layer, top-level index, is_conv, channels) for every prunable layer's weights, in layer order.
template <class Net, class F>
void for_each_weight_tensor(Net& net, F&& f) {
  for_each_layer(net, [&](auto& l, auto idx, shape, shape) { visit_weight_layer(l, std::size_t(idx), f); });
}
}  // namespace detail

/// Unstructured magnitude pruning.  See the header comment.
template <class Net>
Net magnitude_prune(const Net& net, double ratio, const magnitude_options& opt = {}) {
  detail::check_ratio(ratio, "magnitude_prune");
  using T = network_scalar_t<Net>;
  Net out = net;
  struct ref {
    T* w;
    std::size_t n;
  };
  std::vector<ref> ts;
  detail::for_each_weight_tensor(out, [&](auto& l, std::size_t, bool, std::size_t) { ts.push_back({l.W.data(), l.W.size()}); });
  auto prune_smallest = [&](std::vector<std::pair<std::size_t, std::size_t>>& items) {  // (tensor, index)
    const std::size_t k = std::size_t(std::llround(ratio * double(items.size())));
    if (k == 0) return;
    auto mag = [&](const std::pair<std::size_t, std::size_t>& p) { return std::abs(double(ts[p.first].w[p.second])); };
    std::nth_element(items.begin(), items.begin() + std::ptrdiff_t(k - 1), items.end(), [&](const auto& a, const auto& b) {
      const double ma = mag(a), mb = mag(b);
      return ma != mb ? ma < mb : a < b;
    });
    for (std::size_t j = 0; j < k; ++j) ts[items[j].first].w[items[j].second] = T(0);
  };
  std::vector<std::pair<std::size_t, std::size_t>> items;
  if (opt.scope == prune_scope::global) {
    for (std::size_t t = 0; t < ts.size(); ++t)
      for (std::size_t i = 0; i < ts[t].n; ++i) items.emplace_back(t, i);
    prune_smallest(items);
  } else {
    for (std::size_t t = 0; t < ts.size(); ++t) {
      items.clear();
      for (std::size_t i = 0; i < ts[t].n; ++i) items.emplace_back(t, i);
      prune_smallest(items);
    }
  }
  return out;
}

/// Structured (channel) pruning by the L1 norm of each output channel's weights.
template <class Net>
Net channel_prune(const Net& net, double ratio, const channel_prune_options& opt = {}) {
  detail::check_ratio(ratio, "channel_prune");
  using T = network_scalar_t<Net>;
  Net out = net;
  std::size_t last = 0;
  detail::for_each_weight_tensor(out, [&](auto&, std::size_t idx, bool, std::size_t) { last = idx; });
  detail::for_each_weight_tensor(out, [&](auto& l, std::size_t idx, bool conv, std::size_t C) {
    if (idx == last && !opt.include_last) return;
    const std::size_t ne = l.W.size(), per = C ? ne / C : 0;
    T* W = l.W.data();
    // element e of channel c: conv W[c][k] = c * per + k; dense W[i][c] = i * C + c
    auto elem = [&](std::size_t c, std::size_t k) { return conv ? c * per + k : k * C + c; };
    std::vector<double> l1(C, 0.0);
    for (std::size_t c = 0; c < C; ++c)
      for (std::size_t k = 0; k < per; ++k) l1[c] += std::abs(double(W[elem(c, k)]));
    std::vector<std::size_t> order(C);
    std::iota(order.begin(), order.end(), std::size_t(0));
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return l1[a] < l1[b]; });
    const std::size_t k = std::size_t(std::llround(ratio * double(C)));
    for (std::size_t j = 0; j < k; ++j) {
      const std::size_t c = order[j];
      for (std::size_t q = 0; q < per; ++q) W[elem(c, q)] = T(0);
      l.b.data()[c] = T(0);
    }
  });
  return out;
}

/// Zero weights / weights over the Dense/Conv2D weight tensors (0 when there are none).
template <class Net>
double weight_sparsity(const Net& net) {
  std::size_t zeros = 0, total = 0;
  detail::for_each_weight_tensor(net, [&](const auto& l, std::size_t, bool, std::size_t) {
    for (std::size_t i = 0; i < l.W.size(); ++i) zeros += l.W.data()[i] == 0;
    total += l.W.size();
  });
  return total ? double(zeros) / double(total) : 0.0;
}

}  // namespace nnlens::compress
