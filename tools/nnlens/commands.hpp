// tools/nnlens/commands.hpp -- the model subcommands of `nnlens`: info, run, codegen.
//
//   nnlens info MODEL [--json]          the declared input ([N,32,32,3] (nhwc)), the layers
//   nnlens run MODEL --input FILE.csv [--output FILE.csv] [--batch N] [--no-progress]
//              [--precision f32|f64] [--layout nchw|nhwc] [--header | --no-header]
//              rows in the model's declared layout; the CSV's first line is a header when every value on
//              it is a non-number, or when --header says so (--no-header: every line is a sample)
//   nnlens codegen MODEL -o FILE.hpp [--name NAME] [--namespace NS] [--precision f32|f64]
// Each returns the process exit code and throws nnlens::error on bad input.
#pragma once

#include <cstddef>
#include <string>

#include <nnlens/io/csv.hpp>
#include <nnlens/io/layout.hpp>

#include "cli.hpp"
#include "model.hpp"

namespace nnlens::tool {

struct info_options {
  std::string model;
  bool json = false;
};

struct run_options : model_args {
  std::string input, output;  // output "": stdout
  std::size_t batch = 256;
  bool progress = true;
  io::csv_header header = io::csv_header::detect;  // --header: present, --no-header: absent
};

struct codegen_cmd_options {
  std::string model, output, name = "model", ns;
  tool::precision precision = tool::precision::f32;  // f64: double weights (.nnet's float64 values kept)
  bool freestanding = false;       // io/codegen_freestanding.hpp: flash weights, no heap, no exceptions
};

/// The subcommands info, run and codegen (their options and run functions).
void register_info(CLI::App& app, command_list& cmds);
void register_run(CLI::App& app, command_list& cmds);
void register_codegen(CLI::App& app, command_list& cmds);

}  // namespace nnlens::tool
