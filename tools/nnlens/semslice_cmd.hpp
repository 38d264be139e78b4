// tools/nnlens/semslice_cmd.hpp -- `nnlens semslice` (docs/neusemslice-tool.md): NeuSemSlice's
// critical neurons of a classifier (docs/specs/neusemslice.md#2-algorithm; include/nnlens/neusemslice/semslice.hpp).
//
//   nnlens semslice MODEL --data FILE [--labels FILE] [--metric taylor] [--theta 0.95]
//                   [--similarity cka|uncentered|unbiased] [--categories 0,1,...] [--samples 500]
//                   [--metric-samples N] [--step N] [--seed S] [--test FILE [--test-labels FILE]]
//                   [--precision f32|f64] [--layout nchw|nhwc] [--json] [-o MASK] [--threads N]
//       slices MODEL on the labelled samples of --data: per hidden Dense/Conv2D layer the union over
//       the categories of the neurons whose Gram matrix reaches CKA similarity theta with the
//       layer's; prints the critical neurons per layer (and k per category), the parameters kept
//       and the compression rate; -o writes the mask (save_neuron_mask).  --test: the accuracy of
//       the model and of the masked model on those labelled samples.
//   nnlens semslice MODEL --mask MASK --data FILE [--labels FILE] [--json]
//       evaluates an existing mask instead: its per-layer counts, parameters, and the accuracy of
//       the model and of the masked model on --data.
// --precision: the model, the metric, the Gram matrices and CKA, and the accuracies in float (f32,
// the default) or double (f64); --json states it ("precision").  A mask made with the other precision
// of the same model file is accepted (a mask is which neurons are kept).
// Sample files as `nnlens profile --data` reads them (CSV, or IDX images scaled to [0, 1]; rows in
// the model's declared layout, or --layout's); labels
// as `nnlens coverage --train-labels` reads them (default: the IDX labels file beside IDX images).
// Returns the process exit code; throws nnlens::error (one line naming the file / option) on bad
// input: theta outside (0, 1], a category with no samples or not an output class, a mask of another
// model, missing labels, bad files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <nnlens/io/layout.hpp>

#include "cli.hpp"
#include "model.hpp"

namespace nnlens::tool {

struct semslice_cmd_options : model_args {
  std::string data, labels;
  std::string metric = "taylor";        // avg, var, ens, taylor, deeplift
  double theta = 0.95;
  std::string similarity = "cka";       // cka, uncentered, unbiased
  std::string categories;               // "": every output class
  std::size_t samples = 500;            // Gram samples per category (A9)
  std::size_t metric_samples = 0;       // 0: the metric on all of D_c
  std::size_t step = 0;                 // 0: max(1, ceil(1% of the layer))
  std::uint64_t seed = 0;
  std::string test, test_labels;        // accuracy of the masked model on these
  std::string mask;                     // evaluate this mask instead of slicing
  std::string output;                   // -o: write the mask here
  bool json = false;
};

/// The subcommand semslice (its options and run function).
void register_semslice(CLI::App& app, command_list& cmds);

}  // namespace nnlens::tool
