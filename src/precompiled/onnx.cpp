// src/precompiled/onnx.cpp -- nnlens::precompiled_onnx: the ONNX importer compiled once
// (io::import_onnx, load_onnx and parse_onnx call detail::onnx_reader<float>, which a program built
// with NNLENS_EXTERN_TEMPLATES_ONNX declares extern).  Needs nnlens::onnx (libonnx-dev, protobuf).
// This file defines them: the full importer, whatever its users see.
#undef NNLENS_EXTERN_TEMPLATES_ONNX
#include "nnlens/io/onnx.hpp"

namespace nnlens::io {
template struct detail::onnx_reader<float>;
}  // namespace nnlens::io
