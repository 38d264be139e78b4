// nnlens/difftest.hpp -- DFlare: black-box search for inputs on which a compressed model deviates
// from its original, its baseline, repair, and the compressed twins (docs/dflare.md).
//
//   black_box, wrap(net | callable)                          (difftest/black_box.hpp)
//   mutate: DFlare's seven image operators                   (difftest/mutation.hpp)
//   operator_selector: Metropolis-Hastings selection         (difftest/selection.hpp)
//   dflare([policy,] f, g, seeds, n, options) -> result      (difftest/dflare.hpp)
//   diffchaser([policy,] f, g, seeds, n, options)            (difftest/diffchaser.hpp)
//   train_repair / repaired / cross_validate_repair          (difftest/repair.hpp)
//   compress::quantize / quantize_weights (int8 twins)       (compress/quantize.hpp)
//   compress::magnitude_prune / channel_prune                (compress/magnitude.hpp)
// The external-process adapter (difftest/process.hpp: POSIX pipes) is not included here; include
// it where a model runs in a child process.
#pragma once

#include "nnlens/compress/magnitude.hpp"
#include "nnlens/compress/quantize.hpp"
#include "nnlens/difftest/black_box.hpp"
#include "nnlens/difftest/dflare.hpp"
#include "nnlens/difftest/diffchaser.hpp"
#include "nnlens/difftest/lockstep.hpp"
#include "nnlens/difftest/mutation.hpp"
#include "nnlens/difftest/repair.hpp"
#include "nnlens/difftest/selection.hpp"
