// nnlens/layers/global_avg_pool.hpp -- GlobalAvgPool: [C, H, W] -> [C, 1, 1], each channel's mean.
//
// ONNX GlobalAveragePool (PyTorch: AdaptiveAvgPool2d(1)).  The output keeps rank 3, as ONNX's
// does; put a Flatten after it before a Dense.  Weightless and shape-agnostic in H and W: it is its
// own dynamic form.
// requires: a rank-3 input.
// ensures:  y[c] = sum(x[c]) / (H*W), summed in row-major order; backward: dx[c] = dy[c] / (H*W).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "nnlens/core/codegen_form.hpp"
#include "nnlens/core/onnx_form.hpp"
#include "nnlens/core/properties.hpp"
#include "nnlens/core/traits.hpp"
#include "nnlens/kernels/conv.hpp"
#include "nnlens/kernels/pool_relevance.hpp"
#include "nnlens/kernels/window.hpp"

namespace nnlens {

struct GlobalAvgPool {};

template <>
struct layer_traits<GlobalAvgPool> : layer_defaults {
  static constexpr std::string_view name = "GlobalAvgPool";
  /// One mean window per plane (core/properties.hpp, PoolingWindow): the thrust backend's
  /// average-pool kernels run it, summing row by row over H x W as forward below.
  static constexpr pool_reduce pool_reduction = pool_reduce::mean;
  static constexpr pool_geometry geometry_of(const GlobalAvgPool*, shape in) {
    return pool_geometry{.kh = in[1], .kw = in[2], .stride_h = in[1], .stride_w = in[2]};
  }
  static constexpr shape_check infer(shape in) {
    if (in.rank != 3) return {{}, "GlobalAvgPool needs an image input [C,H,W] (rank 3)"};
    return {shape(in[0], 1, 1), nullptr};
  }
  static shape output_shape(const GlobalAvgPool&, shape in) {
    if (in.rank != 3) throw shape_error(detail::concat("GlobalAvgPool needs an image input [C,H,W], got ", in.str()));
    if (in[1] == 0 || in[2] == 0) throw shape_error(detail::concat("GlobalAvgPool: empty input plane ", in.str()));
    return shape(in[0], 1, 1);
  }

  template <class T>
  static void forward(const GlobalAvgPool&, const forward_args<T>& a) {
    const std::size_t planes = a.batch * a.in[0], n = a.in[1] * a.in[2];
    const T area = T(n);
    // eight planes at a time, each summed in its own order (the same sums as one plane at a time):
    // one plane's chain of dependent adds ran at 2.5 GB/s, a quarter of a copy beyond the caches
    constexpr std::size_t K = 8;
    std::size_t p0 = 0;
    for (; p0 + K <= planes; p0 += K) {
      T s[K] = {};
      const T* x = a.x + p0 * n;
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t k = 0; k < K; ++k) s[k] += x[k * n + i];
      for (std::size_t k = 0; k < K; ++k) a.y[p0 + k] = s[k] / area;
    }
    for (std::size_t p = p0; p < planes; ++p) {
      const T* x = a.x + p * n;
      T s = T(0);
      for (std::size_t i = 0; i < n; ++i) s += x[i];
      a.y[p] = s / area;
    }
  }
  template <class T>
  static void backward(const GlobalAvgPool&, const backward_args<T>& a, GlobalAvgPool*) {
    if (!a.dx) return;
    const std::size_t planes = a.batch * a.in[0], n = a.in[1] * a.in[2];
    for (std::size_t p = 0; p < planes; ++p) {
      const T d = a.dy[p] / T(n);
      T* dx = a.dx + p * n;
      for (std::size_t i = 0; i < n; ++i) dx[i] = d;
    }
  }
};

/// ExactLine: affine, never splits a segment.
template <>
struct pwl_rule<GlobalAvgPool> : pwl_affine_rule {};

/// NNSlicer: channel c of the output averages channel c of the input: one item (c, -, Δx_c) per
/// channel; per element, one item per input element, Δx_i / (H W).
template <>
struct sign_rule<GlobalAvgPool> {
  static void items(const GlobalAvgPool&, const sign_ctx& c, std::size_t n, std::vector<sign_item>& out) {
    if (!c.element) {
      out.push_back({n, sign_item::none, c.dx[n]});
      return;
    }
    const std::size_t hw = c.in[1] * c.in[2];
    for (std::size_t i = n * hw; i < (n + 1) * hw; ++i) out.push_back({i, sign_item::none, c.dx[i] / double(hw)});
  }
};

/// LRP: channel c's mean, a linear layer with weights 1 / (H W): the proportional rule.
template <>
struct relevance_rule<GlobalAvgPool> {  // kernels::mean_pool_relevance per plane, as AvgPool2D's
  static void relevance(const GlobalAvgPool& l, const relevance_args& a) {
    const kernels::window_dims d = kernels::window_of(pooling_windows(l, a.in), a.in, a.out);
    const std::size_t P = d.H * d.W;
    for (std::size_t c = 0; c < d.C; ++c) kernels::mean_pool_relevance(d, a.x + c * P, a.z + c, a.r_out + c, a.r_in + c * P, *a.o);
  }
};


// ---- io forms: codegen spelling, ONNX GlobalAveragePool both ways
template <>
struct codegen_rule<GlobalAvgPool> : detail::codegen_plain<GlobalAvgPool> {};
template <>
struct onnx_export_rule<GlobalAvgPool> : detail::onnx_unary_rule<GlobalAvgPool> {
  static constexpr std::string_view op = "GlobalAveragePool";
};
/// GlobalAveragePool, and ReduceMean over the two spatial axes of an NCHW image (torch's
/// x.mean([2, 3]), MnasNet's head): the same means; keepdims = 0 gives the logical [C] (the
/// storage stays [C,1,1], as after Flatten's reading).  The axes are an attribute up to opset 17
/// and the second input from opset 18; ReduceMean over other axes is refused, naming them.
template <>
struct onnx_import_rule<GlobalAvgPool> {
  static constexpr std::string_view ops[] = {"GlobalAveragePool", "ReduceMean"};
  template <class Emit>
  static void build(onnx_node_view& n, Emit&& emit) {
    n.require_image();
    if (n.op() == "ReduceMean") {
      std::vector<std::int64_t> axes;
      if (n.opset() >= 18 && n.has_input(1)) {
        for (double v : n.constant(1).values) axes.push_back(std::int64_t(v));
      } else {
        axes = n.attr_ints("axes");
      }
      const std::int64_t r = 3 + (n.batch_axis() ? 1 : 0);
      for (auto& a : axes) a = a < 0 ? a + r : a;
      std::sort(axes.begin(), axes.end());
      if (axes != std::vector<std::int64_t>{r - 2, r - 1})
        n.fail("ReduceMean over axes " + onnx_node_view::dims_str(axes) +
               " is not supported (only the spatial axes of an NCHW image: the mean per channel)");
      emit(GlobalAvgPool{});
      if (n.attr_i("keepdims", 1) == 0) n.set_output_dims({std::int64_t(n.input_dims()[0])});
      return;
    }
    emit(GlobalAvgPool{});
  }
};

}  // namespace nnlens
