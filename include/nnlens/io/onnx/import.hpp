// nnlens/io/onnx/import.hpp -- ONNX graph -> DynamicNetwork (part of nnlens::onnx).
//
// detail::onnx_importer walks the nodes in their (topological) order, keeping constants as
// onnx_tensor and activations as onnx_act (values.hpp).  Each node maps to zero or one layer:
//   Gemm, MatMul (x@W, or W@x for a file without a batch axis)  -> Dense (W stored [in, out])
//   Add/Sub/Mul/Div with a constant                              -> Affine (folded into a bias later)
//   a node joining activations forked from one value: the composite whose header's
//   onnx_join_rule<L> names its op type (Add -> DynamicResidual, Concat -> DynamicConcat)
//   Conv -> Conv2D (graph rewriting here: pads, a pending Pad, bias folding in fuse.hpp)
//   Reshape, Transpose, Pad: layout_nodes.hpp
//   any other node with an activation input: the layer form whose header's onnx_import_rule<L>
//   lists its op type (core/onnx_form.hpp) builds it, found by walking the variant of run-time
//   layer forms at compile time (MaxPool, AveragePool, GlobalAveragePool, BatchNormalization, Relu,
//   LeakyRelu, Clip, Softmax, Flatten; Dropout and Identity pass their input through)
//   Constant, Shape, Gather, Unsqueeze, Concat, Cast on constants -> constant folding (state.hpp)
// Chains are then folded by onnx_fuse (fuse.hpp).
// requires: one run-time graph input (others bound through onnx_options::extra_inputs), a
//           batch-leading input (or a rank-1 input without batch axis), opset <= 20 of the default
//           domain (tested: 7..17, and 20 with Gelu).  Anything else -> io_error naming the node, its op type and the supported set.
// ensures: every parameter of the network is finite: a NaN/Inf initializer, Constant or attribute
//          is an io_error naming the tensor (or attribute), its node and the element (state.hpp).
#pragma once

#include <algorithm>
#include <array>
#include <iterator>
#include <string_view>
#include <type_traits>
#include <variant>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "nnlens/core/onnx_form.hpp"
#include "nnlens/io/onnx/fuse.hpp"
#include "nnlens/io/onnx/layout_nodes.hpp"
#include "nnlens/io/onnx/proto.hpp"
#include "nnlens/io/onnx/state.hpp"
#include "nnlens/io/onnx/values.hpp"
#include "nnlens/network/parameters.hpp"

namespace nnlens::io::detail {

class onnx_importer : onnx_layout_nodes {
 public:
  using onnx_layout_nodes::onnx_layout_nodes;

  DynamicNetwork run(onnx_info& info) {
    info.producer = m_.producer_name();
    for (const auto& o : m_.opset_import())
      if (o.domain().empty() || o.domain() == "ai.onnx") opset_ = o.version();
    info.opset = opset_;
    if (opset_ < 1 || opset_ > 20)
      throw io_error(nnlens::detail::concat("ONNX: ", path_, ": opset ", opset_,
                                            " of the default domain is not supported (1 to 20; tested: 7 to 17, and 20)"));
    for (const auto& t : g_.initializer()) consts_[t.name()] = tensor_from_proto(t, where_t(t.name()));
    // run-time inputs: graph inputs that are not initializers
    std::vector<const onnx::ValueInfoProto*> ins;
    for (const auto& v : g_.input())
      if (!consts_.count(v.name())) ins.push_back(&v);
    if (ins.empty()) throw io_error("ONNX: " + path_ + ": the graph has no run-time input");
    if (ins.size() != 1 + opt_.extra_inputs.size())
      throw io_error(nnlens::detail::concat("ONNX: ", path_, ": the graph has ", ins.size(),
                                            " run-time inputs; nnlens networks take one (bind the others with "
                                            "onnx_options::extra_inputs)"));
    for (std::size_t i = 1; i < ins.size(); ++i) consts_[ins[i]->name()] = opt_.extra_inputs[i - 1];
    if (g_.output_size() != 1)
      throw io_error(nnlens::detail::concat("ONNX: ", path_, ": the graph has ", g_.output_size(),
                                            " outputs; nnlens networks have one"));
    count_uses();
    const shape in = set_input(*ins[0], info);
    for (const auto& n : nodes_) node(n);
    const std::string& out = g_.output(0).name();
    info.output_name = out;
    auto it = acts_.find(out);
    if (it == acts_.end()) throw io_error("ONNX: " + path_ + ": the output '" + out + "' does not depend on the input");
    onnx_act& a = it->second;
    if (a.anchor != 0)
      throw io_error("ONNX: " + path_ + ": unsupported topology: the graph branches without joining again (" +
                     onnx_join_ops() + " of the branches; nnlens networks are chains with composite blocks)");
    if (!a.perm.empty())
      throw io_error("ONNX: " + path_ + ": the output is a transposed tensor (its layout differs from storage order)");
    if (a.has_pad()) throw io_error("ONNX: " + path_ + ": the output is a Pad node's result");
    onnx_fuse(a.layers);
    DynamicNetwork net(in);
    for (std::size_t i = 0; i < a.layers.size(); ++i) {
      try {
        net.add(std::move(a.layers[i]));
      } catch (const error& e) {
        throw io_error("ONNX: " + path_ + ": " + e.what());
      }
    }
    // The constants were finite (cst()); what folding made of them, or a double beyond float, may not be.
    try {
      require_finite_parameters(net);
    } catch (const value_error& e) {
      throw io_error("ONNX: " + path_ + ": " + e.what() + " after import (a constant overflows the network's scalar)");
    }
    return net;
  }


 private:
  // ---- nodes ----
  void node(const onnx::NodeProto& n) {
    const std::string& op = n.op_type();
    if (!n.domain().empty() && n.domain() != "ai.onnx") fail(n, "operators of domain '" + n.domain() + "' are not supported");
    if (n.output_size() < 1 || n.output(0).empty()) fail(n, "has no output");
    static const std::map<std::string, int> min_inputs = {
        {"Gemm", 2}, {"MatMul", 2}, {"Add", 2}, {"Sub", 2}, {"Mul", 2}, {"Div", 2}, {"Conv", 2},
        {"BatchNormalization", 5}, {"Gather", 2}, {"Shape", 1}, {"Reshape", 1}, {"Unsqueeze", 1}};
    auto mi = min_inputs.find(op);
    if (n.input_size() < (mi == min_inputs.end() ? (op == "Constant" ? 0 : 1) : mi->second))
      fail(n, nnlens::detail::concat("has ", n.input_size(), " inputs, too few"));
    bool any_act = false;
    for (const auto& i : n.input()) any_act = any_act || (!i.empty() && is_act(i));
    if (op == "Constant") return constant(n);
    if (op == "Shape") return shape_of(n);
    if (!any_act) return fold(n);
    if (op == "Gemm") return gemm(n);
    if (op == "MatMul") return matmul(n);
    if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div") return arith(n);
    if (op == "Conv") return conv(n);
    if (op == "Reshape") return reshape(n);
    if (op == "Transpose") return transpose(n);
    if (op == "Pad") return pad(n);
    if (op == "Concat" && n.input_size() == 1) return out(n, take(n, 0));  // one operand: the identity
    if (act_inputs(n) >= 2) return join(n);
    if (by_rule(n)) return;  // one node -> the op whose header's onnx_import_rule lists it
    fail(n, "unsupported operator; nnlens supports " + onnx_supported_ops());
  }

  /// core/onnx_form.hpp's view of node n whose activation input is a (the importer's state behind it).
  class node_view final : public onnx_node_view {
   public:
    node_view(onnx_importer& s, const onnx::NodeProto& n, onnx_act& a) : s_(s), n_(n), a_(a) {}
    std::string_view op() const override { return n_.op_type(); }
    std::int64_t opset() const override { return s_.opset_; }
    bool batch_axis() const override { return s_.batch_; }
    std::int64_t attr_i(std::string_view name, std::int64_t def) const override {
      return onnx_attr_i(n_, std::string(name).c_str(), def);
    }
    double attr_f(std::string_view name, double def, bool allow_inf) const override {
      return s_.attr_f(n_, std::string(name).c_str(), def, allow_inf);
    }
    std::vector<std::int64_t> attr_ints(std::string_view name, std::vector<std::int64_t> def) const override {
      return onnx_attr_ints(n_, std::string(name).c_str(), def);
    }
    std::string attr_s(std::string_view name, std::string def) const override {
      return onnx_attr_s(n_, std::string(name).c_str(), def);
    }
    int input_count() const override { return n_.input_size(); }
    bool has_input(int i) const override { return i >= 0 && i < n_.input_size() && !n_.input(i).empty(); }
    onnx_const_view constant(int i, bool allow_inf) const override {
      const onnx_tensor* t = &s_.any_cst(n_, i);
      if (allow_inf)
        s_.require_finite(n_, i, *t, true);
      else
        t = &s_.cst(n_, i);
      return {t->dims, t->values};
    }
    shape input_shape() const override { return a_.store; }
    shape fork_shape() const override { return fork.rank ? fork : a_.store; }
    std::vector<std::int64_t> input_dims() const override { return a_.logical; }
    bool plain_image() const override { return a_.plain_image(); }
    bool transposed() const override { return !a_.perm.empty(); }
    bool channels_last() const override { return onnx_importer::channels_last(a_); }
    std::array<std::size_t, 4> pending_pad() const override { return a_.pad; }
    void absorb_pad() override { absorbed = true; }
    void set_output_dims(std::vector<std::int64_t> d) override { dims = std::move(d), has_dims = true; }
    [[noreturn]] void fail(const std::string& why) const override { s_.fail(n_, why); }

    bool absorbed = false, has_dims = false;
    std::vector<std::int64_t> dims;
    shape fork{};  // a join's forked value (fork_shape)

   private:
    onnx_importer& s_;
    const onnx::NodeProto& n_;
    onnx_act& a_;
  };

  /// The node built by the import rule of layer form L, if L's rule lists n's op type.
  template <class L>
  bool try_rule(const onnx::NodeProto& n) {
    if constexpr (OnnxImportable<L>) {
      const auto& ops = onnx_import_rule<L>::ops;
      if (std::find(std::begin(ops), std::end(ops), n.op_type()) == std::end(ops)) return false;
      onnx_act a = take(n, 0);
      const shape before = a.store;
      node_view v(*this, n, a);
      onnx_import_rule<L>::build(v, [&](auto layer) { emit(n, a, std::move(layer)); });
      if (v.absorbed) a.pad = {0, 0, 0, 0};
      if (v.has_dims) {
        a.logical = std::move(v.dims);
      } else if (!(a.store == before)) {  // a new storage shape: the logical dims follow it
        a.logical.clear();
        for (std::size_t i = 0; i < a.store.rank; ++i) a.logical.push_back(std::int64_t(a.store[i]));
      }
      out(n, std::move(a));
      return true;
    } else {
      return false;
    }
  }
  bool by_rule(const onnx::NodeProto& n) {
    return []<class... Ls>(onnx_importer& self, const onnx::NodeProto& node, std::type_identity<std::variant<Ls...>>) {
      return (self.try_rule<Ls>(node) || ...);
    }(*this, n, std::type_identity<onnx_layer>{});
  }

  /// Dense from a logical [K, N] matrix w(k, o) applied to activation a (rows permuted to storage).
  template <class F>
  void dense(const onnx::NodeProto& n, onnx_act& a, std::size_t K, std::size_t N, F w,
             const std::vector<double>& bias) {
    if (a.logical.size() != 1)
      fail(n, "needs a flat input per sample (rank 2 with batch); got per-sample shape " + dims_str(a.logical));
    if (std::size_t(a.logical[0]) != K)
      fail(n, nnlens::detail::concat("the input has ", a.logical[0], " features, the weights expect ", K));
    if (a.has_pad()) fail(n, "follows a Pad node (only Conv and AveragePool absorb padding)");
    Dense<dyn, float> d;
    d.W = tensor<float, 2>::from_shape({K, N});
    d.b = tensor<float, 1>::from_shape({N});
    for (std::size_t k = 0; k < K; ++k)
      for (std::size_t o = 0; o < N; ++o) d.W(a.storage_index(k), o) = float(w(k, o));
    for (std::size_t o = 0; o < N; ++o) d.b(o) = float(bias[o]);
    if (a.store.rank != 1) emit(n, a, Flatten{});
    emit(n, a, std::move(d));
    a.perm.clear();
    a.logical = {std::int64_t(N)};
  }

  /// A bias-like constant c broadcast to N outputs (scalar, [N], [1,N]).
  std::vector<double> bias_of(const onnx::NodeProto& n, const onnx_tensor* c, std::size_t N, double beta) {
    std::vector<double> b(N, 0.0);
    if (!c) return b;
    std::size_t cn = c->size();
    for (std::size_t i = 0; i + 1 < c->dims.size(); ++i)
      if (c->dims[i] != 1) fail(n, "the bias C must broadcast per output ([N], [1,N] or a scalar)");
    if (cn != 1 && cn != N) fail(n, nnlens::detail::concat("the bias has ", cn, " values, expected 1 or ", N));
    for (std::size_t o = 0; o < N; ++o) b[o] = beta * c->values[cn == 1 ? 0 : o];
    return b;
  }

  void gemm(const onnx::NodeProto& n) {
    if (!is_act(n.input(0))) fail(n, "input A must be the activation (B and C constants)");
    const double alpha = attr_f(n, "alpha", 1.0), beta = attr_f(n, "beta", 1.0);
    if (onnx_attr_i(n, "transA", 0) != 0) fail(n, "transA = 1 on the activation is not supported");
    const bool tb = onnx_attr_i(n, "transB", 0) != 0;
    const onnx_tensor& B = cst(n, 1);
    if (B.dims.size() != 2) fail(n, "B must be a matrix");
    const std::size_t K = std::size_t(tb ? B.dims[1] : B.dims[0]), N = std::size_t(tb ? B.dims[0] : B.dims[1]);
    onnx_act a = take(n, 0);
    if (!batch_) fail(n, "Gemm needs a batch-leading input");
    const auto bias = bias_of(n, opt_cst(n, 2), N, beta);
    dense(n, a, K, N, [&](std::size_t k, std::size_t o) { return alpha * (tb ? B.values[o * K + k] : B.values[k * N + o]); },
          bias);
    out(n, std::move(a));
  }

  void matmul(const onnx::NodeProto& n) {
    if (is_act(n.input(0)) && is_const(n.input(1))) {
      const onnx_tensor& B = cst(n, 1);
      if (B.dims.size() != 2) fail(n, "the constant operand must be a matrix");
      const std::size_t K = std::size_t(B.dims[0]), N = std::size_t(B.dims[1]);
      onnx_act a = take(n, 0);
      if (channels_last(a)) return pointwise(n, std::move(a), B);
      dense(n, a, K, N, [&](std::size_t k, std::size_t o) { return B.values[k * N + o]; }, std::vector<double>(N, 0.0));
      return out(n, std::move(a));
    }
    if (is_const(n.input(0)) && is_act(n.input(1))) {  // W @ x, x a column vector (no batch axis)
      const onnx_tensor& A = cst(n, 0);
      if (A.dims.size() != 2) fail(n, "the constant operand must be a matrix");
      onnx_act a = take(n, 1);
      if (batch_) fail(n, "W @ x with the activation on the right needs an input without batch axis");
      const std::size_t N = std::size_t(A.dims[0]), K = std::size_t(A.dims[1]);
      dense(n, a, K, N, [&](std::size_t k, std::size_t o) { return A.values[o * K + k]; }, std::vector<double>(N, 0.0));
      return out(n, std::move(a));
    }
    fail(n, "only a product of the activation with a constant matrix is supported");
  }

  /// x @ B on the last axis of an image seen channels-last ([H,W,C] over storage [C,H,W]:
  /// ConvNeXt's permute + Linear) is a 1x1 convolution of the stored image; the result is seen
  /// channels-last too.
  void pointwise(const onnx::NodeProto& n, onnx_act a, const onnx_tensor& B) {
    const std::size_t K = std::size_t(B.dims[0]), N = std::size_t(B.dims[1]);
    if (K != a.store[0]) fail(n, nnlens::detail::concat("the input has ", a.store[0], " channels, the weights expect ", K));
    Conv2DG<dyn, conv_geometry_dyn, float> c;
    c.geometry = conv_geometry{};
    c.geometry.kh = c.geometry.kw = 1;
    c.W = tensor<float, 4>::from_shape({N, K, 1, 1});
    c.b = tensor<float, 1>::from_shape({N});
    for (std::size_t o = 0; o < N; ++o) {
      for (std::size_t k = 0; k < K; ++k) c.W(o, k, 0, 0) = float(B.values[k * N + o]);
      c.b(o) = 0.0f;
    }
    emit(n, a, std::move(c));
    a.logical = {std::int64_t(a.store[1]), std::int64_t(a.store[2]), std::int64_t(N)};
    a.perm = a.store[1] * a.store[2] == 1 ? std::vector<std::size_t>{} : channels_last_perm(a.store);
    out(n, std::move(a));
  }
  /// Whether a is a stored image [C,H,W] whose logical dims are [H,W,C] in that order.
  static bool channels_last(const onnx_act& a) {
    if (a.store.rank != 3 || a.logical.size() != 3) return false;
    if (std::size_t(a.logical[2]) != a.store[0] || std::size_t(a.logical[0]) != a.store[1] ||
        std::size_t(a.logical[1]) != a.store[2])
      return false;
    if (a.store[1] * a.store[2] == 1) return a.perm.empty();  // [1,1,C]: both orders are one
    return a.perm == channels_last_perm(a.store);
  }
  static std::vector<std::size_t> channels_last_perm(shape s) {
    const std::size_t C = s[0], P = s[1] * s[2];
    std::vector<std::size_t> p(C * P);
    for (std::size_t k = 0; k < p.size(); ++k) p[k] = (k % C) * P + k / C;
    return p;
  }

  void arith(const onnx::NodeProto& n) {
    const std::string& op = n.op_type();
    if (is_act(n.input(0)) && is_act(n.input(1))) {
      if (op != "Add" && op != "Mul")
        fail(n, "of two activations is not supported (only Add: residual connections; Mul: products, x * Sigmoid(x))");
      return join(n);
    }
    const bool act_first = is_act(n.input(0));
    const onnx_tensor& c = cst(n, act_first ? 1 : 0);
    onnx_act a = take(n, act_first ? 0 : 1);
    if (a.has_pad()) fail(n, "follows a Pad node (only Conv and AveragePool absorb padding)");
    std::vector<double> v = onnx_expand(c, a, batch_, where_n(n));
    std::vector<double> s(v.size(), 1.0), t(v.size(), 0.0);
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (op == "Add") t[i] = v[i];
      else if (op == "Sub") {
        if (act_first) t[i] = -v[i];
        else s[i] = -1.0, t[i] = v[i];
      } else if (op == "Mul") s[i] = v[i];
      else {
        if (!act_first) fail(n, "division of a constant by the activation is not piecewise-linear");
        s[i] = 1.0 / v[i];
      }
    }
    std::vector<double> sc = onnx_compress(s, a.store), tc = onnx_compress(t, a.store);
    if (sc.size() != tc.size()) {  // bring both to the larger count
      const std::size_t m = std::max(sc.size(), tc.size());
      sc = sc.size() == m ? sc : (m == v.size() ? s : onnx_compress_to(s, a.store, m));
      tc = tc.size() == m ? tc : (m == v.size() ? t : onnx_compress_to(t, a.store, m));
    }
    Affine<dyn, float> l;
    l.s = tensor<float, 1>::from_shape({sc.size()});
    l.t = tensor<float, 1>::from_shape({tc.size()});
    for (std::size_t i = 0; i < sc.size(); ++i) l.s(i) = float(sc[i]), l.t(i) = float(tc[i]);
    emit(n, a, std::move(l));
    out(n, std::move(a));
  }
  static std::vector<double> onnx_compress_to(const std::vector<double>& v, shape s, std::size_t m) {
    if (m == 1) return {v[0]};
    std::vector<double> r(m);
    const std::size_t g = v.size() / m;
    for (std::size_t i = 0; i < m; ++i) r[i] = v[i * g];
    (void)s;
    return r;
  }

  int act_inputs(const onnx::NodeProto& n) const {
    int k = 0;
    for (const auto& i : n.input()) k += !i.empty() && is_act(i);
    return k;
  }
  static std::string onnx_join_ops() {
    std::string r;
    []<class... Ls>(std::string& out, std::type_identity<std::variant<Ls...>>) {
      auto add = [&]<class L>(std::type_identity<L>) {
        if constexpr (OnnxJoinable<L>) out += (out.empty() ? "" : ", ") + std::string(onnx_join_rule<L>::op);
      };
      (add(std::type_identity<Ls>{}), ...);
    }(r, std::type_identity<onnx_layer>{});
    return r;
  }

  /// A node joining activations that fork from one value: the composite op whose onnx_join_rule
  /// names the node's op type builds it from the branches (the chains from the fork to each input).
  void join(const onnx::NodeProto& n) {
    std::vector<onnx_act> ops;
    for (int i = 0; i < n.input_size(); ++i) {
      if (n.input(i).empty() || !is_act(n.input(i)))
        fail(n, "joins activations with a constant (only activations forked from one value are joined)");
      ops.push_back(take(n, i));
    }
    for (const auto& a : ops) {
      if (a.anchor == 0) fail(n, "joins activations that do not fork from one value (unsupported topology)");
      if (a.has_pad()) fail(n, "joins the result of a Pad node");
      if (a.perm != ops[0].perm) fail(n, "joins activations of different layouts");
    }
    join_inner_forks(n, ops);
    for (const auto& a : ops)
      if (a.anchor != ops[0].anchor) fail(n, "joins activations that do not fork from one value (unsupported topology)");
    onnx_act res;
    if (!by_join_rule(n, ops, res)) fail(n, "joins activations; nnlens joins them with " + onnx_join_ops());
    out(n, std::move(res));
  }
  /// Operands that fork from a value inside one branch are joined there first, by the node's own
  /// join, when they stand next to each other: the joins are associative, so Inception's
  /// Concat(a, b1, b2, c), whose b1 and b2 fork from a value of b's branch, is
  /// Concat(a, Concat(b1, b2), c).  Deepest forks first; leaves ops alone where that does not apply
  /// (the caller then refuses the node).
  void join_inner_forks(const onnx::NodeProto& n, std::vector<onnx_act>& ops) {
    auto depth = [&](int anchor) {
      int d = 0;
      for (int a = anchor; a > 0; a = anchors_[std::size_t(a - 1)].parent) ++d;
      return d;
    };
    for (;;) {
      int deepest = ops[0].anchor;
      bool same = true;
      for (const auto& a : ops) {
        same = same && a.anchor == ops[0].anchor;
        if (depth(a.anchor) > depth(deepest)) deepest = a.anchor;
      }
      if (same) return;
      const auto is_deepest = [&](const onnx_act& a) { return a.anchor == deepest; };
      const auto first = std::find_if(ops.begin(), ops.end(), is_deepest);
      const auto last = std::find_if(ops.rbegin(), ops.rend(), is_deepest).base();  // one past the last
      if (last - first < 2 || !std::all_of(first, last, is_deepest)) return;
      std::vector<onnx_act> run(std::make_move_iterator(first), std::make_move_iterator(last));
      onnx_act joined;
      if (!by_join_rule(n, run, joined)) return;
      *first = std::move(joined);
      ops.erase(first + 1, last);
    }
  }
  /// The composite op L from the branches, when L's join rule names n's op type and accepts them
  /// (a rule may decline: SiLU takes only Mul(x, Sigmoid(x)), and Product the other products).
  template <class L>
  bool try_join(const onnx::NodeProto& n, std::vector<onnx_act>& ops, std::vector<DynamicBlock<float>>& branches,
                onnx_act& res) {
    if constexpr (OnnxJoinable<L>) {
      if (n.op_type() != onnx_join_rule<L>::op) return false;
      if constexpr (requires { onnx_join_rule<L>::accepts(branches); })
        if (!onnx_join_rule<L>::accepts(branches)) return false;
      const onnx_anchor& an = anchors_[std::size_t(ops[0].anchor - 1)];
      node_view v(*this, n, ops[0]);
      v.fork = an.store;
      L layer = onnx_join_rule<L>::build(v, std::move(branches));
      res = onnx_act{};
      res.anchor = an.parent;
      res.layers = an.layers;
      res.perm = ops[0].perm;
      res.store = an.store;  // the composite's input: the forked value
      emit(n, res, std::move(layer));
      if (v.has_dims) {
        res.logical = std::move(v.dims);
      } else if (res.store == ops[0].store) {  // e.g. a sum: the layout of its operands
        res.logical = ops[0].logical;
      } else {
        res.perm.clear();
        for (std::size_t i = 0; i < res.store.rank; ++i) res.logical.push_back(std::int64_t(res.store[i]));
      }
      return true;
    } else {
      return false;
    }
  }
  /// The join of ops by the first rule that takes it; false (ops unchanged) when none does.
  bool by_join_rule(const onnx::NodeProto& n, std::vector<onnx_act>& ops, onnx_act& res) {
    std::vector<DynamicBlock<float>> branches;
    for (auto& a : ops) {
      onnx_fuse(a.layers);
      branches.push_back(DynamicBlock<float>{std::move(a.layers)});
    }
    const bool done = []<class... Ls>(onnx_importer& self, const onnx::NodeProto& node, std::vector<onnx_act>& o,
                                      std::vector<DynamicBlock<float>>& b, onnx_act& r, std::type_identity<std::variant<Ls...>>) {
      return (self.try_join<Ls>(node, o, b, r) || ...);
    }(*this, n, ops, branches, res, std::type_identity<onnx_layer>{});
    if (!done)
      for (std::size_t k = 0; k < ops.size(); ++k) ops[k].layers = std::move(branches[k].layers);
    return done;
  }
  void conv(const onnx::NodeProto& n) {
    if (!is_act(n.input(0))) fail(n, "the data input must be the activation");
    const onnx_tensor& W = cst(n, 1);
    if (W.dims.size() != 4) fail(n, "only 2-D convolutions (4-D weights) are supported");
    onnx_act a = take(n, 0);
    if (!a.plain_image()) need_plain(n, a);
    conv_geometry g;
    const auto k = onnx_attr_ints(n, "kernel_shape", {W.dims[2], W.dims[3]});
    if (k.size() != 2 || k[0] != W.dims[2] || k[1] != W.dims[3]) fail(n, "kernel_shape does not match the weights");
    g.kh = std::size_t(k[0]);
    g.kw = std::size_t(k[1]);
    const auto s = onnx_attr_ints(n, "strides", {1, 1}), d = onnx_attr_ints(n, "dilations", {1, 1});
    if (s.size() != 2 || d.size() != 2 || s[0] < 1 || s[1] < 1 || d[0] < 1 || d[1] < 1 || s[0] > big || s[1] > big ||
        d[0] > big || d[1] > big)
      fail(n, "bad strides or dilations");
    g.stride_h = std::size_t(s[0]), g.stride_w = std::size_t(s[1]);
    g.dilation_h = std::size_t(d[0]), g.dilation_w = std::size_t(d[1]);
    const auto grp = onnx_attr_i(n, "group", 1);
    if (grp < 1 || grp > big) fail(n, "group must be positive");
    g.groups = std::size_t(grp);
    set_pads(n, a, g.kh, g.kw, g.stride_h, g.stride_w, g.dilation_h, g.dilation_w, g.pad_top, g.pad_left, g.pad_bottom,
             g.pad_right);
    Conv2DG<dyn, conv_geometry_dyn, float> c;
    c.geometry = g;
    const std::size_t O = std::size_t(W.dims[0]);
    c.W = tensor<float, 4>::from_shape({O, std::size_t(W.dims[1]), g.kh, g.kw});
    for (std::size_t i = 0; i < W.size(); ++i) c.W.data()[i] = float(W.values[i]);
    c.b = tensor<float, 1>::from_shape({O});
    const onnx_tensor* B = opt_cst(n, 2);
    if (B && B->size() != O) fail(n, "the bias does not have one value per output channel");
    for (std::size_t o = 0; o < O; ++o) c.b(o) = B ? float(B->values[o]) : 0.0f;
    emit(n, a, std::move(c));
    a.logical = {std::int64_t(a.store[0]), std::int64_t(a.store[1]), std::int64_t(a.store[2])};
    out(n, std::move(a));
  }

  /// pads / auto_pad of Conv (core/onnx_form.hpp), plus a pending Pad node's padding.
  void set_pads(const onnx::NodeProto& n, onnx_act& a, std::size_t kh, std::size_t kw, std::size_t sh, std::size_t sw,
                std::size_t dh, std::size_t dw, std::size_t& pt, std::size_t& pl, std::size_t& pb, std::size_t& pr) {
    node_view v(*this, n, a);
    const auto p = onnx_window_pads(v, kh, kw, sh, sw, dh, dw);
    pt = p[0] + a.pad[0], pl = p[1] + a.pad[1], pb = p[2] + a.pad[2], pr = p[3] + a.pad[3];
    a.pad = {0, 0, 0, 0};
  }

};

}  // namespace nnlens::io::detail
