// tools/nnlens/maintenance_cmd.hpp -- NeuSemSlice's maintenance tasks from the command line
// (docs/neusemslice-tool.md; specs/neusemslice.md §4): `nnlens restructure`, `nnlens readapt`,
// `nnlens increment`, built on include/nnlens/neusemslice/{restructure,readapt,increment}.hpp.
//
//   nnlens restructure MODEL --data FILE [--labels FILE] --test FILE [--test-labels FILE]
//                      [--mask MASK | --metric taylor --theta 0.95 ... | --no-slice]
//                      [--pruner lamp|global|uniform|erk] [--prune-step 0.05] [--max-drop 1]
//                      [--max-iterations 60] [--epochs 1] [--lr 1e-4] [--batch 64] [--seed 0]
//                      [--baseline] [--json] -o OUT
//       masks the non-critical neurons (a mask read with --mask, or sliced on --data), then prunes
//       p of the remaining weights per iteration and fine-tunes on --data, while the accuracy on
//       --test stays >= the model's - max-drop; writes the last accepted network to OUT.
//       --baseline: the pruner alone as well (same options), for comparison.
//   nnlens readapt MODEL --data FILE [--labels FILE] [--test FILE [--test-labels FILE]]
//                  [--mask MASK | slice options | --full] [--attack fgsm|pgd] [--eps 0.1]
//                  [--pgd-steps 10] [--adv-samples 1000] [--epochs 5] [--lr 1e-3] [--batch 64]
//                  [--seed 1] [--baseline] [--json] -o OUT
//       adversarial re-adaptation training only the critical neurons' parameters: TPR, RA, RAA,
//       clean accuracy before / after.  --baseline: full retraining as well.
//   nnlens increment MODEL --data NEW [--labels FILE] --old-data OLD [--old-labels FILE]
//                    [--old-classes 0,1,...] [--new-classes 5,6,...]
//                    [--mask MASK | slice options | --retrain] [--replay 0.1]
//                    [--test FILE [--test-labels FILE]] [--old-test FILE [--old-test-labels FILE]]
//                    [--epochs 5] [--lr 1e-3] [--batch 64] [--seed 1]
//                    [--baseline] [--json] -o OUT
//       learns the new task (--data) while the old task's critical neurons (sliced on --old-data
//       for --old-classes, or --mask; the output unit keeps the old classes) stay frozen;
//       --replay F adds F of the old samples.  Old / new task accuracy and their mean, the trained
//       fraction, frozen_changed (0).  --baseline: Retrain (every parameter) as well.
// Slice options, as `nnlens semslice`: --metric, --theta, --similarity, --categories, --samples,
// --metric-samples, --seed.  Common: --batch, --limit N (the first N samples of each data file),
// --precision f32|f64 (the model, the slice, the training and the accuracies in float or double;
// .nnlw output keeps the scalar, .onnx output holds float32 weights), --layout nchw|nhwc (the data
// files' rows; default: what the model file declares), --threads, --no-progress.  OUT: .nnlw (the project's weights format; the tool reads it back for
// the demo's LeNet-5 architecture) or .onnx (any model; builds with ONNX).
// Each returns the process exit code; throws nnlens::error (one line naming the file / option) on
// bad input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <nnlens/io/layout.hpp>

#include "cli.hpp"
#include "model.hpp"

namespace nnlens::tool {

/// Where the neuron mask comes from: a mask file, or `semslice` with these options.
struct mask_choice {
  std::string mask;                 // read this mask (nnlens semslice -o) instead of slicing
  std::string metric = "taylor";    // avg, var, ens, taylor, deeplift
  double theta = 0.95;
  std::string similarity = "cka";   // cka, uncentered, unbiased
  std::string categories;           // "": every class (increment: the old classes)
  std::size_t samples = 500;        // Gram samples per category
  std::size_t metric_samples = 0;   // 0: all of D_c
  std::uint64_t slice_seed = 0;
  bool none = false;                // --no-slice / --full / --retrain: no mask
};

/// The data, training and output options the three commands share.
struct maintenance_common : model_args {
  std::string data, labels, test, test_labels, output;
  mask_choice slice;
  std::size_t epochs = 0;           // 0: the command's default
  double lr = -1;                   // < 0: the command's default
  std::size_t batch = 64;
  std::size_t limit = 0;            // at most the first N samples of each data file (0: all)
  std::uint64_t seed = 0;
  bool seed_given = false;          // --seed was given (else the slice's draws use seed 0)
  bool baseline = false, json = false, progress = true;
};

struct restructure_cmd_options : maintenance_common {
  std::string pruner = "lamp";      // lamp, global, uniform, erk
  double prune_step = 0.05;         // p
  double max_drop = 1.0;            // tolerance (accuracy points)
  std::size_t max_iterations = 60;
};

struct readapt_cmd_options : maintenance_common {
  std::string attack = "fgsm";      // fgsm, pgd
  double eps = 0.1;
  std::size_t pgd_steps = 10;
  std::size_t adv_samples = 1000;
};

struct increment_cmd_options : maintenance_common {
  std::string old_data, old_labels, old_test, old_test_labels;
  std::string old_classes;          // "": the classes present in --old-data; else only their samples
  std::string new_classes;          // "": every sample of --data / --test; else only these classes
  double replay = 0;                // fraction of the old samples added to the new task's
};

/// The subcommands restructure, readapt and increment (their options and run functions).
void register_restructure(CLI::App& app, command_list& cmds);
void register_readapt(CLI::App& app, command_list& cmds);
void register_increment(CLI::App& app, command_list& cmds);

}  // namespace nnlens::tool
