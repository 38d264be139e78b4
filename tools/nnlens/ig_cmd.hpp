// tools/nnlens/ig_cmd.hpp -- `nnlens ig`: ExactLine's exact integrated gradients
// (docs/exactline-tool.md).
//
//   nnlens ig MODEL --input X.csv --baseline B.csv [--output-index k] [--json] [--m 50]
//             [--max-memory MIB] [--no-samples-to-reach] [--threads N] [--no-progress]
//             [--precision f32|f64] [--layout nchw|nhwc]
//             [--header | --no-header]
//       exact IG of output k (default: the argmax of the output at X) for each line of X, against the
//       same line of B (or B's single line for every X line); Riemann left / right / trapezoid sums
//       with m partitions from the exact pieces, their relative errors, and samples to reach 5 %.
//       Streamed (exact_ig_stream): the pieces are not kept, the attributions and sums accumulate as
//       the line is completed, within --max-memory.
//       Attributions are printed per input element in the data layout (NHWC rows -> NHWC order).
// The CSVs' header rule is `nnlens run`'s (--header / --no-header apply to both files); inputs are
// named by the file lines io::read_csv_rows reports (exactline_common.hpp).
// .nnet models are in raw units (tool::load_model), so the CSVs hold raw inputs.
// Returns the process exit code and throws nnlens::error (naming the CSV file and line) on bad
// input: a wrong width, a non-number, row counts that do not match.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include <nnlens/io/csv.hpp>

#include "cli.hpp"

namespace nnlens::tool {

struct ig_options : model_args {  // --precision's default: f64
  std::string input, baseline;
  std::optional<std::size_t> output_index;  // default: argmax of the output at the input
  bool json = false;
  std::size_t m = 50;
  std::size_t max_memory_mib = 1024;  // the line's budget (line_options::max_memory); 0: unbounded
  bool progress = true;
  bool samples_to_reach = true;  // --no-samples-to-reach: skip the protocol's 3 x 1010 sums
  io::csv_header header = io::csv_header::detect;  // of --input and --baseline
};

/// The subcommand ig (its options and run function).
void register_ig(CLI::App& app, command_list& cmds);

}  // namespace nnlens::tool
