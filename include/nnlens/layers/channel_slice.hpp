// nnlens/layers/channel_slice.hpp -- ChannelSlice<Begin, End>: channels [begin, end) of a [C,H,W]
// input, or features [begin, end) of a [F] input.
//
// ShuffleNet's torch.chunk(x, 2, dim=1) halves, ONNX Slice (or one output of a Split) on axis 1.
// Template arguments, as for Dense: Begin and End fix the range in the type (ChannelSlice<0, 58>
// in a Sequential, whose shapes must be static); ChannelSlice<> (both dyn, the default) is the
// run-time form DynamicNetwork stores, with the range in its fields: ChannelSlice<>{begin, end}.
// The fields default to the type's arguments (0 and 0 for ChannelSlice<>: an empty range, which
// output_shape refuses until it is set).  Weightless.
// requires: begin < end <= C, the input's channel (feature) count, and a rank-1 or rank-3 input;
//           the fields equal the type's arguments where it fixes them (shape_error otherwise, naming
//           the op, the range and the input).
// ensures:  output [end - begin, H, W] (or [end - begin]): each output channel copies one input
//           channel (the ChannelMap property, core/properties.hpp), so forward, backward (dx = dy in
//           the range, 0 outside), int8, NNSlicer (the source neuron's item), LRP (R to the source
//           element; the channels outside the range get none), ExactLine (linear), coverage (not a
//           layer of new neurons), the thrust backend and firmware are the property's.
// ONNX: Slice (opset >= 10 form: starts, ends and axes = [1] as Constant inputs) both ways; the
//       import rule reads a Slice of the channel (feature) axis with step 1, ONNX's clamping of
//       starts and ends (negative: from the end; past the end: the end) included.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "nnlens/core/codegen_form.hpp"
#include "nnlens/core/dynamic_form.hpp"
#include "nnlens/core/error.hpp"
#include "nnlens/core/onnx_form.hpp"
#include "nnlens/core/properties.hpp"
#include "nnlens/core/reflect.hpp"
#include "nnlens/core/traits.hpp"

namespace nnlens {

template <std::size_t Begin = dyn, std::size_t End = dyn>
struct ChannelSlice {
  static_assert((Begin == dyn) == (End == dyn), "ChannelSlice<Begin, End>: fix both ends of the range or neither");
  static_assert(Begin == dyn || Begin < End, "ChannelSlice<Begin, End>: the range must not be empty (Begin < End)");
  std::size_t begin = Begin == dyn ? 0 : Begin;
  std::size_t end = End == dyn ? 0 : End;
  NNLENS_FIELDS(ChannelSlice, begin, end)
};

template <std::size_t Begin, std::size_t End>
struct layer_traits<ChannelSlice<Begin, End>> : channel_map_defaults<ChannelSlice<Begin, End>> {
  using L = ChannelSlice<Begin, End>;
  static constexpr std::string_view name = "ChannelSlice";

  /// The slice (ChannelMap): output channel k reads input channel begin + k.
  struct offset_fn {
    std::size_t begin;
    NNLENS_HD constexpr std::size_t operator()(std::size_t k) const { return begin + k; }
  };
  static constexpr offset_fn channel_map(const L& l, shape) { return {l.begin}; }

  static constexpr shape_check infer(shape in) {
    if (in.rank != 1 && in.rank != 3)
      return {{}, "ChannelSlice needs a rank-1 (features) or rank-3 (channels) input"};
    if (Begin != dyn && in[0] != dyn && End > in[0])
      return {{}, "ChannelSlice<Begin, End>: End is past the input's channel (feature) count"};
    const std::size_t n = Begin == dyn ? dyn : End - Begin;
    return {in.rank == 3 ? shape(n, in[1], in[2]) : shape(n), nullptr};
  }
  static shape output_shape(const L& l, shape in) {
    if (in.rank != 1 && in.rank != 3)
      throw shape_error(detail::concat("ChannelSlice needs a rank-1 or rank-3 input, got ", in.str()));
    const char* what = in.rank == 3 ? " channels" : " features";
    if (Begin != dyn && (l.begin != Begin || l.end != End))
      throw shape_error(detail::concat("ChannelSlice<", Begin, ", ", End, ">: its fields hold the range [", l.begin, ", ", l.end,
                                       ")"));
    if (!(l.begin < l.end) || l.end > in[0])
      throw shape_error(detail::concat("ChannelSlice: the range [", l.begin, ", ", l.end, ") is not a non-empty range of the ",
                                       in[0], what, " of input ", in.str(), " (expected begin < end <= ", in[0], ")"));
    const std::size_t n = l.end - l.begin;
    return in.rank == 3 ? shape(n, in[1], in[2]) : shape(n);
  }
};

template <std::size_t Begin, std::size_t End>
struct dynamic_form<ChannelSlice<Begin, End>> {
  using type = ChannelSlice<>;
  static type to_dynamic(const ChannelSlice<Begin, End>& l) { return type{l.begin, l.end}; }
  static ChannelSlice<Begin, End> from_dynamic(const type& d, const std::string& where) {
    if (Begin != dyn && (d.begin != Begin || d.end != End))
      throw shape_error(detail::concat(where, ": ChannelSlice expects the range [", Begin, ", ", End, "), the source has [", d.begin,
                                       ", ", d.end, ")"));
    return ChannelSlice<Begin, End>{d.begin, d.end};
  }
};

/// ExactLine: a slice is linear, it never splits a segment.
template <std::size_t Begin, std::size_t End>
struct pwl_rule<ChannelSlice<Begin, End>> : pwl_affine_rule {};
/// NNSlicer: the output neuron's one source neuron passes its Δ through, (x_src, -, Δx_src)
/// (docs/specs/nnslicer.md#25-local-items-per-op-type); the channels outside the range get no vote.
template <std::size_t Begin, std::size_t End>
struct sign_rule<ChannelSlice<Begin, End>> : sign_channel_map_rule {};
/// LRP: an output element's relevance goes to the element it copies
/// (docs/specs/deepimportance.md#22-neuron-relevance-by-lrp).
template <std::size_t Begin, std::size_t End>
struct relevance_rule<ChannelSlice<Begin, End>> : relevance_channel_map_rule {};

// ---- io forms: codegen spelling (the range in the type), ONNX Slice both ways
template <>
struct codegen_rule<ChannelSlice<>> : detail::codegen_fields<ChannelSlice<>> {
  static std::string type(const ChannelSlice<>& l, codegen_context&) {
    return "nnlens::ChannelSlice<" + std::to_string(l.begin) + ", " + std::to_string(l.end) + ">";
  }
};
template <>
struct onnx_export_rule<ChannelSlice<>> {
  static std::string emit(const ChannelSlice<>& l, onnx_sink& s, const std::string& x, shape, shape) {
    auto one = [&](std::int64_t v) { return s.node("Constant", {}, {{"value_ints", std::vector<std::int64_t>{v}}}); };
    const std::string b = one(std::int64_t(l.begin)), e = one(std::int64_t(l.end)), axes = one(1);
    return s.node("Slice", {x, b, e, axes}, {});
  }
};
/// Slice of the channel (feature) axis with step 1 (opset >= 10: constant inputs; older: attributes).
template <>
struct onnx_import_rule<ChannelSlice<>> {
  static constexpr std::string_view ops[] = {"Slice"};
  template <class Emit>
  static void build(onnx_node_view& n, Emit&& emit) {
    n.require_unpadded();
    const std::vector<std::int64_t> d = n.input_dims();
    if (n.transposed() || !(d.size() == 1 || n.plain_image()))
      n.fail("a Slice needs per-sample shape [C] or an NCHW image, got " + n.dims_str(d) + (n.transposed() ? " (transposed)" : ""));
    std::vector<std::int64_t> starts, ends, axes, steps;
    auto ints = [&](int i, std::vector<std::int64_t>& out) {
      if (!n.has_input(i)) return;
      for (double v : n.constant(i, true).values) out.push_back(v >= 9.2e18 ? INT64_MAX : v <= -9.2e18 ? INT64_MIN : std::int64_t(v));
    };
    if (n.opset() >= 10) {
      ints(1, starts), ints(2, ends), ints(3, axes), ints(4, steps);
    } else {
      starts = n.attr_ints("starts"), ends = n.attr_ints("ends"), axes = n.attr_ints("axes");
    }
    if (starts.size() != 1 || ends.size() != 1 || axes.size() > 1 || steps.size() > 1)
      n.fail("only a Slice of one axis (the channel axis) is supported");
    if (!steps.empty() && steps[0] != 1) n.fail("only step 1 is supported");
    const std::int64_t rank = std::int64_t(d.size()) + (n.batch_axis() ? 1 : 0), ch = n.batch_axis() ? 1 : 0;
    std::int64_t axis = axes.empty() ? 0 : axes[0];
    if (axis < 0) axis += rank;
    if (axis != ch) n.fail("only a Slice of the channel (feature) axis is supported");
    const std::int64_t C = d[0];
    auto clamp = [&](std::int64_t v) {
      if (v < 0) v = v < -C ? 0 : v + C;
      return v > C ? C : v;
    };
    const std::int64_t b = clamp(starts[0]), e = clamp(ends[0]);
    if (!(b < e)) n.fail("the slice [" + std::to_string(starts[0]) + ", " + std::to_string(ends[0]) + ") of " + std::to_string(C) + " channels is empty");
    emit(ChannelSlice<>{std::size_t(b), std::size_t(e)});
    std::vector<std::int64_t> od = d;
    od[0] = e - b;
    n.set_output_dims(od);
  }
};

}  // namespace nnlens
