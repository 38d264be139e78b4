// nnlens/core/onnx_form.hpp -- what an op's ONNX export and import rules are written against.
//
// No protobuf here: io/onnx_export.hpp implements onnx_sink with protobuf, io/onnx/import.hpp
// implements onnx_node_view over a NodeProto and the importer's state.  Each op's header
// specialises, for its run-time (dynamic) form L:
//   onnx_export_rule<L>::emit(const L&, onnx_sink&, const std::string& x, shape in, shape out)
//       adds the op's nodes reading value x; returns the name of the op's output value.
//   onnx_import_rule<L> (optional; the primary is empty = "no single ONNX node builds L"):
//       static constexpr std::string_view ops[]   the ONNX op types (default domain) it builds from
//       template <class Emit> static void build(onnx_node_view& n, Emit&& emit)
//           checks n (n.fail(why) throws io_error naming the file, node and op type) and calls
//           emit(layer) for each layer the node becomes, in order (none: the node passes its
//           input through, e.g. Identity).
//       static constexpr bool passthrough = true  (optional) on constants the node is a copy.
//   onnx_join_rule<L> (optional; composite ops): a node that joins activations forked from one value
//       static constexpr std::string_view op       the ONNX op type of the join ("Add", "Concat")
//       template <class Branch> static L build(onnx_node_view& n, std::vector<Branch> branches)
//           branches: the layer chains (run-time blocks) from the fork to each of n's inputs, in
//           n's input order (an empty chain: the input is the forked value itself); the view's
//           activation is n's first input.  Checks n (n.fail(why)) and returns the composite.
// The importer finds the rules by walking the variant of run-time layer forms at compile time.
// requires: the view's activation is input 0 of the node.
#pragma once

#include <array>
#include <charconv>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "nnlens/core/shape.hpp"
#include "nnlens/core/traits.hpp"

namespace nnlens {

// ---------------------------------------------------------------- export

/// One attribute of an exported node: INT, FLOAT, INTS or STRING.
struct onnx_attr {
  std::string name;
  std::variant<std::int64_t, float, std::vector<std::int64_t>, std::string> value;
};

/// Where export rules write: fresh value names, float32 initializers, nodes (in call order).
class onnx_sink {
 public:
  /// A node op(inputs) with attributes (in this order) and one fresh output; returns its name.
  virtual std::string node(std::string_view op, const std::vector<std::string>& inputs,
                           const std::vector<onnx_attr>& attrs) = 0;
  /// A float32 initializer named after stem (doubles are rounded); returns its name.
  virtual std::string initializer(std::string_view stem, const std::vector<std::int64_t>& dims,
                                  std::span<const float> values) = 0;
  virtual std::string initializer(std::string_view stem, const std::vector<std::int64_t>& dims,
                                  std::span<const double> values) = 0;
  /// The default domain's opset the graph needs at least: a rule whose node is newer than the
  /// exporter's opset calls it (HardSwish: 14, Gelu: 20); the model declares the largest.
  virtual void require_opset(std::int64_t) {}
  /// initializer() of a whole tensor (anything with data() and size()).
  template <class E>
  std::string tensor(std::string_view stem, const std::vector<std::int64_t>& dims, const E& t) {
    return initializer(stem, dims, std::span(t.data(), t.size()));
  }

 protected:
  ~onnx_sink() = default;
};

/// The per-op export rule (specialised in each op's header).
template <class L>
struct onnx_export_rule;

template <class L>
concept OnnxExportable = requires(const L& l, onnx_sink& s, const std::string& x, shape in) {
  { onnx_export_rule<L>::emit(l, s, x, in, in) } -> std::convertible_to<std::string>;
};

namespace detail {
inline std::vector<std::int64_t> onnx_i64(std::initializer_list<std::size_t> v) {
  return std::vector<std::int64_t>(v.begin(), v.end());
}
/// The rule of a node with no attributes and no parameters: op(x), where the specialisation
/// deriving from it says `static constexpr std::string_view op = "...";`.
template <class L>
struct onnx_unary_rule {
  static std::string emit(const L&, onnx_sink& s, const std::string& x, shape, shape) {
    return s.node(onnx_export_rule<L>::op, {x}, {});
  }
};
}  // namespace detail

namespace detail {
/// The export rule of whichever alternative a layer variant holds (composite ops: inner layers).
template <class V>
std::string onnx_emit_variant(const V& v, onnx_sink& s, const std::string& x, shape in, shape out) {
  return std::visit(
      [&](const auto& l) -> std::string {
        using L = std::decay_t<decltype(l)>;
        static_assert(OnnxExportable<L>, "ONNX export: every run-time layer form needs an onnx_export_rule");
        return onnx_export_rule<L>::emit(l, s, x, in, out);
      },
      v);
}
}  // namespace detail

// ---------------------------------------------------------------- import

/// A constant input of the node being imported (row-major values).
struct onnx_const_view {
  std::span<const std::int64_t> dims;
  std::span<const double> values;
  std::size_t size() const { return values.size(); }
};

/// The node being imported, as an op's import rule sees it.  Input 0 is the activation.
class onnx_node_view {
 public:
  virtual std::string_view op() const = 0;
  /// The opset of the default domain.
  virtual std::int64_t opset() const = 0;
  /// Whether the network input (so every activation) has a leading batch axis.
  virtual bool batch_axis() const = 0;

  virtual std::int64_t attr_i(std::string_view name, std::int64_t def) const = 0;
  /// A float attribute that becomes a parameter: NaN (or, unless allow_inf, Inf) fails naming it.
  virtual double attr_f(std::string_view name, double def, bool allow_inf = false) const = 0;
  virtual std::vector<std::int64_t> attr_ints(std::string_view name, std::vector<std::int64_t> def = {}) const = 0;
  virtual std::string attr_s(std::string_view name, std::string def) const = 0;

  virtual int input_count() const = 0;
  /// Input i is given (present and not the empty name).
  virtual bool has_input(int i) const = 0;
  /// Constant input i; fails when it is missing, not a constant, or holds NaN (or, unless
  /// allow_inf, an infinity), naming the tensor and the element.
  virtual onnx_const_view constant(int i, bool allow_inf = false) const = 0;

  /// The activation's storage shape per sample (it follows the layers emitted so far).
  virtual shape input_shape() const = 0;
  /// For a join rule (onnx_join_rule): the storage shape of the value the branches fork from, the
  /// composite's input (input_shape() is then the first operand's).
  virtual shape fork_shape() const { return input_shape(); }
  /// The activation's logical per-sample dims as the file sees them (may differ from storage
  /// after a Transpose or a Reshape).
  virtual std::vector<std::int64_t> input_dims() const = 0;
  /// Storage is the plain NCHW image input_dims() describes (not transposed).
  virtual bool plain_image() const = 0;
  /// Storage order differs from the logical order (a Transpose is pending).
  virtual bool transposed() const = 0;
  /// The activation is a stored image [C,H,W] seen channels-last, logical [H,W,C] (ConvNeXt's
  /// permute(0, 2, 3, 1)): an op over the logical last axis runs over the stored channels.
  virtual bool channels_last() const { return false; }
  /// Zero padding of a preceding Pad node not yet absorbed (top, left, bottom, right).
  virtual std::array<std::size_t, 4> pending_pad() const = 0;
  /// Marks the pending padding as absorbed by the layers this node emits.
  virtual void absorb_pad() = 0;
  /// The output's logical dims when the rule knows better than "the new storage shape".
  virtual void set_output_dims(std::vector<std::int64_t> d) = 0;

  /// Throws io_error "ONNX: <file>: node '<name>' (<op>): <why>".
  [[noreturn]] virtual void fail(const std::string& why) const = 0;

  // -- helpers on top
  static std::string dims_str(const std::vector<std::int64_t>& d) {
    std::string s = "[";
    for (std::size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + std::to_string(d[i]);
    return s + "]";
  }
  bool padded() const {
    const auto p = pending_pad();
    return p[0] || p[1] || p[2] || p[3];
  }
  void require_unpadded() const {
    if (padded()) fail("follows a Pad node");
  }
  void require_image() const {
    if (plain_image()) return;
    fail("needs an NCHW image input [N,C,H,W]; the input's per-sample shape is " + dims_str(input_dims()) +
         (transposed() ? " (transposed)" : ""));
  }
  /// The single value of constant input i.
  double scalar(int i, bool allow_inf = false) const {
    const onnx_const_view c = constant(i, allow_inf);
    if (c.values.size() != 1)
      fail("input " + std::to_string(i) + " must be a single value, it has " + std::to_string(c.values.size()));
    return c.values[0];
  }

 protected:
  ~onnx_node_view() = default;
};

/// The value an exporter most likely meant by float attribute f: the shortest decimal that rounds
/// to f, read as a double (torch.onnx writes BatchNorm's eps = 1e-3 as the float 0.0010000000475;
/// a double network then computes with 1e-3, as PyTorch does in double).  A float network sees the
/// same float either way.
inline double onnx_intended(double f) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, float(f));
  double d = double(float(f));
  if (r.ec == std::errc()) std::from_chars(buf, r.ptr, d);
  return float(d) == float(f) ? d : double(float(f));
}

/// Cap of kernel, stride, pad and group attributes.
inline constexpr std::int64_t onnx_max_window = std::int64_t(1) << 20;

/// The padding (top, left, bottom, right) of a window op (Conv, pooling) from its pads / auto_pad
/// attributes and the input's storage extents; pending Pad-node padding is not included.
inline std::array<std::size_t, 4> onnx_window_pads(const onnx_node_view& n, std::size_t kh, std::size_t kw,
                                                   std::size_t sh, std::size_t sw, std::size_t dh, std::size_t dw) {
  std::array<std::size_t, 4> r{0, 0, 0, 0};
  const std::string ap = n.attr_s("auto_pad", "NOTSET");
  if (ap == "NOTSET") {
    const auto p = n.attr_ints("pads", {0, 0, 0, 0});
    if (p.size() != 4) n.fail("pads must have 4 values");
    for (auto v : p)
      if (v < 0 || v > onnx_max_window) n.fail("pads must be in [0, 2^20]");
    for (std::size_t i = 0; i < 4; ++i) r[i] = std::size_t(p[i]);
  } else if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
    const shape in = n.input_shape();
    auto same = [&](std::size_t x, std::size_t k, std::size_t s, std::size_t d, std::size_t& lo, std::size_t& hi) {
      const std::size_t o = (x + s - 1) / s, span = d * (k - 1) + 1;
      const std::size_t need = (o - 1) * s + span, total = need > x ? need - x : 0;
      lo = ap == "SAME_UPPER" ? total / 2 : total - total / 2;
      hi = total - lo;
    };
    same(in[1], kh, sh, dh, r[0], r[2]);
    same(in[2], kw, sw, dw, r[1], r[3]);
  } else if (ap != "VALID") {
    n.fail("auto_pad '" + ap + "' is not supported");
  }
  return r;
}

/// The per-op import rule (specialised in an op's header when one ONNX node builds it).
template <class L>
struct onnx_import_rule {};

template <class L>
concept OnnxImportable = requires { onnx_import_rule<L>::ops; };

namespace detail {
/// The import rule of an op without attributes: onnx_import_rule<L> derives from it and lists its
/// ONNX op types (ops[]); the node becomes L{}.
template <class L>
struct onnx_plain_import {
  template <class Emit>
  static void build(onnx_node_view& n, Emit&& emit) {
    n.require_unpadded();
    emit(L{});
  }
};

/// An op that is one ONNX node without attributes, both ways: its layer_traits names the node's
/// type, `static constexpr std::string_view onnx_op = "Relu";`, and needs no ONNX rule of its own.
template <class L>
concept onnx_plain_op = requires { { layer_traits<L>::onnx_op } -> std::convertible_to<std::string_view>; };
}  // namespace detail

template <class L>
  requires detail::onnx_plain_op<L>
struct onnx_export_rule<L> : detail::onnx_unary_rule<L> {
  static constexpr std::string_view op = layer_traits<L>::onnx_op;
};
template <class L>
  requires detail::onnx_plain_op<L>
struct onnx_import_rule<L> : detail::onnx_plain_import<L> {
  static constexpr std::string_view ops[] = {layer_traits<L>::onnx_op};
};

/// The per-op join rule (specialised in a composite op's header).
template <class L>
struct onnx_join_rule {};

template <class L>
concept OnnxJoinable = requires { { onnx_join_rule<L>::op } -> std::convertible_to<std::string_view>; };

}  // namespace nnlens
