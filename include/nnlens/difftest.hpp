// nnlens/difftest.hpp -- DFlare (specs/dflare.md): black-box differential testing of a compressed
// model against its original; mutation operators, seed selection, DiffChaser as the baseline, the
// repair study, and the lockstep batch search.  The POSIX process boxes (difftest/process.hpp:
// a model behind an external command) are not included here: include them where fork/exec exist.
#pragma once

#include "nnlens/difftest/black_box.hpp"
#include "nnlens/difftest/dflare.hpp"
#include "nnlens/difftest/diffchaser.hpp"
#include "nnlens/difftest/lockstep.hpp"
#include "nnlens/difftest/mutation.hpp"
#include "nnlens/difftest/repair.hpp"
#include "nnlens/difftest/selection.hpp"
