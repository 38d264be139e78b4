// nnlens/io/onnx_export.hpp -- ONNX export: any nnlens network as an ONNX model (opset 13).
// Part of the optional component nnlens::onnx (libonnx-dev + libprotobuf-dev); not in nnlens.hpp.
//
//   onnx::ModelProto m = io::to_onnx(net [, options]);   // DynamicNetwork or static Sequential
//   io::save_onnx(path, net [, options]);                 // writes the serialized model
//
// The graph: input "input" [N, sample shape...] (N symbolic), output "output" [N, out...], float32
// weights as initializers, one node (or two) per layer, by the per-layer rule onnx_export_rule<L>:
//   Dense         Gemm(x, W, b), transB = 0 (W is [in, out])
//   Conv2D        Conv (kernel_shape, strides, pads [top, left, bottom, right], dilations, group)
//   MaxPool2D     MaxPool (kernel_shape, strides, pads, ceil_mode)
//   AvgPool2D     AveragePool (+ count_include_pad)        GlobalAvgPool  GlobalAveragePool
//   BatchNorm     BatchNormalization (inference: scale, B, mean, var, epsilon)
//   Affine        Mul(x, s) + Add(., t), s and t shaped to broadcast as the layer's rule says
//   ReLU Relu; LeakyReLU LeakyRelu(alpha); HardTanh, Clamp: Clip(min, max) (an infinite bound
//   is an omitted input); Flatten Flatten(axis 1); Softmax Softmax(axis -1); Dropout, Identity:
//   Identity; Residual: its two branches from the same value, then Add(block, shortcut).
// ONNX has no derivative semantics, so HardTanh and Clamp both become Clip (same values).
// A double network is written in float32 (rounded).
// requires: a network whose shapes check (validate); finite hyper-parameters except the bounds
//           of Clamp/HardTanh.
// ensures:  onnx::checker::check_model accepts the model; io::load_onnx gives a network with the
//           same outputs (bitwise in the tests, every layer type; the importer may fold an Affine
//           into a neighbour, which can change rounding).
// throws:   io_error when the file cannot be written.
#pragma once

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include <onnx/onnx_pb.h>

#include "nnlens/config.hpp"
#include "nnlens/core/error.hpp"
#include "nnlens/network/dynamic_network.hpp"

namespace nnlens::io {

struct onnx_export_options {
  std::string graph_name = "nnlens";
  std::string producer = "nnlens";
  std::int64_t opset = 13;
};

/// The graph being built: fresh value names, initializers and nodes.
class onnx_export_context {
 public:
  explicit onnx_export_context(onnx::GraphProto& g) : g_(g) {}

  std::string fresh(const std::string& stem) { return stem + "_" + std::to_string(counter_++); }

  /// A float32 initializer named after `stem`; returns its name.
  template <class It>
  std::string initializer(const std::string& stem, const std::vector<std::int64_t>& dims, It first, std::size_t n) {
    const std::string name = fresh(stem);
    onnx::TensorProto* t = g_.add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (auto d : dims) t->add_dims(d);
    for (std::size_t i = 0; i < n; ++i, ++first) t->add_float_data(static_cast<float>(*first));
    return name;
  }
  template <class E>
  std::string initializer(const std::string& stem, const std::vector<std::int64_t>& dims, const E& tensor) {
    return initializer(stem, dims, tensor.data(), tensor.size());
  }

  /// A node op(inputs) -> one fresh output; returns the output's name.
  onnx::NodeProto* node(const std::string& op, const std::vector<std::string>& inputs, std::string& out) {
    out = fresh(op);
    onnx::NodeProto* n = g_.add_node();
    n->set_op_type(op);
    n->set_name(fresh("node_" + op));
    for (const auto& i : inputs) n->add_input(i);
    n->add_output(out);
    return n;
  }
  static void attr(onnx::NodeProto* n, const std::string& name, std::int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void attr(onnx::NodeProto* n, const std::string& name, float v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(v);
  }
  static void attr(onnx::NodeProto* n, const std::string& name, const std::vector<std::int64_t>& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (auto x : v) a->add_ints(x);
  }

 private:
  onnx::GraphProto& g_;
  std::size_t counter_ = 0;
};

/// The per-layer export rule: `static std::string emit(const L&, onnx_export_context&,
/// const std::string& x, shape in, shape out)` adds the layer's nodes reading value x and returns
/// the name of its output value.  Specialised below for every run-time layer form.
template <class L>
struct onnx_export_rule;

namespace detail {
inline std::vector<std::int64_t> i64(std::initializer_list<std::size_t> v) {
  return std::vector<std::int64_t>(v.begin(), v.end());
}
/// A node with no attributes and no parameters: op(x).
template <class L>
struct onnx_unary {
  static std::string op();
};
template <class L>
struct onnx_simple_rule {
  static std::string emit(const L&, onnx_export_context& c, const std::string& x, shape, shape) {
    std::string y;
    c.node(onnx_unary<L>::op(), {x}, y);
    return y;
  }
};
template <>
inline std::string onnx_unary<ReLU>::op() { return "Relu"; }
template <>
inline std::string onnx_unary<GlobalAvgPool>::op() { return "GlobalAveragePool"; }
template <>
inline std::string onnx_unary<Dropout>::op() { return "Identity"; }
template <>
inline std::string onnx_unary<Identity>::op() { return "Identity"; }

template <class L>
struct onnx_clip_rule {
  static std::string emit(const L& l, onnx_export_context& c, const std::string& x, shape, shape) {
    const float lo[1] = {static_cast<float>(l.lo)}, hi[1] = {static_cast<float>(l.hi)};
    std::vector<std::string> in{x};
    in.push_back(std::isinf(l.lo) && l.lo < 0 ? std::string{} : c.initializer("clip_min", {}, lo, 1));
    if (!(std::isinf(l.hi) && l.hi > 0)) in.push_back(c.initializer("clip_max", {}, hi, 1));
    if (in.back().empty()) in.pop_back();  // no bounds at all: Clip(x)
    std::string y;
    c.node("Clip", in, y);
    return y;
  }
};

inline void onnx_pool_attrs(onnx::NodeProto* n, const pool_geometry& g) {
  onnx_export_context::attr(n, "kernel_shape", i64({g.kh, g.kw}));
  onnx_export_context::attr(n, "strides", i64({g.stride_h, g.stride_w}));
  onnx_export_context::attr(n, "pads", i64({g.pad_top, g.pad_left, g.pad_bottom, g.pad_right}));
  onnx_export_context::attr(n, "ceil_mode", std::int64_t(g.ceil_mode));
}
}  // namespace detail

template <>
struct onnx_export_rule<ReLU> : detail::onnx_simple_rule<ReLU> {};
template <>
struct onnx_export_rule<GlobalAvgPool> : detail::onnx_simple_rule<GlobalAvgPool> {};
template <>
struct onnx_export_rule<Dropout> : detail::onnx_simple_rule<Dropout> {};
template <>
struct onnx_export_rule<Identity> : detail::onnx_simple_rule<Identity> {};
template <>
struct onnx_export_rule<HardTanh> : detail::onnx_clip_rule<HardTanh> {};
template <>
struct onnx_export_rule<Clamp> : detail::onnx_clip_rule<Clamp> {};

template <>
struct onnx_export_rule<Flatten> {
  static std::string emit(const Flatten&, onnx_export_context& c, const std::string& x, shape, shape) {
    std::string y;
    onnx_export_context::attr(c.node("Flatten", {x}, y), "axis", std::int64_t(1));
    return y;
  }
};
template <>
struct onnx_export_rule<Softmax> {
  static std::string emit(const Softmax&, onnx_export_context& c, const std::string& x, shape, shape) {
    std::string y;
    onnx_export_context::attr(c.node("Softmax", {x}, y), "axis", std::int64_t(-1));
    return y;
  }
};
template <>
struct onnx_export_rule<LeakyReLU> {
  static std::string emit(const LeakyReLU& l, onnx_export_context& c, const std::string& x, shape, shape) {
    std::string y;
    onnx_export_context::attr(c.node("LeakyRelu", {x}, y), "alpha", static_cast<float>(l.alpha));
    return y;
  }
};

template <class T>
struct onnx_export_rule<Dense<dyn, T>> {
  static std::string emit(const Dense<dyn, T>& l, onnx_export_context& c, const std::string& x, shape, shape) {
    const std::string W = c.initializer("dense_W", detail::i64({l.W.shape()[0], l.W.shape()[1]}), l.W);
    const std::string b = c.initializer("dense_b", detail::i64({l.b.size()}), l.b);
    std::string y;
    onnx::NodeProto* n = c.node("Gemm", {x, W, b}, y);
    onnx_export_context::attr(n, "transB", std::int64_t(0));
    return y;
  }
};

template <class T>
struct onnx_export_rule<Conv2DG<dyn, conv_geometry_dyn, T>> {
  static std::string emit(const Conv2DG<dyn, conv_geometry_dyn, T>& l, onnx_export_context& c, const std::string& x,
                          shape, shape) {
    const auto& s = l.W.shape();
    const std::string W = c.initializer("conv_W", detail::i64({s[0], s[1], s[2], s[3]}), l.W);
    const std::string b = c.initializer("conv_b", detail::i64({l.b.size()}), l.b);
    const conv_geometry& g = l.geometry;
    std::string y;
    onnx::NodeProto* n = c.node("Conv", {x, W, b}, y);
    onnx_export_context::attr(n, "kernel_shape", detail::i64({g.kh, g.kw}));
    onnx_export_context::attr(n, "strides", detail::i64({g.stride_h, g.stride_w}));
    onnx_export_context::attr(n, "pads", detail::i64({g.pad_top, g.pad_left, g.pad_bottom, g.pad_right}));
    onnx_export_context::attr(n, "dilations", detail::i64({g.dilation_h, g.dilation_w}));
    onnx_export_context::attr(n, "group", std::int64_t(g.groups));
    return y;
  }
};

template <>
struct onnx_export_rule<MaxPool2D<dyn>> {
  static std::string emit(const MaxPool2D<dyn>& l, onnx_export_context& c, const std::string& x, shape, shape) {
    std::string y;
    detail::onnx_pool_attrs(c.node("MaxPool", {x}, y), l.geometry);
    return y;
  }
};
template <>
struct onnx_export_rule<AvgPool2D<dyn>> {
  static std::string emit(const AvgPool2D<dyn>& l, onnx_export_context& c, const std::string& x, shape, shape) {
    std::string y;
    onnx::NodeProto* n = c.node("AveragePool", {x}, y);
    detail::onnx_pool_attrs(n, l.geometry);
    onnx_export_context::attr(n, "count_include_pad", std::int64_t(l.geometry.count_include_pad));
    return y;
  }
};

template <class T>
struct onnx_export_rule<BatchNorm<dyn, T>> {
  static std::string emit(const BatchNorm<dyn, T>& l, onnx_export_context& c, const std::string& x, shape, shape) {
    const auto C = detail::i64({l.gamma.size()});
    std::vector<std::string> in{x, c.initializer("bn_scale", C, l.gamma), c.initializer("bn_B", C, l.beta),
                                c.initializer("bn_mean", C, l.running_mean), c.initializer("bn_var", C, l.running_var)};
    std::string y;
    onnx_export_context::attr(c.node("BatchNormalization", in, y), "epsilon", static_cast<float>(l.eps));
    return y;
  }
};

template <class T>
struct onnx_export_rule<Affine<dyn, T>> {
  /// The broadcast shape of s and t (affine.hpp's rule): per element, per channel, or one value.
  static std::vector<std::int64_t> dims(std::size_t n, shape in) {
    if (n == in.size() || in.rank == 1) {
      if (n == 1 && in.size() != 1) return {1};
      std::vector<std::int64_t> d;
      for (std::size_t i = 0; i < in.rank; ++i) d.push_back(std::int64_t(in[i]));
      return d;
    }
    if (n == 1) return {1};
    return {std::int64_t(n), 1, 1};  // per channel of {C, H, W}
  }
  static std::string emit(const Affine<dyn, T>& l, onnx_export_context& c, const std::string& x, shape in, shape) {
    const auto d = dims(l.s.size(), in);
    std::string m, y;
    c.node("Mul", {x, c.initializer("affine_s", d, l.s)}, m);
    c.node("Add", {m, c.initializer("affine_t", d, l.t)}, y);
    return y;
  }
};

namespace detail {
template <class V>
std::string onnx_emit_variant(const V& v, onnx_export_context& c, const std::string& x, shape in, shape out) {
  return std::visit(
      [&](const auto& l) -> std::string {
        using L = std::decay_t<decltype(l)>;
        return onnx_export_rule<L>::emit(l, c, x, in, out);
      },
      v);
}
template <class T>
std::string onnx_emit_chain(const DynamicBlock<T>& b, onnx_export_context& c, std::string x, shape in) {
  for (const auto& l : b.layers) {
    const shape out = std::visit([&](const auto& ll) { return layer_traits<std::decay_t<decltype(ll)>>::output_shape(ll, in); }, l);
    x = onnx_emit_variant(l, c, x, in, out);
    in = out;
  }
  return x;
}
}  // namespace detail

template <class T>
struct onnx_export_rule<DynamicResidual<T>> {
  static std::string emit(const DynamicResidual<T>& l, onnx_export_context& c, const std::string& x, shape in, shape) {
    const std::string b = detail::onnx_emit_chain(l.block, c, x, in);
    const std::string s = detail::onnx_emit_chain(l.shortcut, c, x, in);  // empty: x itself
    std::string y;
    c.node("Add", {b, s}, y);
    return y;
  }
};

namespace detail {
inline void onnx_value_info(onnx::ValueInfoProto* v, const std::string& name, shape s) {
  v->set_name(name);
  auto* tt = v->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  auto* sh = tt->mutable_shape();
  sh->add_dim()->set_dim_param("N");
  for (std::size_t i = 0; i < s.rank; ++i) sh->add_dim()->set_dim_value(std::int64_t(s[i]));
}
}  // namespace detail

/// The network as an ONNX ModelProto (see the file comment).
template <class T>
onnx::ModelProto to_onnx(const basic_dynamic_network<T>& net, const onnx_export_options& o = {}) {
  basic_dynamic_network<T> checked = net;
  checked.validate();
  onnx::ModelProto m;
  m.set_ir_version(7);  // ONNX 1.8: the first IR version with opset 13
  m.set_producer_name(o.producer);
  m.set_producer_version(std::to_string(NNLENS_VERSION_MAJOR) + "." + std::to_string(NNLENS_VERSION_MINOR) + "." +
                         std::to_string(NNLENS_VERSION_PATCH));
  auto* op = m.add_opset_import();
  op->set_domain("");
  op->set_version(o.opset);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name(o.graph_name);
  onnx_export_context c(*g);
  std::string x = "input";
  for (std::size_t i = 0; i < net.size(); ++i) x = detail::onnx_emit_variant(net.layer(i), c, x, checked.shape_at(i), checked.shape_at(i + 1));
  // The last value is renamed "output" (an Identity when the network has no layers).
  if (g->node_size() == 0 || x == "input") {
    onnx::NodeProto* n = g->add_node();
    n->set_op_type("Identity");
    n->set_name("node_output");
    n->add_input(x);
    n->add_output("output");
  } else {
    for (auto& n : *g->mutable_node())
      for (auto& s : *n.mutable_input())
        if (s == x) s = "output";
    for (auto& n : *g->mutable_node())
      for (auto& s : *n.mutable_output())
        if (s == x) s = "output";
  }
  detail::onnx_value_info(g->add_input(), "input", checked.input_shape());
  detail::onnx_value_info(g->add_output(), "output", checked.output_shape());
  return m;
}

template <class In, class... Ls>
onnx::ModelProto to_onnx(const Sequential<In, Ls...>& net, const onnx_export_options& o = {}) {
  return to_onnx(to_dynamic(net), o);
}

/// Writes to_onnx(net, o) to path.
template <class Net>
void save_onnx(const std::filesystem::path& path, const Net& net, const onnx_export_options& o = {}) {
  const onnx::ModelProto m = to_onnx(net, o);
  std::string bytes;
  if (!m.SerializeToString(&bytes)) throw io_error(path.string() + ": cannot serialise the ONNX model");
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw io_error(path.string() + ": cannot open for writing");
  f.write(bytes.data(), std::streamsize(bytes.size()));
  f.close();
  if (!f) throw io_error(path.string() + ": write error");
}

}  // namespace nnlens::io
