// nnlens/layers/residual.hpp -- Residual<Block<Ls...>, Shortcut>: y = block(x) + shortcut(x).
//
//   Block<Ls...>                  a chain of layers (a flat pack; shapes flow through it as in a
//                                 Sequential).  Block<> is the empty chain (the identity).
//   Residual<Block<Ls...>>        identity shortcut: y = block(x) + x
//   Residual<Block<Ls...>, Block<Cs...>>
//                                 projection shortcut, e.g. ResNet's downsampling block
//                                 Residual<Block<Conv2D<16,3,2,1>, BatchNorm<>, ReLU, Conv2D<16,3,1,1>, BatchNorm<>>,
//                                          Block<Conv2D<16,1,2>, BatchNorm<>>>
//   DynamicResidual<T> = Residual<DynamicBlock<T>, DynamicBlock<T>>
//                                 the run-time form DynamicNetwork stores: two run-time chains
//                                 (std::vector of DynamicNetwork's layer variant; an empty
//                                 shortcut chain is the identity).
// The activation after the addition is NOT part of Residual: put it after it (as in PyTorch).
//
// requires: both branches accept x and produce the same shape.  For a static Residual this is
//           checked by infer (a Sequential reports it at compile time, naming the Residual, its
//           input shape and which extent differs); output_shape checks it at run time and throws
//           shape_error naming both shapes ("the block outputs [8,4,4] but the shortcut outputs
//           [16,4,4]").  Errors of an inner layer are prefixed with its branch, index and name.
// ensures:  forward runs the block, then the shortcut, then adds (y = b + s, in that order, for
//           every form, so static and dynamic networks give bitwise-identical outputs).
//           cache_size per sample = every inner activation (both branches, in order) + every inner
//           layer's cache, so backward never recomputes; scratch = two ping-pong buffers of the
//           largest inner activation (input included) times batch + the largest inner scratch.
//           At inference (cache == nullptr) the inner activations live in the ping-pong buffers.
//           backward: dy flows unchanged into both branches; dx = dx_block + dx_shortcut; the
//           parameter gradients of every inner layer are added to the matching layer of *grad.
//           parameters(): the inner layers' parameters concatenated in order, block then
//           shortcut (a std::array for a static Residual, a std::vector for DynamicResidual).
//           init(): every inner layer, in the same order, with its own input shape.
// Layout of the cache (each entry [batch, shape...]):
//   block activations 1..m | shortcut activations 1..k | block caches 1..m | shortcut caches 1..k
// infer of the run-time form knows no extents (it returns a rank-0 shape); its output_shape is
// authoritative.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <random>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "nnlens/core/codegen_form.hpp"
#include "nnlens/core/composite.hpp"
#include "nnlens/core/error.hpp"
#include "nnlens/core/onnx_form.hpp"
#include "nnlens/core/traits.hpp"
#include "nnlens/layers/block.hpp"

namespace nnlens {

template <class B, class S = Identity>
struct Residual {
  static_assert(detail::is_static_block_v<B> || detail::is_dynamic_block_v<B>,
                "nnlens::Residual<B, S>: B must be Block<layers...> (the residual branch)");
  static_assert(std::is_same_v<S, Identity> || detail::is_static_block_v<S> || detail::is_dynamic_block_v<S>,
                "nnlens::Residual<B, S>: the shortcut S must be Identity or Block<layers...>");
  /// The inner layers' scalar type (void when no inner layer has weights).
  using scalar_type =
      typename detail::scalar_join<typename detail::branch_scalar<B>::type, typename detail::branch_scalar<S>::type>::type;
  B block;
  S shortcut{};
};

template <class T = float>
using DynamicResidual = Residual<DynamicBlock<T>, DynamicBlock<T>>;

template <class B, class S, class U>
struct rebind_scalar<Residual<B, S>, U> {
  using type = Residual<rebind_scalar_t<B, U>, rebind_scalar_t<S, U>>;
  static type convert(const Residual<B, S>& r) {
    return {rebind_scalar<B, U>::convert(r.block), rebind_scalar<S, U>::convert(r.shortcut)};
  }
};

namespace detail {

/// Everything the static and the run-time Residual share (written once for both forms).
template <class B, class S>
struct residual_common : layer_defaults {
  using R = Residual<B, S>;
  using CB = chain<B>;
  using CS = chain<S>;
  using RB = branch_run<CB>;
  using RS = branch_run<CS>;
  static constexpr std::string_view name = "Residual";
  static constexpr branch_join join = branch_join::sum;
  static std::string branch_name(std::size_t b) { return b == 0 ? "block" : "shortcut"; }

  /// f(walk) for the block, then the shortcut (core/composite.hpp).
  template <class F>
  static void for_each_branch(const R& r, shape in, F&& f) {
    f(branch_walk<const B>{&r.block, in});
    f(branch_walk<const S>{&r.shortcut, in});
  }
  /// f(layer&) for every inner layer: the block's, then the shortcut's.
  template <class Self, class F>
  static void for_each_inner(Self& r, F&& f) {
    CB::each(&r.block, [&](auto* l, auto) { f(*l); });
    CS::each(&r.shortcut, [&](auto* l, auto) { f(*l); });
  }

  static constexpr shape_check infer(shape in) {
    const shape_check b = CB::infer(in);
    if (!b.ok()) return b;
    const shape_check s = CS::infer(in);
    if (!s.ok()) return s;
    if (b.out.rank == 0 || s.out.rank == 0) return {shape{}, nullptr};  // run-time branches
    if (b.out.rank != s.out.rank)
      return {{}, "Residual: the block and the shortcut produce outputs of different ranks"};
    if (!extent_compatible(b.out[0], s.out[0]))
      return {{}, b.out.rank == 3 ? "Residual: the block and the shortcut produce different channel counts "
                                    "(use a projection shortcut, e.g. Block<Conv2D<C, 1, S>>)"
                                  : "Residual: the block and the shortcut produce different feature counts "
                                    "(use a projection shortcut, e.g. Block<Dense<N>>)"};
    if (!shape_compatible(b.out, s.out))
      return {{}, "Residual: the block and the shortcut produce different spatial sizes "
                  "(match the block's stride in the projection shortcut)"};
    return {b.out, nullptr};
  }

  static shape output_shape(const R& r, shape in) {
    const shape bo = RB::checked(&r.block, in, "Residual block");
    const shape so = RS::checked(&r.shortcut, in, "Residual shortcut");
    if (!(bo == so))
      throw shape_error(concat("Residual: the block outputs ", bo.str(), " but the ",
                               CS::count(&r.shortcut) == 0 ? "identity shortcut" : "shortcut", " outputs ", so.str(),
                               "; both branches must produce the same shape"));
    return bo;
  }

  static constexpr std::size_t cache_size(const R* r, shape in, shape) {
    const branch_sizes b = RB::measure(r ? &r->block : static_cast<const B*>(nullptr), in, 1);
    const branch_sizes s = RS::measure(r ? &r->shortcut : static_cast<const S*>(nullptr), in, 1);
    return b.acts + s.acts + b.caches + s.caches;
  }
  static constexpr std::size_t scratch_size(const R* r, shape in, shape, std::size_t batch) {
    const branch_sizes b = RB::measure(r ? &r->block : static_cast<const B*>(nullptr), in, batch);
    const branch_sizes s = RS::measure(r ? &r->shortcut : static_cast<const S*>(nullptr), in, batch);
    return 2 * std::max(b.max_act, s.max_act) * batch + std::max(b.scratch, s.scratch);
  }

  template <class T>
  static void forward(const R& r, const forward_args<T>& a) {
    const std::size_t N = a.batch;
    const branch_sizes zb = RB::measure(&r.block, a.in, N), zs = RS::measure(&r.shortcut, a.in, N);
    const std::size_t max_act = std::max(zb.max_act, zs.max_act);
    T* pp[2] = {a.scratch, a.scratch + max_act * N};
    T* inner_scratch = a.scratch + 2 * max_act * N;
    T* acts = a.cache;  // nullptr at inference: activations then go to the ping-pong buffers
    T* caches = a.cache ? a.cache + (zb.acts + zs.acts) * N : nullptr;
    const T* bo = RB::forward(&r.block, a, a.y, acts, caches, pp, inner_scratch);
    const T* so = RS::forward(&r.shortcut, a, static_cast<T*>(nullptr), acts, caches, pp, inner_scratch);
    const std::size_t n = N * a.out.size();
    for (std::size_t i = 0; i < n; ++i) a.y[i] = bo[i] + so[i];
  }

  template <class T>
  static void backward(const R& r, const backward_args<T>& a, R* grad) {
    if (!a.dx && !grad) return;
    const std::size_t N = a.batch;
    const branch_sizes zb = RB::measure(&r.block, a.in, N), zs = RS::measure(&r.shortcut, a.in, N);
    const std::size_t max_act = std::max(zb.max_act, zs.max_act);
    T* pp[2] = {a.scratch, a.scratch + max_act * N};
    T* inner_scratch = a.scratch + 2 * max_act * N;
    const T* acts_b = a.cache;
    const T* acts_s = acts_b + zb.acts * N;
    const T* caches_b = acts_s + zs.acts * N;
    const T* caches_s = caches_b + zb.caches * N;
    // dy flows unchanged into both branches: the block writes dx, the shortcut adds to it
    RB::backward(&r.block, grad ? &grad->block : nullptr, a, a.dy, acts_b + zb.acts * N, caches_b + zb.caches * N, false,
                 pp, inner_scratch);
    RS::backward(&r.shortcut, grad ? &grad->shortcut : nullptr, a, a.dy, acts_s + zs.acts * N, caches_s + zs.caches * N,
                 true, pp, inner_scratch);
  }
};
}  // namespace detail

/// The static Residual (Block branches, Identity shortcut).
template <class B, class S>
struct layer_traits<Residual<B, S>> : detail::residual_common<B, S> {
  using R = Residual<B, S>;
  using C = detail::residual_common<B, S>;
  static_assert(detail::is_static_block_v<B> && !detail::is_dynamic_block_v<S>,
                "nnlens::Residual: mix no static and run-time branches (use DynamicResidual<T> at run time)");
  /// True when an inner layer is inference-only (Dropout).
  static constexpr bool inference_only = detail::any_inference_only<B>() || detail::any_inference_only<S>();
  static constexpr std::size_t parameter_tensors = detail::tensor_count<B>() + detail::tensor_count<S>();
  static constexpr std::size_t buffer_tensors = detail::tensor_count<B, true>() + detail::tensor_count<S, true>();

  /// The inner layers' parameters, block then shortcut.
  template <class Self>
    requires(parameter_tensors > 0)
  static auto parameters(Self& r) {
    return detail::gather_tensors<false, sc<Self>, parameter_tensors>(inner(r));
  }
  /// The inner layers' buffers (BatchNorm's running statistics), block then shortcut.
  template <class Self>
    requires(buffer_tensors > 0)
  static auto buffers(Self& r) {
    return detail::gather_tensors<true, sc<Self>, buffer_tensors>(inner(r));
  }

  /// Initialises every inner layer (block, then shortcut) with its own input shape.
  static void init(R& r, shape in, std::mt19937_64& rng) {
    auto f = [&](auto* l, auto, shape i, shape) {
      using L = detail::layer_of_ptr_t<decltype(l)>;
      layer_traits<L>::init(*l, i, rng);
    };
    detail::chain<B>::visit(&r.block, in, f);
    detail::chain<S>::visit(&r.shortcut, in, f);
  }

 private:
  template <class Self>
  using sc = std::conditional_t<std::is_const_v<Self>, const typename R::scalar_type, typename R::scalar_type>;
  template <class Self>
  static auto inner(Self& r) {
    return [&r](auto&& f) { C::for_each_inner(r, [&](auto& l) { f(&l); }); };
  }
};

/// The run-time Residual: parameters() is a vector (the count is known only at run time).
template <class T>
struct layer_traits<Residual<DynamicBlock<T>, DynamicBlock<T>>>
    : detail::residual_common<DynamicBlock<T>, DynamicBlock<T>> {
  using R = DynamicResidual<T>;
  using C = detail::residual_common<DynamicBlock<T>, DynamicBlock<T>>;
  static std::vector<std::span<T>> parameters(R& r) { return detail::collect_tensors<false, T>(inner(r)); }
  static std::vector<std::span<const T>> parameters(const R& r) { return detail::collect_tensors<false, const T>(inner(r)); }
  /// The inner layers' buffers (BatchNorm's running statistics), block then shortcut.
  static std::vector<std::span<T>> buffers(R& r) { return detail::collect_tensors<true, T>(inner(r)); }
  static std::vector<std::span<const T>> buffers(const R& r) { return detail::collect_tensors<true, const T>(inner(r)); }

 private:
  template <class Self>
  static auto inner(Self& r) {
    return [&r](auto&& f) { C::for_each_inner(r, [&](auto& l) { f(&l); }); };
  }
};

/// to_dynamic / from_dynamic of a static Residual.  A Residual whose inner layers have no weights
/// has no scalar type; its run-time form is then DynamicResidual<float>, or DynamicResidual<U> in a
/// network of scalar U (as<U>: core/dynamic_form.hpp's dynamic_form_in).
template <class... Ls, class S>
struct dynamic_form<Residual<Block<Ls...>, S>> {
  using R = Residual<Block<Ls...>, S>;
  using T = std::conditional_t<std::is_void_v<typename R::scalar_type>, float, typename R::scalar_type>;
  template <class U>
    requires(std::is_void_v<typename R::scalar_type> || std::is_same_v<U, T>)
  using as = DynamicResidual<U>;
  using type = DynamicResidual<T>;

  template <class U = T>
  static as<U> to_dynamic(const R& r) {
    as<U> d;
    detail::block_to_dynamic(r.block, d.block);
    if constexpr (!std::is_same_v<S, Identity>) detail::block_to_dynamic(r.shortcut, d.shortcut);
    return d;
  }
  template <class U>
  static R from_dynamic(const DynamicResidual<U>& d, const std::string& where) {
    R r;
    detail::block_from_dynamic(r.block, d.block, where + ": block");
    if constexpr (std::is_same_v<S, Identity>) {
      if (!d.shortcut.layers.empty())
        throw shape_error(detail::concat(where, ": shortcut: the static type has an identity shortcut, the network has ",
                                         d.shortcut.layers.size(), " shortcut layers"));
    } else {
      detail::block_from_dynamic(r.shortcut, d.shortcut, where + ": shortcut");
    }
    return r;
  }
};

/// ExactLine: a composite.  Both branches split the same incoming segment (each runs ExactLine on
/// it, layer by layer); the Residual's breaks are the union and its output the sum.  A static
/// Residual is piecewise-linear when every inner layer is.
template <class B, class S>
  requires(detail::block_all<B>(detail::has_pwl_rule) && detail::block_all<S>(detail::has_pwl_rule))
struct pwl_rule<Residual<B, S>> : composite_rule<Residual<B, S>> {};

/// NNSlicer: a composite.  Its branches' layers are analysed as layers of their own, and the
/// addition is a weighted sum with unit weights and no synapses (docs/specs/nnslicer.md#29-ambiguities-and-readings A7).
template <class B, class S>
  requires(detail::block_all<B>(detail::has_sign_rule) && detail::block_all<S>(detail::has_sign_rule))
struct sign_rule<Residual<B, S>> : composite_rule<Residual<B, S>> {};

/// LRP: a composite.  Each branch propagates relevance through its own layers; the addition splits
/// R in proportion to the two summands (the ε-rule with unit weights, docs/specs/deepimportance.md#22-neuron-relevance-by-lrp).
template <class B, class S>
  requires(detail::block_all<B>(detail::has_relevance_rule) && detail::block_all<S>(detail::has_relevance_rule))
struct relevance_rule<Residual<B, S>> : composite_rule<Residual<B, S>> {};

// ---- io forms of the run-time Residual: codegen spelling (Residual<Block<...>, Block<...>>), ONNX
// export (both branches from the same value, then Add(block, shortcut)) and import (an Add of two
// activations forked from one value: the longer chain is the block, the other the shortcut).
template <class T>
struct codegen_rule<DynamicResidual<T>> {
  static std::string type(const DynamicResidual<T>& l, codegen_context& c) {
    std::string s = "nnlens::Residual<" + detail::codegen_block_type(l.block, c);
    if (!l.shortcut.layers.empty()) s += ", " + detail::codegen_block_type(l.shortcut, c);
    return s + ">";
  }
  static void fill(const DynamicResidual<T>& l, codegen_context& c, const std::string& lv) {
    const std::string where = c.where;
    detail::codegen_block_fill(l.block, c, lv + ".block", where + " block");
    detail::codegen_block_fill(l.shortcut, c, lv + ".shortcut", where + " shortcut");
    c.where = where;
  }
};
template <class T>
struct onnx_export_rule<DynamicResidual<T>> {
  static std::string emit(const DynamicResidual<T>& l, onnx_sink& s, const std::string& x, shape in, shape) {
    const std::string b = detail::onnx_export_block(l.block, s, x, in);
    const std::string sc = detail::onnx_export_block(l.shortcut, s, x, in);  // empty: x itself
    return s.node("Add", {b, sc}, {});
  }
};
template <class T>
struct onnx_join_rule<DynamicResidual<T>> {
  static constexpr std::string_view op = "Add";
  static DynamicResidual<T> build(onnx_node_view& n, std::vector<DynamicBlock<T>> branches) {
    if (branches.size() != 2) n.fail("adds " + std::to_string(branches.size()) + " activations; a residual adds two");
    if (branches[0].layers.size() < branches[1].layers.size()) std::swap(branches[0], branches[1]);
    return {std::move(branches[0]), std::move(branches[1])};
  }
};

}  // namespace nnlens
