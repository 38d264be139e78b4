// tools/nnlens/readapt_cmd.hpp -- `nnlens readapt`: NeuSemSlice's adversarial re-adaptation
// (docs/neusemslice-tool.md; docs/specs/neusemslice.md#4-maintenance-applications), built on
// include/nnlens/neusemslice/readapt.hpp.
//
//   nnlens readapt MODEL --data FILE [--labels FILE] [--test FILE [--test-labels FILE]]
//                  [--mask MASK | slice options | --full] [--attack fgsm|pgd] [--eps 0.1]
//                  [--pgd-steps 10] [--adv-samples 1000] [--epochs 5] [--lr 1e-3] [--batch 64]
//                  [--seed 1] [--baseline] [--json] -o OUT
//       adversarial re-adaptation training only the critical neurons' parameters: TPR, RA, RAA,
//       clean accuracy before / after.  --baseline: full retraining as well.
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

struct readapt_cmd_options : maintenance_common {
  std::string attack = "fgsm";      // fgsm, pgd
  double eps = 0.1;
  std::size_t pgd_steps = 10;
  std::size_t adv_samples = 1000;
};

/// The subcommand readapt (its options and run function).
void register_readapt(CLI::App& app, command_list& cmds);

}  // namespace nnlens::tool
