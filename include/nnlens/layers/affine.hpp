// nnlens/layers/affine.hpp -- Affine<N, T>: element-wise scale and shift y = x * s + t (input
// normalisation, e.g. (x - mean) / std as s = 1/std, t = -mean/std).
//
// Broadcast rule.  s and t hold the same number n of values, and n must be one of
//   n == size of one sample   one value per element (rank 1: per feature; rank 3: per c,h,w)
//   n == first extent         one value per channel of a rank-3 input {C,H,W} (per feature for rank 1)
//   n == 1                    one value for every element
// Element e of a sample (channel-major order) uses index e / (sample size / n).  When two rules
// coincide (H = W = 1, or a single channel with n = 1) they give the same result.
// Template arguments: N fixes n in the type (checked against the input at compile time); N == dyn
// (the default) takes n from s and t, and is the run-time form DynamicNetwork stores.
// Trainable parameters: s and t (parameters() returns {s, t}; masks can freeze them).
// requires: s.size() == t.size() == n satisfying the rule above (shape_error otherwise).
// init: s = 1, t = 0, with N values, or one per channel (feature) when N == dyn.
#pragma once

#include <random>
#include <vector>

#include "nnlens/core/error.hpp"
#include "nnlens/core/tensor.hpp"
#include "nnlens/core/codegen_form.hpp"
#include "nnlens/core/traits.hpp"
#include "nnlens/core/onnx_form.hpp"
#include "nnlens/core/properties.hpp"
#include "nnlens/core/dynamic_form.hpp"
#include "nnlens/core/reflect.hpp"

namespace nnlens {

template <std::size_t N = dyn, class T = float>
struct Affine {
  using scalar_type = T;
  static constexpr std::size_t values = N;
  tensor<T, 1> s;  // [n] scale
  tensor<T, 1> t;  // [n] shift
  NNLENS_FIELDS(Affine, s, t)
};

template <std::size_t N, class T>
struct layer_traits<Affine<N, T>> : layer_defaults {
  using L = Affine<N, T>;
  static constexpr std::string_view name = "Affine";

  static constexpr bool fits(std::size_t n, shape in) { return n == 1 || n == in[0] || n == in.size(); }

  static constexpr shape_check infer(shape in) {
    if (in.rank != 1 && in.rank != 3) return {{}, "Affine needs a rank-1 or rank-3 input"};
    if (N != dyn && in.is_static() && !fits(N, in))
      return {{}, "Affine<N>: N must be 1, the channel (feature) count, or the number of elements of a sample"};
    return {in, nullptr};
  }
  static shape output_shape(const L& l, shape in) {
    if (in.rank != 1 && in.rank != 3)
      throw shape_error(detail::concat("Affine needs a rank-1 or rank-3 input, got ", in.str()));
    const std::size_t n = l.s.size();
    if (l.t.size() != n)
      throw shape_error(detail::concat("Affine: s has ", n, " elements but t has ", l.t.size()));
    if (N != dyn && n != N) throw shape_error(detail::concat("Affine<", N, ">: s has ", n, " elements"));
    if (!fits(n, in))
      throw shape_error(detail::concat("Affine: s and t have ", n, " elements; for input ", in.str(), " expected 1, ",
                                       in[0], in.rank == 3 ? " (per channel)" : " (per feature)",
                                       in.rank == 3 ? detail::concat(" or ", in.size(), " (per element)") : std::string()));
    return in;
  }

  template <class Tx>
  static void forward(const L& l, const forward_args<Tx>& a) {
    const std::size_t E = a.in.size(), n = l.s.size(), G = E / n;
    const Tx* s = l.s.data();
    const Tx* t = l.t.data();
    for (std::size_t b = 0; b < a.batch; ++b) {
      const Tx* x = a.x + b * E;
      Tx* y = a.y + b * E;
      if (G == 1) {  // per element: one flat loop (an inner loop of one element per k ran at 12-26% of a copy)
        for (std::size_t k = 0; k < n; ++k) y[k] = x[k] * s[k] + t[k];
        continue;
      }
      for (std::size_t k = 0; k < n; ++k) {
        const Tx sk = s[k], tk = t[k];
        for (std::size_t g = 0; g < G; ++g) y[k * G + g] = x[k * G + g] * sk + tk;
      }
    }
  }

  template <class Tx>
  static void backward(const L& l, const backward_args<Tx>& a, L* grad) {
    const std::size_t E = a.in.size(), n = l.s.size(), G = E / n;
    const Tx* s = l.s.data();
    for (std::size_t b = 0; b < a.batch; ++b) {
      const Tx* x = a.x + b * E;
      const Tx* dy = a.dy + b * E;
      for (std::size_t k = 0; k < n; ++k) {
        if (a.dx) {
          Tx* dx = a.dx + b * E;
          for (std::size_t g = 0; g < G; ++g) dx[k * G + g] = dy[k * G + g] * s[k];
        }
        if (grad) {
          Tx ss = Tx(0), st = Tx(0);
          for (std::size_t g = 0; g < G; ++g) {
            ss += dy[k * G + g] * x[k * G + g];
            st += dy[k * G + g];
          }
          grad->s(k) += ss;
          grad->t(k) += st;
        }
      }
    }
  }

  template <class Self>
  static auto parameters(Self& l) {
    using S = std::conditional_t<std::is_const_v<Self>, const T, T>;
    return std::array<std::span<S>, 2>{std::span<S>(l.s.data(), l.s.size()), std::span<S>(l.t.data(), l.t.size())};
  }

  /// Property (core/properties.hpp, ElementwiseAffine): y = x * s + t, s and t broadcast by this
  /// header's rule (one value, per channel / feature, per element), no centring.
  template <class V>
  static affine_coefficients<V> elementwise_affine(const L& l, shape) {
    affine_coefficients<V> r;
    r.scale.assign(l.s.begin(), l.s.end());
    r.shift.assign(l.t.begin(), l.t.end());
    return r;
  }

  /// The identity: s = 1, t = 0 (N values, or one per channel / feature when N == dyn).
  static void init(L& l, shape in, std::mt19937_64&) {
    const std::size_t n = N == dyn ? in[0] : N;
    l.s = xt::ones<T>({n});
    l.t = xt::zeros<T>({n});
  }
};

template <std::size_t N, class T>
struct dynamic_form<Affine<N, T>> {
  using type = Affine<dyn, T>;
  static type to_dynamic(const Affine<N, T>& l) { return type{l.s, l.t}; }
  static Affine<N, T> from_dynamic(const type& d, const std::string& where) {
    if (N != dyn && d.s.size() != N)
      throw shape_error(detail::concat(where, ": Affine expects ", N, " values, the source has ", d.s.size()));
    return Affine<N, T>{d.s, d.t};
  }
};

/// ExactLine: affine, never splits a segment.
template <std::size_t N, class T>
struct pwl_rule<Affine<N, T>> : pwl_affine_rule {};

/// NNSlicer: a scale; item (x_n, -, s̄ Δx_n), s̄ the mean scale over the neuron's elements.
template <std::size_t N, class T>
struct sign_rule<Affine<N, T>> {
  static void items(const Affine<N, T>& l, const sign_ctx& c, std::size_t n, std::vector<sign_item>& out) {
    const std::size_t size = c.in.size(), per = size / l.s.size();
    const std::size_t e0 = c.element || c.in.rank != 3 ? n : n * c.in[1] * c.in[2];
    const std::size_t e1 = c.element || c.in.rank != 3 ? n + 1 : e0 + c.in[1] * c.in[2];
    double s = 0;
    for (std::size_t e = e0; e < e1; ++e) s += double(l.s(e / per));
    out.push_back({n, sign_item::none, s / double(e1 - e0) * c.dx[n]});
  }
};

/// LRP: element-wise y = s x + t, a linear layer with one input per output.
template <std::size_t N, class T>
struct relevance_rule<Affine<N, T>> {
  static void relevance(const Affine<N, T>& l, const relevance_args& a) {  // core/relevance.hpp
    const std::size_t per = a.in.size() / l.s.size();
    for (std::size_t k = 0; k < a.in.size(); ++k)
      a.r_in[k] = detail::elementwise_relevance(*a.o, a.x[k], a.z[k], a.r_out[k], double(l.s(k / per)), double(l.t(k / per)));
  }
};


// ---- io forms: codegen spelling, ONNX export Mul(x, s) + Add(., t) (imported by io/onnx from
// Add/Sub/Mul/Div by a constant, then folded into a neighbour where it can be)
template <class T>
struct codegen_rule<Affine<dyn, T>> : detail::codegen_fields<Affine<dyn, T>> {
  static std::string type(const Affine<dyn, T>& l, codegen_context& c) {
    return "nnlens::Affine<" + std::to_string(l.s.size()) + c.scalar_arg() + ">";
  }
};
template <class T>
struct onnx_export_rule<Affine<dyn, T>> {
  /// The broadcast shape of s and t (this header's rule): per element, per channel, or one value.
  static std::vector<std::int64_t> dims(std::size_t n, shape in) {
    if (n == in.size() || in.rank == 1) {
      if (n == 1 && in.size() != 1) return {1};
      std::vector<std::int64_t> d;
      for (std::size_t i = 0; i < in.rank; ++i) d.push_back(std::int64_t(in[i]));
      return d;
    }
    if (n == 1) return {1};
    return {std::int64_t(n), 1, 1};  // per channel of {C, H, W}
  }
  static std::string emit(const Affine<dyn, T>& l, onnx_sink& s, const std::string& x, shape in, shape) {
    const auto d = dims(l.s.size(), in);
    const std::string m = s.node("Mul", {x, s.tensor("affine_s", d, l.s)}, {});
    return s.node("Add", {m, s.tensor("affine_t", d, l.t)}, {});
  }
};

}  // namespace nnlens
