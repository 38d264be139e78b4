// nnlens/layers/tanh.hpp -- Tanh: y = tanh(x); any shape.
//
// ensures:  tanh is kernels/elementary.hpp's (<= 3 ulp, no libm call: the loop vectorises and the
//           thrust backend's device code rounds alike); it saturates to ±1 for large |x| (x = ±1e4
//           gives ±1, no NaN); backward: dy · (1 - y²), with y recomputed from x (PyTorch's
//           tanh_backward).
// The op is monotone and smooth: no pwl_rule (ExactLine refuses it, naming it) and no freestanding
// form (io/codegen_freestanding.hpp runs the piecewise-linear maps only).
#pragma once

#include <cmath>
#include <vector>

#include "nnlens/core/codegen_form.hpp"
#include "nnlens/core/onnx_form.hpp"
#include "nnlens/core/properties.hpp"
#include "nnlens/core/traits.hpp"
#include "nnlens/kernels/elementary.hpp"

namespace nnlens {

struct Tanh {};

template <>
struct layer_traits<Tanh> : elementwise_map_defaults<Tanh> {
  static constexpr std::string_view name = "Tanh";
  static constexpr std::string_view onnx_op = "Tanh";  // one ONNX node, both ways (core/onnx_form.hpp)
  /// The element-wise map (ElementwiseMap): tanh(x); d/dx = 1 - tanh²(x).
  struct scalar_map_fn {
    template <class T>
    NNLENS_HD T operator()(T x) const { return kernels::tanh(x); }
    template <class T>
    NNLENS_HD T grad(T x, T dy) const {
      const T t = kernels::tanh(x);
      return dy * (T(1) - t * t);
    }
  };
  static constexpr scalar_map_fn scalar_map(const Tanh&) { return {}; }
};

/// NNSlicer: monotone increasing, no gate: (x_n, -, Δx_n), as LeakyReLU ("monotone activations
/// other than ReLU pass Δx without a gate", docs/specs/nnslicer.md#25-local-items-per-op-type).
///
/// LRP: relevance passes through unchanged, as Captum's LRP does for nn.Tanh
/// (SUPPORTED_NON_LINEAR_LAYERS = ReLU, Dropout, Tanh) and as
/// docs/specs/deepimportance.md#22-neuron-relevance-by-lrp reads every activation.
NNLENS_ELEMENTWISE_RULES(Tanh, sign_passthrough_rule, relevance_passthrough_rule);

// ---- io forms: codegen spelling, ONNX Tanh both ways

}  // namespace nnlens
