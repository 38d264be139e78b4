// nnlens/layers/silu.hpp -- SiLU (swish): y = x · σ(x); any shape.
//
// ensures:  numerically stable: σ is layers/sigmoid.hpp's stable_sigmoid, so x = ±1e4 gives
//           1e4 and -0 (no overflow, no NaN); backward is PyTorch's silu_backward,
//           dy · σ(x) (1 + x (1 - σ(x))).
// The op is smooth and not monotone (minimum ≈ -0.278 at x ≈ -1.278): no pwl_rule (ExactLine
// refuses it, naming it), no freestanding form (io/codegen_freestanding.hpp runs the
// piecewise-linear maps only), NNSlicer by the local slope (sign_slope_rule).
// ONNX: no single default-domain node (torch.onnx writes x * Sigmoid(x)); the export writes that
// pair, Sigmoid then Mul(x, ·), and the importer reads it back as SiLU (onnx_join_rule below: a Mul
// joining the forked value with its Sigmoid).
#pragma once

#include <utility>
#include <variant>
#include <vector>

#include "nnlens/core/codegen_form.hpp"
#include "nnlens/core/onnx_form.hpp"
#include "nnlens/core/properties.hpp"
#include "nnlens/core/traits.hpp"
#include "nnlens/layers/sigmoid.hpp"

namespace nnlens {

struct SiLU {};

template <>
struct layer_traits<SiLU> : elementwise_map_defaults<SiLU> {
  static constexpr std::string_view name = "SiLU";
  /// The element-wise map (ElementwiseMap): x σ(x); d/dx = σ(x) (1 + x (1 - σ(x))).
  struct scalar_map_fn {
    template <class T>
    NNLENS_HD T operator()(T x) const { return x * detail::stable_sigmoid(x); }
    template <class T>
    NNLENS_HD T grad(T x, T dy) const {
      const T s = detail::stable_sigmoid(x);
      return dy * (s * (T(1) + x * (T(1) - s)));
    }
  };
  static constexpr scalar_map_fn scalar_map(const SiLU&) { return {}; }
};

/// NNSlicer: not monotone, so the sign of a contribution is the sign of the local slope times Δx:
/// (x_n, -, f'(x_n)·Δx_n), sign_slope_rule (core/traits.hpp).  Our reading of
/// docs/specs/nnslicer.md#25-local-items-per-op-type, whose table covers only monotone
/// activations: to first order Δy_n ≈ f'(x_n) Δx_n, so a neuron
/// below x ≈ -1.278 (its falling branch) reverses the vote.
///
/// LRP: relevance passes through unchanged, the rule of every element-wise activation
/// (docs/specs/deepimportance.md#22-neuron-relevance-by-lrp; Captum's LRP passes ReLU and Tanh
/// through the same way and has no rule of its own for SiLU).
NNLENS_ELEMENTWISE_RULES(SiLU, sign_slope_rule, relevance_passthrough_rule);

// ---- io forms: codegen spelling; ONNX x * Sigmoid(x) both ways
template <>
struct onnx_export_rule<SiLU> {
  static std::string emit(const SiLU&, onnx_sink& s, const std::string& x, shape, shape) {
    return s.node("Mul", {x, s.node("Sigmoid", {x}, {})}, {});
  }
};
/// Mul(x, Sigmoid(x)) (either order): a join of the forked value x (an empty branch) and a branch
/// that is exactly one Sigmoid.  Any other product is declined (layers/product.hpp reads it).
template <>
struct onnx_join_rule<SiLU> {
  static constexpr std::string_view op = "Mul";
  template <class Branch>
  static bool accepts(const std::vector<Branch>& b) {
    auto sig = [](const Branch& br) { return br.layers.size() == 1 && std::holds_alternative<Sigmoid>(br.layers[0]); };
    return b.size() == 2 && ((b[0].layers.empty() && sig(b[1])) || (sig(b[0]) && b[1].layers.empty()));
  }
  template <class Branch>
  static SiLU build(onnx_node_view& n, std::vector<Branch> b) {
    if (!accepts(b)) n.fail("a product of two activations is read as SiLU only as x * Sigmoid(x)");
    return SiLU{};
  }
};

}  // namespace nnlens
