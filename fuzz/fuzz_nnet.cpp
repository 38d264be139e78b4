// libFuzzer target: the .nnet parser on arbitrary bytes.  Any input must either parse or throw
// nnlens::error; anything else (a crash, a sanitizer report, another exception) is a finding.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "nnlens/io/nnet.hpp"
#include "nnlens/network/forward.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  nnlens::io::nnet_options o;
  o.limits.max_parameters = std::size_t(1) << 22;  // keep single inputs fast
  try {
    auto m = nnlens::io::parse_nnet<float>(text, "fuzz", o);
    xt::xarray<float> x = xt::zeros<float>({std::size_t(1), m.net.input_shape()[0]});
    (void)nnlens::forward(m.net, x);  // the loaded network must be runnable
  } catch (const nnlens::error&) {
  }
  return 0;
}
