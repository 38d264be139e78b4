// nnlens/network/parameters.hpp -- parameters of whole networks, gradient objects, initialisation.
//
// A gradient (or a parameter mask, or optimiser state) is a network of the SAME type whose
// parameter tensors hold gradients (mask bits, moments) instead of weights: zeros_like(net) makes
// one.  parameter_spans(net) lists every parameter tensor, in layer order, as flat spans, so
// optimisers and masks work on any network form alike.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <type_traits>
#include <vector>

#include "nnlens/network/dynamic_network.hpp"
#include "nnlens/network/visit.hpp"

namespace nnlens {

/// Every parameter tensor of `net` as a flat span, in layer order.
template <class Net>
auto parameter_spans(Net& net) {
  using T = network_scalar_t<std::remove_const_t<Net>>;
  using S = std::conditional_t<std::is_const_v<Net>, const T, T>;
  std::vector<std::span<S>> out;
  for_each_layer(net, [&](auto& l, auto, shape, shape) {
    using L = std::remove_const_t<std::remove_reference_t<decltype(l)>>;
    if constexpr (HasParameters<L>)
      for (auto s : layer_traits<L>::parameters(l)) out.push_back(s);
  });
  return out;
}

/// Total number of scalar parameters.
template <class Net>
std::size_t parameter_count(const Net& net) {
  std::size_t n = 0;
  for (auto s : parameter_spans(net)) n += s.size();
  return n;
}

/// Sets every parameter to v.
template <class Net, class V>
void fill_parameters(Net& net, V v) {
  using T = network_scalar_t<Net>;
  for (auto s : parameter_spans(net))
    for (auto& x : s) x = T(v);
}

/// A network of the same type and shapes with all parameters zero (a gradient accumulator).
template <class Net>
Net zeros_like(const Net& net) {
  Net g = net;
  fill_parameters(g, 0);
  return g;
}

/// Allocates and initialises every layer of a static network (PyTorch's default schemes), seeded.
template <class Net>
  requires is_sequential_v<Net>
void initialize(Net& net, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  for_each_layer(net, [&](auto& l, auto, shape in, shape) {
    using L = std::decay_t<decltype(l)>;
    layer_traits<L>::init(l, in, rng);
  });
}

/// Throws value_error naming the layer if any parameter is NaN or Inf.
template <class Net>
void require_finite_parameters(const Net& net) {
  for_each_layer(net, [&](const auto& l, auto idx, shape, shape) {
    using L = std::decay_t<decltype(l)>;
    if constexpr (HasParameters<L>) {
      std::size_t k = 0;
      for (auto s : layer_traits<L>::parameters(l)) {
        for (std::size_t i = 0; i < s.size(); ++i)
          if (!std::isfinite(s[i]))
            throw value_error(detail::concat("layer ", std::size_t(idx), " (", layer_traits<L>::name, "): parameter ", k,
                                             " element ", i, " is ", std::isnan(s[i]) ? "NaN" : "Inf"));
        ++k;
      }
    }
  });
}

namespace detail {
/// The layer of type L at index idx of another network of the same type (e.g. the gradient net).
template <class L, class In, class... Ls, std::size_t I>
L& layer_like(Sequential<In, Ls...>& n, std::integral_constant<std::size_t, I>) {
  return std::get<I>(n.layers);
}
template <class L, class T>
L& layer_like(basic_dynamic_network<T>& n, std::size_t i) {
  return std::get<L>(n.layer(i));
}
}  // namespace detail

}  // namespace nnlens
