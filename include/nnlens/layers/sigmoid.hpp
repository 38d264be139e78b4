// nnlens/layers/sigmoid.hpp -- Sigmoid: y = 1 / (1 + e^-x); any shape.
//
// ensures:  numerically stable for every finite x: e^-|x| is the only exponential taken, so
//           x = ±1e4 gives 1 and 0 (no overflow, no NaN); y is in [0, 1].  backward:
//           dy · y (1 - y), with y recomputed from x (no cache).  The exponential is
//           kernels/elementary.hpp's (<= 1 ulp, no libm call: the loop vectorises, and the thrust
//           backend's device code rounds alike).
// The op is monotone and smooth: it has no pwl_rule (ExactLine refuses it, naming it) and no
// freestanding form (io/codegen_freestanding.hpp runs the piecewise-linear maps only).
#pragma once

#include <cmath>
#include <vector>

#include "nnlens/core/codegen_form.hpp"
#include "nnlens/core/onnx_form.hpp"
#include "nnlens/core/properties.hpp"
#include "nnlens/core/traits.hpp"
#include "nnlens/kernels/elementary.hpp"

namespace nnlens {

struct Sigmoid {};

namespace detail {
/// The logistic function, stable for large |x| (host and device): e = e^-|x| in (0, 1], then
/// 1 / (1 + e) for x >= 0 and e / (1 + e) for x < 0, as one division (no branch).
template <class T>
NNLENS_HD inline T stable_sigmoid(T x) {
  const T e = kernels::exp(x >= T(0) ? -x : x);
  return (x >= T(0) ? T(1) : e) / (T(1) + e);
}
}  // namespace detail

template <>
struct layer_traits<Sigmoid> : elementwise_map_defaults<Sigmoid> {
  static constexpr std::string_view name = "Sigmoid";
  static constexpr std::string_view onnx_op = "Sigmoid";  // one ONNX node, both ways (core/onnx_form.hpp)
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
};

/// NNSlicer: monotone increasing, no gate: (x_n, -, Δx_n), as LeakyReLU ("monotone activations
/// other than ReLU pass Δx without a gate", docs/specs/nnslicer.md#25-local-items-per-op-type).
///
/// LRP: relevance passes through unchanged ("activations (ReLU, tanh, sigmoid, LeakyReLU):
/// identity", docs/specs/deepimportance.md#22-neuron-relevance-by-lrp).  Captum's LRP passes ReLU,
/// Tanh and Dropout through (SUPPORTED_NON_LINEAR_LAYERS) and refuses a Sigmoid; nnlens extends
/// the same identity to it.
NNLENS_ELEMENTWISE_RULES(Sigmoid, sign_passthrough_rule, relevance_passthrough_rule);

// ---- io forms: codegen spelling, ONNX Sigmoid both ways

}  // namespace nnlens
