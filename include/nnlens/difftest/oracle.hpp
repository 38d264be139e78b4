// nnlens/difftest/oracle.hpp -- what a differential tester asks of two answers: the oracle (do
// the top-1 labels differ?) and the fitness terms of DFlare's search (spec dflare.md).
//
//   top1(p)                        argmax, ties to the lowest index
//   is_triggering(pf, pg)          top1(pf) != top1(pg): the input reveals a deviation
//   output_distance(pf, pg)        D = |max pf - max pg|;  margin_distance: the logit-margin gap
//   fitness_distance(measure, pf, pg)   D by the chosen distance_measure
//   novelty_corpus c(tau)          O: c.test_and_insert(pf, pg) is true (and stores [pf ‖ pg]) iff
//                                  its squared L2 distance to every stored state exceeds tau
//   accepts(rule, x, x_max, delta) DFlare's ACCEPT for each acceptance rule (dflare.hpp's comment)
//   detail::check_probs(p, box, seed)   value_error unless a black box's answer is finite
//
// requires: pf and pg are probability vectors of the same length >= 1 (a black box's answer).
// ensures:  every function is pure but novelty_corpus's insertions; all sums in double.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "nnlens/core/error.hpp"
#include "nnlens/difftest/black_box.hpp"

namespace nnlens::difftest {

/// argmax with ties resolved to the lowest index.
inline std::size_t top1(std::span<const float> p) {
  return std::size_t(std::max_element(p.begin(), p.end()) - p.begin());
}
/// The oracle: the top-1 labels differ.
inline bool is_triggering(std::span<const float> f, std::span<const float> g) { return top1(f) != top1(g); }
/// D(x) = |max f(x) - max g(x)| (each model's own top-1 probability).
inline double output_distance(std::span<const float> f, std::span<const float> g) {
  return std::abs(double(*std::max_element(f.begin(), f.end())) - double(*std::max_element(g.begin(), g.end())));
}

/// A model's logit margin recovered from its probabilities: log p_top - log p_second (softmax:
/// = z_top - z_second); a probability that underflowed to 0 counts as the smallest float.
inline double logit_margin(std::span<const float> p) {
  const std::size_t t = top1(p);
  double second = 0;
  for (std::size_t i = 0; i < p.size(); ++i)
    if (i != t) second = std::max(second, double(p[i]));
  constexpr double tiny = double(std::numeric_limits<float>::denorm_min());
  return std::log(std::max(double(p[t]), tiny)) - std::log(std::max(second, tiny));
}

/// Beyond the spec (distance_measure::logit_margin): |M_f - M_g| / max(M_f, M_g) in [0, 1] with M
/// each model's logit margin (logit_margin): how far one model is closer to its decision boundary
/// than the other, relative to the larger margin (1: one of them is on it).  0 when both are 0.
/// Unlike D it still moves when both softmaxes are saturated (top-1 probability 1.0f in both).
inline double margin_distance(std::span<const float> f, std::span<const float> g) {
  const double a = logit_margin(f), b = logit_margin(g), m = std::max(a, b);
  return m > 0 ? std::abs(a - b) / m : 0.0;
}

/// The D of the fitness: the spec's top-1 probability gap, or (beyond the spec) the relative
/// logit-margin gap.
enum class distance_measure : std::uint8_t { top1_probability, logit_margin };

inline double fitness_distance(distance_measure m, std::span<const float> f, std::span<const float> g) {
  return m == distance_measure::logit_margin ? margin_distance(f, g) : output_distance(f, g);
}

/// Exact nearest-neighbour novelty over states [f ‖ g]: novel iff the squared L2 distance to every
/// stored state exceeds tau.  test_and_insert stores a novel state.
class novelty_corpus {
 public:
  explicit novelty_corpus(double tau = 0.5) : tau_(tau) {}
  void clear() { data_.clear(), dim_ = 0; }
  std::size_t size() const { return dim_ ? data_.size() / dim_ : 0; }
  double tau() const { return tau_; }

  /// min over stored states of |s - state|^2 (+inf when empty).
  double distance(std::span<const float> f, std::span<const float> g) const {
    double best = INFINITY;
    const std::size_t d = f.size() + g.size();
    if (d != dim_) return best;
    for (std::size_t r = 0; r < data_.size(); r += d) {
      double s = 0;
      for (std::size_t i = 0; i < f.size(); ++i) s += sq(double(f[i]) - double(data_[r + i]));
      for (std::size_t i = 0; i < g.size(); ++i) s += sq(double(g[i]) - double(data_[r + f.size() + i]));
      best = std::min(best, s);
    }
    return best;
  }
  void insert(std::span<const float> f, std::span<const float> g) {
    if (dim_ == 0) dim_ = f.size() + g.size();
    if (f.size() + g.size() != dim_) throw shape_error("novelty_corpus: state of another size");
    data_.insert(data_.end(), f.begin(), f.end());
    data_.insert(data_.end(), g.begin(), g.end());
  }
  /// O(x): true (and stores the state) iff its distance to the corpus exceeds tau.
  bool test_and_insert(std::span<const float> f, std::span<const float> g) {
    if (!(distance(f, g) > tau_)) return false;
    insert(f, g);
    return true;
  }

 private:
  static double sq(double v) { return v * v; }
  double tau_;
  std::size_t dim_ = 0;
  std::vector<float> data_;
};

enum class acceptance : std::uint8_t { paper, reference, no_novelty };

/// The fitness record of an evaluated input: D and O.
struct fitness_record {
  double d = 0;
  bool novel = false;
};

/// ACCEPT(x, x_max) for each acceptance rule (header comment).
inline bool accepts(acceptance rule, const fitness_record& x, const fitness_record& best, double delta = 1e-3) {
  switch (rule) {
    case acceptance::paper: return x.d / delta + double(x.novel) >= best.d / delta + double(best.novel);
    case acceptance::reference: return std::abs(x.d - best.d) > delta || x.novel;
    case acceptance::no_novelty: return x.d > best.d;
  }
  return false;
}

namespace detail {

/// Throws value_error unless p holds finite probabilities (a black box's answer).
inline void check_probs(std::span<const float> p, const black_box& b, std::size_t seed) {
  for (float v : p)
    if (!std::isfinite(v))
      throw value_error(nnlens::detail::concat("dflare: black box '", b.name, "' returned a non-finite probability for seed ", seed));
}

}  // namespace detail

}  // namespace nnlens::difftest
