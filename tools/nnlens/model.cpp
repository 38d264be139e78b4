// tools/nnlens/model.cpp -- see model.hpp.
#include "model.hpp"

// nnet.hpp first (an earlier version of it needed to precede weights.hpp).
#include <nnlens/io/nnet.hpp>

#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string_view>
#include <type_traits>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <nnlens/core/error.hpp>
#include <nnlens/io/csv.hpp>
#include <nnlens/io/idx.hpp>
#include <nnlens/io/weights.hpp>
#include <nnlens/network/cast.hpp>

#include "lenet5_recipe.hpp"

#if defined(NNLENS_TOOL_HAS_ONNX)
#include <nnlens/io/onnx.hpp>
#endif

namespace nnlens::tool {

std::string extension_of(const std::string& path) {
  std::string e = std::filesystem::path(path).extension().string();
  for (auto& c : e) c = char(std::tolower(static_cast<unsigned char>(c)));
  return e;
}

std::string supported_model_formats() {
  std::string s;
#if defined(NNLENS_TOOL_HAS_ONNX)
  s += ".onnx, ";
#endif
  s += ".nnet, ";
  return s + ".nnlw (the demo's LeNet-5 weights)";
}

const char* precision_name(precision p) { return p == precision::f64 ? "f64" : "f32"; }

std::vector<std::size_t> input_layout::data_shape() const { return io::declared_sample_shape(net_input, data); }

std::string input_layout::describe() const {
  std::string s = "[";
  if (batch_axis) s += "N";
  for (std::size_t i = 0; i < declared_shape.size(); ++i) s += (i || batch_axis ? "," : "") + std::to_string(declared_shape[i]);
  s += "]";
  if (declared != io::data_layout::none) s += std::string(" (") + io::layout_name(declared) + ")";
  return s;
}

template <class T>
model<T> load_model(const std::string& path, io::data_layout layout) {
  const std::string ext = extension_of(path);
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw io_error(path + ": no such file");
  model<T> m;
  bool known = false;
  if (ext == ".nnlw") {
    const auto meta = io::read_weights_metadata(path);
    const auto it = meta.find("model");
    // "lenet5" (the test fixtures) or "LeNet-5" (what `nnlens demo` writes into models-cache/)
    if (it != meta.end() && it->second != "lenet5" && it->second != "LeNet-5")
      throw io_error(path + ": a weights file of model '" + it->second +
                     "'; only the demo's LeNet-5 architecture is known to the tool");
    m.net = network_cast<T>(to_dynamic(io::load_weights<demo::LeNet5>(path)));  // float weights: exact in double
    known = true;
  }
#if defined(NNLENS_TOOL_HAS_ONNX)
  if (ext == ".onnx") {
    io::onnx_info info;
    m.net = network_cast<T>(io::load_onnx(path, info));  // float weights: exact in double
    m.in.declared = info.layout;
    m.in.batch_axis = info.batch_axis;
    for (std::size_t i = info.batch_axis ? 1 : 0; i < info.input_dims.size(); ++i)
      m.in.declared_shape.push_back(std::size_t(info.input_dims[i]));  // fixed: the importer checked them
    known = true;
  }
#endif
  if (ext == ".nnet") {
    auto nm = io::load_nnet<T>(path);  // raw units: input clamp and scaling folded in; parsed at T's precision
    m.net = std::move(nm.net);
    m.in.range_min = nm.norm.input_min;
    m.in.range_max = nm.norm.input_max;
    known = true;
  }
  if (!known)
    throw io_error(path + ": unsupported model format '" + ext + "' (this build reads " + supported_model_formats() + ")");
  m.in.net_input = m.net.input_shape();
  if (m.in.declared_shape.empty()) m.in.declared_shape = io::declared_sample_shape(m.in.net_input, m.in.declared);
  m.in.data = m.in.declared;
  if (layout != io::data_layout::none) {
    m.in.data = layout;
    if (m.in.data == io::data_layout::nhwc && m.in.net_input.rank != 3)
      throw shape_error(path + ": --layout nhwc needs an image input [N,H,W,C]; the model's input is " + m.in.describe());
  }
  return m;
}

template model<float> load_model<float>(const std::string&, io::data_layout);
template model<double> load_model<double>(const std::string&, io::data_layout);

template <class T>
model<T> open_model(const std::string& path, io::data_layout layout) {
  keep_batch_buffers_on_the_heap();
  return load_model<T>(path, layout);
}
template model<float> open_model<float>(const std::string&, io::data_layout);
template model<double> open_model<double>(const std::string&, io::data_layout);

bool is_idx_name(const std::string& path) {
  std::string n = std::filesystem::path(path).filename().string();
  for (auto& c : n) c = char(std::tolower(static_cast<unsigned char>(c)));
  auto ends = [&](std::string_view s) { return n.size() >= s.size() && n.compare(n.size() - s.size(), s.size(), s) == 0; };
  if (ends(".gz")) n.resize(n.size() - 3);
  return ends(".idx") || ends("-ubyte");
}

namespace {

/// IDX images scaled to [0, 1], as [N, in...] (their bytes in the file's order).
template <class T>
xt::xarray<T> read_idx_as(const std::string& path, shape in) {
  xt::xarray<T> x = io::read_idx_images<T>(path);  // [N, C, rows, cols]
  const std::size_t n = x.shape()[0];
  if (n == 0) throw io_error(path + ": no samples (the IDX file holds 0 images)");
  const std::size_t per = x.size() / n;
  if (per != in.size()) {
    const auto& s = x.shape();
    throw shape_error(concat(path, ": images of shape [", s[1], ",", s[2], ",", s[3], "] (", per,
                                             " values), the model's input is ", in.str(), " (", in.size(), " values)"));
  }
  x.reshape(in.with_batch(n));
  return x;
}

shape to_shape(const std::vector<std::size_t>& d) {
  if (d.size() == 3) return shape(d[0], d[1], d[2]);
  std::size_t n = 1;
  for (auto v : d) n *= v;
  return shape(n);
}

}  // namespace

template <class T>
xt::xarray<T> read_samples(const std::string& path, const input_layout& in, std::vector<std::size_t>* lines,
                           io::csv_header header) {
  const shape data = to_shape(in.data_shape());
  xt::xarray<T> x;
  if (is_idx_name(path)) {
    x = read_idx_as<T>(path, data);
    if (lines) {
      lines->resize(x.shape()[0]);
      for (std::size_t i = 0; i < lines->size(); ++i) (*lines)[i] = i + 1;
    }
  } else {
    io::csv_options opt;
    opt.header = header;
    auto r = io::read_csv_rows<T>(path, data, opt);  // io_error FILE:LINE:COLUMN (e.g. "out of float range"), or "no samples"
    x = std::move(r.x);
    if (lines) *lines = std::move(r.lines);
  }
  return from_data_layout<T>(x, in);
}

template xt::xarray<float> read_samples<float>(const std::string&, const input_layout&, std::vector<std::size_t>*,
                                               io::csv_header);
template xt::xarray<double> read_samples<double>(const std::string&, const input_layout&, std::vector<std::size_t>*,
                                                 io::csv_header);

template <class T>
xt::xarray<T> to_data_layout(const xt::xarray<T>& x, const input_layout& in) {
  if (in.data != io::data_layout::nhwc || in.net_input.rank != 3) return x;
  return io::from_nchw(x, in.data, in.net_input);
}

template <class T>
xt::xarray<T> from_data_layout(const xt::xarray<T>& x, const input_layout& in) {
  if (in.data != io::data_layout::nhwc || in.net_input.rank != 3) return x;
  return io::to_nchw(x, in.data, in.net_input);
}

template xt::xarray<float> to_data_layout<float>(const xt::xarray<float>&, const input_layout&);
template xt::xarray<double> to_data_layout<double>(const xt::xarray<double>&, const input_layout&);
template xt::xarray<float> from_data_layout<float>(const xt::xarray<float>&, const input_layout&);
template xt::xarray<double> from_data_layout<double>(const xt::xarray<double>&, const input_layout&);

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
        throw data_error(concat(path, ": label ", i + 1, " is ", r[i], ", the model has ", classes, " classes"));
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
        throw io_error(concat(path, ":", line_no, ": expected one class label (a non-negative integer), got '",
                                      line.substr(b), "'"));
      if (v >= classes)
        throw data_error(concat(path, ":", line_no, ": label ", v, ", the model has ", classes, " classes"));
      r.push_back(v);
    }
  }
  if (r.size() != n)
    throw data_error(concat(path, ": ", r.size(), " labels for ", n, " samples"));
  return r;
}

void keep_batch_buffers_on_the_heap() {
#if defined(__GLIBC__)
  ::mallopt(M_MMAP_THRESHOLD, 64 << 20);
  ::mallopt(M_TRIM_THRESHOLD, 256 << 20);
#endif
}

}  // namespace nnlens::tool
