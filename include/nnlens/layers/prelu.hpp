// nnlens/layers/prelu.hpp -- PReLU<C, T>: y = x for x > 0, a[c] * x otherwise, with learned slopes.
//
// PyTorch nn.PReLU / ONNX PRelu.  c is the channel of a rank-3 input {C, H, W} or the feature of a
// rank-1 input {F} (the first extent of the per-sample shape).  a holds either one slope per
// channel / feature, or a single slope shared by every element (PyTorch's num_parameters = 1).
//
// Template arguments, as for BatchNorm: C is the slope count the type fixes (1: shared; dyn, the
// default: taken from a at run time, so PReLU<> fits anywhere and is the run-time form
// DynamicNetwork stores).  T is the scalar type.
// Data: a [C] (PyTorch: weight).  Trainable parameters: a (parameters() returns {a}).
// requires: a rank-1 or rank-3 input; a.size() == 1 or the input's first extent (and == C unless
//           C == dyn) (shape_error otherwise); every slope finite (value_error).
// ensures:  forward is element-wise; backward follows PyTorch: d/dx = 1 for x > 0, a[c] for x <= 0
//           (the kink x = 0 takes the slope a[c]), d/da[c] = sum over the elements of channel c (all
//           elements when shared) with x <= 0 of dy * x, ADDED into grad->a.
// init: every slope 0.25 (PyTorch's default init); the count is C when the type fixes it, else the
//       current a's size when it fits the input, else 1 (PyTorch's default num_parameters = 1).
// Neuron masks (for_each_neuron_parameter): a per-channel slope belongs to its channel's neuron; a
// shared slope belongs to no neuron (masking one neuron must not change the others).
#pragma once

#include <array>
#include <cmath>
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
struct PReLU {
  using scalar_type = T;
  static constexpr std::size_t channels = C;
  tensor<T, 1> a;  // [C] slopes for x <= 0 (one element: shared)
  NNLENS_FIELDS(PReLU, a)
};

template <std::size_t C, class T>
struct layer_traits<PReLU<C, T>> : layer_defaults {
  using L = PReLU<C, T>;
  static constexpr std::string_view name = "PReLU";

  static constexpr shape_check infer(shape in) {
    if (in.rank != 1 && in.rank != 3) return {{}, "PReLU needs a rank-1 (features) or rank-3 (channels) input"};
    if (C != dyn && C != 1 && in[0] != dyn && in[0] != C)
      return {{}, "PReLU<C>: the input's channel count (rank 3) or feature count (rank 1) is neither C nor 1"};
    return {in, nullptr};
  }
  static shape output_shape(const L& l, shape in) {
    if (in.rank != 1 && in.rank != 3)
      throw shape_error(detail::concat("PReLU needs a rank-1 or rank-3 input, got ", in.str()));
    const std::size_t c = in[0], k = l.a.size();
    if (C != dyn && k != C) throw shape_error(detail::concat("PReLU<", C, ">: a has ", k, " slopes, expected ", C));
    if (k != 1 && k != c)
      throw shape_error(detail::concat("PReLU: a has ", k, " slopes, expected 1 (shared) or ", c, " (one per ",
                                       in.rank == 3 ? "channel" : "feature", " of input ", in.str(), ")"));
    for (std::size_t i = 0; i < k; ++i)
      if (!std::isfinite(double(l.a(i))))
        throw value_error(detail::concat("PReLU: a[", i, "] is ", double(l.a(i)), ", expected a finite slope"));
    return in;
  }

  /// y = f(x, a[c]): the forward below and the thrust backend's kernel (core/properties.hpp,
  /// ParametricMap).
  struct slope_map {
    template <class V>
    NNLENS_HD V operator()(V x, V s) const {
      return x > V(0) ? x : s * x;
    }
  };
  static constexpr slope_map param_map(const L&) { return {}; }
  /// The slopes in V, as the forward casts them (1 shared, or one per channel / feature).
  template <class V>
  static std::vector<V> map_parameters(const L& l, shape) {
    std::vector<V> p(l.a.size());
    for (std::size_t i = 0; i < p.size(); ++i) p[i] = V(l.a(i));
    return p;
  }

  template <class Tx>
  static void forward(const L& l, const forward_args<Tx>& a) {
    const std::size_t Cn = a.in[0], P = a.in.size() / Cn;
    const bool shared = l.a.size() == 1;
    const slope_map f;
    for (std::size_t n = 0; n < a.batch; ++n)
      for (std::size_t c = 0; c < Cn; ++c) {
        const Tx s = Tx(l.a(shared ? 0 : c));
        const Tx* x = a.x + (n * Cn + c) * P;
        Tx* y = a.y + (n * Cn + c) * P;
        for (std::size_t p = 0; p < P; ++p) y[p] = f(x[p], s);
      }
  }

  template <class Tx>
  static void backward(const L& l, const backward_args<Tx>& a, L* grad) {
    const std::size_t Cn = a.in[0], P = a.in.size() / Cn;
    const bool shared = l.a.size() == 1;
    if (a.dx)
      for (std::size_t n = 0; n < a.batch; ++n)
        for (std::size_t c = 0; c < Cn; ++c) {
          const Tx s = Tx(l.a(shared ? 0 : c));
          const Tx* x = a.x + (n * Cn + c) * P;
          const Tx* dy = a.dy + (n * Cn + c) * P;
          Tx* dx = a.dx + (n * Cn + c) * P;
          for (std::size_t p = 0; p < P; ++p) dx[p] = x[p] > Tx(0) ? dy[p] : s * dy[p];
        }
    if (grad) {
      Tx* ga = grad->a.data();
      for (std::size_t c = 0; c < Cn; ++c) {
        Tx sa = Tx(0);
        for (std::size_t n = 0; n < a.batch; ++n) {
          const Tx* x = a.x + (n * Cn + c) * P;
          const Tx* dy = a.dy + (n * Cn + c) * P;
          for (std::size_t p = 0; p < P; ++p)
            if (!(x[p] > Tx(0))) sa += dy[p] * x[p];
        }
        ga[shared ? 0 : c] += sa;
      }
    }
  }

  template <class Self>
  static auto parameters(Self& l) {
    using S = std::conditional_t<std::is_const_v<Self>, const T, T>;
    return std::array<std::span<S>, 1>{std::span<S>(l.a.data(), l.a.size())};
  }
  /// The parameter elements of neuron (channel / feature) n: a[n]; none when the slope is shared.
  template <class F>
  static void for_each_neuron_parameter(const L& l, shape, shape, std::size_t n, F&& f) {
    if (l.a.size() > 1) f(std::size_t(0), n);
  }
  template <class F>
  static void for_each_input_parameter(const L& l, shape in, shape out, std::size_t c, F&& f) {
    for_each_neuron_parameter(l, in, out, c, f);
  }

  /// PyTorch's default: every slope 0.25 (rng unused); the count as in the header comment.
  static void init(L& l, shape in, std::mt19937_64&) {
    std::size_t k = C;
    if (C == dyn) k = l.a.size() == in[0] ? in[0] : 1;
    l.a = xt::empty<T>({k});
    for (std::size_t i = 0; i < k; ++i) l.a(i) = T(0.25);
  }
};

template <std::size_t C, class T>
struct dynamic_form<PReLU<C, T>> {
  using type = PReLU<dyn, T>;
  static type to_dynamic(const PReLU<C, T>& l) { return type{l.a}; }
  static PReLU<C, T> from_dynamic(const type& d, const std::string& where) {
    if (C != dyn && d.a.size() != C)
      throw shape_error(detail::concat(where, ": PReLU expects ", C, " slopes, the source has ", d.a.size()));
    return PReLU<C, T>{d.a};
  }
};

/// ExactLine: one knot at 0 for every unit (always: a slope of 1 may hold for some channels only).
template <std::size_t C, class T>
struct pwl_rule<PReLU<C, T>> {
  static constexpr std::array<double, 1> knots(const PReLU<C, T>&) { return {0.0}; }
};

/// NNSlicer: element-wise, no gate: (x_n, -, Δx_n), as LeakyReLU.
template <std::size_t C, class T>
struct sign_rule<PReLU<C, T>> : sign_passthrough_rule {};

/// LRP: relevance passes through unchanged, as LeakyReLU (docs/specs/deepimportance.md#22-neuron-relevance-by-lrp).
template <std::size_t C, class T>
struct relevance_rule<PReLU<C, T>> : relevance_passthrough_rule {};


// ---- io forms: codegen spelling (a filled in make_NAME), ONNX PRelu both ways
template <class T>
struct codegen_rule<PReLU<dyn, T>> : detail::codegen_fields<PReLU<dyn, T>> {
  static std::string type(const PReLU<dyn, T>& l, codegen_context& c) {
    return "nnlens::PReLU<" + std::to_string(l.a.size()) + c.scalar_arg() + ">";
  }
};
/// The slope as an initializer that broadcasts against [N, ...]: [C, 1, 1] (rank 3), [C] (rank 1),
/// [1] (shared).
template <class T>
struct onnx_export_rule<PReLU<dyn, T>> {
  static std::string emit(const PReLU<dyn, T>& l, onnx_sink& s, const std::string& x, shape in, shape) {
    const std::size_t k = l.a.size();
    const std::vector<std::int64_t> dims =
        k == 1 ? detail::onnx_i64({1}) : in.rank == 3 ? detail::onnx_i64({k, 1, 1}) : detail::onnx_i64({k});
    return s.node("PRelu", {x, s.tensor("prelu_slope", dims, l.a)}, {});
  }
};
/// Reads the slope constant: one value (any shape of ones: shared), [C, 1, 1] or [1, C, 1, 1] on an
/// NCHW image with C channels, [F] or [1, F] on features [F].
template <class T>
struct onnx_import_rule<PReLU<dyn, T>> {
  static constexpr std::string_view ops[] = {"PRelu"};
  template <class Emit>
  static void build(onnx_node_view& n, Emit&& emit) {
    n.require_unpadded();
    const onnx_const_view s = n.constant(1);
    const std::vector<std::int64_t> d = n.input_dims(), sd(s.dims.begin(), s.dims.end());
    if (s.size() != 1) {
      if (n.transposed()) n.fail("a per-channel slope needs an untransposed input");
      const std::int64_t c = d.empty() ? 0 : d[0];
      using V = std::vector<std::int64_t>;
      const bool ok = d.size() == 3 ? n.plain_image() && (sd == V{c, 1, 1} || sd == V{1, c, 1, 1})
                                    : d.size() == 1 && (sd == V{c} || sd == V{1, c});
      if (!ok)
        n.fail("slope shape " + n.dims_str(sd) + " does not broadcast per channel over the input " + n.dims_str(d) +
               " (expected [1], [C,1,1] or [1,C,1,1] on an image, [F] on features)");
    }
    PReLU<dyn, T> l;
    l.a = tensor<T, 1>::from_shape({s.size()});
    for (std::size_t i = 0; i < s.size(); ++i) l.a(i) = T(float(s.values[i]));
    emit(std::move(l));
  }
};

}  // namespace nnlens
