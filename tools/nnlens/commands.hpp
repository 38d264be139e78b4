// tools/nnlens/commands.hpp -- the model subcommands of `nnlens`: info, run, codegen.
//
//   nnlens info MODEL [--json]
//   nnlens run MODEL --input FILE.csv [--output FILE.csv] [--batch N] [--no-progress]
//   nnlens codegen MODEL -o FILE.hpp [--name NAME] [--namespace NS]
// Each returns the process exit code and throws nnlens::error on bad input.
#pragma once

#include <cstddef>
#include <string>

namespace nnlens::tool {

struct info_options {
  std::string model;
  bool json = false;
};
int run_info(const info_options& o);

struct run_options {
  std::string model, input, output;  // output "": stdout
  std::size_t batch = 256;
  bool progress = true;
};
int run_run(const run_options& o);

struct codegen_cmd_options {
  std::string model, output, name = "model", ns;
};
int run_codegen(const codegen_cmd_options& o);

}  // namespace nnlens::tool
