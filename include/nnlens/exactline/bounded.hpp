// nnlens/exactline/bounded.hpp -- ExactLine in bounded memory: sub-segments, depth first.
//
//   detail::bounded_line<S, R, Net> b(net, opt, parallel, P, Q, stats, emit);
//   b.run(pl)      pl: the segment's two end points (t = 0 and 1, their values); emit(t, y, width)
//                  receives every row of the result (the output y at ratio t) once, in order of t,
//                  with about opt.max_memory bytes of values in flight whatever the number of pieces
//
// Method.  The layer-by-layer engine (exactline/line.hpp) runs with an allowance of values.  A
// top-level step (one layer, or a fused ReLU + MaxPool) that would pass it throws line_overflow,
// and the engine gives back the step's input points.  The step and the rest of the network then run
// on parts of that input, one after the other (depth first: a part finishes, emits its rows and
// frees them before the next starts), each with the allowance less what the parts above it hold:
//   - the step starts with a refine (a ReLU, a max window): parts are slices of the refine's
//     output points.  A part takes the input points around its slice and its refine keeps the
//     slice; every new point's value comes from its own piece's ends, whichever part computes it,
//     so the parts' points and values are the unbounded run's, bit for bit;
//   - otherwise (an affine layer or a composite first): runs of consecutive input points, which
//     share their end points: again points of the unbounded run;
//   - one piece that starts with no refine (a composite right after the input, or after a step
//     that left one piece): cut into equal parts at new points the unbounded run does not have.
//     After the join a cut is dropped where the network is affine across it (its outputs equal the
//     interpolation of its neighbours' to max(validate_tol, sqrt(eps)) relative), kept otherwise.
// Neighbouring parts share their boundary point; emit sees it once.  A single piece that alone
// passes the allowance is limit_error naming the layer.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <functional>
#include <limits>
#include <optional>
#include <span>
#include <vector>

#include "nnlens/core/error.hpp"
#include "nnlens/exactline/engine.hpp"
#include "nnlens/exactline/line_checks.hpp"

namespace nnlens::detail {

template <class S, class R, class Net>
class bounded_line {
 public:
  using emit_fn = std::function<void(const R& t, const S* y, std::size_t width)>;
  bounded_line(const Net& net, const line_options& opt, bool parallel, std::span<const S> P, std::span<const S> Q,
               line_stats& st, emit_fn emit)
      : net_(net), opt_(opt), par_(parallel), P_(P), Q_(Q), stats_(st), emit_(std::move(emit)) {}

  void run(polyline<S, R>& pl) {
    allowance_ = std::max<std::size_t>(opt_.max_memory / sizeof(S), 1);
    const line_engine<S, R> e(opt_, par_, P_, Q_, stats_);
    descend(e, pl, 0, std::nullopt, 0);
    flush();
    stats_.points.clear();
    for (std::size_t p : pieces_) stats_.points.push_back(p + 1);
  }

 private:
  /// The network from top-level layer `first` on, on pl (its first refine keeping `slice`).
  void descend(const line_engine<S, R>& proto, polyline<S, R>& pl, std::size_t first, std::optional<point_slice> slice,
               std::size_t reserved, std::size_t depth = 0) {
    line_engine<S, R> e = proto;  // the prefix (reanchor) of the layers before `first`
    e.bound(allowance_, reserved, slice, &pieces_);
    try {
      e.run(net_, pl, first);
    } catch (const line_overflow& o) {
      e.restore();  // pl: the input of step o.layer; e's prefix: the layers before it
      ++stats_.sub_segments;
      if (depth > max_depth) fail(o, pl.dim);  // parts that never fit (a composite's own width)
      split(e, pl, o, o.layer == first ? slice : std::nullopt, reserved, depth + 1);
      return;
    }
    for (std::size_t i = 0; i < pl.t.size(); ++i) row(pl.t[i], pl.v.data() + i * pl.dim, pl.dim);
    buffer_pool<S>::local().give(std::move(pl.v));
  }

  /// Step o.layer on parts of its input pl (see the header comment).
  void split(const line_engine<S, R>& e, polyline<S, R>& pl, const line_overflow& o, std::optional<point_slice> own,
             std::size_t reserved, std::size_t depth) {
    const std::size_t held = reserved + pl.v.size();  // pl stays while its parts run
    const std::size_t room = allowance_ > held ? allowance_ - held : 0;
    if (room < 2 * pl.dim) fail(o, pl.dim);
    // as many parts as the overflow asks for, twice over: the layers after it may need more
    const std::size_t want = std::max<std::size_t>(2, 2 * ((o.values + room - 1) / room));
    if (o.refine_points > 0) {
      const std::size_t lo = own ? own->lo : 0, hi = own ? own->hi : o.refine_points - 1;
      if (hi - lo < 2) fail(o, pl.dim);
      const std::size_t parts = std::min(want, hi - lo);
      const auto& pos = o.refine_pos;
      for (std::size_t c = 0; c < parts; ++c) {
        const std::size_t a = lo + (hi - lo) * c / parts, b = lo + (hi - lo) * (c + 1) / parts;
        // the input points around [a, b]: the last at or before a, the first at or after b
        const std::size_t ja = std::size_t(std::upper_bound(pos.begin(), pos.end(), a) - pos.begin()) - 1;
        const std::size_t jb = std::size_t(std::lower_bound(pos.begin(), pos.end(), b) - pos.begin());
        polyline<S, R> part = rows(pl, ja, jb);
        descend(e, part, o.layer, point_slice{a - pos[ja], b - pos[ja]}, held, depth);
      }
    } else if (pl.t.size() > 2) {
      const std::size_t n = pl.t.size() - 1, parts = std::min(want, n);
      for (std::size_t c = 0; c < parts; ++c) {
        polyline<S, R> part = rows(pl, n * c / parts, n * (c + 1) / parts);
        descend(e, part, o.layer, std::nullopt, held, depth);
      }
    } else {
      const std::size_t d = pl.dim;
      const S* v0 = pl.v.data();
      const S* v1 = v0 + d;
      std::vector<R> cut{pl.t[0]};
      for (std::size_t c = 1; c < want; ++c) cut.push_back(pl.t[0] + (pl.t[1] - pl.t[0]) * R(c) / R(want));
      cut.push_back(pl.t[1]);
      for (std::size_t c = 0; c + 1 < cut.size(); ++c)
        if (!(cut[c] < cut[c + 1])) fail(o, d);  // the piece is too short to cut
      for (std::size_t c = 1; c + 1 < cut.size(); ++c) cuts_.push_back(cut[c]);
      stats_.cuts += cut.size() - 2;
      for (std::size_t c = 0; c + 1 < cut.size(); ++c) {
        polyline<S, R> part;
        part.t = {cut[c], cut[c + 1]};
        part.dim = d;
        part.v = buffer_pool<S>::local().take(2 * d);
        for (std::size_t q = 0; q < 2; ++q) {
          const S a = S(R(c + q) / R(want));
          S* dst = part.v.data() + q * d;
          if (c + q == 0 || c + q == want)
            std::copy_n(c + q == 0 ? v0 : v1, d, dst);
          else
            for (std::size_t k = 0; k < d; ++k) dst[k] = v0[k] + a * (v1[k] - v0[k]);
        }
        descend(e, part, o.layer, std::nullopt, held, depth);
      }
    }
  }

  static polyline<S, R> rows(const polyline<S, R>& pl, std::size_t a, std::size_t b) {
    polyline<S, R> part;
    part.t.assign(pl.t.begin() + std::ptrdiff_t(a), pl.t.begin() + std::ptrdiff_t(b + 1));
    part.dim = pl.dim;
    part.v = buffer_pool<S>::local().take((b + 1 - a) * pl.dim);
    std::copy_n(pl.v.data() + a * pl.dim, (b + 1 - a) * pl.dim, part.v.data());
    return part;
  }

  [[noreturn]] void fail(const line_overflow& o, std::size_t d) const {
    throw limit_error(concat("exact_line: layer ", o.layer, " needs ", double(o.values) * double(sizeof(S)) / double(1 << 20),
                             " MiB of values even on a single piece (", d, " values per point), more than max_memory = ",
                             double(opt_.max_memory) / double(1 << 20), " MiB"));
  }

  /// One row of the result from a part: the boundary point once; a cut held until its next row.
  void row(const R& t, const S* y, std::size_t d) {
    if (seen_ && !(last_t_ < t)) return;  // a part's first row: its left neighbour's last
    seen_ = true;
    last_t_ = t;
    if (pending_) {
      pending_ = false;
      if (!affine_across(t, y)) out(pend_t_, pend_y_.data(), d);
      else ++stats_.cuts_merged;
    }
    if (std::find(cuts_.begin(), cuts_.end(), t) != cuts_.end() && has_prev_) {
      pending_ = true;
      pend_t_ = t;
      pend_y_.assign(y, y + d);
      return;
    }
    out(t, y, d);
  }
  void out(const R& t, const S* y, std::size_t d) {
    if (rows_ > opt_.max_pieces)
      throw limit_error(concat("exact_line: the segment splits into more than max_pieces = ", opt_.max_pieces, " pieces"));
    ++rows_;
    prev_t_ = t;
    prev_y_.assign(y, y + d);
    has_prev_ = true;
    emit_(t, y, d);
  }
  void flush() {
    if (pending_) out(pend_t_, pend_y_.data(), pend_y_.size()), pending_ = false;
  }
  /// Whether the held cut lies on the segment from the previous row to (t, y).
  bool affine_across(const R& t, const S* y) const {
    const double tol = std::max(opt_.validate_tol, std::sqrt(double(std::numeric_limits<S>::epsilon())));
    const S a = S((pend_t_ - prev_t_) / (t - prev_t_));
    for (std::size_t k = 0; k < pend_y_.size(); ++k) {
      const S interp = prev_y_[k] + a * (y[k] - prev_y_[k]);
      const S diff = pend_y_[k] > interp ? pend_y_[k] - interp : interp - pend_y_[k];
      const S mag = pend_y_[k] > S(0) ? pend_y_[k] : S(0) - pend_y_[k];
      if (double(diff / (S(1) + mag)) > tol) return false;
    }
    return true;
  }

  static constexpr std::size_t max_depth = 64;  // nested splits of one part before limit_error
  const Net& net_;
  const line_options& opt_;
  bool par_;
  std::span<const S> P_, Q_;
  line_stats& stats_;
  emit_fn emit_;
  std::size_t allowance_ = 0, rows_ = 0;
  std::vector<std::size_t> pieces_;  // per top-level layer
  std::vector<R> cuts_;              // the cut points (not the unbounded run's)
  bool seen_ = false, pending_ = false, has_prev_ = false;
  R last_t_{}, pend_t_{}, prev_t_{};
  std::vector<S> pend_y_, prev_y_;
};

}  // namespace nnlens::detail
