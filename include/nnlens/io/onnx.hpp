// nnlens/io/onnx.hpp -- ONNX import (optional component nnlens::onnx: link that CMake target; it
// brings Debian's libonnx-dev + libprotobuf-dev and the defines ONNX_NAMESPACE=onnx, ONNX_ML=1).
// Not part of nnlens.hpp; nothing else in nnlens depends on it.
//
//   io::load_onnx(path [, options])          -> DynamicNetwork (float)
//   io::load_onnx<Net>(path [, options])     -> Net, a static Sequential, via from_dynamic<Net>: every
//                                               layer type and shape is checked (shape_error naming
//                                               the layer on a mismatch)
//   io::import_onnx(path, info [, options])  -> DynamicNetwork, and fills onnx_info (input/output
//                                               names, declared input dims, batch axis, the declared
//                                               data layout: onnx_info::layout, io/layout.hpp)
//   io::load_onnx(path, info [, options])    the same as import_onnx
//   io::parse_onnx(data, size, name [, info [, options]])  the same from memory (name in messages;
//                                               for fuzzing and embedded copies)
//   io::read_onnx_tensor(path)               -> onnx_tensor (a serialized TensorProto, .pb)
//   io::nhwc_to_nchw(x)                      [N,H,W,C] -> [N,C,H,W] (data for a file whose input
//                                               was NHWC: onnx_info::input_nhwc); io::to_nchw(x,
//                                               info.layout) does the same for any declared layout
//
// Operators: Gemm (alpha, beta, transA = 0, transB), MatMul (x @ W, and W @ x for a file whose input
// has no batch axis, as sisl's NNet exporter writes), Add/Sub/Mul/Div by constants (-> Affine, folded
// into the preceding Dense/Conv2D bias when possible), Add of two branches forked from one value
// (-> DynamicResidual), Conv (pads, strides, dilations, group, auto_pad), Relu, LeakyRelu, Clip
// (attributes before opset 11, inputs from 11), MaxPool and AveragePool (pads, strides, ceil_mode,
// auto_pad, count_include_pad), GlobalAveragePool, BatchNormalization (inference), Flatten (axis 1),
// Reshape (to a flat sample), Transpose (layout bookkeeping, see below), Pad (constant zero, folded
// into the next Conv / AveragePool), Dropout/Identity (dropped), Softmax (over a sample's features),
// Constant and initializers, and the constant shape arithmetic of PyTorch exports (Shape, Gather,
// Unsqueeze, Concat, Cast, Reshape, Add/Sub/Mul/Div of constants).  The ops of torchvision's CNNs:
// Sigmoid, Tanh, HardSigmoid, HardSwish, Gelu; Mul of two values forked from one (x * Sigmoid(x)
// -> SiLU, x * HardSigmoid(x) -> HardSwish, any other -> DynamicProduct: squeeze-and-excitation);
// Concat of N forked values (-> DynamicConcat: Inception, DenseNet); Slice of the channels (->
// ChannelSlice); Reshape + Transpose + Reshape of channel_shuffle (-> ChannelShuffle); ReduceMean
// over H, W (-> GlobalAvgPool); LayerNormalization and its opset-13 decomposition, and the Erf
// GELU (io/onnx/patterns.hpp); MatMul on an image seen channels-last (ConvNeXt: a 1x1 Conv2D).
// Each of the 18 CNN families of torchvision 0.14 loads at opsets 13 and 17 (docs/zoo.md).
// Opsets up to 20 of the default domain (tested: 7 to 17, 20, and opset-1 node tests).
//
// Layouts.  The network's input is the file's input without its batch axis: [N,C,H,W] -> {C,H,W};
// [N,F] -> {F}; [N,a,b] -> {a*b} (flat, row-major); an input without batch axis [F] -> {F}.  An
// NHWC input [N,H,W,C] whose only reader is Transpose(0,3,1,2) (keras2onnx, tf2onnx, MATLAB) is
// taken as NCHW {C,H,W}: onnx_info::input_nhwc is then true, onnx_info::layout is
// data_layout::nhwc, and NHWC data must be permuted to NCHW before forward() (io::to_nchw; for
// C == 1 the two layouts are the same bytes).  Another rank-4 input declares data_layout::nchw, a
// flat one data_layout::none.  A Transpose inside the
// network changes no data: the importer tracks each value's logical ONNX layout, and the
// Transpose(0,2,3,1) + Flatten + MatMul of NHWC exporters becomes a Dense whose weight rows are
// permuted to nnlens' NCHW flatten order.  Layers and ops that need the real layout (Conv, pools,
// BatchNorm) reject a transposed value.
// Weights: Dense stores W [in, out]: Gemm's B (transB = 0) as is, B^T for transB = 1, alpha folded
// into W and beta into b.  Affines that are exactly the identity (Sub 0, Div 1) are dropped.
// Errors: an unreadable, truncated or corrupt file, an unsupported operator, attribute or
// topology -> io_error naming the file, the node, its op type and (for operators) the supported
// set; never a crash.
// With nnlens::precompiled_onnx (NNLENS_EXTERN_TEMPLATES_ONNX) this header declares the loader
// (io/onnx/types.hpp) and does not parse the importer or the protobuf classes: the library holds
// them.  A program that needs the importer's internals (onnx::ModelProto, onnx_supported_ops())
// includes nnlens/io/onnx/import.hpp itself.
#pragma once

#include <limits>
#include <string>

#include "nnlens/core/tensor.hpp"
#include "nnlens/io/layout.hpp"
#include "nnlens/io/onnx/types.hpp"
#include "nnlens/network/dynamic_network.hpp"
#if !defined(NNLENS_EXTERN_TEMPLATES_ONNX)  // else the importer is nnlens::precompiled_onnx's
#include "nnlens/io/onnx/import.hpp"
#include "nnlens/io/onnx/proto.hpp"
#endif

namespace nnlens::io {

#if !defined(NNLENS_EXTERN_TEMPLATES_ONNX)
namespace detail {
template <class T>
basic_dynamic_network<T> onnx_reader<T>::read(const std::string& path, onnx_info& info, const onnx_options& options) {
  const onnx::ModelProto m = onnx_read_model(path);
  onnx_importer imp(m, path, options);
  return imp.run(info);
}
template <class T>
basic_dynamic_network<T> onnx_reader<T>::parse(const void* data, std::size_t size, const std::string& name,
                                               onnx_info& info, const onnx_options& options) {
  const onnx::ModelProto m = onnx_parse_model(data, size, name);
  onnx_importer imp(m, name, options);
  return imp.run(info);
}
template <class T>
onnx_tensor onnx_reader<T>::tensor(const std::string& path) {
  const std::string bytes = onnx_read_bytes(path);
  onnx::TensorProto t;
  if (bytes.size() > std::size_t(std::numeric_limits<int>::max()) || !t.ParseFromArray(bytes.data(), int(bytes.size())))
    throw io_error("ONNX: " + path + " is not a valid TensorProto (truncated or corrupt)");
  return tensor_from_proto(t, "ONNX: " + path);
}
}  // namespace detail
#else  // nnlens::precompiled_onnx (src/precompiled/onnx.cpp) holds them
extern template struct detail::onnx_reader<float>;
#endif

/// Reads a serialized TensorProto (e.g. test_data_set_0/input_0.pb); throws io_error.
inline onnx_tensor read_onnx_tensor(const std::string& path) { return detail::onnx_reader<float>::tensor(path); }

/// Reads an ONNX model; `info` receives what the file says about its input and output.
inline DynamicNetwork import_onnx(const std::string& path, onnx_info& info, const onnx_options& options = {}) {
  return detail::onnx_reader<float>::read(path, info, options);
}

/// Reads an ONNX model from memory (`name` appears in messages).
inline DynamicNetwork parse_onnx(const void* data, std::size_t size, const std::string& name, onnx_info& info,
                                 const onnx_options& options = {}) {
  return detail::onnx_reader<float>::parse(data, size, name, info, options);
}
inline DynamicNetwork parse_onnx(const void* data, std::size_t size, const std::string& name = "<memory>") {
  onnx_info info;
  return parse_onnx(data, size, name, info);
}

/// Reads an ONNX model; `info` receives its declared input dims and layout (onnx_info::layout).
inline DynamicNetwork load_onnx(const std::string& path, onnx_info& info, const onnx_options& options = {}) {
  return import_onnx(path, info, options);
}

/// Reads an ONNX model into a DynamicNetwork (float).
inline DynamicNetwork load_onnx(const std::string& path, const onnx_options& options = {}) {
  onnx_info info;
  return import_onnx(path, info, options);
}

/// Reads an ONNX model into the static network type Net; throws shape_error naming the first layer
/// whose type or shape differs from Net's.
template <class Net>
Net load_onnx(const std::string& path, const onnx_options& options = {}) {
  const DynamicNetwork d = load_onnx(path, options);
  try {
    return from_dynamic<Net>(d);
  } catch (const shape_error& e) {
    throw shape_error("ONNX: " + path + ": " + e.what());
  }
}

/// Permutes a batch of NHWC images [N,H,W,C] to NCHW [N,C,H,W] (throws shape_error for rank != 4).
template <class T>
xt::xarray<T> nhwc_to_nchw(const xt::xarray<T>& x) {
  if (x.dimension() != 4)
    throw shape_error(nnlens::detail::concat("nhwc_to_nchw: expected [N,H,W,C], got rank ", x.dimension()));
  const std::size_t N = x.shape(0), H = x.shape(1), W = x.shape(2), C = x.shape(3);
  xt::xarray<T> y = xt::xarray<T>::from_shape({N, C, H, W});
  const T* s = x.data();
  T* d = y.data();
  for (std::size_t n = 0; n < N; ++n)
    for (std::size_t h = 0; h < H; ++h)
      for (std::size_t w = 0; w < W; ++w)
        for (std::size_t c = 0; c < C; ++c) d[((n * C + c) * H + h) * W + w] = s[((n * H + h) * W + w) * C + c];
  return y;
}

}  // namespace nnlens::io
