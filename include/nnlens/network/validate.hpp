// nnlens/network/validate.hpp -- checks that a network's weights fit its shapes and are finite.
//
//   check_shapes(net)   every layer's weights match the shape entering it (O(layers); the checked
//                       forward calls it on every call, so hand-set weights of the wrong shape
//                       give shape_error, never an out-of-bounds read)
//   validate(net)       check_shapes + no NaN/Inf parameter (O(parameters)); loaders and training
//                       call it
// Both throw (shape_error / value_error) naming the layer index and type.
#pragma once

#include <cstddef>
#include <type_traits>

#include "nnlens/network/parameters.hpp"

namespace nnlens {

template <class Net>
void check_shapes(const Net& net) {
  for_each_layer(net, [&](const auto& l, auto idx, shape in, shape out) {
    using L = std::decay_t<decltype(l)>;
    shape got;
    try {
      got = layer_traits<L>::output_shape(l, in);
    } catch (const shape_error& e) {
      throw shape_error(detail::concat("layer ", std::size_t(idx), " (", layer_traits<L>::name, "): ", e.what()));
    } catch (const value_error& e) {
      throw value_error(detail::concat("layer ", std::size_t(idx), " (", layer_traits<L>::name, "): ", e.what()));
    }
    if (!(got == out))
      throw shape_error(detail::concat("layer ", std::size_t(idx), " (", layer_traits<L>::name, "): produces ",
                                       got.str(), ", the network expects ", out.str()));
  });
}

template <class Net>
void validate(const Net& net) {
  check_shapes(net);
  require_finite_parameters(net);
}

}  // namespace nnlens
