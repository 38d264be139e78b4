// tools/nnlens/coverage_cmd.hpp -- `nnlens coverage` (docs/coverage-tool.md): DeepImportance's IDC
// and the DeepGauge / surprise criteria beside it (docs/specs/deepimportance.md).
//
//   nnlens coverage MODEL --train FILE [--train-labels FILE] --test FILE [--layer L] [--m 6]
//                   [--criteria idc,nc,kmnc,nbc,snac,tknc,lsc,dsc] [--json] [--state FILE]
//                   [--nc-threshold 0.75] [--kmnc-k 1000] [--tknc-k 3] [--lsc-range spec|reference]
//                   [--threads N] [--no-progress]
//       prepares each criterion on the training set (IDC: the correctly classified training inputs,
//       so the training set needs labels: the IDX labels file beside IDX images, or --train-labels),
//       then measures the coverage of the test set.  --state FILE: load the preparations from FILE
//       when it exists (checked against MODEL and the options), else prepare and save them there;
//       a preparation the file lacks is made from --train and added to it.
//       LSC / DSC are never reported alone: text and JSON ("range": lower, upper, buckets, inputs,
//       in_range, below, above, nan, in_range_fraction) say how many test inputs fell inside the
//       bucket range [lower, upper] (LSA is often negative, below the spec's lower bound 0).
//       --lsc-range spec|reference: LSC's range is the spec's [0, 2000] (default) or the SA
//       reference code's [min LSA of the test set, 2000] (reference_surprise_range).
//       IDC's total is |INCC| exactly (incc_exact()), marked "(capped)" past 2^64 - 1, where the
//       JSON's "total" is SIZE_MAX and "total_capped" is true.
// --precision f32|f64: the model, the forward passes, LRP, k-means, the bounds and the surprise
// models in float (default) or double; --json states it ("precision").  A state file holds the
// model's fingerprint at the precision it was prepared with: one of the other precision is refused
// with a message naming it.  --layout nchw|nhwc: the rows of --train / --test (default: the model
// file's declared layout).
// Sample files as `nnlens profile --data` reads them (CSV, or IDX images scaled to [0, 1]).
// Returns the process exit code; throws nnlens::error (one line naming the file / option) on bad
// input: m larger than the layer, an empty training set, a layer out of range, a state file of
// another model or of other options, an unknown criterion.
#pragma once

#include <cstddef>
#include <string>

#include <nnlens/io/layout.hpp>

#include "cli.hpp"
#include "model.hpp"

namespace nnlens::tool {

struct coverage_cmd_options : model_args {
  std::string train, train_labels, test;
  std::string layer;  // "": the subject layer (the layer feeding the last weighted layer)
  std::size_t m = 6;
  std::string criteria = "idc,nc,kmnc,nbc,snac,tknc,lsc,dsc";
  bool json = false;
  std::string state;  // "": none
  double nc_threshold = 0.75;
  std::size_t kmnc_k = 1000;
  std::size_t tknc_k = 3;
  std::string lsc_range = "spec";  // spec: [0, 2000]; reference: [min LSA of the test set, 2000]
  bool progress = true;
};

/// The subcommand coverage (its options and run function).
void register_coverage(CLI::App& app, command_list& cmds);

}  // namespace nnlens::tool
