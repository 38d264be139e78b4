// tools/nnlens/mpi_world.hpp -- the tool under mpirun (docs/scale.md).  Compiled only with
// NNLENS_TOOL_HAS_MPI (the nnlens::mpi component was found).
//
//   std::optional<nnlens::mpi::communicator> world;
//   nnlens::tool::open_mpi_world(world);   // engaged only under mpirun with more than one rank
//
// A subcommand that supports MPI calls it first: under mpirun (mpi::launched_by_mpirun) it
// initialises MPI; with one rank it finalises again and the subcommand runs as always.  With more,
// each rank gets its share of the cores for its thread pool (hardware threads / ranks on the node)
// unless --threads, NNLENS_NUM_THREADS or OMP_NUM_THREADS says otherwise; the subcommand shards
// its work (mpi::map_reduce), and rank 0 alone writes the output.  A plain run never calls MPI.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>

#include <nnlens/mpi/communicator.hpp>

namespace nnlens::tool {

inline void open_mpi_world(std::optional<nnlens::mpi::communicator>& world) {
  if (!nnlens::mpi::launched_by_mpirun()) return;
  world.emplace();
  if (world->size() == 1) {
    world.reset();
    return;
  }
  if (!std::getenv("NNLENS_NUM_THREADS") && !std::getenv("OMP_NUM_THREADS")) {
    const std::size_t hw = std::max(1u, std::thread::hardware_concurrency());
    const std::size_t share = std::max<std::size_t>(1, hw / nnlens::mpi::launcher_local_size());
    ::setenv("NNLENS_NUM_THREADS", std::to_string(share).c_str(), 1);
  }
}

}  // namespace nnlens::tool
