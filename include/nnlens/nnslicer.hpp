// nnlens/nnslicer.hpp -- NNSlicer (docs/specs/nnslicer.md): profiles, dynamic slices (CONTRIB tables),
// slices as masked networks.
#pragma once

#include "nnlens/network/graph.hpp"
#include "nnlens/nnslicer/decision_tree.hpp"
#include "nnlens/nnslicer/nnslicer.hpp"
#include "nnlens/nnslicer/profile.hpp"
#include "nnlens/nnslicer/slice.hpp"

#if defined(NNLENS_EXTERN_TEMPLATES)  // nnlens::precompiled: its forms are calls (nnlens/precompiled/forms.hpp)
#include "nnlens/precompiled/nnslicer.hpp"
#endif
