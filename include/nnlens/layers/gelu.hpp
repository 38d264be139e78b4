// nnlens/layers/gelu.hpp -- GELU: y = x · Φ(x), exactly or by PyTorch's tanh approximation; any shape.
//
//   exact (tanh_approximation = false, PyTorch approximate='none'):
//       y = x/2 · (1 + erf(x / √2))
//   tanh  (tanh_approximation = true,  PyTorch approximate='tanh'):
//       y = x/2 · (1 + tanh(√(2/π) (x + 0.044715 x³)))
// The form is a run-time data member (a reflected field: codegen, `nnlens info` and network_cast
// read it; ONNX carries it as `approximate`).  backward follows PyTorch's gelu_backward for each form:
//   exact: dy · (Φ(x) + x φ(x)),  φ(x) = e^{-x²/2} / √(2π)
//   tanh:  dy · (½ (1 + t) + ½ x (1 - t²) √(2/π) (1 + 3·0.044715 x²)),  t = tanh(inner)
// erf, tanh and exp are kernels/elementary.hpp's (no libm call: the loop vectorises, and the thrust
// backend's device code rounds alike).
// ensures:  finite for x = ±1e4 in float and double (erf and tanh saturate; e^{-x²/2} underflows to
//           0; the tanh form's derivative drops the (1 - t²) term where it is 0, so x³ or x² going
//           to infinity never makes 0 · inf).
// The op is smooth and not monotone (minimum ≈ -0.17 at x ≈ -0.75): no pwl_rule (ExactLine refuses
// it, naming it), no freestanding form (io/codegen_freestanding.hpp runs the piecewise-linear
// maps only), NNSlicer by the local slope.
// ONNX: Gelu (opset 20, attribute approximate "none" / "tanh") both ways; the export raises the
// model's opset to 20.  The Erf pattern torch writes at lower opsets (Div, Erf, Add, Mul, Mul) is
// not read back as one op.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "nnlens/core/codegen_form.hpp"
#include "nnlens/core/onnx_form.hpp"
#include "nnlens/core/properties.hpp"
#include "nnlens/core/reflect.hpp"
#include "nnlens/core/traits.hpp"
#include "nnlens/kernels/elementary.hpp"

namespace nnlens {

struct GELU {
  bool tanh_approximation = false;  // PyTorch's approximate: false = 'none', true = 'tanh'
  NNLENS_FIELDS(GELU, tanh_approximation)
};

template <>
struct layer_traits<GELU> : elementwise_map_defaults<GELU> {
  static constexpr std::string_view name = "GELU";
  /// The element-wise map (ElementwiseMap) of either form (header comment), in T.
  struct scalar_map_fn {
    bool tanh_form;
    static constexpr double sqrt1_2 = 0.70710678118654752440;     // 1/√2
    static constexpr double sqrt2_pi = 0.79788456080286535588;    // √(2/π)
    static constexpr double rsqrt2pi = 0.39894228040143267794;    // 1/√(2π)
    static constexpr double kappa = 0.044715;
    template <class T>
    NNLENS_HD T operator()(T x) const { return tanh_form ? tanh_value(x) : erf_value(x); }
    template <class T>
    NNLENS_HD T grad(T x, T dy) const { return tanh_form ? tanh_grad(x, dy) : erf_grad(x, dy); }
    // each form alone, without a branch: what the host loops below run
    template <class T>
    static NNLENS_HD T erf_value(T x) { return x * T(0.5) * (T(1) + kernels::erf(x * T(sqrt1_2))); }
    template <class T>
    static NNLENS_HD T tanh_value(T x) {
      const T inner = T(sqrt2_pi) * (x + T(kappa) * x * x * x);
      return T(0.5) * x * (T(1) + kernels::tanh(inner));
    }
    template <class T>
    static NNLENS_HD T erf_grad(T x, T dy) {
      const T cdf = T(0.5) * (T(1) + kernels::erf(x * T(sqrt1_2)));
      const T pdf = kernels::exp(T(-0.5) * x * x) * T(rsqrt2pi);
      return dy * (cdf + x * pdf);
    }
    template <class T>
    static NNLENS_HD T tanh_grad(T x, T dy) {
      const T x2 = x * x;
      const T inner = T(sqrt2_pi) * (x + T(kappa) * x2 * x);
      const T t = kernels::tanh(inner);
      const T left_d = T(0.5) * (T(1) + t);
      const T td = T(1) - t * t;
      const T right_d = T(0.5) * x * td * (T(sqrt2_pi) * (T(1) + T(3 * kappa) * x2));
      return dy * (td == T(0) ? left_d : left_d + right_d);  // saturated: no 0 · inf
    }
  };
  static constexpr scalar_map_fn scalar_map(const GELU& l) { return {l.tanh_approximation}; }
  /// The host loops, one per form (the form chosen once, so each loop vectorises); the same
  /// functions as scalar_map's, so the thrust backend's results are these bit for bit.
  template <class T>
  static void forward(const GELU& l, const forward_args<T>& a) {
    const std::size_t n = a.batch * a.in.size();
    if (l.tanh_approximation)
      for (std::size_t i = 0; i < n; ++i) a.y[i] = scalar_map_fn::tanh_value(a.x[i]);
    else
      for (std::size_t i = 0; i < n; ++i) a.y[i] = scalar_map_fn::erf_value(a.x[i]);
  }
  template <class T>
  static void backward(const GELU& l, const backward_args<T>& a, GELU*) {
    if (!a.dx) return;
    const std::size_t n = a.batch * a.in.size();
    if (l.tanh_approximation)
      for (std::size_t i = 0; i < n; ++i) a.dx[i] = scalar_map_fn::tanh_grad(a.x[i], a.dy[i]);
    else
      for (std::size_t i = 0; i < n; ++i) a.dx[i] = scalar_map_fn::erf_grad(a.x[i], a.dy[i]);
  }
};

/// NNSlicer: not monotone, so the sign of a contribution is the sign of the local slope times Δx:
/// (x_n, -, f'(x_n)·Δx_n), sign_slope_rule (core/traits.hpp).  Our reading of
/// docs/specs/nnslicer.md#25-local-items-per-op-type, whose table covers only monotone
/// activations: to first order Δy_n ≈ f'(x_n) Δx_n, so a neuron
/// below x ≈ -0.75 (its falling branch) reverses the vote.
template <>
struct sign_rule<GELU> : sign_slope_rule {};

/// LRP: relevance passes through unchanged, the rule of every element-wise activation
/// (docs/specs/deepimportance.md#22-neuron-relevance-by-lrp; Captum's LRP passes ReLU and Tanh
/// through the same way and has no rule of its own for GELU).
template <>
struct relevance_rule<GELU> : relevance_passthrough_rule {};

// ---- io forms: codegen spelling (the form as true/false), ONNX Gelu (opset 20) both ways
template <>
struct codegen_rule<GELU> {
  static std::string type(const GELU&, codegen_context&) { return "nnlens::GELU"; }
  static void fill(const GELU& l, codegen_context& c, const std::string& lv) {
    c.fills += "  " + lv + ".tanh_approximation = " + (l.tanh_approximation ? "true" : "false") + ";\n";
  }
};
template <>
struct onnx_export_rule<GELU> {
  static std::string emit(const GELU& l, onnx_sink& s, const std::string& x, shape, shape) {
    s.require_opset(20);
    return s.node("Gelu", {x}, {{"approximate", std::string(l.tanh_approximation ? "tanh" : "none")}});
  }
};
template <>
struct onnx_import_rule<GELU> {
  static constexpr std::string_view ops[] = {"Gelu"};
  template <class Emit>
  static void build(onnx_node_view& n, Emit&& emit) {
    n.require_unpadded();
    const std::string a = n.attr_s("approximate", "none");
    if (a != "none" && a != "tanh") n.fail("approximate '" + a + "' is not one of 'none', 'tanh'");
    emit(GELU{a == "tanh"});
  }
};

}  // namespace nnlens
