// nnlens/layers/hard_sigmoid.hpp -- HardSigmoid: y = max(0, min(1, alpha x + beta)); any shape.
//
// alpha and beta are run-time data members (double; converted to the network's scalar in the
// kernels).  The defaults are PyTorch's nn.Hardsigmoid (alpha = 1/6, beta = 1/2: relu6(x + 3) / 6,
// which torch.onnx exports as HardSigmoid with these attributes); an ONNX HardSigmoid node without
// attributes has ONNX's defaults alpha = 0.2, beta = 0.5 (the importer reads those).
// requires: alpha and beta finite (output_shape throws value_error otherwise); any sign of alpha
//           (alpha < 0: decreasing; alpha = 0: the constant clamp(beta)).
// ensures:  piecewise linear with two knots, x = -beta / alpha and (1 - beta) / alpha (none when
//           alpha = 0); backward follows PyTorch's hardsigmoid_backward: d/dx = alpha strictly
//           inside the linear piece (0 < alpha x + beta < 1), 0 elsewhere (also at the knots).
#pragma once

#include <cmath>
#include <cstddef>
#include <vector>

#include "nnlens/core/codegen_form.hpp"
#include "nnlens/core/error.hpp"
#include "nnlens/core/onnx_form.hpp"
#include "nnlens/core/properties.hpp"
#include "nnlens/core/reflect.hpp"
#include "nnlens/core/traits.hpp"

namespace nnlens {

struct HardSigmoid {
  double alpha = 1.0 / 6.0;
  double beta = 0.5;
  NNLENS_FIELDS(HardSigmoid, alpha, beta)
};

template <>
struct layer_traits<HardSigmoid> : elementwise_map_defaults<HardSigmoid> {
  static constexpr std::string_view name = "HardSigmoid";
  /// The element-wise map (ElementwiseMap): clamp(alpha x + beta, 0, 1) in T; d/dx = alpha inside
  /// the open linear piece, 0 elsewhere.
  struct scalar_map_fn {
    double alpha, beta;
    template <class T>
    NNLENS_HD T operator()(T x) const {
      const T v = T(alpha) * x + T(beta);
      return v < T(0) ? T(0) : (v > T(1) ? T(1) : v);
    }
    template <class T>
    NNLENS_HD T grad(T x, T dy) const {
      const T v = T(alpha) * x + T(beta);
      return v > T(0) && v < T(1) ? T(alpha) * dy : T(0);
    }
  };
  static constexpr scalar_map_fn scalar_map(const HardSigmoid& l) { return {l.alpha, l.beta}; }
  static shape output_shape(const HardSigmoid& l, shape in) {
    if (!std::isfinite(l.alpha) || !std::isfinite(l.beta))
      throw value_error(
          detail::concat("HardSigmoid: alpha = ", l.alpha, ", beta = ", l.beta, ", expected finite values"));
    return in;
  }

};

/// ExactLine: the two knots where alpha x + beta crosses 0 and 1, in increasing order (none when
/// alpha = 0: a constant).  Not max(x, c): no max_floor.
template <>
struct pwl_rule<HardSigmoid> {
  struct knot_list {
    double k[2];
    std::size_t n = 0;
    const double* begin() const { return k; }
    const double* end() const { return k + n; }
  };
  static knot_list knots(const HardSigmoid& l) {
    knot_list r{};
    if (l.alpha == 0) return r;
    const double a = -l.beta / l.alpha, b = (1.0 - l.beta) / l.alpha;
    r.k[0] = a < b ? a : b;
    r.k[1] = a < b ? b : a;
    r.n = 2;
    return r;
  }
};

/// NNSlicer: monotone, no gate: (x_n, -, Δx_n) as LeakyReLU's sign_passthrough_rule
/// (docs/specs/nnslicer.md#25-local-items-per-op-type); with alpha < 0 the map is decreasing, so
/// the item is (x_n, -, -Δx_n).
template <>
struct sign_rule<HardSigmoid> {
  static void items(const HardSigmoid& l, const sign_ctx& c, std::size_t n, std::vector<sign_item>& out) {
    out.push_back({n, sign_item::none, l.alpha < 0 ? -c.dx[n] : c.dx[n]});
  }
};

/// LRP: relevance passes through unchanged, as for every element-wise activation
/// (docs/specs/deepimportance.md#22-neuron-relevance-by-lrp; Captum's LRP passes ReLU and Tanh
/// through the same way).
template <>
struct relevance_rule<HardSigmoid> : relevance_passthrough_rule {};

// ---- io forms: codegen spelling (alpha, beta set in make_NAME), ONNX HardSigmoid both ways
template <>
struct codegen_rule<HardSigmoid> : detail::codegen_plain<HardSigmoid> {};
template <>
struct onnx_export_rule<HardSigmoid> {
  static std::string emit(const HardSigmoid& l, onnx_sink& s, const std::string& x, shape, shape) {
    return s.node("HardSigmoid", {x}, {{"alpha", static_cast<float>(l.alpha)}, {"beta", static_cast<float>(l.beta)}});
  }
};
/// HardSigmoid: alpha, beta from the attributes (ONNX's defaults 0.2, 0.5), float as ONNX stores
/// them, except that the float nearest 1/6 is read as 1/6: PyTorch's relu6(x + 3) / 6, which
/// torch.onnx writes as alpha = float(1/6) (so a double network computes what PyTorch does in
/// double, not a slope 1e-8 off).
template <>
struct onnx_import_rule<HardSigmoid> {
  static constexpr std::string_view ops[] = {"HardSigmoid"};
  template <class Emit>
  static void build(onnx_node_view& n, Emit&& emit) {
    n.require_unpadded();
    const float alpha = float(n.attr_f("alpha", 0.2));
    emit(HardSigmoid{alpha == float(1.0 / 6.0) ? 1.0 / 6.0 : double(alpha), double(float(n.attr_f("beta", 0.5)))});
  }
};

}  // namespace nnlens
