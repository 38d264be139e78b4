// nnlens/layers/leaky_relu.hpp -- LeakyReLU: y = x for x > 0, alpha * x otherwise; any shape.
//
// requires: alpha finite (output_shape throws value_error otherwise).  Any slope is accepted,
//           including alpha > 1 or alpha < 0 (then the layer is not monotone).
// ensures:  forward is element-wise; backward follows PyTorch's leaky_relu_backward: the
//           derivative is 1 for x > 0 and alpha for x <= 0 (so alpha at the kink x = 0).
// alpha is a run-time data member (default 0.01, PyTorch's negative_slope); it is stored as double
// and converted to the network's scalar in the kernels, so the layer has no scalar type and is its
// own dynamic form.
#pragma once

#include <cmath>

#include "nnlens/core/error.hpp"
#include <span>

#include "nnlens/core/codegen_form.hpp"
#include "nnlens/core/properties.hpp"
#include "nnlens/core/traits.hpp"
#include "nnlens/core/onnx_form.hpp"
#include "nnlens/core/reflect.hpp"

namespace nnlens {

struct LeakyReLU {
  double alpha = 0.01;
  NNLENS_FIELDS(LeakyReLU, alpha)
};

template <>
struct layer_traits<LeakyReLU> : elementwise_map_defaults<LeakyReLU> {
  static constexpr std::string_view name = "LeakyReLU";
  /// The element-wise map (ElementwiseMap): x for x > 0, alpha x otherwise (alpha converted to T);
  /// d/dx = 1 for x > 0, alpha for x <= 0 (PyTorch: the kink x = 0 takes the slope alpha).
  struct scalar_map_fn {
    double alpha;
    // alpha converted before the test: a conversion inside the conditional arm is not hoisted out
    // of a loop (it could raise a floating-point exception the branch would not), which kept the
    // forward loop scalar and branchy (9 ns an element against 0.1; docs/benchmarks.md)
    template <class T>
    NNLENS_HD T operator()(T x) const {
      const T a = T(alpha);
      return x > T(0) ? x : a * x;
    }
    template <class T>
    NNLENS_HD T grad(T x, T dy) const {
      const T a = T(alpha);
      return x > T(0) ? dy : a * dy;
    }
  };
  static constexpr scalar_map_fn scalar_map(const LeakyReLU& l) { return {l.alpha}; }
  static shape output_shape(const LeakyReLU& l, shape in) {
    if (!std::isfinite(l.alpha)) throw value_error(detail::concat("LeakyReLU: alpha is ", l.alpha, ", expected a finite slope"));
    return in;
  }

};

/// ExactLine: one knot at 0 (none when alpha == 1: the identity).
template <>
struct pwl_rule<LeakyReLU> {
  static std::span<const double> knots(const LeakyReLU& l) {
    static constexpr double zero[1] = {0.0};
    return {zero, l.alpha == 1.0 ? 0u : 1u};
  }
};

/// NNSlicer: monotone, no gate: (x_n, -, Δx_n).
///
/// LRP: relevance passes through unchanged (docs/specs/deepimportance.md#22-neuron-relevance-by-lrp).

NNLENS_ELEMENTWISE_RULES(LeakyReLU, sign_passthrough_rule, relevance_passthrough_rule);

// ---- io forms: codegen spelling (alpha set in make_NAME), ONNX LeakyRelu both ways
template <>
struct onnx_export_rule<LeakyReLU> {
  static std::string emit(const LeakyReLU& l, onnx_sink& s, const std::string& x, shape, shape) {
    return s.node("LeakyRelu", {x}, {{"alpha", static_cast<float>(l.alpha)}});
  }
};
template <>
struct onnx_import_rule<LeakyReLU> {
  static constexpr std::string_view ops[] = {"LeakyRelu"};
  template <class Emit>
  static void build(onnx_node_view& n, Emit&& emit) {
    n.require_unpadded();
    emit(LeakyReLU{double(float(n.attr_f("alpha", 0.01)))});
  }
};

}  // namespace nnlens
