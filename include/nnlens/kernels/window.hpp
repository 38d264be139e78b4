// nnlens/kernels/window.hpp -- one axis of a pooling window, for every backend: the host's pooling
// layers (layers/avg_pool2d.hpp, kernels/int8.hpp), the thrust kernels (thrust/kernels.hpp,
// thrust/lrp_kernels.hpp, thrust/exactline_kernels.hpp) and generated firmware
// (kernels/freestanding.hpp).
//
//   pool_axis(o, stride, pad_lo, pad_hi, k, in, count_pad)   output o's window along one axis:
//       inputs [lo, hi) inside [0, in) (lo == hi when the window misses the input), and `count`,
//       the mean's divisor factor: the window clipped to the padded input [-pad_lo, in + pad_hi)
//       when count_pad (AvgPool2D's count_include_pad), else hi - lo
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

}  // namespace nnlens::kernels
