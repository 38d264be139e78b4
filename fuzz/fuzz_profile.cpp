// libFuzzer target: load_profile (nnlens/nnslicer/profile.hpp) on arbitrary bytes, written to a
// temporary file (the reader takes a path).  Any input must load or throw nnlens::error; a loaded
// profile must survive save_profile -> load_profile unchanged and merge with itself.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "nnlens/nnslicer/profile.hpp"

namespace {
const std::filesystem::path& tmp(const char* what) {
  static const std::filesystem::path in =
      std::filesystem::temp_directory_path() / ("nnlens-fuzz-profile-" + std::to_string(::getpid()) + ".in");
  static const std::filesystem::path out =
      std::filesystem::temp_directory_path() / ("nnlens-fuzz-profile-" + std::to_string(::getpid()) + ".out");
  return what[0] == 'i' ? in : out;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  {
    std::ofstream f(tmp("in"), std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(data), std::streamsize(size));
  }
  try {
    const nnlens::profile p = nnlens::load_profile(tmp("in"));
    nnlens::save_profile(tmp("out"), p);
    const nnlens::profile q = nnlens::load_profile(tmp("out"));
    if (q.sums != p.sums || q.samples != p.samples || q.fingerprint != p.fingerprint || q.grain != p.grain) __builtin_trap();
    const nnlens::profile m = nnlens::merge(p, p);
    if (m.samples != 2 * p.samples) __builtin_trap();
    for (std::size_t a = 0; a < p.sums.size(); ++a) (void)p.mean(a);
  } catch (const nnlens::error&) {
  }
  return 0;
}
