// nnlens/compress.hpp -- compressed twins of a network: int8 quantisation, magnitude / LAMP / ERK
// pruning, and global magnitude pruning (the models DFlare tests against their originals).
#pragma once

#include "nnlens/compress/magnitude.hpp"
#include "nnlens/compress/pruning.hpp"
#include "nnlens/compress/quantize.hpp"
