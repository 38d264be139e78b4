// nnlens/core/composite.hpp -- the composite ops' protocol (Residual, Concat): ops made of branches.
//
// A composite op runs several branches (chains of layers) on the same input and joins their
// outputs.  Its layer_traits<L> carries, besides the usual members:
//     template <class F> static void for_each_branch(const L&, shape in, F&& f);
//         // f(walk) once per branch, in order; walk(g) calls g(const layer*, index, in, out) for
//         // each of the branch's layers in order (nothing for an empty branch: the identity),
//         // walk.reverse(g) the same last first (layers/block.hpp's branch_walk provides both)
//     template <class Self, class F> static void for_each_inner(Self& l, F&& f);
//         // f(layer&) for every inner layer, branch by branch (mutable when Self is; compress uses it)
//     static constexpr branch_join join;                    // how the outputs join (default: sum)
//     static constexpr std::string_view join_name;          // the join's name in the analyses'
//                                                           // graphs (default: "Add" / "Join")
//     static std::string branch_name(std::size_t b);         // "block", "shortcut" (default: "branch<b>")
// and its analysis rules (pwl_rule, sign_rule, relevance_rule) forward for_each_branch, requiring
// that every inner layer has the rule.
//
// The join, per sample, with the branch outputs b_0 .. b_{k-1} flattened:
//   sum     y = b_0 + b_1 + ...                  (every branch produces the composite's shape)
//   concat  y = [b_0, b_1, ...] one after another: along the channel axis of a [C,H,W] output
//           (NCHW: each sample's channels are contiguous) or the features of a [F] output.
//   product y = b_0 ⊙ b_1, b_1 (the gate) broadcast over b_0 (the signal): the same shape, one
//           value per channel or one value (layers/product.hpp).  Not a placement: the analyses
//           read it through network/graph.hpp's join_operands (feeding, slope).
// The first two are "y = Σ_k place_k(b_k)" with branch k placed at flat offset `branch_offsets(...)[k]`
// (0 for every branch of a sum), which is how the analyses treat them, written once.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "nnlens/core/shape.hpp"
#include "nnlens/core/traits.hpp"

namespace nnlens {

/// How a composite op joins its branch outputs (see the header comment).
enum class branch_join { sum, concat, product };

namespace detail {
/// Any branch visitor, for the concepts below (a named type: nvcc's front end does not accept a
/// lambda inside a requires-expression, and the concept would then be false under CUDA).
struct any_branch_visitor {
  template <class W>
  void operator()(W&&) const {}
};
}  // namespace detail

/// A composite op: its layer_traits walks its branches.
template <class L>
concept Composite = requires(const L& l, shape in) { layer_traits<L>::for_each_branch(l, in, detail::any_branch_visitor{}); };

namespace detail {
template <class L>
concept has_join_member = requires { { layer_traits<L>::join } -> std::convertible_to<branch_join>; };
template <class L>
concept has_branch_names = requires(std::size_t b) { { layer_traits<L>::branch_name(b) } -> std::convertible_to<std::string>; };
}  // namespace detail

/// The composite's join (sum when its traits do not say).
template <class L>
inline constexpr branch_join composite_join_v = [] {
  if constexpr (detail::has_join_member<L>) return branch_join(layer_traits<L>::join);
  else return branch_join::sum;
}();

namespace detail {
template <class L>
concept has_join_name = requires { { layer_traits<L>::join_name } -> std::convertible_to<std::string_view>; };
}  // namespace detail

/// The name of the composite's join node in the analyses' graphs ("Add" for a sum by default).
template <class L>
inline constexpr std::string_view composite_join_name_v = [] {
  if constexpr (detail::has_join_name<L>) return std::string_view(layer_traits<L>::join_name);
  else return std::string_view(composite_join_v<L> == branch_join::sum ? "Add" : "Join");
}();

/// The name of branch b of composite L ("block", "shortcut", or "branch<b>").
template <class L>
std::string branch_name_of(std::size_t b) {
  if constexpr (detail::has_branch_names<L>) return std::string(layer_traits<L>::branch_name(b));
  else return "branch" + std::to_string(b);
}

/// An analysis rule of a composite (pwl_rule, sign_rule, relevance_rule derive from it): the
/// analysis walks the op's branches, each inner layer by its own rule.
template <class L>
struct composite_rule {
  template <class F>
  static void for_each_branch(const L& l, shape in, F&& f) {
    layer_traits<L>::for_each_branch(l, in, f);
  }
};

namespace detail {
/// How many signal elements share one gate value: 1 (same shape), H·W (per channel), the signal's
/// size (one value); 0 when the gate does not broadcast to the signal.
constexpr std::size_t gate_repeat(shape s, shape g) {
  if (s.size() == g.size()) return 1;
  if (g.size() == 1) return s.size();
  const bool per_channel = s.rank == 3 && g.size() == s[0] &&
                           ((g.rank == 3 && g[1] == 1 && g[2] == 1) || g.rank == 1);
  return per_channel ? s[1] * s[2] : 0;
}

/// y = s ⊙ g broadcast (n samples, S signal and G gate elements per sample); y may be s.
template <class T>
void gate_multiply(std::size_t n, std::size_t S, std::size_t G, const T* s, const T* g, T* y) {
  const std::size_t rep = S / G;
  for (std::size_t r = 0; r < n; ++r)
    for (std::size_t j = 0; j < G; ++j) {
      const T gj = g[r * G + j];
      const T* sj = s + r * S + j * rep;
      T* yj = y + r * S + j * rep;
      for (std::size_t i = 0; i < rep; ++i) yj[i] = sj[i] * gj;
    }
}

}  // namespace detail

/// Per-sample flat offsets of the branch outputs (sizes per branch) in the composite's output.
inline std::vector<std::size_t> branch_offsets(branch_join j, const std::vector<std::size_t>& sizes) {
  std::vector<std::size_t> off(sizes.size(), 0);
  if (j == branch_join::concat)
    for (std::size_t k = 1; k < sizes.size(); ++k) off[k] = off[k - 1] + sizes[k - 1];
  return off;
}

}  // namespace nnlens
