// nnlens/thrust/default.hpp -- the thrust policy as the default of calls that name no policy
// (the analyses' own test suites on the thrust backend: test_<suite>_thrust).
//
//   g++ -DNNLENS_DEFAULT_POLICY_THRUST -include nnlens/thrust/all.hpp ...
//   NNLENS_DEFAULT_POLICY=seq ./program       the same program with the host as its default
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
//           Both branches are compiled in, so the environment variable NNLENS_DEFAULT_POLICY
//           ("thrust", the default, or "seq"; read once, at the first such call) picks one when the
//           program runs: the test suites build once and run twice, as test_<suite> (seq) and
//           test_<suite>_thrust.  Another value throws value_error naming it.
#pragma once

#include <cstdlib>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

#include "nnlens/core/error.hpp"
#include "nnlens/core/execution.hpp"
#include "nnlens/network/visit.hpp"
#include "nnlens/thrust/network.hpp"
#include "nnlens/thrust/policy.hpp"

namespace nnlens {

namespace detail {
/// Every layer a network of type Net can hold has thrust kernels (a DynamicNetwork: every op).
template <class Net>
constexpr bool thrust_supported_type() {
  if constexpr (is_dynamic_network_v<Net>)
    return []<class... Ls>(std::type_identity<std::variant<Ls...>>) {
      return (ThrustLayer<Ls> && ...);
    }(std::type_identity<typename Net::layer_type>{});
  else
    return every_static_layer<Net>([](auto l) { return ThrustLayer<typename decltype(l)::type>; }, false);
}
}  // namespace detail

/// Whether every layer of net has thrust kernels (device_network<Net> can be made from it).
template <class Net>
constexpr bool thrust_supported(const Net&) {
  return detail::thrust_supported_type<Net>();
}

#if defined(NNLENS_DEFAULT_POLICY_THRUST)
namespace execution {
/// Whether calls that name no policy go to execution::thrust: the environment variable
/// NNLENS_DEFAULT_POLICY, read once ("thrust" or unset: true; "seq": false).
inline bool default_is_thrust() {
  static const bool thrust_default = [] {
    const char* e = std::getenv("NNLENS_DEFAULT_POLICY");
    const std::string_view v = e ? e : "";
    if (v.empty() || v == "thrust") return true;
    if (v == "seq") return false;
    throw value_error("NNLENS_DEFAULT_POLICY is '" + std::string(v) + "': expected 'thrust' or 'seq'");
  }();
  return thrust_default;
}
template <class Net>
struct default_dispatch<Net, std::enable_if_t<nnlens::detail::thrust_supported_type<Net>()>> {
  template <class F>
  static decltype(auto) run(const Net* net, F&& f) {
    using R = decltype(f(seq));
    if (default_is_thrust() && thrust_supported(*net)) return R(f(thrust));
    return R(f(seq));
  }
};
template <>
struct default_dispatch<void> {
  template <class F>
  static decltype(auto) run(const void*, F&& f) {
    using R = decltype(f(seq));
    if (default_is_thrust()) return R(f(thrust));
    return R(f(seq));
  }
};
}  // namespace execution
#endif

}  // namespace nnlens
