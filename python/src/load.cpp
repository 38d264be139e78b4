// python/src/load.cpp -- nnlens._core.load: .onnx, .nnet and .nnlw models from a path or from
// bytes, at f32 or f64, as `nnlens` (the tool) reads them (tools/nnlens/model.cpp's rules).
#include <nnlens/io/nnet.hpp>  // first, as the tool includes it

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include <nnlens/io/weights.hpp>
#include <nnlens/network/cast.hpp>

#include "common.hpp"
#include "lenet5_recipe.hpp"  // the demo's LeNet-5: the architecture of .nnlw files

#if defined(NNLENS_PYTHON_HAS_ONNX)
#include <nnlens/io/onnx.hpp>
#endif

namespace nnlens_python {
using namespace nnlens;  // NOLINT: the library's vocabulary (the module's own names are outside nnlens: pybind11's unqualified calls must not find nnlens's by ADL)

namespace {

std::string lower_ext(const std::string& path) {
  std::string e = std::filesystem::path(path).extension().string();
  for (auto& c : e) c = char(std::tolower(static_cast<unsigned char>(c)));
  return e;
}

std::string formats() {
  std::string s;
#if defined(NNLENS_PYTHON_HAS_ONNX)
  s += ".onnx, ";
#endif
  return s + ".nnet, .nnlw (LeNet-5 weights)";
}

/// The format of bytes in memory: "nnlw" (magic NNLW), "nnet" (text: comments or numbers), else "onnx".
std::string sniff(const std::string& b) {
  if (b.size() >= 4 && b.compare(0, 4, "NNLW") == 0) return "nnlw";
  std::size_t i = 0;
  while (i < b.size() && std::isspace(static_cast<unsigned char>(b[i]))) ++i;
  if (i < b.size() && (b.compare(i, 2, "//") == 0 || std::isdigit(static_cast<unsigned char>(b[i])))) return "nnet";
  return "onnx";
}

/// A temporary file holding `bytes` (the weights reader takes paths), removed by the destructor.
struct temp_file {
  std::string path;
  explicit temp_file(const std::string& bytes) {
    char tmpl[] = "/tmp/nnlens-python-XXXXXX";
    const int fd = ::mkstemp(tmpl);
    if (fd < 0) throw io_error("<bytes>: cannot create a temporary file");
    ::close(fd);
    path = tmpl;
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), std::streamsize(bytes.size()));
    if (!f) throw io_error("<bytes>: cannot write a temporary file");
  }
  ~temp_file() { std::remove(path.c_str()); }
};

template <class T>
network load_as(const std::string& fmt, const std::string* path, const std::string* bytes, io::data_layout layout) {
  const std::string name = path ? *path : std::string("<bytes>");
  basic_dynamic_network<T> net;
  input_info in;
  if (fmt == "nnlw") {
    std::optional<temp_file> tmp;
    if (!path) tmp.emplace(*bytes);
    const std::string p = path ? *path : tmp->path;
    const auto meta = io::read_weights_metadata(p);
    const auto it = meta.find("model");
    if (it != meta.end() && it->second != "lenet5" && it->second != "LeNet-5")
      throw io_error(name + ": a weights file of model '" + it->second + "'; only the demo's LeNet-5 architecture is known");
    net = network_cast<T>(to_dynamic(io::load_weights<demo::LeNet5>(p)));
  } else if (fmt == "nnet") {
    auto nm = path ? io::load_nnet<T>(*path) : io::parse_nnet<T>(*bytes, name);
    net = std::move(nm.net);
    in.range_min = nm.norm.input_min;
    in.range_max = nm.norm.input_max;
  } else if (fmt == "onnx") {
#if defined(NNLENS_PYTHON_HAS_ONNX)
    io::onnx_info info;
    net = network_cast<T>(path ? io::load_onnx(*path, info) : io::parse_onnx(bytes->data(), bytes->size(), name, info));
    in.declared = info.layout;
    in.batch_axis = info.batch_axis;
    for (std::size_t i = info.batch_axis ? 1 : 0; i < info.input_dims.size(); ++i)
      in.declared_shape.push_back(std::size_t(info.input_dims[i]));
#else
    throw io_error(name + ": this build of nnlens reads no ONNX (built without libonnx-dev)");
#endif
  } else {
    throw io_error(name + ": unsupported model format '" + fmt + "' (this build reads " + formats() + ")");
  }
  if (in.declared_shape.empty()) in.declared_shape = io::declared_sample_shape(net.input_shape(), in.declared);
  in.data = in.declared;
  if (layout != io::data_layout::none) {
    if (layout == io::data_layout::nhwc && net.input_shape().rank != 3)
      throw shape_error(name + ": layout 'nhwc' needs an image input; the model's input is " + net.input_shape().str());
    in.data = layout;
  }
  check_shapes(net);
  return make_network<T>(std::move(net), std::move(in), name);
}

network load(py::object src, const std::string& prec, std::optional<std::string> layout_s, std::optional<std::string> format) {
  const precision p = parse_precision(prec);
  io::data_layout layout = io::data_layout::none;
  if (layout_s) layout = io::parse_layout(*layout_s, "layout");
  std::optional<std::string> path, bytes;
  if (py::isinstance<py::bytes>(src) || py::isinstance<py::bytearray>(src) || py::isinstance<py::memoryview>(src)) {
    py::object b = py::module_::import("builtins").attr("bytes")(src);  // one copy of bytearray / memoryview
    bytes = std::string(py::reinterpret_borrow<py::bytes>(b));
  } else {
    py::object fs = py::module_::import("os").attr("fspath");
    try {
      path = py::cast<std::string>(fs(src));
    } catch (const py::error_already_set&) {
      throw value_error(cat("load: expected a path (str or os.PathLike) or bytes, got ",
                               std::string(py::str(py::type::handle_of(src).attr("__name__")))));
    }
  }
  std::string fmt;
  if (format) {
    fmt = *format;
    for (auto& c : fmt) c = char(std::tolower(static_cast<unsigned char>(c)));
    if (!fmt.empty() && fmt[0] == '.') fmt.erase(0, 1);
  } else if (path) {
    fmt = lower_ext(*path);
    if (!fmt.empty()) fmt.erase(0, 1);
  } else {
    fmt = sniff(*bytes);
  }
  if (path) {
    std::error_code ec;
    if (!std::filesystem::exists(*path, ec)) throw io_error(*path + ": no such file");
  }
  if (bytes && bytes->empty()) throw io_error("<bytes>: empty (no model)");
  py::gil_scoped_release nogil;
  const std::string* pp = path ? &*path : nullptr;
  const std::string* bp = bytes ? &*bytes : nullptr;
  return p == precision::f64 ? load_as<double>(fmt, pp, bp, layout) : load_as<float>(fmt, pp, bp, layout);
}

}  // namespace

void register_load(py::module_& m) {
  m.def("load", &load, py::arg("source"), py::arg("precision") = "f32", py::arg("layout") = py::none(),
        py::arg("format") = py::none(),
        "Loads a model (.onnx, .nnet, .nnlw) from a path or from bytes; see nnlens.load.");
  m.def("supported_formats", &formats, "The model formats this build reads.");
}

}  // namespace nnlens_python
