// nnlens/network/visit.hpp -- walking the layers of a network (dlib's vocabulary, flat folds).
//
//   for_each_layer(net, f)          f(layer, index, in_shape, out_shape) in order
//   for_each_layer_reverse(net, f)  the same, last layer first (no copies: index_sequence walk)
//   for_each_layer_ahead(net, f)    f(layer, index, in_shape, out_shape, next) in order, where
//                                   next(g) calls g(next_layer, its out_shape) (nothing after the
//                                   last layer); f returns true when it took the next layer too,
//                                   which is then skipped (ExactLine's fused ReLU + MaxPool)
//   layer_count(net)
//
// For a Sequential, `index` is a std::integral_constant and the shapes are compile-time constants;
// for a DynamicNetwork, `index` is a std::size_t and `layer` is the variant's active alternative.
// Algorithms written as generic lambdas therefore run unchanged on both forms.
#pragma once

#include <cstddef>
#include <tuple>
#include <utility>
#include <variant>

#include "nnlens/network/sequential.hpp"

namespace nnlens {

template <class In, class... Ls, class F>
void for_each_layer(Sequential<In, Ls...>& net, F&& f) {
  using Net = Sequential<In, Ls...>;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (f(std::get<I>(net.layers), std::integral_constant<std::size_t, I>{}, Net::shapes[I], Net::shapes[I + 1]), ...);
  }(std::index_sequence_for<Ls...>{});
}
template <class In, class... Ls, class F>
void for_each_layer(const Sequential<In, Ls...>& net, F&& f) {
  using Net = Sequential<In, Ls...>;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (f(std::get<I>(net.layers), std::integral_constant<std::size_t, I>{}, Net::shapes[I], Net::shapes[I + 1]), ...);
  }(std::index_sequence_for<Ls...>{});
}
template <class Net, class F>
  requires is_sequential_v<std::remove_const_t<Net>>
void for_each_layer_reverse(Net& net, F&& f) {
  using N = std::remove_const_t<Net>;
  constexpr std::size_t n = N::size;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (f(std::get<n - 1 - I>(net.layers), std::integral_constant<std::size_t, n - 1 - I>{}, N::shapes[n - 1 - I],
       N::shapes[n - I]),
     ...);
  }(std::make_index_sequence<n>{});
}

namespace detail {
/// Layer I of a Sequential for for_each_layer_ahead (a function, not a lambda in the fold: nvcc's
/// front end does not expand a pack inside a lambda inside a fold).
template <std::size_t I, class Net, class F>
bool visit_ahead(Net& net, F& f) {
  using N = std::remove_const_t<Net>;
  auto next = [&](auto&& g) {
    if constexpr (I + 1 < N::size)
      g(std::get<I + 1>(net.layers), N::shapes[I + 2]);
    else
      (void)g;
  };
  return f(std::get<I>(net.layers), std::integral_constant<std::size_t, I>{}, N::shapes[I], N::shapes[I + 1], next);
}
}  // namespace detail

template <class Net, class F>
  requires is_sequential_v<std::remove_const_t<Net>>
void for_each_layer_ahead(Net& net, F&& f) {
  bool skip = false;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    ((skip ? void(skip = false) : void(skip = detail::visit_ahead<I>(net, f))), ...);
  }(std::make_index_sequence<std::remove_const_t<Net>::size>{});
}

template <class In, class... Ls>
constexpr std::size_t layer_count(const Sequential<In, Ls...>&) {
  return sizeof...(Ls);
}
template <class In, class... Ls>
constexpr shape input_shape_of(const Sequential<In, Ls...>&) {
  return Sequential<In, Ls...>::input_shape;
}
template <class In, class... Ls>
constexpr shape output_shape_of(const Sequential<In, Ls...>&) {
  return Sequential<In, Ls...>::output_shape;
}
/// Per-sample shape entering layer i (i == layer_count gives the output shape).
template <class In, class... Ls>
constexpr shape shape_at(const Sequential<In, Ls...>&, std::size_t i) {
  return Sequential<In, Ls...>::shapes[i];
}

}  // namespace nnlens
