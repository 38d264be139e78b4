// nnlens/core/finite.hpp -- NaN/Inf checks that say where the bad value is.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>
#include <string>

#include "nnlens/core/error.hpp"

namespace nnlens {

namespace detail {
/// True if p[0, n) holds no NaN and no Inf.  Branch-free, so that it vectorises: x - x is 0 for a
/// finite x and NaN for Inf or NaN (a loop that stops at the first bad value does not vectorise).
template <class T>
bool all_finite(const T* p, std::size_t n) {
  unsigned bad = 0;
  for (std::size_t i = 0; i < n; ++i) bad |= unsigned(!(p[i] - p[i] == T(0)));
  return bad == 0;
}
}  // namespace detail

/// Throws value_error naming `what`, the sample and the element of the first non-finite value.
template <class T>
void require_finite(std::span<const T> v, std::size_t per_sample, const std::string& what) {
  constexpr std::size_t block = 4096;  // scanned fast; a block with a bad value is searched below
  std::size_t i0 = 0;
  while (i0 < v.size() && detail::all_finite(v.data() + i0, std::min(block, v.size() - i0))) i0 += block;
  for (std::size_t i = i0; i < v.size(); ++i) {
    if (!std::isfinite(v[i])) {
      const std::size_t ps = per_sample ? per_sample : v.size();
      throw value_error(detail::concat(what, ": ", std::isnan(v[i]) ? "NaN" : "Inf", " at sample ", i / ps,
                                       ", element ", i % ps));
    }
  }
}

}  // namespace nnlens
