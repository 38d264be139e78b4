// tools/nnlens/profile_cmd.hpp -- `nnlens profile`: NNSlicer's profile of a model
// (docs/nnslicer-tool.md).
//
//   nnlens profile MODEL --data FILE -o PROFILE [--granularity channel|element] [--threads N]
//                  [--batch N] [--no-progress] [--precision f32|f64] [--layout nchw|nhwc]
//       the mean activation of every neuron over the samples of FILE (nnslicer/profile.hpp), in
//       parallel, written with save_profile; one summary line on standard output.
// --precision f32|f64: the model, the forward passes and the profile in float or double (default
// f32); the profile records the model's fingerprint at that precision (`nnlens slice` refuses a
// profile made with the other one).  --layout nchw|nhwc: the rows of FILE (default: the model
// file's declared layout).
// Sample files: a CSV of flattened inputs (as `nnlens run` reads them), or IDX images -- a name
// ending in .idx, idx3-ubyte or either + .gz -- whose unsigned bytes are scaled to [0, 1] (v / 255,
// io::read_idx_images: the demo's LeNet-5 expects exactly that).
// Under mpirun (builds with MPI, docs/scale.md) the ranks profile blocks of the samples; rank 0
// merges and writes.
// Returns the process exit code and throws nnlens::error (naming the file, and the line for a CSV)
// on bad input: an empty samples file, a non-finite activation.
#pragma once

#include <cstddef>
#include <string>

#include <nnlens/nnslicer/profile.hpp>

#include "cli.hpp"

namespace nnlens::tool {

struct profile_cmd_options : model_args {
  std::string data, output;
  nnlens::granularity granularity = nnlens::granularity::channel;  // or element
  std::size_t batch = 256;
  bool progress = true;
};

/// The subcommand profile (its options and run function).
void register_profile(CLI::App& app, command_list& cmds);

}  // namespace nnlens::tool
