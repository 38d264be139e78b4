// nnlens/precompiled/forms.hpp -- the vocabulary of the precompiled forms (issue 19 item 3).
//
// nnlens stays header-only.  A program that links the small companion library `nnlens::precompiled`
// (CMake; it defines NNLENS_EXTERN_TEMPLATES for its users) or defines NNLENS_EXTERN_TEMPLATES and
// links libnnlens_precompiled itself sees, at the end of each technique's umbrella header, one
// `extern template` declaration per common dynamic form: the analyses on a DynamicNetwork of float
// or double, with execution::seq or execution::par (each analysis reaches its form after its input
// checks, so any input container does).  Its compiler then emits a call instead of instantiating
// the dynamic network's visits once more; src/precompiled/*.cpp instantiate each form once.  A call
// that matches no listed form (a static Sequential, another scalar, a thrust policy) is
// instantiated in the caller as before.  Results equal the header-only code's bit for bit when the
// library and the program are compiled with the same flags (docs/getting-started.md).
//
//   NNLENS_PRECOMPILED_EACH(X, KW)   X(KW, T, Policy) for T in {float, double} and Policy in
//                                    {execution::sequenced_policy, execution::parallel_policy}
//   NNLENS_PRECOMPILED_DECLARE(M)    M(extern template) when NNLENS_EXTERN_TEMPLATES is defined
//
// Each list (precompiled/network.hpp, exactline.hpp, nnslicer.hpp, coverage.hpp) is a macro M(KW)
// that spells its forms once: `extern template` in a user's program, `template` (an explicit
// instantiation definition) in its src/precompiled/*.cpp, so the two cannot drift apart.
#pragma once

#include "nnlens/core/execution.hpp"

#define NNLENS_PRECOMPILED_EACH(X, KW)                                                                       \
  X(KW, float, ::nnlens::execution::sequenced_policy)                                                        \
  X(KW, float, ::nnlens::execution::parallel_policy)                                                         \
  X(KW, double, ::nnlens::execution::sequenced_policy)                                                       \
  X(KW, double, ::nnlens::execution::parallel_policy)

#if !defined(NNLENS_EXTERN_TEMPLATES)
#define NNLENS_PRECOMPILED_DECLARE(M)
#else
#define NNLENS_PRECOMPILED_DECLARE(M) M(extern template)
#include "nnlens/kernels/simd.hpp"

namespace nnlens::detail {
/// The SIMD target is part of what a program shares with the library: inline kernels and packed
/// panels are sized by the vector width, and two copies of one kernel built for different targets
/// carry the same name, so the linker would mix them (measured: a program built for SSE beside a
/// library built with -march=native computed outputs off by 0.29).  The library defines `value`
/// for the vector types it was compiled with, and every program that declares the forms refers to
/// its own: a mismatch is a link error naming the program's vector types, never wrong numbers.
/// Build both with the same -march (a library built with NNLENS_NATIVE gives its users -march=native).
template <class VecFloat, class VecDouble>
struct precompiled_target {
  static const int value;
};
inline const int precompiled_target_check =
    precompiled_target<kernels::simd::vec<float>, kernels::simd::vec<double>>::value;
}  // namespace nnlens::detail
#endif
