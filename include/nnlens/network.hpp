// nnlens/network.hpp -- the network alone: every op (layers/), the static Sequential and the
// run-time DynamicNetwork, forward, initialisation and parameters, casts, traces, the run-time
// graph.  No analysis: a program that builds, loads or runs networks includes this header, and
// each technique's own header (nnlens/exactline.hpp, nnslicer.hpp, ...) adds what it uses;
// nnlens/nnlens.hpp is all of them.  Measured (g++ 12 -O2): this header costs about 1.1x an
// xtensor hello-world to compile, nnlens/nnlens.hpp 2.1-2.3x.
#pragma once

#include "nnlens/config.hpp"
#include "nnlens/core/error.hpp"
#include "nnlens/core/execution.hpp"
#include "nnlens/core/shape.hpp"
#include "nnlens/core/tensor.hpp"
#include "nnlens/core/traits.hpp"
#include "nnlens/layers/all.hpp"
#include "nnlens/network/cast.hpp"
#include "nnlens/network/dynamic_network.hpp"
#include "nnlens/network/fingerprint.hpp"
#include "nnlens/network/forward.hpp"
#include "nnlens/network/graph.hpp"
#include "nnlens/network/parameters.hpp"
#include "nnlens/network/sequential.hpp"
#include "nnlens/network/trace.hpp"
#include "nnlens/network/units.hpp"
#include "nnlens/network/validate.hpp"
#include "nnlens/network/visit.hpp"

#if defined(NNLENS_EXTERN_TEMPLATES)  // nnlens::precompiled: its forms are calls (nnlens/precompiled/forms.hpp)
#include "nnlens/precompiled/network.hpp"
#endif
