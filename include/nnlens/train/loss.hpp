// nnlens/train/loss.hpp -- softmax cross-entropy from logits, and accuracy helpers.
//
//   softmax_cross_entropy(logits, classes, labels, dlogits, mean_over)
//       logits: [n, classes] row-major; labels: n class indices.
//       returns  sum_i ( logsumexp(z_i) - z_i[label_i] ) / mean_over        (mean_over defaults to n)
//       writes   dlogits[i, c] = (softmax(z_i)_c - [c == label_i]) / mean_over  (when non-empty)
//       mean_over lets a mini-batch split into chunks still produce the gradient of the batch mean.
//   argmax(row)                       index of the largest element (first on ties)
//   count_correct(logits, classes, labels)  samples whose argmax equals the label
//   accuracy(logits [n, classes] container, labels) in [0, 1]
//
// requires: logits.size() == n * classes, dlogits empty or the same size, classes > 0.
// throws:   data_error when a label is out of range [0, classes) (naming the sample) or the sizes
//           disagree.  Numerically stable: uses log-sum-exp with the row maximum subtracted.
#pragma once

#include <algorithm>
#include <cmath>
#include <concepts>
#include <iterator>
#include <cstddef>
#include <span>
#include <type_traits>

#include "nnlens/core/error.hpp"

namespace nnlens::train {

namespace detail {
template <class Label>
std::size_t checked_label(Label l, std::size_t classes, std::size_t sample) {
  static_assert(std::is_integral_v<Label>, "labels must be integers (class indices)");
  if constexpr (std::is_signed_v<Label>) {
    if (l < 0)
      throw data_error(nnlens::detail::concat("label of sample ", sample, " is ", static_cast<long long>(l),
                                              ", expected 0..", classes - 1));
  }
  if (static_cast<unsigned long long>(l) >= classes)
    throw data_error(nnlens::detail::concat("label of sample ", sample, " is ", static_cast<unsigned long long>(l),
                                            ", expected 0..", classes - 1));
  return static_cast<std::size_t>(l);
}
}  // namespace detail

/// Mean softmax cross-entropy of `logits` against `labels`; writes dL/dlogits if `dlogits` is
/// non-empty.  `first_sample` only offsets sample numbers in error messages.
template <class T, class Label>
T softmax_cross_entropy(std::span<const T> logits, std::size_t classes, std::span<const Label> labels,
                        std::span<T> dlogits = {}, std::size_t mean_over = 0, std::size_t first_sample = 0) {
  static_assert(std::is_floating_point_v<T>, "softmax_cross_entropy: T must be a floating-point type");
  if (classes == 0) throw data_error("softmax_cross_entropy: zero classes");
  const std::size_t n = labels.size();
  if (logits.size() != n * classes)
    throw data_error(nnlens::detail::concat("softmax_cross_entropy: ", logits.size(), " logits for ", n,
                                            " labels and ", classes, " classes"));
  if (!dlogits.empty() && dlogits.size() != logits.size())
    throw data_error("softmax_cross_entropy: dlogits must be empty or the size of logits");
  if (n == 0) return T(0);
  const T inv = T(1) / T(mean_over ? mean_over : n);
  T total = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t y = detail::checked_label(labels[i], classes, first_sample + i);
    const T* z = logits.data() + i * classes;
    const T m = *std::max_element(z, z + classes);
    T s = 0;
    for (std::size_t c = 0; c < classes; ++c) s += std::exp(z[c] - m);
    const T lse = m + std::log(s);
    total += lse - z[y];
    if (!dlogits.empty()) {
      T* d = dlogits.data() + i * classes;
      for (std::size_t c = 0; c < classes; ++c) d[c] = std::exp(z[c] - lse) * inv;
      d[y] -= inv;
    }
  }
  return total * inv;
}

/// Index of the largest element of a row (the first one on ties; NaN never wins).
template <class T>
std::size_t argmax(std::span<const T> row) {
  std::size_t best = 0;
  for (std::size_t c = 1; c < row.size(); ++c)
    if (row[c] > row[best]) best = c;
  return best;
}

/// Number of rows of `logits` ([n, classes]) whose argmax equals the label.
template <class T, class Label>
std::size_t count_correct(std::span<const T> logits, std::size_t classes, std::span<const Label> labels) {
  if (classes == 0 || logits.size() != labels.size() * classes)
    throw data_error(nnlens::detail::concat("count_correct: ", logits.size(), " logits for ", labels.size(),
                                            " labels and ", classes, " classes"));
  std::size_t ok = 0;
  for (std::size_t i = 0; i < labels.size(); ++i) {
    const std::size_t y = detail::checked_label(labels[i], classes, i);
    ok += argmax(logits.subspan(i * classes, classes)) == y;
  }
  return ok;
}

/// Fraction of correct predictions; `logits` is an xtensor-like container [n, classes].
template <class E, class Labels>
double accuracy(const E& logits, const Labels& labels) {
  using T = std::remove_cv_t<std::remove_reference_t<decltype(*logits.data())>>;
  using Label = std::remove_cv_t<std::remove_reference_t<decltype(*std::data(labels))>>;
  const std::size_t n = std::size(labels);
  if (n == 0) throw data_error("accuracy: no samples");
  if (logits.dimension() != 2 || logits.shape()[0] != n)
    throw data_error(nnlens::detail::concat("accuracy: logits must be [", n, ", classes]"));
  const std::size_t classes = logits.shape()[1];
  return double(count_correct(std::span<const T>(logits.data(), logits.size()), classes,
                              std::span<const Label>(std::data(labels), n))) /
         double(n);
}

}  // namespace nnlens::train
