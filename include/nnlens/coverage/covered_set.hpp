// nnlens/coverage/covered_set.hpp -- what a neuron-level coverage criterion is built from: its
// covered set (a bitset, merged by OR) and the layers it reads (their columns in a block's row).
//
//   detail::cov_bitset b(n);  b.set(i), b.test(i), b.count(), b.merge(o), b.clear()
//   detail::cov_layer_set s = resolve_cov_layers(net, layers, who)   the layers (empty: every
//                             coverage_layers(net)) and where each starts in a streamed row
//   detail::check_cov_block(block, s, who)                shape_error unless the block streams s
//   detail::check_finite_neuron(v, block, row, col, who)  value_error for NaN/Inf
//   detail::for_each_neuron_value(block, s, who, f)        f(column, value) over every checked value
//
// requires: indices below the bitset's size; merge of two bitsets of one size.
// ensures:  errors name `who`, the input row and the column.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "nnlens/core/error.hpp"
#include "nnlens/coverage/activations.hpp"

namespace nnlens::detail {

/// A fixed-size set of bits; merge = OR.
struct cov_bitset {
  std::vector<std::uint64_t> words;
  std::size_t bits = 0;
  cov_bitset() = default;
  explicit cov_bitset(std::size_t n) : words((n + 63) / 64, 0), bits(n) {}
  void set(std::size_t i) { words[i >> 6] |= std::uint64_t(1) << (i & 63); }
  bool test(std::size_t i) const { return (words[i >> 6] >> (i & 63)) & 1u; }
  std::size_t count() const {
    std::size_t c = 0;
    for (auto w : words) c += std::size_t(std::popcount(w));
    return c;
  }
  void clear() { std::fill(words.begin(), words.end(), 0); }
  void merge(const cov_bitset& o) {
    NNLENS_EXPECTS(o.bits == bits);
    for (std::size_t i = 0; i < words.size(); ++i) words[i] |= o.words[i];
  }
  bool operator==(const cov_bitset&) const = default;
};

/// Layers a criterion reads and where each starts in a block's row (offsets.size() == layers + 1).
struct cov_layer_set {
  std::vector<std::size_t> layers;
  std::vector<std::size_t> offsets{0};
  std::size_t width() const { return offsets.back(); }
  std::size_t count() const { return layers.size(); }
  bool operator==(const cov_layer_set&) const = default;
};

template <class Net>
cov_layer_set resolve_cov_layers(const Net& net, std::vector<std::size_t> layers, const char* who) {
  if (layers.empty())
    for (const auto& c : coverage_layers(net)) layers.push_back(c.index);
  if (layers.empty()) throw value_error(std::string(who) + ": the network has no layer to cover");
  cov_layer_set s;
  for (std::size_t l : layers) {
    check_layer_index(net, l, who);
    s.layers.push_back(l);
    s.offsets.push_back(s.offsets.back() + coverage_neurons(shape_at(net, l + 1)));
  }
  return s;
}

inline void check_cov_block(const neuron_block& b, const cov_layer_set& s, const char* who) {
  if (b.width != s.width() || b.offsets != s.offsets)
    throw shape_error(concat(who, ": a block of ", b.width, " neurons per row in ", b.offsets.size() ? b.offsets.size() - 1 : 0,
                             " layers; this criterion reads ", s.width(), " neurons in ", s.count(),
                             " layers (stream the criterion's layers())"));
}

inline void check_finite_neuron(double v, const neuron_block& b, std::size_t r, std::size_t col, const char* who) {
  if (!std::isfinite(v))
    throw value_error(concat(who, ": non-finite neuron value in input row ", b.first + r, ", column ", col));
}

/// f(i, v) for each value v of each row of b, column i, in row order: after check_cov_block(b, s,
/// who), and each v after check_finite_neuron.
template <class F>
void for_each_neuron_value(const neuron_block& b, const cov_layer_set& s, const char* who, F&& f) {
  check_cov_block(b, s, who);
  const std::size_t n = s.width();
  for (std::size_t r = 0; r < b.rows; ++r) {
    const double* row = b.row(r);
    for (std::size_t i = 0; i < n; ++i) {
      check_finite_neuron(row[i], b, r, i, who);
      f(i, row[i]);
    }
  }
}

}  // namespace nnlens::detail
