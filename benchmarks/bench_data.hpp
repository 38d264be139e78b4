// benchmarks/bench_data.hpp -- what the benchmark suites share: where the data and the cached
// models are, and the demo's LeNet-5.
//
//   env_or(NAME, default)     an environment variable, else the compile-time default
//   fashion_dir()             NNLENS_FASHION_DIR (environment, else the CMake definition)
//   demo_lenet5_weights()     NNLENS_MODELS_CACHE/lenet5-fashion-mnist-e12-s1.nnlw (`nnlens demo`'s)
//   load_demo_lenet5(net)     initialises net with seed 1 and loads those weights if the file
//                             exists; returns whether it did (benchmarks label "untrained" if not)
#pragma once

#include <cstdlib>
#include <filesystem>

#include <nnlens/io/weights.hpp>
#include <nnlens/nnlens.hpp>

#include "../tools/nnlens/lenet5_recipe.hpp"

namespace nnlens_bench {

inline std::filesystem::path env_or(const char* name, const char* def) {
  if (const char* s = std::getenv(name)) return s;
  return def;
}

inline std::filesystem::path fashion_dir() { return env_or("NNLENS_FASHION_DIR", NNLENS_FASHION_DIR); }

inline std::filesystem::path demo_lenet5_weights() {
  return env_or("NNLENS_MODELS_CACHE", NNLENS_MODELS_CACHE) / "lenet5-fashion-mnist-e12-s1.nnlw";
}

inline bool load_demo_lenet5(nnlens::demo::LeNet5& net) {
  nnlens::initialize(net, 1);
  const auto w = demo_lenet5_weights();
  if (!std::filesystem::exists(w)) return false;
  nnlens::io::load_weights(w, net);
  return true;
}

}  // namespace nnlens_bench
