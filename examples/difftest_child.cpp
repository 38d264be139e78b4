// examples/difftest_child.cpp -- serve a model over the "nnlens-bb 1" pipe protocol, so that a
// differential tester in another process can query it as a black box (difftest/process.hpp,
// docs/difftest-process.md).
//
//   difftest_child [--int8] [--divide D] MODEL
//
// MODEL is a .nnet file, an .onnx file (when built with nnlens::onnx), or the LeNet-5 weights that
// examples/train_lenet5 writes (lenet5.nnlw; inputs 1x28x28).  --int8 serves the model's
// weight-only int8 twin (compress::quantize_weights with DFlare's reference rule) instead of the
// model itself; --divide D divides every input by D first (default 255 for .nnlw: raw pixels in,
// as DFlare mutates them; 1 otherwise).  The answers are softmax probabilities.
//
// The tester side:
//   black_box f = wrap(lenet5, "f", normalization::divide_by(255));
//   black_box g = process_black_box("difftest_child --int8 lenet5.nnlw");
//   auto r = dflare(f, g, seeds, n, {.image = {1, 28, 28}, .max_queries = 1000});
//
// Exit status: 0 at end of input (the parent closed our stdin), 1 on an error (message on stderr,
// before or instead of the header, so the parent's error names it).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include <nnlens/compress/quantize.hpp>
#include <nnlens/difftest/black_box.hpp>
#include <nnlens/io/nnet.hpp>
#include <nnlens/io/weights.hpp>
#include <nnlens/nnlens.hpp>
#if NNLENS_EXAMPLE_WITH_ONNX
#include <nnlens/io/onnx.hpp>
#endif

using LeNet5 = nnlens::Sequential<nnlens::Input<1, 28, 28>,                                  //
                                  nnlens::Conv2D<6, 5, /*stride*/ 1, /*pad*/ 2>, nnlens::ReLU,  //
                                  nnlens::MaxPool2D<2>,                                     //
                                  nnlens::Conv2D<16, 5>, nnlens::ReLU, nnlens::MaxPool2D<2>,  //
                                  nnlens::Flatten, nnlens::Dense<120>, nnlens::ReLU,        //
                                  nnlens::Dense<84>, nnlens::ReLU, nnlens::Dense<10>>;

namespace {

bool ends_with(const std::string& s, const char* suffix) {
  const std::size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

nnlens::DynamicNetwork load(const std::string& path) {
  if (ends_with(path, ".nnet")) return nnlens::io::load_nnet(path).net;
  if (ends_with(path, ".nnlw")) return nnlens::to_dynamic(nnlens::io::load_weights<LeNet5>(path));
#if NNLENS_EXAMPLE_WITH_ONNX
  if (ends_with(path, ".onnx")) return nnlens::io::load_onnx(path);
#endif
  throw nnlens::io_error("difftest_child: " + path + ": expected a .nnet, .onnx or LeNet-5 .nnlw file");
}

bool read_exact(void* p, std::size_t n) { return std::fread(p, 1, n, stdin) == n; }

}  // namespace

int main(int argc, char** argv) try {
  bool int8 = false;
  float divide = 0;
  std::string path;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--int8") {
      int8 = true;
    } else if (a == "--divide" && i + 1 < argc) {
      divide = std::strtof(argv[++i], nullptr);
    } else if (path.empty() && a.rfind("--", 0) != 0) {
      path = a;
    } else {
      std::fprintf(stderr, "usage: difftest_child [--int8] [--divide D] MODEL\n");
      return 1;
    }
  }
  if (path.empty()) {
    std::fprintf(stderr, "usage: difftest_child [--int8] [--divide D] MODEL\n");
    return 1;
  }
  if (divide == 0) divide = ends_with(path, ".nnlw") ? 255.f : 1.f;
  nnlens::DynamicNetwork net = load(path);
  if (int8) {
    const auto q = nnlens::compress::quantize_weights(net, nnlens::compress::quantize_options::dflare_reference());
    net = q.dequantized();
  }
  const nnlens::difftest::black_box model =
      nnlens::difftest::wrap(std::move(net), path, nnlens::difftest::normalization::divide_by(divide));

  // 1. The header.  2./3. Requests and answers: uint32 n, then floats (little-endian hosts: the
  //    raw bytes are the wire format).  4. EOF on stdin ends the session.
  static_assert(sizeof(float) == 4);
  std::printf("nnlens-bb 1 %zu %zu\n", model.input_size, model.classes);
  std::fflush(stdout);
  std::vector<float> x, p;
  for (;;) {
    std::uint32_t n = 0;
    if (!read_exact(&n, 4)) return 0;
    x.resize(std::size_t(n) * model.input_size);
    if (!read_exact(x.data(), x.size() * sizeof(float))) return 0;
    p.resize(std::size_t(n) * model.classes);
    model(x, n, p);
    std::fwrite(&n, 4, 1, stdout);
    std::fwrite(p.data(), sizeof(float), p.size(), stdout);
    std::fflush(stdout);
  }
} catch (const std::exception& e) {
  std::fprintf(stderr, "difftest_child: %s\n", e.what());
  return 1;
}
