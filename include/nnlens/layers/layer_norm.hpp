// nnlens/layers/layer_norm.hpp -- LayerNorm<C, T>: layer normalisation over the channels at each
// position.
//
//   y[c, p] = (x[c, p] - mu_p) / sqrt(var_p + eps) * gamma[c] + beta[c]
//   mu_p = sum_c x[c, p] / C,  var_p = sum_c (x[c, p] - mu_p)^2 / C   (the biased variance)
//
// For a rank-3 input {C, H, W} p runs over the H W positions: ConvNeXt's LayerNorm2d (torchvision:
// x.permute(0, 2, 3, 1), F.layer_norm over C, permute back).  For a rank-1 input {F} there is one
// position: nn.LayerNorm(F) over the features.  Computed in the network's scalar, the mean first
// and then the variance of the centred values, as PyTorch's CPU kernel (values recorded from
// torch 1.13 in tests/layers/test_channel_ops.cpp).
// Template arguments, as for BatchNorm: C fixes the channel (feature) count in the type; C == dyn
// (the default) takes it from the input, and LayerNorm<> is the run-time form.  T is the scalar.
// Data: gamma, beta [C] (PyTorch: weight, bias), both trainable (parameters() = {gamma, beta});
// eps (double, default 1e-6, ConvNeXt's; PyTorch's nn.LayerNorm default is 1e-5).
// requires: a rank-1 or rank-3 input whose first extent is C; gamma and beta with C elements
//           (shape_error otherwise); eps finite and > 0 (value_error).
// ensures:  backward is the full derivative (the statistics depend on x): with x^ = (x - mu) / s,
//           g = gamma dy: dx = (g - mean_c(g) - x^ mean_c(g x^)) / s; dgamma += sum dy x^, dbeta +=
//           sum dy over the batch and the positions.
// Analyses (the property PositionMap, core/properties.hpp, carries the thrust kernel; the host
// forward runs its operations with the positions side by side, the same values):
//   ExactLine: not piecewise linear (no pwl_rule): refused, as for GELU, at compile time for a
//     Sequential and before any work for a DynamicNetwork.
//   NNSlicer: the local slope of y_n with respect to its own input with the statistics held
//     constant, y_n = gamma (x_n - mu) / s + beta: item (x_n, -, gamma[c] / s_p Δx_n) per element; at
//     channel granularity the channel's mean of gamma[c] / s_p over its positions
//     (docs/specs/nnslicer.md#25-local-items-per-op-type).
//   LRP: the LN-rule of Ali et al., "XAI for Transformers: Better Explanations through
//     Conservative Propagation" (ICML 2022, §3.2): the normaliser s is a constant, so at each
//     position the op is the linear map y_k = sum_j x_j gamma_k (δ_jk - 1/C) / s + beta_k, and the
//     relevance follows the rules of a linear layer (core/relevance.hpp: ε, z+, αβ; beta is its
//     bias) (docs/specs/deepimportance.md#22-neuron-relevance-by-lrp).  C^2 terms per position.
//   Firmware (codegen --freestanding): refused, naming the layer (it needs sqrt; firmware links no
//     libm).  int8: float between a dequantise and a requantise.
// ONNX: opset 17 LayerNormalization (axis -1) over the features of {F}; for {C, H, W} over the
//   channels-last layout, Transpose(0, 2, 3, 1) -> LayerNormalization -> Transpose(0, 3, 1, 2), as
//   torch.onnx writes ConvNeXt.  The import rule reads the one-node form (a rank-1 input); the
//   image form's three nodes are the importer's graph rewriting.
// init (PyTorch's reset_parameters): gamma = 1, beta = 0.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "nnlens/core/codegen_form.hpp"
#include "nnlens/core/dynamic_form.hpp"
#include "nnlens/core/error.hpp"
#include "nnlens/core/onnx_form.hpp"
#include "nnlens/core/properties.hpp"
#include "nnlens/core/reflect.hpp"
#include "nnlens/core/relevance.hpp"
#include "nnlens/core/tensor.hpp"
#include "nnlens/core/traits.hpp"

namespace nnlens {

template <std::size_t C = dyn, class T = float>
struct LayerNorm {
  using scalar_type = T;
  static constexpr std::size_t channels = C;
  tensor<T, 1> gamma;  // [C] scale (PyTorch: weight)
  tensor<T, 1> beta;   // [C] shift (PyTorch: bias)
  double eps = 1e-6;
  NNLENS_FIELDS(LayerNorm, gamma, beta, eps)
};

namespace detail {
/// v + d d, the variance's step: one fma where the target has a fused multiply-add (FP_FAST_FMA, any
/// CUDA device), so that every loop rounds it alike (written v += d * d, g++ -O3 -march=native fused
/// it in the host forward's loop, vectorised over the positions, and not in the device's scalar
/// one: 1 ulp apart); a target without one cannot fuse it anywhere (and a libm fma there cost 6x).
template <class T>
NNLENS_HD inline T layer_norm_square_add(T d, T v) {
#if defined(__CUDA_ARCH__) || defined(FP_FAST_FMA)
  using std::fma;
  return fma(d, d, v);
#else
  return v + d * d;
#endif
}

/// LayerNorm's statistics at one position, in T as the forward computes them: mean, then the biased
/// variance of the centred values (layer_norm_square_add); returns 1 / sqrt(var + eps), sets mu.
template <class T>
NNLENS_HD inline T layer_norm_stats(const T* x, std::size_t C, std::size_t stride, double eps, T& mu) {
  using std::sqrt;
  T s = T(0);
  for (std::size_t c = 0; c < C; ++c) s += x[c * stride];
  mu = s / T(C);
  T v = T(0);
  for (std::size_t c = 0; c < C; ++c) {
    const T d = x[c * stride] - mu;
    v = layer_norm_square_add(d, v);
  }
  return T(1) / sqrt(v / T(C) + T(eps));
}
}  // namespace detail

template <std::size_t C, class T>
struct layer_traits<LayerNorm<C, T>> : layer_defaults {
  using L = LayerNorm<C, T>;
  static constexpr std::string_view name = "LayerNorm";

  /// One position's normalisation (PositionMap): p = gamma[0..C) then beta[0..C).
  struct normalise {
    double eps;
    template <class V>
    NNLENS_HD void operator()(const V* x, V* y, std::size_t Cn, std::size_t stride, const V* p) const {
      V mu;
      const V inv = detail::layer_norm_stats(x, Cn, stride, eps, mu);
      for (std::size_t c = 0; c < Cn; ++c) y[c * stride] = (x[c * stride] - mu) * inv * p[c] + p[Cn + c];
    }
  };
  static constexpr normalise position_map(const L& l) { return {l.eps}; }
  template <class V>
  static std::vector<V> position_parameters(const L& l, shape) {
    std::vector<V> p(2 * l.gamma.size());
    for (std::size_t c = 0; c < l.gamma.size(); ++c) p[c] = V(l.gamma(c)), p[l.gamma.size() + c] = V(l.beta(c));
    return p;
  }

  static constexpr shape_check infer(shape in) {
    if (in.rank != 1 && in.rank != 3) return {{}, "LayerNorm needs a rank-1 (features) or rank-3 (channels) input"};
    if (C != dyn && in[0] != dyn && in[0] != C)
      return {{}, "LayerNorm<C>: the input's channel count (rank 3) or feature count (rank 1) is not C"};
    return {in, nullptr};
  }
  static shape output_shape(const L& l, shape in) {
    if (in.rank != 1 && in.rank != 3)
      throw shape_error(detail::concat("LayerNorm needs a rank-1 or rank-3 input, got ", in.str()));
    const std::size_t c = in[0];
    if (C != dyn && c != C)
      throw shape_error(detail::concat("LayerNorm<", C, ">: the input ", in.str(), " has ", c, in.rank == 3 ? " channels" : " features"));
    auto check = [&](const tensor<T, 1>& v, const char* what) {
      if (v.size() != c)
        throw shape_error(detail::concat("LayerNorm: ", what, " has ", v.size(), " elements, expected ", c, " (one per ",
                                         in.rank == 3 ? "channel" : "feature", " of input ", in.str(), ")"));
    };
    check(l.gamma, "gamma");
    check(l.beta, "beta");
    if (c == 0) throw shape_error(detail::concat("LayerNorm: the input ", in.str(), " has no channels"));
    if (!(l.eps > 0) || !std::isfinite(l.eps))
      throw value_error(detail::concat("LayerNorm: eps is ", l.eps, ", expected a finite eps > 0"));
    return in;
  }

  /// Scratch: the parameter block of position_map (forward), the per-channel sums (backward).
  static constexpr std::size_t scratch_size(const L*, shape in, shape, std::size_t) { return 2 * in[0]; }

  /// Positions the host forward normalises side by side (their statistics on the stack).
  static constexpr std::size_t position_block = 256;

  /// The position map at every position, by the same operations in the same order as
  /// normalise (layer_norm_stats, then the values), up to position_block positions side by side:
  /// each pass reads runs of contiguous positions, channel after channel.  One position at a time
  /// read its channels with stride P, three times over: 0.2 GB/s, 1-3% of a copy
  /// (docs/benchmarks.md).
  template <class Tx>
  static void forward(const L& l, const forward_args<Tx>& a) {
    using std::sqrt;
    const std::size_t Cn = a.in[0], P = a.in.size() / Cn;
    Tx* p = a.scratch;
    for (std::size_t c = 0; c < Cn; ++c) p[c] = Tx(l.gamma(c)), p[Cn + c] = Tx(l.beta(c));
    Tx mu[position_block];   // the sums, then the means
    Tx inv[position_block];  // the sums of squares, then 1 / sqrt(var + eps)
    for (std::size_t n = 0; n < a.batch; ++n)
      for (std::size_t q0 = 0; q0 < P; q0 += position_block) {
        const std::size_t m = std::min(position_block, P - q0);
        const Tx* x = a.x + n * Cn * P + q0;
        Tx* y = a.y + n * Cn * P + q0;
        for (std::size_t q = 0; q < m; ++q) mu[q] = Tx(0), inv[q] = Tx(0);
        for (std::size_t c = 0; c < Cn; ++c)
          for (std::size_t q = 0; q < m; ++q) mu[q] += x[c * P + q];
        for (std::size_t q = 0; q < m; ++q) mu[q] = mu[q] / Tx(Cn);
        for (std::size_t c = 0; c < Cn; ++c)
          for (std::size_t q = 0; q < m; ++q) {
            const Tx d = x[c * P + q] - mu[q];
            inv[q] = detail::layer_norm_square_add(d, inv[q]);
          }
        for (std::size_t q = 0; q < m; ++q) inv[q] = Tx(1) / sqrt(inv[q] / Tx(Cn) + Tx(l.eps));
        for (std::size_t c = 0; c < Cn; ++c) {
          const Tx g = p[c], b = p[Cn + c];
          for (std::size_t q = 0; q < m; ++q) y[c * P + q] = (x[c * P + q] - mu[q]) * inv[q] * g + b;
        }
      }
  }

  template <class Tx>
  static void backward(const L& l, const backward_args<Tx>& a, L* grad) {
    const std::size_t Cn = a.in[0], P = a.in.size() / Cn;
    Tx* sg = a.scratch;  // sum dy x^ per channel
    Tx* sb = a.scratch + Cn;  // sum dy per channel
    for (std::size_t c = 0; c < 2 * Cn; ++c) a.scratch[c] = Tx(0);
    for (std::size_t n = 0; n < a.batch; ++n)
      for (std::size_t q = 0; q < P; ++q) {
        const Tx* x = a.x + n * Cn * P + q;
        const Tx* dy = a.dy + n * Cn * P + q;
        Tx mu;
        const Tx inv = detail::layer_norm_stats(x, Cn, P, l.eps, mu);
        Tx m1 = Tx(0), m2 = Tx(0);  // sums of g and g x^, g = gamma dy
        for (std::size_t c = 0; c < Cn; ++c) {
          const Tx xh = (x[c * P] - mu) * inv, d = dy[c * P];
          const Tx g = Tx(l.gamma(c)) * d;
          m1 += g;
          m2 += g * xh;
          sg[c] += d * xh;
          sb[c] += d;
        }
        if (!a.dx) continue;
        m1 /= Tx(Cn), m2 /= Tx(Cn);
        Tx* dx = a.dx + n * Cn * P + q;
        for (std::size_t c = 0; c < Cn; ++c) {
          const Tx xh = (x[c * P] - mu) * inv;
          dx[c * P] = (Tx(l.gamma(c)) * dy[c * P] - m1 - xh * m2) * inv;
        }
      }
    if (grad)
      for (std::size_t c = 0; c < Cn; ++c) grad->gamma(c) += T(sg[c]), grad->beta(c) += T(sb[c]);
  }

  template <class Self>
  static auto parameters(Self& l) {
    using S = std::conditional_t<std::is_const_v<Self>, const T, T>;
    return std::array<std::span<S>, 2>{std::span<S>(l.gamma.data(), l.gamma.size()), std::span<S>(l.beta.data(), l.beta.size())};
  }
  /// The parameter elements of channel n, f(tensor, element): gamma[n] and beta[n] (a masked
  /// channel whose gamma and beta are 0 outputs 0).
  template <class F>
  static void for_each_neuron_parameter(const L&, shape, shape, std::size_t n, F&& f) {
    f(std::size_t(0), n);
    f(std::size_t(1), n);
  }
  template <class F>
  static void for_each_input_parameter(const L& l, shape in, shape out, std::size_t c, F&& f) {
    for_each_neuron_parameter(l, in, out, c, f);
  }

  /// PyTorch's default: gamma = 1, beta = 0 (rng unused).
  static void init(L& l, shape in, std::mt19937_64&) {
    const std::size_t c = in[0];
    l.gamma = xt::ones<T>({c});
    l.beta = xt::zeros<T>({c});
  }
};

template <std::size_t C, class T>
struct dynamic_form<LayerNorm<C, T>> {
  using type = LayerNorm<dyn, T>;
  static type to_dynamic(const LayerNorm<C, T>& l) { return type{l.gamma, l.beta, l.eps}; }
  static LayerNorm<C, T> from_dynamic(const type& d, const std::string& where) {
    if (C != dyn && d.gamma.size() != C)
      throw shape_error(detail::concat(where, ": LayerNorm expects ", C, " channels, the source has ", d.gamma.size()));
    return LayerNorm<C, T>{d.gamma, d.beta, d.eps};
  }
};

/// NNSlicer: the local slope with the statistics held constant, (x_n, -, gamma[c] / s Δx_n); at
/// channel granularity the mean of gamma[c] / s_p over the channel's positions (see the header).
template <std::size_t C, class T>
struct sign_rule<LayerNorm<C, T>> {
  static void items(const LayerNorm<C, T>& l, const sign_ctx& c, std::size_t n, std::vector<sign_item>& out) {
    const std::size_t Cn = c.in[0], P = c.in.size() / Cn;
    double mu;
    if (c.element || c.in.rank != 3) {
      const std::size_t ch = n / P, q = n % P;
      const double inv = detail::layer_norm_stats(c.x + q, Cn, P, l.eps, mu);
      out.push_back({n, sign_item::none, double(l.gamma(ch)) * inv * c.dx[n]});
      return;
    }
    double s = 0;
    for (std::size_t q = 0; q < P; ++q) s += detail::layer_norm_stats(c.x + q, Cn, P, l.eps, mu);
    out.push_back({n, sign_item::none, double(l.gamma(n)) * (s / double(P)) * c.dx[n]});
  }
};

/// LRP: the LN-rule (Ali et al. 2022, see the header): at each position the linear map with
/// weights w_jk = gamma[k] (δ_jk - 1/C) / s and bias beta[k], s from the input as forward computes
/// it (in double), by the affine rules of core/relevance.hpp.
template <std::size_t C, class T>
struct relevance_rule<LayerNorm<C, T>> {
  static void relevance(const LayerNorm<C, T>& l, const relevance_args& a) {
    const std::size_t Cn = a.in[0], P = a.in.size() / Cn;
    thread_local std::vector<double> inv;
    inv.resize(P);
    double mu;
    for (std::size_t q = 0; q < P; ++q) inv[q] = detail::layer_norm_stats(a.x + q, Cn, P, l.eps, mu);
    const double share = 1.0 / double(Cn);
    detail::affine_relevance(
        a, 1, [&](std::size_t k) { return double(l.beta(k / P)); },
        [&](std::size_t k, auto&& f) {
          const std::size_t ck = k / P, q = k % P;
          const double g = double(l.gamma(ck)) * inv[q];
          for (std::size_t j = 0; j < Cn; ++j) f(j * P + q, g * ((j == ck ? 1.0 : 0.0) - share));
        });
  }
};

// ---- io forms: codegen spelling, ONNX LayerNormalization (opset 17) both ways
template <class T>
struct codegen_rule<LayerNorm<dyn, T>> : detail::codegen_fields<LayerNorm<dyn, T>> {
  static std::string type(const LayerNorm<dyn, T>& l, codegen_context& c) {
    return "nnlens::LayerNorm<" + std::to_string(l.gamma.size()) + c.scalar_arg() + ">";
  }
};
template <class T>
struct onnx_export_rule<LayerNorm<dyn, T>> {
  static std::string emit(const LayerNorm<dyn, T>& l, onnx_sink& s, const std::string& x, shape in, shape) {
    s.require_opset(17);
    const auto Cd = detail::onnx_i64({l.gamma.size()});
    const std::string g = s.tensor("ln_scale", Cd, l.gamma), b = s.tensor("ln_B", Cd, l.beta);
    const std::vector<onnx_attr> at{{"axis", std::int64_t(-1)}, {"epsilon", static_cast<float>(l.eps)}};
    if (in.rank != 3) return s.node("LayerNormalization", {x, g, b}, at);
    const std::string last = s.node("Transpose", {x}, {{"perm", std::vector<std::int64_t>{0, 2, 3, 1}}});
    const std::string y = s.node("LayerNormalization", {last, g, b}, at);
    return s.node("Transpose", {y}, {{"perm", std::vector<std::int64_t>{0, 3, 1, 2}}});
  }
};
/// LayerNormalization over the features of a rank-1 activation (axis -1, or the feature axis).
template <class T>
struct onnx_import_rule<LayerNorm<dyn, T>> {
  static constexpr std::string_view ops[] = {"LayerNormalization"};
  template <class Emit>
  static void build(onnx_node_view& n, Emit&& emit) {
    n.require_unpadded();
    const std::vector<std::int64_t> d = n.input_dims();
    // over the features of [F], or over the channels of an image seen channels-last ([H,W,C]:
    // ConvNeXt's permute + layer_norm; the stored image's channels are that last axis)
    const bool image = n.channels_last();
    if (!image && (n.transposed() || d.size() != 1))
      n.fail("a LayerNormalization reads the features of a flat activation [F] or the channels of an image seen "
             "channels-last [H,W,C]; got " + n.dims_str(d) + (n.transposed() ? " (transposed)" : ""));
    std::int64_t axis = n.attr_i("axis", -1);
    const std::int64_t rank = std::int64_t(d.size()) + (n.batch_axis() ? 1 : 0);
    if (axis < 0) axis += rank;
    if (axis != rank - 1) n.fail("only axis -1 (the features, or the channels seen channels-last) is supported");
    const std::size_t F = std::size_t(d.back());
    LayerNorm<dyn, T> ln;
    ln.gamma = xt::ones<T>({F});
    ln.beta = xt::zeros<T>({F});
    auto read = [&](int i, tensor<T, 1>& into, const char* what) {
      if (!n.has_input(i)) return;
      const onnx_const_view c = n.constant(i);
      if (c.size() != F && c.size() != 1)
        n.fail(std::string(what) + " has " + std::to_string(c.size()) + " values, expected " + std::to_string(F));
      for (std::size_t k = 0; k < F; ++k) into(k) = T(float(c.values[c.size() == 1 ? 0 : k]));
    };
    read(1, ln.gamma, "Scale");
    read(2, ln.beta, "B");
    ln.eps = onnx_intended(n.attr_f("epsilon", 1e-5));
    if (!(ln.eps > 0)) n.fail("epsilon must be > 0");
    emit(std::move(ln));
  }
};

}  // namespace nnlens
