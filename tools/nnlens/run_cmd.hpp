// tools/nnlens/run_cmd.hpp -- `nnlens run`: a model's outputs on CSV samples.
//
//   nnlens run MODEL --input FILE.csv [--output FILE.csv] [--batch N] [--no-progress]
//              [--precision f32|f64] [--layout nchw|nhwc] [--header | --no-header]
//              rows in the model's declared layout; the CSV's first line is a header when every value on
//              it is a non-number, or when --header says so (--no-header: every line is a sample)
// Returns the process exit code and throws nnlens::error on bad input.
#pragma once

#include <cstddef>
#include <string>

#include <nnlens/io/csv.hpp>

#include "cli.hpp"

namespace nnlens::tool {

struct run_options : model_args {
  std::string input, output;  // output "": stdout
  std::size_t batch = 256;
  bool progress = true;
  io::csv_header header = io::csv_header::detect;  // --header: present, --no-header: absent
};

/// The subcommand run (its options and run function).
void register_run(CLI::App& app, command_list& cmds);

}  // namespace nnlens::tool
