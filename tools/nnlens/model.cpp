// tools/nnlens/model.cpp -- see model.hpp.
#include "model.hpp"

// nnet.hpp first (an earlier version of it needed to precede weights.hpp).
#include <nnlens/io/nnet.hpp>

#include <cctype>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <string_view>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <nnlens/core/error.hpp>
#include <nnlens/io/csv.hpp>
#include <nnlens/io/idx.hpp>
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

bool is_idx_name(const std::string& path) {
  std::string n = std::filesystem::path(path).filename().string();
  for (auto& c : n) c = char(std::tolower(static_cast<unsigned char>(c)));
  auto ends = [&](std::string_view s) { return n.size() >= s.size() && n.compare(n.size() - s.size(), s.size(), s) == 0; };
  if (ends(".gz")) n.resize(n.size() - 3);
  return ends(".idx") || ends("-ubyte");
}

xt::xarray<float> read_samples(const std::string& path, shape in) {
  if (!is_idx_name(path)) return io::read_csv<float>(path, in);  // io_error FILE:LINE:COLUMN, or "no samples"
  xt::xarray<float> x = io::read_idx_images<float>(path);      // [N, C, rows, cols]
  const std::size_t n = x.shape()[0];
  if (n == 0) throw io_error(path + ": no samples (the IDX file holds 0 images)");
  const std::size_t per = x.size() / n;
  if (per != in.size()) {
    const auto& s = x.shape();
    throw shape_error(detail::concat(path, ": images of shape [", s[1], ",", s[2], ",", s[3], "] (", per,
                                     " values), the model's input is ", in.str(), " (", in.size(), " values)"));
  }
  x.reshape(in.with_batch(n));
  return x;
}

std::string companion_labels(const std::string& images_path) {
  if (!is_idx_name(images_path)) return {};
  const std::filesystem::path p(images_path);
  std::string n = p.filename().string();
  auto swap = [&](const std::string& a, const std::string& b) {
    const auto k = n.find(a);
    if (k == std::string::npos) return false;
    n.replace(k, a.size(), b);
    return true;
  };
  if (!swap("images", "labels")) return {};
  swap("idx3", "idx1");
  const std::filesystem::path l = p.parent_path() / n;
  std::error_code ec;
  return std::filesystem::is_regular_file(l, ec) ? l.string() : std::string();
}

std::vector<std::size_t> read_labels(const std::string& path, std::size_t n, std::size_t classes) {
  std::vector<std::size_t> r;
  if (is_idx_name(path)) {
    for (auto v : io::read_idx_labels(path)) r.push_back(v);
    for (std::size_t i = 0; i < r.size(); ++i)
      if (r[i] >= classes)
        throw data_error(detail::concat(path, ": label ", i + 1, " is ", r[i], ", the model has ", classes, " classes"));
  } else {
    std::ifstream f(path);
    if (!f) throw io_error(path + ": cannot open");
    std::string line;
    std::size_t line_no = 0;
    while (std::getline(f, line)) {
      ++line_no;
      while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == ',')) line.pop_back();
      std::size_t b = 0;
      while (b < line.size() && line[b] == ' ') ++b;
      if (b == line.size()) continue;
      std::size_t v = 0;
      const char* e = line.data() + line.size();
      const auto [p, ec] = std::from_chars(line.data() + b, e, v);
      if (ec != std::errc() || p != e)
        throw io_error(detail::concat(path, ":", line_no, ": expected one class label (a non-negative integer), got '",
                                      line.substr(b), "'"));
      if (v >= classes)
        throw data_error(detail::concat(path, ":", line_no, ": label ", v, ", the model has ", classes, " classes"));
      r.push_back(v);
    }
  }
  if (r.size() != n)
    throw data_error(detail::concat(path, ": ", r.size(), " labels for ", n, " samples"));
  return r;
}

void keep_batch_buffers_on_the_heap() {
#if defined(__GLIBC__)
  ::mallopt(M_MMAP_THRESHOLD, 64 << 20);
  ::mallopt(M_TRIM_THRESHOLD, 256 << 20);
#endif
}

}  // namespace nnlens::tool
