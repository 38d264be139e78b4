// nnlens/layers/block.hpp -- branches of composite ops: Block<Ls...> (a static chain of layers),
// DynamicBlock<T> (a run-time chain), and the machinery every composite (Residual, Concat) shares:
// walking a chain (detail::chain), sizing its activations and caches, running it forward and
// backward inside the composite's buffers (detail::branch_run), its parameters and buffers, its
// run-time form, and its io spellings.  Written once for both forms and for every composite.
//
//   Block<Ls...>       a chain of layers; shapes flow through it as in a Sequential.  Block<> is the
//                      empty chain (the identity).
//   DynamicBlock<T>    a std::vector of DynamicNetwork's layer variant (defined in layers/all.hpp).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "nnlens/core/codegen_form.hpp"
#include "nnlens/core/composite.hpp"
#include "nnlens/core/dynamic_form.hpp"
#include "nnlens/core/error.hpp"
#include "nnlens/core/onnx_form.hpp"
#include "nnlens/core/post_op.hpp"
#include "nnlens/core/traits.hpp"
#include "nnlens/layers/dropout.hpp"

namespace nnlens {
/// A static chain of layers (a branch of a composite op).
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

/// A run-time chain of layers: the branch type of the run-time composites.  Include nnlens/layers/all.hpp
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
                "nnlens: all inner layers of a composite op (Residual, Concat) must use the same scalar type");
  using type = std::conditional_t<std::is_void_v<A>, B, A>;
};
/// The scalar type of several branches' layers (void when none has weights).
template <class... Ts>
struct scalar_fold {
  using type = void;
};
template <class A, class... Ts>
struct scalar_fold<A, Ts...> {
  using type = typename scalar_join<A, typename scalar_fold<Ts...>::type>::type;
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

/// The walk a composite's for_each_branch hands to its visitor (core/composite.hpp): one branch,
/// forwards or backwards.
///   walk(g)           g(layer*, index, in, out) for the branch's layers in order
///   walk.reverse(g)   the same, last layer first (the backward analyses: LRP, NNSlicer)
/// The index is a std::integral_constant for a static Block, so both walks are compile-time folds.
template <class P>
struct branch_walk {
  using B = std::remove_const_t<P>;
  P* b;
  shape in;
  template <class G>
  constexpr shape operator()(G&& g) const {
    return chain<B>::visit(b, in, g);
  }
  template <class G>
  void reverse(G&& g) const {
    chain<B>::visit_reverse(b, static_cast<B*>(nullptr), in,
                            [&](auto* l, auto*, auto idx, shape i, shape o) { g(l, idx, i, o); });
  }
};

template <class A, class... R>
std::string any_name_of(const std::variant<A, R...>& v) {
  return std::visit([](const auto& l) { return std::string(layer_traits<std::remove_cvref_t<decltype(l)>>::name); }, v);
}

/// Sizes of one branch: per sample (acts, caches, max_act) except scratch, which is for `batch`.
struct branch_sizes {
  std::size_t acts = 0, caches = 0, max_act = 0, scratch = 0;
};

/// Running one branch inside a composite's buffers (C = chain<B>; P = B, possibly const).
template <class C>
struct branch_run {
  template <class P>
  static constexpr branch_sizes measure(P* b, shape in, std::size_t batch) {
    branch_sizes z{};
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

  /// The branch's output shape, checking every layer; errors are prefixed with `who` ("Residual
  /// block"), the layer's index and its name.
  template <class P>
  static shape checked(const P* b, shape in, const std::string& who) {
    shape s = in;
    C::each(b, [&](const auto* l, auto idx) {
      using L = layer_of_ptr_t<decltype(l)>;
      try {
        s = layer_traits<L>::output_shape(*l, s);
      } catch (const shape_error& e) {
        throw shape_error(concat(who, " layer ", std::size_t(idx), " (", layer_traits<L>::name, "): ", e.what()));
      } catch (const value_error& e) {
        throw value_error(concat(who, " layer ", std::size_t(idx), " (", layer_traits<L>::name, "): ", e.what()));
      }
    });
    return s;
  }

  /// Runs the branch forward on a.x; returns its output (a.x itself for an empty branch).
  /// Training (acts != nullptr): every activation goes to acts, every inner cache to caches (both
  /// advance).  Inference: activations alternate between pp[0] and pp[1]; the last goes to `last`
  /// if given.
  template <class P, class T>
  static const T* forward(const P* b, const forward_args<T>& a, T* last, T*& acts, T*& caches, T* const (&pp)[2],
                          T* scratch) {
    const std::size_t N = a.batch, n = C::count(b);
    if (!acts) {  // inference: an element-wise map after a producer runs inside it (core/post_op.hpp)
      fusing_chain<T> run(a.x, pp[0], pp[1]);
      std::size_t k = 0;
      C::visit(b, a.in, [&](const auto* l, auto, shape i, shape o) {
        run.step(*l, i, o, N, scratch, ++k == n ? last : nullptr);
      });
      return run.finish();
    }
    const T* cur = a.x;  // training: every activation and cache kept
    C::visit(b, a.in, [&](const auto* l, auto, shape i, shape o) {
      using L = layer_of_ptr_t<decltype(l)>;
      T* dst = acts;
      acts += o.size() * N;
      T* cache = caches;
      caches += layer_traits<L>::cache_size(l, i, o) * N;
      layer_traits<L>::forward(*l, forward_args<T>{i, o, N, cur, dst, cache, scratch});
      cur = dst;
    });
    return cur;
  }

  /// Runs the branch backward from dy (its output's gradient), from the end of its activations /
  /// caches (walking down).  The gradient of the branch's input is written to a.dx, or (accumulate)
  /// added to it; an empty branch passes dy through.  Inner parameter gradients go to *g.
  template <class P, class G, class T>
  static void backward(const P* b, G* g, const backward_args<T>& a, const T* dy, const T* act_end, const T* cache_end,
                       bool accumulate, T* const (&pp)[2], T* scratch) {
    const std::size_t N = a.batch, nx = N * a.in.size();
    if (C::count(b) == 0) {
      if (!a.dx) return;
      if (accumulate)
        for (std::size_t i = 0; i < nx; ++i) a.dx[i] += dy[i];
      else
        std::copy_n(dy, nx, a.dx);
      return;
    }
    int flip = 0;
    C::visit_reverse(b, g, a.in, [&](const auto* l, auto* gl, auto idx, shape i, shape o) {
      using L = layer_of_ptr_t<decltype(l)>;
      const T* y = act_end - o.size() * N;
      const bool first = std::size_t(idx) == 0;
      const T* x = first ? a.x : y - i.size() * N;
      const T* cache = cache_end - layer_traits<L>::cache_size(l, i, o) * N;
      T* dx = !first ? pp[flip] : (!a.dx ? nullptr : (accumulate ? pp[flip] : a.dx));
      layer_traits<L>::backward(*l, backward_args<T>{i, o, N, x, y, dy, cache, dx, scratch}, gl);
      if (first && accumulate && a.dx)
        for (std::size_t e = 0; e < nx; ++e) a.dx[e] += dx[e];
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

/// The parameter (Buffers = false) or buffer tensors of every inner layer, in the order
/// each_inner(f) visits them (f(layer*)): a std::array of N spans (static composites).
template <bool Buffers, class Sc, std::size_t N, class Each>
std::array<std::span<Sc>, N> gather_tensors(Each&& each_inner) {
  std::array<std::span<Sc>, N> out{};
  std::size_t k = 0;
  each_inner([&](auto* l) {
    using L = layer_of_ptr_t<decltype(l)>;
    if constexpr (Buffers) {
      if constexpr (HasBuffers<L>)
        for (auto sp : layer_traits<L>::buffers(*l)) out[k++] = sp;
    } else if constexpr (HasParameters<L>) {
      for (auto sp : layer_traits<L>::parameters(*l)) out[k++] = sp;
    }
  });
  return out;
}
/// The same as a std::vector (run-time composites).
template <bool Buffers, class Sc, class Each>
std::vector<std::span<Sc>> collect_tensors(Each&& each_inner) {
  std::vector<std::span<Sc>> out;
  each_inner([&](auto* l) {
    using L = layer_of_ptr_t<decltype(l)>;
    if constexpr (Buffers) {
      if constexpr (HasBuffers<L>)
        for (auto s : layer_traits<L>::buffers(*l)) out.push_back(s);
    } else if constexpr (HasParameters<L>) {
      for (auto s : layer_traits<L>::parameters(*l)) out.push_back(s);
    }
  });
  return out;
}

/// Whether pred(std::type_identity<L>{}) holds for every layer L of a static block (a run-time
/// block is checked layer by layer when the analysis runs: true).  The predicates below ask for
/// each analysis's rule.
template <class B, class P>
constexpr bool block_all(P pred) {
  if constexpr (is_static_block_v<B>)
    return []<class... Ls>(std::type_identity<Block<Ls...>>, P p) {
      (void)p;  // an empty Block<> asks nothing
    return (p(std::type_identity<Ls>{}) && ... && true);
    }(std::type_identity<B>{}, pred);
  else
    return true;
}
inline constexpr auto has_pwl_rule = []<class L>(std::type_identity<L>) { return PiecewiseLinearLayer<L>; };
inline constexpr auto has_sign_rule = []<class L>(std::type_identity<L>) { return SignLayer<L>; };
inline constexpr auto has_relevance_rule = []<class L>(std::type_identity<L>) { return RelevanceLayer<L>; };

/// A static block's run-time form (put) and back (take: checks every layer's type against the
/// static one, naming `what` and the layer).
template <class T, class... Cs>
void block_to_dynamic(const Block<Cs...>& b, DynamicBlock<T>& d) {
  d.layers.reserve(sizeof...(Cs));
  chain<Block<Cs...>>::each(&b, [&](const auto* l, auto) { d.layers.emplace_back(to_dynamic_in<T>(*l)); });
}
template <class T, class... Cs>
void block_from_dynamic(Block<Cs...>& b, const DynamicBlock<T>& d, const std::string& what) {
  if (d.layers.size() != sizeof...(Cs))
    throw shape_error(concat(what, ": the static type has ", sizeof...(Cs), " layers, the network has ", d.layers.size()));
  chain<Block<Cs...>>::each(&b, [&](auto* l, auto idx) {
    using L = layer_of_ptr_t<decltype(l)>;
    using D = dynamic_form_in_t<L, T>;
    const std::string here = concat(what, " layer ", std::size_t(idx), " (", layer_traits<L>::name, ")");
    const auto* p = std::get_if<D>(&d.layers[idx]);
    if (!p) throw shape_error(concat(here, ": the network has a ", any_name_of(d.layers[idx]), " layer here"));
    *l = dynamic_form<L>::from_dynamic(*p, here);
  });
}

/// io spellings of a run-time block: its codegen type ("nnlens::Block<...>"), the statements that
/// fill it (lv: the C++ lvalue of the static block), and its ONNX nodes (returns the output value;
/// x itself for an empty block).
template <class T>
std::string codegen_block_type(const DynamicBlock<T>& b, codegen_context& c) {
  std::string s = "nnlens::Block<";
  for (std::size_t i = 0; i < b.layers.size(); ++i) s += (i ? ", " : "") + codegen_variant_type(b.layers[i], c);
  return s + ">";
}
template <class T>
void codegen_block_fill(const DynamicBlock<T>& b, codegen_context& c, const std::string& lv, const std::string& where) {
  for (std::size_t i = 0; i < b.layers.size(); ++i) {
    c.where = where + " layer " + std::to_string(i);
    codegen_variant_fill(b.layers[i], c, "std::get<" + std::to_string(i) + ">(" + lv + ".layers)");
  }
}
template <class T>
std::string onnx_export_block(const DynamicBlock<T>& b, onnx_sink& s, std::string x, shape in) {
  chain<DynamicBlock<T>>::visit(&b, in, [&](const auto* l, std::size_t, shape i, shape o) {
    using L = std::remove_cvref_t<decltype(*l)>;
    x = onnx_export_rule<L>::emit(*l, s, x, i, o);
  });
  return x;
}

}  // namespace detail
}  // namespace nnlens
