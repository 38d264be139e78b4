// nnlens/mpi/slicing.hpp -- NNSlicer over MPI ranks (nnlens::mpi; docs/scale.md).
//
//   mpi::communicator comm(argc, argv);
//   std::optional<profile> p = mpi::profile_network(comm, execution::par, net, X, {.grain = ...});
//   std::optional<contrib_table> t = mpi::nnslicer(comm, execution::par, net, *p, X, criterion::predicted());
//
// Each rank profiles (slices) its contiguous block of X's rows with the given host policy; the
// results are merged in rank order on root (reduce.hpp), every rank's with reduce_options
// {.broadcast = true}.  Contribution tables are integer counts: identical to one process.
// Profiles are sums of doubles: equal to one process up to the rounding of the different
// summation order (relative differences of a few 1e-16 per sum; docs/scale.md), and bit for bit
// equal to merge(profile of block 0, profile of block 1, ...) computed in one process.
// Serialisers: profile and contrib_table travel as compact binary (doubles bit for bit).
#pragma once

#include <optional>

#include "nnlens/mpi/reduce.hpp"
#include "nnlens/nnslicer/nnslicer.hpp"
#include "nnlens/nnslicer/profile.hpp"

namespace nnlens::mpi {

template <>
struct serializer<profile> {
  static void write(byte_writer& w, const profile& p) {
    w.put(p.grain);
    w.put(std::uint64_t(p.fingerprint));
    w.put(std::uint64_t(p.samples));
    mpi::write(w, p.sums);
    mpi::write(w, p.names);
  }
  static profile read(byte_reader& r) {
    profile p;
    p.grain = r.get<granularity>();
    p.fingerprint = r.get<std::uint64_t>();
    p.samples = std::size_t(r.get<std::uint64_t>());
    p.sums = mpi::read<std::vector<std::vector<double>>>(r);
    p.names = mpi::read<std::vector<std::string>>(r);
    return p;
  }
};

template <>
struct serializer<contrib_table> {
  static void write(byte_writer& w, const contrib_table& t) {
    w.put(t.grain);
    w.put(std::uint64_t(t.samples));
    mpi::write(w, t.neurons);
    mpi::write(w, t.synapses);
    mpi::write(w, t.tensor_names);
    mpi::write(w, t.node_names);
  }
  static contrib_table read(byte_reader& r) {
    contrib_table t;
    t.grain = r.get<granularity>();
    t.samples = std::size_t(r.get<std::uint64_t>());
    t.neurons = mpi::read<std::vector<std::vector<std::int64_t>>>(r);
    t.synapses = mpi::read<std::vector<std::vector<std::int64_t>>>(r);
    t.tensor_names = mpi::read<std::vector<std::string>>(r);
    t.node_names = mpi::read<std::vector<std::string>>(r);
    return t;
  }
};

/// NNSlicer's profile of net over X ([N, input...]), the rows sharded over the ranks.
template <class Policy, class Net, class E>
  requires execution::is_execution_policy_v<Policy>
std::optional<profile> profile_network(const communicator& comm, const Policy& pol, const Net& net, const E& X,
                                       const profile_options& po = {}, const reduce_options& ro = {}) {
  const std::size_t n = X.dimension() ? X.shape()[0] : 0;
  if (n == 0) throw data_error("profile_network: the dataset is empty");
  return map_reduce(comm, n, [&](range r) { return nnlens::profile_network(pol, net, rows(X, r), po); }, ro);
}

/// NNSlicer's CONTRIB table of the samples X ([N, input...]), sharded over the ranks.
template <class Policy, class Net, class E>
  requires execution::is_execution_policy_v<Policy>
std::optional<contrib_table> nnslicer(const communicator& comm, const Policy& pol, const Net& net, const profile& p, const E& X,
                                      const criterion& cr, const slice_options& so = {}, const reduce_options& ro = {}) {
  const std::size_t n = X.dimension() ? X.shape()[0] : 0;
  if (n == 0) throw data_error("nnslicer: the criterion has no samples");
  return map_reduce(comm, n, [&](range r) { return nnlens::nnslicer(pol, net, p, rows(X, r), cr, so); }, ro);
}

}  // namespace nnlens::mpi
