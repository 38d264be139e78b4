// nnlens/coverage/criterion.hpp -- the one interface every coverage criterion has.
//
//   coverage_result r = c.result();        {percent, covered, total}
//   measure([policy,] net, X, c)           feeds the inputs X ([N, input shape...]) to criterion c
//                                          (its covered set grows; earlier inputs stay covered) and
//                                          returns c.result()
//   merge(a, b)                            the union of two criteria's covered sets (same prepared
//                                          state, else data_error)
//
// A criterion C (IDC, NC, KMNC, NBC, SNAC, TKNC, LSC, DSC) is a value with
//   std::vector<std::size_t> layers() const    the layers whose neurons it reads (coverage_layer
//                                              indices; activations.hpp streams them, concatenated
//                                              in this order)
//   void add(const neuron_block&)              covers what the block's rows cover
//   coverage_result result() const
//   void merge(const C&)                       union with another state of the same preparation
//   void reset()                               forgets what was covered (keeps the preparation)
//   std::string_view name() const              "idc", "nc", ...
// The preparation (what is learnt from the training set: centroids, neuron bounds, KDEs) is made by
// each criterion's own prepare function and saved/loaded with it.  The covered set only grows, so
// inputs can be fed one at a time during test generation; adding the same input twice changes
// nothing.
#pragma once

#include <concepts>
#include <cstddef>
#include <span>
#include <string_view>
#include <type_traits>
#include <vector>

#include "nnlens/core/error.hpp"
#include "nnlens/core/execution.hpp"
#include "nnlens/coverage/activations.hpp"

namespace nnlens {

struct coverage_result {
  double percent = 0;       // 100 * covered / total (0 when total == 0)
  std::size_t covered = 0;  // covered items: combinations, neurons, sections, buckets...
  std::size_t total = 0;    // items there are to cover
};

inline coverage_result make_coverage_result(std::size_t covered, std::size_t total) {
  return {total ? 100.0 * double(covered) / double(total) : 0.0, covered, total};
}

template <class C>
concept CoverageCriterion = requires(C& c, const C& cc, const neuron_block& b) {
  { cc.layers() } -> std::convertible_to<std::vector<std::size_t>>;
  c.add(b);
  { cc.result() } -> std::same_as<coverage_result>;
  c.merge(cc);
  c.reset();
  { cc.name() } -> std::convertible_to<std::string_view>;
};

/// Feeds the n samples at x to c.
template <class Policy, class Net, CoverageCriterion C>
  requires execution::is_execution_policy_v<Policy>
coverage_result measure(const Policy& pol, const Net& net, std::span<const network_scalar_t<Net>> x, std::size_t n, C& c) {
  const std::vector<std::size_t> ls = c.layers();
  stream_neurons(pol, net, x, n, ls, [&](const neuron_block& b) { c.add(b); });
  return c.result();
}

/// Feeds X ([N, input shape...]) to c.
template <class Policy, class Net, class A, CoverageCriterion C>
  requires execution::is_execution_policy_v<Policy>
coverage_result measure(const Policy& pol, const Net& net, const A& X, C& c) {
  const std::size_t n = sample_count(net, X, "measure");
  return measure(pol, net, std::span<const network_scalar_t<Net>>(X.data(), X.size()), n, c);
}

template <class Net, class A, CoverageCriterion C>
  requires(!execution::is_execution_policy_v<Net>)
coverage_result measure(const Net& net, const A& X, C& c) {
  return execution::with_default_policy(net, [&](const auto& pol) { return measure(pol, net, X, c); });
}

/// The union of a and b's covered sets.
template <CoverageCriterion C>
C merge(C a, const C& b) {
  a.merge(b);
  return a;
}

}  // namespace nnlens
