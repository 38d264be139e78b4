// nnlens/layers/sigmoid.hpp -- Sigmoid: y = 1 / (1 + e^-x); any shape.
//
// ensures:  numerically stable for every finite x: e^-|x| is the only exponential taken, so
//           x = ±1e4 gives 1 and 0 (no overflow, no NaN); y is in [0, 1].  backward:
//           dy · y (1 - y), with y recomputed from x (no cache).
// The op is monotone and smooth: it has no pwl_rule (ExactLine refuses it, naming it) and no
// freestanding form (io/codegen_freestanding.hpp: firmware links no libm).
#pragma once

#include <cmath>
#include <vector>

#include "nnlens/core/codegen_form.hpp"
#include "nnlens/core/onnx_form.hpp"
#include "nnlens/core/properties.hpp"
#include "nnlens/core/traits.hpp"

namespace nnlens {

struct Sigmoid {};

namespace detail {
/// The logistic function, stable for large |x| (host and device): e = e^-|x| in (0, 1], then
/// 1 / (1 + e) for x >= 0 and e / (1 + e) for x < 0.
template <class T>
NNLENS_HD inline T stable_sigmoid(T x) {
  using std::exp;
  const T e = exp(x >= T(0) ? -x : x);
  return x >= T(0) ? T(1) / (T(1) + e) : e / (T(1) + e);
}
}  // namespace detail

template <>
struct layer_traits<Sigmoid> : layer_defaults {
  static constexpr std::string_view name = "Sigmoid";
  /// The element-wise map (ElementwiseMap): σ(x); d/dx = σ(x) (1 - σ(x)) (PyTorch's sigmoid_backward).
  struct scalar_map_fn {
    template <class T>
    NNLENS_HD T operator()(T x) const { return detail::stable_sigmoid(x); }
    template <class T>
    NNLENS_HD T grad(T x, T dy) const {
      const T s = detail::stable_sigmoid(x);
      return dy * (s * (T(1) - s));
    }
  };
  static constexpr scalar_map_fn scalar_map(const Sigmoid&) { return {}; }
  static constexpr shape_check infer(shape in) { return {in, nullptr}; }
  static shape output_shape(const Sigmoid&, shape in) { return in; }

  template <class T>
  static void forward(const Sigmoid& l, const forward_args<T>& a) {
    const auto f = scalar_map(l);
    const std::size_t n = a.batch * a.in.size();
    for (std::size_t i = 0; i < n; ++i) a.y[i] = f(a.x[i]);
  }
  template <class T>
  static void backward(const Sigmoid& l, const backward_args<T>& a, Sigmoid*) {
    if (!a.dx) return;
    const auto f = scalar_map(l);
    const std::size_t n = a.batch * a.in.size();
    for (std::size_t i = 0; i < n; ++i) a.dx[i] = f.grad(a.x[i], a.dy[i]);
  }
};

/// NNSlicer: monotone increasing, no gate: (x_n, -, Δx_n), as LeakyReLU ("monotone activations
/// other than ReLU pass Δx without a gate", docs/specs/nnslicer.md#25-local-items-per-op-type).
template <>
struct sign_rule<Sigmoid> : sign_passthrough_rule {};

/// LRP: relevance passes through unchanged ("activations (ReLU, tanh, sigmoid, LeakyReLU):
/// identity", docs/specs/deepimportance.md#22-neuron-relevance-by-lrp).  Captum's LRP passes ReLU,
/// Tanh and Dropout through (SUPPORTED_NON_LINEAR_LAYERS) and refuses a Sigmoid; nnlens extends
/// the same identity to it.
template <>
struct relevance_rule<Sigmoid> : relevance_passthrough_rule {};

// ---- io forms: codegen spelling, ONNX Sigmoid both ways
template <>
struct codegen_rule<Sigmoid> : detail::codegen_plain<Sigmoid> {};
template <>
struct onnx_export_rule<Sigmoid> : detail::onnx_unary_rule<Sigmoid> {
  static constexpr std::string_view op = "Sigmoid";
};
template <>
struct onnx_import_rule<Sigmoid> {
  static constexpr std::string_view ops[] = {"Sigmoid"};
  template <class Emit>
  static void build(onnx_node_view& n, Emit&& emit) {
    n.require_unpadded();
    emit(Sigmoid{});
  }
};

}  // namespace nnlens
