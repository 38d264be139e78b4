// nnlens/exactline/classify.hpp -- exact decision boundaries along a line.
//
//   classify_line(line, rule)    the intervals [from, to] of t on which each class wins:
//                                rule = argmax (classifiers) or argmin (ACAS Xu advisories)
//   first_change(line, rule)     the smallest t at which the winning class changes (nullopt: never)
//   line_density(line)           (number of endpoints) / ||Q - P||_2, the paper's §5 density
//
// Inside one affine piece every logit is a line in t, so the winner changes where the upper
// envelope of the logits changes: the envelope walk (kernels/envelope.hpp) finds every change,
// also when three or more classes take turns inside one piece (SyReNN's ArgMax misses the middle
// one: docs/specs/exactline.md#25-fusion-classification-composites).  Adjacent intervals with the same label are merged; a label
// describes the open interval (at an exact tie the class that wins just after it).
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "nnlens/kernels/envelope.hpp"
#include "nnlens/exactline/line.hpp"

namespace nnlens {

enum class class_rule { argmax, argmin };

template <class R = double>
struct class_interval {
  R from, to;
  std::size_t label;
};

template <class S, class R>
std::vector<class_interval<R>> classify_line(const line_result<S, R>& line, class_rule rule = class_rule::argmax) {
  std::vector<class_interval<R>> out;
  const std::size_t k = line.pieces(), d = line.out_size();
  if (k == 0 || d == 0) return out;
  const S sign = rule == class_rule::argmax ? S(1) : S(-1);
  auto add = [&](const R& from, const R& to, std::size_t label) {
    if (!(to > from)) return;
    if (!out.empty() && out.back().label == label)
      out.back().to = to;
    else
      out.push_back({from, to, label});
  };
  for (std::size_t j = 0; j < k; ++j) {
    auto y0 = line.output(j), y1 = line.output(j + 1);
    const R t0 = line.t[j], dt = line.t[j + 1] - line.t[j];
    R start = t0;
    std::vector<std::pair<R, std::size_t>> changes;
    std::size_t label = exactline::envelope_walk<R, S>(
        d, [&](std::size_t o) { return std::pair<S, S>(sign * y0[o], sign * y1[o]); }, std::optional<S>{},
        [&](const R& s, std::size_t winner) { changes.emplace_back(t0 + s * dt, winner); });
    for (auto& [at, w] : changes) {
      add(start, at, label);
      start = at;
      label = w;
    }
    add(start, line.t[j + 1], label);
  }
  return out;
}

template <class S, class R>
std::optional<R> first_change(const line_result<S, R>& line, class_rule rule = class_rule::argmax) {
  const auto iv = classify_line(line, rule);
  if (iv.size() < 2) return std::nullopt;
  return iv[0].to;
}

template <class S, class R>
double line_density(const line_result<S, R>& line) {
  return double(line.t.size()) / line.length();
}

}  // namespace nnlens
