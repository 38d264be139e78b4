// nnlens/precompiled.hpp -- every precompiled form (see nnlens/precompiled/forms.hpp): include it,
// define NNLENS_EXTERN_TEMPLATES and link nnlens::precompiled, and the common DynamicNetwork
// analyses compile to calls into that library.  nnlens/nnlens.hpp includes it when
// NNLENS_EXTERN_TEMPLATES is defined; without the macro it declares nothing.
#pragma once

#include "nnlens/precompiled/coverage.hpp"
#include "nnlens/precompiled/exactline.hpp"
#include "nnlens/precompiled/network.hpp"
#include "nnlens/precompiled/nnslicer.hpp"
