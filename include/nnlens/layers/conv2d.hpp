// nnlens/layers/conv2d.hpp -- 2-D convolution (cross-correlation, as PyTorch and ONNX define it).
//
//   Conv2D<Out, K, Stride = 1, Pad = 0, Dilation = 1, Groups = 1, T = float>
//       square K x K kernel, the same stride / dilation on both axes, symmetric padding.
//   Conv2DG<Out, conv_geometry{...}, T = float>
//       the general form: rectangular kernel, per-axis strides and dilations, asymmetric padding
//       (top, left, bottom, right), groups (depthwise: groups == input channels).  Conv2D is an
//       alias of it.  See kernels/conv.hpp for conv_geometry.
//   Conv2D<dyn> == Conv2DG<dyn, conv_geometry_dyn, T>
//       the run-time form DynamicNetwork stores: the geometry is the member `geometry`, the
//       output channels come from W.  (Out may be static with a run-time geometry: Conv2D<6, dyn>.)
//
// Data: W [out, in/groups, kh, kw] (PyTorch/ONNX layout), b [out].  Input [C, H, W], output
// [Out, OH, OW], OH = floor((H + pad_top + pad_bottom - dilation_h*(kh-1) - 1) / stride_h) + 1.
// requires: rank-3 input; C and Out divisible by groups; the dilated kernel fits the padded input
//           (static messages from infer, shape_error naming what is wrong from output_shape).
// ensures:  forward, by plan (detail::make_conv_plan, from the shapes and the batch only):
//             - stride 1 with <= 16 output channels per group and output rows >= 16 wide: a direct
//               register-tiled kernel on zero-padded input planes (kernels::conv_direct);
//             - otherwise depthwise (one input channel per group, groups > 1): kernels::depthwise_conv
//               on the planes themselves;
//             - otherwise grouped, at least 4 groups of one or two vectors of output channels
//               (RegNet's 16): kernels::grouped_conv, channels last, four groups' accumulators at
//               a time;
//             - otherwise W_g[Out/g, C/g*kh*kw] x col[C/g*kh*kw, columns], the bias added as the
//               tiles are stored: kernels::conv_planes (rows wide against the kernel's extra
//               columns) reads im2col from zero-padded planes, kernels::conv_gemm (the rest)
//               builds it inside the GEMM's packing; the two give the same bits.  Several samples side by
//               side in `columns` when a plane is small (squeeze-excitation's [C, 1, 1]), so the
//               GEMMs stay wide; with detail::intra_op_pool() (forward(execution::par) at a batch
//               below its threads) columns or output channels split over the threads, same bits.
//           backward: dx = col2im(W_g^T dy_g); dW += dy_g col^T (kernels::gemm_nt: dot products
//           along the long pixel axis); db += sum dy.  Scratch comes from scratch_size (a
//           compile-time constant for a static layer); nothing is allocated except the backward
//           GEMM's own packing buffers, which grow once.  Deterministic: the summation order depends only on
//           the shapes and the batch, so the static and the run-time forms agree bit for bit.
#pragma once

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "nnlens/core/tensor.hpp"
#include "nnlens/core/codegen_form.hpp"
#include "nnlens/core/thread_pool.hpp"
#include "nnlens/core/traits.hpp"
#include "nnlens/core/onnx_form.hpp"
#include "nnlens/kernels/depthwise.hpp"
#include "nnlens/kernels/conv_gemm.hpp"    // and kernels/conv.hpp, kernels/gemm.hpp
#include "nnlens/kernels/conv_planes.hpp"
#include "nnlens/kernels/grouped_conv.hpp"
#include "nnlens/layers/conv_plan.hpp"  // detail::make_conv_plan: how forward and backward run
#include "nnlens/core/dynamic_form.hpp"

namespace nnlens {

/// The general convolution.  Data-only: W [out, in/groups, kh, kw], b [out].
template <std::size_t Out, conv_geometry G, class T = float>
struct Conv2DG {
  static_assert(G.invalid() == nullptr, "Conv2D: kernel, strides, dilations and groups must all be positive");
  static_assert(Out == dyn || Out % G.groups == 0, "Conv2D: the output channels must be divisible by groups");
  static_assert(Out != 0, "Conv2D: at least one output channel");
  using scalar_type = T;
  static constexpr std::size_t out_channels = Out;
  static constexpr conv_geometry geometry = G;
  tensor<T, 4> W;  // [out, in/groups, kh, kw]
  tensor<T, 1> b;  // [out]
  NNLENS_FIELDS(Conv2DG, W, b)
};

/// The run-time-geometry form (DynamicNetwork's alternative when Out == dyn).
template <std::size_t Out, class T>
struct Conv2DG<Out, conv_geometry_dyn, T> {
  using scalar_type = T;
  static constexpr std::size_t out_channels = Out;
  conv_geometry geometry{};
  tensor<T, 4> W;  // [out, in/groups, kh, kw]
  tensor<T, 1> b;  // [out]
  NNLENS_FIELDS(Conv2DG, geometry, W, b)
};

/// Square kernel, equal strides and dilations, symmetric padding.  K == dyn: run-time geometry.
template <std::size_t Out, std::size_t K = dyn, std::size_t Stride = 1, std::size_t Pad = 0, std::size_t Dilation = 1,
          std::size_t Groups = 1, class T = float>
using Conv2D = Conv2DG<Out,
                       K == dyn ? conv_geometry_dyn
                                : conv_geometry{K, K, Stride, Stride, Pad, Pad, Pad, Pad, Dilation, Dilation, Groups},
                       T>;

template <std::size_t Out, conv_geometry G, class T, class U>
struct rebind_scalar<Conv2DG<Out, G, T>, U> {
  using type = Conv2DG<Out, G, U>;
  static type convert(const Conv2DG<Out, G, T>& l) {
    return convert_fields<type>(l);  // core/reflect.hpp (the run-time geometry too)
  }
};

template <std::size_t Out, conv_geometry G, class T>
struct layer_traits<Conv2DG<Out, G, T>> : layer_defaults {
  using L = Conv2DG<Out, G, T>;
  static constexpr std::string_view name = "Conv2D";
  static constexpr int output_channel_axis = 0;  // W is [OC, IC, KH, KW] (core/properties.hpp)
  static constexpr bool dynamic_geometry = G.is_dynamic();
  static constexpr bool accepts_post_op = true;  // forward applies forward_args::post (core/post_op.hpp)

  /// The layer's geometry (a constant for a static layer; l may then be nullptr).
  static constexpr conv_geometry geometry_of(const L* l) {
    if constexpr (dynamic_geometry)
      return l->geometry;
    else
      return (void)l, G;
  }

  static constexpr shape_check infer(shape in) {
    if (in.rank != 3) return {{}, "Conv2D needs an image input [C,H,W] (rank 3)"};
    if constexpr (dynamic_geometry) {
      return {shape(Out, dyn, dyn), nullptr};
    } else {
      if (in[0] != dyn && in[0] % G.groups != 0)
        return {{}, "Conv2D: the input channels must be divisible by groups"};
      const std::size_t oh = G.out_h(in[1]), ow = G.out_w(in[2]);
      if (oh == 0 || ow == 0) return {{}, "Conv2D: the (dilated) kernel is larger than the padded input"};
      return {shape(Out, oh, ow), nullptr};
    }
  }

  static shape output_shape(const L& l, shape in) {
    const conv_geometry g = geometry_of(&l);
    if (in.rank != 3) throw shape_error(detail::concat("Conv2D needs an image input [C,H,W], got ", in.str()));
    if (const char* bad = g.invalid()) throw shape_error(detail::concat("Conv2D: ", bad));
    if (in[0] % g.groups != 0)
      throw shape_error(
          detail::concat("Conv2D: ", in[0], " input channels are not divisible by groups = ", g.groups));
    if (l.W.dimension() != 4)
      throw shape_error(detail::concat("Conv2D: W must have 4 dimensions [out, in/groups, kh, kw], it has ",
                                       l.W.dimension()));
    const std::size_t out = Out == dyn ? l.W.shape(0) : Out;
    if (out == 0 || out % g.groups != 0)
      throw shape_error(detail::concat("Conv2D: ", out, " output channels are not a positive multiple of groups = ",
                                       g.groups));
    const std::size_t cg = in[0] / g.groups;
    if (l.W.shape(0) != out || l.W.shape(1) != cg || l.W.shape(2) != g.kh || l.W.shape(3) != g.kw)
      throw shape_error(detail::concat("Conv2D: W has shape [", l.W.shape(0), ",", l.W.shape(1), ",", l.W.shape(2), ",",
                                       l.W.shape(3), "], expected [", out, ",", cg, ",", g.kh, ",", g.kw,
                                       "] (out, in/groups, kh, kw) for input ", in.str()));
    if (l.b.dimension() != 1 || l.b.size() != out)
      throw shape_error(detail::concat("Conv2D: b has ", l.b.size(), " elements, expected ", out));
    const std::size_t oh = g.out_h(in[1]), ow = g.out_w(in[2]);
    if (oh == 0 || ow == 0)
      throw shape_error(detail::concat("Conv2D: the ", g.span_h(), "x", g.span_w(),
                                       " (dilated) kernel is larger than the padded input ", in.str()));
    return shape(out, oh, ow);
  }

  static constexpr std::size_t scratch_size(const L* l, shape in, shape out, std::size_t batch) {
    return detail::make_conv_plan(geometry_of(l), in, out, batch).scratch();
  }

  template <class Tx>
  static void forward(const L& l, const forward_args<Tx>& a) {
    const conv_geometry g = geometry_of(&l);
    const detail::conv_plan p = detail::make_conv_plan(g, a.in, a.out, a.batch);
    const std::size_t in_n = p.C * p.H * p.W, out_n = p.O * p.P, in_g = p.Cg * p.H * p.W;
    const Tx* Wd = l.W.data();
    const Tx* bd = l.b.data();
    if (p.direct) {
      Tx* wt = a.scratch;  // [G][Kc][Og]: each group's weights transposed
      Tx* xp = a.scratch + p.O * p.Kc;
      for (std::size_t gi = 0; gi < p.G; ++gi)
        for (std::size_t o = 0; o < p.Og; ++o)
          for (std::size_t k = 0; k < p.Kc; ++k) wt[(gi * p.Kc + k) * p.Og + o] = Wd[(gi * p.Og + o) * p.Kc + k];
      for (std::size_t n = 0; n < a.batch; ++n)
        for (std::size_t gi = 0; gi < p.G; ++gi) {
          kernels::pad_planes(a.x + n * in_n + gi * in_g, p.Cg, p.H, p.W, g, xp);
          kernels::conv_direct(xp, p.Cg, wt + gi * p.Kc * p.Og, bd + gi * p.Og, p.Og, g, p.OH, p.OW,
                               a.y + n * out_n + gi * p.Og * p.P);
          if (a.post && gi + 1 == p.G) a.post(a.y + n * out_n, out_n);  // the sample, while in cache
        }
      return;
    }
    if (p.depthwise) {
      Tx* wt = a.scratch;  // the packed weights, then one sample's copies
      const bool packed = kernels::depthwise_channels_last(p.Og, p.kh, p.kw);
      if (packed) kernels::depthwise_pack(Wd, p.C, p.Kc, wt);
      Tx* rest = packed ? wt + p.O * p.Kc : a.scratch;
      for (std::size_t n = 0; n < a.batch; ++n) {
        kernels::depthwise_conv(a.x + n * in_n, p.C, p.H, p.W, g, p.Og, Wd, wt, bd, p.OH, p.OW, a.y + n * out_n, rest);
        if (a.post) a.post(a.y + n * out_n, out_n);
      }
      return;
    }
    if (p.grouped) {
      Tx* wt = a.scratch;
      kernels::grouped_conv_pack(Wd, p.O, p.Cg, p.G, p.kh * p.kw, wt);
      for (std::size_t n = 0; n < a.batch; ++n) {
        kernels::grouped_conv(a.x + n * in_n, p.C, p.H, p.W, g, p.O, wt, bd, p.OH, p.OW, a.y + n * out_n,
                              wt + p.O * p.Kc);
        if (a.post) a.post(a.y + n * out_n, out_n);
      }
      return;
    }
    // dense (and few-group) convolutions: one GEMM per group and chunk of nb samples, im2col inside
    // its packed panels (conv_gemm) or read from padded planes (conv_planes, the same sums)
    Tx* work = a.scratch;
    detail::thread_pool* pool = detail::intra_op_pool();
    auto run = [&](const Tx* x0, std::size_t nbc, const Tx* w0, std::size_t O, const Tx* b0, Tx* y0, Tx* wk,
                   std::size_t lo, std::size_t hi) {
      if (p.planes)
        kernels::conv_planes(x0, in_n, nbc, p.Cg, p.H, p.W, g, p.OH, p.OW, w0, O, b0, y0, out_n, wk, lo, hi);
      else
        kernels::conv_gemm(x0, in_n, nbc, p.Cg, p.H, p.W, g, p.OH, p.OW, w0, O, b0, y0, out_n, wk, lo, hi);
    };
    for (std::size_t n0 = 0; n0 < a.batch; n0 += p.nb) {
      const std::size_t nbc = std::min(p.nb, a.batch - n0);
      const std::size_t N = nbc * p.P, align = kernels::conv_gemm_column_align<Tx>();
      const detail::conv_intra_split split = pool ? detail::conv_intra_parts(p, nbc, pool->size(), align) : detail::conv_intra_split{};
      const std::size_t parts = split.parts;
      for (std::size_t gi = 0; gi < p.G; ++gi) {
        const Tx* x0 = a.x + n0 * in_n + gi * in_g;
        const Tx* w0 = Wd + gi * p.Og * p.Kc;
        const Tx* b0 = bd + gi * p.Og;
        Tx* y0 = a.y + n0 * out_n + gi * p.Og * p.P;
        if (parts == 1) {
          run(x0, nbc, w0, p.Og, b0, y0, work, 0, N);
          continue;
        }
        // one part per thread: a range of whole column tiles, or a slice of whole micro-kernel rows
        // of output channels; either way each output is the same sum as on one thread
        pool->parallel_for(parts, [&](std::size_t c) {
          const std::size_t n = split.by_columns ? N : p.Og;
          const std::size_t unit = split.by_columns ? align : kernels::gemm_impl::gemm_blocking<Tx>::MR;
          const std::size_t lo = detail::conv_intra_start(n, c, parts, unit), hi = detail::conv_intra_start(n, c + 1, parts, unit);
          if (lo == hi) return;
          const std::size_t o0 = split.by_columns ? 0 : lo, o1 = split.by_columns ? p.Og : hi;
          Tx* wk = work;  // part 0: the layer's scratch; the others: their thread's own
          if (c != 0) {
            thread_local std::vector<Tx> own;
            const std::size_t need =
                p.planes ? kernels::conv_planes_scratch<Tx>(nbc, p.Cg, p.H, p.W, g, p.OH, o1 - o0)
                         : kernels::conv_gemm_scratch<Tx>(nbc, p.P, o1 - o0, p.Kc, p.kh * p.kw);
            if (own.size() < need) own.resize(need);
            wk = own.data();
          }
          run(x0, nbc, w0 + o0 * p.Kc, o1 - o0, b0 + o0, y0 + o0 * p.P, wk, split.by_columns ? lo : 0,
              split.by_columns ? hi : N);
        });
      }
      if (a.post) a.post(a.y + n0 * out_n, nbc * out_n);  // the chunk's outputs, while in cache
    }
  }

  template <class Tx>
  static void backward(const L& l, const backward_args<Tx>& a, L* grad) {
    if (!a.dx && !grad) return;
    const conv_geometry g = geometry_of(&l);
    const detail::conv_plan p = detail::make_conv_plan(g, a.in, a.out, a.batch);
    const std::size_t in_n = p.C * p.H * p.W, out_n = p.O * p.P, in_g = p.Cg * p.H * p.W;
    const Tx* Wd = l.W.data();
    Tx* gW = grad ? grad->W.data() : nullptr;
    if (grad) {
      Tx* gb = grad->b.data();
      for (std::size_t n = 0; n < a.batch; ++n)
        for (std::size_t o = 0; o < p.O; ++o) {
          gb[o] += kernels::sum(a.dy + n * out_n + o * p.P, p.P);
        }
    }
    if (p.pointwise) {
      for (std::size_t n = 0; n < a.batch; ++n)
        for (std::size_t gi = 0; gi < p.G; ++gi) {
          const Tx* dyg = a.dy + n * out_n + gi * p.Og * p.P;
          if (grad)
            kernels::gemm_nt<Tx>(p.Og, p.Cg, p.P, dyg, p.P, a.x + n * in_n + gi * in_g, p.P, gW + gi * p.Og * p.Kc,
                                 p.Kc);
          if (a.dx)
            kernels::gemm<Tx>(true, false, p.Cg, p.P, p.Og, Wd + gi * p.Og * p.Kc, p.Kc, dyg, p.P, Tx(0),
                              a.dx + n * in_n + gi * in_g, p.P);
        }
      return;
    }
    if (a.dx) std::fill(a.dx, a.dx + a.batch * in_n, Tx(0));
    Tx* col = a.scratch;
    Tx* tmp = a.scratch + p.col_size();
    for (std::size_t n0 = 0; n0 < a.batch; n0 += p.nb_back) {
      const std::size_t nbc = std::min(p.nb_back, a.batch - n0), ld = nbc * p.P;
      for (std::size_t gi = 0; gi < p.G; ++gi) {
        const Tx* dyg = a.dy + n0 * out_n + gi * p.Og * p.P;
        if (nbc > 1) {  // gather dy of the chunk into [Og, nbc*P]
          for (std::size_t s = 0; s < nbc; ++s)
            for (std::size_t o = 0; o < p.Og; ++o)
              std::copy_n(a.dy + (n0 + s) * out_n + (gi * p.Og + o) * p.P, p.P, tmp + o * ld + s * p.P);
          dyg = tmp;
        }
        if (grad) {
          for (std::size_t s = 0; s < nbc; ++s)
            kernels::im2col(a.x + (n0 + s) * in_n + gi * in_g, p.Cg, p.H, p.W, g, p.OH, p.OW, col + s * p.P, ld);
          kernels::gemm_nt<Tx>(p.Og, p.Kc, ld, dyg, ld, col, ld, gW + gi * p.Og * p.Kc, p.Kc);
        }
        if (a.dx) {
          kernels::gemm<Tx>(true, false, p.Kc, ld, p.Og, Wd + gi * p.Og * p.Kc, p.Kc, dyg, ld, Tx(0), col, ld);
          for (std::size_t s = 0; s < nbc; ++s)
            kernels::col2im(col + s * p.P, ld, p.Cg, p.H, p.W, g, p.OH, p.OW, a.dx + (n0 + s) * in_n + gi * in_g);
        }
      }
    }
  }

  template <class Self>
  static auto parameters(Self& l) {
    using S = std::conditional_t<std::is_const_v<Self>, const T, T>;
    return std::array<std::span<S>, 2>{std::span<S>(l.W.data(), l.W.size()), std::span<S>(l.b.data(), l.b.size())};
  }

  /// The parameter elements of output channel n, f(tensor, element): filter n of W and b[n].
  template <class F>
  static void for_each_neuron_parameter(const L& l, shape, shape, std::size_t n, F&& f) {
    const std::size_t per = l.W.size() / l.W.shape(0);
    for (std::size_t e = n * per; e < (n + 1) * per; ++e) f(std::size_t(0), e);
    f(std::size_t(1), n);
  }
  /// The parameter elements that read input channel c: W[o, c mod (C / groups), :, :] for the
  /// outputs o of c's group.
  template <class F>
  static void for_each_input_parameter(const L& l, shape in, shape out, std::size_t c, F&& f) {
    const conv_geometry g = geometry_of(&l);
    const std::size_t cg = in[0] / g.groups, og = out[0] / g.groups, K = g.kh * g.kw, grp = c / cg, ci = c % cg;
    for (std::size_t o = grp * og; o < (grp + 1) * og; ++o)
      for (std::size_t k = 0; k < K; ++k) f(std::size_t(0), (o * cg + ci) * K + k);
  }

  /// PyTorch's nn.Conv2d default: kaiming_uniform(a = sqrt(5)) for W, i.e. U(-1/sqrt(fan_in),
  /// 1/sqrt(fan_in)) with fan_in = in/groups * kh * kw, and the same bound for b.  W is drawn
  /// first, in row-major order, then b.
  static void init(L& l, shape in, std::mt19937_64& rng) {
    static_assert(Out != dyn, "Conv2D<dyn> cannot be initialised from its type; set W and b");
    const conv_geometry g = geometry_of(&l);
    const std::size_t cg = in[0] / g.groups, fan_in = cg * g.kh * g.kw;
    l.W = tensor<T, 4>::from_shape({Out, cg, g.kh, g.kw});
    l.b = tensor<T, 1>::from_shape({Out});
    const double bound = 1.0 / std::sqrt(double(fan_in));
    std::uniform_real_distribution<double> u(-bound, bound);
    for (auto& w : l.W) w = T(u(rng));
    for (auto& v : l.b) v = T(u(rng));
  }
};

template <std::size_t Out, conv_geometry G, class T>
struct dynamic_form<Conv2DG<Out, G, T>> {
  using type = Conv2DG<dyn, conv_geometry_dyn, T>;
  static type to_dynamic(const Conv2DG<Out, G, T>& l) {
    return type{layer_traits<Conv2DG<Out, G, T>>::geometry_of(&l), l.W, l.b};
  }
  static Conv2DG<Out, G, T> from_dynamic(const type& d, const std::string& where) {
    if constexpr (!G.is_dynamic()) {
      if (!(d.geometry == G))
        throw shape_error(detail::concat(where, ": Conv2D geometry differs from the static type (kernel ", d.geometry.kh,
                                         "x", d.geometry.kw, ", expected ", G.kh, "x", G.kw, "; stride ",
                                         d.geometry.stride_h, ",", d.geometry.stride_w, " vs ", G.stride_h, ",",
                                         G.stride_w, "; padding ", d.geometry.pad_top, ",", d.geometry.pad_left, ",",
                                         d.geometry.pad_bottom, ",", d.geometry.pad_right, " vs ", G.pad_top, ",",
                                         G.pad_left, ",", G.pad_bottom, ",", G.pad_right, "; dilation ",
                                         d.geometry.dilation_h, ",", d.geometry.dilation_w, " vs ", G.dilation_h, ",",
                                         G.dilation_w, "; groups ", d.geometry.groups, " vs ", G.groups, ")"));
    }
    if constexpr (Out != dyn) {
      const std::size_t got = d.W.dimension() == 4 ? d.W.shape(0) : 0;
      if (got != Out)
        throw shape_error(detail::concat(where, ": Conv2D expects ", Out, " output channels, the source has ", got));
    }
    Conv2DG<Out, G, T> l;
    if constexpr (G.is_dynamic()) l.geometry = d.geometry;
    l.W = d.W;
    l.b = d.b;
    return l;
  }
};

/// ExactLine: affine, never splits a segment.
template <std::size_t Out, conv_geometry G, class T>
struct pwl_rule<Conv2DG<Out, G, T>> : pwl_affine_rule {};

namespace detail {
/// f(ci, input, k) for each input element inside the receptive field of output position (oh, ow)
/// in group grp: ci < cg the channel within the group, input the flat index into [C, H, W], k =
/// u * kw + v the weight's kernel offset; positions in the padding are skipped.
template <class F>
void for_each_receptive_input(const conv_geometry& g, std::size_t H, std::size_t W, std::size_t cg, std::size_t grp,
                              std::size_t oh, std::size_t ow, F&& f) {
  for (std::size_t ci = 0; ci < cg; ++ci)
    for (std::size_t u = 0; u < g.kh; ++u) {
      const std::ptrdiff_t ih = std::ptrdiff_t(oh * g.stride_h + u * g.dilation_h) - std::ptrdiff_t(g.pad_top);
      if (ih < 0 || ih >= std::ptrdiff_t(H)) continue;
      for (std::size_t v = 0; v < g.kw; ++v) {
        const std::ptrdiff_t iw = std::ptrdiff_t(ow * g.stride_w + v * g.dilation_w) - std::ptrdiff_t(g.pad_left);
        if (iw < 0 || iw >= std::ptrdiff_t(W)) continue;
        f(ci, (grp * cg + ci) * H * W + std::size_t(ih) * W + std::size_t(iw), u * g.kw + v);
      }
    }
}
}  // namespace detail

/// NNSlicer (docs/specs/nnslicer.md#25-local-items-per-op-type): per channel, output channel o has one item per kernel
/// weight of its group, (input channel c, W[o, c, u, v], W[o, c, u, v] Δx_c); per element, output
/// element (o, oh, ow) has one item per weight whose input position lies inside the input.
/// Synapse = flat index into W [out, in/groups, kh, kw].
template <std::size_t Out, conv_geometry G, class T>
struct sign_rule<Conv2DG<Out, G, T>> {
  using L = Conv2DG<Out, G, T>;
  static std::size_t synapses(const L& l) { return l.W.size(); }
  static constexpr std::size_t bias_parameter = 1;  // parameters()[1]: one bias per output channel
  static void items(const L& l, const sign_ctx& c, std::size_t n, std::vector<sign_item>& out) {
    const conv_geometry g = layer_traits<L>::geometry_of(&l);
    const std::size_t C = c.in[0], H = c.in[1], W = c.in[2], O = c.out[0], OH = c.out[1], OW = c.out[2];
    const std::size_t cg = C / g.groups, og = O / g.groups, K = g.kh * g.kw;
    const std::size_t o = c.element ? n / (OH * OW) : n, grp = o / og;
    const T* w = l.W.data() + o * cg * K;
    if (!c.element) {
      for (std::size_t ci = 0; ci < cg; ++ci)
        for (std::size_t k = 0; k < K; ++k)
          out.push_back({grp * cg + ci, (o * cg + ci) * K + k, double(w[ci * K + k]) * c.dx[grp * cg + ci]});
      return;
    }
    const std::size_t p = n % (OH * OW), oh = p / OW, ow = p % OW;
    detail::for_each_receptive_input(g, H, W, cg, grp, oh, ow, [&](std::size_t ci, std::size_t pred, std::size_t k) {
      out.push_back({pred, (o * cg + ci) * K + k, double(w[ci * K + k]) * c.dx[pred]});
    });
  }
};

/// LRP (core/relevance.hpp): the affine rules per output position over its receptive field
/// (padding reads nothing, so J_k counts the real inputs); a BatchNorm after it folds in.
template <std::size_t Out, conv_geometry G, class T>
struct relevance_rule<Conv2DG<Out, G, T>> {
  using L = Conv2DG<Out, G, T>;
  static constexpr bool accepts_fold = true;
  static void relevance(const L& l, const relevance_args& a) {
    const conv_geometry g = layer_traits<L>::geometry_of(&l);
    const std::size_t C = a.in[0], H = a.in[1], W = a.in[2], O = a.out[0], OH = a.out[1], OW = a.out[2];
    const std::size_t cg = C / g.groups, og = O / g.groups, K = g.kh * g.kw;
    const T* Wd = l.W.data();
    detail::affine_relevance(
        a, OH * OW, [&](std::size_t k) { return l.b(k / (OH * OW)); },
        [&](std::size_t k, auto&& f) {
          const std::size_t o = k / (OH * OW), p = k % (OH * OW), oh = p / OW, ow = p % OW, grp = o / og;
          const T* w = Wd + o * cg * K;
          detail::for_each_receptive_input(g, H, W, cg, grp, oh, ow, [&](std::size_t ci, std::size_t in, std::size_t kk) {
            f(in, double(w[ci * K + kk]));
          });
        });
  }
};


// ---- io forms: the codegen spelling, ONNX export (Conv; imported by io/onnx with pads and bias folding)
template <class T>
struct codegen_rule<Conv2DG<dyn, conv_geometry_dyn, T>> : detail::codegen_fields<Conv2DG<dyn, conv_geometry_dyn, T>> {
  static std::string type(const Conv2DG<dyn, conv_geometry_dyn, T>& l, codegen_context& c) {
    const conv_geometry& g = l.geometry;
    const std::string out = std::to_string(l.W.shape()[0]);
    const bool square = g.kh == g.kw && g.stride_h == g.stride_w && g.dilation_h == g.dilation_w &&
                        g.pad_top == g.pad_left && g.pad_top == g.pad_bottom && g.pad_top == g.pad_right;
    if (square)
      return "nnlens::Conv2D<" + out + ", " +
             (c.scalar() == "float"  // T follows Groups: keep every argument when T is spelled
                  ? detail::codegen_short_list({g.kh, g.stride_h, g.pad_top, g.dilation_h, g.groups}, {dyn, 1, 0, 1, 1})
                  : detail::codegen_list({g.kh, g.stride_h, g.pad_top, g.dilation_h, g.groups})) +
             c.scalar_arg() + ">";
    return "nnlens::Conv2DG<" + out + ", nnlens::conv_geometry{" +
           detail::codegen_list({g.kh, g.kw, g.stride_h, g.stride_w, g.pad_top, g.pad_left, g.pad_bottom, g.pad_right,
                                 g.dilation_h, g.dilation_w, g.groups}) +
           "}" + c.scalar_arg() + ">";
  }
};
/// Conv (kernel_shape, strides, pads [top, left, bottom, right], dilations, group).
template <class T>
struct onnx_export_rule<Conv2DG<dyn, conv_geometry_dyn, T>> {
  static std::string emit(const Conv2DG<dyn, conv_geometry_dyn, T>& l, onnx_sink& s, const std::string& x, shape,
                          shape) {
    const auto& d = l.W.shape();
    const std::string W = s.tensor("conv_W", detail::onnx_i64({d[0], d[1], d[2], d[3]}), l.W);
    const std::string b = s.tensor("conv_b", detail::onnx_i64({l.b.size()}), l.b);
    const conv_geometry& g = l.geometry;
    return s.node("Conv", {x, W, b},
                  {{"kernel_shape", detail::onnx_i64({g.kh, g.kw})},
                   {"strides", detail::onnx_i64({g.stride_h, g.stride_w})},
                   {"pads", detail::onnx_i64({g.pad_top, g.pad_left, g.pad_bottom, g.pad_right})},
                   {"dilations", detail::onnx_i64({g.dilation_h, g.dilation_w})},
                   {"group", std::int64_t(g.groups)}});
  }
};

}  // namespace nnlens
