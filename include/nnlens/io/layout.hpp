// nnlens/io/layout.hpp -- the layout of a model's input data as its file declares it, and the
// conversions between that layout and the NCHW tensors every nnlens network takes.
//
//   enum class data_layout { none, nchw, nhwc }
//   layout_name(l)             "none" / "nchw" / "nhwc"
//   parse_layout(s, what)      "nchw" | "nhwc" | "none" -> data_layout; io_error naming `what` else
//   declared_sample_shape(internal, l)  the per-sample dims in layout l of an internal (NCHW) input
//                              shape: {C,H,W} -> {H,W,C} for nhwc, unchanged otherwise
//   to_nchw(x, l)              a batch in layout l -> the same values as [N, C, H, W]
//   from_nchw(x, l)            a batch [N, C, H, W] -> the same values in layout l
//
// One place says how a loaded model's declared layout maps to its internal tensors.  nnlens
// networks take images as NCHW ({C,H,W} per sample); io::load_onnx / import_onnx report in
// onnx_info::layout what the file declares:
//   * nchw: a rank-4 input [N,C,H,W] read as is (PyTorch exports);
//   * nhwc: a rank-4 input [N,H,W,C] whose only reader is Transpose(0,3,1,2) (keras2onnx, tf2onnx):
//     the network's input is {C,H,W}; data files hold each sample as h, then w, then c;
//   * none: a flat input ([N,F], [F], [N,a,b] flattened), and .nnet / .nnlw models: rows are read as
//     the flat (row-major) internal order, as before layouts were declared.
// Conversions for none and nchw return the input unchanged (a copy).  For nhwc they permute the
// axes of a rank-4 batch: to_nchw [N,H,W,C] -> [N,C,H,W], from_nchw [N,C,H,W] -> [N,H,W,C].
// A batch of flat rows [N, H*W*C] is accepted when `sample` (the internal {C,H,W}) is given; the
// result then has the flat rank-2 shape too.
// throws: shape_error when x's shape does not fit the layout (rank, or a flat row that is not
//         C*H*W values); io_error from parse_layout naming the rejected value.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "nnlens/core/error.hpp"
#include "nnlens/core/shape.hpp"
#include "nnlens/core/tensor.hpp"

namespace nnlens::io {

/// The layout of a model's input data as the model file declares it.
enum class data_layout { none, nchw, nhwc };

inline const char* layout_name(data_layout l) {
  switch (l) {
    case data_layout::nchw: return "nchw";
    case data_layout::nhwc: return "nhwc";
    default: return "none";
  }
}

/// "nchw", "nhwc" or "none"; `what` names the source of s in the error (e.g. "--layout").
inline data_layout parse_layout(const std::string& s, const std::string& what = "layout") {
  if (s == "nchw") return data_layout::nchw;
  if (s == "nhwc") return data_layout::nhwc;
  if (s == "none") return data_layout::none;
  throw io_error(what + ": expected nchw or nhwc, got '" + s + "'");
}

/// The per-sample dims of an internal (NCHW) input shape as layout l writes them.
inline std::vector<std::size_t> declared_sample_shape(shape internal, data_layout l) {
  std::vector<std::size_t> d;
  for (std::size_t i = 0; i < internal.rank; ++i) d.push_back(internal[i]);
  if (l == data_layout::nhwc && d.size() == 3) d = {d[1], d[2], d[0]};
  return d;
}

namespace detail {

/// Permutes each sample of x between NHWC and NCHW; x is [N,a,b,c] or [N, a*b*c] (flat, with
/// `sample` the internal {C,H,W}).  to_internal: NHWC -> NCHW; else NCHW -> NHWC.
template <class T>
xt::xarray<T> permute_layout(const xt::xarray<T>& x, shape sample, bool to_internal, const char* fn) {
  std::size_t N = 0, C = 0, H = 0, W = 0;
  std::vector<std::size_t> out_shape;
  if (x.dimension() == 4) {
    N = x.shape(0);
    if (to_internal)
      H = x.shape(1), W = x.shape(2), C = x.shape(3), out_shape = {N, C, H, W};
    else
      C = x.shape(1), H = x.shape(2), W = x.shape(3), out_shape = {N, H, W, C};
  } else if (x.dimension() == 2 && sample.rank == 3 && x.shape(1) == sample.size()) {
    N = x.shape(0), C = sample[0], H = sample[1], W = sample[2];
    out_shape = {N, C * H * W};
  } else {
    throw shape_error(nnlens::detail::concat(fn, ": nhwc data must be a batch of images [N,H,W,C] (or flat rows of ",
                                             "C*H*W values with the sample shape given), got rank ", x.dimension()));
  }
  xt::xarray<T> y = xt::xarray<T>::from_shape(out_shape);
  const T* s = x.data();
  T* d = y.data();
  const std::size_t per = C * H * W;
  for (std::size_t n = 0; n < N; ++n) {
    const T* sn = s + n * per;
    T* dn = d + n * per;
    for (std::size_t h = 0; h < H; ++h)
      for (std::size_t w = 0; w < W; ++w)
        for (std::size_t c = 0; c < C; ++c) {
          const std::size_t hwc = (h * W + w) * C + c, chw = (c * H + h) * W + w;
          if (to_internal)
            dn[chw] = sn[hwc];
          else
            dn[hwc] = sn[chw];
        }
  }
  return y;
}

}  // namespace detail

/// A batch in layout l -> NCHW (the network's internal order).  For nhwc: [N,H,W,C] -> [N,C,H,W],
/// or flat rows [N, H*W*C] -> [N, C*H*W] given the internal sample shape {C,H,W}.
template <class T>
xt::xarray<T> to_nchw(const xt::xarray<T>& x, data_layout l, shape sample = shape()) {
  if (l != data_layout::nhwc) return x;
  return detail::permute_layout(x, sample, true, "to_nchw");
}

/// A batch in NCHW (the network's internal order) -> layout l.  For nhwc: [N,C,H,W] -> [N,H,W,C],
/// or flat rows [N, C*H*W] -> [N, H*W*C] given the internal sample shape {C,H,W}.
template <class T>
xt::xarray<T> from_nchw(const xt::xarray<T>& x, data_layout l, shape sample = shape()) {
  if (l != data_layout::nhwc) return x;
  return detail::permute_layout(x, sample, false, "from_nchw");
}

}  // namespace nnlens::io
