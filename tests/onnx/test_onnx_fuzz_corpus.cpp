// Replays the ONNX fuzz corpus (fuzz/corpus/onnx/) exactly as fuzz/fuzz_onnx.cpp runs its inputs:
// every file either loads and runs, or throws nnlens::error; nothing crashes.
#include <doctest/doctest.h>

#include <nnlens/io/onnx.hpp>
#include <nnlens/network/forward.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace fs = std::filesystem;

TEST_CASE("fuzz corpus: onnx") {
  const fs::path dir = fs::path(NNLENS_SOURCE_DIR) / "fuzz" / "corpus" / "onnx";
  REQUIRE(fs::is_directory(dir));
  std::size_t loaded = 0, rejected = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    std::ifstream f(e.path(), std::ios::binary);
    const std::string b((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    try {
      const auto net = nnlens::io::parse_onnx(reinterpret_cast<const std::uint8_t*>(b.data()), b.size(), "corpus");
      const auto in = net.input_shape();
      if (in.size() <= (1u << 16)) {
        xt::xarray<float> x = xt::xarray<float>::from_shape(in.with_batch(2));
        for (std::size_t i = 0; i < x.size(); ++i) x.data()[i] = float(i % 7) * 0.25f - 0.5f;
        (void)nnlens::forward(net, x);
      }
      ++loaded;
    } catch (const nnlens::error&) {
      ++rejected;
    }
  }
  MESSAGE("onnx: ", loaded, " files load, ", rejected, " rejected with nnlens::error");
  CHECK(loaded >= 5);  // the seeds written by nnlens' exporter
}
