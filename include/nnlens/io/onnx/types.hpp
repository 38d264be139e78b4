// nnlens/io/onnx/types.hpp -- the ONNX loader's types and entry points, without protobuf (part of
// nnlens::onnx).
//
//   onnx_tensor                 a constant as dims + values (double: exact for float32, int32 and
//                               the int64 values shapes use)
//   onnx_options, onnx_info     the loader's options and what it reports of the file
//   detail::onnx_reader<T>      the importer's entry points: read(path), parse(data, size, name),
//                               tensor(path); defined in nnlens/io/onnx.hpp, or compiled once in
//                               nnlens::precompiled_onnx (NNLENS_EXTERN_TEMPLATES_ONNX: then a
//                               program that includes nnlens/io/onnx.hpp parses only this header of
//                               the importer, not the protobuf classes)
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "nnlens/io/layout.hpp"
#include "nnlens/network/dynamic_network.hpp"

namespace nnlens::io {

/// A constant tensor: row-major values with their dims (no dims = a scalar).
struct onnx_tensor {
  std::vector<std::int64_t> dims;
  std::vector<double> values;
  bool integral = false;  // an integer element type (shape arithmetic: Div truncates)
  std::size_t size() const { return values.size(); }
};

/// Options of the ONNX loader.
struct onnx_options {
  /// Values for the 2nd, 3rd, ... run-time graph inputs (in graph order): bound as constants.
  std::vector<onnx_tensor> extra_inputs;
};

/// What the loader found besides the network.
struct onnx_info {
  std::string input_name, output_name, producer;
  std::vector<std::int64_t> input_dims;  // as declared (-1 for a symbolic extent)
  bool batch_axis = true;                // false: the file's input has no batch axis (e.g. [5])
  bool input_nhwc = false;  // the file's input is NHWC and begins with Transpose(0,3,1,2): the
                            // network takes the same data in NCHW (permute NHWC data first)
  data_layout layout = data_layout::none;  // the declared layout of the input's data (io/layout.hpp):
                                           // nhwc (input_nhwc), nchw (another rank-4 input), none (flat)
  std::int64_t opset = 0;
};

namespace detail {
/// The importer's entry points.  A class template over the network's scalar only so that
/// nnlens::precompiled_onnx can hold their one instantiation (T = float, the DynamicNetwork ONNX
/// gives): under NNLENS_EXTERN_TEMPLATES_ONNX a program compiles calls to them, not the importer.
template <class T>
struct onnx_reader {
  static basic_dynamic_network<T> read(const std::string& path, onnx_info& info, const onnx_options& options);
  static basic_dynamic_network<T> parse(const void* data, std::size_t size, const std::string& name, onnx_info& info,
                                        const onnx_options& options);
  static onnx_tensor tensor(const std::string& path);
};
}  // namespace detail

}  // namespace nnlens::io
