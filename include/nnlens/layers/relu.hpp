// nnlens/layers/relu.hpp -- ReLU: y = max(x, 0), any shape.
#pragma once

#include "nnlens/core/traits.hpp"

namespace nnlens {

struct ReLU {};

template <>
struct layer_traits<ReLU> : layer_defaults {
  static constexpr std::string_view name = "ReLU";
  static constexpr shape_check infer(shape in) { return {in, nullptr}; }
  static shape output_shape(const ReLU&, shape in) { return in; }

  template <class T>
  static void forward(const ReLU&, const forward_args<T>& a) {
    const std::size_t n = a.batch * a.in.size();
    for (std::size_t i = 0; i < n; ++i) a.y[i] = a.x[i] > T(0) ? a.x[i] : T(0);
  }
  /// The derivative at 0 is taken as 0 (PyTorch's convention).
  template <class T>
  static void backward(const ReLU&, const backward_args<T>& a, ReLU*) {
    if (!a.dx) return;
    const std::size_t n = a.batch * a.in.size();
    for (std::size_t i = 0; i < n; ++i) a.dx[i] = a.x[i] > T(0) ? a.dy[i] : T(0);
  }
};

}  // namespace nnlens
