// nnlens/core/shape.hpp -- per-sample shapes with static or dynamic extents.
//
// A `shape` is the shape of ONE sample (the batch axis is never part of it): rank 1 is a feature
// vector {n}; rank 3 is an image {channels, height, width}.  It is a structural literal type, so it
// can be a template argument and be computed at compile time.  `dyn` marks an extent known only at
// run time (as std::dynamic_extent does for std::span).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include "nnlens/core/error.hpp"

namespace nnlens {

/// An extent known only at run time.
inline constexpr std::size_t dyn = std::numeric_limits<std::size_t>::max();

struct shape {
  std::size_t rank = 0;
  std::array<std::size_t, 3> d{0, 0, 0};

  constexpr shape() = default;
  constexpr explicit shape(std::size_t n) : rank(1), d{n, 1, 1} {}
  constexpr shape(std::size_t c, std::size_t h, std::size_t w) : rank(3), d{c, h, w} {}

  /// Number of scalars in one sample (dyn if any extent is dyn).
  constexpr std::size_t size() const {
    std::size_t n = 1;
    for (std::size_t i = 0; i < rank; ++i) {
      if (d[i] == dyn) return dyn;
      n *= d[i];
    }
    return n;
  }
  constexpr bool is_static() const {
    for (std::size_t i = 0; i < rank; ++i)
      if (d[i] == dyn) return false;
    return rank != 0;
  }
  constexpr std::size_t operator[](std::size_t i) const { return d[i]; }
  constexpr std::size_t channels() const { return d[0]; }
  constexpr std::size_t height() const { return rank == 3 ? d[1] : 1; }
  constexpr std::size_t width() const { return rank == 3 ? d[2] : 1; }
  constexpr bool operator==(const shape&) const = default;

  /// The dims as a vector with a leading batch axis of `batch`.
  std::vector<std::size_t> with_batch(std::size_t batch) const {
    std::vector<std::size_t> v{batch};
    for (std::size_t i = 0; i < rank; ++i) v.push_back(d[i]);
    return v;
  }
  std::string str() const {
    std::string s = "[";
    for (std::size_t i = 0; i < rank; ++i) {
      if (i) s += ",";
      s += d[i] == dyn ? std::string("dyn") : std::to_string(d[i]);
    }
    return s + "]";
  }
};

inline std::ostream& operator<<(std::ostream& os, const shape& s) { return os << s.str(); }

/// Shape inference result: the output shape, or a static message saying what is wrong.
struct shape_check {
  shape out{};
  const char* error = nullptr;
  constexpr bool ok() const { return error == nullptr; }
};

namespace detail {
/// Extents compare equal if either is dyn (a dyn extent is checked at run time).
constexpr bool extent_compatible(std::size_t a, std::size_t b) { return a == dyn || b == dyn || a == b; }
constexpr bool shape_compatible(const shape& a, const shape& b) {
  if (a.rank != b.rank) return false;
  for (std::size_t i = 0; i < a.rank; ++i)
    if (!extent_compatible(a.d[i], b.d[i])) return false;
  return true;
}
/// Output extent of a sliding window (conv / pool), or 0 if the window does not fit.
constexpr std::size_t window_out(std::size_t in, std::size_t k, std::size_t stride, std::size_t pad_lo,
                                 std::size_t pad_hi, std::size_t dilation = 1, bool ceil_mode = false) {
  if (in == dyn || k == dyn || stride == dyn) return dyn;
  // PyTorch's pooling_output_shape: out = floor((padded - span + (ceil ? stride - 1 : 0)) / stride) + 1,
  // then, in ceil mode, drop a last window that starts in the right/bottom padding.
  if (stride == 0) return 0;
  const long long span = (long long)(dilation * (k - 1) + 1);
  long long num = (long long)(in + pad_lo + pad_hi) - span;
  if (ceil_mode) num += (long long)stride - 1;
  if (num < 0) return 0;
  std::size_t n = std::size_t(num) / stride + 1;
  if (ceil_mode && (n - 1) * stride >= in + pad_lo) --n;
  return n;
}
}  // namespace detail

/// Throws shape_error if `got` does not match `expected`, naming `where`.
inline void require_shape(const shape& got, const shape& expected, const std::string& where) {
  if (!detail::shape_compatible(got, expected))
    throw shape_error(detail::concat(where, ": expected shape ", expected.str(), ", got ", got.str()));
}

}  // namespace nnlens
