// nnlens/layers/conv_plan.hpp -- how Conv2D runs at given shapes and batch: its kernel, how it
// cuts the batch, how threads split it, and the scratch each part needs (layers/conv2d.hpp).
//
//   detail::make_conv_plan(g, in, out, batch)   the plan (from the shapes and the batch only)
#pragma once

#include <algorithm>
#include <cstddef>

#include "nnlens/core/shape.hpp"
#include "nnlens/kernels/conv_gemm.hpp"    // and kernels/conv.hpp, kernels/gemm.hpp
#include "nnlens/kernels/conv_planes.hpp"
#include "nnlens/kernels/depthwise.hpp"
#include "nnlens/kernels/grouped_conv.hpp"

namespace nnlens {

namespace detail {

/// How forward and backward cut a batch: nb (forward) / nb_back (backward) samples side by side in
/// one im2col buffer.
struct conv_plan {
  std::size_t C = 0, H = 0, W = 0, O = 0, OH = 0, OW = 0, Hp = 0, Wp = 0;  // Hp, Wp: padded input
  std::size_t G = 1, Cg = 0, Og = 0, Kc = 0, P = 0, nb = 1, nb_back = 1, kh = 1, kw = 1;
  conv_geometry geometry{};
  bool pointwise = false;  // 1x1, stride 1, no padding: x is its own im2col
  bool direct = false;     // forward by kernels::conv_direct (stride 1, few channels, wide rows)
  bool depthwise = false;  // forward by kernels::depthwise_conv (one input channel per group)
  bool grouped = false;    // forward by kernels::grouped_conv (a few channels per group)
  bool planes = false;     // forward by kernels::conv_planes (kernels::conv_planes_takes), else conv_gemm
  /// backward (not 1x1 unpadded of stride 1): im2col of nb_back samples, and dy gathered beside
  constexpr std::size_t col_size() const { return pointwise ? 0 : Kc * nb_back * P; }
  constexpr std::size_t tmp_size() const { return !pointwise && nb_back > 1 ? Og * nb_back * P : 0; }
  /// forward by kernels::conv_gemm: its packed panels for nb samples (for float and for double)
  constexpr std::size_t gemm_size() const {
    if (direct || depthwise || grouped) return 0;
    if (planes)
      return std::max(kernels::conv_planes_scratch<float>(nb, Cg, H, W, geometry, OH, Og),
                      kernels::conv_planes_scratch<double>(nb, Cg, H, W, geometry, OH, Og));
    return std::max(kernels::conv_gemm_scratch<float>(nb, P, Og, Kc, kh * kw),
                    kernels::conv_gemm_scratch<double>(nb, P, Og, Kc, kh * kw));
  }
  /// forward by conv_direct: transposed weights, then one group's padded input planes
  constexpr std::size_t direct_size() const { return direct ? O * Kc + Cg * Hp * Wp : 0; }
  /// depthwise / grouped: the packed weights, then one sample's channels-last copies
  constexpr std::size_t depthwise_size() const {
    if (!depthwise || !kernels::depthwise_channels_last(Og, kh, kw)) return 0;
    return O * kh * kw + kernels::depthwise_scratch(C, H, W, geometry, Og, OH, OW);
  }
  constexpr std::size_t grouped_size() const {
    return grouped ? O * Kc + kernels::grouped_conv_scratch(C, H, W, O, OH, OW) : 0;
  }
  constexpr std::size_t scratch() const {
    return std::max({col_size() + tmp_size(), direct_size(), depthwise_size(), grouped_size(), gemm_size()});
  }
};

/// Aim for GEMMs at least this many columns wide (forward: more samples per GEMM; backward: the
/// weight gradient's dot products get longer) ...
inline constexpr std::size_t conv_target_columns = 512;
inline constexpr std::size_t conv_target_columns_back = 2048;
/// ... backward with at most this many scalars in the chunk's im2col buffer, unless one sample
/// needs more (forward has no such buffer: conv_chunk's Kc is 0 there, no cap).
inline constexpr std::size_t conv_max_col_scalars = std::size_t(1) << 20;
/// Forward without im2col (kernels::conv_direct) for stride-1 convolutions with at most this many
/// output channels per group and output rows at least this wide (>= any vector width): there the
/// GEMM is too thin to pay for the im2col copies.
inline constexpr std::size_t conv_direct_max_out = 16;
inline constexpr std::size_t conv_direct_min_width = 16;

/// Within-layer threads (detail::intra_op_pool(), a batch smaller than the pool): how a GEMM-form
/// convolution of nb samples splits over `threads` threads.  By columns (output positions, in
/// ranges of whole tiles: nothing packed twice) where each thread gets at least 4 tiles of `align`
/// columns, else by output channels (whole micro-kernel rows, at least 4 of 6 per slice).  One part
/// below conv_intra_min_macs multiply-adds (a thread's wake-up costs some microseconds).
inline constexpr std::size_t conv_intra_min_macs = std::size_t(1) << 22;
struct conv_intra_split {
  std::size_t parts = 1;
  bool by_columns = false;
};
constexpr conv_intra_split conv_intra_parts(const conv_plan& p, std::size_t nb, std::size_t threads, std::size_t align) {
  if (threads < 2 || p.Og * nb * p.P * p.Kc < conv_intra_min_macs) return {};
  if (nb * p.P >= 4 * align * threads) return {threads, true};
  return {std::max<std::size_t>(1, std::min(threads, p.Og / 24)), false};
}
/// The start of part c of `parts` over [0, n) in multiples of `unit` (part `parts` ends at n).
constexpr std::size_t conv_intra_start(std::size_t n, std::size_t c, std::size_t parts, std::size_t unit) {
  if (c >= parts) return n;
  return std::min(n, (n * c / parts + unit / 2) / unit * unit);
}

constexpr std::size_t conv_chunk(std::size_t target, std::size_t P, std::size_t Kc, std::size_t batch) {
  if (P == 0 || P >= target || batch <= 1) return 1;
  const std::size_t nb = (target + P - 1) / P;
  const std::size_t cap = Kc == 0 ? nb : std::max<std::size_t>(1, conv_max_col_scalars / (Kc * P));
  return std::max<std::size_t>(1, std::min({nb, cap, batch}));
}

constexpr conv_plan make_conv_plan(const conv_geometry& g, shape in, shape out, std::size_t batch) {
  conv_plan p;
  p.C = in[0];
  p.H = in[1];
  p.W = in[2];
  p.O = out[0];
  p.OH = out[1];
  p.OW = out[2];
  p.Hp = p.H + g.pad_top + g.pad_bottom;
  p.Wp = p.W + g.pad_left + g.pad_right;
  p.G = g.groups;
  p.kh = g.kh;
  p.kw = g.kw;
  p.geometry = g;
  p.Cg = p.C / p.G;
  p.Og = p.O / p.G;
  p.Kc = p.Cg * g.kh * g.kw;
  p.P = p.OH * p.OW;
  p.pointwise = g.is_pointwise();
  p.direct = !p.pointwise && g.stride_h == 1 && g.stride_w == 1 && p.OW >= conv_direct_min_width &&
             p.Og <= conv_direct_max_out;
  p.depthwise = !p.pointwise && !p.direct && p.G > 1 && p.Cg == 1 && g.kw <= kernels::depthwise_max_kw;
  p.planes = !p.direct && !p.depthwise && kernels::conv_planes_takes(g, p.W, p.H, p.G, p.Og);
  p.grouped = !p.pointwise && !p.direct && !p.depthwise && !p.planes && p.G >= 4 && kernels::grouped_conv_takes(p.Og) &&
              g.kh * g.kw <= kernels::grouped_max_taps && g.kw <= kernels::depthwise_max_kw;
  // forward: samples side by side in the GEMM's columns (a pointwise convolution copies its
  // channels there, cheaper than the GEMM's thin panels when a sample's plane is narrow)
  p.nb = conv_chunk(conv_target_columns, p.P, 0, batch);
  if (!p.pointwise) p.nb_back = conv_chunk(conv_target_columns_back, p.P, p.Kc, batch);
  return p;
}

}  // namespace detail

}  // namespace nnlens
