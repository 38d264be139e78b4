// tools/nnlens/slice_cmd.hpp -- the NNSlicer subcommands of `nnlens` (docs/nnslicer-tool.md).
//
//   nnlens profile MODEL --data FILE -o PROFILE [--granularity channel|element] [--threads N]
//                  [--batch N] [--no-progress]
//       the mean activation of every neuron over the samples of FILE (nnslicer/profile.hpp), in
//       parallel, written with save_profile; one summary line on standard output.
//   nnlens slice MODEL --profile PROFILE --samples FILE [--target CLASS] [--theta 0.3] [--json]
//                [--synapses OUT.json] [--abs-sum] [--denominator sum|activation] [--cutoff max|first]
//                [--threads N] [--no-progress]
//       the CONTRIB table of the criterion (the samples of FILE; their predicted classes, or CLASS)
//       and the slice sizes per layer; the granularity is the profile's.
// Both take --precision f32|f64 (the model, the forward passes and the analysis in float or double;
// default f32) and --layout nchw|nhwc (the rows of the sample files; default: the model file's
// declared layout).  A profile records the model's fingerprint at its precision: slice refuses a
// profile made with the other precision (the message names it).  slice --json states "precision" and
// "layout"; the CONTRIB of the input's elements (element granularity) is in that data layout, the
// order of the sample files' rows.
// Sample files: a CSV of flattened inputs (as `nnlens run` reads them), or IDX images -- a name
// ending in .idx, idx3-ubyte or either + .gz -- whose unsigned bytes are scaled to [0, 1] (v / 255,
// io::read_idx_images: the demo's LeNet-5 expects exactly that).
// Each returns the process exit code and throws nnlens::error (naming the file, and the line for a
// CSV or a profile) on bad input: an empty samples file, a profile of another model, a target class
// out of range, a malformed profile file.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include <nnlens/io/layout.hpp>
#include <nnlens/nnslicer/nnslicer.hpp>
#include <nnlens/nnslicer/profile.hpp>

#include "cli.hpp"
#include "model.hpp"

namespace nnlens::tool {

struct profile_cmd_options : model_args {
  std::string data, output;
  nnlens::granularity granularity = nnlens::granularity::channel;  // or element
  std::size_t batch = 256;
  bool progress = true;
};

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

/// The subcommands profile and slice (their options and run functions).
void register_profile(CLI::App& app, command_list& cmds);
void register_slice(CLI::App& app, command_list& cmds);

}  // namespace nnlens::tool
