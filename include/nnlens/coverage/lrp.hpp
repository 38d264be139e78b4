// nnlens/coverage/lrp.hpp -- layer-wise relevance propagation (LRP) as a visitor over the layers'
// relevance_rule traits (docs/specs/deepimportance.md#22-neuron-relevance-by-lrp; the rules are in core/relevance.hpp).
//
//   lrp_graph<T> g(net);                 the network as LRP walks it (network/graph.hpp's run_graph):
//                                        one node per layer; a composite becomes its branches' layers
//                                        plus a join node (a sum splits R, a concat copies it)
//   lrp_engine<T> e(g, options);         per-thread scratch; e.run(net, buffers, r, stop, cls)
//                                        propagates sample r's relevance from the logit of class
//                                        cls (default: the predicted class) down to tensor `stop`,
//                                        walking net's nodes last first (for_each_node_reverse: a
//                                        compile-time fold for a Sequential, no type erasure)
//   relevance([policy,] net, X, layer, options)
//                                        [N, layer's output shape] relevance of each sample at the
//                                        output of top-level layer `layer` (lrp_input: the input)
//
// The start: R = one_hot(c) z_c at the logits (pre-softmax), c the predicted class (or the given
// one).  Relevance is propagated in double, one sample at a time, only down to the requested layer.
// A BatchNorm right after a Conv2D or Dense folds into it (unless the requested layer is that
// Conv2D/Dense itself: then its own output must carry relevance).  A tensor read by several nodes
// (a residual block's input) sums the relevance that comes back along each.
// A layer without a relevance_rule (Softmax: LRP starts at the logits, drop it) is a compile error
// for a Sequential, naming the layer (error_lrp_needs_a_relevance_rule<L>), and a logic_error for a
// DynamicNetwork.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "nnlens/core/error.hpp"
#include "nnlens/core/execution.hpp"
#include "nnlens/core/finite.hpp"
#include "nnlens/core/relevance.hpp"
#include "nnlens/core/thread_pool.hpp"
#include "nnlens/core/traits.hpp"
#include "nnlens/network/dynamic_network.hpp"
#include "nnlens/network/graph.hpp"
#include "nnlens/network/sequential.hpp"
#include "nnlens/network/visit.hpp"

namespace nnlens {

/// `layer` argument of relevance(): the input itself (pixel relevance).
inline constexpr std::size_t lrp_input = std::size_t(-1);

namespace detail {
template <class L>
concept relevance_is_passthrough = requires { requires relevance_rule<L>::passthrough; };
template <class L>
concept relevance_folds = requires { requires relevance_rule<L>::folds_into_previous; };
template <class L>
concept relevance_accepts_fold = requires { requires relevance_rule<L>::accepts_fold; };

template <class L>
struct error_lrp_needs_a_relevance_rule;
template <class Net>
constexpr bool require_relevance_network() {
  return every_static_layer<Net>([](auto l) {
    using L = typename decltype(l)::type;
    return named_check<error_lrp_needs_a_relevance_rule, L, RelevanceLayer<L>>();
  });
}
}  // namespace detail

/// LRP's data per node: what the walk needs of a neighbour, whose type it does not know at that
/// point: whether the node accepts a folded BatchNorm (Conv2D, Dense), and a folding node's
/// coefficients.  The node's own rule is called by type (lrp_engine::run).
template <class T>
struct relevance_view {
  bool accepts_fold = false;  // Conv2D, Dense
  std::vector<double> fold_scale, fold_shift;  // per channel, for a folding node

  template <class L>
  static constexpr bool has_rule = RelevanceLayer<L>;
  static std::string missing(const std::string& where, std::string_view name) {
    return detail::concat("lrp: layer ", where, " (", name, ") has no relevance rule; LRP starts at the logits (drop the ",
                          name, ")");
  }
  template <class Net>
  static constexpr bool require() {
    return detail::require_relevance_network<Net>();
  }
  template <class L>
  void make(const L& l, shape, shape out) {
    if constexpr (detail::relevance_accepts_fold<L>) accepts_fold = true;
    if constexpr (detail::relevance_folds<L>) {
      const std::size_t C = out.rank == 3 ? out[0] : out.size();
      fold_scale.resize(C), fold_shift.resize(C);
      for (std::size_t c = 0; c < C; ++c) relevance_rule<L>::scale_shift(l, c, fold_scale[c], fold_shift[c]);
    }
  }
};

/// The network as LRP walks it (network/graph.hpp's run_graph with LRP's view).
template <class T>
using lrp_graph = run_graph<T, relevance_view<T>>;

/// Per-thread LRP scratch over one graph.
template <class T>
class lrp_engine {
 public:
  lrp_engine(const lrp_graph<T>& g, const lrp_options& o) : g_(g), o_(o) {
    const auto& acts = g.acts();
    x_.resize(acts.size());
    r_.resize(acts.size());
    for (std::size_t a = 0; a < acts.size(); ++a) x_[a].resize(acts[a].size()), r_[a].resize(acts[a].size());
    std::size_t mx = 0;
    for (const auto& s : acts) mx = std::max(mx, s.size());
    tmp_.resize(mx);
  }

  /// Sample r of a batch that g.run ran on `net` (the network g was built from): relevance from the
  /// logit of `cls` (npos: the predicted class) down to tensor `stop`.  Returns R of that tensor
  /// (valid until the next run).  The walk is for_each_node_reverse: for a Sequential a
  /// compile-time fold that calls each layer's relevance_rule directly.
  template <class Net>
  std::span<const double> run(const Net& net, const std::vector<std::vector<T>>& buffers, std::size_t r, std::size_t stop,
                              std::size_t cls = std::size_t(-1)) {
    const auto& acts = g_.acts();
    const auto& nodes = g_.nodes();
    for (std::size_t a = stop; a < acts.size(); ++a) {
      const std::size_t s = acts[a].size();
      const T* src = buffers[a].data() + r * s;
      for (std::size_t i = 0; i < s; ++i) x_[a][i] = double(src[i]);
      std::fill(r_[a].begin(), r_[a].end(), 0.0);
    }
    const std::size_t out = g_.output();
    const auto& z = x_[out];
    if (cls != npos && cls >= z.size())
      throw value_error("lrp: class " + std::to_string(cls) + " out of range (the network has " + std::to_string(z.size()) +
                        " outputs)");
    detail::lrp_start(z.data(), z.size(), cls, r_[out].data());
    const double eps = o_.epsilon;
    std::size_t fold_from = npos;  // the node whose output a folding BatchNorm took over
    for_each_node_reverse(net, nodes.size(), [&](std::size_t k, const auto& l, shape, shape) {
      using L = std::remove_cvref_t<decltype(l)>;
      const auto& nd = nodes[k];
      if (nd.out <= stop) return false;  // nodes are in topological order; all below `stop` is upstream
      const auto& R = r_[nd.out];
      if constexpr (is_join_node_v<L>) {
        // the join's own rule (network/graph.hpp's join_operands::relevance_shares)
        const auto& ops = nd.operands;
        for (std::size_t i = 0; i < R.size(); ++i)
          ops.relevance_shares(
              i, R[i], eps, [&](std::size_t t, std::size_t e) { return x_[t][e]; },
              [&](std::size_t q, std::size_t e, double share) { r_[ops.ins[q]][e] += share; });
        return true;
      } else if constexpr (!RelevanceLayer<L>) {
        return false;  // not reached: the graph refuses a layer without a relevance rule
      } else if constexpr (detail::relevance_is_passthrough<L>) {
        auto& Ri = r_[nd.in];
        for (std::size_t i = 0; i < R.size(); ++i) Ri[i] += R[i];
        return true;
      } else {
        if constexpr (detail::relevance_folds<L>) {
          // a BatchNorm right after a Conv2D/Dense (read by nothing else): hand its relevance to it
          if (k > 0 && nodes[k - 1].accepts_fold && nodes[k - 1].out == nd.in && g_.readers(nd.in) == 1 && nd.in != stop) {
            r_[nd.in] = R;
            fold_from = k;
            return true;
          }
        }
        relevance_args a;
        a.in = acts[nd.in];
        a.out = acts[nd.out];
        a.x = x_[nd.in].data();
        a.z = x_[nd.out].data();
        a.r_out = R.data();
        a.r_in = tmp_.data();
        a.o = &o_;
        if (fold_from == k + 1) {
          const auto& bn = nodes[k + 1];
          a.z = x_[bn.out].data();
          a.out_scale = bn.fold_scale.data();
          a.out_shift = bn.fold_shift.data();
          fold_from = npos;
        }
        relevance_rule<L>::relevance(l, a);
        auto& Ri = r_[nd.in];
        for (std::size_t i = 0; i < Ri.size(); ++i) Ri[i] += tmp_[i];
        return true;
      }
    });
    return {r_[stop].data(), r_[stop].size()};
  }

  /// The values (double) of tensor a for the last sample run (tensors >= stop only).
  std::span<const double> values(std::size_t a) const { return {x_[a].data(), x_[a].size()}; }

 private:
  static constexpr std::size_t npos = std::size_t(-1);
  const lrp_graph<T>& g_;
  lrp_options o_;
  std::vector<std::vector<double>> x_, r_;
  std::vector<double> tmp_;
};

namespace detail {
/// relevance()'s checks (every policy) of its input X ([N, in], finite) and classes (none, or N
/// classes below nout, the network's outputs); returns N.
template <class T, class A>
std::size_t relevance_rows(shape in, std::size_t nout, const A& X, std::span<const std::size_t> classes) {
  if (X.dimension() == 0 || X.shape()[0] * in.size() != X.size())
    throw shape_error("relevance: input of " + std::to_string(X.size()) + " values is not [N, " + in.str() + "]");
  const std::size_t n = X.shape()[0];
  if (!classes.empty() && classes.size() != n)
    throw shape_error("relevance: " + std::to_string(classes.size()) + " classes for " + std::to_string(n) + " samples");
  for (std::size_t c : classes)
    if (c >= nout)
      throw value_error("lrp: class " + std::to_string(c) + " out of range (the network has " + std::to_string(nout) + " outputs)");
  require_finite(std::span<const T>(X.data(), X.size()), in.size(), "relevance: input");
  return n;
}
}  // namespace detail

/// Relevance of every element of the output of top-level layer `layer` (lrp_input: the input) for
/// each sample of X, starting from each sample's predicted class (or classes[i] when given).
template <class Policy, class Net, class A>
  requires execution::is_execution_policy_v<Policy>
xt::xarray<double> relevance(const Policy&, const Net& net, const A& X, std::size_t layer = lrp_input, const lrp_options& o = {},
                             std::span<const std::size_t> classes = {}) {
  using T = network_scalar_t<Net>;
  const lrp_graph<T> g(net);
  const shape in = g.acts()[0];
  const std::size_t n = detail::relevance_rows<T>(in, g.acts().back().size(), X, classes);
  const std::size_t stop = g.layer_tensor(layer);
  const shape st = g.acts()[stop];
  xt::xarray<double> R = xt::xarray<double>::from_shape(st.with_batch(n));
  constexpr bool parallel = execution::is_host_parallel_policy_v<Policy>;
  auto& pool = detail::default_pool();
  const std::size_t tasks = parallel ? std::min(pool.size(), std::max<std::size_t>(n, 1)) : 1;
  auto work = [&](std::size_t t) {
    const std::size_t b0 = n * t / tasks, b1 = n * (t + 1) / tasks;
    lrp_engine<T> e(g, o);
    std::vector<std::vector<T>> buf;
    constexpr std::size_t chunk = 64;
    for (std::size_t c0 = b0; c0 < b1; c0 += chunk) {
      const std::size_t nb = std::min(chunk, b1 - c0);
      g.run(nb, X.data() + c0 * in.size(), buf);
      for (std::size_t r = 0; r < nb; ++r) {
        const auto rr = e.run(net, buf, r, stop, classes.empty() ? std::size_t(-1) : classes[c0 + r]);
        std::copy(rr.begin(), rr.end(), R.data() + (c0 + r) * st.size());
      }
    }
  };
  if (tasks > 1)
    pool.parallel_for(tasks, work);
  else
    work(0);
  return R;
}

template <class Net, class A>
  requires(!execution::is_execution_policy_v<Net>)
xt::xarray<double> relevance(const Net& net, const A& X, std::size_t layer = lrp_input, const lrp_options& o = {},
                             std::span<const std::size_t> classes = {}) {
  return execution::with_default_policy(net, [&](const auto& pol) { return relevance(pol, net, X, layer, o, classes); });
}

}  // namespace nnlens
