// nnlens/layers/avg_pool2d.hpp -- 2-D average pooling.
//
//   AvgPool2D<K, Stride = K, Pad = 0, CountIncludePad = true>   square window, symmetric padding
//   AvgPool2DG<pool_geometry{...}>     rectangular window, per-axis stride, asymmetric padding
//                                      (top, left, bottom, right), ceil_mode, count_include_pad
//                                      (kernels/conv.hpp)
//   AvgPool2D<dyn> == AvgPool2DG<pool_geometry_dyn>   the run-time form (member `geometry`)
//
// Input [C, H, W] -> [C, OH, OW].  The divisor follows PyTorch (and ONNX AveragePool):
//   count_include_pad = true:  the window clipped to the PADDED input [-pad_top, H + pad_bottom) x
//                              [-pad_left, W + pad_right) (a ceil_mode window hanging past the
//                              padding counts only the part inside it);
//   count_include_pad = false: the number of input elements in the window.
// requires: rank-3 input; the window fits the padded input; no window lies entirely in the
//           padding (checked by infer and output_shape).
// ensures:  backward spreads dy / divisor over each window (adding where windows overlap).
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>

#include "nnlens/core/codegen_form.hpp"
#include "nnlens/core/traits.hpp"
#include "nnlens/core/onnx_form.hpp"
#include "nnlens/core/properties.hpp"
#include "nnlens/core/reflect.hpp"
#include "nnlens/layers/pool_forms.hpp"
#include "nnlens/kernels/conv.hpp"
#include "nnlens/kernels/pool_relevance.hpp"
#include "nnlens/kernels/window.hpp"
#include "nnlens/core/dynamic_form.hpp"

namespace nnlens {

template <pool_geometry G>
struct AvgPool2DG {
  static_assert(G.invalid() == nullptr, "AvgPool2D: the window and the strides must be positive");
  static constexpr pool_geometry geometry = G;
};
template <>
struct AvgPool2DG<pool_geometry_dyn> {
  pool_geometry geometry{};
  NNLENS_FIELDS(AvgPool2DG, geometry)
};

/// Square window and symmetric padding.  K == dyn: the run-time form.
template <std::size_t K = dyn, std::size_t Stride = K, std::size_t Pad = 0, bool CountIncludePad = true>
using AvgPool2D = AvgPool2DG<K == dyn ? pool_geometry_dyn
                                      : pool_geometry{K, K, Stride, Stride, Pad, Pad, Pad, Pad, false, CountIncludePad}>;

template <pool_geometry G>
struct layer_traits<AvgPool2DG<G>> : layer_defaults {
  using L = AvgPool2DG<G>;
  static constexpr std::string_view name = "AvgPool2D";
  /// The mean over each window of geometry_of, divisor as above (core/properties.hpp).
  static constexpr pool_reduce pool_reduction = pool_reduce::mean;
  static constexpr pool_geometry geometry_of(const L* l) {
    if constexpr (G.is_dynamic())
      return l->geometry;
    else
      return (void)l, G;
  }

  static constexpr shape_check infer(shape in) {
    return detail::pool_infer(G, in, "AvgPool2D needs an image input [C,H,W] (rank 3)",
                              "AvgPool2D: the window is larger than the padded input");
  }
  static shape output_shape(const L& l, shape in) { return detail::pool_output_shape(geometry_of(&l), in, name); }

  template <class T>
  static void forward(const L& l, const forward_args<T>& a) {  // kernels/window.hpp: the thrust kernel's too
    const kernels::window_dims d = kernels::window_of(geometry_of(&l), a.in, a.out);
    const std::size_t P = d.OH * d.OW;
    for (std::size_t pl = 0; pl < a.batch * d.C; ++pl)
      for (std::size_t o = 0; o < P; ++o) a.y[pl * P + o] = kernels::pool_output<T, false>(d, a.x + pl * d.H * d.W, o / d.OW, o % d.OW);
  }

  template <class T>
  static void backward(const L& l, const backward_args<T>& a, L*) {
    if (!a.dx) return;
    const pool_geometry g = geometry_of(&l);
    const std::size_t C = a.in[0], H = a.in[1], W = a.in[2], OH = a.out[1], OW = a.out[2];
    std::fill(a.dx, a.dx + a.batch * C * H * W, T(0));
    for (std::size_t pl = 0; pl < a.batch * C; ++pl) {
      T* dx = a.dx + pl * H * W;
      const T* dy = a.dy + pl * OH * OW;
      for (std::size_t oh = 0; oh < OH; ++oh) {
        const auto r = kernels::pool_axis(oh, g.stride_h, g.pad_top, g.pad_bottom, g.kh, H, g.count_include_pad);
        for (std::size_t ow = 0; ow < OW; ++ow) {
          const auto c = kernels::pool_axis(ow, g.stride_w, g.pad_left, g.pad_right, g.kw, W, g.count_include_pad);
          const T d = dy[oh * OW + ow] / T(r.count * c.count);
          for (std::size_t h = r.lo; h < r.hi; ++h)
            for (std::size_t w = c.lo; w < c.hi; ++w) dx[h * W + w] += d;
        }
      }
    }
  }
};

template <pool_geometry G>
struct dynamic_form<AvgPool2DG<G>> {
  using type = AvgPool2DG<pool_geometry_dyn>;
  static type to_dynamic(const AvgPool2DG<G>& l) { return type{layer_traits<AvgPool2DG<G>>::geometry_of(&l)}; }
  static AvgPool2DG<G> from_dynamic(const type& d, const std::string& where) {
    AvgPool2DG<G> l;
    if constexpr (G.is_dynamic()) {
      l.geometry = d.geometry;
    } else if (!(d.geometry == G)) {
      const pool_geometry& e = d.geometry;
      throw shape_error(detail::concat(where, ": AvgPool2D geometry differs from the static type (window ", e.kh, "x",
                                       e.kw, " vs ", G.kh, "x", G.kw, "; stride ", e.stride_h, ",", e.stride_w, " vs ",
                                       G.stride_h, ",", G.stride_w, "; padding ", e.pad_top, ",", e.pad_left, ",",
                                       e.pad_bottom, ",", e.pad_right, " vs ", G.pad_top, ",", G.pad_left, ",",
                                       G.pad_bottom, ",", G.pad_right, "; ceil_mode ", e.ceil_mode, " vs ", G.ceil_mode,
                                       "; count_include_pad ", e.count_include_pad, " vs ", G.count_include_pad, ")"));
    }
    return l;
  }
};

/// ExactLine: affine, never splits a segment.
template <pool_geometry G>
struct pwl_rule<AvgPool2DG<G>> : pwl_affine_rule {};

/// NNSlicer: per channel, (c, -, Δx_c); per element, one item per input element of the window,
/// Δx_i / divisor (the divisor of the forward pass).
template <pool_geometry G>
struct sign_rule<AvgPool2DG<G>> {
  using L = AvgPool2DG<G>;
  static void items(const L& l, const sign_ctx& c, std::size_t n, std::vector<sign_item>& out) {
    if (!c.element) {
      out.push_back({n, sign_item::none, c.dx[n]});
      return;
    }
    const pool_geometry g = layer_traits<L>::geometry_of(&l);
    const std::size_t H = c.in[1], W = c.in[2], OH = c.out[1], OW = c.out[2];
    const std::size_t ch = n / (OH * OW), p = n % (OH * OW), oh = p / OW, ow = p % OW;
    const auto wh = kernels::pool_axis(oh, g.stride_h, g.pad_top, g.pad_bottom, g.kh, H, g.count_include_pad);
    const auto ww = kernels::pool_axis(ow, g.stride_w, g.pad_left, g.pad_right, g.kw, W, g.count_include_pad);
    const double div = double(wh.count * ww.count);
    for (std::size_t r = wh.lo; r < wh.hi; ++r)
      for (std::size_t q = ww.lo; q < ww.hi; ++q) {
        const std::size_t i = ch * H * W + r * W + q;
        out.push_back({i, sign_item::none, c.dx[i] / div});
      }
  }
};

/// LRP: a linear layer with weights 1 / divisor (the forward pass's divisor) and no bias, so the
/// ε-rule is the proportional rule R_j = Σ_k a_j / (Σ_window a) R_k (docs/specs/deepimportance.md#22-neuron-relevance-by-lrp);
/// kernels::mean_pool_relevance per plane (the thrust LRP step's too).
template <pool_geometry G>
struct relevance_rule<AvgPool2DG<G>> {
  using L = AvgPool2DG<G>;
  static void relevance(const L& l, const relevance_args& a) {
    const kernels::window_dims d = kernels::window_of(layer_traits<L>::geometry_of(&l), a.in, a.out);
    const std::size_t P = d.H * d.W, Q = d.OH * d.OW;
    for (std::size_t c = 0; c < d.C; ++c) kernels::mean_pool_relevance(d, a.x + c * P, a.z + c * Q, a.r_out + c * Q, a.r_in + c * P, *a.o);
  }
};

// ---- io forms: codegen spelling, ONNX AveragePool both ways (pool_forms.hpp); a preceding Pad
// node's zeros are absorbed (count_include_pad then holds: they are input elements)
template <>
struct codegen_rule<AvgPool2D<dyn>> : detail::codegen_fields<AvgPool2D<dyn>> {
  static std::string type(const AvgPool2D<dyn>& l, codegen_context&) {
    const std::string sq = detail::codegen_pool_square(l.geometry);
    if (sq.empty()) return "nnlens::AvgPool2DG<" + detail::codegen_pool_full(l.geometry) + ">";
    if (l.geometry.count_include_pad) return "nnlens::AvgPool2D<" + sq + ">";
    const pool_geometry& g = l.geometry;
    return "nnlens::AvgPool2D<" + detail::codegen_list({g.kh, g.stride_h, g.pad_top}) + ", false>";
  }
};
template <>
struct onnx_export_rule<AvgPool2D<dyn>> {
  static std::string emit(const AvgPool2D<dyn>& l, onnx_sink& s, const std::string& x, shape, shape) {
    std::vector<onnx_attr> a = detail::onnx_pool_attrs(l.geometry);
    a.push_back({"count_include_pad", std::int64_t(l.geometry.count_include_pad)});
    return s.node("AveragePool", {x}, a);
  }
};
template <>
struct onnx_import_rule<AvgPool2D<dyn>> {
  static constexpr std::string_view ops[] = {"AveragePool"};
  template <class Emit>
  static void build(onnx_node_view& n, Emit&& emit) {
    pool_geometry g = detail::onnx_pool_geometry(n);
    const bool own_pad = g.pad_top || g.pad_left || g.pad_bottom || g.pad_right;
    g.count_include_pad = n.attr_i("count_include_pad", 0) != 0;
    if (n.padded()) {
      if (own_pad && !g.count_include_pad)
        n.fail("a Pad node before an AveragePool with its own pads and count_include_pad = 0 is not supported");
      const auto q = n.pending_pad();
      g.count_include_pad = true;  // the padded zeros are input elements
      g.pad_top += q[0], g.pad_left += q[1], g.pad_bottom += q[2], g.pad_right += q[3];
      n.absorb_pad();
    }
    AvgPool2D<dyn> p;
    p.geometry = g;
    emit(std::move(p));
  }
};

}  // namespace nnlens
