// nnlens/kernels/window.hpp -- convolution and pooling windows, for every backend: the host's
// layers (layers/avg_pool2d.hpp, layers/global_avg_pool.hpp, kernels/int8.hpp, kernels/pool_relevance.hpp), the thrust kernels
// (thrust/kernels.hpp, thrust/lrp_kernels.hpp, thrust/exactline_kernels.hpp) and generated
// firmware (kernels/freestanding.hpp).
//
//   pool_axis(o, stride, pad_lo, pad_hi, k, in, count_pad)   output o's window along one axis:
//       inputs [lo, hi) inside [0, in) (lo == hi when the window misses the input), and `count`,
//       the mean's divisor factor: the window clipped to the padded input [-pad_lo, in + pad_hi)
//       when count_pad (AvgPool2D's count_include_pad), else hi - lo
//   window_dims, window_of(geometry, in, out)   a conv_geometry's or pool_geometry's window
//       between an input [C, H, W] and an output [O, OH, OW], as the window kernels read it
//   pool_rows(d, oh), pool_cols(d, ow)          pool_axis of output (oh, ow) in d
//   pool_output<T, Max>(d, x, oh, ow)           one output of a pooling window over plane x:
//       the maximum (the first wins ties; padding never wins) or the mean (the sum row by row
//       over the divisor): AvgPool2D's host forward and both thrust pools
//
// Freestanding (<cstddef> and core/hd.hpp only) and NNLENS_HD: nvcc compiles it for the device.
#pragma once

#include <cstddef>

#include "nnlens/core/hd.hpp"

namespace nnlens::kernels {

struct window_axis {
  std::size_t lo, hi, count;
};

NNLENS_HD constexpr window_axis pool_axis(std::size_t o, std::size_t stride, std::size_t pad_lo, std::size_t pad_hi,
                                          std::size_t k, std::size_t in, bool count_pad) {
  using sidx = std::ptrdiff_t;  // 32 bits on a Cortex-M, 64 on hosts and GPUs
  const sidx start = sidx(o * stride) - sidx(pad_lo), end = start + sidx(k);
  const sidx e = end < sidx(in) ? end : sidx(in), pe = end < sidx(in + pad_hi) ? end : sidx(in + pad_hi);
  const std::size_t lo = start < 0 ? 0 : std::size_t(start), hi = e > sidx(lo) ? std::size_t(e) : lo;
  return {lo, hi, count_pad ? std::size_t(pe - start) : hi - lo};
}

/// Geometry of a convolution or a pooling window (any strides, dilations, padding, groups).
struct window_dims {
  std::size_t C = 0, H = 0, W = 0;    // input
  std::size_t O = 0, OH = 0, OW = 0;  // output (O == C for pooling)
  std::size_t kh = 1, kw = 1, sh = 1, sw = 1, pt = 0, pl = 0, dh = 1, dw = 1, groups = 1;
  std::size_t pb = 0, pr = 0;  // bottom / right padding (average pooling's divisor)
  bool count_pad = true;       // average pooling: the divisor counts the padding (count_include_pad)
};

/// The window of geometry g (a conv_geometry, or a pool_geometry: no dilation, no groups) between
/// input `in` [C, H, W] and output `out` [O, OH, OW].
template <class G, class Shape>
constexpr window_dims window_of(const G& g, const Shape& in, const Shape& out) {
  window_dims d;
  d.C = in[0], d.H = in[1], d.W = in[2], d.O = out[0], d.OH = out[1], d.OW = out[2];
  d.kh = g.kh, d.kw = g.kw, d.sh = g.stride_h, d.sw = g.stride_w, d.pt = g.pad_top, d.pl = g.pad_left;
  d.pb = g.pad_bottom, d.pr = g.pad_right;
  if constexpr (requires { g.groups; })
    d.dh = g.dilation_h, d.dw = g.dilation_w, d.groups = g.groups;
  else
    d.count_pad = g.count_include_pad;
  return d;
}

NNLENS_HD inline window_axis pool_rows(const window_dims& d, std::size_t oh) {
  return pool_axis(oh, d.sh, d.pt, d.pb, d.kh, d.H, d.count_pad);
}
NNLENS_HD inline window_axis pool_cols(const window_dims& d, std::size_t ow) {
  return pool_axis(ow, d.sw, d.pl, d.pr, d.kw, d.W, d.count_pad);
}

template <class T, bool Max>
NNLENS_HD T pool_output(const window_dims& d, const T* x, std::size_t oh, std::size_t ow) {
  const window_axis r = pool_rows(d, oh), c = pool_cols(d, ow);
  T m = Max && r.lo < r.hi && c.lo < c.hi ? x[r.lo * d.W + c.lo] : T(0);
  for (std::size_t h = r.lo; h < r.hi; ++h)
    for (std::size_t w = c.lo; w < c.hi; ++w) {
      const T v = x[h * d.W + w];
      if constexpr (Max)
        m = v > m ? v : m;
      else
        m += v;
    }
  return Max ? m : m / T(r.count * c.count);
}

}  // namespace nnlens::kernels
