// nnlens/layers/input.hpp -- Input<Dims...>: the per-sample input shape of a Sequential.
//
// Input<784> is a feature vector; Input<C, H, W> an image in channel-major (NCHW) layout.  It is
// not a layer: Sequential<Input<...>, Ls...> strips it and keeps the shape.
#pragma once

#include <cstddef>

#include "nnlens/core/shape.hpp"

namespace nnlens {

template <std::size_t... D>
struct Input {
  static_assert(sizeof...(D) == 1 || sizeof...(D) == 3,
                "Input<N> (features) or Input<C, H, W> (an image, channel-major)");
  static_assert(((D > 0) && ...), "Input extents must be positive");
  static constexpr shape value = shape(D...);
};

template <class T>
inline constexpr bool is_input_v = false;
template <std::size_t... D>
inline constexpr bool is_input_v<Input<D...>> = true;

}  // namespace nnlens
