// nnlens/network/dynamic_network.hpp -- DynamicNetwork: layers chosen and sized at run time.
//
// A sequence of std::variant layers (each alternative a layer with dyn extents) plus the input
// shape.  It runs the very same layer_traits and algorithms as Sequential: for_each_layer visits
// the active alternative.  Shapes are inferred from the weights and checked when a layer is added
// (or on validate()); a mismatch throws shape_error naming the layer index and type.
//
// To register a new layer type: add its dynamic form to layer_list below (one line).
#pragma once

#include <cstddef>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "nnlens/core/finite.hpp"
#include "nnlens/layers/all.hpp"
#include "nnlens/core/dynamic_form.hpp"
#include "nnlens/network/sequential.hpp"

namespace nnlens {

template <class T>
class basic_dynamic_network {
 public:
  using scalar_type = T;
  using layer_type = typename detail::dynamic_layer_list<T>::type;

  basic_dynamic_network() = default;
  explicit basic_dynamic_network(shape input) : shapes_{input} {
    if (!input.is_static()) throw shape_error("DynamicNetwork: the input shape must be fully known, got " + input.str());
  }

  basic_dynamic_network(const basic_dynamic_network&);
  basic_dynamic_network(basic_dynamic_network&&) noexcept = default;
  basic_dynamic_network& operator=(const basic_dynamic_network&);
  basic_dynamic_network& operator=(basic_dynamic_network&&) noexcept;
  ~basic_dynamic_network();

  /// Appends a layer; checks it against the current output shape (throws shape_error, and the
  /// network stays as it was).
  template <class L>
  basic_dynamic_network& add(L layer) {
    if constexpr (std::is_same_v<L, layer_type> || std::is_same_v<dynamic_form_in_t<L, T>, L>)
      return push(layer_type(std::move(layer)));  // already a run-time form: moved, not copied
    else
      return push(layer_type(to_dynamic_in<T>(layer)));
  }

  std::size_t size() const { return layers_.size(); }
  bool empty() const { return layers_.empty(); }
  shape input_shape() const { return shapes_.empty() ? shape{} : shapes_.front(); }
  shape output_shape() const { return shapes_.empty() ? shape{} : shapes_.back(); }
  /// Per-sample shape entering layer i (i == size() gives the output).
  shape shape_at(std::size_t i) const { return shapes_.at(i); }
  const std::vector<shape>& shapes() const { return shapes_; }

  const layer_type& layer(std::size_t i) const { return layers_.at(i); }
  const std::vector<layer_type>& layers() const { return layers_; }
  /// Mutable access; call validate() after changing shapes of weights.
  layer_type& layer(std::size_t i) { return layers_.at(i); }
  std::vector<layer_type>& layers() { return layers_; }

  /// Re-infers every shape from the weights; throws shape_error naming the first bad layer.
  void validate();

  /// Human-readable name of layer i, e.g. "Dense".
  std::string_view layer_name(std::size_t i) const;

 private:
  basic_dynamic_network& push(layer_type&& l);
  shape infer_one(std::size_t i, shape in) const;

  std::vector<layer_type> layers_;
  std::vector<shape> shapes_;
};

// The members that visit the variant or copy, move or destroy its layers are defined out of the
// class: they are not inline, so under NNLENS_EXTERN_TEMPLATES (nnlens::precompiled holds
// basic_dynamic_network<float> and <double>) a program calls them instead of instantiating the
// variant's visits once more (building one network cost a program 1.4 s of g++ -O2).
template <class T>
basic_dynamic_network<T>::basic_dynamic_network(const basic_dynamic_network&) = default;
template <class T>
basic_dynamic_network<T>& basic_dynamic_network<T>::operator=(const basic_dynamic_network&) = default;
template <class T>
basic_dynamic_network<T>& basic_dynamic_network<T>::operator=(basic_dynamic_network&&) noexcept = default;
template <class T>
basic_dynamic_network<T>::~basic_dynamic_network() = default;

template <class T>
basic_dynamic_network<T>& basic_dynamic_network<T>::push(layer_type&& l) {
  if (shapes_.empty()) throw shape_error("DynamicNetwork: set the input shape before adding layers");
  layers_.push_back(std::move(l));
  try {
    shapes_.push_back(infer_one(layers_.size() - 1, shapes_.back()));
  } catch (...) {
    layers_.pop_back();
    throw;
  }
  return *this;
}

template <class T>
void basic_dynamic_network<T>::validate() {
  if (shapes_.empty()) throw shape_error("DynamicNetwork: no input shape");
  std::vector<shape> s{shapes_.front()};
  for (std::size_t i = 0; i < layers_.size(); ++i) s.push_back(infer_one(i, s.back()));
  shapes_ = std::move(s);
}

template <class T>
std::string_view basic_dynamic_network<T>::layer_name(std::size_t i) const {
  return std::visit([](const auto& l) { return layer_traits<std::decay_t<decltype(l)>>::name; }, layers_.at(i));
}

template <class T>
shape basic_dynamic_network<T>::infer_one(std::size_t i, shape in) const {
  return std::visit(
      [&](const auto& l) -> shape {
        using L = std::decay_t<decltype(l)>;
        try {
          return layer_traits<L>::output_shape(l, in);
        } catch (const shape_error& e) {
          throw shape_error(detail::concat("layer ", i, " (", layer_traits<L>::name, "): ", e.what()));
        } catch (const value_error& e) {
          throw value_error(detail::concat("layer ", i, " (", layer_traits<L>::name, "): ", e.what()));
        }
      },
      layers_[i]);
}

// Spelled once: `extern template` here under NNLENS_EXTERN_TEMPLATES, `template` in
// src/precompiled/network.cpp, which nnlens::precompiled compiles.
#define NNLENS_PRECOMPILED_DYNAMIC_NETWORK(KW) \
  KW class basic_dynamic_network<float>;        \
  KW class basic_dynamic_network<double>;
#if defined(NNLENS_EXTERN_TEMPLATES)
NNLENS_PRECOMPILED_DYNAMIC_NETWORK(extern template)
#endif

using DynamicNetwork = basic_dynamic_network<float>;

template <class Net>
struct is_dynamic_network : std::false_type {};
template <class T>
struct is_dynamic_network<basic_dynamic_network<T>> : std::true_type {};
template <class Net>
inline constexpr bool is_dynamic_network_v = is_dynamic_network<Net>::value;

template <class T>
struct network_scalar<basic_dynamic_network<T>> {
  using type = T;
};

// ---- visiting (same vocabulary as Sequential) ----
template <class Net, class F>
  requires is_dynamic_network_v<std::remove_const_t<Net>>
void for_each_layer(Net& net, F&& f) {
  for (std::size_t i = 0; i < net.size(); ++i)
    std::visit([&](auto& l) { f(l, i, net.shape_at(i), net.shape_at(i + 1)); }, net.layers()[i]);
}
template <class Net, class F>
  requires is_dynamic_network_v<std::remove_const_t<Net>>
void for_each_layer_reverse(Net& net, F&& f) {
  for (std::size_t k = net.size(); k-- > 0;)
    std::visit([&](auto& l) { f(l, k, net.shape_at(k), net.shape_at(k + 1)); }, net.layers()[k]);
}
template <class Net, class F>
  requires is_dynamic_network_v<std::remove_const_t<Net>>
void for_each_layer_ahead(Net& net, F&& f) {
  const std::size_t n = net.size();
  for (std::size_t i = 0; i < n; ++i) {
    auto next = [&](auto&& g) {
      if (i + 1 < n) std::visit([&](auto& l2) { g(l2, net.shape_at(i + 2)); }, net.layers()[i + 1]);
    };
    if (std::visit([&](auto& l) -> bool { return f(l, i, net.shape_at(i), net.shape_at(i + 1), next); }, net.layers()[i])) ++i;
  }
}
template <class T>
std::size_t layer_count(const basic_dynamic_network<T>& n) {
  return n.size();
}
template <class T>
shape input_shape_of(const basic_dynamic_network<T>& n) {
  return n.input_shape();
}
template <class T>
shape output_shape_of(const basic_dynamic_network<T>& n) {
  return n.output_shape();
}
template <class T>
shape shape_at(const basic_dynamic_network<T>& n, std::size_t i) {
  return n.shape_at(i);
}

/// The same weights as a DynamicNetwork.
template <class In, class... Ls>
auto to_dynamic(const Sequential<In, Ls...>& net) {
  using T = network_scalar_t<Sequential<In, Ls...>>;
  basic_dynamic_network<T> d(Sequential<In, Ls...>::input_shape);
  std::apply([&](const auto&... l) { (d.add(to_dynamic_in<T>(l)), ...); },
             net.layers);
  return d;
}

/// Fills a static network from a DynamicNetwork; throws shape_error naming the first layer whose
/// type or shape differs from Net's.
template <class Net, class T>
Net from_dynamic(const basic_dynamic_network<T>& d) {
  static_assert(is_sequential_v<Net>, "from_dynamic<Net>: Net must be a Sequential");
  if (!(d.input_shape() == Net::input_shape))
    throw shape_error(detail::concat("input: the static type expects ", Net::input_shape.str(), ", the network has ",
                                     d.input_shape().str()));
  if (d.size() != Net::size)
    throw shape_error(detail::concat("the static type has ", Net::size, " layers, the network has ", d.size()));
  Net net;
  for_each_layer(net, [&](auto& l, auto idx, shape, shape out) {
    using L = std::decay_t<decltype(l)>;
    using D = dynamic_form_in_t<L, T>;
    const std::string where = detail::concat("layer ", std::size_t(idx), " (", layer_traits<L>::name, ")");
    const auto* p = std::get_if<D>(&d.layer(idx));
    if (!p)
      throw shape_error(detail::concat(where, ": the network has a ", d.layer_name(idx), " layer here"));
    l = dynamic_form<L>::from_dynamic(*p, where);
    if (!(d.shape_at(idx + 1) == out))
      throw shape_error(detail::concat(where, ": output shape ", d.shape_at(idx + 1).str(), ", the static type expects ",
                                       out.str()));
  });
  return net;
}

}  // namespace nnlens
