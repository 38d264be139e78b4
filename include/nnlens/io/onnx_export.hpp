// nnlens/io/onnx_export.hpp -- ONNX export: any nnlens network as an ONNX model (opset 13, or the
// newer opset an op's node needs: HardSwish 14, Gelu 20).
// Part of the optional component nnlens::onnx (libonnx-dev + libprotobuf-dev); not in nnlens.hpp.
//
//   onnx::ModelProto m = io::to_onnx(net [, options]);   // DynamicNetwork or static Sequential
//   io::save_onnx(path, net [, options]);                 // writes the serialized model
//
// The graph: input "input" [N, sample shape...] (N symbolic), output "output" [N, out...], float32
// weights as initializers, one node (or two) per layer, by the per-layer rule onnx_export_rule<L>
// (core/onnx_form.hpp; each op's rule is in its own header, writing through onnx_sink):
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
#include <span>
#include <string_view>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include <onnx/onnx_pb.h>

#include "nnlens/config.hpp"
#include "nnlens/core/error.hpp"
#include "nnlens/core/onnx_form.hpp"
#include "nnlens/network/dynamic_network.hpp"

namespace nnlens::io {

struct onnx_export_options {
  std::string graph_name = "nnlens";
  std::string producer = "nnlens";
  std::int64_t opset = 13;
};

/// The graph being built (the protobuf side of core/onnx_form.hpp's onnx_sink): fresh value names
/// (stem_<counter>), float32 initializers and nodes, in the order the rules ask for them.
class onnx_export_context final : public onnx_sink {
 public:
  explicit onnx_export_context(onnx::GraphProto& g) : g_(g) {}

  std::string fresh(std::string_view stem) { return std::string(stem) + "_" + std::to_string(counter_++); }

  std::string initializer(std::string_view stem, const std::vector<std::int64_t>& dims,
                          std::span<const float> v) override {
    return put(stem, dims, v);
  }
  std::string initializer(std::string_view stem, const std::vector<std::int64_t>& dims,
                          std::span<const double> v) override {
    return put(stem, dims, v);
  }
  std::string node(std::string_view op, const std::vector<std::string>& inputs,
                   const std::vector<onnx_attr>& attrs) override {
    std::string out = fresh(op);
    onnx::NodeProto* n = g_.add_node();
    n->set_op_type(std::string(op));
    n->set_name(fresh("node_" + std::string(op)));
    for (const auto& i : inputs) n->add_input(i);
    n->add_output(out);
    for (const onnx_attr& at : attrs) {
      auto* a = n->add_attribute();
      a->set_name(at.name);
      std::visit(
          [&](const auto& v) {
            using V = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<V, std::int64_t>) {
              a->set_type(onnx::AttributeProto::INT);
              a->set_i(v);
            } else if constexpr (std::is_same_v<V, float>) {
              a->set_type(onnx::AttributeProto::FLOAT);
              a->set_f(v);
            } else if constexpr (std::is_same_v<V, std::string>) {
              a->set_type(onnx::AttributeProto::STRING);
              a->set_s(v);
            } else {
              a->set_type(onnx::AttributeProto::INTS);
              for (auto x : v) a->add_ints(x);
            }
          },
          at.value);
    }
    return out;
  }

  void require_opset(std::int64_t v) override { opset_ = v > opset_ ? v : opset_; }
  /// The largest opset a rule required (0: none).
  std::int64_t required_opset() const { return opset_; }

 private:
  template <class V>
  std::string put(std::string_view stem, const std::vector<std::int64_t>& dims, std::span<const V> v) {
    const std::string name = fresh(stem);
    onnx::TensorProto* t = g_.add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (auto d : dims) t->add_dims(d);
    for (V x : v) t->add_float_data(static_cast<float>(x));
    return name;
  }

  onnx::GraphProto& g_;
  std::size_t counter_ = 0;
  std::int64_t opset_ = 0;
};

/// The per-layer export rule (core/onnx_form.hpp; specialised in each op's header).
using nnlens::onnx_export_rule;

namespace detail {
/// The first run-time layer form that exports as a pass-through of its input (no parameters, output
/// = input): it stands for the network of no layers.  V is the layer variant.
template <class V>
struct onnx_passthrough_form;
template <class... Ls>
struct onnx_passthrough_form<std::variant<Ls...>> {
  template <class L>
  static constexpr bool is_pass() {
    if constexpr (OnnxImportable<L>) {
      if constexpr (requires { onnx_import_rule<L>::passthrough; })
        return onnx_import_rule<L>::passthrough && std::is_empty_v<L>;
      else
        return false;
    } else {
      return false;
    }
  }
  template <class L, class... Rs>
  static auto pick() {
    if constexpr (is_pass<L>())
      return std::type_identity<L>{};
    else {
      static_assert(sizeof...(Rs) > 0, "ONNX export: no run-time layer form is a pass-through");
      return pick<Rs...>();
    }
  }
  using type = typename decltype(pick<Ls...>())::type;
};
}  // namespace detail

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
  for (std::size_t i = 0; i < net.size(); ++i)
    x = nnlens::detail::onnx_emit_variant(net.layer(i), c, x, checked.shape_at(i), checked.shape_at(i + 1));
  // The last value is renamed "output" (the network of no layers: one pass-through node).
  if (g->node_size() == 0 || x == "input") {
    using P = typename detail::onnx_passthrough_form<typename basic_dynamic_network<T>::layer_type>::type;
    const int first = g->node_size();
    onnx_export_rule<P>::emit(P{}, c, x, checked.input_shape(), checked.input_shape());
    onnx::NodeProto* n = g->mutable_node(first);
    n->set_name("node_output");
    n->set_output(0, "output");
  } else {
    for (auto& n : *g->mutable_node())
      for (auto& s : *n.mutable_input())
        if (s == x) s = "output";
    for (auto& n : *g->mutable_node())
      for (auto& s : *n.mutable_output())
        if (s == x) s = "output";
  }
  if (c.required_opset() > o.opset) op->set_version(c.required_opset());  // HardSwish 14, Gelu 20
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
