// Replays fuzz/corpus/coverage (the seeds of fuzz/fuzz_coverage.cpp and what fuzzing kept) through
// the coverage state readers and the neuron-mask reader: each file must load or throw an
// nnlens::error, never crash or throw anything else.  The first byte picks the reader, as in the
// fuzz target.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

#include <nnlens/coverage.hpp>
#include <nnlens/nnlens.hpp>
#include <nnlens/neusemslice/neuron_mask.hpp>

using namespace nnlens;
namespace fs = std::filesystem;

TEST_CASE("fuzz corpus: coverage states and neuron masks") {
  using Net = Sequential<Input<4>, Dense<5, double>, ReLU, Dense<3, double>>;
  Net net;
  initialize(net, 7);  // the network fuzz_coverage.cpp checks the states against
  const fs::path dir = fs::path(NNLENS_SOURCE_DIR) / "fuzz" / "corpus" / "coverage";
  REQUIRE(fs::is_directory(dir));
  int ok = 0, rejected = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    std::ifstream f(e.path(), std::ios::binary);
    const std::string b((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    INFO(e.path().string());
    if (b.empty()) continue;
    std::istringstream is(b.substr(1));
    try {
      switch (static_cast<unsigned char>(b[0]) % 4) {
        case 0: (void)load_idc(is).result(); break;
        case 1: (void)load_neuron_bounds(is, net); break;
        case 2: (void)load_surprise(is, net); break;
        case 3: (void)load_neuron_mask(is); break;
      }
      ++ok;
    } catch (const nnlens::error&) {
      ++rejected;
    }
  }
  CHECK(ok >= 4);  // the four valid seeds
  CHECK(rejected >= 4);
}
