// nnlens/train.hpp -- training on the same networks: losses, SGD/Adam, parameter masks (freeze /
// train-only), fit loops, and the white-box L-inf attacks (FGSM/BIM/PGD) built on the loss gradient.
#pragma once

#include "nnlens/train/attacks.hpp"
#include "nnlens/train/fit.hpp"
#include "nnlens/train/loss.hpp"
#include "nnlens/train/mask.hpp"
#include "nnlens/train/optimizer.hpp"
