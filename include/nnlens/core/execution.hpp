// nnlens/core/execution.hpp -- execution policies (where a batch runs).
//
//   execution::seq   the calling thread
//   execution::par   the host thread pool; work is split over samples (or segments), never inside
//                    a small kernel (one fork-join costs microseconds: STYLE.md §5.6)
// The thrust policy lives in the opt-in header nnlens/backend/thrust.hpp.
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

template <class P>
inline constexpr bool is_execution_policy_v =
    std::is_same_v<std::decay_t<P>, sequenced_policy> || std::is_same_v<std::decay_t<P>, parallel_policy>;

}  // namespace nnlens::execution
