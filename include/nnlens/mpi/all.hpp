// nnlens/mpi/all.hpp -- the MPI scale-out component nnlens::mpi (docs/scale.md): link the CMake
// target nnlens::mpi (MPI::MPI_CXX).  Not part of nnlens.hpp.
#pragma once

#include "nnlens/mpi/communicator.hpp"
#include "nnlens/mpi/coverage.hpp"
#include "nnlens/mpi/difftest.hpp"
#include "nnlens/mpi/exactline.hpp"
#include "nnlens/mpi/reduce.hpp"
#include "nnlens/mpi/serializer.hpp"
#include "nnlens/mpi/slicing.hpp"
