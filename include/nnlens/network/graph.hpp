// nnlens/network/graph.hpp -- a network as NNSlicer sees it: operations and the tensors between them.
//
//   op_graph<T> g(net);            one node per layer; a composite (Residual, Concat) becomes its
//                                  branches' layers plus a join node ("Add" or "Concat": each inner
//                                  op has its own neurons, spec §2.1)
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
#include "nnlens/core/traits.hpp"
#include "nnlens/network/dynamic_network.hpp"
#include "nnlens/network/sequential.hpp"
#include "nnlens/network/visit.hpp"

namespace nnlens {

namespace detail {
template <class L>
concept sign_is_composite = requires(const L& l, shape in) { sign_rule<L>::for_each_branch(l, in, [](auto&&) {}); };
template <class L>
concept sign_has_synapses = requires(const L& l) {
  { sign_rule<L>::synapses(l) } -> std::convertible_to<std::size_t>;
};

template <class L>
concept sign_has_bias = requires { { sign_rule<L>::bias_parameter } -> std::convertible_to<std::size_t>; };

template <class L>
struct error_nnslicer_needs_a_sign_rule;
template <class L>
constexpr bool check_sign_rule() {
  if constexpr (!SignLayer<L>) {
    error_nnslicer_needs_a_sign_rule<L> slice_the_logits_drop_it;
    (void)slice_the_logits_drop_it;
    return false;
  } else {
    return true;
  }
}
template <class Net>
constexpr bool require_sign_network() {
  if constexpr (is_sequential_v<Net>)
    return []<class... Ls>(std::type_identity<std::tuple<Ls...>>) {
      return (check_sign_rule<Ls>() && ...);
    }(std::type_identity<typename Net::layer_types>{});
  else
    return true;
}
}  // namespace detail

/// The operands of a composite's join node (core/composite.hpp): the tensors its branches end in
/// and where each lands in the join's output (per-sample flat offsets: 0 for every operand of a sum,
/// one after another for a concat).  Shared by every run-time graph of the analyses.
struct join_operands {
  branch_join join = branch_join::sum;
  std::vector<std::size_t> ins, offsets, sizes;

  bool empty() const { return ins.empty(); }
  std::string_view type() const { return join == branch_join::sum ? "Add" : "Concat"; }

  /// Walks composite L's branches (for_each_branch(f): the rule's walk) from tensor in_act,
  /// adding each inner layer with add(layer*, where, input tensor, in, out) -> its output tensor.
  /// Inner layers are named "<where>.<branch name>.<index>".
  template <class L, class ForEach, class Add>
  static join_operands build(ForEach&& for_each_branch, std::size_t in_act, shape in, const std::string& where, Add&& add) {
    join_operands j;
    j.join = composite_join_v<L>;
    std::size_t b = 0;
    for_each_branch([&](auto&& walk) {
      std::size_t cur = in_act;
      std::size_t size = in.size();
      const std::string prefix = where + "." + branch_name_of<L>(b) + ".";
      walk([&](const auto* lp, auto idx, shape i, shape o) {
        cur = add(lp, prefix + std::to_string(std::size_t(idx)), cur, i, o);
        size = o.size();
      });
      j.ins.push_back(cur);
      j.sizes.push_back(size);
      ++b;
    });
    NNLENS_EXPECTS(!j.ins.empty());
    j.offsets = branch_offsets(j.join, j.sizes);
    return j;
  }

  /// y (batch x out_size) = the join of the operands' buffers.
  template <class T>
  void run(std::size_t batch, std::size_t out_size, const std::vector<std::vector<T>>& buffers, T* y) const {
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

  /// f(operand k, its element) for every operand element that feeds output element n.
  template <class F>
  void feeding(std::size_t n, F&& f) const {
    for (std::size_t k = 0; k < ins.size(); ++k)
      if (n >= offsets[k] && n - offsets[k] < sizes[k]) f(k, n - offsets[k]);
  }
};

template <class T>
class op_graph {
 public:
  struct node {
    std::string name;         // "3 Dense", "5.block.1 ReLU", "5 Add"
    std::string_view type;    // "Dense", ..., "Add", "Concat"
    std::size_t in = 0, out = 0;  // tensors (in: the first operand of a join)
    join_operands operands;       // a join's operands (empty for a layer)
    std::size_t synapses = 0;
    std::function<void(std::size_t, const T*, T*)> forward;                           // not for a join
    std::function<void(const sign_ctx&, std::size_t, std::vector<sign_item>&)> items;  // not for a join
    std::span<const T> weights;  // the first parameter tensor (synapse i = weights[i]); empty if none
    std::vector<std::span<const T>> parameters;  // every parameter tensor (weights first), then buffers
    std::span<const T> bias;     // one per output channel (rank 3) or neuron, if the rule names one
    bool is_join() const { return !operands.empty(); }
  };

  template <class Net>
  explicit op_graph(const Net& net) {
    static_assert(detail::require_sign_network<Net>());
    acts_.push_back(input_shape_of(net));
    names_.push_back("input");
    for_each_layer(net, [&](const auto& l, auto idx, shape in, shape out) {
      add_layer(l, std::to_string(std::size_t(idx)), acts_.size() - 1, in, out);
    });
  }

  const std::vector<node>& nodes() const { return nodes_; }
  const std::vector<shape>& acts() const { return acts_; }
  /// The name of tensor a: "input" or the name of the node that writes it.
  const std::string& act_name(std::size_t a) const { return names_.at(a); }
  std::size_t output() const { return acts_.size() - 1; }

  /// Forward pass of `batch` samples; buffers[a] = tensor a, [batch x size] (resized as needed).
  void run(std::size_t batch, const T* x, std::vector<std::vector<T>>& buffers) const {
    buffers.resize(acts_.size());
    buffers[0].assign(x, x + batch * acts_[0].size());
    for (const auto& nd : nodes_) {
      auto& y = buffers[nd.out];
      y.resize(batch * acts_[nd.out].size());
      if (nd.is_join()) {
        nd.operands.run(batch, acts_[nd.out].size(), buffers, y.data());
      } else {
        nd.forward(batch, buffers[nd.in].data(), y.data());
      }
    }
  }

 private:
  std::vector<shape> acts_;
  std::vector<std::string> names_;
  std::vector<node> nodes_;

  template <class L>
  void add_layer(const L& l, const std::string& where, std::size_t in_act, shape in, shape out) {
    if constexpr (!SignLayer<L>) {
      (void)l, (void)in_act, (void)in, (void)out;
      throw logic_error(detail::concat("nnslicer: layer ", where, " (", layer_traits<L>::name,
                                       ") has no contribution-sign rule; slice the logits (drop the ",
                                       layer_traits<L>::name, ")"));
    } else if constexpr (detail::sign_is_composite<L>) {
      node nd;
      nd.operands = join_operands::build<L>(
          [&](auto&& branch) { sign_rule<L>::for_each_branch(l, in, branch); }, in_act, in, where,
          [&](const auto* lp, const std::string& w, std::size_t cur, shape i, shape o) {
            add_layer(*lp, w, cur, i, o);
            return acts_.size() - 1;
          });
      nd.type = nd.operands.type();
      nd.name = where + " " + std::string(nd.type);
      nd.in = nd.operands.ins[0];
      acts_.push_back(out);
      names_.push_back(nd.name);
      nd.out = acts_.size() - 1;
      nodes_.push_back(std::move(nd));
    } else {
      node nd;
      nd.type = layer_traits<L>::name;
      nd.name = where + " " + std::string(nd.type);
      nd.in = in_act;
      if constexpr (detail::sign_has_synapses<L>) nd.synapses = sign_rule<L>::synapses(l);
      if constexpr (HasParameters<L>) {
        auto ps = layer_traits<L>::parameters(l);
        if (!ps.empty()) nd.weights = std::span<const T>(ps[0].data(), ps[0].size());
        for (const auto& q : ps) nd.parameters.emplace_back(q.data(), q.size());
        if constexpr (detail::sign_has_bias<L>) {
          constexpr std::size_t bi = sign_rule<L>::bias_parameter;
          if (bi < ps.size() && ps[bi].size() == neuron_count(out, false)) nd.bias = std::span<const T>(ps[bi].data(), ps[bi].size());
        }
      }
      if constexpr (HasBuffers<L>)
        for (const auto& q : layer_traits<L>::buffers(l)) nd.parameters.emplace_back(q.data(), q.size());
      const L* lp = &l;
      nd.forward = [lp, in, out](std::size_t batch, const T* x, T* y) {
        thread_local std::vector<T> scratch;
        const std::size_t need = layer_traits<L>::scratch_size(lp, in, out, batch);
        if (scratch.size() < need) scratch.resize(need);
        layer_traits<L>::forward(*lp, forward_args<T>{in, out, batch, x, y, nullptr, scratch.data()});
      };
      nd.items = [lp](const sign_ctx& c, std::size_t n, std::vector<sign_item>& v) { sign_rule<L>::items(*lp, c, n, v); };
      acts_.push_back(out);
      names_.push_back(nd.name);
      nd.out = acts_.size() - 1;
      nodes_.push_back(std::move(nd));
    }
  }
};

}  // namespace nnlens
