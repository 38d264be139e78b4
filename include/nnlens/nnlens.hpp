// nnlens/nnlens.hpp -- the umbrella header: core, layers, networks and algorithms.
// Optional parts (ONNX I/O, the thrust backend) are never included from here.
#pragma once

#include "nnlens/config.hpp"
#include "nnlens/core/error.hpp"
#include "nnlens/core/execution.hpp"
#include "nnlens/core/shape.hpp"
#include "nnlens/core/tensor.hpp"
#include "nnlens/core/traits.hpp"
#include "nnlens/exactline.hpp"
#include "nnlens/layers/all.hpp"
#include "nnlens/network/cast.hpp"
#include "nnlens/network/dynamic_network.hpp"
#include "nnlens/network/forward.hpp"
#include "nnlens/network/parameters.hpp"
#include "nnlens/network/sequential.hpp"
#include "nnlens/network/trace.hpp"
#include "nnlens/network/validate.hpp"
#include "nnlens/network/visit.hpp"
#include "nnlens/slicing.hpp"
