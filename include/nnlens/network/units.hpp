// nnlens/network/units.hpp -- a network's neurons grouped into units, the way NeuSemSlice's masks
// and the pruning criteria count them (docs/specs/neusemslice.md#21-objects).
//
//   auto us = neuron_units(net);   every top-level layer with synapses and per-neuron parameters
//                                  (sign_rule<L>::synapses and layer_traits<L>::for_each_neuron_parameter:
//                                  Dense, Conv2D) starts a unit; the shape-preserving, synapse-free
//                                  layers after it (BatchNorm, activations, Dropout) belong to it and
//                                  the last of them holds its neuron values.  The last unit is the
//                                  output (us.back().output == true).  Layers inside a composite
//                                  (Residual) are not units: a composite ends the run.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "nnlens/core/error.hpp"
#include "nnlens/core/properties.hpp"
#include "nnlens/core/traits.hpp"
#include "nnlens/network/graph.hpp"
#include "nnlens/network/visit.hpp"

namespace nnlens {

namespace detail {
/// Any (tensor, element) visitor, for the concept below (a named type: nvcc's front end makes a
/// concept with a lambda in its requires-expression false).
struct any_parameter_visitor {
  void operator()(std::size_t, std::size_t) const {}
};
template <class L>
concept has_neuron_parameters = requires(const L& l, shape s) {
  layer_traits<L>::for_each_neuron_parameter(l, s, s, std::size_t(0), any_parameter_visitor{});
};
template <class L>
std::size_t parameter_count_of_tensors(const L& l) {
  if constexpr (HasParameters<L>)
    return layer_traits<L>::parameters(l).size();
  else
    return (void)l, 0;
}
}  // namespace detail

struct neuron_unit {
  std::size_t layer = 0;     // the Dense/Conv2D (top-level index)
  std::size_t feature = 0;   // the top-level layer whose output holds the neuron values
  std::vector<std::size_t> followers;  // per-neuron layers with parameters in between (BatchNorm)
  std::string name;          // "3 Dense"
  shape out;                 // the feature's per-sample shape
  std::size_t neurons = 0;   // channels (rank-3 output) or units
  bool output = false;       // the last weighted layer: never sliced
};

template <class Net>
std::vector<neuron_unit> neuron_units(const Net& net) {
  struct info {
    bool starts = false, passes = false, has_params = false;
    std::string_view type;
    shape in, out;
  };
  std::vector<info> ls;
  for_each_layer(net, [&](const auto& l, auto, shape in, shape out) {
    using L = std::decay_t<decltype(l)>;
    info i;
    i.type = layer_traits<L>::name;
    i.in = in, i.out = out;
    if constexpr (SignLayer<L>) {
      if constexpr (detail::sign_has_synapses<L> && detail::has_neuron_parameters<L>) i.starts = true;
      // a channel map (ChannelShuffle) moves neurons to other channels: it ends the unit, whose
      // neuron values are read before it, where channel n is still the layer's neuron n
      if constexpr (!detail::sign_has_synapses<L> && !detail::sign_is_composite<L> && !ChannelMap<L>)
        i.passes = in == out;
    }
    if constexpr (detail::has_neuron_parameters<L>) i.has_params = true;
    (void)l;
    ls.push_back(i);
  });
  std::vector<neuron_unit> r;
  for (std::size_t i = 0; i < ls.size(); ++i) {
    if (!ls[i].starts) continue;
    neuron_unit u;
    u.layer = u.feature = i;
    u.name = std::to_string(i) + " " + std::string(ls[i].type);
    std::size_t j = i + 1;
    while (j < ls.size() && ls[j].passes) {
      if (ls[j].has_params) u.followers.push_back(j);
      u.feature = j++;
    }
    u.out = ls[u.feature].out;
    u.neurons = u.out.rank == 3 ? u.out[0] : u.out.size();
    r.push_back(std::move(u));
  }
  if (r.empty()) throw value_error("neuron_units: the network has no Dense or Conv2D layer");
  r.back().output = true;
  return r;
}

}  // namespace nnlens
