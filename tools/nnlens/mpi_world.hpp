// tools/nnlens/mpi_world.hpp -- the tool under mpirun (docs/scale.md).  Compiled only with
// NNLENS_TOOL_HAS_MPI (the nnlens::mpi component was found).
//
//   nnlens::tool::mpi_world world;   // engaged only under mpirun with more than one rank
//   if (world) ... world->rank(), *world ...
//
// A subcommand that supports MPI opens it first (open_mpi_world): under mpirun (mpi::launched_by_mpirun) it
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

/// open_mpi_world's world as an object: false outside mpirun (or with one rank), else the
/// communicator of the ranks.
class mpi_world {
 public:
  mpi_world() { open_mpi_world(world_); }
  explicit operator bool() const { return world_.has_value(); }
  nnlens::mpi::communicator& operator*() { return *world_; }
  nnlens::mpi::communicator* operator->() { return &*world_; }

 private:
  std::optional<nnlens::mpi::communicator> world_;
};

}  // namespace nnlens::tool
