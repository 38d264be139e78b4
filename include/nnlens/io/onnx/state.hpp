// nnlens/io/onnx/state.hpp -- the ONNX importer's state and bookkeeping (part of nnlens::onnx).
//
// detail::onnx_graph_state (onnx_options / onnx_info, the loader's public options and report, are
// in io/onnx/types.hpp):
// the values of a graph being imported (constants as onnx_tensor, activations as onnx_act), how
// many nodes read each value, the anchors (values read by several nodes: where residual branches
// start), the network input's layout (set_input: batch axis, NHWC detection), the node-input
// accessors that throw io_error naming the node, and the constant folding of shape arithmetic
// (Constant, Shape, Gather, Unsqueeze, Concat, Cast, Reshape of constants).  import.hpp adds the
// operators.
// requires: a parsed ModelProto that outlives the state.  ensures: every access to a node's inputs,
//           outputs and attributes is bounds-checked (io_error, never a protobuf CHECK); every
//           constant a layer or a shape is made from is finite (cst(): a NaN/Inf initializer,
//           Constant or bound input is an io_error naming the tensor, the node and the element;
//           only Clip's bounds may be infinite), and every integer read from a float is in range.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <utility>
#include <vector>

#include "nnlens/core/onnx_form.hpp"
#include "nnlens/io/layout.hpp"
#include "nnlens/io/onnx/patterns.hpp"
#include "nnlens/io/onnx/proto.hpp"
#include "nnlens/io/onnx/types.hpp"
#include "nnlens/io/onnx/values.hpp"

namespace nnlens::io {

/// The supported operators (for messages): the graph-level ones handled here and in import.hpp,
/// then every op type an op's onnx_import_rule lists (core/onnx_form.hpp), then constant folding.
inline const std::string& onnx_supported_ops() {
  static const std::string list = [] {
    std::string r = "Gemm, MatMul, Add, Sub, Mul, Div, Conv";
    []<class... Ls>(std::string& out, std::type_identity<std::variant<Ls...>>) {
      auto add = [&]<class L>(std::type_identity<L>) {
        if constexpr (OnnxImportable<L>)
          for (std::string_view o : onnx_import_rule<L>::ops) out += ", " + std::string(o);
      };
      (add(std::type_identity<Ls>{}), ...);
    }(r, std::type_identity<DynamicNetwork::layer_type>{});
    return r + ", Reshape, Transpose, Pad, Constant, Shape, Gather, Unsqueeze, Concat, Cast";
  }();
  return list;
}

namespace detail {

struct onnx_anchor {
  int parent = -1;
  std::vector<onnx_layer> layers;  // from the parent anchor to this value
  shape store{};                   // the value's storage shape
};

class onnx_graph_state {
 public:
  onnx_graph_state(const onnx::ModelProto& m, const std::string& path, const onnx_options& opt)
      : m_(m), g_(m.graph()), path_(path), opt_(opt), nodes_(g_.node().begin(), g_.node().end()) {
    onnx_read_patterns(nodes_, g_);
    reuse_concat_prefixes(nodes_);
  }

 protected:
  std::string where_t(const std::string& name) const { return "ONNX: " + path_ + ": tensor '" + name + "'"; }
  std::string where_n(const onnx::NodeProto& n) const {
    return "ONNX: " + path_ + ": node '" + n.name() + "' (" + n.op_type() + ")";
  }
  [[noreturn]] void fail(const onnx::NodeProto& n, const std::string& why) const {
    throw io_error(where_n(n) + ": " + why);
  }

  /// DenseNet's blocks concatenate every earlier map of the block at each layer: Concat(x0, n1, ...,
  /// nk), where the layer before read Concat(x0, n1, ..., n(k-1)).  Such a node reads that earlier
  /// Concat's output instead, Concat(c(k-1), nk): the same values (concatenation is associative), as
  /// a chain of two-operand joins that each fork from the one before, rather than k operands forking
  /// from k different values.  The longest earlier Concat along the same axis whose inputs are a
  /// prefix (of at least two) of the node's.
  static void reuse_concat_prefixes(std::vector<onnx::NodeProto>& nodes) {
    struct earlier {
      std::int64_t axis;
      std::vector<std::string> inputs;  // as the file has them (before any rewrite)
      std::string output;
    };
    std::vector<earlier> concats;
    const std::int64_t none = std::numeric_limits<std::int64_t>::min();
    for (onnx::NodeProto& n : nodes) {
      if (n.op_type() != "Concat" || n.output_size() < 1) continue;
      earlier self{onnx_attr_i(n, "axis", none), {n.input().begin(), n.input().end()}, n.output(0)};
      const earlier* best = nullptr;
      for (const earlier& m : concats) {
        const std::size_t len = m.inputs.size();
        if (len < 2 || len >= self.inputs.size() || (best && len <= best->inputs.size()) || m.axis != self.axis) continue;
        if (std::equal(m.inputs.begin(), m.inputs.end(), self.inputs.begin()) &&
            std::none_of(m.inputs.begin(), m.inputs.end(), [](const std::string& i) { return i.empty(); }))
          best = &m;
      }
      if (best) {
        n.clear_input();
        n.add_input(best->output);
        for (std::size_t i = best->inputs.size(); i < self.inputs.size(); ++i) n.add_input(self.inputs[i]);
      }
      concats.push_back(std::move(self));
    }
  }

  void count_uses() {
    for (const auto& n : nodes_) {
      if (n.op_type() == "Shape") continue;  // reads only the shape
      for (const auto& i : n.input())
        if (!i.empty()) ++uses_[i];
    }
    for (const auto& o : g_.output()) ++uses_[o.name()];
  }

  shape set_input(const onnx::ValueInfoProto& v, onnx_info& info) {
    info.input_name = v.name();
    if (!v.type().has_tensor_type() || !v.type().tensor_type().has_shape())
      throw io_error("ONNX: " + path_ + ": the input '" + v.name() + "' has no tensor shape");
    std::vector<std::int64_t> d;
    for (const auto& dim : v.type().tensor_type().shape().dim())
      d.push_back(dim.has_dim_value() ? dim.dim_value() : -1);
    info.input_dims = d;
    onnx_act a;
    if (d.empty()) throw io_error("ONNX: " + path_ + ": the input '" + v.name() + "' is a scalar (rank 0)");
    if (d.size() == 1) {
      if (d[0] <= 0) throw io_error("ONNX: " + path_ + ": the input's only extent is not fixed");
      batch_ = false;
      info.batch_axis = false;
      a.logical = d;
    } else {
      a.logical.assign(d.begin() + 1, d.end());
    }
    for (auto x : a.logical)
      if (x <= 0)
        throw io_error(nnlens::detail::concat("ONNX: ", path_, ": the input '", v.name(),
                                              "' has a symbolic or zero extent other than the batch axis"));
    if (a.logical.size() > 3)
      throw io_error("ONNX: " + path_ + ": inputs of rank > 4 (with batch) are not supported");
    if (onnx_count(a.logical, "ONNX: " + path_ + ": the input") > max_activation)
      throw io_error(nnlens::detail::concat("ONNX: ", path_, ": the input has more than ", max_activation,
                                            " elements per sample"));
    if (a.logical.size() == 3) {
      a.store = shape(std::size_t(a.logical[0]), std::size_t(a.logical[1]), std::size_t(a.logical[2]));
      info.layout = data_layout::nchw;  // [N,C,H,W]; nhwc below
      // NHWC input consumed (only) by Transpose(0,3,1,2): store it as NCHW
      const onnx::NodeProto* t = nullptr;
      int readers = 0;
      for (const auto& n : nodes_)
        for (const auto& i : n.input())
          if (i == v.name()) ++readers, t = &n;
      if (readers == 1 && t->op_type() == "Transpose" &&
          onnx_attr_ints(*t, "perm") == std::vector<std::int64_t>{0, 3, 1, 2}) {
        const std::size_t H = a.logical[0], W = a.logical[1], C = a.logical[2];
        a.store = shape(C, H, W);
        a.perm.resize(H * W * C);
        for (std::size_t h = 0; h < H; ++h)
          for (std::size_t w = 0; w < W; ++w)
            for (std::size_t c = 0; c < C; ++c) a.perm[(h * W + w) * C + c] = (c * H + h) * W + w;
        info.input_nhwc = true;
        info.layout = data_layout::nhwc;
      }
    } else {
      a.store = shape(onnx_prod(a.logical));
    }
    put(v.name(), std::move(a));
    return acts_[v.name()].store;
  }

  /// Records activation `name`; a value several nodes read becomes an anchor (a fork point).
  void put(const std::string& name, onnx_act a) {
    if (uses_[name] > 1) {
      anchors_.push_back({a.anchor, std::move(a.layers), a.store});
      a.anchor = int(anchors_.size());  // anchor ids start at 1; 0 is the origin
      a.layers.clear();
    }
    acts_[name] = std::move(a);
  }
  bool is_const(const std::string& s) const { return consts_.count(s) != 0; }
  bool is_act(const std::string& s) const { return acts_.count(s) != 0; }
  /// Constant input i, every value finite: a NaN or Inf weight is an io_error naming the tensor
  /// (initializer, Constant output or bound input), the node, and the element.  (A NaN in conv1 or
  /// fc1 would otherwise pass: ReLU absorbs it, and the outputs look finite.)
  const onnx_tensor& cst(const onnx::NodeProto& n, int i) const {
    const onnx_tensor& t = any_cst(n, i);
    if (!finite_.count(n.input(i))) {
      require_finite(n, i, t, false);
      finite_.insert(n.input(i));
    }
    return t;
  }
  /// Constant input i, unchecked: for values that only pass through (Identity, Cast, Concat, the
  /// dims Shape reads) or may be infinite (Clip's bounds, checked by the caller).
  const onnx_tensor& any_cst(const onnx::NodeProto& n, int i) const {
    if (i >= n.input_size() || n.input(i).empty()) fail(n, nnlens::detail::concat("input ", i, " is missing"));
    auto it = consts_.find(n.input(i));
    if (it == consts_.end()) fail(n, "input '" + n.input(i) + "' must be a constant (initializer or Constant)");
    return it->second;
  }
  /// Throws io_error for the first NaN (or, unless allow_inf, infinite) value of t, input i of n.
  void require_finite(const onnx::NodeProto& n, int i, const onnx_tensor& t, bool allow_inf) const {
    for (std::size_t k = 0; k < t.values.size(); ++k) {
      const double v = t.values[k];
      if (std::isfinite(v) || (allow_inf && !std::isnan(v))) continue;
      std::string at;
      if (t.dims.size() > 1) {  // the multi-index too, e.g. [0,0,3,2] of [6,1,5,5]
        std::vector<std::int64_t> idx(t.dims.size());
        std::size_t r = k;
        for (std::size_t d = t.dims.size(); d-- > 0;) idx[d] = std::int64_t(r % std::size_t(t.dims[d])), r /= std::size_t(t.dims[d]);
        at = " (index " + dims_str(idx) + " of " + dims_str(t.dims) + ")";
      }
      const std::string& name = n.input(i);
      throw io_error(nnlens::detail::concat("ONNX: ", path_, ": ", origin(name), " '", name, "' (input ", i, " of node '",
                                            n.name(), "' (", n.op_type(), ")): element ", k, at, " is ",
                                            std::isnan(v) ? "NaN" : v > 0 ? "+Inf" : "-Inf",
                                            "; weights and constants must be finite"));
    }
  }
  std::string origin(const std::string& name) const {
    for (const auto& t : g_.initializer())
      if (t.name() == name) return "initializer";
    for (const auto& n : g_.node())
      for (const auto& o : n.output())
        if (o == name) return n.op_type() == "Constant" ? "Constant" : "constant '" + n.op_type() + "' output";
    return "bound input";
  }
  /// A float attribute that becomes a weight or hyper-parameter (alpha, beta, epsilon, Clip's
  /// min/max): NaN (or, unless allow_inf, Inf) is an io_error naming the node and the attribute.
  double attr_f(const onnx::NodeProto& n, const char* name, double def, bool allow_inf = false) const {
    const double v = onnx_attr_f(n, name, def);
    if (std::isnan(v) || (!allow_inf && !std::isfinite(v)))
      fail(n, nnlens::detail::concat("attribute '", name, "' is ", std::isnan(v) ? "NaN" : v > 0 ? "+Inf" : "-Inf",
                                     "; it must be finite"));
    return v;
  }
  /// An integer-valued constant element (axes, indices, shapes, pads) as int64; io_error if it is
  /// not an integer within +-2^62 (converting such a double is undefined behaviour).
  std::int64_t int_of(const onnx::NodeProto& n, double v) const {
    if (!(v >= -4.6e18 && v <= 4.6e18) || v != std::floor(v))
      fail(n, nnlens::detail::concat("expected an integer, got ", v));
    return std::int64_t(v);
  }
  /// The single value of constant input i (an empty or multi-valued constant is an io_error).
  double scalar_cst(const onnx::NodeProto& n, int i) const { return scalar_of(n, cst(n, i), i); }
  double scalar_of(const onnx::NodeProto& n, const onnx_tensor& t, int i) const {
    if (t.values.size() != 1)
      fail(n, nnlens::detail::concat("input ", i, " must be a single value, it has ", t.values.size()));
    return t.values[0];
  }
  const onnx_tensor* opt_cst(const onnx::NodeProto& n, int i) const {
    if (i >= n.input_size() || n.input(i).empty()) return nullptr;
    return &cst(n, i);
  }
  /// The activation input i (moved out when this is its only reader).
  onnx_act take(const onnx::NodeProto& n, int i) {
    if (i >= n.input_size() || n.input(i).empty()) fail(n, nnlens::detail::concat("input ", i, " is missing"));
    auto it = acts_.find(n.input(i));
    if (it == acts_.end()) fail(n, "input '" + n.input(i) + "' is neither the network input's descendant nor a constant");
    return uses_[n.input(i)] > 1 ? it->second : std::move(it->second);
  }
  /// Appends a layer to `a` and updates its storage shape (logical dims are the caller's job).
  template <class L>
  void emit(const onnx::NodeProto& n, onnx_act& a, L layer) {
    try {
      a.store = layer_traits<L>::output_shape(layer, a.store);
    } catch (const error& e) {
      fail(n, e.what());
    }
    if (a.store.size() > max_activation)
      fail(n, nnlens::detail::concat("its output has ", a.store.size(), " elements per sample (more than ", max_activation, ")"));
    a.layers.emplace_back(std::move(layer));
  }
  void out(const onnx::NodeProto& n, onnx_act a, int k = 0) {
    for (int j = 0; j < n.output_size(); ++j)
      if (j != k && !n.output(j).empty() && uses_[n.output(j)] > 0)
        fail(n, nnlens::detail::concat("its output ", j, " ('", n.output(j), "') is used; only the first is supported"));
    put(n.output(k), std::move(a));
  }
  void need_plain(const onnx::NodeProto& n, const onnx_act& a) const {
    if (!a.plain_image())
      fail(n, nnlens::detail::concat("needs an NCHW image input [N,C,H,W]; the input's per-sample shape is ",
                                     dims_str(a.logical), a.perm.empty() ? "" : " (transposed)"));
  }
  static std::string dims_str(const std::vector<std::int64_t>& d) {
    std::string s = "[";
    for (std::size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + std::to_string(d[i]);
    return s + "]";
  }


  void constant(const onnx::NodeProto& n) {
    onnx_tensor t;
    if (const auto* a = onnx_attr(n, "value")) {
      t = tensor_from_proto(a->t(), where_n(n));
    } else if (const auto* f = onnx_attr(n, "value_float")) {
      t.values = {double(f->f())};
    } else if (const auto* fs = onnx_attr(n, "value_floats")) {
      t.dims = {fs->floats_size()};
      t.values.assign(fs->floats().begin(), fs->floats().end());
    } else if (const auto* i = onnx_attr(n, "value_int")) {
      t.values = {double(i->i())};
      t.integral = true;
    } else if (const auto* is = onnx_attr(n, "value_ints")) {
      t.dims = {is->ints_size()};
      t.values.assign(is->ints().begin(), is->ints().end());
      t.integral = true;
    } else {
      fail(n, "only value, value_float(s) and value_int(s) constants are supported");
    }
    if (n.output_size() != 1) fail(n, "expected one output");
    consts_[n.output(0)] = std::move(t);
  }

  void shape_of(const onnx::NodeProto& n) {
    onnx_tensor t;
    if (is_act(n.input(0))) {
      const onnx_act& a = acts_[n.input(0)];
      if (batch_) t.values.push_back(1);  // the batch extent, as an exporter traced it
      for (auto d : a.logical) t.values.push_back(double(d));
    } else {
      for (auto d : any_cst(n, 0).dims) t.values.push_back(double(d));
    }
    t.dims = {std::int64_t(t.values.size())};
    t.integral = true;
    consts_[n.output(0)] = std::move(t);
  }

  /// Add, Sub, Mul, Div of constants with numpy broadcasting (shape arithmetic: ShuffleNet's
  /// channels / 2); Div of two integer tensors truncates, as ONNX's integer Div.
  onnx_tensor arith_of(const onnx::NodeProto& n) {
    const onnx_tensor& a = any_cst(n, 0);
    const onnx_tensor& b = any_cst(n, 1);
    const std::size_t r = std::max(a.dims.size(), b.dims.size());
    auto dim = [&](const onnx_tensor& t, std::size_t i) {
      const std::size_t off = r - t.dims.size();
      return i < off ? std::int64_t(1) : t.dims[i - off];
    };
    onnx_tensor o;
    for (std::size_t i = 0; i < r; ++i) {
      const std::int64_t x = dim(a, i), y = dim(b, i);
      if (x != y && x != 1 && y != 1) fail(n, "the constants' shapes do not broadcast");
      o.dims.push_back(std::max(x, y));
    }
    const std::size_t count = onnx_count(o.dims, where_n(n));
    const auto os = onnx_strides(o.dims);
    auto at = [&](const onnx_tensor& t, std::size_t k) {
      std::size_t idx = 0, stride = 1;
      for (std::size_t i = r; i-- > r - t.dims.size();) {
        const std::size_t e = std::size_t(t.dims[i - (r - t.dims.size())]);
        if (e != 1) idx += ((k / os[i]) % e) * stride;
        stride *= e;
      }
      return t.values[idx];
    };
    o.integral = a.integral && b.integral;
    const std::string& op = n.op_type();
    for (std::size_t k = 0; k < count; ++k) {
      const double x = at(a, k), y = at(b, k);
      double v = op == "Add" ? x + y : op == "Sub" ? x - y : op == "Mul" ? x * y : x / y;
      if (op == "Div" && o.integral) {
        if (y == 0) fail(n, "integer division by zero");
        v = std::trunc(v);
      }
      o.values.push_back(v);
    }
    return o;
  }

  /// Whether an op type passes its input through (a layer form's onnx_import_rule says passthrough).
  static bool passthrough_op(const std::string& op) {
    return []<class... Ls>(const std::string& o, std::type_identity<std::variant<Ls...>>) {
      return (pass_rule<Ls>(o) || ...);
    }(op, std::type_identity<onnx_layer>{});
  }
  template <class L>
  static bool pass_rule(const std::string& op) {
    if constexpr (requires { onnx_import_rule<L>::passthrough; }) {
      if (!onnx_import_rule<L>::passthrough) return false;
      for (std::string_view o : onnx_import_rule<L>::ops)
        if (o == op) return true;
    }
    return false;
  }

  /// Constant folding of the shape arithmetic exporters emit (PyTorch's flatten: Shape, Gather,
  /// Unsqueeze, Concat, Reshape).
  void fold(const onnx::NodeProto& n) {
    const std::string& op = n.op_type();
    onnx_tensor r;
    if (op == "Cast") {
      r = any_cst(n, 0);
      using TP = onnx::TensorProto;
      const auto to = onnx_attr_i(n, "to", TP::FLOAT);
      r.integral = to != TP::FLOAT && to != TP::DOUBLE && to != TP::FLOAT16;
      if (r.integral)
        for (auto& v : r.values) v = std::trunc(v);
    } else if (passthrough_op(op)) {
      r = any_cst(n, 0);
    } else if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div") {
      r = arith_of(n);
    } else if (op == "Unsqueeze") {
      r = any_cst(n, 0);
      std::vector<std::int64_t> axes = opset_ >= 13 ? std::vector<std::int64_t>() : onnx_attr_ints(n, "axes");
      if (opset_ >= 13)
        for (double v : cst(n, 1).values) axes.push_back(int_of(n, v));
      const std::int64_t rank = std::int64_t(r.dims.size() + axes.size());
      for (auto& a : axes) a = a < 0 ? a + rank : a;
      std::sort(axes.begin(), axes.end());
      for (auto a : axes) {
        if (a < 0 || a > std::int64_t(r.dims.size())) fail(n, "axis out of range");
        r.dims.insert(r.dims.begin() + a, 1);
      }
    } else if (op == "Gather") {
      const onnx_tensor& d = any_cst(n, 0);
      const onnx_tensor& idx = cst(n, 1);
      if (d.dims.size() != 1 || onnx_attr_i(n, "axis", 0) != 0) fail(n, "only Gather on a 1-D constant is supported");
      r.dims = idx.dims;
      r.integral = d.integral;
      for (double v : idx.values) {
        std::int64_t k = int_of(n, v);
        if (k < 0) k += d.dims[0];
        if (k < 0 || k >= d.dims[0]) fail(n, "index out of range");
        r.values.push_back(d.values[std::size_t(k)]);
      }
    } else if (op == "Concat") {
      r.integral = true;
      for (int i = 0; i < n.input_size(); ++i) {
        const onnx_tensor& t = any_cst(n, i);
        if (t.dims.size() > 1) fail(n, "only Concat of 1-D constants is supported");
        r.integral = r.integral && t.integral;
        r.values.insert(r.values.end(), t.values.begin(), t.values.end());
      }
      r.dims = {std::int64_t(r.values.size())};
    } else if (op == "Reshape") {
      r = any_cst(n, 0);
      const onnx_tensor& s = cst(n, 1);
      std::vector<std::int64_t> d;
      std::int64_t known = 1, neg = -1;
      for (std::size_t i = 0; i < s.values.size(); ++i) {
        std::int64_t v = int_of(n, s.values[i]);
        if (v == 0 && i < r.dims.size()) v = r.dims[i];
        if (v == -1) neg = std::int64_t(i);
        else known *= v;
        d.push_back(v);
      }
      if (neg >= 0 && known > 0) d[std::size_t(neg)] = std::int64_t(r.size()) / known;
      if (onnx_count(d, where_n(n)) != r.size()) fail(n, "the new shape has a different number of elements");
      r.dims = d;
    } else {
      fail(n, "unsupported operator on constants; nnlens supports " + onnx_supported_ops());
    }
    if (n.output_size() < 1) fail(n, "no output");
    consts_[n.output(0)] = std::move(r);
  }


  static constexpr std::int64_t big = std::int64_t(1) << 20;  // cap of kernel, stride, pad, group attributes
  static constexpr std::size_t max_activation = std::size_t(1) << 24;  // cap of a per-sample activation

  const onnx::ModelProto& m_;
  const onnx::GraphProto& g_;
  std::string path_;
  const onnx_options& opt_;
  std::int64_t opset_ = 0;
  bool batch_ = true;
  std::map<std::string, onnx_tensor> consts_;
  std::map<std::string, onnx_act> acts_;
  mutable std::set<std::string> finite_;  // constants cst() has checked
  std::vector<onnx::NodeProto> nodes_;  // the graph's nodes, in order, as the importer reads them
  std::map<std::string, int> uses_;
  std::vector<onnx_anchor> anchors_;
};

}  // namespace detail
}  // namespace nnlens::io
