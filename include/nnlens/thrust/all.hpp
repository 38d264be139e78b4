// nnlens/thrust/all.hpp -- the whole thrust component (link nnlens::thrust): the policy, the
// device network and its kernels; forward, profile_network, relevance, the coverage mapping and
// importance pass (measure, prepare_idc, ...), exact_lines and DFlare's black boxes (difftest::wrap)
// on execution::thrust.
#pragma once

#include "nnlens/thrust/default.hpp"  // first: specialises execution::default_dispatch under NNLENS_DEFAULT_POLICY_THRUST
#include "nnlens/thrust/black_box.hpp"
#include "nnlens/thrust/coverage.hpp"
#include "nnlens/thrust/exactline.hpp"
#include "nnlens/thrust/forward.hpp"
#include "nnlens/thrust/kernels.hpp"
#include "nnlens/thrust/network.hpp"
#include "nnlens/thrust/policy.hpp"
#include "nnlens/thrust/profile.hpp"
#include "nnlens/thrust/relevance.hpp"
