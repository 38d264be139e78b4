// nnlens/layers/concat.hpp -- Concat<Block<...>, Block<...>, ...>: y = [b_0(x), b_1(x), ...].
//
//   Concat<Block<Ls...>, Block<Ms...>, ...>   one branch per Block, all reading the same x; the
//                                 outputs are concatenated along the channel axis of a [C,H,W]
//                                 output (NCHW, as torch.cat(dim=1) / ONNX Concat(axis=1)) or the
//                                 features of a [F] output.  Inception's blocks:
//                                 Concat<Block<Conv2D<8,1>>, Block<Conv2D<8,3,1,1>>, Block<MaxPool2D<3,1,1>>>
//                                 DenseNet's concat(x, f(x)):
//                                 Concat<Block<>, Block<BatchNorm<>, ReLU, Conv2D<12,3,1,1>>>
//   DynamicConcat<T>              the run-time form DynamicNetwork stores: a std::vector of
//                                 DynamicBlock<T> (layers/block.hpp).
// The branches' machinery (walking, buffers, parameters, run-time form, io) is layers/block.hpp,
// shared with Residual; the join is core/composite.hpp's branch_join::concat, which every analysis
// (NNSlicer, LRP, ExactLine, coverage, compress) reads from the traits: nothing else names Concat.
//
// requires: at least one branch; every branch's output has the same rank, and for images the same
//           height and width.  A static Concat is checked by infer (a Sequential reports it at
//           compile time, naming the Concat); output_shape checks it at run time and throws
//           shape_error naming the branch and both shapes.  Errors of an inner layer are prefixed
//           with its branch, index and name.
// ensures:  forward runs the branches in order and copies each output into its channel range.
//           cache per sample = every inner activation (branch by branch) + every inner cache, so
//           backward never recomputes; scratch = three buffers of the largest inner activation
//           (input included) times batch + the largest inner scratch.
//           backward: the channel range of dy that branch k wrote flows into branch k; dx is the
//           sum of the branches' dx; inner parameter gradients are added to the matching layer of
//           *grad.  parameters()/buffers(): the inner layers', branch by branch (a std::array for a
//           static Concat, a std::vector for DynamicConcat).  init(): every inner layer in order.
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
#include <vector>

#include "nnlens/core/codegen_form.hpp"
#include "nnlens/core/composite.hpp"
#include "nnlens/core/dynamic_form.hpp"
#include "nnlens/core/error.hpp"
#include "nnlens/core/onnx_form.hpp"
#include "nnlens/core/traits.hpp"
#include "nnlens/layers/block.hpp"

namespace nnlens {

template <class... Bs>
struct Concat {
  static_assert(sizeof...(Bs) >= 1, "nnlens::Concat<Bs...>: give at least one branch");
  static_assert((detail::is_static_block_v<Bs> && ...),
                "nnlens::Concat<Bs...>: every branch must be Block<layers...> (use DynamicConcat<T> at run time)");
  /// The inner layers' scalar type (void when no inner layer has weights).
  using scalar_type = typename detail::scalar_fold<typename detail::branch_scalar<Bs>::type...>::type;
  std::tuple<Bs...> branches;
};

/// The run-time Concat: any number of run-time branches (at least one).
template <class T = float>
struct DynamicConcat {
  using scalar_type = T;
  std::vector<DynamicBlock<T>> branches;
};

template <class... Bs, class U>
struct rebind_scalar<Concat<Bs...>, U> {
  using type = Concat<rebind_scalar_t<Bs, U>...>;
  static type convert(const Concat<Bs...>& c) {
    return std::apply([](const auto&... b) { return type{{rebind_scalar<std::decay_t<decltype(b)>, U>::convert(b)...}}; },
                      c.branches);
  }
};
template <class T, class U>
struct rebind_scalar<DynamicConcat<T>, U> {
  using type = DynamicConcat<U>;
  static type convert(const DynamicConcat<T>& c) {
    type r;
    for (const auto& b : c.branches) r.branches.push_back(rebind_scalar<DynamicBlock<T>, U>::convert(b));
    return r;
  }
};

namespace detail {

/// Walking a Concat's branches: each(c, f) calls f(branch*, k) in order (c may be nullptr for a
/// static Concat when only sizes are wanted; the branch pointers are then nullptr too);
/// each2(c, g, f) calls f(branch*, grad branch* or nullptr, k).
template <class C>
struct concat_list;

template <class... Bs>
struct concat_list<Concat<Bs...>> {
  using C = Concat<Bs...>;
  static constexpr std::size_t count(const C*) { return sizeof...(Bs); }
  template <class P, class F>
  static constexpr void each(P* c, F&& f) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (f(c ? &std::get<I>(c->branches) : ptr<P, I>(), I), ...);
    }(std::index_sequence_for<Bs...>{});
  }
  template <class P, class G, class F>
  static void each2(P* c, G* g, F&& f) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (f(&std::get<I>(c->branches), g ? &std::get<I>(g->branches) : ptr<G, I>(), I), ...);
    }(std::index_sequence_for<Bs...>{});
  }

 private:
  template <class P, std::size_t I>
  static constexpr auto ptr() {
    using B = std::tuple_element_t<I, std::tuple<Bs...>>;
    return static_cast<std::conditional_t<std::is_const_v<P>, const B, B>*>(nullptr);
  }
};

template <class T>
struct concat_list<DynamicConcat<T>> {
  using C = DynamicConcat<T>;
  static std::size_t count(const C* c) { return c->branches.size(); }
  template <class P, class F>
  static void each(P* c, F&& f) {
    NNLENS_EXPECTS(c != nullptr);  // a run-time Concat is always measured through its instance
    for (std::size_t k = 0; k < c->branches.size(); ++k) f(&c->branches[k], k);
  }
  template <class P, class G, class F>
  static void each2(P* c, G* g, F&& f) {
    for (std::size_t k = 0; k < c->branches.size(); ++k) f(&c->branches[k], g ? &g->branches[k] : nullptr, k);
  }
};

template <class P>
using branch_of_ptr_t = std::remove_cvref_t<std::remove_pointer_t<P>>;

/// Everything the static and the run-time Concat share (written once for both forms).
template <class C>
struct concat_common : layer_defaults {
  using list = concat_list<C>;
  static constexpr std::string_view name = "Concat";
  static constexpr branch_join join = branch_join::concat;
  static constexpr std::string_view join_name = "Concat";

  /// f(walk) once per branch, in order (core/composite.hpp).
  template <class F>
  static void for_each_branch(const C& c, shape in, F&& f) {
    list::each(&c, [&](const auto* b, std::size_t) {
      f(branch_walk<std::remove_pointer_t<decltype(b)>>{b, in});
    });
  }
  /// f(layer&) for every inner layer, branch by branch.
  template <class Self, class F>
  static void for_each_inner(Self& c, F&& f) {
    list::each(&c, [&](auto* b, std::size_t) {
      chain<branch_of_ptr_t<decltype(b)>>::each(b, [&](auto* l, auto) { f(*l); });
    });
  }

  /// The output shape of a join of branch outputs (rank 0: not known until run time), or the error.
  static constexpr shape_check join_shapes(const shape* outs, std::size_t n) {
    shape r{};
    for (std::size_t k = 0; k < n; ++k) {
      const shape& o = outs[k];
      if (o.rank == 0) return {shape{}, nullptr};
      if (k == 0) {
        r = o;
        continue;
      }
      if (o.rank != r.rank) return {{}, "Concat: the branches produce outputs of different ranks"};
      if (r.rank == 3 && (!extent_compatible(r.d[1], o.d[1]) || !extent_compatible(r.d[2], o.d[2])))
        return {{}, "Concat: the branches produce different spatial sizes (concatenation is along the channel axis)"};
      r.d[0] = (r.d[0] == dyn || o.d[0] == dyn) ? dyn : r.d[0] + o.d[0];
    }
    return {r, nullptr};
  }

  static shape output_shape(const C& c, shape in) {
    std::vector<shape> outs;
    list::each(&c, [&](const auto* b, std::size_t k) {
      using RB = branch_run<chain<branch_of_ptr_t<decltype(b)>>>;
      outs.push_back(RB::checked(b, in, concat("Concat branch ", k)));
    });
    if (outs.empty()) throw shape_error("Concat: the network's Concat has no branch");
    for (std::size_t k = 1; k < outs.size(); ++k) {
      const shape &a = outs[0], &o = outs[k];
      if (o.rank != a.rank || (a.rank == 3 && (o[1] != a[1] || o[2] != a[2])))
        throw shape_error(concat("Concat: branch 0 outputs ", a.str(), " but branch ", k, " outputs ", o.str(),
                                 a.rank == 3 && o.rank == 3 ? "; the branches must agree in height and width"
                                                            : "; the branches must produce outputs of the same rank"));
    }
    const shape_check j = join_shapes(outs.data(), outs.size());
    return j.out;
  }

  /// Every branch's sizes, its output size and offset in the joined output (per sample).
  struct plan {
    std::size_t acts = 0, caches = 0, max_act = 0, scratch = 0;
    std::vector<std::size_t> out_size, offset, branch_acts, branch_caches;
  };
  template <class P>
  static plan plan_of(P* c, shape in, std::size_t batch) {
    plan p;
    list::each(c, [&](const auto* b, std::size_t) {
      using CH = chain<branch_of_ptr_t<decltype(b)>>;
      const branch_sizes z = branch_run<CH>::measure(b, in, batch);
      const shape o = CH::visit(b, in, [](const auto*, auto, shape, shape) {});
      p.acts += z.acts, p.caches += z.caches;
      p.max_act = std::max(p.max_act, z.max_act);
      p.scratch = std::max(p.scratch, z.scratch);
      p.branch_acts.push_back(z.acts), p.branch_caches.push_back(z.caches);
      p.out_size.push_back(o.size());
    });
    p.offset = branch_offsets(branch_join::concat, p.out_size);
    return p;
  }
  static constexpr std::size_t cache_size(const C* c, shape in, shape) {
    std::size_t n = 0;
    list::each(c, [&](const auto* b, std::size_t) {
      const branch_sizes z = branch_run<chain<branch_of_ptr_t<decltype(b)>>>::measure(b, in, 1);
      n += z.acts + z.caches;
    });
    return n;
  }
  static constexpr std::size_t scratch_size(const C* c, shape in, shape, std::size_t batch) {
    std::size_t max_act = in.size(), s = 0;
    list::each(c, [&](const auto* b, std::size_t) {
      const branch_sizes z = branch_run<chain<branch_of_ptr_t<decltype(b)>>>::measure(b, in, batch);
      max_act = std::max(max_act, z.max_act), s = std::max(s, z.scratch);
    });
    return 3 * max_act * batch + s;
  }

  template <class T>
  static void forward(const C& c, const forward_args<T>& a) {
    const std::size_t N = a.batch, total = a.out.size();
    const plan p = plan_of(&c, a.in, N);
    T* pp[2] = {a.scratch, a.scratch + p.max_act * N};
    T* inner_scratch = a.scratch + 3 * p.max_act * N;
    T* acts = a.cache;  // nullptr at inference: activations then go to the ping-pong buffers
    T* caches = a.cache ? a.cache + p.acts * N : nullptr;
    list::each(&c, [&](const auto* b, std::size_t k) {
      using RB = branch_run<chain<branch_of_ptr_t<decltype(b)>>>;
      const T* o = RB::forward(b, a, static_cast<T*>(nullptr), acts, caches, pp, inner_scratch);
      const std::size_t m = p.out_size[k];
      for (std::size_t r = 0; r < N; ++r) std::copy_n(o + r * m, m, a.y + r * total + p.offset[k]);
    });
  }

  template <class T>
  static void backward(const C& c, const backward_args<T>& a, C* grad) {
    if (!a.dx && !grad) return;
    const std::size_t N = a.batch, total = a.out.size();
    const plan p = plan_of(&c, a.in, N);
    T* pp[2] = {a.scratch, a.scratch + p.max_act * N};
    T* dyk = a.scratch + 2 * p.max_act * N;
    T* inner_scratch = a.scratch + 3 * p.max_act * N;
    const T* act = a.cache;
    const T* cache = a.cache + p.acts * N;
    list::each2(&c, grad, [&](const auto* b, auto* g, std::size_t k) {
      using RB = branch_run<chain<branch_of_ptr_t<decltype(b)>>>;
      const std::size_t m = p.out_size[k];
      for (std::size_t r = 0; r < N; ++r) std::copy_n(a.dy + r * total + p.offset[k], m, dyk + r * m);
      const T* act_end = act + p.branch_acts[k] * N;
      const T* cache_end = cache + p.branch_caches[k] * N;
      RB::backward(b, g, a, static_cast<const T*>(dyk), act_end, cache_end, k > 0, pp, inner_scratch);
      act = act_end, cache = cache_end;
    });
  }

  static void init(C& c, shape in, std::mt19937_64& rng) {
    list::each(&c, [&](auto* b, std::size_t) {
      chain<branch_of_ptr_t<decltype(b)>>::visit(b, in, [&](auto* l, auto, shape i, shape) {
        layer_traits<layer_of_ptr_t<decltype(l)>>::init(*l, i, rng);
      });
    });
  }

 protected:
  template <class Self>
  static auto inner(Self& c) {
    return [&c](auto&& f) { for_each_inner(c, [&](auto& l) { f(&l); }); };
  }
};
}  // namespace detail

/// The static Concat (Block branches).
template <class... Bs>
struct layer_traits<Concat<Bs...>> : detail::concat_common<Concat<Bs...>> {
  using C = Concat<Bs...>;
  using base = detail::concat_common<C>;
  static constexpr bool inference_only = (detail::any_inference_only<Bs>() || ...);
  static constexpr std::size_t parameter_tensors = (detail::tensor_count<Bs>() + ...);
  static constexpr std::size_t buffer_tensors = (detail::tensor_count<Bs, true>() + ...);

  static constexpr shape_check infer(shape in) {
    std::array<shape, sizeof...(Bs)> outs{};
    std::size_t k = 0;
    const char* err = nullptr;
    ((err ? void() : [&] {
       const shape_check b = detail::chain<Bs>::infer(in);
       if (!b.ok()) err = b.error;
       outs[k++] = b.out;
     }()),
     ...);
    if (err) return {{}, err};
    return base::join_shapes(outs.data(), outs.size());
  }

  /// The inner layers' parameters, branch by branch.
  template <class Self>
    requires(parameter_tensors > 0)
  static auto parameters(Self& c) {
    return detail::gather_tensors<false, sc<Self>, parameter_tensors>(base::inner(c));
  }
  /// The inner layers' buffers (BatchNorm's running statistics), branch by branch.
  template <class Self>
    requires(buffer_tensors > 0)
  static auto buffers(Self& c) {
    return detail::gather_tensors<true, sc<Self>, buffer_tensors>(base::inner(c));
  }

 private:
  template <class Self>
  using sc = std::conditional_t<std::is_const_v<Self>, const typename C::scalar_type, typename C::scalar_type>;
};

/// The run-time Concat: parameters() is a vector (the count is known only at run time).
template <class T>
struct layer_traits<DynamicConcat<T>> : detail::concat_common<DynamicConcat<T>> {
  using C = DynamicConcat<T>;
  using base = detail::concat_common<C>;
  static constexpr shape_check infer(shape) { return {shape{}, nullptr}; }  // known at run time
  static std::vector<std::span<T>> parameters(C& c) { return detail::collect_tensors<false, T>(base::inner(c)); }
  static std::vector<std::span<const T>> parameters(const C& c) { return detail::collect_tensors<false, const T>(base::inner(c)); }
  static std::vector<std::span<T>> buffers(C& c) { return detail::collect_tensors<true, T>(base::inner(c)); }
  static std::vector<std::span<const T>> buffers(const C& c) { return detail::collect_tensors<true, const T>(base::inner(c)); }
};

/// to_dynamic / from_dynamic of a static Concat.  A Concat whose inner layers have no weights has
/// no scalar type; its run-time form is then DynamicConcat<float>, or DynamicConcat<U> in a network
/// of scalar U (as<U>: core/dynamic_form.hpp's dynamic_form_in).
template <class... Bs>
struct dynamic_form<Concat<Bs...>> {
  using C = Concat<Bs...>;
  using T = std::conditional_t<std::is_void_v<typename C::scalar_type>, float, typename C::scalar_type>;
  template <class U>
    requires(std::is_void_v<typename C::scalar_type> || std::is_same_v<U, T>)
  using as = DynamicConcat<U>;
  using type = DynamicConcat<T>;

  template <class U = T>
  static as<U> to_dynamic(const C& c) {
    as<U> d;
    d.branches.resize(sizeof...(Bs));
    detail::concat_list<C>::each(&c, [&](const auto* b, std::size_t k) { detail::block_to_dynamic(*b, d.branches[k]); });
    return d;
  }
  template <class U>
  static C from_dynamic(const DynamicConcat<U>& d, const std::string& where) {
    if (d.branches.size() != sizeof...(Bs))
      throw shape_error(detail::concat(where, ": the static type has ", sizeof...(Bs), " branches, the network has ",
                                       d.branches.size()));
    C c;
    detail::concat_list<C>::each(&c, [&](auto* b, std::size_t k) {
      detail::block_from_dynamic(*b, d.branches[k], detail::concat(where, ": branch ", k));
    });
    return c;
  }
};

namespace detail {
/// Whether every inner layer of a static Concat satisfies pred (block_all); a run-time Concat is
/// checked layer by layer when the analysis runs.
template <class... Bs, class P>
constexpr bool concat_all(std::type_identity<Concat<Bs...>>, P pred) {
  return (block_all<Bs>(pred) && ...);
}
template <class T, class P>
constexpr bool concat_all(std::type_identity<DynamicConcat<T>>, P) {
  return true;
}
template <class L>
concept concat_op = requires { typename concat_list<L>::C; };
}  // namespace detail

/// ExactLine: a composite.  Every branch splits the same incoming segment; the breaks are the union
/// and the output the branches' values side by side.  Piecewise-linear when every inner layer is.
template <detail::concat_op C>
  requires(detail::concat_all(std::type_identity<C>{}, detail::has_pwl_rule))
struct pwl_rule<C> : composite_rule<C> {};

/// NNSlicer: a composite.  Its branches' layers are analysed as layers of their own; the join is a
/// copy (each output neuron has exactly one predecessor, with unit weight and no synapse).
template <detail::concat_op C>
  requires(detail::concat_all(std::type_identity<C>{}, detail::has_sign_rule))
struct sign_rule<C> : composite_rule<C> {};

/// LRP: a composite.  Each branch propagates the relevance of its own channel range (the join is a
/// copy: relevance passes through it unchanged).
template <detail::concat_op C>
  requires(detail::concat_all(std::type_identity<C>{}, detail::has_relevance_rule))
struct relevance_rule<C> : composite_rule<C> {};

// ---- io forms of the run-time Concat: codegen spelling (Concat<Block<...>, ...>), ONNX export
// (every branch from the same value, then Concat(axis = 1): the channel or feature axis behind the
// batch axis) and import (a Concat of activations forked from one value, along that axis).
template <class T>
struct codegen_rule<DynamicConcat<T>> {
  static std::string type(const DynamicConcat<T>& l, codegen_context& c) {
    std::string s = "nnlens::Concat<";
    for (std::size_t k = 0; k < l.branches.size(); ++k) s += (k ? ", " : "") + detail::codegen_block_type(l.branches[k], c);
    return s + ">";
  }
  static void fill(const DynamicConcat<T>& l, codegen_context& c, const std::string& lv) {
    const std::string where = c.where;
    for (std::size_t k = 0; k < l.branches.size(); ++k)
      detail::codegen_block_fill(l.branches[k], c, "std::get<" + std::to_string(k) + ">(" + lv + ".branches)",
                                 where + " branch " + std::to_string(k));
    c.where = where;
  }
};
template <class T>
struct onnx_export_rule<DynamicConcat<T>> {
  static std::string emit(const DynamicConcat<T>& l, onnx_sink& s, const std::string& x, shape in, shape) {
    std::vector<std::string> outs;
    for (const auto& b : l.branches) outs.push_back(detail::onnx_export_block(b, s, x, in));
    return s.node("Concat", outs, {onnx_attr{"axis", std::int64_t(1)}});
  }
};

template <class T>
struct onnx_join_rule<DynamicConcat<T>> {
  static constexpr std::string_view op = "Concat";
  static DynamicConcat<T> build(onnx_node_view& n, std::vector<DynamicBlock<T>> branches) {
    // the channel axis of [N,C,H,W] / the feature axis of [N,F] (axis 0 without a batch axis)
    const std::int64_t rank = std::int64_t(n.input_dims().size()) + (n.batch_axis() ? 1 : 0);
    std::int64_t axis = n.attr_i("axis", std::int64_t(1) << 40);
    if (axis == (std::int64_t(1) << 40)) n.fail("has no axis attribute");
    if (axis < 0) axis += rank;
    const std::int64_t want = n.batch_axis() ? 1 : 0;
    if (axis != want)
      n.fail("concatenates along axis " + std::to_string(axis) + " of a rank-" + std::to_string(rank) +
             " tensor; nnlens concatenates channels or features (axis " + std::to_string(want) + ")");
    if (n.transposed()) n.fail("concatenates transposed activations (their channels are not contiguous)");
    return {std::move(branches)};
  }
};

}  // namespace nnlens
