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
struct layer_traits<ReLU> : layer_defaults {
  static constexpr std::string_view name = "ReLU";
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
  static constexpr shape_check infer(shape in) { return {in, nullptr}; }
  static shape output_shape(const ReLU&, shape in) { return in; }

  template <class T>
  static void forward(const ReLU& l, const forward_args<T>& a) {
    const auto f = scalar_map(l);
    const std::size_t n = a.batch * a.in.size();
    for (std::size_t i = 0; i < n; ++i) a.y[i] = f(a.x[i]);
  }
  template <class T>
  static void backward(const ReLU& l, const backward_args<T>& a, ReLU*) {
    if (!a.dx) return;
    const auto f = scalar_map(l);
    const std::size_t n = a.batch * a.in.size();
    for (std::size_t i = 0; i < n; ++i) a.dx[i] = f.grad(a.x[i], a.dy[i]);
  }
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
template <>
struct onnx_export_rule<ReLU> : detail::onnx_unary_rule<ReLU> {
  static constexpr std::string_view op = "Relu";
};
template <>
struct onnx_import_rule<ReLU> {
  static constexpr std::string_view ops[] = {"Relu"};
  template <class Emit>
  static void build(onnx_node_view& n, Emit&& emit) {
    n.require_unpadded();
    emit(ReLU{});
  }
};

}  // namespace nnlens
