// nnlens/layers/dropout.hpp -- Identity, and Dropout (the identity at inference); any shape.
//
//   Identity        y = x.  Also the default shortcut of Residual.
//   Dropout{p}      nn.Dropout(p) in evaluation mode: y = x.  nnlens models inference, so the
//                   random mask of training is not modelled: layer_traits<Dropout>::inference_only
//                   is true, and backward is the identity too.  p (default 0.5) is kept so that a
//                   model round-trips; requires 0 <= p < 1 (output_shape throws value_error).
#pragma once

#include <algorithm>
#include <cmath>

#include "nnlens/core/error.hpp"
#include "nnlens/core/codegen_form.hpp"
#include "nnlens/core/traits.hpp"
#include "nnlens/core/onnx_form.hpp"
#include "nnlens/core/reflect.hpp"

namespace nnlens {

struct Identity {};

struct Dropout {
  double p = 0.5;
  NNLENS_FIELDS(Dropout, p)
};

namespace detail {
template <class L>
struct identity_traits : layer_defaults {
  static constexpr bool reshape_only = true;  // core/properties.hpp
  static constexpr shape_check infer(shape in) { return {in, nullptr}; }
  template <class T>
  static void forward(const L&, const forward_args<T>& a) {
    std::copy_n(a.x, a.batch * a.in.size(), a.y);
  }
  template <class T>
  static void backward(const L&, const backward_args<T>& a, L*) {
    if (a.dx) std::copy_n(a.dy, a.batch * a.in.size(), a.dx);
  }
};
}  // namespace detail

template <>
struct layer_traits<Identity> : detail::identity_traits<Identity> {
  static constexpr std::string_view name = "Identity";
  static shape output_shape(const Identity&, shape in) { return in; }
};

template <>
struct layer_traits<Dropout> : detail::identity_traits<Dropout> {
  static constexpr std::string_view name = "Dropout";
  static constexpr bool inference_only = true;
  static shape output_shape(const Dropout& l, shape in) {
    if (!(l.p >= 0.0 && l.p < 1.0))
      throw value_error(detail::concat("Dropout: p is ", l.p, ", expected 0 <= p < 1"));
    return in;
  }
};

/// ExactLine: affine, never splits a segment.
template <>
struct pwl_rule<Identity> : pwl_affine_rule {};
template <>
struct pwl_rule<Dropout> : pwl_affine_rule {};  // inference: the identity

/// NNSlicer: the identity at inference: (x_n, -, Δx_n).
template <>
struct sign_rule<Identity> : sign_passthrough_rule {};
template <>
struct sign_rule<Dropout> : sign_passthrough_rule {};

/// LRP: relevance passes through unchanged (docs/specs/deepimportance.md#22-neuron-relevance-by-lrp).
template <>
struct relevance_rule<Identity> : relevance_passthrough_rule {};
template <>
struct relevance_rule<Dropout> : relevance_passthrough_rule {};


// ---- io forms: codegen spelling; ONNX Identity on export; on import both pass their input through
template <>
struct codegen_rule<Identity> : detail::codegen_plain<Identity> {};
template <>
struct codegen_rule<Dropout> : detail::codegen_plain<Dropout> {};
template <>
struct onnx_export_rule<Identity> : detail::onnx_unary_rule<Identity> {
  static constexpr std::string_view op = "Identity";
};
template <>
struct onnx_export_rule<Dropout> : detail::onnx_unary_rule<Dropout> {
  static constexpr std::string_view op = "Identity";  // inference: the identity
};
template <>
struct onnx_import_rule<Identity> {
  static constexpr std::string_view ops[] = {"Identity"};
  static constexpr bool passthrough = true;
  template <class Emit>
  static void build(onnx_node_view&, Emit&&) {}
};
template <>
struct onnx_import_rule<Dropout> {
  static constexpr std::string_view ops[] = {"Dropout"};
  static constexpr bool passthrough = true;
  template <class Emit>
  static void build(onnx_node_view& n, Emit&&) {
    if (n.opset() >= 12 && n.input_count() > 2 && n.has_input(2) && n.scalar(2) != 0)
      n.fail("training_mode = true is not supported");
  }
};

}  // namespace nnlens
