// nnlens/layers/hard_tanh.hpp -- Clamp and HardTanh: y = min(max(x, lo), hi); any shape.
//
//   Clamp{lo, hi}      the general clamp (torch.clamp, ONNX Clip).  ReLU6 = Clamp{0, 6};
//                      Clamp{0, +inf} is ReLU in the forward pass.
//   HardTanh{lo, hi}   nn.Hardtanh; defaults -1, 1.  PyTorch's nn.ReLU6 is HardTanh{0, 6}.
//
// lo and hi are run-time data members (double; converted to the network's scalar in the kernels);
// either may be -inf / +inf.  The two types differ only in the derivative AT the kinks, each
// following its PyTorch namesake:
//   HardTanh: d/dx = 1 for lo <  x <  hi, 0 otherwise   (hardtanh_backward: 0 at x == lo, hi)
//   Clamp:    d/dx = 1 for lo <= x <= hi, 0 otherwise   (clamp's backward: 1 at x == lo, hi)
// requires: lo <= hi and neither is NaN (output_shape throws value_error otherwise).
#pragma once

#include <cmath>
#include <limits>
#include <optional>

#include "nnlens/core/error.hpp"
#include "nnlens/core/codegen_form.hpp"
#include "nnlens/core/properties.hpp"
#include "nnlens/core/traits.hpp"
#include "nnlens/core/onnx_form.hpp"
#include "nnlens/core/reflect.hpp"

namespace nnlens {

struct Clamp {
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
  NNLENS_FIELDS(Clamp, lo, hi)
};

struct HardTanh {
  double lo = -1.0;
  double hi = 1.0;
  NNLENS_FIELDS(HardTanh, lo, hi)
};

namespace detail {
/// The shared traits; Closed selects the derivative at the kinks (see the header comment).
template <class L, bool Closed>
struct clamp_traits : elementwise_map_defaults<L> {
  /// The element-wise map (ElementwiseMap): min(max(x, lo), hi) with lo, hi converted to T; the
  /// gradient passes inside the interval, open or closed by Closed (see the header comment).
  struct scalar_map_fn {
    double lo, hi;
    template <class T>
    NNLENS_HD T operator()(T x) const {
      const T l = T(lo), h = T(hi);
      return x < l ? l : (x > h ? h : x);
    }
    template <class T>
    NNLENS_HD T grad(T x, T dy) const {
      const T l = T(lo), h = T(hi);
      const bool pass = Closed ? (x >= l && x <= h) : (x > l && x < h);
      return pass ? dy : T(0);
    }
  };
  static constexpr scalar_map_fn scalar_map(const L& l) { return {l.lo, l.hi}; }
  static shape output_shape(const L& l, shape in) {
    if (std::isnan(l.lo) || std::isnan(l.hi) || l.lo > l.hi)
      throw value_error(concat(layer_traits<L>::name, ": bounds [", l.lo, ", ", l.hi, "] are not an interval (lo <= hi)"));
    return in;
  }

};
}  // namespace detail

template <>
struct layer_traits<Clamp> : detail::clamp_traits<Clamp, true> {
  static constexpr std::string_view name = "Clamp";
};
template <>
struct layer_traits<HardTanh> : detail::clamp_traits<HardTanh, false> {
  static constexpr std::string_view name = "HardTanh";
};

namespace detail {
/// ExactLine for Clamp and HardTanh: knots at the finite bounds; with hi = +inf the layer is
/// max(x, lo), which fuses with an adjacent max pool.
template <class L>
struct clamp_pwl_rule {
  struct knot_list {
    double k[2];
    std::size_t n = 0;
    const double* begin() const { return k; }
    const double* end() const { return k + n; }
  };
  static knot_list knots(const L& l) {
    knot_list r{};
    if (l.lo == l.hi) return r;  // a constant: no piece changes
    if (std::isfinite(l.lo)) r.k[r.n++] = l.lo;
    if (std::isfinite(l.hi) && l.hi != l.lo) r.k[r.n++] = l.hi;
    return r;
  }
  static std::optional<double> max_floor(const L& l) {
    if (std::isfinite(l.lo) && l.hi == std::numeric_limits<double>::infinity()) return l.lo;
    return std::nullopt;
  }
};
}  // namespace detail
template <>
struct pwl_rule<Clamp> : detail::clamp_pwl_rule<Clamp> {};
template <>
struct pwl_rule<HardTanh> : detail::clamp_pwl_rule<HardTanh> {};

/// NNSlicer: monotone, no gate: (x_n, -, Δx_n).
template <>
struct sign_rule<Clamp> : sign_passthrough_rule {};
template <>
struct sign_rule<HardTanh> : sign_passthrough_rule {};

/// LRP: relevance passes through unchanged (docs/specs/deepimportance.md#22-neuron-relevance-by-lrp).
template <>
struct relevance_rule<Clamp> : relevance_passthrough_rule {};
template <>
struct relevance_rule<HardTanh> : relevance_passthrough_rule {};


// ---- io forms: codegen spelling (bounds set in make_NAME); both export as ONNX Clip (an infinite
// bound is an omitted input; ONNX has no derivative semantics); Clip imports as Clamp.
template <>
struct codegen_rule<Clamp> : detail::codegen_plain<Clamp> {};
template <>
struct codegen_rule<HardTanh> : detail::codegen_plain<HardTanh> {};
namespace detail {
template <class L>
struct onnx_clip_rule {
  static std::string emit(const L& l, onnx_sink& s, const std::string& x, shape, shape) {
    const float lo[1] = {static_cast<float>(l.lo)}, hi[1] = {static_cast<float>(l.hi)};
    std::vector<std::string> in{x};
    in.push_back(std::isinf(l.lo) && l.lo < 0 ? std::string{} : s.initializer("clip_min", {}, std::span<const float>(lo)));
    if (!(std::isinf(l.hi) && l.hi > 0)) in.push_back(s.initializer("clip_max", {}, std::span<const float>(hi)));
    if (in.back().empty()) in.pop_back();  // no bounds at all: Clip(x)
    return s.node("Clip", in, {});
  }
};
}  // namespace detail
template <>
struct onnx_export_rule<Clamp> : detail::onnx_clip_rule<Clamp> {};
template <>
struct onnx_export_rule<HardTanh> : detail::onnx_clip_rule<HardTanh> {};
/// Clip: bounds from attributes (opset < 11) or constant inputs; either may be infinite, never NaN.
template <>
struct onnx_import_rule<Clamp> {
  static constexpr std::string_view ops[] = {"Clip"};
  template <class Emit>
  static void build(onnx_node_view& n, Emit&& emit) {
    n.require_unpadded();
    Clamp c;
    if (n.opset() < 11) {
      c.lo = n.attr_f("min", -std::numeric_limits<double>::infinity(), true);
      c.hi = n.attr_f("max", std::numeric_limits<double>::infinity(), true);
    } else {
      for (int i : {1, 2})
        if (i < n.input_count() && n.has_input(i)) (i == 1 ? c.lo : c.hi) = n.scalar(i, true);
    }
    emit(c);
  }
};

}  // namespace nnlens
