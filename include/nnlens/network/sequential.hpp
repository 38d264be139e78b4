// nnlens/network/sequential.hpp -- Sequential<Input<...>, Ls...>: a statically typed layer tuple.
//
// requires: the first element is Input<...>; every other element is a Layer (has layer_traits);
//           each layer accepts the previous layer's output shape.  A wrong chain is a compile
//           error: a static_assert sentence plus an incomplete type
//           `error_layer_rejects_input_shape<index, Layer, input shape, reason>` that names the
//           layer, its input shape and (in the reason) what it expected.
// ensures:  shapes<Net>[i] is the per-sample shape entering layer i (shapes[size] is the output),
//           all known at compile time; net.layers is a std::tuple<Ls...> of data-only layers.
#pragma once

#include <array>
#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include "nnlens/core/traits.hpp"
#include "nnlens/layers/input.hpp"

namespace nnlens {

namespace detail {

template <std::size_t N>
struct fixed_string {
  char s[N]{};
  constexpr fixed_string() = default;
  constexpr fixed_string(const char* p) {
    for (std::size_t i = 0; i + 1 < N && p[i]; ++i) s[i] = p[i];
  }
};
constexpr std::size_t cstr_len(const char* p) {
  std::size_t n = 0;
  while (p && p[n]) ++n;
  return n;
}

struct chain_result {
  std::size_t failed_at = std::size_t(-1);  // index of the first layer that rejects its input
  shape failed_input{};
  const char* reason = nullptr;
  constexpr bool ok() const { return reason == nullptr; }
};

template <shape In, class... Ls>
constexpr std::array<shape, sizeof...(Ls) + 1> infer_chain_shapes(chain_result* res = nullptr) {
  std::array<shape, sizeof...(Ls) + 1> s{};
  s[0] = In;
  std::size_t i = 0;
  chain_result r{};
  auto step = [&]<class L>(std::type_identity<L>) {
    if (!r.ok()) return;
    const shape_check c = layer_traits<L>::infer(s[i]);
    if (!c.ok()) {
      r = chain_result{i, s[i], c.error};
      return;
    }
    s[i + 1] = c.out;
    ++i;
  };
  (step(std::type_identity<Ls>{}), ...);
  if (res) *res = r;
  return s;
}

template <shape In, class... Ls>
constexpr chain_result infer_chain() {
  chain_result r{};
  infer_chain_shapes<In, Ls...>(&r);
  return r;
}

}  // namespace detail

/// The diagnostic type named when a layer rejects its input shape (see docs/layers.md).
template <std::size_t LayerIndex, class Layer, shape InputShape, detail::fixed_string Reason>
struct error_layer_rejects_input_shape;

template <class... Ls>
struct Sequential {
  static_assert(sizeof...(Ls) > 0 && false,
                "nnlens::Sequential: the first element must be nnlens::Input<...> giving the per-sample input shape");
};

template <std::size_t... D, class... Ls>
struct Sequential<Input<D...>, Ls...> {
  static_assert((detail::check_layer<Ls>() && ...),
                "nnlens::Sequential: every element after Input must be a layer (a type with nnlens::layer_traits)");

  static constexpr shape input_shape = Input<D...>::value;
  static constexpr std::size_t size = sizeof...(Ls);
  using layer_types = std::tuple<Ls...>;

 private:
  static constexpr detail::chain_result chain_ = [] {
    if constexpr ((Layer<Ls> && ...))
      return detail::infer_chain<input_shape, Ls...>();
    else
      return detail::chain_result{};
  }();
  static constexpr bool report_chain() {
    if constexpr (!chain_.ok()) {
      using Bad = std::tuple_element_t<chain_.failed_at, layer_types>;
      constexpr std::size_t n = detail::cstr_len(chain_.reason) + 1;
      error_layer_rejects_input_shape<chain_.failed_at, Bad, chain_.failed_input,
                                      detail::fixed_string<n>(chain_.reason)>
          see_docs;
      (void)see_docs;
      return false;
    } else {
      return true;
    }
  }
  static_assert(report_chain(),
                "nnlens::Sequential: a layer does not accept the shape produced by the layer before it "
                "(the incomplete type 'error_layer_rejects_input_shape<index, layer, input shape, reason>' "
                "in this diagnostic names it)");

 public:
  /// shapes[i]: per-sample shape entering layer i; shapes[size]: the output shape.
  static constexpr std::array<shape, size + 1> shapes = detail::infer_chain_shapes<input_shape, Ls...>();
  static constexpr shape output_shape = shapes[size];
  static constexpr bool all_static_() {
    if constexpr (!chain_.ok()) return true;  // already reported above
    else {
      for (auto s : shapes)
        if (!s.is_static()) return false;
      return true;
    }
  }
  static_assert(all_static_(),
                "nnlens::Sequential needs layers whose output shapes the type fixes; use DynamicNetwork for dyn layers");

  std::tuple<Ls...> layers;

  template <std::size_t I>
  auto& layer() { return std::get<I>(layers); }
  template <std::size_t I>
  const auto& layer() const { return std::get<I>(layers); }
};

namespace detail {
template <class... S>
struct common_scalar;
template <>
struct common_scalar<> {
  using type = void;
};
template <class A, class... R>
struct common_scalar<A, R...> {
  using rest = typename common_scalar<R...>::type;
  using type = std::conditional_t<std::is_void_v<A>, rest, A>;
  static_assert(std::is_void_v<A> || std::is_void_v<rest> || std::is_same_v<A, rest>,
                "nnlens: all layers of a network must use the same scalar type");
};
}  // namespace detail

template <class Net>
struct is_sequential : std::false_type {};
template <class... Ls>
struct is_sequential<Sequential<Ls...>> : std::true_type {};
template <class Net>
inline constexpr bool is_sequential_v = is_sequential<Net>::value;

namespace detail {
/// check(std::type_identity<L>{}) for every top-level layer type L of a Sequential, as one fold
/// (an analysis's compile-time check that names the layer); `other` for any other network, whose
/// layers are checked at run time.
template <class Net, class Check>
constexpr bool every_static_layer(Check check, bool other = true) {
  if constexpr (is_sequential_v<Net>)
    return [&]<class... Ls>(std::type_identity<std::tuple<Ls...>>) {
      return (check(std::type_identity<Ls>{}) && ...);
    }(std::type_identity<typename Net::layer_types>{});
  else
    return other;
}
}  // namespace detail

/// The scalar type of a network's weights and activations (float when it has no weights).
template <class Net>
struct network_scalar;
template <class In, class... Ls>
struct network_scalar<Sequential<In, Ls...>> {
  using c = typename detail::common_scalar<layer_scalar_t<Ls>...>::type;
  using type = std::conditional_t<std::is_void_v<c>, float, c>;
};
template <class Net>
using network_scalar_t = typename network_scalar<Net>::type;

/// The same network with scalar type U (e.g. double for gradient checks).
template <class In, class... Ls, class U>
struct rebind_scalar<Sequential<In, Ls...>, U> {
  using type = Sequential<In, rebind_scalar_t<Ls, U>...>;
  static type convert(const Sequential<In, Ls...>& n) {
    type r;
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((std::get<I>(r.layers) = rebind_scalar<Ls, U>::convert(std::get<I>(n.layers))), ...);
    }(std::index_sequence_for<Ls...>{});
    return r;
  }
};

}  // namespace nnlens
