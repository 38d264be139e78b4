// tools/nnlens/slice_cmd.hpp -- `nnlens slice`: NNSlicer's slice of samples' classes
// (docs/nnslicer-tool.md).
//
//   nnlens slice MODEL --profile PROFILE --samples FILE [--target CLASS] [--theta 0.3] [--json]
//                [--synapses OUT.json] [--abs-sum] [--denominator sum|activation] [--cutoff max|first]
//                [--threads N] [--no-progress] [--precision f32|f64] [--layout nchw|nhwc]
//       the CONTRIB table of the criterion (the samples of FILE; their predicted classes, or CLASS)
//       and the slice sizes per layer; the granularity is the profile's (`nnlens profile`).
// --precision f32|f64: the model, the forward passes and the analysis in float or double (default
// f32).  A profile records the model's fingerprint at its precision: slice refuses a profile made
// with the other precision (the message names it).  --layout nchw|nhwc: the rows of the sample
// file (default: the model file's declared layout).  --json states "precision" and "layout"; the
// CONTRIB of the input's elements (element granularity) is in that data layout, the order of the
// sample file's rows.
// Sample files as `nnlens profile --data` reads them (CSV, or IDX images scaled to [0, 1]).
// Returns the process exit code and throws nnlens::error (naming the file, and the line for a CSV
// or a profile) on bad input: an empty samples file, a profile of another model, a target class
// out of range, a malformed profile file.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include <nnlens/nnslicer/nnslicer.hpp>

#include "cli.hpp"

namespace nnlens::tool {

struct slice_cmd_options : model_args {
  std::string profile, samples;
  std::optional<std::size_t> target;  // default: each sample's predicted class
  double theta = 0.3;
  bool json = false;
  std::string synapses;  // "": not written
  bool abs_sum = false;
  theta_denominator denominator = theta_denominator::sum;  // or activation
  theta_cutoff cutoff = theta_cutoff::max_index;           // or first_violation (--cutoff first)
  bool progress = true;
};

/// The subcommand slice (its options and run function).
void register_slice(CLI::App& app, command_list& cmds);

}  // namespace nnlens::tool
