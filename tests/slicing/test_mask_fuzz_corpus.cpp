// Replays fuzz/corpus/mask/ (the seeds and finds of fuzz/fuzz_mask.cpp) through load_neuron_mask:
// each file must either load -- and then survive save -> load unchanged, and, if it fits the
// test MLP, apply and count parameters -- or throw an nnlens::error; never crash or throw anything
// else.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "nnlens/nnlens.hpp"
#include "nnlens/slicing/neuron_mask.hpp"

using namespace nnlens;
namespace fs = std::filesystem;

TEST_CASE("fuzz corpus: neuron mask") {
  using Mlp = Sequential<Input<6>, Dense<5>, ReLU, Dense<4>, ReLU, Dense<3>>;
  Mlp net;
  initialize(net, 1);
  const fs::path corpus = fs::path(NNLENS_SOURCE_DIR) / "fuzz" / "corpus" / "mask";
  REQUIRE(fs::is_directory(corpus));
  int ok = 0, rejected = 0, fits = 0;
  for (const auto& e : fs::directory_iterator(corpus)) {
    INFO(e.path().string());
    std::ifstream f(e.path(), std::ios::binary);
    std::stringstream buf;
    buf << f.rdbuf();
    try {
      std::istringstream is(buf.str());
      const neuron_mask m = load_neuron_mask(is);
      std::ostringstream os;
      save_neuron_mask(os, m);
      std::istringstream again(os.str());
      const neuron_mask r = load_neuron_mask(again);
      CHECK(r.keep == m.keep);
      CHECK(r.fingerprint == m.fingerprint);
      ++ok;
    } catch (const error&) {
      ++rejected;
    }
    try {
      std::istringstream is(buf.str());
      const neuron_mask m = load_neuron_mask(is, net, false);
      const auto acc = parameter_accounting(net, m);
      CHECK(acc.kept + acc.removed == acc.total);
      (void)apply_neuron_mask(net, m);
      ++fits;
    } catch (const error&) {
    }
  }
  CHECK(ok > 0);
  CHECK(rejected >= 0);
  CHECK(fits > 0);  // valid_mlp
}
