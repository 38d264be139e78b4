// nnlens/precompiled/forms.hpp -- the vocabulary of the precompiled forms.
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
// the SIMD target check (a program built for another target than the library does not link)
#include "nnlens/kernels/simd.hpp"
#endif
