// nnlens/core/finite.hpp -- NaN/Inf checks that say where the bad value is.
#pragma once

#include <cmath>
#include <cstddef>
#include <span>
#include <string>

#include "nnlens/core/error.hpp"

namespace nnlens {

/// Throws value_error naming `what`, the sample and the element of the first non-finite value.
template <class T>
void require_finite(std::span<const T> v, std::size_t per_sample, const std::string& what) {
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (!std::isfinite(v[i])) {
      const std::size_t ps = per_sample ? per_sample : v.size();
      throw value_error(detail::concat(what, ": ", std::isnan(v[i]) ? "NaN" : "Inf", " at sample ", i / ps,
                                       ", element ", i % ps));
    }
  }
}

}  // namespace nnlens
