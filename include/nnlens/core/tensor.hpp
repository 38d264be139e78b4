// nnlens/core/tensor.hpp -- the only place nnlens includes xtensor.
//
// Weights live in xt::xtensor<T, N> (not xtensor_fixed: see docs/design/style.md#xtensor-024-and-xsimd-8).  Kernels take raw
// pointers; the public API takes and returns xtensor containers (never lazy expressions).
#pragma once

#if !__has_include(<xtensor/xtensor.hpp>)
#error "nnlens needs xtensor 0.24 (Debian: apt-get install libxtensor-dev libxsimd-dev xtl-dev)"
#endif

#include <xtensor/xadapt.hpp>
#include <xtensor/xarray.hpp>
#include <xtensor/xtensor.hpp>
#include <xtensor/xtensor_config.hpp>

static_assert(XTENSOR_VERSION_MAJOR == 0 && XTENSOR_VERSION_MINOR >= 24,
              "nnlens is written against xtensor 0.24.x (flat headers); later majors moved them");

#include <cmath>
#include <cstddef>
#include <span>
#include <type_traits>

namespace nnlens {

template <class T, std::size_t N>
using tensor = xt::xtensor<T, N>;
template <class T>
using array = xt::xarray<T>;

namespace detail {

/// The samples of x as one contiguous row-major buffer of T (a view when possible, else a copy).
template <class T, class E>
class contiguous_input {
 public:
  explicit contiguous_input(const E& x) {
    using V = std::remove_cv_t<std::remove_reference_t<decltype(*x.data())>>;
    if constexpr (std::is_same_v<V, T> && E::static_layout == xt::layout_type::row_major) {
      ptr_ = x.data();
    } else {
      copy_ = x;
      ptr_ = copy_.data();
    }
  }
  const T* data() const { return ptr_; }

 private:
  const T* ptr_ = nullptr;
  xt::xarray<T> copy_;
};

/// A flat mutable view of a container's elements.
template <class C>
auto flat(C& c) {
  using T = std::remove_reference_t<decltype(*c.data())>;
  return std::span<T>(c.data(), c.size());
}

/// The same tensor with elements static_cast to U (xt::cast needs arithmetic types; this works
/// for any U, e.g. boost::multiprecision rationals).
template <class U, class T, std::size_t N>
tensor<U, N> cast_tensor(const tensor<T, N>& t) {
  tensor<U, N> r = tensor<U, N>::from_shape(t.shape());
  for (std::size_t i = 0; i < t.size(); ++i) r.data()[i] = static_cast<U>(t.data()[i]);
  return r;
}
}  // namespace detail

}  // namespace nnlens
