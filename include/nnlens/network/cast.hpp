// nnlens/network/cast.hpp -- the same network with another scalar type.
//
//   network_cast<U>(net)   Sequential<In, Ls...> -> Sequential<In, rebind_scalar_t<Ls, U>...>,
//                          basic_dynamic_network<T> -> basic_dynamic_network<U>
//
// Every weight is converted with static_cast<U>, so float -> double and float -> an exact rational
// (boost::multiprecision::cpp_rational) are exact.  Used by ExactLine (values in double by
// default), gradient checks and tests.  When U is already the network's scalar the result is a copy.
#pragma once

#include <variant>

#include "nnlens/network/dynamic_network.hpp"
#include "nnlens/network/sequential.hpp"

namespace nnlens {

template <class T, class U>
struct rebind_scalar<basic_dynamic_network<T>, U> {
  using type = basic_dynamic_network<U>;
  static type convert(const basic_dynamic_network<T>& n) {
    type r(n.input_shape());
    for (const auto& v : n.layers())
      std::visit([&](const auto& l) { r.add(rebind_scalar<std::decay_t<decltype(l)>, U>::convert(l)); }, v);
    return r;
  }
};

/// The network with every weight converted to U.
template <class U, class Net>
rebind_scalar_t<Net, U> network_cast(const Net& net) {
  return rebind_scalar<Net, U>::convert(net);
}

}  // namespace nnlens
