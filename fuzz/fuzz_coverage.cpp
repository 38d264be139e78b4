// libFuzzer target: the coverage state readers and the neuron-mask reader on arbitrary bytes.  The
// first byte picks the reader (mod 4): load_idc, load_neuron_bounds, load_surprise (both checked
// against the small network below, whose fingerprint the seed corpus uses), load_neuron_mask.
// Any input must load or throw nnlens::error; a loaded state must survive save -> load unchanged.
// The seed corpus (fuzz/corpus/coverage) is written by `fuzz_coverage --write-seeds DIR`.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "nnlens/coverage.hpp"
#include "nnlens/nnlens.hpp"
#include "nnlens/neusemslice/neuron_mask.hpp"

namespace {
using Net = nnlens::Sequential<nnlens::Input<4>, nnlens::Dense<5, double>, nnlens::ReLU, nnlens::Dense<3, double>>;

const Net& net() {
  static const Net n = [] {
    Net m;
    nnlens::initialize(m, 7);
    return m;
  }();
  return n;
}

void check(bool ok) {
  if (!ok) __builtin_trap();
}

void run(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return;
  const std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::istringstream is(body);
  try {
    switch (data[0] % 4) {
      case 0: {
        const nnlens::idc c = nnlens::load_idc(is);
        std::stringstream ss;
        nnlens::save_idc(ss, c);
        const nnlens::idc d = nnlens::load_idc(ss);
        check(d.neurons() == c.neurons() && d.centroids() == c.centroids() && d.covered_combinations() == c.covered_combinations());
        (void)c.result();
        break;
      }
      case 1: {
        const auto b = nnlens::load_neuron_bounds(is, net());
        std::stringstream ss;
        nnlens::save_neuron_bounds(ss, b);
        check(nnlens::load_neuron_bounds(ss, net()) == b);
        break;
      }
      case 2: {
        const auto m = nnlens::load_surprise(is, net());
        std::stringstream ss;
        nnlens::save_surprise(ss, m);
        const auto m2 = nnlens::load_surprise(ss, net());
        check(m2.same_preparation(m));
        break;
      }
      case 3: {
        const auto m = nnlens::load_neuron_mask(is);
        std::stringstream ss;
        nnlens::save_neuron_mask(ss, m);
        check(nnlens::load_neuron_mask(ss).keep == m.keep);
        break;
      }
    }
  } catch (const nnlens::error&) {
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  run(data, size);
  return 0;
}
