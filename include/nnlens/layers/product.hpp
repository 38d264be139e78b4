// nnlens/layers/product.hpp -- Product<Block<Ss...>, Block<Gs...>>: y = signal(x) ⊙ gate(x).
//
//   Product<Block<Ss...>, Block<Gs...>>   the element-wise product of two branches that read the
//                                 same x, the gate broadcast over the signal:
//                                   the same shape as the signal      y[i] = s[i] g[i]
//                                   one value per channel ([C,1,1] or [C] against a [C,H,W]
//                                   signal)                           y[c,h,w] = s[c,h,w] g[c]
//                                   one value                         y[i] = s[i] g[0]
//                                 Squeeze-and-excitation (MobileNetV3, EfficientNet, RegNetY):
//                                 Product<Block<>, Block<GlobalAvgPool, Conv2D<8,1>, ReLU,
//                                                        Conv2D<32,1>, HardSigmoid>>
//   DynamicProduct<T> = Product<DynamicBlock<T>, DynamicBlock<T>>
//                                 the run-time form DynamicNetwork stores.
// The branches' machinery (walking, buffers, parameters, run-time form, io) is layers/block.hpp,
// shared with Residual and Concat; the join is core/composite.hpp's branch_join::product.
//
// requires: the gate's output broadcasts to the signal's as above.  A static Product is checked by
//           infer (a Sequential reports it at compile time, naming the Product); output_shape checks
//           it at run time and throws shape_error naming both shapes.
// ensures:  forward runs the signal, then the gate, then multiplies (y = s * g in that order for
//           every form, so static and dynamic networks give bitwise-identical outputs).
//           backward: ds = dy ⊙ g, dg = dy ⊙ s summed over the broadcast elements (in element
//           order); dx = dx_signal + dx_gate; the inner parameter gradients are added to the
//           matching layer of *grad.  cache per sample = every inner activation (signal, then
//           gate) + every inner cache; scratch = two buffers of the largest inner activation times
//           batch, the signal's and the gate's gradient, and the largest inner scratch.
// Layout of the cache (each entry [batch, shape...]):
//   signal activations | gate activations | signal caches | gate caches
// The product of two activations is not piecewise-linear: no pwl_rule (ExactLine refuses it; a
// product with a constant is an Affine).  NNSlicer reads it to first order (Δy ≈ g Δs + s Δg),
// LRP gives the relevance to the signal and none to the gate (Arras et al. 2017).
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

template <class S, class G>
struct Product {
  static_assert((detail::is_static_block_v<S> && detail::is_static_block_v<G>) ||
                    (detail::is_dynamic_block_v<S> && detail::is_dynamic_block_v<G>),
                "nnlens::Product<S, G>: both branches must be Block<layers...> (DynamicProduct<T> at run time)");
  using scalar_type =
      typename detail::scalar_join<typename detail::branch_scalar<S>::type, typename detail::branch_scalar<G>::type>::type;
  S signal;
  G gate;
};

template <class T = float>
using DynamicProduct = Product<DynamicBlock<T>, DynamicBlock<T>>;

template <class S, class G, class U>
struct rebind_scalar<Product<S, G>, U> {
  using type = Product<rebind_scalar_t<S, U>, rebind_scalar_t<G, U>>;
  static type convert(const Product<S, G>& p) {
    return {rebind_scalar<S, U>::convert(p.signal), rebind_scalar<G, U>::convert(p.gate)};
  }
};

namespace detail {

/// Everything the static and the run-time Product share (written once for both forms).
template <class S, class G>
struct product_common : layer_defaults {
  using P = Product<S, G>;
  using CS = chain<S>;
  using CG = chain<G>;
  using RS = branch_run<CS>;
  using RG = branch_run<CG>;
  static constexpr std::string_view name = "Product";
  static constexpr branch_join join = branch_join::product;
  static constexpr std::string_view join_name = "Mul";
  static std::string branch_name(std::size_t b) { return b == 0 ? "signal" : "gate"; }

  /// f(walk) for the signal, then the gate (core/composite.hpp).
  template <class F>
  static void for_each_branch(const P& p, shape in, F&& f) {
    f(branch_walk<const S>{&p.signal, in});
    f(branch_walk<const G>{&p.gate, in});
  }
  /// f(layer&) for every inner layer: the signal's, then the gate's.
  template <class Self, class F>
  static void for_each_inner(Self& p, F&& f) {
    CS::each(&p.signal, [&](auto* l, auto) { f(*l); });
    CG::each(&p.gate, [&](auto* l, auto) { f(*l); });
  }

  static constexpr shape_check infer(shape in) {
    const shape_check s = CS::infer(in);
    if (!s.ok()) return s;
    const shape_check g = CG::infer(in);
    if (!g.ok()) return g;
    if (s.out.rank == 0 || g.out.rank == 0) return {shape{}, nullptr};  // run-time branches
    if (gate_repeat(s.out, g.out) == 0)
      return {{}, "Product: the gate's output does not broadcast to the signal's (same shape, one value per "
                  "channel [C,1,1] or [C], or one value)"};
    return {s.out, nullptr};
  }

  static shape output_shape(const P& p, shape in) {
    const shape so = RS::checked(&p.signal, in, "Product signal");
    const shape go = RG::checked(&p.gate, in, "Product gate");
    if (gate_repeat(so, go) == 0)
      throw shape_error(concat("Product: the signal outputs ", so.str(), " but the gate outputs ", go.str(),
                               "; the gate must have the signal's shape, one value per channel or one value"));
    return so;
  }

  static constexpr std::size_t cache_size(const P* p, shape in, shape) {
    const branch_sizes s = RS::measure(p ? &p->signal : static_cast<const S*>(nullptr), in, 1);
    const branch_sizes g = RG::measure(p ? &p->gate : static_cast<const G*>(nullptr), in, 1);
    return s.acts + g.acts + s.caches + g.caches;
  }
  static constexpr std::size_t scratch_size(const P* p, shape in, shape out, std::size_t batch) {
    const branch_sizes s = RS::measure(p ? &p->signal : static_cast<const S*>(nullptr), in, batch);
    const branch_sizes g = RG::measure(p ? &p->gate : static_cast<const G*>(nullptr), in, batch);
    const std::size_t max_act = std::max(s.max_act, g.max_act);
    return (2 * max_act + out.size() + max_act) * batch + std::max(s.scratch, g.scratch);
  }

  template <class T>
  static void forward(const P& p, const forward_args<T>& a) {
    const std::size_t N = a.batch;
    const branch_sizes zs = RS::measure(&p.signal, a.in, N), zg = RG::measure(&p.gate, a.in, N);
    const std::size_t max_act = std::max(zs.max_act, zg.max_act);
    T* pp[2] = {a.scratch, a.scratch + max_act * N};
    T* inner_scratch = a.scratch + (3 * max_act + a.out.size()) * N;
    T* acts = a.cache;  // nullptr at inference: activations then go to the ping-pong buffers
    T* caches = a.cache ? a.cache + (zs.acts + zg.acts) * N : nullptr;
    const T* so = RS::forward(&p.signal, a, a.y, acts, caches, pp, inner_scratch);
    const T* go = RG::forward(&p.gate, a, static_cast<T*>(nullptr), acts, caches, pp, inner_scratch);
    gate_multiply(N, a.out.size(), gate_size(p, a.in), so, go, a.y);
  }

  template <class T>
  static void backward(const P& p, const backward_args<T>& a, P* grad) {
    if (!a.dx && !grad) return;
    const std::size_t N = a.batch, Sz = a.out.size(), Gz = gate_size(p, a.in), rep = Sz / Gz;
    const branch_sizes zs = RS::measure(&p.signal, a.in, N), zg = RG::measure(&p.gate, a.in, N);
    const std::size_t max_act = std::max(zs.max_act, zg.max_act);
    T* pp[2] = {a.scratch, a.scratch + max_act * N};
    T* ds = a.scratch + 2 * max_act * N;
    T* dg = ds + Sz * N;
    T* inner_scratch = a.scratch + (3 * max_act + Sz) * N;
    const T* acts_s = a.cache;
    const T* acts_g = acts_s + zs.acts * N;
    const T* caches_s = acts_g + zg.acts * N;
    const T* caches_g = caches_s + zs.caches * N;
    // the branch outputs: each branch's last activation (the input for an empty branch)
    const T* s = CS::count(&p.signal) ? acts_g - Sz * N : a.x;
    const T* g = CG::count(&p.gate) ? caches_s - Gz * N : a.x;
    for (std::size_t r = 0; r < N; ++r)
      for (std::size_t j = r * Gz; j < (r + 1) * Gz; ++j) {
        T acc(0);
        for (std::size_t e = j * rep; e < (j + 1) * rep; ++e) {
          ds[e] = a.dy[e] * g[j];
          acc += a.dy[e] * s[e];
        }
        dg[j] = acc;
      }
    RS::backward(&p.signal, grad ? &grad->signal : nullptr, a, ds, acts_s + zs.acts * N, caches_s + zs.caches * N, false,
                 pp, inner_scratch);
    RG::backward(&p.gate, grad ? &grad->gate : nullptr, a, dg, acts_g + zg.acts * N, caches_g + zg.caches * N, true, pp,
                 inner_scratch);
  }

  /// Elements per sample of the gate's output.
  static std::size_t gate_size(const P& p, shape in) {
    shape g = in;
    CG::visit(&p.gate, in, [&](const auto*, auto, shape, shape o) { g = o; });
    return g.size();
  }
};

/// Product's parameters, buffers and init (the static form: std::array; the run-time form:
/// std::vector), over for_each_inner.
template <class P, class C>
struct product_tensors {
  template <class Self>
  static auto inner(Self& p) {
    return [&p](auto&& f) { C::for_each_inner(p, [&](auto& l) { f(&l); }); };
  }
};

}  // namespace detail

/// The static Product (Block branches).
template <class S, class G>
struct layer_traits<Product<S, G>> : detail::product_common<S, G> {
  using P = Product<S, G>;
  using C = detail::product_common<S, G>;
  using I = detail::product_tensors<P, C>;
  static_assert(detail::is_static_block_v<S>, "nnlens::Product: mix no static and run-time branches");
  static constexpr bool inference_only = detail::any_inference_only<S>() || detail::any_inference_only<G>();
  static constexpr std::size_t parameter_tensors = detail::tensor_count<S>() + detail::tensor_count<G>();
  static constexpr std::size_t buffer_tensors = detail::tensor_count<S, true>() + detail::tensor_count<G, true>();

  /// The inner layers' parameters, signal then gate.
  template <class Self>
    requires(parameter_tensors > 0)
  static auto parameters(Self& p) {
    return detail::gather_tensors<false, sc<Self>, parameter_tensors>(I::inner(p));
  }
  /// The inner layers' buffers (BatchNorm's running statistics), signal then gate.
  template <class Self>
    requires(buffer_tensors > 0)
  static auto buffers(Self& p) {
    return detail::gather_tensors<true, sc<Self>, buffer_tensors>(I::inner(p));
  }
  /// Initialises every inner layer (signal, then gate) with its own input shape.
  static void init(P& p, shape in, std::mt19937_64& rng) {
    auto f = [&](auto* l, auto, shape i, shape) {
      using L = detail::layer_of_ptr_t<decltype(l)>;
      layer_traits<L>::init(*l, i, rng);
    };
    detail::chain<S>::visit(&p.signal, in, f);
    detail::chain<G>::visit(&p.gate, in, f);
  }

 private:
  template <class Self>
  using sc = std::conditional_t<std::is_const_v<Self>, const typename P::scalar_type, typename P::scalar_type>;
};

/// The run-time Product: parameters() is a vector (the count is known only at run time).
template <class T>
struct layer_traits<Product<DynamicBlock<T>, DynamicBlock<T>>> : detail::product_common<DynamicBlock<T>, DynamicBlock<T>> {
  using P = DynamicProduct<T>;
  using I = detail::product_tensors<P, detail::product_common<DynamicBlock<T>, DynamicBlock<T>>>;
  static std::vector<std::span<T>> parameters(P& p) { return detail::collect_tensors<false, T>(I::inner(p)); }
  static std::vector<std::span<const T>> parameters(const P& p) { return detail::collect_tensors<false, const T>(I::inner(p)); }
  static std::vector<std::span<T>> buffers(P& p) { return detail::collect_tensors<true, T>(I::inner(p)); }
  static std::vector<std::span<const T>> buffers(const P& p) { return detail::collect_tensors<true, const T>(I::inner(p)); }
};

/// to_dynamic / from_dynamic of a static Product (DynamicProduct<float> when no inner layer has
/// weights, or DynamicProduct<U> in a network of scalar U).
template <class... Ss, class... Gs>
struct dynamic_form<Product<Block<Ss...>, Block<Gs...>>> {
  using P = Product<Block<Ss...>, Block<Gs...>>;
  using T = std::conditional_t<std::is_void_v<typename P::scalar_type>, float, typename P::scalar_type>;
  template <class U>
    requires(std::is_void_v<typename P::scalar_type> || std::is_same_v<U, T>)
  using as = DynamicProduct<U>;
  using type = DynamicProduct<T>;

  template <class U = T>
  static as<U> to_dynamic(const P& p) {
    as<U> d;
    detail::block_to_dynamic(p.signal, d.signal);
    detail::block_to_dynamic(p.gate, d.gate);
    return d;
  }
  template <class U>
  static P from_dynamic(const DynamicProduct<U>& d, const std::string& where) {
    P p;
    detail::block_from_dynamic(p.signal, d.signal, where + ": signal");
    detail::block_from_dynamic(p.gate, d.gate, where + ": gate");
    return p;
  }
};

/// NNSlicer: a composite.  Its branches' layers are analysed as layers of their own; the product
/// is read to first order, Δy_n ≈ g_n Δs_n + s_n Δg_n: the signal's neuron contributes g_n Δs_n and
/// the gate's s_n Δg_n (network/graph.hpp's join_operands::slope; our reading of
/// docs/specs/nnslicer.md#25-local-items-per-op-type, as for the activations that are not
/// monotone).
template <class S, class G>
  requires(detail::block_all<S>(detail::has_sign_rule) && detail::block_all<G>(detail::has_sign_rule))
struct sign_rule<Product<S, G>> : composite_rule<Product<S, G>> {};

/// LRP: a composite.  The product passes all of R_y to the signal and none to the gate: the rule of
/// Arras et al., "Explaining Recurrent Neural Network Predictions in Sentiment Analysis" (WASSA
/// 2017) for multiplicative gates, which Arras et al. 2019 ("Evaluating recurrent neural network
/// explanations") keep for LSTMs (docs/specs/deepimportance.md#22-neuron-relevance-by-lrp).  The
/// gate's layers then carry no relevance.
template <class S, class G>
  requires(detail::block_all<S>(detail::has_relevance_rule) && detail::block_all<G>(detail::has_relevance_rule))
struct relevance_rule<Product<S, G>> : composite_rule<Product<S, G>> {};

// ---- io forms of the run-time Product: codegen spelling (Product<Block<...>, Block<...>>), ONNX
// export (both branches from the same value, then Mul(signal, gate)) and import (a Mul of two
// activations forked from one value that is not x * Sigmoid(x): the branch whose output is
// broadcast is the gate; at equal shapes the second operand).
template <class T>
struct codegen_rule<DynamicProduct<T>> {
  static std::string type(const DynamicProduct<T>& l, codegen_context& c) {
    return "nnlens::Product<" + detail::codegen_block_type(l.signal, c) + ", " + detail::codegen_block_type(l.gate, c) + ">";
  }
  static void fill(const DynamicProduct<T>& l, codegen_context& c, const std::string& lv) {
    const std::string where = c.where;
    detail::codegen_block_fill(l.signal, c, lv + ".signal", where + " signal");
    detail::codegen_block_fill(l.gate, c, lv + ".gate", where + " gate");
    c.where = where;
  }
};
template <class T>
struct onnx_export_rule<DynamicProduct<T>> {
  static std::string emit(const DynamicProduct<T>& l, onnx_sink& s, const std::string& x, shape in, shape out) {
    const std::string a = detail::onnx_export_block(l.signal, s, x, in);
    std::string g = detail::onnx_export_block(l.gate, s, x, in);
    const shape go = detail::branch_run<detail::chain<DynamicBlock<T>>>::checked(&l.gate, in, "Product gate");
    if (go.rank == 1 && out.rank == 3 && go.size() > 1)  // [C] against [C,H,W]: ONNX broadcasts from the right
    {
      s.require_opset(13);  // Constant's value_ints (12), Reshape's 0 = the batch extent
      const std::string dims =
          s.node("Constant", {}, {{"value_ints", std::vector<std::int64_t>{0, std::int64_t(go.size()), 1, 1}}});
      g = s.node("Reshape", {g, dims}, {});
    }
    return s.node("Mul", {a, g}, {});
  }
};
template <class T>
struct onnx_join_rule<DynamicProduct<T>> {
  static constexpr std::string_view op = "Mul";
  static DynamicProduct<T> build(onnx_node_view& n, std::vector<DynamicBlock<T>> b) {
    if (b.size() != 2) n.fail("multiplies " + std::to_string(b.size()) + " activations; a product joins two");
    const shape in = n.fork_shape();
    using R = detail::branch_run<detail::chain<DynamicBlock<T>>>;
    const shape s0 = R::checked(&b[0], in, "Mul operand 0"), s1 = R::checked(&b[1], in, "Mul operand 1");
    if (detail::gate_repeat(s0, s1) == 0) {
      if (detail::gate_repeat(s1, s0) == 0)
        n.fail("multiplies " + s0.str() + " by " + s1.str() +
               ": only the same shape, one value per channel or one value broadcast");
      std::swap(b[0], b[1]);
    }
    return {std::move(b[0]), std::move(b[1])};
  }
};

}  // namespace nnlens
