// nnlens/kernels/simd.hpp -- portable fixed-width vectors (GCC/Clang vector extensions).
//
// The width follows the target: 64 bytes with AVX-512, 32 with AVX/AVX2, 16 otherwise.  Code written
// against vec<T> compiles everywhere; the compiler splits wide vectors on narrow targets.  No
// fast-math is assumed: every operation here is IEEE.
#pragma once

#include <cstddef>
#include <cstring>

namespace nnlens::kernels::simd {

#if defined(__AVX512F__)
inline constexpr std::size_t bytes = 64;
#elif defined(__AVX__)
inline constexpr std::size_t bytes = 32;
#elif defined(__arm__) && !defined(__ARM_NEON) && !defined(__ARM_FEATURE_MVE)
inline constexpr std::size_t bytes = 0;  // no vector unit (Cortex-M0..M7): one element per "vector"
#else
inline constexpr std::size_t bytes = 16;
#endif

template <class T>
struct vec_of {
  typedef T type __attribute__((vector_size(bytes == 0 ? sizeof(T) : bytes)));
};
template <class T>
using vec = typename vec_of<T>::type;
template <class T>
inline constexpr std::size_t width = bytes == 0 ? 1 : bytes / sizeof(T);

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
  vec<T> v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
template <class T>
inline void store(T* p, vec<T> v) {
  std::memcpy(p, &v, sizeof v);
}
template <class T>
inline vec<T> broadcast(T x) {
  return vec<T>{} + x;
}
template <class T>
inline T hsum(vec<T> v) {
  T s = 0;
  for (std::size_t i = 0; i < width<T>; ++i) s += v[i];
  return s;
}

/// sum_i a[i]*b[i] with vector accumulators (deterministic order for a given build).
template <class T>
inline T dot(const T* a, const T* b, std::size_t n) {
  constexpr std::size_t W = width<T>;
  vec<T> acc0{}, acc1{};
  std::size_t i = 0;
  for (; i + 2 * W <= n; i += 2 * W) {
    acc0 += load(a + i) * load(b + i);
    acc1 += load(a + i + W) * load(b + i + W);
  }
  for (; i + W <= n; i += W) acc0 += load(a + i) * load(b + i);
  T s = hsum<T>(acc0 + acc1);
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

/// y[i] += a * x[i]
template <class T>
inline void axpy(std::size_t n, T a, const T* x, T* y) {
  constexpr std::size_t W = width<T>;
  const vec<T> av = broadcast(a);
  std::size_t i = 0;
  for (; i + W <= n; i += W) store(y + i, load(y + i) + av * load(x + i));
  for (; i < n; ++i) y[i] += a * x[i];
}

}  // namespace nnlens::kernels::simd
