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
#pragma once

#include <algorithm>
#include <cstddef>
#include <limits>
#include <string>

#include "nnlens/core/traits.hpp"
#include "nnlens/kernels/conv.hpp"
#include "nnlens/network/dynamic_form.hpp"

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
};

/// Square window and symmetric padding.  K == dyn: the run-time form.
template <std::size_t K = dyn, std::size_t Stride = K, std::size_t Pad = 0>
using MaxPool2D =
    MaxPool2DG<K == dyn ? pool_geometry_dyn : pool_geometry{K, K, Stride, Stride, Pad, Pad, Pad, Pad, false, true}>;

namespace detail {

/// Arg-max (index h*W + w in the plane) of every output of one [H, W] plane.  Ties: the first
/// maximum in row-major order; NaN beats numbers (the first NaN wins).
template <class T, class F>
void max_pool_plane(const T* x, std::size_t H, std::size_t W, const pool_geometry& g, std::size_t OH, std::size_t OW,
                    F&& emit) {
  for (std::size_t oh = 0; oh < OH; ++oh) {
    const window_bounds r = pool_window(oh, g.stride_h, g.pad_top, g.kh, H);
    for (std::size_t ow = 0; ow < OW; ++ow) {
      const window_bounds c = pool_window(ow, g.stride_w, g.pad_left, g.kw, W);
      std::size_t best_i = r.lo * W + c.lo;
      T best = x[best_i];
      for (std::size_t h = r.lo; h < r.hi; ++h) {
        const T* row = x + h * W;
        for (std::size_t w = c.lo; w < c.hi; ++w) {
          const T v = row[w];
          if (v > best || (v != v && best == best)) {
            best = v;
            best_i = h * W + w;
          }
        }
      }
      emit(oh * OW + ow, best_i, best);
    }
  }
}

template <class T>
constexpr bool index_exact_in(std::size_t n) {
  return n <= (std::size_t(1) << std::min<int>(std::numeric_limits<T>::digits, 62));
}

}  // namespace detail

template <pool_geometry G>
struct layer_traits<MaxPool2DG<G>> : layer_defaults {
  using L = MaxPool2DG<G>;
  static constexpr std::string_view name = "MaxPool2D";
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

  template <class T>
  static void forward(const L& l, const forward_args<T>& a) {
    const pool_geometry g = geometry_of(&l);
    const std::size_t C = a.in[0], H = a.in[1], W = a.in[2], OH = a.out[1], OW = a.out[2];
    const bool cache = a.cache && detail::index_exact_in<T>(H * W);
    for (std::size_t pl = 0; pl < a.batch * C; ++pl) {
      T* y = a.y + pl * OH * OW;
      if (cache) {
        T* ci = a.cache + pl * OH * OW;
        detail::max_pool_plane(a.x + pl * H * W, H, W, g, OH, OW, [&](std::size_t o, std::size_t i, T v) {
          y[o] = v;
          ci[o] = T(i);
        });
      } else {
        detail::max_pool_plane(a.x + pl * H * W, H, W, g, OH, OW, [&](std::size_t o, std::size_t, T v) { y[o] = v; });
      }
    }
  }

  template <class T>
  static void backward(const L& l, const backward_args<T>& a, L*) {
    if (!a.dx) return;
    const pool_geometry g = geometry_of(&l);
    const std::size_t C = a.in[0], H = a.in[1], W = a.in[2], OH = a.out[1], OW = a.out[2];
    std::fill(a.dx, a.dx + a.batch * C * H * W, T(0));
    const bool cache = a.cache && detail::index_exact_in<T>(H * W);
    for (std::size_t pl = 0; pl < a.batch * C; ++pl) {
      T* dx = a.dx + pl * H * W;
      const T* dy = a.dy + pl * OH * OW;
      if (cache) {
        const T* ci = a.cache + pl * OH * OW;
        for (std::size_t o = 0; o < OH * OW; ++o) dx[std::size_t(ci[o])] += dy[o];
      } else {
        detail::max_pool_plane(a.x + pl * H * W, H, W, g, OH, OW,
                               [&](std::size_t o, std::size_t i, T) { dx[i] += dy[o]; });
      }
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

}  // namespace nnlens
