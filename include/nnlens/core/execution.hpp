// nnlens/core/execution.hpp -- execution policies (where a batch runs).
//
//   execution::seq   the calling thread
//   execution::par   the host thread pool; work is split over samples (or segments), never inside
//                    a small kernel (one fork-join costs microseconds: STYLE.md §5.6)
//   execution::thrust   (opt-in component nnlens::thrust: nnlens/thrust/policy.hpp) batches on a
//                    thrust device system (CUDA, OMP or TBB); it registers itself through
//                    is_execution_policy below.
#pragma once

#include <cstddef>
#include <type_traits>

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

/// Specialise (to true_type) for a policy whose analyses batch work across samples, segments or
/// seeds into large device passes (the thrust one): e.g. DFlare then advances every seed's search
/// in lockstep and sends one batch of queries per round instead of one query per seed.
template <class P>
struct is_batching_policy : std::false_type {};
template <class P>
inline constexpr bool is_batching_policy_v = is_batching_policy<std::decay_t<P>>::value;

}  // namespace nnlens::execution
