// nnlens/mpi/exactline.hpp -- ExactLine's segments sharded over MPI ranks (nnlens::mpi).
//
//   auto v = mpi::exact_lines(comm, execution::par, net, A, B, opts);   // on root: every segment's
//                                                                       // line_result, in order
//   serializer<line_stats>, serializer<line_result<S, R>>, serializer<class_interval<R>>
//
// Each rank runs its block of the segments (mpi::shard: contiguous, deterministic) with
// nnlens::exact_lines on its own thread pool, and the results travel to root bit for bit
// (mpi::gather), so root holds what one process computes.  Errors: with opts.keep_going each
// failing segment's message is in its result, as in one process; without it, once every rank has
// finished, root runs the lowest-numbered failing segment again alone and rethrows its error with
// its own type ("exact_lines: segment i: ...", i counted over all the segments), as one process
// does; the other ranks return std::nullopt as usual.
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "nnlens/exactline/classify.hpp"
#include "nnlens/exactline/line.hpp"
#include "nnlens/mpi/communicator.hpp"
#include "nnlens/mpi/reduce.hpp"
#include "nnlens/mpi/serializer.hpp"

namespace nnlens::mpi {

template <>
struct serializer<line_stats> {
  static void write(byte_writer& w, const line_stats& s) {
    for (std::size_t v : {s.merged, s.validated_pieces, s.violations, s.sub_segments, s.cuts, s.cuts_merged})
      w.put(std::uint64_t(v));
    w.put(s.max_deviation);
    mpi::write(w, s.points);
  }
  static line_stats read(byte_reader& r) {
    line_stats s;
    for (std::size_t* v : {&s.merged, &s.validated_pieces, &s.violations, &s.sub_segments, &s.cuts, &s.cuts_merged})
      *v = std::size_t(r.get<std::uint64_t>());
    s.max_deviation = r.get<double>();
    s.points = mpi::read<std::vector<std::size_t>>(r);
    return s;
  }
};

namespace detail {
inline void write_shape(byte_writer& w, const shape& s) {
  w.put(std::uint64_t(s.rank));
  for (std::size_t v : s.d) w.put(std::uint64_t(v));
}
inline shape read_shape(byte_reader& r) {
  shape s;
  s.rank = std::size_t(r.get<std::uint64_t>());
  for (std::size_t& v : s.d) v = std::size_t(r.get<std::uint64_t>());
  if (s.rank > 3) throw io_error(nnlens::detail::concat("mpi: a shape of rank ", s.rank));
  return s;
}
}  // namespace detail

template <class S, class R>
struct serializer<line_result<S, R>> {
  static void write(byte_writer& w, const line_result<S, R>& l) {
    mpi::write(w, l.t);
    mpi::write(w, l.values);
    mpi::write(w, l.from);
    mpi::write(w, l.to);
    detail::write_shape(w, l.input_shape);
    detail::write_shape(w, l.output_shape);
    mpi::write(w, l.stats);
    mpi::write(w, l.error);
  }
  static line_result<S, R> read(byte_reader& r) {
    line_result<S, R> l;
    l.t = mpi::read<std::vector<R>>(r);
    l.values = mpi::read<std::vector<S>>(r);
    l.from = mpi::read<std::vector<S>>(r);
    l.to = mpi::read<std::vector<S>>(r);
    l.input_shape = detail::read_shape(r);
    l.output_shape = detail::read_shape(r);
    l.stats = mpi::read<line_stats>(r);
    l.error = mpi::read<std::string>(r);
    // the values: one row per ratio, or none (a streamed line keeps its ratios only)
    if (!l.values.empty() && l.values.size() != l.t.size() * l.output_shape.size())
      throw io_error(nnlens::detail::concat("mpi: a line of ", l.t.size(), " rows carries ", l.values.size(), " values"));
    return l;
  }
};

template <class R>
struct serializer<class_interval<R>> {
  static void write(byte_writer& w, const class_interval<R>& c) {
    w.put(c.from);
    w.put(c.to);
    w.put(std::uint64_t(c.label));
  }
  static class_interval<R> read(byte_reader& r) {
    class_interval<R> c;
    c.from = r.get<R>();
    c.to = r.get<R>();
    c.label = std::size_t(r.get<std::uint64_t>());
    return c;
  }
};

/// ExactLine of the segments A[i] -> B[i], each rank its block (see the header comment).
template <class S = double, class R = double, class Policy, class Net>
  requires execution::is_execution_policy_v<Policy>
std::optional<std::vector<line_result<S, R>>> exact_lines(const communicator& comm, const Policy& pol, const Net& net,
                                                          const std::vector<std::vector<S>>& A,
                                                          const std::vector<std::vector<S>>& B, const line_options& opt = {},
                                                          const reduce_options& ro = {}) {
  if (A.size() != B.size())
    throw shape_error(nnlens::detail::concat("exact_lines: ", A.size(), " start points but ", B.size(), " end points"));
  const range mine = shard(A.size(), comm);
  const std::vector<std::vector<S>> a(A.begin() + std::ptrdiff_t(mine.begin), A.begin() + std::ptrdiff_t(mine.end)),
      b(B.begin() + std::ptrdiff_t(mine.begin), B.begin() + std::ptrdiff_t(mine.end));
  line_options each = opt;
  each.keep_going = true;  // every rank reaches the gather; the errors are settled on root
  auto local = nnlens::exact_lines<S, R>(pol, net, a, b, each);
  auto all = gather(comm, local, ro);
  if (all && !opt.keep_going)
    for (std::size_t i = 0; i < all->size(); ++i)
      if (!(*all)[i].error.empty()) {
        // the lowest-numbered failure again, alone on root: its own error type and message
        try {
          (void)nnlens::exact_line<S, R>(pol, net, A[i], B[i], opt);
        } catch (const error&) {
          nnlens::detail::rethrow_prefixed(std::current_exception(), nnlens::detail::concat("exact_lines: segment ", i, ": "));
        }
        throw error(nnlens::detail::concat("exact_lines: segment ", i, ": ", (*all)[i].error));
      }
  return all;
}

}  // namespace nnlens::mpi
