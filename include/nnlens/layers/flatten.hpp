// nnlens/layers/flatten.hpp -- Flatten: [C,H,W] -> [C*H*W] in channel-major (NCHW) order.
#pragma once

#include <algorithm>

#include "nnlens/core/traits.hpp"

namespace nnlens {

struct Flatten {};

template <>
struct layer_traits<Flatten> : layer_defaults {
  static constexpr std::string_view name = "Flatten";
  static constexpr shape_check infer(shape in) { return {shape(in.size()), nullptr}; }
  static shape output_shape(const Flatten&, shape in) { return shape(in.size()); }

  template <class T>
  static void forward(const Flatten&, const forward_args<T>& a) {
    std::copy_n(a.x, a.batch * a.in.size(), a.y);
  }
  template <class T>
  static void backward(const Flatten&, const backward_args<T>& a, Flatten*) {
    if (a.dx) std::copy_n(a.dy, a.batch * a.in.size(), a.dx);
  }
};

/// ExactLine: affine, never splits a segment.
template <>
struct pwl_rule<Flatten> : pwl_affine_rule {};

}  // namespace nnlens
