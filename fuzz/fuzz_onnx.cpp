// libFuzzer target: the ONNX reader (io::parse_onnx) on arbitrary bytes, then a forward pass of
// whatever loaded.  Every input must load or throw nnlens::error; nothing may crash, leak or trip a
// sanitizer.  Built by fuzz/run (needs libonnx-dev, libprotobuf-dev).
#include <cstdint>

#include "nnlens/io/onnx.hpp"
#include "nnlens/network/forward.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const auto net = nnlens::io::parse_onnx(data, size, "fuzz");
    const auto in = net.input_shape();
    if (in.size() > (1u << 16)) return 0;
    xt::xarray<float> x = xt::xarray<float>::from_shape(in.with_batch(2));
    for (std::size_t i = 0; i < x.size(); ++i) x.data()[i] = float(i % 7) * 0.25f - 0.5f;
    (void)nnlens::forward(net, x);
  } catch (const nnlens::error&) {
  }
  return 0;
}
