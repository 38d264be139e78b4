// nnlens/network/fingerprint.hpp -- a 64-bit fingerprint of a network's shapes and parameters, so
// that saved state (profiles, masks, coverage and surprise models) refuses a model it was not made
// on.
//
//   std::uint64_t h = model_fingerprint(net);   // FNV-1a over tensor shapes + parameter bits
// (detail::model_fingerprint is the same function, the name the library's own code uses.)
#pragma once

#include <cstddef>
#include <cstdint>

#include "nnlens/network/graph.hpp"

namespace nnlens {

namespace detail {
inline std::uint64_t fnv(std::uint64_t h, const void* p, std::size_t n) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (std::size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}
}  // namespace detail

/// A fingerprint of the network: its tensors' shapes and the bits of every parameter (weights,
/// biases, BatchNorm's gamma and beta, Affine's s and t) and buffer (BatchNorm's running
/// statistics).
template <class Net>
std::uint64_t model_fingerprint(const Net& net) {
  using T = network_scalar_t<Net>;
  const op_graph<T> g(net);
  std::uint64_t h = 1469598103934665603ull;
  for (const auto& s : g.acts()) {
    const std::size_t d[4] = {s.rank, s[0], s[1], s[2]};
    h = detail::fnv(h, d, sizeof d);
  }
  for (const auto& nd : g.nodes())
    for (const auto& q : nd.parameters) h = detail::fnv(h, q.data(), q.size() * sizeof(T));
  return h;
}
namespace detail {
using nnlens::model_fingerprint;
}  // namespace detail

}  // namespace nnlens
