// tools/nnlens/model.hpp -- model files and CSV inputs for the `nnlens` subcommands.
//
//   load_model(path)  a DynamicNetwork from .onnx (when built with nnlens::onnx), .nnet (raw units,
//                     as the reference reader evaluates: io::load_nnet's defaults) or .nnlw (the demo's LeNet-5 weights: the
//                     architecture is the demo's, the file only holds the weights)
// throws: nnlens::error naming the file (and line) and what was expected.
#pragma once

#include <string>

#include <nnlens/network/dynamic_network.hpp>

namespace nnlens::tool {

/// The model formats this build reads, e.g. ".onnx, .nnet, .nnlw (LeNet-5 weights)".
std::string supported_model_formats();

DynamicNetwork load_model(const std::string& path);

}  // namespace nnlens::tool
