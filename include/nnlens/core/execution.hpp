// nnlens/core/execution.hpp -- execution policies (where a batch runs).
//
//   execution::seq   the calling thread
//   execution::par   the host thread pool; work is split over samples (or segments), never inside
//                    a small kernel (one fork-join costs microseconds: docs/design/style.md#thrust (item 6))
//   execution::thrust   (opt-in component nnlens::thrust: nnlens/thrust/policy.hpp) batches on a
//                    thrust device system (CUDA, OMP or TBB); it registers itself through
//                    is_execution_policy below.
#pragma once

#include <cstddef>
#include <type_traits>
#include <utility>

namespace nnlens::execution {

struct sequenced_policy {};
struct parallel_policy {
  std::size_t min_chunk = 1;  // smallest number of samples worth a task
};
inline constexpr sequenced_policy seq{};
inline constexpr parallel_policy par{};

/// Specialise (to true_type) to register a policy defined elsewhere (the thrust one).
template <class P>
struct is_execution_policy
    : std::bool_constant<std::is_same_v<P, sequenced_policy> || std::is_same_v<P, parallel_policy>> {};
template <class P>
inline constexpr bool is_execution_policy_v = is_execution_policy<std::decay_t<P>>::value;
/// True for a policy that runs on the host thread pool (execution::par): analyses split their
/// samples, segments or seeds over the pool's threads.  Specialise (to true_type) to register
/// another host-threaded policy.
template <class P>
struct is_host_parallel_policy : std::is_same<P, parallel_policy> {};
template <class P>
inline constexpr bool is_host_parallel_policy_v = is_host_parallel_policy<std::decay_t<P>>::value;

/// Specialise (to true_type) for a policy whose analyses batch work across samples, segments or
/// seeds into large device passes (the thrust one): e.g. DFlare then advances every seed's search
/// in lockstep and sends one batch of queries per round instead of one query per seed.
template <class P>
struct is_batching_policy : std::false_type {};
template <class P>
inline constexpr bool is_batching_policy_v = is_batching_policy<std::decay_t<P>>::value;

/// The policy of a call that names none (`forward(net, X)`, `relevance(net, X)`, ...):
/// default_dispatch<Net>::run(&net, f) returns f(seq).  A build may specialise it, visible before
/// any call, to run such calls elsewhere: nnlens/thrust/default.hpp does so when
/// NNLENS_DEFAULT_POLICY_THRUST is defined (the `*_thrust` test executables), sending every call
/// on a network that has thrust kernels to execution::thrust, so the analyses' own test suites run
/// on the thrust backend.  Net = void: calls on black boxes (DFlare, DiffChaser).
template <class Net, class = void>
struct default_dispatch {
  template <class F>
  static decltype(auto) run(const Net*, F&& f) {
    return std::forward<F>(f)(seq);
  }
};
template <class Net, class F>
decltype(auto) with_default_policy(const Net& net, F&& f) {
  return default_dispatch<Net>::run(&net, std::forward<F>(f));
}
template <class F>
decltype(auto) with_default_policy(F&& f) {
  // void spelled as a type that depends on F: default_dispatch<void> is instantiated at the call,
  // after a specialisation that the build may declare later in the TU
  using none = std::conditional_t<std::is_void_v<F>, F, void>;
  return default_dispatch<none>::run(static_cast<const void*>(nullptr), std::forward<F>(f));
}

}  // namespace nnlens::execution
