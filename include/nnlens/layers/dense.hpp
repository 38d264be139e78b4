// nnlens/layers/dense.hpp -- Dense<Out>: y = x W + b (fully connected).
//
// Weights: W [in, out] (row-major, "axpy order": see docs/design/style.md#xtensor-024-and-xsimd-8), b [out].  PyTorch's
// nn.Linear.weight is W^T.  Input must be rank 1 (insert Flatten after convolutions).
// Dense<dyn> takes its sizes from W (used by DynamicNetwork).
#pragma once

#include <cmath>
#include <random>
#include <vector>

#include "nnlens/core/tensor.hpp"
#include "nnlens/core/codegen_form.hpp"
#include "nnlens/core/traits.hpp"
#include "nnlens/core/onnx_form.hpp"
#include "nnlens/kernels/gemm.hpp"

namespace nnlens {

template <std::size_t Out = dyn, class T = float>
struct Dense {
  using scalar_type = T;
  static constexpr std::size_t out_features = Out;
  tensor<T, 2> W;  // [in, out]
  tensor<T, 1> b;  // [out]
  NNLENS_FIELDS(Dense, W, b)
};

template <std::size_t Out, class T>
struct layer_traits<Dense<Out, T>> : layer_defaults {
  using L = Dense<Out, T>;
  static constexpr std::string_view name = "Dense";
  static constexpr int output_channel_axis = 1;  // W is [in, out] (core/properties.hpp)

  static constexpr shape_check infer(shape in) {
    if (in.rank != 1) return {{}, "Dense needs a flat (rank-1) input; insert Flatten before it"};
    return {shape(Out), nullptr};
  }
  static shape output_shape(const L& l, shape in) {
    if (in.rank != 1)
      throw shape_error(detail::concat("Dense needs a flat (rank-1) input, got ", in.str(), "; insert Flatten"));
    const std::size_t out = Out == dyn ? l.W.shape(1) : Out;
    if (l.W.dimension() != 2 || l.W.shape(0) != in[0] || l.W.shape(1) != out)
      throw shape_error(detail::concat("Dense: W has shape [", l.W.shape(0), ",", l.W.shape(1), "], expected [",
                                       in[0], ",", out, "] (in, out)"));
    if (l.b.size() != out)
      throw shape_error(detail::concat("Dense: b has ", l.b.size(), " elements, expected ", out));
    return shape(out);
  }

  template <class Tx>
  static void forward(const L& l, const forward_args<Tx>& a) {
    const std::size_t I = a.in[0], O = a.out[0];
    kernels::gemm<Tx>(false, false, a.batch, O, I, a.x, I, l.W.data(), O, Tx(0), a.y, O, l.b.data());
  }

  template <class Tx>
  static void backward(const L& l, const backward_args<Tx>& a, L* grad) {
    const std::size_t I = a.in[0], O = a.out[0], N = a.batch;
    if (a.dx) kernels::gemm<Tx>(false, true, N, I, O, a.dy, O, l.W.data(), O, Tx(0), a.dx, I);
    if (grad) {
      kernels::gemm<Tx>(true, false, I, O, N, a.x, I, a.dy, O, Tx(1), grad->W.data(), O);
      Tx* gb = grad->b.data();
      for (std::size_t n = 0; n < N; ++n)
        for (std::size_t o = 0; o < O; ++o) gb[o] += a.dy[n * O + o];
    }
  }

  template <class Self>
  static auto parameters(Self& l) {
    using S = std::conditional_t<std::is_const_v<Self>, const T, T>;
    return std::array<std::span<S>, 2>{std::span<S>(l.W.data(), l.W.size()), std::span<S>(l.b.data(), l.b.size())};
  }

  /// The parameter elements of output neuron n, f(tensor, element): column n of W and b[n].
  template <class F>
  static void for_each_neuron_parameter(const L& l, shape in, shape, std::size_t n, F&& f) {
    const std::size_t I = in[0], O = l.W.shape(1);
    for (std::size_t i = 0; i < I; ++i) f(std::size_t(0), i * O + n);
    f(std::size_t(1), n);
  }
  /// The parameter elements that read input element c: row c of W.
  template <class F>
  static void for_each_input_parameter(const L& l, shape, shape, std::size_t c, F&& f) {
    const std::size_t O = l.W.shape(1);
    for (std::size_t o = 0; o < O; ++o) f(std::size_t(0), c * O + o);
  }

  /// PyTorch's nn.Linear default: U(-1/sqrt(in), 1/sqrt(in)) for W and b.
  static void init(L& l, shape in, std::mt19937_64& rng) {
    static_assert(Out != dyn, "Dense<dyn> cannot be initialised from its type; set W and b");
    const std::size_t I = in[0];
    l.W = tensor<T, 2>::from_shape({I, Out});
    l.b = tensor<T, 1>::from_shape({Out});
    const double bound = 1.0 / std::sqrt(double(I));
    std::uniform_real_distribution<double> u(-bound, bound);
    for (auto& w : l.W) w = T(u(rng));
    for (auto& v : l.b) v = T(u(rng));
  }
};

}  // namespace nnlens

#include "nnlens/core/dynamic_form.hpp"
#include "nnlens/core/reflect.hpp"

namespace nnlens {
template <std::size_t Out, class T>
struct dynamic_form<Dense<Out, T>> {
  using type = Dense<dyn, T>;
  static type to_dynamic(const Dense<Out, T>& l) { return type{l.W, l.b}; }
  static Dense<Out, T> from_dynamic(const type& d, const std::string& where) {
    if (Out != dyn && (d.W.dimension() != 2 || d.W.shape(1) != Out))
      throw shape_error(detail::concat(where, ": Dense expects ", Out, " outputs, the source has ",
                                       d.W.dimension() == 2 ? d.W.shape(1) : 0));
    return Dense<Out, T>{d.W, d.b};
  }
};
/// ExactLine: affine, never splits a segment.
template <std::size_t Out, class T>
struct pwl_rule<Dense<Out, T>> : pwl_affine_rule {};

/// NNSlicer: unit n is a weighted sum; item i = (x_i, W[i, n], W[i, n] Δx_i).  Synapse = flat W index.
template <std::size_t Out, class T>
struct sign_rule<Dense<Out, T>> {
  static std::size_t synapses(const Dense<Out, T>& l) { return l.W.size(); }
  static constexpr std::size_t bias_parameter = 1;  // parameters()[1]: one bias per output neuron
  static void items(const Dense<Out, T>& l, const sign_ctx& c, std::size_t n, std::vector<sign_item>& out) {
    const std::size_t I = c.in[0], O = c.out[0];
    const T* W = l.W.data();
    for (std::size_t i = 0; i < I; ++i) out.push_back({i, i * O + n, double(W[i * O + n]) * c.dx[i]});
  }
};

/// LRP (core/relevance.hpp): the affine rules; output k reads every input, W[j, k]; a BatchNorm
/// after it folds in.
template <std::size_t Out, class T>
struct relevance_rule<Dense<Out, T>> {
  static constexpr bool accepts_fold = true;
  static void relevance(const Dense<Out, T>& l, const relevance_args& a) {
    const std::size_t I = a.in.size(), O = a.out.size();
    const T* W = l.W.data();
    detail::affine_relevance(
        a, 1, [&](std::size_t k) { return l.b(k); },
        [&](std::size_t k, auto&& f) {
          for (std::size_t j = 0; j < I; ++j) f(j, double(W[j * O + k]));
        });
  }
};


// ---- io forms: the codegen spelling, ONNX export (Gemm; imported by io/onnx: Gemm/MatMul fusion)
template <class T>
struct codegen_rule<Dense<dyn, T>> : detail::codegen_fields<Dense<dyn, T>> {
  static std::string type(const Dense<dyn, T>& l, codegen_context& c) {
    return "nnlens::Dense<" + std::to_string(l.W.shape()[1]) + c.scalar_arg() + ">";
  }
};
/// Gemm(x, W, b), transB = 0 (W is [in, out]).
template <class T>
struct onnx_export_rule<Dense<dyn, T>> {
  static std::string emit(const Dense<dyn, T>& l, onnx_sink& s, const std::string& x, shape, shape) {
    const std::string W = s.tensor("dense_W", detail::onnx_i64({l.W.shape()[0], l.W.shape()[1]}), l.W);
    const std::string b = s.tensor("dense_b", detail::onnx_i64({l.b.size()}), l.b);
    return s.node("Gemm", {x, W, b}, {{"transB", std::int64_t(0)}});
  }
};

}  // namespace nnlens
