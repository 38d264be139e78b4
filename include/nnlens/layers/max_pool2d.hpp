// nnlens/layers/max_pool2d.hpp -- 2-D max pooling.
//
//   MaxPool2D<K, Stride = K, Pad = 0>   square K x K window, symmetric padding
//   MaxPool2DG<pool_geometry{...}>      rectangular window, per-axis stride, asymmetric padding
//                                       (top, left, bottom, right), ceil_mode (kernels/conv.hpp)
//   MaxPool2D<dyn> == MaxPool2DG<pool_geometry_dyn>   the run-time form (member `geometry`)
//
// Input [C, H, W] -> [C, OH, OW].  Padding acts as -infinity (it never wins).  No weights: the
// scalar type is the activations' (forward/backward are templates on it).
// requires: rank-3 input; the window fits the padded input; no window lies entirely in the
//           padding (checked by infer and output_shape).  count_include_pad has no meaning here
//           and must keep its default.
// ensures:  ties go to the FIRST maximum in row-major window order (row, then column); a NaN
//           in a window wins over numbers (the first NaN), as in PyTorch.  backward routes dy to
//           the arg-max (adding where windows overlap).  With forward_args.cache non-null,
//           forward stores each output's arg-max (the index h*W + w in its input plane, exact in T
//           when H*W <= 2^digits(T); otherwise nothing is cached) and backward reads it; without a
//           cache backward recomputes the arg-max from x.
// Kernels: kernels/max_pool.hpp (a general two-stage vectorised arg-max and, for float on
// AVX-512, a dedicated 2x2 stride-2 kernel; both give the same arg-max and the same value bits),
// and, for a forward without a cache, kernels/max_pool_values.hpp (the values alone, same bits).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <utility>
#include <vector>
#include <type_traits>
#include <string>

#include "nnlens/core/codegen_form.hpp"
#include "nnlens/core/traits.hpp"
#include "nnlens/core/onnx_form.hpp"
#include "nnlens/core/properties.hpp"
#include "nnlens/core/reflect.hpp"
#include "nnlens/layers/pool_forms.hpp"
#include "nnlens/kernels/envelope.hpp"
#include "nnlens/kernels/conv.hpp"
#include "nnlens/kernels/max_pool_values.hpp"
#include "nnlens/kernels/int8.hpp"
#include "nnlens/kernels/max_pool.hpp"
#include "nnlens/kernels/pool_relevance.hpp"
#include "nnlens/kernels/window.hpp"
#include "nnlens/core/dynamic_form.hpp"

namespace nnlens {

template <pool_geometry G>
struct MaxPool2DG {
  static_assert(G.invalid() == nullptr, "MaxPool2D: the window and the strides must be positive");
  static_assert(G.count_include_pad, "MaxPool2D: count_include_pad applies to AvgPool2D only; leave it at its default");
  static constexpr pool_geometry geometry = G;
};
template <>
struct MaxPool2DG<pool_geometry_dyn> {
  pool_geometry geometry{};
  NNLENS_FIELDS(MaxPool2DG, geometry)
};

/// Square window and symmetric padding.  K == dyn: the run-time form.
template <std::size_t K = dyn, std::size_t Stride = K, std::size_t Pad = 0>
using MaxPool2D =
    MaxPool2DG<K == dyn ? pool_geometry_dyn : pool_geometry{K, K, Stride, Stride, Pad, Pad, Pad, Pad, false, true}>;


template <pool_geometry G>
struct layer_traits<MaxPool2DG<G>> : layer_defaults {
  using L = MaxPool2DG<G>;
  static constexpr std::string_view name = "MaxPool2D";
  /// The maximum over each window of geometry_of (core/properties.hpp).
  static constexpr pool_reduce pool_reduction = pool_reduce::max;
  /// int8 (core/properties.hpp): the max of the codes (quantisation is monotone, the scale stays).
  static void int8_forward(const L& l, shape in, shape out, std::size_t batch, const std::int8_t* x, std::int8_t* y,
                           int) {
    const pool_geometry g = geometry_of(&l);
    for (std::size_t s = 0; s < batch; ++s)
      kernels::max_pool_s8(x + s * in.size(), in[0], in[1], in[2], g, out[1], out[2], y + s * out.size());
  }
  static constexpr pool_geometry geometry_of(const L* l) {
    if constexpr (G.is_dynamic())
      return l->geometry;
    else
      return (void)l, G;
  }

  static constexpr shape_check infer(shape in) {
    return detail::pool_infer(G, in, "MaxPool2D needs an image input [C,H,W] (rank 3)",
                              "MaxPool2D: the window is larger than the padded input");
  }
  static shape output_shape(const L& l, shape in) { return detail::pool_output_shape(geometry_of(&l), in, name); }

  /// One arg-max index per output.
  static constexpr std::size_t cache_size(const L*, shape, shape out) { return out.size(); }
  /// Work space of detail::max_pool_plane (one block of planes at a time) or max_pool_values.
  static constexpr std::size_t scratch_size(const L* l, shape in, shape out, std::size_t) {
    const std::size_t pb = detail::max_pool_planes_per_block(geometry_of(l), in[1], out[1], out[2]);
    return std::max(detail::max_pool_work(in[2], pb * out[1], out[2]),
                    detail::max_pool_values_work(in[1], geometry_of(l), out[2]));
  }

  template <class T>
  static void forward(const L& l, const forward_args<T>& a) {
    if constexpr (std::is_floating_point_v<T>)
      forward_fast(l, a);
    else
      plain_loops(l, a.batch, a.in, a.out, a.x, a.y, static_cast<T*>(nullptr), static_cast<const T*>(nullptr));
  }
  template <class T>
  static void backward(const L& l, const backward_args<T>& a, L*) {
    if constexpr (std::is_floating_point_v<T>) {
      backward_fast(l, a);
    } else if (a.dx) {
      std::fill(a.dx, a.dx + a.batch * a.in.size(), T(0));
      plain_loops(l, a.batch, a.in, a.out, a.x, static_cast<T*>(nullptr), a.dx, a.dy);
    }
  }

 private:
  /// Any scalar (e.g. exact rationals in tests): plain loops, the first maximum wins.  Writes y
  /// (if y) and adds dy to dx at each arg-max (if dx).
  template <class T>
  static void plain_loops(const L& l, std::size_t batch, shape in, shape out, const T* x, T* y, T* dx, const T* dy) {
    const pool_geometry g = geometry_of(&l);
    const std::size_t C = in[0], H = in[1], W = in[2], OH = out[1], OW = out[2], P = OH * OW;
    for (std::size_t pl = 0; pl < batch * C; ++pl)
      for (std::size_t oh = 0; oh < OH; ++oh)
        for (std::size_t ow = 0; ow < OW; ++ow) {
          const std::ptrdiff_t r0 = std::ptrdiff_t(oh * g.stride_h) - std::ptrdiff_t(g.pad_top);
          const std::ptrdiff_t c0 = std::ptrdiff_t(ow * g.stride_w) - std::ptrdiff_t(g.pad_left);
          std::size_t arg = 0;
          bool any = false;
          for (std::ptrdiff_t r = std::max<std::ptrdiff_t>(r0, 0); r < std::min<std::ptrdiff_t>(r0 + std::ptrdiff_t(g.kh), std::ptrdiff_t(H)); ++r)
            for (std::ptrdiff_t c = std::max<std::ptrdiff_t>(c0, 0); c < std::min<std::ptrdiff_t>(c0 + std::ptrdiff_t(g.kw), std::ptrdiff_t(W)); ++c) {
              const std::size_t i = pl * H * W + std::size_t(r) * W + std::size_t(c);
              if (!any || x[i] > x[arg]) arg = i, any = true;
            }
          const std::size_t o = pl * P + oh * OW + ow;
          if (y) y[o] = x[arg];
          if (dx) dx[arg] += dy[o];
        }
  }

  template <class T>
  static void forward_fast(const L& l, const forward_args<T>& a) {
    const pool_geometry g = geometry_of(&l);
    const std::size_t C = a.in[0], H = a.in[1], W = a.in[2], OH = a.out[1], OW = a.out[2], P = OH * OW;
    const std::size_t planes = a.batch * C, pb = detail::max_pool_planes_per_block(g, H, OH, OW);
    const bool cache = a.cache && detail::index_exact_in<T>(H * W);
    if (!cache && detail::max_pool_values_pays(OW)) return detail::max_pool_values(a.x, planes, H, W, g, OH, OW, a.y, a.scratch);
#if defined(__AVX512F__)
    if constexpr (detail::max_pool_2x2_vectorised<T>())
      if (detail::max_pool_is_2x2(g, H, W, OH, OW)) {
        for (std::size_t pl = 0; pl < planes; ++pl)
          detail::max_pool_2x2_plane(a.x + pl * H * W, W, OH, OW, a.y + pl * P, cache ? a.cache + pl * P : nullptr);
        return;
      }
#endif
    for (std::size_t p0 = 0; p0 < planes; p0 += pb) {
      const std::size_t np = std::min(pb, planes - p0);
      T* y = a.y + p0 * P;
      if (cache) {
        T* ci = a.cache + p0 * P;
        detail::max_pool_plane(a.x + p0 * H * W, np, H, W, g, OH, OW, a.scratch,
                               [&](std::size_t o, std::size_t, std::size_t i, T v) {
                                 y[o] = v;
                                 ci[o] = T(i);
                               });
      } else {
        detail::max_pool_plane(a.x + p0 * H * W, np, H, W, g, OH, OW, a.scratch,
                               [&](std::size_t o, std::size_t, std::size_t, T v) { y[o] = v; });
      }
    }
  }

  template <class T>
  static void backward_fast(const L& l, const backward_args<T>& a) {
    if (!a.dx) return;
    const pool_geometry g = geometry_of(&l);
    const std::size_t C = a.in[0], H = a.in[1], W = a.in[2], OH = a.out[1], OW = a.out[2], P = OH * OW;
    const std::size_t planes = a.batch * C;
    std::fill(a.dx, a.dx + planes * H * W, T(0));
    if (a.cache && detail::index_exact_in<T>(H * W)) {
      for (std::size_t pl = 0; pl < planes; ++pl) {
        T* dx = a.dx + pl * H * W;
        const T* dy = a.dy + pl * P;
        const T* ci = a.cache + pl * P;
        for (std::size_t o = 0; o < P; ++o) dx[std::size_t(ci[o])] += dy[o];
      }
      return;
    }
#if defined(__AVX512F__)
    if constexpr (detail::max_pool_2x2_vectorised<T>())
      if (detail::max_pool_is_2x2(g, H, W, OH, OW) && detail::index_exact_in<T>(H * W)) {
        T* idx = a.scratch;  // P arg-max indices of one plane
        for (std::size_t pl = 0; pl < planes; ++pl) {
          detail::max_pool_2x2_plane(a.x + pl * H * W, W, OH, OW, nullptr, idx);
          T* dx = a.dx + pl * H * W;
          const T* dy = a.dy + pl * P;
          for (std::size_t o = 0; o < P; ++o) dx[std::size_t(idx[o])] += dy[o];
        }
        return;
      }
#endif
    const std::size_t pb = detail::max_pool_planes_per_block(g, H, OH, OW);
    for (std::size_t p0 = 0; p0 < planes; p0 += pb) {
      T* dx = a.dx + p0 * H * W;
      const T* dy = a.dy + p0 * P;
      detail::max_pool_plane(a.x + p0 * H * W, std::min(pb, planes - p0), H, W, g, OH, OW, a.scratch,
                             [&](std::size_t o, std::size_t p, std::size_t i, T) { dx[p * H * W + i] += dy[o]; });
    }
  }
};

template <pool_geometry G>
struct dynamic_form<MaxPool2DG<G>> {
  using type = MaxPool2DG<pool_geometry_dyn>;
  static type to_dynamic(const MaxPool2DG<G>& l) { return type{layer_traits<MaxPool2DG<G>>::geometry_of(&l)}; }
  static MaxPool2DG<G> from_dynamic(const type& d, const std::string& where) {
    MaxPool2DG<G> l;
    pool_geometry dg = d.geometry;
    dg.count_include_pad = true;  // no meaning for max pooling
    if constexpr (G.is_dynamic()) {
      l.geometry = d.geometry;
    } else if (!(dg == G)) {
      throw shape_error(detail::concat(where, ": MaxPool2D geometry differs from the static type (window ", d.geometry.kh,
                                       "x", d.geometry.kw, " vs ", G.kh, "x", G.kw, "; stride ", d.geometry.stride_h, ",",
                                       d.geometry.stride_w, " vs ", G.stride_h, ",", G.stride_w, "; padding ",
                                       d.geometry.pad_top, ",", d.geometry.pad_left, ",", d.geometry.pad_bottom, ",",
                                       d.geometry.pad_right, " vs ", G.pad_top, ",", G.pad_left, ",", G.pad_bottom, ",",
                                       G.pad_right, "; ceil_mode ", d.geometry.ceil_mode, " vs ", G.ceil_mode, ")"));
    }
    return l;
  }
};

/// ExactLine: per channel and window, the points where the window's arg-max changes along the
/// segment (the upper-envelope walk, kernels/envelope.hpp).  Padding is never a candidate.  With
/// `floor` (a fused ReLU or max(x, c) next to the pool) the constant joins every window.
/// for_each_window(l, in, f) calls f(const std::size_t* idx, std::size_t n) with the flat input
/// indices of each output's candidates (also used by the plane restriction).
template <pool_geometry G>
struct pwl_rule<MaxPool2DG<G>> {
  using L = MaxPool2DG<G>;
  template <class F>
  static void for_each_window(const L& l, shape in, F&& f) {
    const pool_geometry g = layer_traits<L>::geometry_of(&l);
    const std::size_t C = in[0], H = in[1], W = in[2], OH = g.out_h(H), OW = g.out_w(W);
    thread_local std::vector<std::size_t> idx;  // called per piece of every line: no allocation
    idx.reserve(g.kh * g.kw);
    for (std::size_t c = 0; c < C; ++c)
      for (std::size_t oh = 0; oh < OH; ++oh) {
        const std::ptrdiff_t r0 = std::ptrdiff_t(oh * g.stride_h) - std::ptrdiff_t(g.pad_top);
        const std::size_t h0 = std::size_t(std::max<std::ptrdiff_t>(r0, 0));
        const std::size_t h1 = std::size_t(std::min<std::ptrdiff_t>(r0 + std::ptrdiff_t(g.kh), std::ptrdiff_t(H)));
        for (std::size_t ow = 0; ow < OW; ++ow) {
          const std::ptrdiff_t c0 = std::ptrdiff_t(ow * g.stride_w) - std::ptrdiff_t(g.pad_left);
          const std::size_t w0 = std::size_t(std::max<std::ptrdiff_t>(c0, 0));
          const std::size_t w1 = std::size_t(std::min<std::ptrdiff_t>(c0 + std::ptrdiff_t(g.kw), std::ptrdiff_t(W)));
          idx.clear();
          for (std::size_t h = h0; h < h1; ++h)
            for (std::size_t w = w0; w < w1; ++w) idx.push_back(c * H * W + h * W + w);
          if (!idx.empty()) f(idx.data(), idx.size());
        }
      }
  }
  template <class R, class T>
  static void breaks(const L& l, shape in, const T* a, const T* b, const std::optional<T>& floor, std::vector<R>& out) {
    for_each_window(l, in, [&](const std::size_t* idx, std::size_t n) {
      exactline::envelope_breaks<R, T>(
          n, [&](std::size_t k) { return std::pair<T, T>(a[idx[k]], b[idx[k]]); }, floor, out);
    });
  }
};

/// NNSlicer: per channel, channel c of the output comes from channel c of the input: (c, -, Δx_c);
/// per element, only the window's arg-max (the first maximum) contributes: (argmax, -, Δx_argmax).
template <pool_geometry G>
struct sign_rule<MaxPool2DG<G>> {
  using L = MaxPool2DG<G>;
  static void items(const L& l, const sign_ctx& c, std::size_t n, std::vector<sign_item>& out) {
    if (!c.element) {
      out.push_back({n, sign_item::none, c.dx[n]});
      return;
    }
    const pool_geometry g = layer_traits<L>::geometry_of(&l);
    const std::size_t H = c.in[1], W = c.in[2], OH = c.out[1], OW = c.out[2];
    const std::size_t ch = n / (OH * OW), p = n % (OH * OW), oh = p / OW, ow = p % OW;
    const std::ptrdiff_t r0 = std::ptrdiff_t(oh * g.stride_h) - std::ptrdiff_t(g.pad_top);
    const std::ptrdiff_t c0 = std::ptrdiff_t(ow * g.stride_w) - std::ptrdiff_t(g.pad_left);
    std::size_t arg = std::size_t(-1);
    for (std::ptrdiff_t r = std::max<std::ptrdiff_t>(r0, 0); r < std::min<std::ptrdiff_t>(r0 + std::ptrdiff_t(g.kh), std::ptrdiff_t(H)); ++r)
      for (std::ptrdiff_t q = std::max<std::ptrdiff_t>(c0, 0); q < std::min<std::ptrdiff_t>(c0 + std::ptrdiff_t(g.kw), std::ptrdiff_t(W)); ++q) {
        const std::size_t i = ch * H * W + std::size_t(r) * W + std::size_t(q);
        if (arg == std::size_t(-1) || c.x[i] > c.x[arg]) arg = i;
      }
    if (arg != std::size_t(-1)) out.push_back({arg, sign_item::none, c.dx[arg]});
  }
};

/// LRP: winner-take-all; an output's relevance goes to its window's maximum, ties split equally
/// (kernels::max_pool_relevance per plane: the thrust LRP step's too).
template <pool_geometry G>
struct relevance_rule<MaxPool2DG<G>> {
  using L = MaxPool2DG<G>;
  static void relevance(const L& l, const relevance_args& a) {
    const kernels::window_dims d = kernels::window_of(layer_traits<L>::geometry_of(&l), a.in, a.out);
    for (std::size_t c = 0; c < d.C; ++c)
      kernels::max_pool_relevance(d, a.x + c * d.H * d.W, a.r_out + c * d.OH * d.OW, a.r_in + c * d.H * d.W);
  }
};

// ---- io forms: codegen spelling, ONNX MaxPool both ways (pool_forms.hpp)
template <>
struct codegen_rule<MaxPool2D<dyn>> : detail::codegen_fields<MaxPool2D<dyn>> {
  static std::string type(const MaxPool2D<dyn>& l, codegen_context&) {
    const std::string sq = detail::codegen_pool_square(l.geometry);
    return sq.empty() ? "nnlens::MaxPool2DG<" + detail::codegen_pool_full(l.geometry) + ">"
                      : "nnlens::MaxPool2D<" + sq + ">";
  }
};
template <>
struct onnx_export_rule<MaxPool2D<dyn>> {
  static std::string emit(const MaxPool2D<dyn>& l, onnx_sink& s, const std::string& x, shape, shape) {
    return s.node("MaxPool", {x}, detail::onnx_pool_attrs(l.geometry));
  }
};
template <>
struct onnx_import_rule<MaxPool2D<dyn>> {
  static constexpr std::string_view ops[] = {"MaxPool"};
  template <class Emit>
  static void build(onnx_node_view& n, Emit&& emit) {
    MaxPool2D<dyn> p;
    p.geometry = detail::onnx_pool_geometry(n);
    if (n.padded()) n.fail("zero padding from a Pad node before MaxPool is not supported (MaxPool pads with -inf)");
    emit(std::move(p));
  }
};

}  // namespace nnlens
