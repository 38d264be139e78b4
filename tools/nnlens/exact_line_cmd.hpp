// tools/nnlens/exact_line_cmd.hpp -- `nnlens exact-line`: ExactLine's pieces and class intervals of
// a network on segments (docs/exactline-tool.md).
//
//   nnlens exact-line MODEL --from A.csv --to B.csv [--json] [--classes argmax|argmin] [--threads N]
//                     [--merge-tol X] [--max-pieces N] [--max-memory MIB] [--validate] [--validate-tol X]
//                     [--svg FILE] [--pieces FILE] [--no-progress]
//                     [--precision f32|f64] [--layout nchw|nhwc] [--header | --no-header]
//       line i of A -> line i of B is segment i (rows in the model's declared layout, as `nnlens run`
//       reads them); exact_lines over the segments in parallel at the precision (default f64: the
//       model in double, .nnet weights as the file's float64 values), keep_going: a failed segment
//       is reported in the output ("error") and, after everything is printed, as the tool's error
//       (exit 1).  A --validate violation fails the command too (exit 1, JSON "valid": false).
//       Endpoints outside the model's declared input range (.nnet: the clamp box) are warned about
//       and validated (a violation fails the segment); beyond resolution_limit half-widths (what
//       the precision resolves: 1.1e4 in f64, 21 in f32) the segment fails before it runs.
// The CSVs' header rule is `nnlens run`'s (--header / --no-header apply to both files); segments are
// named by the file lines io::read_csv_rows reports (exactline_common.hpp).
// .nnet models are in raw units (tool::load_model), so the CSVs hold raw inputs.
// Returns the process exit code and throws nnlens::error (naming the CSV file and line) on bad
// input: a wrong width, a non-number, P == Q, row counts that do not match, --merge-tol outside
// [0, 1].
#pragma once

#include <cstddef>
#include <string>

#include <nnlens/exactline/classify.hpp>
#include <nnlens/io/csv.hpp>

#include "cli.hpp"

namespace nnlens::tool {

struct exact_line_options : model_args {  // --precision's default: f64
  std::string from, to;
  bool json = false;
  class_rule classes = class_rule::argmax;  // or argmin (ACAS Xu: the advisory is the minimal score)
  double merge_tol = 0;
  std::size_t max_pieces = std::size_t(1) << 24;
  std::size_t max_memory_mib = 1024;  // values in flight, all segments together; 0: unbounded
  bool validate = false;
  double validate_tol = 0;  // 0: the precision's default (f64 1e-9, f32 1e-3)
  std::string svg;  // "": no chart
  std::string pieces;  // "": rows kept in memory; else every row written to this file as it comes
  bool progress = true;  // a progress bar on stderr (share of t covered, rows so far)
  io::csv_header header = io::csv_header::detect;  // of --from and --to
};

/// The subcommand exact-line (its options and run function).
void register_exact_line(CLI::App& app, command_list& cmds);

}  // namespace nnlens::tool
