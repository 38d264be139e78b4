// tools/nnlens/demo.hpp -- `nnlens demo`: train (or reuse) LeNet-5 on Fashion-MNIST and report.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "cli.hpp"

namespace nnlens::tool {

struct demo_options {
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  std::string cache_dir = "models-cache";
  std::size_t epochs = 0;  // 0: the recipe's default
  std::uint64_t seed = 1;
  std::size_t threads = 0;  // 0: all cores (or NNLENS_NUM_THREADS)
  bool retrain = false;
  std::string output_dir = "demo-output";  // pictures (SVG) of the analysis steps
};


/// The subcommand demo (its options and run function).
void register_demo(CLI::App& app, command_list& cmds);

}  // namespace nnlens::tool
