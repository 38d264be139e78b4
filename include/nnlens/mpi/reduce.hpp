// nnlens/mpi/reduce.hpp -- shard work over MPI ranks, reduce the mergeable results (nnlens::mpi).
//
//   mpi::range r = mpi::shard(n, comm);              // this rank's block [r.begin, r.end) of [0, n)
//   auto Xr = mpi::shard_rows(X, comm);             // its rows of a dataset [N, ...]
//   std::optional<R> m = mpi::reduce_merge(comm, local_result, {.root = 0, .broadcast = false});
//   auto m = mpi::map_reduce(comm, n, [&](mpi::range r) { return analyse(r); });   // both at once
//   auto v = mpi::gather(comm, local_items);          // per-item results (segments), in order
//
// Sharding: contiguous blocks, rank k gets [n k / P, n (k+1) / P) -- deterministic, every index
// exactly once, block sizes differ by at most one; a rank may get an empty block when n < P.
// Reduction: every rank serialises its value (mpi::serializer<R>), MPI_Gatherv brings the bytes to
// root, which merges them in rank order, merge(merge(r0, r1), r2) ..., so the result is the one a
// single process gets when it merges the same blocks in order: identical for set unions and
// integer counts (coverage sets, contribution tables, DFlare results), equal up to the rounding of
// a different summation order for floating-point sums (profiles: see docs/scale.md).  The result
// is on root only (std::nullopt elsewhere) unless broadcast is set.  A rank whose block is empty
// (an empty std::optional) contributes nothing.
// Errors: an exception in one rank's local work (map_reduce) or in a merge is rethrown on every
// rank -- the same nnlens::error subclass, its message prefixed "mpi rank K: " -- so no rank waits
// forever in a collective.  All ranks must call these functions in the same order.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <xtensor/xarray.hpp>

#include "nnlens/core/error.hpp"
#include "nnlens/mpi/communicator.hpp"
#include "nnlens/mpi/serializer.hpp"

namespace nnlens::mpi {

/// A block [begin, end) of indices.
struct range {
  std::size_t begin = 0, end = 0;
  std::size_t size() const { return end - begin; }
  bool empty() const { return end == begin; }
  friend bool operator==(const range&, const range&) = default;
};

/// Rank `rank` of `ranks`'s contiguous block of [0, n).
inline range shard(std::size_t n, int rank, int ranks) {
  if (ranks < 1 || rank < 0 || rank >= ranks)
    throw value_error(detail::concat("mpi::shard: rank ", rank, " of ", ranks, " ranks"));
  // n * k / P without overflow for any n: split into quotient and remainder.
  auto at = [&](std::size_t k) {
    const std::size_t P = std::size_t(ranks), q = n / P, r = n % P;
    return q * k + r * k / P;
  };
  return {at(std::size_t(rank)), at(std::size_t(rank) + 1)};
}
inline range shard(std::size_t n, const communicator& comm) { return shard(n, comm.rank(), comm.size()); }

/// Rows [r.begin, r.end) of X ([N, ...], row-major) as a new array [r.size(), ...].
template <class E>
xt::xarray<typename E::value_type> rows(const E& X, range r) {
  if (X.dimension() == 0) throw shape_error("mpi::rows: a dataset needs a leading sample axis");
  const std::size_t n = X.shape()[0];
  if (r.begin > r.end || r.end > n)
    throw value_error(detail::concat("mpi::rows: rows [", r.begin, ", ", r.end, ") of a dataset of ", n));
  auto shp = X.shape();
  std::vector<std::size_t> s(shp.begin(), shp.end());
  const std::size_t per = n ? X.size() / n : 0;
  s[0] = r.size();
  xt::xarray<typename E::value_type> out = xt::xarray<typename E::value_type>::from_shape(s);
  if (X.layout() != xt::layout_type::row_major)
    throw logic_error("mpi::rows: the dataset is not row-major (copy it into an xt::xarray first)");
  std::copy(X.data() + r.begin * per, X.data() + r.end * per, out.data());
  return out;
}

/// This rank's rows of X.
template <class E>
xt::xarray<typename E::value_type> shard_rows(const E& X, const communicator& comm) {
  return rows(X, shard(X.dimension() ? X.shape()[0] : 0, comm));
}

struct reduce_options {
  int root = 0;            // the rank that merges (and holds the result)
  bool broadcast = false;  // every rank gets the result
};

namespace detail {

enum class kind : std::uint8_t { value = 0, nothing = 1, failure = 2 };
enum class exc : std::uint8_t { error, shape, value, io, data, logic, limit, other };

inline std::pair<exc, std::string> classify(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const shape_error& x) {
    return {exc::shape, x.what()};
  } catch (const value_error& x) {
    return {exc::value, x.what()};
  } catch (const io_error& x) {
    return {exc::io, x.what()};
  } catch (const data_error& x) {
    return {exc::data, x.what()};
  } catch (const logic_error& x) {
    return {exc::logic, x.what()};
  } catch (const limit_error& x) {
    return {exc::limit, x.what()};
  } catch (const error& x) {
    return {exc::error, x.what()};
  } catch (const std::exception& x) {
    return {exc::other, x.what()};
  } catch (...) {
    return {exc::other, "unknown exception"};
  }
}

[[noreturn]] inline void raise(exc k, const std::string& m) {
  switch (k) {
    case exc::shape: throw shape_error(m);
    case exc::value: throw value_error(m);
    case exc::io: throw io_error(m);
    case exc::data: throw data_error(m);
    case exc::logic: throw logic_error(m);
    case exc::limit: throw limit_error(m);
    default: throw error(m);
  }
}

inline std::vector<char> failure_bytes(int rank, std::exception_ptr e) {
  auto [k, m] = classify(e);
  byte_writer w;
  w.put(kind::failure);
  w.put(k);
  write(w, nnlens::detail::concat("mpi rank ", rank, ": ", m));
  return w.take();
}

/// The reduction: gather to root, fold `combine` over the ranks' values in rank order, tell every
/// rank the outcome (and the value, with broadcast).
template <class T, class Combine>
std::optional<T> reduce(const communicator& comm, const std::optional<T>& local, std::exception_ptr err,
                        const reduce_options& o, Combine&& combine) {
  std::vector<char> mine;
  if (err) {
    mine = failure_bytes(comm.rank(), err);
  } else {
    byte_writer w;
    w.put(local ? kind::value : kind::nothing);
    if (local) write(w, *local);
    mine = w.take();
  }
  if (comm.size() == 1 && !err) return local;  // nothing to send
  const auto parts = comm.gather_bytes(mine, o.root);
  std::vector<char> outcome;  // root -> all: kind, then the value (broadcast) or the failure
  std::optional<T> result;
  if (comm.rank() == o.root) {
    std::exception_ptr first;
    int first_rank = -1;
    for (std::size_t r = 0; r < parts.size() && first_rank < 0; ++r) {
      byte_reader rd(parts[r]);
      const auto k = rd.get<kind>();
      if (k == kind::failure) {
        outcome = parts[r];
        first_rank = int(r);
      }
    }
    if (first_rank < 0) {
      try {
        for (const auto& p : parts) {
          byte_reader rd(p);
          if (rd.get<kind>() != kind::value) continue;
          T v = read<T>(rd);
          result = result ? combine(std::move(*result), std::move(v)) : std::move(v);
        }
      } catch (...) {
        outcome = failure_bytes(comm.rank(), std::current_exception());
        result.reset();
      }
    }
    if (outcome.empty()) {
      byte_writer w;
      w.put(result ? kind::value : kind::nothing);
      if (result && o.broadcast) write(w, *result);
      outcome = w.take();
    }
  }
  comm.broadcast_bytes(outcome, o.root);
  byte_reader rd(outcome);
  const auto k = rd.get<kind>();
  if (k == kind::failure) {
    const auto e = rd.get<exc>();
    raise(e, read<std::string>(rd));
  }
  if (comm.rank() == o.root) return result;
  if (k == kind::value && o.broadcast) return read<T>(rd);
  return std::nullopt;
}

}  // namespace detail

/// Types with merge(a, b) -> T found by argument-dependent lookup (nnlens' mergeable results).
template <class T>
concept Mergeable = requires(const T& a, const T& b) {
  { merge(a, b) } -> std::convertible_to<T>;
};

/// Merges every rank's value in rank order (empty optionals contribute nothing); the result on
/// root, or on every rank with broadcast; std::nullopt where there is none.
template <class T>
std::optional<T> reduce_merge(const communicator& comm, const std::optional<T>& local, const reduce_options& o = {}) {
  static_assert(Serializable<T>, "mpi::reduce_merge: the result type needs an mpi::serializer<T> specialisation");
  static_assert(Mergeable<T>, "mpi::reduce_merge: the result type needs merge(a, b)");
  return detail::reduce<T>(comm, local, nullptr, o, [](T a, T b) -> T { return merge(a, b); });
}
template <class T>
std::optional<T> reduce_merge(const communicator& comm, const T& local, const reduce_options& o = {}) {
  return reduce_merge(comm, std::optional<T>(local), o);
}

/// Runs f on this rank's block of [0, n) (not at all when the block is empty) and merges the
/// results as reduce_merge does; an exception in any rank's f is rethrown on every rank.
template <class F>
auto map_reduce(const communicator& comm, std::size_t n, F&& f, const reduce_options& o = {})
    -> std::optional<std::decay_t<std::invoke_result_t<F&, range>>> {
  using T = std::decay_t<std::invoke_result_t<F&, range>>;
  static_assert(Serializable<T>, "mpi::map_reduce: the result type needs an mpi::serializer<T> specialisation");
  static_assert(Mergeable<T>, "mpi::map_reduce: the result type needs merge(a, b)");
  const range r = shard(n, comm);
  std::optional<T> local;
  std::exception_ptr err;
  if (!r.empty()) {
    try {
      local = f(r);
    } catch (...) {
      err = std::current_exception();
    }
  }
  return detail::reduce<T>(comm, local, err, o, [](T a, T b) -> T { return merge(a, b); });
}

/// Concatenates every rank's items in rank order (per-item results: segments, seeds); on root, or
/// everywhere with broadcast.
template <class T>
std::optional<std::vector<T>> gather(const communicator& comm, const std::vector<T>& local, const reduce_options& o = {}) {
  static_assert(Serializable<T>, "mpi::gather: the item type needs an mpi::serializer<T> specialisation");
  return detail::reduce<std::vector<T>>(comm, std::optional<std::vector<T>>(local), nullptr, o,
                                        [](std::vector<T> a, std::vector<T> b) {
                                          a.insert(a.end(), std::make_move_iterator(b.begin()), std::make_move_iterator(b.end()));
                                          return a;
                                        });
}

}  // namespace nnlens::mpi
