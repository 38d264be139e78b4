// nnlens/io/onnx/patterns.hpp -- ops that exporters spell as several nodes, read back as one
// (part of nnlens::onnx).  Before the import walks the graph, each pattern below is replaced by the
// one node the op's import rule reads:
//   LayerNorm  ReduceMean(x, axes [-1]) -> Sub(x, mean) -> Pow(., 2) -> ReduceMean(axes [-1])
//              -> Add(., eps) -> Sqrt -> Div(centred, .), then Mul(., scale) and Add(., bias)
//              when they follow (torch.onnx's layer_norm below opset 17)
//              -> LayerNormalization(x, scale, bias){axis = -1, epsilon = eps}
//   GELU       Div(x, sqrt 2) -> Erf -> Add(., 1) -> Mul(x, .) -> Mul(., 0.5) (either operand
//              order; torch.onnx's gelu below opset 20)  -> Gelu(x)
// A pattern is replaced only when its inner values are read by nothing outside it and its
// constants are what the op needs (exponent 2, 1/sqrt 2 within 1e-6, 1, 0.5); anything else stays
// as it is and the import reads it node by node (and may refuse it, naming the node).
#pragma once

#include <cmath>
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "nnlens/io/onnx/proto.hpp"

namespace nnlens::io::detail {

class onnx_patterns {
 public:
  onnx_patterns(std::vector<onnx::NodeProto>& nodes, const onnx::GraphProto& g) : nodes_(nodes), g_(g) {
    for (const auto& t : g.initializer()) init_[t.name()] = &t;
  }

  void run() {
    index();
    for (std::size_t i = 0; i < nodes_.size(); ++i) layer_norm(i);
    index();
    for (std::size_t i = 0; i < nodes_.size(); ++i) gelu(i);
    std::vector<onnx::NodeProto> kept;
    for (std::size_t i = 0; i < nodes_.size(); ++i)
      if (!dead_.count(i)) kept.push_back(std::move(nodes_[i]));
    nodes_ = std::move(kept);
  }

 private:
  std::vector<onnx::NodeProto>& nodes_;
  const onnx::GraphProto& g_;
  std::map<std::string, const onnx::TensorProto*> init_;
  std::map<std::string, std::size_t> producer_;
  std::map<std::string, std::vector<std::size_t>> readers_;
  std::map<std::size_t, bool> dead_;

  void index() {
    producer_.clear(), readers_.clear();
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      if (dead_.count(i)) continue;
      for (const auto& o : nodes_[i].output()) producer_[o] = i;
      for (const auto& in : nodes_[i].input()) readers_[in].push_back(i);
    }
    for (const auto& o : g_.output()) readers_[o.name()].push_back(std::size_t(-1));  // the graph reads it
  }
  /// The one live node reading value v, if exactly one does (and the graph output does not).
  std::optional<std::size_t> only_reader(const std::string& v, const char* op) const {
    auto it = readers_.find(v);
    if (it == readers_.end() || it->second.size() != 1 || it->second[0] == std::size_t(-1)) return std::nullopt;
    if (nodes_[it->second[0]].op_type() != op) return std::nullopt;
    return it->second[0];
  }
  std::size_t reader_count(const std::string& v) const {
    auto it = readers_.find(v);
    return it == readers_.end() ? 0 : it->second.size();
  }
  /// The single value of a constant (an initializer or a Constant node's `value`).
  std::optional<double> scalar(const std::string& v) const {
    const onnx::TensorProto* t = nullptr;
    if (auto it = init_.find(v); it != init_.end()) t = it->second;
    else if (auto p = producer_.find(v); p != producer_.end() && nodes_[p->second].op_type() == "Constant") {
      for (const auto& a : nodes_[p->second].attribute())
        if (a.name() == "value" && a.has_t()) t = &a.t();
        else if (a.name() == "value_float") return double(a.f());
    }
    if (!t) return std::nullopt;
    try {
      const onnx_tensor c = tensor_from_proto(*t, v);
      if (c.values.size() != 1) return std::nullopt;
      return c.values[0];
    } catch (const error&) {
      return std::nullopt;
    }
  }
  bool is_constant(const std::string& v) const {
    if (init_.count(v)) return true;
    auto p = producer_.find(v);
    return p != producer_.end() && nodes_[p->second].op_type() == "Constant";
  }
  /// The other input of binary node k than value v ("" when v is not an input).
  std::string other(std::size_t k, const std::string& v) const {
    const auto& n = nodes_[k];
    if (n.input_size() != 2) return "";
    if (n.input(0) == v) return n.input(1);
    if (n.input(1) == v) return n.input(0);
    return "";
  }
  /// A ReduceMean over the last axis only, keeping it.
  bool mean_last(std::size_t k) const {
    const auto& n = nodes_[k];
    if (n.op_type() != "ReduceMean" || onnx_attr_i(n, "keepdims", 1) != 1 || n.input_size() != 1) return false;
    const auto axes = onnx_attr_ints(n, "axes");
    return axes.size() == 1 && axes[0] == -1;
  }
  static bool near(std::optional<double> v, double want, double tol) { return v && std::abs(*v - want) <= tol; }

  void layer_norm(std::size_t r1) {
    if (dead_.count(r1) || !mean_last(r1)) return;
    const std::string x = nodes_[r1].input(0), mean = nodes_[r1].output(0);
    const auto sub = only_reader(mean, "Sub");
    if (!sub || nodes_[*sub].input(0) != x || nodes_[*sub].input(1) != mean) return;
    const std::string centred = nodes_[*sub].output(0);
    auto it = readers_.find(centred);
    if (it == readers_.end() || it->second.size() != 2) return;
    std::size_t pw = it->second[0], dv = it->second[1];
    if (nodes_[pw].op_type() != "Pow") std::swap(pw, dv);
    if (nodes_[pw].op_type() != "Pow" || nodes_[dv].op_type() != "Div" || nodes_[pw].input(0) != centred ||
        nodes_[dv].input(0) != centred || !near(scalar(nodes_[pw].input(1)), 2.0, 0.0))
      return;
    const auto r2 = only_reader(nodes_[pw].output(0), "ReduceMean");
    if (!r2 || !mean_last(*r2)) return;
    const auto add = only_reader(nodes_[*r2].output(0), "Add");
    if (!add) return;
    const auto eps = scalar(other(*add, nodes_[*r2].output(0)));
    if (!eps || !(*eps > 0)) return;
    const auto sq = only_reader(nodes_[*add].output(0), "Sqrt");
    if (!sq || nodes_[dv].input(1) != nodes_[*sq].output(0) || reader_count(nodes_[*sq].output(0)) != 1) return;
    // the affine part, when it follows: Mul by a constant scale, then Add of a constant bias
    std::string out = nodes_[dv].output(0), scale, bias;
    std::vector<std::size_t> done{r1, *sub, pw, *r2, *add, *sq, dv};
    if (const auto mul = only_reader(out, "Mul"); mul && is_constant(other(*mul, out))) {
      scale = other(*mul, out);
      out = nodes_[*mul].output(0);
      done.push_back(*mul);
      if (const auto ab = only_reader(out, "Add"); ab && is_constant(other(*ab, out))) {
        bias = other(*ab, out);
        out = nodes_[*ab].output(0);
        done.push_back(*ab);
      }
    }
    onnx::NodeProto ln;
    ln.set_op_type("LayerNormalization");
    ln.set_name(nodes_[r1].name().empty() ? out : nodes_[r1].name() + " (LayerNorm)");
    ln.add_input(x);
    ln.add_input(scale);  // "" when absent: the import rule takes 1
    if (!bias.empty()) ln.add_input(bias);
    ln.add_output(out);
    auto* a = ln.add_attribute();
    a->set_name("axis"), a->set_type(onnx::AttributeProto::INT), a->set_i(-1);
    auto* e = ln.add_attribute();
    e->set_name("epsilon"), e->set_type(onnx::AttributeProto::FLOAT), e->set_f(float(*eps));
    replace(done, std::move(ln));
  }

  void gelu(std::size_t d) {
    if (dead_.count(d) || nodes_[d].op_type() != "Div" || nodes_[d].input_size() != 2) return;
    const std::string x = nodes_[d].input(0);
    if (!near(scalar(nodes_[d].input(1)), std::sqrt(2.0), 1e-6)) return;
    const auto erf = only_reader(nodes_[d].output(0), "Erf");
    if (!erf) return;
    const auto add = only_reader(nodes_[*erf].output(0), "Add");
    if (!add || !near(scalar(other(*add, nodes_[*erf].output(0))), 1.0, 0.0)) return;
    const auto m1 = only_reader(nodes_[*add].output(0), "Mul");
    if (!m1 || other(*m1, nodes_[*add].output(0)) != x) return;
    const auto m2 = only_reader(nodes_[*m1].output(0), "Mul");
    if (!m2 || !near(scalar(other(*m2, nodes_[*m1].output(0))), 0.5, 0.0)) return;
    onnx::NodeProto g;
    g.set_op_type("Gelu");
    g.set_name(nodes_[d].name().empty() ? nodes_[*m2].output(0) : nodes_[d].name() + " (GELU)");
    g.add_input(x);
    g.add_output(nodes_[*m2].output(0));
    replace({d, *erf, *add, *m1, *m2}, std::move(g));
  }

  /// The pattern's nodes give way to one node, standing where the last of them stood.
  void replace(const std::vector<std::size_t>& done, onnx::NodeProto n) {
    std::size_t last = 0;
    for (std::size_t k : done) last = std::max(last, k);
    for (std::size_t k : done)
      if (k != last) dead_[k] = true;
    nodes_[last] = std::move(n);
  }
};

/// Rewrites the patterns above in place (nodes in topological order, as the graph lists them).
inline void onnx_read_patterns(std::vector<onnx::NodeProto>& nodes, const onnx::GraphProto& g) {
  onnx_patterns(nodes, g).run();
}

}  // namespace nnlens::io::detail
