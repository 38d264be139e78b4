// tools/nnlens/difftest_cmd.hpp -- `nnlens difftest` (docs/dflare-tool.md): DFlare's differential
// testing of a model against its compressed twin (docs/specs/dflare.md; include/nnlens/difftest/); the
// twins themselves are `nnlens compress`'s (compress_cmd.hpp, include/nnlens/compress/).
//
//   nnlens difftest ORIGINAL COMPRESSED --seeds FILE [--budget-queries N] [--timeout S]
//                   [--method dflare|diffchaser] [--acceptance paper|reference|no-novelty]
//                   [--selection paper|reference|last-accepted|uniform] [--distance paper|logit-margin]
//                   [--skip-repeats] [--seed S]
//                   [--pixel-scale 255] [--calibration FILE] [--limit N] [--out-dir DIR]
//                   [--threads N] [--json] [--no-progress]
//       COMPRESSED is one of
//         FILE              another model file (ONNX, NNet, .nnlw): e.g. `nnlens compress` output
//         exec:COMMAND      an external process speaking the "nnlens-bb 1" pipe protocol
//                           (difftest/process.hpp, docs/difftest-process.md), run by /bin/sh -c
//         int8 | q8 | prune:R | channel-prune:R
//                           a twin of ORIGINAL made on the fly: full int8 inference (activations
//                           calibrated on --calibration, default the seeds), DFlare's reference
//                           rule (weight-only int8 of tensors with >= 1024 elements), R of the
//                           weights pruned by magnitude, R of the channels by L1 norm
//       The seeds (CSV rows or IDX images scaled to [0, 1], as `nnlens run` reads them) are
//       multiplied by --pixel-scale for the search, which mutates raw pixels in [0, 255], and the
//       models see pixels / scale (--pixel-scale 1: models that read [0, 255]).  Per seed: found,
//       queries, seconds, the two labels, and with --out-dir the triggering input as a CSV row
//       in DIR/trigger-<seed>.csv (model-scale values: `nnlens run` reproduces the deviation).
//       JSON: {"seeds":[{"seed":i,"status":..,"found":b,"queries":n,"seconds":s,"labels":[a,b],
//       "input":FILE}],"summary":{"seeds":..,"success_rate":r,"mean_queries":q,"mean_seconds":s,..}}
//       --distance logit-margin and --skip-repeats: DFlare's two options beyond the spec, off by
//       default (dflare_options::distance = distance_measure::logit_margin: D is the relative gap of
//       the two models' logit margins; dflare_options::skip_repeats: a mutant equal to x_max or to
//       one already queried since x_max changed is not queried); --method dflare only.  The JSON's
//       summary echoes "acceptance", "selection", "distance" and "skip_repeats".
//       A seed whose black box fails (a crashed or hanging child, garbage) is reported with
//       "status":"failed" and its error; the others still run.
//       --precision f32|f64: ORIGINAL and a model-file or on-the-fly twin are evaluated in float or
//       double.  DFlare's search itself is float: the black-box interface (difftest/black_box.hpp)
//       passes float pixels in and float probabilities out, so at f64 the models see the float
//       pixels / scale and their probabilities are rounded to float before the labels are taken.
//       --layout nchw|nhwc: the rows of --seeds and --calibration (default: ORIGINAL's declared
//       layout).  The search mutates the internal C x H x W image; the triggering inputs written
//       to --out-dir, and the rows an exec: child receives, are in the data layout.
// Returns the exit code: 0 = every searched seed found a triggering input, 1 = some seed did not;
// throws nnlens::error (one line) on bad input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "cli.hpp"

namespace nnlens::tool {

struct difftest_cmd_options : model_args {  // model: ORIGINAL
  std::string compressed, seeds, calibration, out_dir;
  std::string method = "dflare";       // dflare, diffchaser
  std::string acceptance = "paper";    // paper, reference, no-novelty
  std::string selection = "paper";     // paper, reference, last-accepted, uniform
  std::string distance = "paper";      // paper (D: top-1 probabilities), logit-margin (beyond the spec)
  bool skip_repeats = false;           // beyond the spec: known mutants are not queried
  std::size_t budget_queries = 10000;  // per seed; 0: none
  double timeout = 180;                // seconds per seed; 0: none
  std::uint64_t seed = 1;
  double pixel_scale = 255;
  std::size_t limit = 0;               // the first N seeds only (0: all)
  bool json = false, progress = true;
};

/// The subcommand difftest (its options and run function).
void register_difftest(CLI::App& app, command_list& cmds);

}  // namespace nnlens::tool
