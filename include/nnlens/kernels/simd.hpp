// nnlens/kernels/simd.hpp -- the kernels' vectors: xsimd batches of the compile-time target.
//
//   simd::arch            the target (xsimd::default_arch: the best instruction set the compiler
//                         flags allow, e.g. avx512bw with -march=native on an AVX-512 machine,
//                         neon64 on aarch64); -DNNLENS_SIMD_ARCH=xsimd::avx2 (any xsimd arch
//                         the flags enable) pins another
//   simd::vec<T>          xsimd::batch<T, arch>, or plain T where the target has no vector of T
//                         (no vector unit at all: Cortex-M0..M7, -DNNLENS_NO_SIMD; double on
//                         32-bit NEON; an architecture xsimd does not know)
//   simd::mask<T>         what a comparison of two vec<T> gives (xsimd::batch_bool, or bool)
//   simd::width<T>        elements per vec<T>
//   zero<T>(), broadcast(x), load(p), store(p, v)   unaligned loads and stores
//   hsum(v)               the lanes' sum in lane order (so a result does not depend on xsimd's
//                         reduction tree)
//   select(m, a, b)       lane-wise m ? a : b
//   any(m)                whether any lane of a mask is set
//   dot(a, b, n), axpy(n, a, x, y)
//
// Calls are qualified (simd::store): unqualified, ADL would find xsimd::store (an aligned store).
// NaN: test !(x == x), never x != x: xsimd 8.1's != is ordered on AVX and AVX-512 (false for a
// NaN) but unordered on SSE2 (kernels/max_pool.hpp, argmax_beats).
// Arithmetic is written with xsimd's operators (c += a * b), never xsimd::fma: the compiler
// contracts a multiply and an add into one FMA exactly where it does for scalar code of the same
// build (-ffp-contract, the optimisation level), so the host kernels and the thrust backend's
// scalar kernels round alike.  No fast-math is assumed: every operation here is IEEE.
//
// The scalar form is what a microcontroller build gets (kernels/freestanding.hpp): no xsimd
// include at all, so the header stays freestanding there.  Raw intrinsics for what xsimd 8.1 has
// no operation for (AVX-512 masked tails, two-source permutes, VNNI's vpdpwssd) live behind one
// function each in kernels/conv.hpp, kernels/max_pool.hpp and kernels/int8.hpp, each with the
// portable path beside it.
#pragma once

#include <cstddef>
#include <cstring>
#include <type_traits>

#if defined(__arm__) && !defined(__ARM_NEON) && !defined(NNLENS_NO_SIMD)
#define NNLENS_NO_SIMD 1  // 32-bit Arm without NEON (every Cortex-M up to the M7; MVE is not in xsimd)
#endif
#if !defined(NNLENS_NO_SIMD)
#include <xsimd/xsimd.hpp>
#endif

#if !defined(NNLENS_SIMD_NS)
#define NNLENS_SIMD_NS native  // the program's own target (its compiler flags)
#endif

namespace nnlens::kernels::simd {
// One namespace per SIMD target, so that copies of the kernels compiled for several targets in one
// program (run-time dispatch: src/dispatch/) never share a symbol.  A translation unit that defines
// NNLENS_SIMD_ARCH for a dispatch copy names it here too.
inline namespace NNLENS_SIMD_NS {

#if defined(NNLENS_NO_SIMD)
template <class T>
using vec = T;
template <class T>
inline constexpr bool vector_of = false;
#else
#if defined(NNLENS_SIMD_ARCH)
using arch = NNLENS_SIMD_ARCH;
#else
using arch = xsimd::default_arch;
#endif
/// Whether the target has a vector of T (xsimd knows the architecture and has a register for T).
template <class T>
inline constexpr bool vector_of = !std::is_same_v<arch, xsimd::unavailable> && xsimd::has_simd_register<T, arch>::value;
template <class T>
using vec = typename std::conditional_t<vector_of<T>, std::type_identity<xsimd::batch<T, arch>>, std::type_identity<T>>::type;
#endif

template <class T>
using mask = decltype(vec<T>{} < vec<T>{});
template <class T>
inline constexpr std::size_t width = sizeof(vec<T>) / sizeof(T);

template <class T>
inline vec<T> zero() {
  return vec<T>(T(0));
}
template <class T>
inline vec<T> broadcast(T x) {
  return vec<T>(x);
}

// g++ 12 reports -Warray-bounds for a full-width load from an array shorter than one vector even
// on paths its own loop bounds (i + width <= n) make unreachable, once constant sizes are inlined
// (seen with 4-element double weights in tests).  The load is only ever reached with width
// elements available.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Warray-bounds"
#endif
template <class T>
inline vec<T> load(const T* p) {
  if constexpr (vector_of<T>)
    return vec<T>::load_unaligned(p);
  else
    return *p;
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
template <class T>
inline void store(T* p, vec<T> v) {
  if constexpr (vector_of<T>)
    v.store_unaligned(p);
  else
    *p = v;
}

template <class T>
inline T hsum(vec<T> v) {
  if constexpr (vector_of<T>) {
    alignas(64) T l[width<T>];
    v.store_aligned(l);
    T s = 0;
    for (std::size_t i = 0; i < width<T>; ++i) s += l[i];
    return s;
  } else {
    return v;
  }
}

/// Lane-wise m ? a : b.
template <class T>
inline T select(bool m, T a, T b) {
  return m ? a : b;
}
inline bool any(bool m) { return m; }
#if !defined(NNLENS_NO_SIMD)
template <class T, class A>
inline xsimd::batch<T, A> select(const xsimd::batch_bool<T, A>& m, const xsimd::batch<T, A>& a, const xsimd::batch<T, A>& b) {
  return xsimd::select(m, a, b);
}
template <class T, class A>
inline bool any(const xsimd::batch_bool<T, A>& m) {
  return xsimd::any(m);
}
#endif

/// sum_i a[i]*b[i] with vector accumulators (deterministic order for a given build).
template <class T>
inline T dot(const T* a, const T* b, std::size_t n) {
  constexpr std::size_t W = width<T>;
  vec<T> acc0 = simd::zero<T>(), acc1 = simd::zero<T>();
  std::size_t i = 0;
  for (; i + 2 * W <= n; i += 2 * W) {
    acc0 += simd::load(a + i) * simd::load(b + i);
    acc1 += simd::load(a + i + W) * simd::load(b + i + W);
  }
  for (; i + W <= n; i += W) acc0 += simd::load(a + i) * simd::load(b + i);
  T s = simd::hsum<T>(acc0 + acc1);
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

/// y[i] += a * x[i]
template <class T>
inline void axpy(std::size_t n, T a, const T* x, T* y) {
  constexpr std::size_t W = width<T>;
  const vec<T> av = simd::broadcast(a);
  std::size_t i = 0;
  for (; i + W <= n; i += W) simd::store(y + i, simd::load(y + i) + av * simd::load(x + i));
  for (; i < n; ++i) y[i] += a * x[i];
}

}  // inline namespace NNLENS_SIMD_NS
}  // namespace nnlens::kernels::simd

#if defined(NNLENS_EXTERN_TEMPLATES)  // nnlens::precompiled
namespace nnlens::detail {
/// The SIMD target is part of what a program shares with the library: inline kernels and packed
/// panels are sized by the vector width, and two copies of one kernel built for different targets
/// carry the same name, so the linker would mix them (measured: a program built for SSE beside a
/// library built with -march=native computed outputs off by 0.29).  The library defines `value`
/// for the vector types it was compiled with, and every program that declares the forms refers to
/// its own: a mismatch is a link error naming the program's vector types, never wrong numbers.
/// Build both with the same -march (a library built with NNLENS_NATIVE gives its users -march=native).
/// Here, beside the vector types, so that every header with a kernel the library holds (the GEMM,
/// kernels/gemm.hpp) carries the check, not only the umbrellas (precompiled/forms.hpp).
template <class VecFloat, class VecDouble>
struct precompiled_target {
  static const int value;
};
inline const int precompiled_target_check =
    precompiled_target<kernels::simd::vec<float>, kernels::simd::vec<double>>::value;
}  // namespace nnlens::detail
#endif
