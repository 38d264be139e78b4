// nnlens/layers/tanh.hpp -- Tanh: y = tanh(x); any shape.
//
// ensures:  std::tanh saturates to ±1 for large |x| (x = ±1e4 gives ±1, no NaN); backward:
//           dy · (1 - y²), with y recomputed from x (PyTorch's tanh_backward).
// The op is monotone and smooth: no pwl_rule (ExactLine refuses it, naming it) and no freestanding
// form (io/codegen_freestanding.hpp: firmware links no libm).
#pragma once

#include <cmath>
#include <vector>

#include "nnlens/core/codegen_form.hpp"
#include "nnlens/core/onnx_form.hpp"
#include "nnlens/core/properties.hpp"
#include "nnlens/core/traits.hpp"

namespace nnlens {

struct Tanh {};

template <>
struct layer_traits<Tanh> : layer_defaults {
  static constexpr std::string_view name = "Tanh";
  /// The element-wise map (ElementwiseMap): tanh(x); d/dx = 1 - tanh²(x).
  struct scalar_map_fn {
    template <class T>
    NNLENS_HD T operator()(T x) const {
      using std::tanh;
      return tanh(x);
    }
    template <class T>
    NNLENS_HD T grad(T x, T dy) const {
      using std::tanh;
      const T t = tanh(x);
      return dy * (T(1) - t * t);
    }
  };
  static constexpr scalar_map_fn scalar_map(const Tanh&) { return {}; }
  static constexpr shape_check infer(shape in) { return {in, nullptr}; }
  static shape output_shape(const Tanh&, shape in) { return in; }

  template <class T>
  static void forward(const Tanh& l, const forward_args<T>& a) {
    const auto f = scalar_map(l);
    const std::size_t n = a.batch * a.in.size();
    for (std::size_t i = 0; i < n; ++i) a.y[i] = f(a.x[i]);
  }
  template <class T>
  static void backward(const Tanh& l, const backward_args<T>& a, Tanh*) {
    if (!a.dx) return;
    const auto f = scalar_map(l);
    const std::size_t n = a.batch * a.in.size();
    for (std::size_t i = 0; i < n; ++i) a.dx[i] = f.grad(a.x[i], a.dy[i]);
  }
};

/// NNSlicer: monotone increasing, no gate: (x_n, -, Δx_n), as LeakyReLU ("monotone activations
/// other than ReLU pass Δx without a gate", docs/specs/nnslicer.md#25-local-items-per-op-type).
template <>
struct sign_rule<Tanh> : sign_passthrough_rule {};

/// LRP: relevance passes through unchanged, as Captum's LRP does for nn.Tanh
/// (SUPPORTED_NON_LINEAR_LAYERS = ReLU, Dropout, Tanh) and as
/// docs/specs/deepimportance.md#22-neuron-relevance-by-lrp reads every activation.
template <>
struct relevance_rule<Tanh> : relevance_passthrough_rule {};

// ---- io forms: codegen spelling, ONNX Tanh both ways
template <>
struct codegen_rule<Tanh> : detail::codegen_plain<Tanh> {};
template <>
struct onnx_export_rule<Tanh> : detail::onnx_unary_rule<Tanh> {
  static constexpr std::string_view op = "Tanh";
};
template <>
struct onnx_import_rule<Tanh> {
  static constexpr std::string_view ops[] = {"Tanh"};
  template <class Emit>
  static void build(onnx_node_view& n, Emit&& emit) {
    n.require_unpadded();
    emit(Tanh{});
  }
};

}  // namespace nnlens
