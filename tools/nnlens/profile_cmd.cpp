// tools/nnlens/profile_cmd.cpp -- `nnlens profile` (see profile_cmd.hpp).
#include "profile_cmd.hpp"

#include <chrono>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>

#include <nnlens/core/error.hpp>
#include <nnlens/core/thread_pool.hpp>
#include <nnlens/nnslicer.hpp>

#include "format.hpp"
#include "model.hpp"
#include "nnslicer_common.hpp"
#ifdef NNLENS_TOOL_HAS_MPI  // ---- MPI (docs/scale.md): `mpirun -np N nnlens profile` ----
#include <nnlens/mpi/slicing.hpp>

#include "mpi_world.hpp"
#endif

namespace nnlens::tool {

namespace {

}  // namespace

template <class T>
int run_as(const profile_cmd_options& o) {
  const granularity grain = o.granularity;
  if (o.batch == 0) throw value_error("--batch: expected at least 1 sample per batch");
#ifdef NNLENS_TOOL_HAS_MPI  // ---- MPI: under mpirun with N > 1 ranks, each profiles a block of rows ----
  mpi_world world;  // before the thread pool starts: sets each rank's share of the cores
#endif
  const model<T> m = open_model<T>(o.model, o.layout);
  const basic_dynamic_network<T>& net = m.net;
  const shape in = net.input_shape();
  const xt::xarray<T> X = read_samples<T>(o.data, m.in);
  const std::size_t n = X.shape()[0];
  profile_options po;
  po.grain = grain;
  po.batch = o.batch;
  // Slabs of a few batches per thread: profile_network(par) on each, merged (exact sums up to
  // rounding), so that the progress bar moves.
  const std::size_t slab = o.batch * worker_threads() * 4;
  const auto t0 = std::chrono::steady_clock::now();
  auto profile_rows = [&](std::size_t b, std::size_t e, bool show) {  // rows [b, e)
    return by_slabs(b, e, slab, show && o.progress, "profile", o.data, [&](std::size_t b0, std::size_t nb) {
      return profile_network(execution::par, net, rows_of(X, in, b0, nb), po);
    });
  };
  std::optional<profile> p;
  std::string ranks;
#ifdef NNLENS_TOOL_HAS_MPI
  if (world) {  // blocks merged in rank order on rank 0, which alone writes
    p = nnlens::mpi::map_reduce(*world, n, [&](nnlens::mpi::range r) { return profile_rows(r.begin, r.end, world->rank() == 0); });
    if (world->rank() != 0) return 0;
    ranks = concat(", ", world->size(), " MPI ranks");
  }
#endif
  if (!p) p = profile_rows(0, n, true);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  save_profile(o.output, *p);
  std::size_t neurons = 0;
  for (const auto& s : p->sums) neurons += s.size();
  std::cout << o.output << ": profile of " << std::filesystem::path(o.model).filename().string() << ": " << p->samples
            << " samples, " << p->sums.size() << " tensors, " << neurons << " neurons (" << granularity_name(grain)
            << " granularity, " << o.precision << ")" << ranks << ", " << fmt(seconds) << " s\n";
  return 0;
}


/// `nnlens profile MODEL --data FILE -o PROFILE`: NNSlicer's mean neuron activations.
void register_profile(CLI::App& app, command_list& cmds) {
  auto [cmd, o] = add_analysis<profile_cmd_options>(
      app, cmds, "profile", "NNSlicer: profile a model (mean neuron activations) over a dataset");
  cmd.add_option("--data,-d", o.data,
                 "Samples: a CSV file as `run` reads it, or IDX images (.idx, -idx3-ubyte[.gz]; bytes scaled to [0, 1])")
      ->required();
  cmd.add_option("--output,-o", o.output, "The profile file to write")->required();
  add_enum(cmd, "--granularity", o.granularity, {{"channel", granularity::channel}, {"element", granularity::element}},
           "Neurons of a feature map: its channels or its elements");
  add_threads(cmd);
  cmd.add_option("--batch", o.batch, "Samples per forward pass")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  add_no_progress(cmd, o.progress);
  add_model_options(cmd, o, precision::f32);
}

}  // namespace nnlens::tool
