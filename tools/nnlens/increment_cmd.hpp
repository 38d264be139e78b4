// tools/nnlens/increment_cmd.hpp -- `nnlens increment`: NeuSemSlice's incremental development
// (docs/neusemslice-tool.md; docs/specs/neusemslice.md#4-maintenance-applications), built on
// include/nnlens/neusemslice/increment.hpp.
//
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
// The options the three maintenance commands share (--data ... --precision, --layout, --threads):
// maintenance_common.hpp.
// Returns the process exit code; throws nnlens::error (one line naming the file / option) on
// bad input.
#pragma once

#include <cstddef>
#include <string>

#include "cli.hpp"
#include "maintenance_common.hpp"

namespace nnlens::tool {

struct increment_cmd_options : maintenance_common {
  std::string old_data, old_labels, old_test, old_test_labels;
  std::string old_classes;          // "": the classes present in --old-data; else only their samples
  std::string new_classes;          // "": every sample of --data / --test; else only these classes
  double replay = 0;                // fraction of the old samples added to the new task's
};

/// The subcommand increment (its options and run function).
void register_increment(CLI::App& app, command_list& cmds);

}  // namespace nnlens::tool
