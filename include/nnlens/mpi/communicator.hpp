// nnlens/mpi/communicator.hpp -- an MPI communicator as an RAII value (opt-in component
// nnlens::mpi, CMake target nnlens::mpi; kept out of nnlens.hpp; docs/scale.md).
//
//   nnlens::mpi::communicator comm(argc, argv);   // MPI_Init_thread (FUNNELED) ... MPI_Finalize
//   comm.rank(), comm.size(), comm.barrier()
//   comm.gather_bytes(buf, root)                  // MPI_Gatherv of byte buffers: root gets size()
//   comm.broadcast_bytes(buf, root)               // MPI_Bcast of a byte buffer (its size first)
//   mpi::launched_by_mpirun()                     // the environment of mpirun / srun / hydra
//
// A communicator that initialised MPI finalises it; one made from an existing MPI_Comm (or made
// while MPI was already initialised) never does.  Only the thread that made it calls MPI
// (MPI_THREAD_FUNNELED): the analyses' own thread pools never do.  MPI errors abort (the default
// MPI_ERRORS_ARE_FATAL handler); buffers larger than INT_MAX bytes throw nnlens::limit_error.
#pragma once

// The C API only: Open MPI's and MPICH's deprecated C++ bindings warn under -Wextra.
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>

#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "nnlens/core/error.hpp"

namespace nnlens::mpi {

/// True when this process was started by an MPI launcher (Open MPI's mpirun, PMIx, Slurm's srun,
/// MPICH's hydra): the tool initialises MPI only then, so a plain run never pays MPI_Init.
inline bool launched_by_mpirun() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "PMI_RANK"})
    if (std::getenv(v)) return true;
  return false;
}

/// The number of ranks on this node as the launcher reports it (1 when unknown): a rank's share
/// of the cores is hardware_concurrency / local_size.
inline std::size_t launcher_local_size() {
  for (const char* v : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE"})
    if (const char* s = std::getenv(v)) {
      const long n = std::strtol(s, nullptr, 10);
      if (n > 0) return std::size_t(n);
    }
  return 1;
}

class communicator {
 public:
  /// MPI_COMM_WORLD; initialises MPI unless it already is.
  communicator() { init(nullptr, nullptr); }
  communicator(int& argc, char**& argv) { init(&argc, &argv); }
  /// Borrows an existing communicator (MPI must be initialised); never finalises.
  explicit communicator(MPI_Comm c) : comm_(c) {
    int ok = 0;
    MPI_Initialized(&ok);
    if (!ok) throw logic_error("mpi::communicator(MPI_Comm): MPI is not initialised");
    query();
  }
  communicator(const communicator&) = delete;
  communicator& operator=(const communicator&) = delete;
  ~communicator() {
    int done = 0;
    MPI_Finalized(&done);
    if (owner_ && !done) MPI_Finalize();
  }

  int rank() const { return rank_; }
  int size() const { return size_; }
  MPI_Comm get() const { return comm_; }
  /// True when this object initialised MPI (and will finalise it).
  bool owns_mpi() const { return owner_; }
  void barrier() const { MPI_Barrier(comm_); }

  /// MPI_Gatherv of every rank's bytes to root: on root, size() buffers in rank order; elsewhere
  /// an empty vector.
  std::vector<std::vector<char>> gather_bytes(const std::vector<char>& local, int root = 0) const {
    check_root(root);
    const int n = count(local.size(), "gather_bytes");
    std::vector<int> counts(rank_ == root ? std::size_t(size_) : 0), displs;
    MPI_Gather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, root, comm_);
    std::vector<char> all;
    if (rank_ == root) {
      displs.resize(counts.size());
      std::uint64_t total = 0;
      for (std::size_t r = 0; r < counts.size(); ++r) displs[r] = int(total), total += std::uint64_t(counts[r]);
      count(std::size_t(total), "gather_bytes (all ranks together)");
      all.resize(std::size_t(total));
    }
    MPI_Gatherv(local.data(), n, MPI_BYTE, all.data(), counts.data(), displs.data(), MPI_BYTE, root, comm_);
    std::vector<std::vector<char>> out;
    if (rank_ == root)
      for (std::size_t r = 0; r < counts.size(); ++r)
        out.emplace_back(all.begin() + displs[r], all.begin() + displs[r] + counts[r]);
    return out;
  }

  /// MPI_Bcast of root's buffer: afterwards every rank holds root's bytes.
  void broadcast_bytes(std::vector<char>& buf, int root = 0) const {
    check_root(root);
    std::uint64_t n = buf.size();
    MPI_Bcast(&n, 1, MPI_UINT64_T, root, comm_);
    count(std::size_t(n), "broadcast_bytes");
    buf.resize(std::size_t(n));
    MPI_Bcast(buf.data(), int(n), MPI_BYTE, root, comm_);
  }

 private:
  MPI_Comm comm_ = MPI_COMM_WORLD;
  int rank_ = 0, size_ = 1;
  bool owner_ = false;

  void init(int* argc, char*** argv) {
    int ok = 0;
    MPI_Initialized(&ok);
    if (!ok) {
      int done = 0;
      MPI_Finalized(&done);
      if (done) throw logic_error("mpi::communicator: MPI was already finalised (one MPI_Init per process)");
      int provided = 0;
      if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
        throw error("mpi::communicator: MPI_Init_thread failed");
      owner_ = true;
    }
    query();
  }
  void query() {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  void check_root(int root) const {
    if (root < 0 || root >= size_)
      throw value_error(detail::concat("mpi: root rank ", root, " out of range (the communicator has ", size_, " ranks)"));
  }
  static int count(std::size_t n, const char* what) {
    if (n > std::size_t(INT_MAX))
      throw limit_error(detail::concat("mpi::", what, ": ", n, " bytes, more than one MPI message holds (", INT_MAX, ")"));
    return int(n);
  }
};

}  // namespace nnlens::mpi
