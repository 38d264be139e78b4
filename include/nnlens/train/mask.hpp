// nnlens/train/mask.hpp -- parameter masks: which parameters an optimiser may change.
//
// A parameter_mask holds one bit per scalar parameter, tensor by tensor in parameter_spans order
// (1 = trainable).  Build one from a *mask network* (a network of the same type whose parameters
// are 0/1, e.g. mask_like(net, 0) with some entries set) or from per-tensor bit ranges:
//
//   train_only(mask)   the parameters where mask != 0 are trained, every other one is frozen
//   freeze(mask)       the parameters where mask != 0 are frozen, every other one is trained
//   mask_like(net, v)  a mask network of net's type with every parameter set to v (0 or 1)
//   layer_mask(net, {i, j, ...})  a mask network with 1 in every parameter of layers i, j, ...
//
// Semantics (what the optimisers in train/optimizer.hpp guarantee): a frozen parameter receives
// no update at all -- its gradient is zeroed (mask.apply(grad)), and weight decay, momentum and
// Adam's moments do not move it either: after any number of steps it is bit-identical to before.
//
// requires: the mask matches the network it is used with tensor for tensor (check() throws
//           shape_error naming the tensor otherwise).
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "nnlens/core/error.hpp"
#include "nnlens/network/parameters.hpp"

namespace nnlens::train {

template <class Net>
concept Network = is_sequential_v<std::remove_cvref_t<Net>> || is_dynamic_network_v<std::remove_cvref_t<Net>>;

class parameter_mask {
 public:
  parameter_mask() = default;
  /// bits[k][i] != 0: element i of parameter tensor k is trainable.
  explicit parameter_mask(std::vector<std::vector<std::uint8_t>> bits) : bits_(std::move(bits)) {}

  std::size_t tensors() const { return bits_.size(); }
  std::size_t tensor_size(std::size_t k) const { return bits_.at(k).size(); }
  bool trainable(std::size_t k, std::size_t i) const { return bits_.at(k).at(i) != 0; }
  /// The bits of tensor k (1 = trainable).
  std::span<const std::uint8_t> bits(std::size_t k) const { return bits_.at(k); }

  std::size_t trainable_count() const {
    std::size_t n = 0;
    for (const auto& b : bits_)
      for (auto v : b) n += v != 0;
    return n;
  }
  std::size_t size() const {
    std::size_t n = 0;
    for (const auto& b : bits_) n += b.size();
    return n;
  }
  std::size_t frozen_count() const { return size() - trainable_count(); }

  /// The complement: trainable <-> frozen.
  parameter_mask inverted() const {
    parameter_mask m = *this;
    for (auto& b : m.bits_)
      for (auto& v : b) v = v ? 0 : 1;
    return m;
  }

  /// Throws shape_error if the mask does not have net's parameter tensors and sizes.
  template <class Net>
  void check(const Net& net) const {
    const auto ps = parameter_spans(net);
    if (ps.size() != bits_.size())
      throw shape_error(nnlens::detail::concat("parameter mask: ", bits_.size(), " tensors, the network has ",
                                               ps.size()));
    for (std::size_t k = 0; k < ps.size(); ++k)
      if (ps[k].size() != bits_[k].size())
        throw shape_error(nnlens::detail::concat("parameter mask: tensor ", k, " has ", bits_[k].size(),
                                                 " bits, the network's has ", ps[k].size(), " elements"));
  }

  /// Zeroes the gradient of every frozen parameter (grad: a gradient network of the same type).
  template <class Net>
  void apply(Net& grad) const {
    check(grad);
    using T = network_scalar_t<Net>;
    auto gs = parameter_spans(grad);
    for (std::size_t k = 0; k < gs.size(); ++k)
      for (std::size_t i = 0; i < gs[k].size(); ++i)
        if (!bits_[k][i]) gs[k][i] = T(0);
  }

 private:
  std::vector<std::vector<std::uint8_t>> bits_;
};

namespace detail {
template <class Net>
parameter_mask mask_from_network(const Net& mask, bool nonzero_trains) {
  std::vector<std::vector<std::uint8_t>> bits;
  for (auto s : parameter_spans(mask)) {
    auto& b = bits.emplace_back(s.size());
    for (std::size_t i = 0; i < s.size(); ++i) b[i] = std::uint8_t((s[i] != 0) == nonzero_trains);
  }
  return parameter_mask(std::move(bits));
}
template <class R>
parameter_mask mask_from_ranges(const R& ranges, bool set_trains) {
  std::vector<std::vector<std::uint8_t>> bits;
  for (const auto& r : ranges) {
    auto& b = bits.emplace_back();
    for (auto v : r) b.push_back(std::uint8_t(bool(v) == set_trains));
  }
  return parameter_mask(std::move(bits));
}
}  // namespace detail

/// Train only the parameters where the mask network is non-zero.
template <class Net>
  requires Network<Net>
parameter_mask train_only(const Net& mask) {
  return detail::mask_from_network(mask, true);
}
/// Freeze the parameters where the mask network is non-zero; train every other one.
template <class Net>
  requires Network<Net>
parameter_mask freeze(const Net& mask) {
  return detail::mask_from_network(mask, false);
}
/// Per-tensor bit ranges (e.g. std::vector<std::vector<bool>>): set bits are trained.
template <class R>
  requires(!Network<R>)
parameter_mask train_only(const R& bits) {
  return detail::mask_from_ranges(bits, true);
}
/// Per-tensor bit ranges: set bits are frozen.
template <class R>
  requires(!Network<R>)
parameter_mask freeze(const R& bits) {
  return detail::mask_from_ranges(bits, false);
}

/// A mask network of net's type and shapes with every parameter set to v.
template <class Net>
Net mask_like(const Net& net, int v) {
  Net m = net;
  fill_parameters(m, v ? 1 : 0);
  return m;
}

/// A mask network with 1 in every parameter of the listed layers (indices as in for_each_layer)
/// and 0 elsewhere.  Throws value_error for an index past the last layer.
template <class Net>
Net layer_mask(const Net& net, std::initializer_list<std::size_t> layers) {
  Net m = mask_like(net, 0);
  const std::size_t n = layer_count(net);
  for (std::size_t i : layers)
    if (i >= n)
      throw value_error(nnlens::detail::concat("layer_mask: layer ", i, " does not exist (the network has ", n,
                                               " layers)"));
  for_each_layer(m, [&](auto& l, auto idx, shape, shape) {
    using L = std::remove_cvref_t<decltype(l)>;
    if constexpr (HasParameters<L>) {
      bool on = false;
      for (std::size_t i : layers) on = on || i == std::size_t(idx);
      if (on)
        for (auto s : layer_traits<L>::parameters(l))
          for (auto& x : s) x = 1;
    }
  });
  return m;
}

}  // namespace nnlens::train
