// nnlens/layers/flatten.hpp -- Flatten: [C,H,W] -> [C*H*W] in channel-major (NCHW) order.
#pragma once

#include <algorithm>

#include <vector>

#include "nnlens/core/traits.hpp"

namespace nnlens {

struct Flatten {};

template <>
struct layer_traits<Flatten> : layer_defaults {
  static constexpr std::string_view name = "Flatten";
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

/// LRP: relevance passes through unchanged (specs/deepimportance.md §2.2).
template <>
struct relevance_rule<Flatten> : relevance_passthrough_rule {};

}  // namespace nnlens
