// nnlens/thrust/policy.hpp -- the thrust execution policy (opt-in component nnlens::thrust).
//
//   forward(nnlens::execution::thrust, net, X)            nnlens/thrust/forward.hpp
//   profile_network(nnlens::execution::thrust, net, X)    nnlens/thrust/profile.hpp
//   nnlens::thrust_policy{.batch = 1024}                  samples per device pass (bounds device
//                                                          memory: every tensor of a pass is kept;
//                                                          default 8192 on CUDA, 256 on CPU systems)
//
// requires: thrust on the include path (CMake: link nnlens::thrust, which pins the CUDA toolkit's
//           CCCL headers) and THRUST_DEVICE_SYSTEM set the same in every TU (an interface
//           definition, never in a header: docs/design/style.md#thrust (item 5)).  OMP needs -fopenmp; on a shared or
//           loaded machine run with OMP_WAIT_POLICY=passive (spinning threads wait for a time
//           slice at every kernel's barrier: docs/scale.md).
// ensures:  is_execution_policy_v<thrust_policy>; analyses with a thrust path (forward,
//           profile_network) run their kernels on the device system; an analysis without one
//           accepts the policy and runs on the calling thread, as with execution::seq.
// Note:     inside namespace nnlens::execution, `thrust` names this object; the library writes
//           ::thrust for the library's namespace.
#pragma once

#include <cstddef>
#include <type_traits>

#include <thrust/version.h>

#include "nnlens/config.hpp"
#include "nnlens/core/execution.hpp"

#if defined(THRUST_DEVICE_SYSTEM) && defined(THRUST_DEVICE_SYSTEM_OMP) && !defined(__CUDACC__)
#if THRUST_DEVICE_SYSTEM == THRUST_DEVICE_SYSTEM_OMP && !defined(_OPENMP)
#error "nnlens::thrust with THRUST_DEVICE_SYSTEM_OMP needs OpenMP: compile with -fopenmp (or link nnlens::thrust)"
#endif
#endif

static_assert(THRUST_VERSION >= 101700, "nnlens::thrust needs thrust 1.17 or later (the CUDA toolkit's CCCL)");

namespace nnlens {

namespace execution {
struct thrust_policy {
  /// Samples per device pass.  On a GPU a pass should fill the device; on CPU device systems
  /// (OMP, TBB, CPP) a pass whose activations stay in cache is ~3x faster than one big pass
  /// (LeNet-5, 4096 images: 375 ms in passes of 256 vs 1113 ms in one pass, 1 OMP thread).
#if THRUST_DEVICE_SYSTEM == THRUST_DEVICE_SYSTEM_CUDA
  std::size_t batch = 8192;
#else
  std::size_t batch = 256;
#endif
};
inline constexpr thrust_policy thrust{};

template <>
struct is_execution_policy<thrust_policy> : std::true_type {};
template <>
struct is_batching_policy<thrust_policy> : std::true_type {};
}  // namespace execution

using thrust_policy = execution::thrust_policy;

/// The thrust library's version as THRUST_VERSION encodes it (major * 100000 + minor * 100 + patch).
inline constexpr int thrust_version = THRUST_VERSION;

}  // namespace nnlens
