// tools/nnlens/exactline_cmd.hpp -- the ExactLine subcommands of `nnlens` (docs/exactline-tool.md).
//
//   nnlens exact-line MODEL --from A.csv --to B.csv [--json] [--classes argmax|argmin] [--threads N]
//                     [--merge-tol X] [--max-pieces N] [--validate] [--svg FILE]
//       line i of A -> line i of B is segment i (flattened inputs, as `nnlens run` reads them);
//       exact_lines over the segments in parallel, keep_going: a failed segment is reported in the
//       output ("error") and, after everything is printed, as the tool's error (exit 1).
//   nnlens ig MODEL --input X.csv --baseline B.csv [--output-index k] [--json] [--m 50]
//       exact IG of output k (default: the argmax of the output at X) for each line of X, against the
//       same line of B (or B's single line for every X line); Riemann left / right / trapezoid sums
//       with m partitions from the exact pieces, their relative errors, and samples to reach 5 %.
// .nnet models are in raw units (tool::load_model), so the CSVs hold raw inputs.
// Each returns the process exit code and throws nnlens::error (naming the CSV file and line) on bad
// input: a wrong width, a non-number, P == Q, row counts that do not match.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace nnlens::tool {

struct exact_line_options {
  std::string model, from, to;
  std::string precision = "f64", layout;  // layout "": the model's declared layout
  bool json = false;
  std::string classes = "argmax";  // or "argmin" (ACAS Xu: the advisory is the minimal score)
  double merge_tol = 0;
  std::size_t max_pieces = std::size_t(1) << 24;
  bool validate = false;
  std::string svg;  // "": no chart
};
int run_exact_line(const exact_line_options& o);

struct ig_options {
  std::string model, input, baseline;
  std::string precision = "f64", layout;  // layout "": the model's declared layout
  std::optional<std::size_t> output_index;  // default: argmax of the output at the input
  bool json = false;
  std::size_t m = 50;
};
int run_ig(const ig_options& o);

}  // namespace nnlens::tool
