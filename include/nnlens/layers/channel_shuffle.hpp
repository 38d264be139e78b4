// nnlens/layers/channel_shuffle.hpp -- ChannelShuffle: ShuffleNet's channel shuffle of a [C,H,W] input.
//
//   y[c] = x[(c % g) * (C / g) + c / g]      for every output channel c < C, g = groups
//
// torchvision's channel_shuffle (models/shufflenetv2.py): x viewed as [g, C/g, H, W], axes 0 and 1
// swapped, flattened back to [C, H, W] (the permutation checked against it with torch 1.13 in
// tests/layers/test_channel_ops.cpp).  groups is a run-time field; weightless, it is its own
// dynamic form.  groups = 1 (or C) is the identity.
// requires: a rank-3 input whose channel count is a multiple of groups >= 1 (shape_error / value_error
//           otherwise, naming the op).
// ensures:  the output has the input's shape; each output channel copies one input channel (the
//           ChannelMap property, core/properties.hpp), so forward, backward (dx = the inverse
//           permutation of dy), int8 (the codes move, the scale stays), NNSlicer (the source
//           channel's item), LRP (R to the source element), ExactLine (linear: no knots), coverage
//           (not a layer of new neurons), the thrust backend and firmware are the property's.
// ONNX: written as torch.onnx writes it, Reshape [N, g, C/g, H, W] -> Transpose(0, 2, 1, 3, 4) ->
//       Reshape [N, C, H, W] (shapes as Constant nodes; the batch extent 0: copied).  Reading that
//       pattern back is the importer's graph rewriting (three nodes, no single-node rule here).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "nnlens/core/codegen_form.hpp"
#include "nnlens/core/error.hpp"
#include "nnlens/core/onnx_form.hpp"
#include "nnlens/core/properties.hpp"
#include "nnlens/core/reflect.hpp"
#include "nnlens/core/traits.hpp"

namespace nnlens {

struct ChannelShuffle {
  std::size_t groups = 1;
  NNLENS_FIELDS(ChannelShuffle, groups)
};

template <>
struct layer_traits<ChannelShuffle> : channel_map_defaults<ChannelShuffle> {
  static constexpr std::string_view name = "ChannelShuffle";

  /// The permutation (ChannelMap): output channel k reads input channel (k % g) (C / g) + k / g.
  struct shuffle_fn {
    std::size_t g, per;  // groups, channels per group
    NNLENS_HD constexpr std::size_t operator()(std::size_t k) const { return (k % g) * per + k / g; }
  };
  static constexpr shuffle_fn channel_map(const ChannelShuffle& l, shape in) {
    const std::size_t g = l.groups ? l.groups : 1;
    return {g, in[0] / g};
  }

  static constexpr shape_check infer(shape in) {
    if (in.rank != 3) return {{}, "ChannelShuffle needs an image input [C,H,W] (rank 3)"};
    return {in, nullptr};
  }
  static shape output_shape(const ChannelShuffle& l, shape in) {
    if (l.groups == 0) throw value_error("ChannelShuffle: groups is 0, expected at least 1");
    if (in.rank != 3) throw shape_error(detail::concat("ChannelShuffle needs an image input [C,H,W], got ", in.str()));
    if (in[0] % l.groups != 0)
      throw shape_error(detail::concat("ChannelShuffle: the input ", in.str(), " has ", in[0], " channels, not a multiple of groups = ",
                                       l.groups));
    return in;
  }
};

/// ExactLine: a permutation is linear, it never splits a segment.
template <>
struct pwl_rule<ChannelShuffle> : pwl_affine_rule {};
/// NNSlicer: the output neuron's one source neuron passes its Δ through, (x_src, -, Δx_src)
/// (docs/specs/nnslicer.md#25-local-items-per-op-type).
template <>
struct sign_rule<ChannelShuffle> : sign_channel_map_rule {};
/// LRP: an output element's relevance goes to the element it copies
/// (docs/specs/deepimportance.md#22-neuron-relevance-by-lrp).
template <>
struct relevance_rule<ChannelShuffle> : relevance_channel_map_rule {};

// ---- io forms: codegen spelling (groups set in make_NAME), ONNX Reshape -> Transpose -> Reshape
template <>
struct codegen_rule<ChannelShuffle> : detail::codegen_plain<ChannelShuffle> {};
template <>
struct onnx_export_rule<ChannelShuffle> {
  static std::string emit(const ChannelShuffle& l, onnx_sink& s, const std::string& x, shape in, shape) {
    const auto i64 = [](std::size_t v) { return std::int64_t(v); };
    const std::int64_t g = i64(l.groups), C = i64(in[0]), H = i64(in[1]), W = i64(in[2]);
    const std::string split = s.node("Constant", {}, {{"value_ints", std::vector<std::int64_t>{0, g, C / g, H, W}}});
    const std::string a = s.node("Reshape", {x, split}, {});
    const std::string t = s.node("Transpose", {a}, {{"perm", std::vector<std::int64_t>{0, 2, 1, 3, 4}}});
    const std::string back = s.node("Constant", {}, {{"value_ints", std::vector<std::int64_t>{0, C, H, W}}});
    return s.node("Reshape", {t, back}, {});
  }
};

}  // namespace nnlens
