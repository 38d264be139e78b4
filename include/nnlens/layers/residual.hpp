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
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "nnlens/core/error.hpp"
#include "nnlens/core/codegen_form.hpp"
#include "nnlens/core/traits.hpp"
#include "nnlens/core/onnx_form.hpp"
#include "nnlens/layers/dropout.hpp"
#include "nnlens/core/dynamic_form.hpp"

namespace nnlens {

/// A static chain of layers (a branch of a Residual).
template <class... Ls>
struct Block {
  static_assert((detail::check_layer<Ls>() && ...),
                "nnlens::Block: every element must be a layer (a type with nnlens::layer_traits)");
  std::tuple<Ls...> layers;

  template <std::size_t I>
  auto& layer() { return std::get<I>(layers); }
  template <std::size_t I>
  const auto& layer() const { return std::get<I>(layers); }
};

namespace detail {
/// DynamicNetwork's layer variant; defined in nnlens/layers/all.hpp (which includes this header).
template <class T>
struct dynamic_layer_list;
}  // namespace detail

/// A run-time chain of layers: the branch type of DynamicResidual.  Include nnlens/layers/all.hpp
/// (or network/dynamic_network.hpp) to use it: the variant is defined there.
template <class T>
struct DynamicBlock {
  std::vector<typename detail::dynamic_layer_list<T>::type> layers;
};

namespace detail {
template <class B>
inline constexpr bool is_static_block_v = false;
template <class... Ls>
inline constexpr bool is_static_block_v<Block<Ls...>> = true;
template <class B>
inline constexpr bool is_dynamic_block_v = false;
template <class T>
inline constexpr bool is_dynamic_block_v<DynamicBlock<T>> = true;

template <class A, class B>
struct scalar_join {
  static_assert(std::is_void_v<A> || std::is_void_v<B> || std::is_same_v<A, B>,
                "nnlens::Residual: all inner layers must use the same scalar type");
  using type = std::conditional_t<std::is_void_v<A>, B, A>;
};
template <class B>
struct branch_scalar {
  using type = void;  // Identity
};
template <class... Ls>
struct branch_scalar<Block<Ls...>> {
  using type = void;
};
template <class L, class... Ls>
struct branch_scalar<Block<L, Ls...>> {
  using type = typename scalar_join<layer_scalar_t<L>, typename branch_scalar<Block<Ls...>>::type>::type;
};
template <class T>
struct branch_scalar<DynamicBlock<T>> {
  using type = T;
};
}  // namespace detail

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

template <class... Ls, class U>
struct rebind_scalar<Block<Ls...>, U> {
  using type = Block<rebind_scalar_t<Ls, U>...>;
  static type convert(const Block<Ls...>& b) {
    return std::apply([](const auto&... l) { return type{{rebind_scalar<std::decay_t<decltype(l)>, U>::convert(l)...}}; },
                      b.layers);
  }
};
template <class T, class U>
struct rebind_scalar<DynamicBlock<T>, U> {
  using type = DynamicBlock<U>;
  static type convert(const DynamicBlock<T>& b) {
    type r;
    r.layers.reserve(b.layers.size());
    for (const auto& v : b.layers)
      std::visit([&](const auto& l) { r.layers.emplace_back(rebind_scalar<std::decay_t<decltype(l)>, U>::convert(l)); }, v);
    return r;
  }
};
template <class B, class S, class U>
struct rebind_scalar<Residual<B, S>, U> {
  using type = Residual<rebind_scalar_t<B, U>, rebind_scalar_t<S, U>>;
  static type convert(const Residual<B, S>& r) {
    return {rebind_scalar<B, U>::convert(r.block), rebind_scalar<S, U>::convert(r.shortcut)};
  }
};

namespace detail {

/// The output shape of one inner layer: from the type when it fixes it (constexpr, no object
/// needed), otherwise from the instance (l must then be non-null).
template <class L>
constexpr shape step_shape(const L* l, shape in) {
  const shape_check c = layer_traits<L>::infer(in);
  if (c.ok() && c.out.is_static()) return c.out;
  return layer_traits<L>::output_shape(*l, in);
}

/// Walking a branch.  P is the branch type, possibly const; it may be nullptr for a static
/// branch when only sizes are wanted.
///   visit(b, in, f)            f(layer*, index, in, out) in order
///   visit_reverse(b, g, in, f) f(layer*, grad layer* or nullptr, index, in, out), last first
///   each(b, f)                 f(layer*, index) in order, no shapes
///   count(b)                   number of layers
template <class B>
struct chain;

template <>
struct chain<Identity> {
  static constexpr shape_check infer(shape in) { return {in, nullptr}; }
  template <class P, class F>
  static constexpr shape visit(P*, shape in, F&&) {
    return in;
  }
  template <class P, class G, class F>
  static void visit_reverse(P*, G*, shape, F&&) {}
  template <class P, class F>
  static void each(P*, F&&) {}
  static constexpr std::size_t count(const Identity*) { return 0; }
};

template <class... Ls>
struct chain<Block<Ls...>> {
  static constexpr std::size_t n = sizeof...(Ls);

  static constexpr shape_check infer(shape in) {
    shape_check r{in, nullptr};
    ((r.ok() ? void(r = layer_traits<Ls>::infer(r.out)) : void()), ...);
    return r;
  }
  template <class P, class F>
  static constexpr shape visit(P* b, shape in, F&& f) {
    shape s = in;
    [&]<std::size_t... I>(std::index_sequence<I...>) { (visit_one<I>(b, s, f), ...); }(std::index_sequence_for<Ls...>{});
    return s;
  }
  template <class P, class G, class F>
  static void visit_reverse(P* b, G* g, shape in, F&& f) {
    std::array<shape, n + 1> sh{};
    sh[0] = in;
    visit(b, in, [&](const auto*, auto idx, shape, shape o) { sh[std::size_t(idx) + 1] = o; });
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (reverse_one<n - 1 - I>(b, g, sh, f), ...);
    }(std::make_index_sequence<n>{});
  }
  template <class P, class F>
  static void each(P* b, F&& f) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (f(&std::get<I>(b->layers), std::integral_constant<std::size_t, I>{}), ...);
    }(std::index_sequence_for<Ls...>{});
  }
  static constexpr std::size_t count(const Block<Ls...>*) { return n; }

 private:
  template <std::size_t I, class P, class F>
  static constexpr void visit_one(P* b, shape& s, F& f) {
    using L = std::tuple_element_t<I, std::tuple<Ls...>>;
    using LP = std::conditional_t<std::is_const_v<P>, const L, L>;
    LP* l = b ? &std::get<I>(b->layers) : nullptr;
    const shape o = step_shape<L>(l, s);
    f(l, std::integral_constant<std::size_t, I>{}, s, o);
    s = o;
  }
  template <std::size_t I, class P, class G, class F>
  static void reverse_one(P* b, G* g, const std::array<shape, n + 1>& sh, F& f) {
    using L = std::tuple_element_t<I, std::tuple<Ls...>>;
    L* gl = g ? &std::get<I>(g->layers) : nullptr;
    f(&std::get<I>(b->layers), gl, std::integral_constant<std::size_t, I>{}, sh[I], sh[I + 1]);
  }
};

template <class T>
struct chain<DynamicBlock<T>> {
  static constexpr shape_check infer(shape) { return {shape{}, nullptr}; }  // unknown until run time
  template <class P, class F>
  static shape visit(P* b, shape in, F&& f) {
    shape s = in;
    for (std::size_t i = 0; i < b->layers.size(); ++i)
      std::visit(
          [&](auto& l) {
            using L = std::remove_cvref_t<decltype(l)>;
            const shape o = step_shape<L>(&l, s);
            f(&l, i, s, o);
            s = o;
          },
          b->layers[i]);
    return s;
  }
  template <class P, class G, class F>
  static void visit_reverse(P* b, G* g, shape in, F&& f) {
    std::vector<shape> sh{in};
    sh.reserve(b->layers.size() + 1);
    visit(b, in, [&](const auto*, std::size_t, shape, shape o) { sh.push_back(o); });
    for (std::size_t i = b->layers.size(); i-- > 0;)
      std::visit(
          [&](auto& l) {
            using L = std::remove_cvref_t<decltype(l)>;
            L* gl = g ? &std::get<L>(g->layers[i]) : nullptr;
            f(&l, gl, i, sh[i], sh[i + 1]);
          },
          b->layers[i]);
  }
  template <class P, class F>
  static void each(P* b, F&& f) {
    for (std::size_t i = 0; i < b->layers.size(); ++i) std::visit([&](auto& l) { f(&l, i); }, b->layers[i]);
  }
  static std::size_t count(const DynamicBlock<T>* b) { return b->layers.size(); }
};

template <class P>
using layer_of_ptr_t = std::remove_cvref_t<std::remove_pointer_t<P>>;

template <class A, class... R>
std::string any_name_of(const std::variant<A, R...>& v) {
  return std::visit([](const auto& l) { return std::string(layer_traits<std::remove_cvref_t<decltype(l)>>::name); }, v);
}

/// Everything the static and the run-time Residual share (written once for both forms).
template <class B, class S>
struct residual_common : layer_defaults {
  using R = Residual<B, S>;
  using CB = chain<B>;
  using CS = chain<S>;
  static constexpr std::string_view name = "Residual";

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
    const shape bo = checked<CB>(&r.block, in, "block");
    const shape so = checked<CS>(&r.shortcut, in, "shortcut");
    if (!(bo == so))
      throw shape_error(concat("Residual: the block outputs ", bo.str(), " but the ",
                               CS::count(&r.shortcut) == 0 ? "identity shortcut" : "shortcut", " outputs ", so.str(),
                               "; both branches must produce the same shape"));
    return bo;
  }

  /// Per-chain sizes (per sample, except scratch which is for the given batch).
  struct sizes {
    std::size_t acts = 0, caches = 0, max_act = 0, scratch = 0;
  };
  template <class C, class P>
  static constexpr sizes measure(P* b, shape in, std::size_t batch) {
    sizes z{};
    z.max_act = in.size();
    C::visit(b, in, [&](const auto* l, auto, shape i, shape o) {
      using L = layer_of_ptr_t<decltype(l)>;
      z.acts += o.size();
      z.caches += layer_traits<L>::cache_size(l, i, o);
      z.max_act = std::max(z.max_act, o.size());
      z.scratch = std::max(z.scratch, layer_traits<L>::scratch_size(l, i, o, batch));
    });
    return z;
  }
  static constexpr std::size_t cache_size(const R* r, shape in, shape) {
    const sizes b = measure<CB>(r ? &r->block : static_cast<const B*>(nullptr), in, 1);
    const sizes s = measure<CS>(r ? &r->shortcut : static_cast<const S*>(nullptr), in, 1);
    return b.acts + s.acts + b.caches + s.caches;
  }
  static constexpr std::size_t scratch_size(const R* r, shape in, shape, std::size_t batch) {
    const sizes b = measure<CB>(r ? &r->block : static_cast<const B*>(nullptr), in, batch);
    const sizes s = measure<CS>(r ? &r->shortcut : static_cast<const S*>(nullptr), in, batch);
    return 2 * std::max(b.max_act, s.max_act) * batch + std::max(b.scratch, s.scratch);
  }

  template <class T>
  static void forward(const R& r, const forward_args<T>& a) {
    const std::size_t N = a.batch;
    const sizes zb = measure<CB>(&r.block, a.in, N), zs = measure<CS>(&r.shortcut, a.in, N);
    const std::size_t max_act = std::max(zb.max_act, zs.max_act);
    T* pp[2] = {a.scratch, a.scratch + max_act * N};
    T* inner_scratch = a.scratch + 2 * max_act * N;
    T* acts = a.cache;  // nullptr at inference: activations then go to the ping-pong buffers
    T* caches = a.cache ? a.cache + (zb.acts + zs.acts) * N : nullptr;
    const T* bo = run_chain<CB>(&r.block, a, a.y, acts, caches, pp, inner_scratch);
    const T* so = run_chain<CS>(&r.shortcut, a, static_cast<T*>(nullptr), acts, caches, pp, inner_scratch);
    const std::size_t n = N * a.out.size();
    for (std::size_t i = 0; i < n; ++i) a.y[i] = bo[i] + so[i];
  }

  template <class T>
  static void backward(const R& r, const backward_args<T>& a, R* grad) {
    if (!a.dx && !grad) return;
    const std::size_t N = a.batch;
    const sizes zb = measure<CB>(&r.block, a.in, N), zs = measure<CS>(&r.shortcut, a.in, N);
    const std::size_t max_act = std::max(zb.max_act, zs.max_act);
    T* pp[2] = {a.scratch, a.scratch + max_act * N};
    T* inner_scratch = a.scratch + 2 * max_act * N;
    const T* acts_b = a.cache;
    const T* acts_s = acts_b + zb.acts * N;
    const T* caches_b = acts_s + zs.acts * N;
    const T* caches_s = caches_b + zb.caches * N;
    const std::size_t nx = N * a.in.size();
    // block: writes dx
    if (CB::count(&r.block) == 0) {
      if (a.dx) std::copy_n(a.dy, nx, a.dx);
    } else {
      back_chain<CB>(&r.block, grad ? &grad->block : nullptr, a, acts_b + zb.acts * N, caches_b + zb.caches * N, false,
                     pp, inner_scratch);
    }
    // shortcut: adds to dx
    if (CS::count(&r.shortcut) == 0) {
      if (a.dx)
        for (std::size_t i = 0; i < nx; ++i) a.dx[i] += a.dy[i];
    } else {
      back_chain<CS>(&r.shortcut, grad ? &grad->shortcut : nullptr, a, acts_s + zs.acts * N, caches_s + zs.caches * N,
                     true, pp, inner_scratch);
    }
  }

 private:
  template <class C, class P>
  static shape checked(const P* b, shape in, const char* what) {
    shape s = in;
    C::each(b, [&](const auto* l, auto idx) {
      using L = layer_of_ptr_t<decltype(l)>;
      try {
        s = layer_traits<L>::output_shape(*l, s);
      } catch (const shape_error& e) {
        throw shape_error(concat("Residual ", what, " layer ", std::size_t(idx), " (", layer_traits<L>::name, "): ", e.what()));
      } catch (const value_error& e) {
        throw value_error(concat("Residual ", what, " layer ", std::size_t(idx), " (", layer_traits<L>::name, "): ", e.what()));
      }
    });
    return s;
  }

  /// Runs one branch forward; returns its output (x itself for an empty branch).  Training
  /// (acts != nullptr): every activation goes to acts, every inner cache to caches (both advance).
  /// Inference: activations alternate between pp[0] and pp[1]; the last goes to `last` if given.
  template <class C, class P, class T>
  static const T* run_chain(const P* b, const forward_args<T>& a, T* last, T*& acts, T*& caches, T* const (&pp)[2],
                            T* scratch) {
    const std::size_t N = a.batch, n = C::count(b);
    const T* cur = a.x;
    std::size_t k = 0;
    C::visit(b, a.in, [&](const auto* l, auto, shape i, shape o) {
      using L = layer_of_ptr_t<decltype(l)>;
      T* dst;
      T* cache = nullptr;
      if (acts) {
        dst = acts;
        acts += o.size() * N;
        cache = caches;
        caches += layer_traits<L>::cache_size(l, i, o) * N;
      } else {
        dst = (k + 1 == n && last) ? last : pp[k % 2];
      }
      layer_traits<L>::forward(*l, forward_args<T>{i, o, N, cur, dst, cache, scratch});
      cur = dst;
      ++k;
    });
    return cur;
  }

  /// Runs one branch backward from the end of its activations / caches (walking down).  The first
  /// layer's dx is written to a.dx, or (accumulate) added to it through a ping-pong buffer.
  template <class C, class P, class G, class T>
  static void back_chain(const P* b, G* g, const backward_args<T>& a, const T* act_end, const T* cache_end, bool accumulate,
                         T* const (&pp)[2], T* scratch) {
    const std::size_t N = a.batch;
    const T* dy = a.dy;
    int flip = 0;
    C::visit_reverse(b, g, a.in, [&](const auto* l, auto* gl, auto idx, shape i, shape o) {
      using L = layer_of_ptr_t<decltype(l)>;
      const T* y = act_end - o.size() * N;
      const bool first = std::size_t(idx) == 0;
      const T* x = first ? a.x : y - i.size() * N;
      const T* cache = cache_end - layer_traits<L>::cache_size(l, i, o) * N;
      T* dx = !first ? pp[flip] : (!a.dx ? nullptr : (accumulate ? pp[flip] : a.dx));
      layer_traits<L>::backward(*l, backward_args<T>{i, o, N, x, y, dy, cache, dx, scratch}, gl);
      if (first && accumulate && a.dx) {
        const std::size_t nx = N * i.size();
        for (std::size_t e = 0; e < nx; ++e) a.dx[e] += dx[e];
      }
      act_end = y;
      cache_end = cache;
      dy = dx;
      flip ^= 1;
    });
  }
};

template <class B>
constexpr bool any_inference_only() {
  if constexpr (is_static_block_v<B>)
    return []<class... Ls>(std::type_identity<Block<Ls...>>) {
      return (layer_traits<Ls>::inference_only || ... || false);
    }(std::type_identity<B>{});
  else
    return false;
}

/// How many parameter tensors (Buffers = false) or buffer tensors (true: BatchNorm's running
/// statistics) the layers of a static block have.
template <class B, bool Buffers = false>
constexpr std::size_t tensor_count() {
  std::size_t k = 0;
  if constexpr (is_static_block_v<B>) {
    [&]<class... Ls>(std::type_identity<Block<Ls...>>) {
      auto one = [&]<class L>(std::type_identity<L>) {
        if constexpr (Buffers) {
          if constexpr (HasBuffers<L>) k += std::tuple_size_v<decltype(layer_traits<L>::buffers(std::declval<L&>()))>;
        } else if constexpr (HasParameters<L>) {
          k += std::tuple_size_v<decltype(layer_traits<L>::parameters(std::declval<L&>()))>;
        }
      };
      (one(std::type_identity<Ls>{}), ...);
      (void)one;
    }(std::type_identity<B>{});
  }
  return k;
}
}  // namespace detail

/// The static Residual (Block branches, Identity shortcut).
template <class B, class S>
struct layer_traits<Residual<B, S>> : detail::residual_common<B, S> {
  using R = Residual<B, S>;
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
    return gather<false, parameter_tensors>(r);
  }
  /// The inner layers' buffers (BatchNorm's running statistics), block then shortcut.
  template <class Self>
    requires(buffer_tensors > 0)
  static auto buffers(Self& r) {
    return gather<true, buffer_tensors>(r);
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
  template <bool Buffers, std::size_t N, class Self>
  static auto gather(Self& r) {
    using T = typename R::scalar_type;
    using Sc = std::conditional_t<std::is_const_v<Self>, const T, T>;
    std::array<std::span<Sc>, N> out{};
    std::size_t k = 0;
    auto f = [&](auto* l, auto) {
      using L = detail::layer_of_ptr_t<decltype(l)>;
      if constexpr (Buffers) {
        if constexpr (HasBuffers<L>)
          for (auto sp : layer_traits<L>::buffers(*l)) out[k++] = sp;
      } else if constexpr (HasParameters<L>) {
        for (auto sp : layer_traits<L>::parameters(*l)) out[k++] = sp;
      }
    };
    detail::chain<B>::each(&r.block, f);
    detail::chain<S>::each(&r.shortcut, f);
    return out;
  }
};

/// The run-time Residual: parameters() is a vector (the count is known only at run time).
template <class T>
struct layer_traits<Residual<DynamicBlock<T>, DynamicBlock<T>>>
    : detail::residual_common<DynamicBlock<T>, DynamicBlock<T>> {
  using R = DynamicResidual<T>;
  static std::vector<std::span<T>> parameters(R& r) { return collect<T, false>(r); }
  static std::vector<std::span<const T>> parameters(const R& r) { return collect<const T, false>(r); }
  /// The inner layers' buffers (BatchNorm's running statistics), block then shortcut.
  static std::vector<std::span<T>> buffers(R& r) { return collect<T, true>(r); }
  static std::vector<std::span<const T>> buffers(const R& r) { return collect<const T, true>(r); }

 private:
  template <class Sc, bool Buffers, class Self>
  static std::vector<std::span<Sc>> collect(Self& r) {
    std::vector<std::span<Sc>> out;
    auto f = [&](auto* l, std::size_t) {
      using L = detail::layer_of_ptr_t<decltype(l)>;
      if constexpr (Buffers) {
        if constexpr (HasBuffers<L>)
          for (auto s : layer_traits<L>::buffers(*l)) out.push_back(s);
      } else if constexpr (HasParameters<L>) {
        for (auto s : layer_traits<L>::parameters(*l)) out.push_back(s);
      }
    };
    detail::chain<DynamicBlock<T>>::each(&r.block, f);
    detail::chain<DynamicBlock<T>>::each(&r.shortcut, f);
    return out;
  }
};

/// to_dynamic / from_dynamic of a static Residual.  A Residual whose inner layers have no weights
/// has no scalar type; its run-time form is then DynamicResidual<float>.
template <class... Ls, class S>
struct dynamic_form<Residual<Block<Ls...>, S>> {
  using R = Residual<Block<Ls...>, S>;
  using T = std::conditional_t<std::is_void_v<typename R::scalar_type>, float, typename R::scalar_type>;
  using type = DynamicResidual<T>;

  static type to_dynamic(const R& r) {
    type d;
    put(r.block, d.block);
    put(r.shortcut, d.shortcut);
    return d;
  }
  static R from_dynamic(const type& d, const std::string& where) {
    R r;
    take(r.block, d.block, where + ": block");
    take(r.shortcut, d.shortcut, where + ": shortcut");
    return r;
  }

 private:
  static void put(const Identity&, DynamicBlock<T>&) {}
  template <class... Cs>
  static void put(const Block<Cs...>& b, DynamicBlock<T>& d) {
    d.layers.reserve(sizeof...(Cs));
    detail::chain<Block<Cs...>>::each(&b, [&](const auto* l, auto) {
      using L = detail::layer_of_ptr_t<decltype(l)>;
      d.layers.emplace_back(dynamic_form<L>::to_dynamic(*l));
    });
  }
  static void take(Identity&, const DynamicBlock<T>& d, const std::string& what) {
    if (!d.layers.empty())
      throw shape_error(detail::concat(what, ": the static type has an identity shortcut, the network has ",
                                       d.layers.size(), " shortcut layers"));
  }
  template <class... Cs>
  static void take(Block<Cs...>& b, const DynamicBlock<T>& d, const std::string& what) {
    if (d.layers.size() != sizeof...(Cs))
      throw shape_error(detail::concat(what, ": the static type has ", sizeof...(Cs), " layers, the network has ",
                                       d.layers.size()));
    detail::chain<Block<Cs...>>::each(&b, [&](auto* l, auto idx) {
      using L = detail::layer_of_ptr_t<decltype(l)>;
      using D = dynamic_form_t<L>;
      const std::string here = detail::concat(what, " layer ", std::size_t(idx), " (", layer_traits<L>::name, ")");
      const auto* p = std::get_if<D>(&d.layers[idx]);
      if (!p) throw shape_error(detail::concat(here, ": the network has a ", detail::any_name_of(d.layers[idx]), " layer here"));
      *l = dynamic_form<L>::from_dynamic(*p, here);
    });
  }
};

namespace detail {
template <class B>
constexpr bool branch_is_pwl() {
  if constexpr (is_static_block_v<B>)
    return []<class... Ls>(std::type_identity<Block<Ls...>>) {
      return (PiecewiseLinearLayer<Ls> && ... && true);
    }(std::type_identity<B>{});
  else
    return true;  // Identity, or a run-time chain (checked layer by layer when ExactLine runs)
}
}  // namespace detail

namespace detail {
/// f(walk) once per branch of r (block, then shortcut); walk(g) calls g(const layer*, index, in,
/// out) for each of the branch's layers in order (nothing for the identity shortcut).  The one
/// walk behind every composite rule (pwl_rule, sign_rule, relevance_rule).
template <class B, class S, class F>
void residual_branches(const Residual<B, S>& r, shape in, F& f) {
  f([&](auto&& g) { chain<B>::visit(&r.block, in, g); });
  f([&](auto&& g) { chain<S>::visit(&r.shortcut, in, g); });
}
}  // namespace detail

/// ExactLine: a composite.  Both branches split the same incoming segment (each runs ExactLine on
/// it, layer by layer); the Residual's breaks are the union and its output the sum.  A static
/// Residual is piecewise-linear when every inner layer is.
template <class B, class S>
  requires(detail::branch_is_pwl<B>() && detail::branch_is_pwl<S>())
struct pwl_rule<Residual<B, S>> {
  /// f(walk): once per branch (block, then shortcut); walk(g) calls g(const layer*, index, in, out)
  /// for each of the branch's layers in order (nothing for the identity shortcut).
  template <class F>
  static void for_each_branch(const Residual<B, S>& r, shape in, F&& f) {
    detail::residual_branches(r, in, f);
  }
};

namespace detail {
template <class B>
constexpr bool branch_has_sign_rules() {
  if constexpr (is_static_block_v<B>)
    return []<class... Ls>(std::type_identity<Block<Ls...>>) {
      return (SignLayer<Ls> && ... && true);
    }(std::type_identity<B>{});
  else
    return true;
}
}  // namespace detail

/// NNSlicer: a composite.  Its branches' layers are analysed as layers of their own, and the
/// addition is a weighted sum with unit weights and no synapses (specs/nnslicer.md A7).
template <class B, class S>
  requires(detail::branch_has_sign_rules<B>() && detail::branch_has_sign_rules<S>())
struct sign_rule<Residual<B, S>> {
  template <class F>
  static void for_each_branch(const Residual<B, S>& r, shape in, F&& f) {
    detail::residual_branches(r, in, f);
  }
};

namespace detail {
template <class B>
constexpr bool branch_has_relevance_rules() {
  if constexpr (is_static_block_v<B>)
    return []<class... Ls>(std::type_identity<Block<Ls...>>) {
      return (RelevanceLayer<Ls> && ... && true);
    }(std::type_identity<B>{});
  else
    return true;
}
}  // namespace detail

/// LRP: a composite.  Each branch propagates relevance through its own layers; the addition splits
/// R in proportion to the two summands (the ε-rule with unit weights, specs/deepimportance.md §2.2).
template <class B, class S>
  requires(detail::branch_has_relevance_rules<B>() && detail::branch_has_relevance_rules<S>())
struct relevance_rule<Residual<B, S>> {
  template <class F>
  static void for_each_branch(const Residual<B, S>& r, shape in, F&& f) {
    detail::residual_branches(r, in, f);
  }
};


// ---- io forms of the run-time Residual: codegen spelling (Residual<Block<...>, Block<...>>), ONNX
// export (both branches from the same value, then Add(block, shortcut)).  Its import is graph
// structure (an Add of two activations forked from one value): io/onnx/import.hpp.
template <class T>
struct codegen_rule<DynamicResidual<T>> {
  static std::string block_type(const DynamicBlock<T>& b, codegen_context& c) {
    std::string s = "nnlens::Block<";
    for (std::size_t i = 0; i < b.layers.size(); ++i) s += (i ? ", " : "") + detail::codegen_variant_type(b.layers[i], c);
    return s + ">";
  }
  static std::string type(const DynamicResidual<T>& l, codegen_context& c) {
    std::string s = "nnlens::Residual<" + block_type(l.block, c);
    if (!l.shortcut.layers.empty()) s += ", " + block_type(l.shortcut, c);
    return s + ">";
  }
  static void fill(const DynamicResidual<T>& l, codegen_context& c, const std::string& lv) {
    const std::string where = c.where;
    auto branch = [&](const DynamicBlock<T>& b, const char* name) {
      for (std::size_t i = 0; i < b.layers.size(); ++i) {
        c.where = where + " " + name + " layer " + std::to_string(i);
        detail::codegen_variant_fill(b.layers[i], c, "std::get<" + std::to_string(i) + ">(" + lv + "." + name + ".layers)");
      }
    };
    branch(l.block, "block");
    branch(l.shortcut, "shortcut");
    c.where = where;
  }
};
template <class T>
struct onnx_export_rule<DynamicResidual<T>> {
  static std::string chain(const DynamicBlock<T>& b, onnx_sink& s, std::string x, shape in) {
    detail::chain<DynamicBlock<T>>::visit(&b, in, [&](const auto* l, std::size_t, shape i, shape o) {
      using L = std::remove_cvref_t<decltype(*l)>;
      x = onnx_export_rule<L>::emit(*l, s, x, i, o);
    });
    return x;
  }
  static std::string emit(const DynamicResidual<T>& l, onnx_sink& s, const std::string& x, shape in, shape) {
    const std::string b = chain(l.block, s, x, in);
    const std::string sc = chain(l.shortcut, s, x, in);  // empty: x itself
    return s.node("Add", {b, sc}, {});
  }
};

}  // namespace nnlens
