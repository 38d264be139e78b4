// nnlens/exactline.hpp -- ExactLine (docs/specs/exactline.md): exact linear restrictions of a network
// to segments, polylines and planes; exact integrated gradients; exact decision boundaries.
#pragma once

#include "nnlens/exactline/classify.hpp"
#include "nnlens/kernels/envelope.hpp"
#include "nnlens/exactline/gradient.hpp"
#include "nnlens/exactline/ig.hpp"
#include "nnlens/exactline/line.hpp"
#include "nnlens/exactline/plane.hpp"
#include "nnlens/exactline/svg.hpp"

#if defined(NNLENS_EXTERN_TEMPLATES)  // nnlens::precompiled: its forms are calls (nnlens/precompiled/forms.hpp)
#include "nnlens/precompiled/exactline.hpp"
#endif
