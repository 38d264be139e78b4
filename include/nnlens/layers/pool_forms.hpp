// nnlens/layers/pool_forms.hpp -- the io forms MaxPool2D and AvgPool2D share: the codegen
// spelling of a pool_geometry and the ONNX pooling attributes (export and import).
// requires: core/codegen_form.hpp and core/onnx_form.hpp only (no io/, no protobuf).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "nnlens/core/codegen_form.hpp"
#include "nnlens/core/onnx_form.hpp"
#include "nnlens/kernels/conv.hpp"

namespace nnlens::detail {

/// "K, Stride, Pad" when the pool geometry has the square/symmetric form, else "".
inline std::string codegen_pool_square(const pool_geometry& g) {
  const bool square = g.kh == g.kw && g.stride_h == g.stride_w && g.pad_top == g.pad_left && g.pad_top == g.pad_bottom &&
                      g.pad_top == g.pad_right && !g.ceil_mode;
  return square ? codegen_short_list({g.kh, g.stride_h, g.pad_top}, {dyn, g.kh, 0}) : std::string{};
}
inline std::string codegen_pool_full(const pool_geometry& g) {
  return "nnlens::pool_geometry{" +
         codegen_list({g.kh, g.kw, g.stride_h, g.stride_w, g.pad_top, g.pad_left, g.pad_bottom, g.pad_right}) + ", " +
         (g.ceil_mode ? "true" : "false") + ", " + (g.count_include_pad ? "true" : "false") + "}";
}

/// kernel_shape, strides, pads, ceil_mode (ONNX MaxPool / AveragePool).
inline std::vector<onnx_attr> onnx_pool_attrs(const pool_geometry& g) {
  return {{"kernel_shape", onnx_i64({g.kh, g.kw})},
          {"strides", onnx_i64({g.stride_h, g.stride_w})},
          {"pads", onnx_i64({g.pad_top, g.pad_left, g.pad_bottom, g.pad_right})},
          {"ceil_mode", std::int64_t(g.ceil_mode)}};
}

/// The geometry of an ONNX MaxPool / AveragePool node on an NCHW image (count_include_pad is the
/// caller's); its own pads only (a pending Pad node's padding is the caller's).
inline pool_geometry onnx_pool_geometry(const onnx_node_view& n) {
  n.require_image();
  const auto k = n.attr_ints("kernel_shape");
  if (k.size() != 2 || k[0] < 1 || k[1] < 1 || k[0] > onnx_max_window || k[1] > onnx_max_window)
    n.fail("only 2-D pooling with a positive kernel_shape is supported");
  const auto s = n.attr_ints("strides", {1, 1});
  if (s.size() != 2 || s[0] < 1 || s[1] < 1 || s[0] > onnx_max_window || s[1] > onnx_max_window) n.fail("bad strides");
  for (auto d : n.attr_ints("dilations", {1, 1}))
    if (d != 1) n.fail("dilated pooling is not supported");
  if (n.attr_i("storage_order", 0) != 0) n.fail("storage_order = 1 is not supported");
  pool_geometry g;
  g.kh = std::size_t(k[0]), g.kw = std::size_t(k[1]);
  g.stride_h = std::size_t(s[0]), g.stride_w = std::size_t(s[1]);
  g.ceil_mode = n.attr_i("ceil_mode", 0) != 0;
  const auto p = onnx_window_pads(n, g.kh, g.kw, g.stride_h, g.stride_w, 1, 1);
  g.pad_top = p[0], g.pad_left = p[1], g.pad_bottom = p[2], g.pad_right = p[3];
  return g;
}

}  // namespace nnlens::detail
