// benchmarks/bench_mpi.cpp -- nnlens::mpi: NNSlicer's profile of Fashion-MNIST's 60,000 training
// images on LeNet-5 (seeded weights), the rows sharded over the ranks (docs/scale.md).
//
//   benchmarks/run_mpi_bench.sh builds and runs it (mpirun -np 1 and -np 2); by hand:
//   mpicxx -std=c++20 -O3 -march=native -DNNLENS_HAS_ZLIB -Iinclude benchmarks/bench_mpi.cpp -lz -o bench_mpi
//   mpirun -np 2 ./bench_mpi [IMAGES.idx3-ubyte[.gz] [N [REPEAT]]]
//
// Per run: every rank profiles its block with execution::seq (one thread per rank) and times it
// in wall clock and in the CPU time of its thread; then mpi::reduce_merge to rank 0.  Rank 0
// prints the best run: the slowest rank's wall and CPU seconds, the reduction's wall seconds, and
// the total.  The CPU time is what a rank needs from a core of its own: on a machine shared with
// other work (where the wall clock says little) "1 rank's CPU / (slowest rank's CPU + reduction)"
// is the speed-up N idle cores give.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <nnlens/io/idx.hpp>
#include <nnlens/layers/all.hpp>
#include <nnlens/mpi/slicing.hpp>
#include <nnlens/network/parameters.hpp>
#include <nnlens/network/sequential.hpp>

using namespace nnlens;
using LeNet5 = Sequential<Input<1, 28, 28>, Conv2D<6, 5, 1, 2>, ReLU, MaxPool2D<2>, Conv2D<16, 5>, ReLU, MaxPool2D<2>, Flatten,
                          Dense<120>, ReLU, Dense<84>, ReLU, Dense<10>>;

static double thread_cpu() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}
static double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

int main(int argc, char** argv) {
  mpi::communicator comm(argc, argv);
  const std::string path = argc > 1 ? argv[1] : "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz";
  xt::xarray<float> X = io::read_idx_images<float>(path);
  std::size_t n = X.shape()[0];
  if (argc > 2) n = std::min<std::size_t>(n, std::strtoull(argv[2], nullptr, 10));
  const int repeat = argc > 3 ? std::atoi(argv[3]) : 3;
  LeNet5 net;
  initialize(net, 1);
  const auto mine = mpi::rows(X, mpi::shard(n, comm));
  double best[4] = {1e300, 0, 0, 0};  // total, slowest wall, slowest cpu, reduce
  for (int r = 0; r < repeat; ++r) {
    comm.barrier();
    const double t0 = now(), c0 = thread_cpu();
    const profile local = profile_network(execution::seq, net, mine);
    const double wall = now() - t0, cpu = thread_cpu() - c0;
    const double t1 = now();
    const auto merged = mpi::reduce_merge(comm, local);
    const double reduce = now() - t1, total = now() - t0;
    double mx[2] = {wall, cpu}, worst[2] = {0, 0};
    MPI_Reduce(mx, worst, 2, MPI_DOUBLE, MPI_MAX, 0, comm.get());
    if (comm.rank() == 0) {
      if (merged->samples != n) std::fprintf(stderr, "bench_mpi: %zu samples merged, expected %zu\n", merged->samples, n);
      if (total < best[0]) best[0] = total, best[1] = worst[0], best[2] = worst[1], best[3] = reduce;
    }
  }
  if (comm.rank() == 0)
    std::printf("ranks %d images %zu total_s %.4f slowest_rank_wall_s %.4f slowest_rank_cpu_s %.4f reduce_s %.5f\n", comm.size(), n,
                best[0], best[1], best[2], best[3]);
  return 0;
}
