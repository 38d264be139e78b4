// nnlens/nnlens.hpp -- the umbrella header: core, layers, networks, training, compression and
// every host analysis (the five techniques: nnslicer.hpp, neusemslice.hpp, exactline.hpp,
// coverage.hpp, difftest.hpp).  Never included from here: the optional parts (io/onnx and its
// exporter, which need protobuf; the thrust and MPI backends), the file readers (io/), and
// difftest/process.hpp (POSIX fork/exec).
#pragma once

#include "nnlens/network.hpp"
#include "nnlens/compress.hpp"
#include "nnlens/coverage.hpp"
#include "nnlens/difftest.hpp"
#include "nnlens/exactline.hpp"
#include "nnlens/neusemslice.hpp"
#include "nnlens/nnslicer.hpp"
#include "nnlens/train.hpp"

#if defined(NNLENS_EXTERN_TEMPLATES)  // nnlens::precompiled: its forms are calls (nnlens/precompiled/forms.hpp)
#include "nnlens/precompiled.hpp"
#endif
