// src/precompiled/exactline.cpp -- part of nnlens::precompiled: one explicit instantiation of each form
// listed in nnlens/precompiled/exactline.hpp (which declares them `extern` first: this library is built with
// NNLENS_EXTERN_TEMPLATES, like its users, so each of its objects instantiates only its own list).
#include "nnlens/precompiled/exactline.hpp"

namespace nnlens {
NNLENS_PRECOMPILED_EXACTLINE(template)
}  // namespace nnlens
