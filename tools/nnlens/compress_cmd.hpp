// tools/nnlens/compress_cmd.hpp -- `nnlens compress` (docs/dflare-tool.md): the compressed twins
// of a model (include/nnlens/compress/) that `nnlens difftest` tests against it.
//
//   nnlens compress MODEL (--int8 | --q8 | --prune R | --channel-prune R) -o OUT [--calibration FILE]
//                   [--per-tensor] [--json]
//       writes a compressed twin: pruned twins as a model of the same kind (.onnx, or .nnlw for
//       the demo's LeNet-5), quantised twins as their dequantised float network (the weight-only
//       twin, exact for --q8; for --int8 the int8 activations are not representable in a float
//       file, so the file is the weight-only part and the report says so).  Prints the twin's
//       sparsity / quantised tensors and, with --calibration labelled data, the accuracy of both.
//       --precision f64: the model, the calibration pass, the pruning and the twin in double.  An
//       int8 twin's quantised layers are integer arithmetic with float32 scales (TFLite's scheme)
//       at either precision; only its float fallback layers and the original run in double.  An
//       .onnx output holds float32 weights (the JSON / text says so at f64); .nnlw keeps double.
// Returns the exit code (0: written); throws nnlens::error (one line) on bad input.
#pragma once

#include <string>

#include "cli.hpp"

namespace nnlens::tool {

struct compress_cmd_options : model_args {
  std::string output, calibration, labels;
  bool int8 = false, q8 = false, per_tensor = false, json = false;
  double prune = -1, channel_prune = -1;  // < 0: not asked
};

/// The subcommand compress (its options and run function).
void register_compress(CLI::App& app, command_list& cmds);

}  // namespace nnlens::tool
