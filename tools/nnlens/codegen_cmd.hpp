// tools/nnlens/codegen_cmd.hpp -- `nnlens codegen`: a C++ header with the static network.
//
//   nnlens codegen MODEL -o FILE.hpp [--name NAME] [--namespace NS] [--precision f32|f64]
//                  [--freestanding]
// Returns the process exit code and throws nnlens::error on bad input.
#pragma once

#include <string>

#include "cli.hpp"
#include "model.hpp"

namespace nnlens::tool {

struct codegen_cmd_options {
  std::string model, output, name = "model", ns;
  tool::precision precision = tool::precision::f32;  // f64: double weights (.nnet's float64 values kept)
  bool freestanding = false;       // io/codegen_freestanding.hpp: flash weights, no heap, no exceptions
};

/// The subcommand codegen (its options and run function).
void register_codegen(CLI::App& app, command_list& cmds);

}  // namespace nnlens::tool
