// nnlens/layers/flatten.hpp -- Flatten: [C,H,W] -> [C*H*W] in channel-major (NCHW) order.
#pragma once

#include <algorithm>

#include <vector>

#include "nnlens/core/codegen_form.hpp"
#include "nnlens/core/traits.hpp"
#include "nnlens/core/onnx_form.hpp"

namespace nnlens {

struct Flatten {};

template <>
struct layer_traits<Flatten> : layer_defaults {
  static constexpr std::string_view name = "Flatten";
  static constexpr bool reshape_only = true;  // core/properties.hpp
  static constexpr shape_check infer(shape in) { return {shape(in.size()), nullptr}; }
  static shape output_shape(const Flatten&, shape in) { return shape(in.size()); }

  template <class T>
  static void forward(const Flatten&, const forward_args<T>& a) {
    std::copy_n(a.x, a.batch * a.in.size(), a.y);
  }
  template <class T>
  static void backward(const Flatten&, const backward_args<T>& a, Flatten*) {
    if (a.dx) std::copy_n(a.dy, a.batch * a.in.size(), a.dx);
  }
};

/// ExactLine: affine, never splits a segment.
template <>
struct pwl_rule<Flatten> : pwl_affine_rule {};

/// NNSlicer: the sign passes through; at channel granularity element (c, h, w) of the output feeds
/// channel neuron c of the input (c = Δy_n, so the sign of the neuron's CONTRIB is what moves).
template <>
struct sign_rule<Flatten> {
  static void items(const Flatten&, const sign_ctx& c, std::size_t n, std::vector<sign_item>& out) {
    const std::size_t pred = !c.element && c.in.rank == 3 ? n / (c.in[1] * c.in[2]) : n;
    out.push_back({pred, sign_item::none, c.dy[n]});
  }
};

/// LRP: relevance passes through unchanged (docs/specs/deepimportance.md#22-neuron-relevance-by-lrp).
template <>
struct relevance_rule<Flatten> : relevance_passthrough_rule {};


// ---- io forms: codegen spelling, ONNX Flatten (axis 1) both ways
template <>
struct codegen_rule<Flatten> : detail::codegen_plain<Flatten> {};
template <>
struct onnx_export_rule<Flatten> {
  static std::string emit(const Flatten&, onnx_sink& s, const std::string& x, shape, shape) {
    return s.node("Flatten", {x}, {{"axis", std::int64_t(1)}});
  }
};
/// Flatten keeping the batch axis: a layer only when the storage is not flat already.
template <>
struct onnx_import_rule<Flatten> {
  static constexpr std::string_view ops[] = {"Flatten"};
  template <class Emit>
  static void build(onnx_node_view& n, Emit&& emit) {
    const std::vector<std::int64_t> d = n.input_dims();
    std::int64_t axis = n.attr_i("axis", 1);
    const std::int64_t r = std::int64_t(d.size()) + (n.batch_axis() ? 1 : 0);
    if (axis < 0) axis += r;
    if (!n.batch_axis() || axis != 1) n.fail("only Flatten with axis = 1 (keeping the batch axis) is supported");
    n.require_unpadded();
    if (n.input_shape().rank != 1) emit(Flatten{});
    std::int64_t total = 1;
    for (auto v : d) total *= v;
    n.set_output_dims({total});
  }
};

}  // namespace nnlens
