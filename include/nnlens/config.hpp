// nnlens/config.hpp -- version, portability macros and internal contract checks.
//
// ensures: NNLENS_VERSION_* are defined; NNLENS_HD expands to `__host__ __device__` only when a
//          CUDA compiler is active (thrust backends), to nothing otherwise.
#pragma once

#include <cstddef>

#define NNLENS_VERSION_MAJOR 0
#define NNLENS_VERSION_MINOR 1
#define NNLENS_VERSION_PATCH 0

#include "nnlens/core/hd.hpp"  // NNLENS_HD

#if defined(__GNUC__)
#define NNLENS_ALWAYS_INLINE inline __attribute__((always_inline))
#define NNLENS_RESTRICT __restrict__
#else
#define NNLENS_ALWAYS_INLINE inline
#define NNLENS_RESTRICT
#endif

namespace nnlens {
inline constexpr int version_major = NNLENS_VERSION_MAJOR;
inline constexpr int version_minor = NNLENS_VERSION_MINOR;
inline constexpr int version_patch = NNLENS_VERSION_PATCH;
}  // namespace nnlens
