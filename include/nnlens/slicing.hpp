// nnlens/slicing.hpp -- NNSlicer (specs/nnslicer.md): profiles, dynamic slices (CONTRIB tables),
// slices as masked networks.
#pragma once

#include "nnlens/slicing/graph.hpp"
#include "nnlens/slicing/nnslicer.hpp"
#include "nnlens/slicing/profile.hpp"
#include "nnlens/slicing/slice.hpp"
