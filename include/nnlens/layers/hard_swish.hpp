// nnlens/layers/hard_swish.hpp -- HardSwish: y = x · relu6(x + 3) / 6 (x · HardSigmoid(x) with
// alpha = 1/6, beta = 1/2); any shape.
//
// ensures:  forward is PyTorch's hardswish expression, x · min(max(x + 3, 0), 6) / 6; backward
//           follows PyTorch's hardswish_backward: d/dx = 0 for x < -3, x / 3 + 1/2 for
//           -3 <= x <= 3, 1 for x > 3.  Finite for every finite x.
// The op is piecewise QUADRATIC (not linear) and not monotone (minimum -3/8 at x = -3/2): no
// pwl_rule (ExactLine refuses it, naming it), no freestanding form (io/codegen_freestanding.hpp
// runs only piecewise-linear maps), and NNSlicer uses the local slope (sign_slope_rule).
#pragma once

#include <variant>
#include <vector>

#include "nnlens/core/codegen_form.hpp"
#include "nnlens/core/onnx_form.hpp"
#include "nnlens/core/properties.hpp"
#include "nnlens/core/traits.hpp"
#include "nnlens/layers/hard_sigmoid.hpp"

namespace nnlens {

struct HardSwish {};

template <>
struct layer_traits<HardSwish> : elementwise_map_defaults<HardSwish> {
  static constexpr std::string_view name = "HardSwish";
  /// The element-wise map (ElementwiseMap): x · clamp(x + 3, 0, 6) / 6; its derivative as in the
  /// header comment (PyTorch's conventions at x = ±3).
  struct scalar_map_fn {
    template <class T>
    NNLENS_HD T operator()(T x) const {
      const T h = x + T(3);
      return x * (h < T(0) ? T(0) : (h > T(6) ? T(6) : h)) / T(6);
    }
    template <class T>
    NNLENS_HD T grad(T x, T dy) const {
      if (x < T(-3)) return T(0);
      if (x <= T(3)) return dy * (x / T(3) + T(0.5));
      return dy;
    }
  };
  static constexpr scalar_map_fn scalar_map(const HardSwish&) { return {}; }
};

/// NNSlicer: not monotone, so the sign of a contribution is the sign of the local slope times Δx:
/// (x_n, -, f'(x_n)·Δx_n), sign_slope_rule (core/traits.hpp).  Our reading of
/// docs/specs/nnslicer.md#25-local-items-per-op-type, whose table covers only monotone
/// activations: to first order Δy_n ≈ f'(x_n) Δx_n, so a neuron on the falling branch
/// (-3 < x < -3/2) reverses the vote, and one on the flat piece (x < -3) casts none.
///
/// LRP: relevance passes through unchanged, the rule of every element-wise activation
/// (docs/specs/deepimportance.md#22-neuron-relevance-by-lrp; Captum's LRP passes ReLU and Tanh
/// through the same way and has no rule of its own for a non-monotone activation).
NNLENS_ELEMENTWISE_RULES(HardSwish, sign_slope_rule, relevance_passthrough_rule);

// ---- io forms: codegen spelling, ONNX HardSwish (opset 14) both ways
template <>
struct onnx_export_rule<HardSwish> {
  static std::string emit(const HardSwish&, onnx_sink& s, const std::string& x, shape, shape) {
    s.require_opset(14);
    return s.node("HardSwish", {x}, {});
  }
};
template <>
struct onnx_import_rule<HardSwish> : detail::onnx_plain_import<HardSwish> {
  static constexpr std::string_view ops[] = {"HardSwish"};
};
/// Mul(x, HardSigmoid(x)) with PyTorch's alpha = 1/6, beta = 1/2 (either order): torch.onnx's
/// hardswish below opset 14.  Any other product is declined (layers/product.hpp reads it).
template <>
struct onnx_join_rule<HardSwish> {
  static constexpr std::string_view op = "Mul";
  template <class Branch>
  static bool accepts(const std::vector<Branch>& b) {
    auto hs = [](const Branch& br) {
      if (br.layers.size() != 1 || !std::holds_alternative<HardSigmoid>(br.layers[0])) return false;
      const HardSigmoid& h = std::get<HardSigmoid>(br.layers[0]);
      return h.alpha == 1.0 / 6.0 && h.beta == 0.5;  // the import reads float(1/6) as 1/6
    };
    return b.size() == 2 && ((b[0].layers.empty() && hs(b[1])) || (hs(b[0]) && b[1].layers.empty()));
  }
  template <class Branch>
  static HardSwish build(onnx_node_view& n, std::vector<Branch> b) {
    if (!accepts(b)) n.fail("a product of two activations is read as HardSwish only as x * HardSigmoid(x)");
    return HardSwish{};
  }
};

}  // namespace nnlens
