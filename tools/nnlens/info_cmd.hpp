// tools/nnlens/info_cmd.hpp -- `nnlens info`: what a model file holds.
//
//   nnlens info MODEL [--json]          the declared input ([N,32,32,3] (nhwc)), the layers, their
//                                       output shapes and parameter counts
// Returns the process exit code and throws nnlens::error on bad input.
#pragma once

#include <string>

#include "cli.hpp"

namespace nnlens::tool {

struct info_options {
  std::string model;
  bool json = false;
};

/// The subcommand info (its options and run function).
void register_info(CLI::App& app, command_list& cmds);

}  // namespace nnlens::tool
