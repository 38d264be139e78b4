// nnlens/exactline/classify.hpp -- exact decision boundaries along a line.
//
//   classify_line(line, rule)    the intervals [from, to] of t on which each class wins:
//                                rule = argmax (classifiers) or argmin (ACAS Xu advisories)
//   first_change(line, rule)     the smallest t at which the winning class changes (nullopt: never)
//   class_tracker<S, R> c(outputs, rule[, on_closed])   the same on rows as they come (streamed
//                                lines): c.row(t, y) ... c.finish(); c.intervals()
//   line_density(line)           (number of endpoints) / ||Q - P||_2, the paper's §5 density
//
// Inside one affine piece every logit is a line in t, so the winner changes where the upper
// envelope of the logits changes: the envelope walk (kernels/envelope.hpp) finds every change,
// also when three or more classes take turns inside one piece (SyReNN's ArgMax misses the middle
// one: docs/specs/exactline.md#25-fusion-classification-composites).  Adjacent intervals with the same label are merged; a label
// describes the open interval (at an exact tie the class that wins just after it).
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <utility>
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

/// classify_line on rows as they come (in order of t, each once): the intervals so far, merged
/// as they grow.  With on_closed, each interval is handed over when the next one starts (and the
/// last by finish()) and only the open one is kept.
template <class S, class R = double>
class class_tracker {
 public:
  using closed_fn = std::function<void(const class_interval<R>&)>;
  explicit class_tracker(std::size_t outputs, class_rule rule = class_rule::argmax, closed_fn on_closed = {})
      : d_(outputs), sign_(rule == class_rule::argmax ? S(1) : S(-1)), closed_(std::move(on_closed)) {}

  /// The output y (`outputs` values) at ratio t.
  void row(const R& t, const S* y) {
    if (has_prev_ && d_ > 0) piece(t, y);
    prev_t_ = t;
    prev_.assign(y, y + d_);
    has_prev_ = true;
  }
  /// Hands the open interval to on_closed (when there is one).
  void finish() {
    if (closed_ && open_) closed_(*open_), open_.reset();
  }
  /// The intervals so far (without on_closed: all of them; with it: the open one, if any).
  std::vector<class_interval<R>> intervals() const {
    std::vector<class_interval<R>> v = done_;
    if (open_) v.push_back(*open_);
    return v;
  }
  std::size_t count() const { return count_; }

 private:
  void piece(const R& t1, const S* y1) {
    const R t0 = prev_t_, dt = t1 - t0;
    const S* y0 = prev_.data();
    R start = t0;
    changes_.clear();
    std::size_t label = exactline::envelope_walk<R, S>(
        d_, [&](std::size_t o) { return std::pair<S, S>(sign_ * y0[o], sign_ * y1[o]); }, std::optional<S>{},
        [&](const R& s, std::size_t winner) { changes_.emplace_back(t0 + s * dt, winner); });
    for (auto& [at, w] : changes_) {
      add(start, at, label);
      start = at;
      label = w;
    }
    add(start, t1, label);
  }
  void add(const R& from, const R& to, std::size_t label) {
    if (!(to > from)) return;
    if (open_ && open_->label == label) {
      open_->to = to;
      return;
    }
    if (open_) {
      if (closed_)
        closed_(*open_);
      else
        done_.push_back(*open_);
    }
    open_ = class_interval<R>{from, to, label};
    ++count_;
  }

  std::size_t d_;
  S sign_;
  closed_fn closed_;
  bool has_prev_ = false;
  R prev_t_{};
  std::vector<S> prev_;
  std::vector<std::pair<R, std::size_t>> changes_;
  std::optional<class_interval<R>> open_;
  std::vector<class_interval<R>> done_;
  std::size_t count_ = 0;
};

template <class S, class R>
std::vector<class_interval<R>> classify_line(const line_result<S, R>& line, class_rule rule = class_rule::argmax) {
  if (line.pieces() == 0 || line.out_size() == 0) return {};
  class_tracker<S, R> c(line.out_size(), rule);
  for (std::size_t j = 0; j < line.t.size(); ++j) c.row(line.t[j], line.output(j).data());
  return c.intervals();
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
