// nnlens/layers/relu.hpp -- ReLU: y = max(x, 0), any shape.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "nnlens/core/codegen_form.hpp"
#include "nnlens/core/properties.hpp"
#include "nnlens/core/traits.hpp"
#include "nnlens/core/onnx_form.hpp"

namespace nnlens {

struct ReLU {};

template <>
struct layer_traits<ReLU> : elementwise_map_defaults<ReLU> {
  static constexpr std::string_view name = "ReLU";
  static constexpr std::string_view onnx_op = "Relu";  // one ONNX node, both ways (core/onnx_form.hpp)
  // properties (core/properties.hpp)
  static constexpr bool int8_fuses_into_linear = true;
  /// int8: max(q, z), the zero point being the code of 0 (the output keeps the input's scale).
  static void int8_forward(const ReLU&, shape in, shape, std::size_t batch, const std::int8_t* x, std::int8_t* y,
                           int zero_point) {
    const std::int8_t z = std::int8_t(zero_point);
    const std::size_t n = batch * in.size();
    for (std::size_t i = 0; i < n; ++i) y[i] = x[i] > z ? x[i] : z;
  }
  /// The element-wise map (ElementwiseMap): max(x, 0); the derivative at 0 is taken as 0
  /// (PyTorch's convention).
  struct scalar_map_fn {
    template <class T>
    NNLENS_HD T operator()(T x) const { return x > T(0) ? x : T(0); }
    template <class T>
    NNLENS_HD T grad(T x, T dy) const { return x > T(0) ? dy : T(0); }
  };
  static constexpr scalar_map_fn scalar_map(const ReLU&) { return {}; }
};

/// ExactLine: one knot at 0; ReLU is max(x, 0), so it fuses with an adjacent max pool.
template <>
struct pwl_rule<ReLU> {
  static constexpr std::array<double, 1> knots(const ReLU&) { return {0.0}; }
  static constexpr std::optional<double> max_floor(const ReLU&) { return 0.0; }
};

/// NNSlicer: a gate; item (x_n, -, Δx_n) when the neuron is active (its value, the channel mean at
/// channel granularity, is > 0), nothing otherwise.
template <>
struct sign_rule<ReLU> {
  static void items(const ReLU&, const sign_ctx& c, std::size_t n, std::vector<sign_item>& out) {
    if (c.yn[n] > 0) out.push_back({n, sign_item::none, c.dx[n]});
  }
};

/// LRP: relevance passes through unchanged (docs/specs/deepimportance.md#22-neuron-relevance-by-lrp).
template <>
struct relevance_rule<ReLU> : relevance_passthrough_rule {};


// ---- io forms: codegen spelling, ONNX Relu both ways
template <>
struct codegen_rule<ReLU> : detail::codegen_plain<ReLU> {};

}  // namespace nnlens
