// tools/nnlens/restructure_cmd.hpp -- `nnlens restructure`: NeuSemSlice's restructuring of a model
// (docs/neusemslice-tool.md; docs/specs/neusemslice.md#4-maintenance-applications), built on
// include/nnlens/neusemslice/restructure.hpp.
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

struct restructure_cmd_options : maintenance_common {
  std::string pruner = "lamp";      // lamp, global, uniform, erk
  double prune_step = 0.05;         // p
  double max_drop = 1.0;            // tolerance (accuracy points)
  std::size_t max_iterations = 60;
};

/// The subcommand restructure (its options and run function).
void register_restructure(CLI::App& app, command_list& cmds);

}  // namespace nnlens::tool
