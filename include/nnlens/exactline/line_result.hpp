// nnlens/exactline/line_result.hpp -- what ExactLine is asked and what it answers, for every
// engine (the host's line.hpp, plane.hpp, the thrust backend).
//
//   line_options     merge_tol, reanchor, validate, fuse_max_pool, the caps max_pieces / max_bytes,
//                    the budget max_memory, keep_going
//   line_result<S, R> r   r.t (0 = t_0 < ... < t_k = 1), r.output(j), r.eval(t), r.point(t),
//                    r.piece_of(t), r.length(), r.stats (line_stats), r.error (keep_going)
//   detail::check_line_caps<S>(points, d, opt, where)   limit_error past max_pieces or max_bytes
//   detail::check_line_pieces(points, opt, where)        past max_pieces only (a bounded run's part)
//
// requires: eval / piece_of: a result of at least one piece, t in [0, 1].
// ensures:  eval interpolates inside the piece of t (exact up to rounding: the network is affine
//           there); check_line_caps's messages name where() ("layer 3").
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "nnlens/core/error.hpp"
#include "nnlens/core/shape.hpp"

namespace nnlens {

struct line_options {
  double merge_tol = 0;           // merge breaks closer than this in t (0: only coincident ones)
  bool reanchor = false;          // recompute values at new points from the input (no drift)
  bool validate = false;          // check every piece at 1/4, 1/2 and 3/4 of its length
  double validate_tol = 1e-9;     // |f(x) - interpolation| <= tol * (1 + |f(x)|) counts as affine
  bool fuse_max_pool = true;      // ReLU / max(x, c) next to a MaxPool: one fused rule
  std::size_t max_pieces = std::size_t(1) << 24;  // limit_error beyond
  std::size_t max_bytes = std::size_t(4) << 30;   // max_memory = 0: values kept for one layer; limit_error beyond
  std::size_t max_memory = std::size_t(1) << 30;  // bytes of values in flight (host engine); a layer that
                                                  // would pass it runs on sub-segments; 0: unbounded
  bool keep_going = false;        // exact_lines: record a segment's error in its result, go on
};

struct line_stats {
  std::size_t merged = 0;             // proposed breaks dropped: within merge_tol, or coincident
  std::size_t validated_pieces = 0;   // validate: pieces checked
  std::size_t violations = 0;         // validate: pieces on which the network is not affine
  double max_deviation = 0;           // validate: the largest relative deviation seen
  std::vector<std::size_t> points;    // number of points after each top-level layer
  std::size_t sub_segments = 0;       // max_memory: steps split into sub-segments
  std::size_t cuts = 0;               // max_memory: points made to cut a single piece
  std::size_t cuts_merged = 0;        // max_memory: of those, dropped again (the network is affine across)
};

template <class S = double, class R = double>
struct line_result {
  using scalar_type = S;
  using ratio_type = R;
  std::vector<R> t;          // 0 = t_0 < ... < t_k = 1
  std::vector<S> values;     // (k + 1) x output_shape.size(), row-major: the outputs at every t
  std::vector<S> from, to;   // P and Q (flattened)
  shape input_shape{}, output_shape{};
  line_stats stats;
  std::string error;         // exact_lines with keep_going: why this segment failed (else empty)

  std::size_t pieces() const { return t.empty() ? 0 : t.size() - 1; }
  std::size_t out_size() const { return output_shape.size(); }
  std::span<const S> output(std::size_t j) const { return {values.data() + j * out_size(), out_size()}; }
  /// The input point P + tt (Q - P).
  std::vector<S> point(const R& tt) const {
    std::vector<S> x(from.size());
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = from[i] + S(tt) * (to[i] - from[i]);
    return x;
  }
  /// The piece j with t_j <= tt < t_{j+1} (the last piece for tt == 1).
  std::size_t piece_of(const R& tt) const {
    NNLENS_EXPECTS(t.size() >= 2);
    auto it = std::upper_bound(t.begin(), t.end(), tt);
    std::size_t j = it == t.begin() ? 0 : std::size_t(it - t.begin()) - 1;
    return std::min(j, pieces() - 1);
  }
  /// The network output at tt in [0, 1] (interpolated inside its piece: exact up to rounding).
  std::vector<S> eval(const R& tt) const {
    const std::size_t j = piece_of(tt);
    const S a = S((tt - t[j]) / (t[j + 1] - t[j]));
    std::vector<S> y(out_size());
    auto y0 = output(j), y1 = output(j + 1);
    for (std::size_t o = 0; o < y.size(); ++o) y[o] = y0[o] + a * (y1[o] - y0[o]);
    return y;
  }
  /// Euclidean length of the segment in input space.
  double length() const {
    double s = 0;
    for (std::size_t i = 0; i < from.size(); ++i) {
      const double d = double(to[i] - from[i]);
      s += d * d;
    }
    return std::sqrt(s);
  }
};

namespace detail {

/// The caps of line_options (every policy): limit_error when `points` points of width d pass
/// max_pieces or max_bytes; where() names the layer ("layer 3").
template <class Where>
void check_line_pieces(std::size_t points, const line_options& opt, Where&& where) {
  if (points - 1 > opt.max_pieces)
    throw limit_error(concat("exact_line: ", where(), " splits the segment into ", points - 1, " pieces, more than max_pieces = ",
                             opt.max_pieces));
}
template <class S, class Where>
void check_line_caps(std::size_t points, std::size_t d, const line_options& opt, Where&& where) {
  check_line_pieces(points, opt, where);
  const double bytes = double(points) * double(d) * double(sizeof(S)) * 2;
  if (bytes > double(opt.max_bytes))
    throw limit_error(concat("exact_line: ", where(), " needs ", bytes / (1 << 20), " MiB for ", points, " points of width ", d,
                             ", more than max_bytes = ", opt.max_bytes / (1 << 20), " MiB"));
}

}  // namespace detail

}  // namespace nnlens
