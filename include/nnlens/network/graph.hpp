// nnlens/network/graph.hpp -- a network as the analyses walk it: operations and the tensors between them.
//
//   run_graph<T, View> g(net)      one node per layer; a composite (Residual, Concat) becomes its
//                                  branches' layers plus a join node ("Add" or "Concat": each inner
//                                  op has its own neurons, spec §2.1); View: the analysis's data
//   op_graph<T> g(net);            the graph with NNSlicer's view (sign_rule items, synapses)
//   g.acts()                       tensors: 0 is the input; node k writes g.nodes()[k].out
//   g.run(batch, x, buffers)       forward pass over the nodes, keeping every tensor
//
// Nodes are type-erased once, when the graph is built (std::function over the layer's own traits:
// forward, sign_rule items, synapse count, its first parameter tensor), so the analyses below are
// written once for Sequential and DynamicNetwork.  The graph refers to the network: keep the
// network alive and unchanged while the graph is used.
// A layer without a sign_rule (Softmax) is a compile error for a Sequential, naming the layer
// (error_nnslicer_needs_a_sign_rule<L>), and a logic_error naming it for a DynamicNetwork.
#pragma once

#include <algorithm>
#include <cstddef>
#include <functional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "nnlens/core/composite.hpp"
#include "nnlens/core/error.hpp"
#include "nnlens/core/relevance.hpp"
#include "nnlens/core/traits.hpp"
#include "nnlens/network/dynamic_network.hpp"
#include "nnlens/network/sequential.hpp"
#include "nnlens/network/visit.hpp"

namespace nnlens {

namespace detail {
template <class L>
concept sign_is_composite = requires(const L& l, shape in) { sign_rule<L>::for_each_branch(l, in, any_branch_visitor{}); };
template <class L>
concept sign_has_synapses = requires(const L& l) {
  { sign_rule<L>::synapses(l) } -> std::convertible_to<std::size_t>;
};

template <class L>
concept sign_has_bias = requires { { sign_rule<L>::bias_parameter } -> std::convertible_to<std::size_t>; };

template <class L>
struct error_nnslicer_needs_a_sign_rule;
template <class Net>
constexpr bool require_sign_network() {
  return every_static_layer<Net>([](auto l) {
    using L = typename decltype(l)::type;
    return named_check<error_nnslicer_needs_a_sign_rule, L, SignLayer<L>>();
  });
}
}  // namespace detail

/// The operands of a composite's join node (core/composite.hpp): the tensors its branches end in
/// and where each lands in the join's output (per-sample flat offsets: 0 for every operand of a sum
/// or a product, one after another for a concat).  Shared by every run-time graph of the analyses.
struct join_operands {
  branch_join join = branch_join::sum;
  std::string_view name;  // the join node's type: the composite's join_name ("Add", ...)
  std::vector<std::size_t> ins, offsets, sizes;
  std::vector<shape> shapes;  // each operand's per-sample shape

  bool empty() const { return ins.empty(); }
  std::string_view type() const { return name; }
  bool is_product() const { return join == branch_join::product; }

  /// Walks composite L's branches (for_each_branch(f): the rule's walk) from tensor in_act,
  /// adding each inner layer with add(layer*, where, input tensor, in, out) -> its output tensor.
  /// Inner layers are named "<where>.<branch name>.<index>".
  template <class L, class ForEach, class Add>
  static join_operands build(ForEach&& for_each_branch, std::size_t in_act, shape in, const std::string& where, Add&& add) {
    join_operands j;
    j.join = composite_join_v<L>;
    j.name = composite_join_name_v<L>;
    std::size_t b = 0;
    for_each_branch([&](auto&& walk) {
      std::size_t cur = in_act;
      shape s = in;
      const std::string prefix = where + "." + branch_name_of<L>(b) + ".";
      walk([&](const auto* lp, auto idx, shape i, shape o) {
        cur = add(lp, prefix + std::to_string(std::size_t(idx)), cur, i, o);
        s = o;
      });
      j.ins.push_back(cur);
      j.sizes.push_back(s.size());
      j.shapes.push_back(s);
      ++b;
    });
    NNLENS_EXPECTS(!j.ins.empty());
    NNLENS_EXPECTS(!j.is_product() || (j.ins.size() == 2 && j.sizes[1] > 0 && j.sizes[0] % j.sizes[1] == 0));
    j.offsets = branch_offsets(j.join, j.sizes);
    return j;
  }

  /// y (batch x out_size) = the join of the operands' buffers.
  template <class T>
  void run(std::size_t batch, std::size_t out_size, const std::vector<std::vector<T>>& buffers, T* y) const {
    if (is_product()) {
      detail::gate_multiply(batch, sizes[0], sizes[1], buffers[ins[0]].data(), buffers[ins[1]].data(), y);
      return;
    }
    std::fill_n(y, batch * out_size, T(0));
    for (std::size_t k = 0; k < ins.size(); ++k) {
      const T* a = buffers[ins[k]].data();
      for (std::size_t r = 0; r < batch; ++r) {
        T* dst = y + r * out_size + offsets[k];
        const T* src = a + r * sizes[k];
        for (std::size_t i = 0; i < sizes[k]; ++i) dst[i] += src[i];
      }
    }
  }

  /// f(operand k, its neuron) for every operand neuron that feeds output neuron n, where a neuron
  /// is `unit` elements: 1 (elements), or a channel's height x width (NNSlicer's channel
  /// granularity: a concat joins whole channels, so its offsets are multiples of it).  A product's
  /// output neuron is fed by its signal neuron and the gate neuron broadcast to it.
  template <class F>
  void feeding(std::size_t n, F&& f, std::size_t unit = 1) const {
    if (is_product()) {
      f(std::size_t(0), n);
      f(std::size_t(1), gate_neuron(n, unit));
      return;
    }
    for (std::size_t k = 0; k < ins.size(); ++k) {
      const std::size_t off = offsets[k] / unit, size = sizes[k] / unit;
      if (n >= off && n - off < size) f(k, n - off);
    }
  }
  /// ∂y_n / ∂(operand q's neuron feeding n): 1 for a sum or a concat; for a product the other
  /// operand's value there, value(tensor, neuron) (the neurons' values: elements, or channel means
  /// at channel granularity).
  template <class V>
  double slope(std::size_t q, std::size_t n, std::size_t unit, V&& value) const {
    if (!is_product()) return 1.0;
    return q == 0 ? double(value(ins[1], gate_neuron(n, unit))) : double(value(ins[0], n));
  }
  /// How many operands receive relevance (LRP): every one, or for a product only the signal (the
  /// first), the rule of Arras et al. 2017 for multiplicative gates (layers/product.hpp).
  std::size_t relevance_operands() const { return is_product() ? 1 : ins.size(); }
  /// LRP at output element i holding relevance R: f(operand, element, share) for each operand
  /// element that receives a share; value(tensor, element) is an operand's value.  A sum splits R
  /// in proportion to the summands (the ε-rule with unit weights), an element fed by one operand
  /// (a concat) passes it unchanged, a product gives it all to the signal.
  template <class V, class F>
  void relevance_shares(std::size_t i, double R, double eps, V&& value, F&& f) const {
    if (R == 0) return;
    if (is_product()) return f(std::size_t(0), i, R);
    double zs = 0;
    std::size_t feeders = 0;
    feeding(i, [&](std::size_t q, std::size_t e) { zs += double(value(ins[q], e)), ++feeders; });
    feeding(i, [&](std::size_t q, std::size_t e) { f(q, e, detail::join_share(R, feeders, zs, double(value(ins[q], e)), eps)); });
  }
  /// Operand k's first neuron in the output (neurons of `unit` elements).
  std::size_t offset(std::size_t k, std::size_t unit = 1) const { return offsets[k] / unit; }

 private:
  /// A product's gate neuron broadcast to output neuron n (neurons of `unit` elements in the
  /// output; the gate's neurons: its elements, or its channels at channel granularity).
  std::size_t gate_neuron(std::size_t n, std::size_t unit) const {
    const std::size_t e = n * unit / (sizes[0] / sizes[1]);  // the gate element of n's first element
    const std::size_t gate_unit = unit == 1 || shapes[1].rank != 3 ? 1 : shapes[1][1] * shapes[1][2];
    return e / gate_unit;
  }
};

/// The one run-time graph of a network (Sequential or DynamicNetwork) for the analyses that walk it
/// node by node (NNSlicer, LRP, the fingerprint): one node per layer, a composite expanded into
/// its branches' layers plus a join node.  Nodes are type-erased once, when the graph is built:
/// the forward pass from layer_traits, and the analysis's own per-node data from View, which the
/// node derives from:
///   View::has_rule<L>                  the analysis's rule exists for L (a composite's rule
///                                      exists when every inner layer's does)
///   View::missing(where, name)         the logic_error message for a layer without it
///   View::require<Net>()               compile-time check of a Sequential (names the layer)
///   view.make(l, in, out)              fills the node's data from L's rule
/// op_graph<T> (NNSlicer's view: sign_rule) and lrp_graph<T> (coverage/lrp.hpp: relevance_rule) are
/// this graph with their view.  The graph refers to the network: keep it alive and unchanged.
template <class T, class View>
class run_graph {
 public:
  struct node : View {
    std::string name;             // "3 Dense", "5.block.1 ReLU", "5 Add", "7 Concat"
    std::string_view type;        // "Dense", ..., "Add", "Concat"
    std::size_t in = 0, out = 0;  // tensors (in: the first operand of a join)
    join_operands operands;       // a join's operands (empty for a layer)
    std::function<void(std::size_t, const T*, T*)> forward;  // not for a join
    bool is_join() const { return !operands.empty(); }
  };

  template <class Net>
  explicit run_graph(const Net& net) {
    static_assert(View::template require<Net>());
    acts_.push_back(input_shape_of(net));
    names_.push_back("input");
    for_each_layer(net, [&](const auto& l, auto idx, shape in, shape out) {
      add_layer(l, std::to_string(std::size_t(idx)), acts_.size() - 1, in, out);
      layer_out_.push_back(acts_.size() - 1);
    });
    readers_.assign(acts_.size(), 0);
    for (const auto& nd : nodes_) {
      if (nd.is_join())
        for (std::size_t a : nd.operands.ins) ++readers_[a];
      else
        ++readers_[nd.in];
    }
  }

  const std::vector<node>& nodes() const { return nodes_; }
  const std::vector<shape>& acts() const { return acts_; }
  /// The name of tensor a: "input" or the name of the node that writes it.
  const std::string& act_name(std::size_t a) const { return names_.at(a); }
  std::size_t output() const { return acts_.size() - 1; }
  /// The tensor top-level layer `layer` writes (std::size_t(-1): 0, the input).
  std::size_t layer_tensor(std::size_t layer) const {
    if (layer == std::size_t(-1)) return 0;
    if (layer >= layer_out_.size())
      throw value_error("layer index " + std::to_string(layer) + " out of range (the network has " +
                        std::to_string(layer_out_.size()) + " layers)");
    return layer_out_[layer];
  }
  /// How many nodes read tensor a (a composite's input: one per branch).
  std::size_t readers(std::size_t a) const { return readers_[a]; }

  /// Forward pass of `batch` samples; buffers[a] = tensor a, [batch x size] (resized as needed).
  void run(std::size_t batch, const T* x, std::vector<std::vector<T>>& buffers) const {
    buffers.resize(acts_.size());
    buffers[0].assign(x, x + batch * acts_[0].size());
    for (const auto& nd : nodes_) {
      auto& y = buffers[nd.out];
      y.resize(batch * acts_[nd.out].size());
      if (nd.is_join())
        nd.operands.run(batch, acts_[nd.out].size(), buffers, y.data());
      else
        nd.forward(batch, buffers[nd.in].data(), y.data());
    }
  }

 private:
  std::vector<shape> acts_;
  std::vector<std::string> names_;
  std::vector<node> nodes_;
  std::vector<std::size_t> layer_out_, readers_;

  template <class L>
  void add_layer(const L& l, const std::string& where, std::size_t in_act, shape in, shape out) {
    if constexpr (!View::template has_rule<L>) {
      (void)l, (void)in_act, (void)in, (void)out;
      throw logic_error(View::missing(where, layer_traits<L>::name));
    } else {
      node nd;
      if constexpr (Composite<L>) {
        nd.operands = join_operands::build<L>(
            [&](auto&& branch) { layer_traits<L>::for_each_branch(l, in, branch); }, in_act, in, where,
            [&](const auto* lp, const std::string& w, std::size_t cur, shape i, shape o) {
              add_layer(*lp, w, cur, i, o);
              return acts_.size() - 1;
            });
        nd.type = nd.operands.type();
        nd.in = nd.operands.ins[0];
      } else {
        nd.type = layer_traits<L>::name;
        nd.in = in_act;
        const L* lp = &l;
        nd.forward = [lp, in, out](std::size_t batch, const T* x, T* y) {
          thread_local std::vector<T> scratch;
          const std::size_t need = layer_traits<L>::scratch_size(lp, in, out, batch);
          if (scratch.size() < need) scratch.resize(need);
          layer_traits<L>::forward(*lp, forward_args<T>{in, out, batch, x, y, nullptr, scratch.data()});
        };
        nd.make(l, in, out);
      }
      nd.name = where + " " + std::string(nd.type);
      acts_.push_back(out);
      names_.push_back(nd.name);
      nd.out = acts_.size() - 1;
      nodes_.push_back(std::move(nd));
    }
  }
};

/// A composite's join node, as for_each_node_reverse hands it to its visitor.
template <class L>
struct join_node {
  const L& layer;
};
template <class X>
inline constexpr bool is_join_node_v = false;
template <class L>
inline constexpr bool is_join_node_v<join_node<L>> = true;

namespace detail {
/// Node(s) of layer l, last first; k: one past the index of l's last node, decremented per node.
template <class L, class F>
bool node_reverse(const L& l, shape in, shape out, std::size_t& k, F& f) {
  if constexpr (Composite<L>) {
    if (!f(--k, join_node<L>{l}, in, out)) return false;
    // the branches last first (run_graph numbers them first to last), each one's layers last first
    std::size_t branches = 0;
    layer_traits<L>::for_each_branch(l, in, [&](const auto&) { ++branches; });
    bool go = true;
    for (std::size_t b = branches; go && b-- > 0;) {
      std::size_t i = 0;
      layer_traits<L>::for_each_branch(l, in, [&](const auto& walk) {
        if (i++ == b)
          walk.reverse([&](const auto* lp, auto, shape li, shape lo) { go = go && node_reverse(*lp, li, lo, k, f); });
      });
    }
    return go;
  } else {
    return f(--k, l, in, out);
  }
}
}  // namespace detail

/// Walks the nodes of net's run_graph last first (the backward analyses' order): f(k, layer, in,
/// out) for node k when it is a layer, f(k, join_node<L>{composite}, in, out) when it is the join
/// of composite L, whose branches' nodes follow.  f returns false to stop the walk.  `nodes` is
/// the graph's node count (g.nodes().size()).  For a Sequential this is a compile-time fold over
/// the layer tuple, composites' branches included (branch_walk::reverse): every layer's rule is
/// called directly, with no type erasure; for a DynamicNetwork one std::visit per layer.
template <class Net, class F>
void for_each_node_reverse(const Net& net, std::size_t nodes, F&& f) {
  std::size_t k = nodes;
  bool go = true;
  for_each_layer_reverse(net, [&](const auto& l, auto, shape in, shape out) { go = go && detail::node_reverse(l, in, out, k, f); });
}

/// NNSlicer's data per node: its sign_rule's items and synapses, and its parameter tensors.
template <class T>
struct sign_view {
  std::size_t synapses = 0;
  std::function<void(const sign_ctx&, std::size_t, std::vector<sign_item>&)> items;  // not for a join
  std::span<const T> weights;  // the first parameter tensor (synapse i = weights[i]); empty if none
  std::vector<std::span<const T>> parameters;  // every parameter tensor (weights first), then buffers
  std::span<const T> bias;     // one per output channel (rank 3) or neuron, if the rule names one

  template <class L>
  static constexpr bool has_rule = SignLayer<L>;
  static std::string missing(const std::string& where, std::string_view name) {
    return detail::concat("nnslicer: layer ", where, " (", name, ") has no contribution-sign rule; slice the logits (drop the ",
                          name, ")");
  }
  template <class Net>
  static constexpr bool require() {
    return detail::require_sign_network<Net>();
  }
  template <class L>
  void make(const L& l, shape, shape out) {
    if constexpr (detail::sign_has_synapses<L>) synapses = sign_rule<L>::synapses(l);
    if constexpr (HasParameters<L>) {
      auto ps = layer_traits<L>::parameters(l);
      if (!ps.empty()) weights = std::span<const T>(ps[0].data(), ps[0].size());
      for (const auto& q : ps) parameters.emplace_back(q.data(), q.size());
      if constexpr (detail::sign_has_bias<L>) {
        constexpr std::size_t bi = sign_rule<L>::bias_parameter;
        if (bi < ps.size() && ps[bi].size() == neuron_count(out, false)) bias = std::span<const T>(ps[bi].data(), ps[bi].size());
      }
    }
    if constexpr (HasBuffers<L>)
      for (const auto& q : layer_traits<L>::buffers(l)) parameters.emplace_back(q.data(), q.size());
    const L* lp = &l;
    items = [lp](const sign_ctx& c, std::size_t n, std::vector<sign_item>& v) { sign_rule<L>::items(*lp, c, n, v); };
  }
};

/// The network as NNSlicer sees it (see run_graph).
template <class T>
using op_graph = run_graph<T, sign_view<T>>;

}  // namespace nnlens
