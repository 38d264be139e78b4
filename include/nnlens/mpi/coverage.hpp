// nnlens/mpi/coverage.hpp -- coverage over MPI ranks (nnlens::mpi; docs/scale.md).
//
//   idc c = prepare_idc(execution::par, net, X_train, y_train);       // on every rank, or on root
//   c = mpi::broadcast(comm, c);                                     //   and sent to the others
//   std::optional<idc> m = mpi::measure(comm, execution::par, net, X_test, c);
//   m->result()                                                       // = measure over all of X_test
//   std::optional<neuron_relevance> rt = mpi::reduce_merge(comm, neuron_relevance_of(...));
//
// measure: each rank feeds its contiguous block of X's rows to a copy of c (the prepared state and
// whatever c had covered already); the covered sets are united in rank order.  A union does not
// depend on order: the merged state equals a single process's measure of X, exactly.
// Serialisers: idc through save_idc / load_idc (text, doubles with 17 digits: the centroids
// round-trip exactly); neuron_relevance as binary.
#pragma once

#include <optional>
#include <sstream>
#include <string>

#include "nnlens/coverage/criterion.hpp"
#include "nnlens/coverage/idc.hpp"
#include "nnlens/coverage/importance.hpp"
#include "nnlens/mpi/reduce.hpp"

namespace nnlens::mpi {

template <>
struct serializer<idc> {
  static void write(byte_writer& w, const idc& c) {
    std::ostringstream os;
    save_idc(os, c);
    mpi::write(w, os.str());
  }
  static idc read(byte_reader& r) {
    std::istringstream is(mpi::read<std::string>(r));
    return load_idc(is);
  }
};

template <>
struct serializer<neuron_relevance> {
  static void write(byte_writer& w, const neuron_relevance& t) {
    w.put(std::uint64_t(t.layer));
    w.put(t.aggregation);
    w.put(std::uint64_t(t.fingerprint));
    w.put(std::uint64_t(t.samples));
    w.put(std::uint64_t(t.seen));
    mpi::write(w, t.total);
  }
  static neuron_relevance read(byte_reader& r) {
    neuron_relevance t;
    t.layer = std::size_t(r.get<std::uint64_t>());
    t.aggregation = r.get<importance_aggregation>();
    t.fingerprint = r.get<std::uint64_t>();
    t.samples = std::size_t(r.get<std::uint64_t>());
    t.seen = std::size_t(r.get<std::uint64_t>());
    t.total = mpi::read<std::vector<double>>(r);
    return t;
  }
};

/// root's v on every rank.
template <class T>
T broadcast(const communicator& comm, const T& v, int root = 0) {
  static_assert(Serializable<T>, "mpi::broadcast: the type needs an mpi::serializer<T> specialisation");
  std::vector<char> b;
  if (comm.rank() == root) b = to_bytes(v);
  comm.broadcast_bytes(b, root);
  return comm.rank() == root ? v : from_bytes<T>(b);
}

/// The coverage criterion c after feeding it every row of X ([N, input...]), the rows sharded
/// over the ranks; on root (every rank with broadcast).  c itself is not changed.
template <class Policy, class Net, class A, CoverageCriterion C>
  requires execution::is_execution_policy_v<Policy>
std::optional<C> measure(const communicator& comm, const Policy& pol, const Net& net, const A& X, const C& c,
                         const reduce_options& ro = {}) {
  const std::size_t n = X.dimension() ? X.shape()[0] : 0;
  return map_reduce(
      comm, n,
      [&](range r) {
        C local = c;
        nnlens::measure(pol, net, rows(X, r), local);
        return local;
      },
      ro);
}

}  // namespace nnlens::mpi
