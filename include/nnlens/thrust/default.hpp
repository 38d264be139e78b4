// nnlens/thrust/default.hpp -- the thrust policy as the default of calls that name no policy
// (the `*_thrust` test executables: the analyses' own test suites on the thrust backend).
//
//   g++ -DNNLENS_DEFAULT_POLICY_THRUST -include nnlens/thrust/default.hpp -include nnlens/thrust/all.hpp ...
//
// requires: NNLENS_DEFAULT_POLICY_THRUST defined, and this header seen before any call that names
//           no policy is instantiated (a forced include, first), in every TU of the program.
//           Without the macro this header declares only thrust_supported().
// ensures:  execution::default_dispatch is specialised: `f(net, ...)` runs f(execution::thrust,
//           net, ...) when every layer of net has thrust kernels (a Sequential: at compile time; a
//           DynamicNetwork: checked at run time; composites by their inner layers), else
//           f(execution::seq, net, ...) as before.
//           Calls on black boxes (DFlare, DiffChaser: Net = void) get execution::thrust.  An
//           analysis without a thrust overload still runs on the host (its generic overload takes
//           any policy); the result has the type of the host call.
#pragma once

#include <type_traits>
#include <utility>

#include "nnlens/core/execution.hpp"
#include "nnlens/network/visit.hpp"
#include "nnlens/thrust/network.hpp"
#include "nnlens/thrust/policy.hpp"

namespace nnlens {

namespace detail {
template <class Net>
constexpr bool thrust_supported_type() {
  if constexpr (is_sequential_v<Net>)
    return []<class... Ls>(std::type_identity<std::tuple<Ls...>>) {
      return (ThrustLayer<Ls> && ...);
    }(std::type_identity<typename Net::layer_types>{});
  else
    return is_dynamic_network_v<Net>;
}
}  // namespace detail

/// Whether every layer of net has thrust kernels (device_network<Net> can be made from it).
template <class Net>
bool thrust_supported(const Net& net) {
  if constexpr (!detail::thrust_supported_type<Net>()) {
    return false;
  } else {
    bool ok = true;
    for_each_layer(net, [&](const auto& l, auto, shape, shape) {
      if constexpr (!ThrustLayer<std::decay_t<decltype(l)>>) ok = false;
    });
    return ok;
  }
}

#if defined(NNLENS_DEFAULT_POLICY_THRUST)
namespace execution {
template <class Net>
struct default_dispatch<Net, std::enable_if_t<nnlens::detail::thrust_supported_type<Net>()>> {
  template <class F>
  static decltype(auto) run(const Net* net, F&& f) {
    using R = decltype(f(seq));
    if (thrust_supported(*net)) return R(f(thrust));
    return R(f(seq));
  }
};
template <>
struct default_dispatch<void> {
  template <class F>
  static decltype(auto) run(const void*, F&& f) {
    return std::forward<F>(f)(thrust);
  }
};
}  // namespace execution
#endif

}  // namespace nnlens
