// nnlens/mpi/difftest.hpp -- DFlare over MPI ranks (nnlens::mpi; docs/scale.md).
//
//   std::optional<difftest::dflare_result> r = mpi::dflare(comm, execution::par, f, g, seeds, n, opts);
//   r->summary()
//
// Each rank searches its contiguous block of the n seeds (first_index = opts.first_index + the
// block's start, so every seed keeps its RNG stream); the results are merged in rank order (sorted
// by seed index).  With a query budget only (max_seconds = 0) the merged result equals a single
// process's dflare over all n seeds, field for field except the wall-clock `seconds`.
// Serialiser: dflare_result as binary (every seed_result field, inputs and probabilities included).
#pragma once

#include <optional>
#include <span>

#include "nnlens/difftest/dflare.hpp"
#include "nnlens/mpi/reduce.hpp"

namespace nnlens::mpi {

template <>
struct serializer<difftest::seed_result> {
  static void write(byte_writer& w, const difftest::seed_result& s) {
    w.put(std::uint64_t(s.index));
    w.put(s.status);
    w.put(std::uint64_t(s.queries));
    w.put(s.seconds);
    w.put(std::uint64_t(s.seed_label));
    w.put(std::uint64_t(s.label_f));
    w.put(std::uint64_t(s.label_g));
    mpi::write(w, s.input);
    mpi::write(w, s.probs_f);
    mpi::write(w, s.probs_g);
    w.put(std::uint64_t(s.accepted));
    w.put(std::uint64_t(s.corpus));
    mpi::write(w, s.error);
  }
  static difftest::seed_result read(byte_reader& r) {
    difftest::seed_result s;
    s.index = std::size_t(r.get<std::uint64_t>());
    s.status = r.get<difftest::seed_status>();
    s.queries = std::size_t(r.get<std::uint64_t>());
    s.seconds = r.get<double>();
    s.seed_label = std::size_t(r.get<std::uint64_t>());
    s.label_f = std::size_t(r.get<std::uint64_t>());
    s.label_g = std::size_t(r.get<std::uint64_t>());
    s.input = mpi::read<std::vector<float>>(r);
    s.probs_f = mpi::read<std::vector<float>>(r);
    s.probs_g = mpi::read<std::vector<float>>(r);
    s.accepted = std::size_t(r.get<std::uint64_t>());
    s.corpus = std::size_t(r.get<std::uint64_t>());
    s.error = mpi::read<std::string>(r);
    return s;
  }
};

template <>
struct serializer<difftest::dflare_result> {
  static void write(byte_writer& w, const difftest::dflare_result& d) { mpi::write(w, d.seeds); }
  static difftest::dflare_result read(byte_reader& r) { return {mpi::read<std::vector<difftest::seed_result>>(r)}; }
};

/// DFlare over n seeds (raw pixel images, row-major), the seeds sharded over the ranks.
template <class Policy>
  requires execution::is_execution_policy_v<Policy>
std::optional<difftest::dflare_result> dflare(const communicator& comm, const Policy& pol, const difftest::black_box& f,
                                              const difftest::black_box& g, std::span<const float> seeds, std::size_t n,
                                              const difftest::dflare_options& o, const reduce_options& ro = {}) {
  const std::size_t per = n ? seeds.size() / n : 0;
  return map_reduce(
      comm, n,
      [&](range r) {
        difftest::dflare_options local = o;
        local.first_index = o.first_index + r.begin;
        return difftest::dflare(pol, f, g, seeds.subspan(r.begin * per, r.size() * per), r.size(), local);
      },
      ro);
}

}  // namespace nnlens::mpi
