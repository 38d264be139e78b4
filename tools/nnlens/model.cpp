// tools/nnlens/model.cpp -- see model.hpp.
#include "model.hpp"

// nnet.hpp first (an earlier version of it needed to precede weights.hpp).
#include <nnlens/io/nnet.hpp>

#include <cctype>
#include <filesystem>

#include <nnlens/core/error.hpp>
#include <nnlens/io/weights.hpp>

#include "lenet5_recipe.hpp"

#if defined(NNLENS_TOOL_HAS_ONNX)
#include <nnlens/io/onnx.hpp>
#endif

namespace nnlens::tool {

namespace {
std::string extension_of(const std::string& path) {
  std::string e = std::filesystem::path(path).extension().string();
  for (auto& c : e) c = char(std::tolower(static_cast<unsigned char>(c)));
  return e;
}
}  // namespace

std::string supported_model_formats() {
  std::string s;
#if defined(NNLENS_TOOL_HAS_ONNX)
  s += ".onnx, ";
#endif
  s += ".nnet, ";
  return s + ".nnlw (the demo's LeNet-5 weights)";
}

DynamicNetwork load_model(const std::string& path) {
  const std::string ext = extension_of(path);
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw io_error(path + ": no such file");
  if (ext == ".nnlw") {
    const auto meta = io::read_weights_metadata(path);
    const auto it = meta.find("model");
    // "lenet5" (the test fixtures) or "LeNet-5" (what `nnlens demo` writes into models-cache/)
    if (it != meta.end() && it->second != "lenet5" && it->second != "LeNet-5")
      throw io_error(path + ": a weights file of model '" + it->second +
                     "'; only the demo's LeNet-5 architecture is known to the tool");
    return to_dynamic(io::load_weights<demo::LeNet5>(path));
  }
#if defined(NNLENS_TOOL_HAS_ONNX)
  if (ext == ".onnx") return io::load_onnx(path);
#endif
  if (ext == ".nnet") return io::load_nnet(path).net;  // raw units: input clamp and scaling folded in
  throw io_error(path + ": unsupported model format '" + ext + "' (this build reads " + supported_model_formats() + ")");
}

}  // namespace nnlens::tool
