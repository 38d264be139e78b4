// nnlens/core/random.hpp -- portable random draws: the same numbers on every standard library.
//
//   detail::mulhi64(a, b)             the high 64 bits of a * b
//   detail::draw_below(rng, n)        a uniform index in [0, n) (Lemire's multiply-shift)
//   detail::draw_unit(rng)            a uniform double in [0, 1) (the top 53 bits of one draw)
//   detail::shuffle(v, rng)           Fisher-Yates over all of v
//   detail::partial_shuffle(v, k, rng)  the first k of v become a uniform draw without
//                                     replacement (in drawn order); v is cut to them
//   detail::splitmix64(z)             SplitMix64's output function of the state z
//
// requires: rng is a std::mt19937_64 (any engine whose operator() returns 64 uniform bits);
//           draw_below: n >= 1.
// ensures:  the std distributions (uniform_int_distribution, std::shuffle...) are
//           implementation-defined; these are not: a seed gives the same draws with libstdc++,
//           libc++ and MSVC's library, on every platform.  Each draw_below / draw_unit consumes
//           exactly one rng() call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

namespace nnlens::detail {

/// The high 64 bits of a * b.
constexpr std::uint64_t mulhi64(std::uint64_t a, std::uint64_t b) {
  const std::uint64_t al = a & 0xffffffffu, ah = a >> 32, bl = b & 0xffffffffu, bh = b >> 32;
  const std::uint64_t p0 = al * bl, p1 = al * bh, p2 = ah * bl, p3 = ah * bh;
  const std::uint64_t mid = (p0 >> 32) + (p1 & 0xffffffffu) + (p2 & 0xffffffffu);
  return p3 + (p1 >> 32) + (p2 >> 32) + (mid >> 32);
}

/// A uniform draw in [0, n) (Lemire's multiply-shift, without the rejection step).
inline std::size_t draw_below(std::mt19937_64& rng, std::size_t n) { return std::size_t(mulhi64(rng(), n)); }

/// A uniform double in [0, 1).
inline double draw_unit(std::mt19937_64& rng) { return double(rng() >> 11) * 0x1.0p-53; }

/// Fisher-Yates shuffle of all of v (from the back).
template <class T>
void shuffle(std::vector<T>& v, std::mt19937_64& rng) {
  for (std::size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[draw_below(rng, i)]);
}

/// k elements of v without replacement (a partial Fisher-Yates from the front): v keeps the first
/// k, in drawn order; all of v, untouched, when k >= v.size().
template <class T>
void partial_shuffle(std::vector<T>& v, std::size_t k, std::mt19937_64& rng) {
  if (k >= v.size()) return;
  for (std::size_t i = 0; i < k; ++i) std::swap(v[i], v[i + draw_below(rng, v.size() - i)]);
  v.resize(k);
}

/// SplitMix64: the state z advanced by the golden-ratio increment, then mixed.
constexpr std::uint64_t splitmix64(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace nnlens::detail
