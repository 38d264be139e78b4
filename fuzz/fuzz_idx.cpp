// libFuzzer target: the IDX reader (plain, and gzip when built with NNLENS_HAS_ZLIB) on arbitrary
// bytes, in memory.  Any input must parse or throw nnlens::error.
#include <cstddef>
#include <cstdint>

#include "nnlens/io/idx.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  nnlens::io::idx_limits lim;
  lim.max_bytes = std::uint64_t(1) << 24;
  try {
    const auto a = nnlens::io::parse_idx(data, size, "fuzz", lim);
    double sum = 0;
    for (std::size_t i = 0; i < a.size(); ++i) sum += a.at<double>(i);
    (void)sum;
  } catch (const nnlens::error&) {
  }
  return 0;
}
