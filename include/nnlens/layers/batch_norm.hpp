// nnlens/layers/batch_norm.hpp -- BatchNorm<C, T>: batch normalisation in its inference form.
//
//   y = (x - running_mean[c]) * gamma[c] / sqrt(running_var[c] + eps) + beta[c]
//
// One type for both PyTorch forms; the input's rank decides: a rank-1 input {F} is normalised per
// feature (nn.BatchNorm1d on [N, F]), a rank-3 input {C, H, W} per channel (nn.BatchNorm2d).  c is
// the feature / channel index, i.e. the first extent of the per-sample shape.
//
// Template arguments, as for Dense: C is the channel (feature) count the type fixes; C == dyn (the
// default) takes it from the input shape, so BatchNorm<> fits anywhere in a Sequential and is also
// the run-time form DynamicNetwork stores.  T is the scalar type.
// Data: gamma, beta, running_mean, running_var [C]; eps (double, default 1e-5, PyTorch's).
// Trainable parameters: gamma and beta (parameters() returns {gamma, beta}); the running
// statistics are fixed (the inference form: backward treats mean and var as constants, so
// dx = dy * gamma / sqrt(var + eps), dgamma = sum dy * x_hat, dbeta = sum dy).
// requires: rank-1 or rank-3 input whose first extent is C; all four vectors have C elements
//           (shape_error otherwise); eps >= 0 and var + eps > 0 everywhere (value_error).
// init (PyTorch's reset_parameters): gamma = 1, beta = 0, running_mean = 0, running_var = 1.
#pragma once

#include <cmath>
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

template <std::size_t C = dyn, class T = float>
struct BatchNorm {
  using scalar_type = T;
  static constexpr std::size_t channels = C;
  tensor<T, 1> gamma;         // [C] scale (PyTorch: weight)
  tensor<T, 1> beta;          // [C] shift (PyTorch: bias)
  tensor<T, 1> running_mean;  // [C]
  tensor<T, 1> running_var;   // [C]
  double eps = 1e-5;
  NNLENS_FIELDS(BatchNorm, gamma, beta, running_mean, running_var, eps)
};

template <std::size_t C, class T>
struct layer_traits<BatchNorm<C, T>> : layer_defaults {
  using L = BatchNorm<C, T>;
  static constexpr std::string_view name = "BatchNorm";

  static constexpr shape_check infer(shape in) {
    if (in.rank != 1 && in.rank != 3) return {{}, "BatchNorm needs a rank-1 (features) or rank-3 (channels) input"};
    if (C != dyn && in[0] != dyn && in[0] != C)
      return {{}, "BatchNorm<C>: the input's channel count (rank 3) or feature count (rank 1) is not C"};
    return {in, nullptr};
  }
  static shape output_shape(const L& l, shape in) {
    if (in.rank != 1 && in.rank != 3)
      throw shape_error(detail::concat("BatchNorm needs a rank-1 or rank-3 input, got ", in.str()));
    const std::size_t c = in[0];
    if (C != dyn && c != C)
      throw shape_error(detail::concat("BatchNorm<", C, ">: the input ", in.str(), " has ", c,
                                       in.rank == 3 ? " channels" : " features"));
    auto check = [&](const tensor<T, 1>& v, const char* what) {
      if (v.size() != c)
        throw shape_error(detail::concat("BatchNorm: ", what, " has ", v.size(), " elements, expected ", c,
                                         " (one per ", in.rank == 3 ? "channel" : "feature", " of input ", in.str(), ")"));
    };
    check(l.gamma, "gamma");
    check(l.beta, "beta");
    check(l.running_mean, "running_mean");
    check(l.running_var, "running_var");
    if (!(l.eps >= 0) || !std::isfinite(l.eps))
      throw value_error(detail::concat("BatchNorm: eps is ", l.eps, ", expected a finite eps >= 0"));
    for (std::size_t k = 0; k < c; ++k)
      if (!(double(l.running_var(k)) + l.eps > 0))
        throw value_error(detail::concat("BatchNorm: running_var[", k, "] + eps = ", double(l.running_var(k)) + l.eps,
                                         ", expected > 0"));
    return in;
  }

  /// Scratch: the per-channel factor gamma / sqrt(var + eps).
  static constexpr std::size_t scratch_size(const L*, shape in, shape, std::size_t) { return in[0]; }

  template <class Tx>
  static void forward(const L& l, const forward_args<Tx>& a) {
    const std::size_t Cn = a.in[0], P = a.in.size() / Cn;
    Tx* s = a.scratch;
    factors(l, Cn, s);
    const Tx* m = l.running_mean.data();
    const Tx* b = l.beta.data();
    if (P == 1) {  // features: one flat loop per sample (an inner loop of one element ran at 5-19% of a copy)
      for (std::size_t n = 0; n < a.batch; ++n) {
        const Tx* x = a.x + n * Cn;
        Tx* y = a.y + n * Cn;
        for (std::size_t c = 0; c < Cn; ++c) y[c] = (x[c] - m[c]) * s[c] + b[c];
      }
      return;
    }
    for (std::size_t n = 0; n < a.batch; ++n)
      for (std::size_t c = 0; c < Cn; ++c) {
        const Tx* x = a.x + (n * Cn + c) * P;
        Tx* y = a.y + (n * Cn + c) * P;
        const Tx mc = m[c], sc = s[c], bc = b[c];
        for (std::size_t p = 0; p < P; ++p) y[p] = (x[p] - mc) * sc + bc;
      }
  }

  template <class Tx>
  static void backward(const L& l, const backward_args<Tx>& a, L* grad) {
    const std::size_t Cn = a.in[0], P = a.in.size() / Cn;
    Tx* s = a.scratch;
    factors(l, Cn, s);
    if (a.dx)
      for (std::size_t n = 0; n < a.batch; ++n)
        for (std::size_t c = 0; c < Cn; ++c) {
          const Tx* dy = a.dy + (n * Cn + c) * P;
          Tx* dx = a.dx + (n * Cn + c) * P;
          const Tx sc = s[c];
          for (std::size_t p = 0; p < P; ++p) dx[p] = dy[p] * sc;
        }
    if (grad) {
      Tx* gg = grad->gamma.data();
      Tx* gb = grad->beta.data();
      for (std::size_t c = 0; c < Cn; ++c) {
        const Tx mc = l.running_mean(c);
        const Tx inv = Tx(1) / std::sqrt(l.running_var(c) + Tx(l.eps));
        Tx sg = Tx(0), sb = Tx(0);
        for (std::size_t n = 0; n < a.batch; ++n) {
          const Tx* x = a.x + (n * Cn + c) * P;
          const Tx* dy = a.dy + (n * Cn + c) * P;
          for (std::size_t p = 0; p < P; ++p) {
            sg += dy[p] * (x[p] - mc);
            sb += dy[p];
          }
        }
        gg[c] += sg * inv;
        gb[c] += sb;
      }
    }
  }

  template <class Self>
  static auto parameters(Self& l) {
    using S = std::conditional_t<std::is_const_v<Self>, const T, T>;
    return std::array<std::span<S>, 2>{std::span<S>(l.gamma.data(), l.gamma.size()),
                                       std::span<S>(l.beta.data(), l.beta.size())};
  }
  /// The parameter elements of channel n, f(tensor, element): gamma[n] and beta[n]; the same
  /// elements read input channel n.
  template <class F>
  static void for_each_neuron_parameter(const L&, shape, shape, std::size_t n, F&& f) {
    f(std::size_t(0), n);
    f(std::size_t(1), n);
  }
  template <class F>
  static void for_each_input_parameter(const L& l, shape in, shape out, std::size_t c, F&& f) {
    for_each_neuron_parameter(l, in, out, c, f);
  }
  /// The running statistics: state that is not trained (concept HasBuffers).
  template <class Self>
  static auto buffers(Self& l) {
    using S = std::conditional_t<std::is_const_v<Self>, const T, T>;
    return std::array<std::span<S>, 2>{std::span<S>(l.running_mean.data(), l.running_mean.size()),
                                       std::span<S>(l.running_var.data(), l.running_var.size())};
  }

  /// Property (core/properties.hpp, ElementwiseAffine): y = (x - running_mean[c]) * a[c] + beta[c]
  /// per channel (feature), a = gamma / sqrt(var + eps) computed in V as forward computes it.
  template <class V>
  static affine_coefficients<V> elementwise_affine(const L& l, shape in) {
    const std::size_t c = in[0];
    affine_coefficients<V> r;
    r.scale.resize(c), r.shift.resize(c), r.center.resize(c);
    for (std::size_t k = 0; k < c; ++k) {
      r.scale[k] = scale_of<V>(l, k);
      r.shift[k] = V(l.beta(k));
      r.center[k] = V(l.running_mean(k));
    }
    return r;
  }
  /// gamma[c] / sqrt(running_var[c] + eps) in V (forward, backward, the property and LRP's fold).
  template <class V>
  static V scale_of(const L& l, std::size_t c) {
    return V(l.gamma(c)) / std::sqrt(V(l.running_var(c)) + V(l.eps));
  }

  /// PyTorch's default: gamma = 1, beta = 0, running_mean = 0, running_var = 1 (rng unused).
  static void init(L& l, shape in, std::mt19937_64&) {
    const std::size_t c = in[0];
    l.gamma = xt::ones<T>({c});
    l.beta = xt::zeros<T>({c});
    l.running_mean = xt::zeros<T>({c});
    l.running_var = xt::ones<T>({c});
  }

 private:
  template <class Tx>
  static void factors(const L& l, std::size_t Cn, Tx* s) {
    for (std::size_t c = 0; c < Cn; ++c) s[c] = scale_of<Tx>(l, c);
  }
};

template <std::size_t C, class T>
struct dynamic_form<BatchNorm<C, T>> {
  using type = BatchNorm<dyn, T>;
  static type to_dynamic(const BatchNorm<C, T>& l) { return type{l.gamma, l.beta, l.running_mean, l.running_var, l.eps}; }
  static BatchNorm<C, T> from_dynamic(const type& d, const std::string& where) {
    if (C != dyn && d.gamma.size() != C)
      throw shape_error(detail::concat(where, ": BatchNorm expects ", C, " channels, the source has ", d.gamma.size()));
    return BatchNorm<C, T>{d.gamma, d.beta, d.running_mean, d.running_var, d.eps};
  }
};

/// ExactLine: affine, never splits a segment.
template <std::size_t C, class T>
struct pwl_rule<BatchNorm<C, T>> : pwl_affine_rule {};  // inference form: affine

/// NNSlicer: a per-channel scale; item (x_n, -, a Δx_n) with a = gamma / sqrt(var + eps), or the
/// paper's literal (x_n, -, Δx_n) with sign_ctx::bn_literal (they differ only when gamma < 0).
template <std::size_t C, class T>
struct sign_rule<BatchNorm<C, T>> {
  static void items(const BatchNorm<C, T>& l, const sign_ctx& c, std::size_t n, std::vector<sign_item>& out) {
    const std::size_t ch = c.element && c.in.rank == 3 ? n / (c.in[1] * c.in[2]) : n;
    const double a = c.bn_literal ? 1.0 : double(l.gamma(ch)) / std::sqrt(double(l.running_var(ch)) + l.eps);
    out.push_back({n, sign_item::none, a * c.dx[n]});
  }
};

/// LRP: after a Conv2D or Dense it folds into that layer (w' = a w, b' = a b + t with
/// a = gamma / sqrt(var + eps), t = beta - a mean; docs/specs/deepimportance.md#22-neuron-relevance-by-lrp); anywhere else it
/// is a per-channel linear layer y = a x + t under the same rules.
template <std::size_t C, class T>
struct relevance_rule<BatchNorm<C, T>> {
  static constexpr bool folds_into_previous = true;
  static void scale_shift(const BatchNorm<C, T>& l, std::size_t ch, double& a, double& t) {
    a = layer_traits<BatchNorm<C, T>>::template scale_of<double>(l, ch);
    t = double(l.beta(ch)) - a * double(l.running_mean(ch));
  }
  static void relevance(const BatchNorm<C, T>& l, const relevance_args& a) {  // core/relevance.hpp
    const std::size_t per = a.in.rank == 3 ? a.in[1] * a.in[2] : 1;
    for (std::size_t k = 0; k < a.in.size(); ++k) {
      double s, t;
      scale_shift(l, k / per, s, t);
      a.r_in[k] = detail::elementwise_relevance(*a.o, a.x[k], a.z[k], a.r_out[k], s, t);
    }
  }
};


// ---- io forms: codegen spelling, ONNX BatchNormalization (inference) both ways
template <class T>
struct codegen_rule<BatchNorm<dyn, T>> : detail::codegen_fields<BatchNorm<dyn, T>> {
  static std::string type(const BatchNorm<dyn, T>& l, codegen_context& c) {
    return "nnlens::BatchNorm<" + std::to_string(l.gamma.size()) + c.scalar_arg() + ">";
  }
};
template <class T>
struct onnx_export_rule<BatchNorm<dyn, T>> {
  static std::string emit(const BatchNorm<dyn, T>& l, onnx_sink& s, const std::string& x, shape, shape) {
    const auto C = detail::onnx_i64({l.gamma.size()});
    std::vector<std::string> in{x, s.tensor("bn_scale", C, l.gamma), s.tensor("bn_B", C, l.beta),
                                s.tensor("bn_mean", C, l.running_mean), s.tensor("bn_var", C, l.running_var)};
    return s.node("BatchNormalization", in, {{"epsilon", static_cast<float>(l.eps)}});
  }
};
template <class T>
struct onnx_import_rule<BatchNorm<dyn, T>> {
  static constexpr std::string_view ops[] = {"BatchNormalization"};
  template <class Emit>
  static void build(onnx_node_view& n, Emit&& emit) {
    if (n.attr_i("training_mode", 0) != 0) n.fail("training_mode = 1 is not supported");
    if (n.opset() < 9 && n.attr_i("spatial", 1) != 1) n.fail("spatial = 0 is not supported");
    n.require_unpadded();
    const std::vector<std::int64_t> d = n.input_dims();
    if (n.transposed() || !(d.size() == 1 || n.plain_image()))
      n.fail("needs per-sample shape [C] or an NCHW image, got " + n.dims_str(d));
    const std::size_t C = std::size_t(d[0]);
    BatchNorm<dyn, T> b;
    tensor<T, 1>* dst[4] = {&b.gamma, &b.beta, &b.running_mean, &b.running_var};
    for (int i = 0; i < 4; ++i) {
      const onnx_const_view t = n.constant(i + 1);
      if (t.size() != C)
        n.fail("parameter " + std::to_string(i + 1) + " has " + std::to_string(t.size()) + " values, expected " +
               std::to_string(C));
      *dst[i] = tensor<T, 1>::from_shape({C});
      for (std::size_t c = 0; c < C; ++c) (*dst[i])(c) = T(float(t.values[c]));
    }
    b.eps = onnx_intended(n.attr_f("epsilon", 1e-5));  // 1e-3, not the float next to it
    emit(std::move(b));
  }
};

}  // namespace nnlens
