// nnlens/difftest/selection.hpp -- DFlare's mutation-operator selection (spec dflare.md §2.5).
//
//   operator_selector sel(pool_size, selection_rule::paper);
//   std::size_t op = sel.select(prev, rng);      // prev: index in the pool, or none
//   sel.record_selection(op);  sel.record_success(op);   // N_op, N_i
//
// Ranking value v(op) = N_i(op) / (N_op(op) + eps), eps = 1e-7: N_op counts selections, N_i
// selections that led to an accepted mutant or a trigger.  SELECT(prev) (Algorithm 2): shuffle the
// pool, stable-sort it by v descending (random tie-breaking), k_prev := rank of prev; then
//   repeat  k ~ U{0..m-1}, p_acc = (1 - p)^(k - k_prev)   until  U(0,1) < p_acc,   p = 1 / m,
// which draws rank k with probability  min(1, (1-p)^(k-k_prev)) / sum_k' min(1, (1-p)^(k'-k_prev))
// (selection_law gives these numbers).
//
// Rules (selection_rule):
//   paper      prev = the operator of the last iteration, k_prev its rank (the paper's Algorithm 1/2)
//   reference  the reference code's effective rule: prev = the operator of the last *accepted*
//              mutant (none before the first acceptance: a uniform draw), and k_prev = -1 always
//              (its index(mu1) compares a name with an object), so P(rank k) ∝ (1-p)^(k+1)
//              whatever prev is; the published numbers come from it
//   last_accepted  the reference code's prev (the last accepted operator; uniform before any
//              acceptance) with the index bug fixed: k_prev is its rank, as in the paper's law
//   uniform    DFlare_R (ablation): a uniform draw every time
// The caller (dflare.hpp) decides which prev to pass; select() applies the bug for `reference`.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <optional>
#include <random>
#include <vector>

#include "nnlens/core/error.hpp"

namespace nnlens::difftest {

enum class selection_rule : std::uint8_t { paper, reference, last_accepted, uniform };

/// P(rank k), k = 0..m-1, of the rejection loop for a previous rank k_prev (-1: the reference bug).
inline std::vector<double> selection_law(std::size_t m, std::ptrdiff_t k_prev) {
  if (m <= 1) return std::vector<double>(m, 1.0);
  const double q = 1.0 - 1.0 / double(m);
  std::vector<double> p(m);
  double sum = 0;
  for (std::size_t k = 0; k < m; ++k)
    sum += p[k] = std::min(1.0, std::pow(q, double(std::ptrdiff_t(k) - k_prev)));
  for (double& v : p) v /= sum;
  return p;
}

class operator_selector {
 public:
  explicit operator_selector(std::size_t pool_size, selection_rule rule = selection_rule::paper, double eps = 1e-7)
      : rule_(rule), eps_(eps), n_op_(pool_size, 0), n_i_(pool_size, 0), order_(pool_size) {
    if (pool_size == 0) throw value_error("operator_selector: empty operator pool");
  }

  std::size_t size() const { return n_op_.size(); }
  selection_rule rule() const { return rule_; }

  /// Statistics back to zero (DFlare resets them for every seed).
  void reset() {
    std::fill(n_op_.begin(), n_op_.end(), 0);
    std::fill(n_i_.begin(), n_i_.end(), 0);
  }
  void record_selection(std::size_t op) { ++n_op_.at(op); }
  void record_success(std::size_t op) { ++n_i_.at(op); }
  std::size_t selections(std::size_t op) const { return n_op_.at(op); }
  std::size_t successes(std::size_t op) const { return n_i_.at(op); }

  /// v(op) = N_i / (N_op + eps); 0 for an operator never selected.
  double value(std::size_t op) const { return double(n_i_.at(op)) / (double(n_op_.at(op)) + eps_); }

  /// The pool shuffled, then stable-sorted by value descending (rank 0 = best).
  const std::vector<std::size_t>& ranking(std::mt19937_64& rng) {
    std::iota(order_.begin(), order_.end(), std::size_t(0));
    std::shuffle(order_.begin(), order_.end(), rng);
    std::stable_sort(order_.begin(), order_.end(), [&](std::size_t a, std::size_t b) { return value(a) > value(b); });
    return order_;
  }

  /// The next operator (an index into the pool).  prev: see the header comment for each rule.
  std::size_t select(std::optional<std::size_t> prev, std::mt19937_64& rng) {
    const std::size_t m = size();
    std::uniform_int_distribution<std::size_t> any(0, m - 1);
    if (m == 1) return 0;
    if (rule_ == selection_rule::uniform || !prev) return any(rng);
    if (*prev >= m) throw value_error("operator_selector: previous operator out of range");
    const auto& l = ranking(rng);
    std::ptrdiff_t k_prev = -1;
    if (rule_ != selection_rule::reference)  // the reference code's index(mu1) is always -1
      k_prev = std::find(l.begin(), l.end(), *prev) - l.begin();
    const double q = 1.0 - 1.0 / double(m);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    for (;;) {
      const std::size_t k = any(rng);
      const double p_acc = std::pow(q, double(std::ptrdiff_t(k) - k_prev));
      if (u(rng) < p_acc) return l[k];
    }
  }

 private:
  selection_rule rule_;
  double eps_;
  std::vector<std::size_t> n_op_, n_i_, order_;
};

}  // namespace nnlens::difftest
