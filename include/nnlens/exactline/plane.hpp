// nnlens/exactline/plane.hpp -- the restriction of a network to a convex polygon of a 2-D plane
// in input space (SyReNN's "plane" transformer, docs/specs/exactline.md#6-extensions).
//
//   auto r = exact_plane(net, O, U, V, {{u0, v0}, {u1, v1}, ...});   // points x = O + u U + v V
//   r.polygons[i].vertices   (u, v) of a convex polygon, counter-clockwise as given
//   r.polygons[i].output(k)  the network output at vertex k
// The polygons tile the input polygon (they overlap only on edges) and the network is affine on
// each: its value anywhere inside is the barycentric interpolation of the vertex outputs.
//
// Algorithm: ExactLine's, on convex polygons.  At each layer every polygon is cut by every face
// whose sign differs strictly between two of its vertices -- a unit crossing a knot (pwl_rule's
// knots), or, for a max pool (pwl_rule's for_each_window), v_c = v_k where c wins the window at
// the polygon's vertex average; the values at a new vertex are interpolated along the cut edge
// (exact: the prefix is affine on the polygon); then the layer's forward pass runs on all
// vertices.  A composite (Residual) runs its branches one after the other on the same polygons,
// carrying the residual input and the running sum along as interpolated payload.  Every polygon
// owns its vertices (no sharing between neighbours), and ReLU + MaxPool are not fused (the
// partition is still exact; it may have more polygons than the coarsest one).
// Errors: as exact_line (shape_error, value_error for NaN/Inf or a degenerate plane or polygon,
// logic_error for a layer that is not piecewise-linear, limit_error beyond max_polygons).
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <optional>
#include <vector>

#include "nnlens/exactline/classify.hpp"
#include "nnlens/exactline/line.hpp"

namespace nnlens {

struct plane_options {
  std::size_t max_polygons = std::size_t(1) << 22;  // limit_error beyond
};

template <class S = double, class R = double>
struct plane_polygon {
  std::vector<std::array<R, 2>> vertices;  // (u, v)
  std::vector<S> outputs;                  // vertices.size() x out_size
  std::size_t out_size = 0;
  std::span<const S> output(std::size_t k) const { return {outputs.data() + k * out_size, out_size}; }
  /// Signed area in the (u, v) plane (positive counter-clockwise).
  R area() const {
    R a = R(0);
    for (std::size_t i = 0, n = vertices.size(); i < n; ++i) {
      const auto& p = vertices[i];
      const auto& q = vertices[(i + 1) % n];
      a += p[0] * q[1] - q[0] * p[1];
    }
    return a / R(2);
  }
  /// The average of the vertices (an interior point) and the output there.
  std::array<R, 2> center() const {
    std::array<R, 2> c{R(0), R(0)};
    for (const auto& p : vertices) c[0] += p[0], c[1] += p[1];
    c[0] /= R(vertices.size());
    c[1] /= R(vertices.size());
    return c;
  }
  std::vector<S> center_output() const {
    std::vector<S> y(out_size, S(0));
    for (std::size_t k = 0; k < vertices.size(); ++k)
      for (std::size_t o = 0; o < out_size; ++o) y[o] += outputs[k * out_size + o];
    for (auto& v : y) v /= S(vertices.size());
    return y;
  }
};

template <class S = double, class R = double>
struct plane_result {
  std::vector<plane_polygon<S, R>> polygons;
  std::vector<S> origin, u, v;
  shape input_shape{}, output_shape{};
  std::vector<S> point(const R& a, const R& b) const {
    std::vector<S> x(origin.size());
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = origin[i] + S(a) * u[i] + S(b) * v[i];
    return x;
  }
  R area() const {
    R a = R(0);
    for (const auto& p : polygons) a += p.area();
    return a;
  }
};

namespace detail {

/// A convex polygon: (u, v) per vertex and `width` values per vertex.
template <class S, class R>
struct convex_piece {
  std::vector<R> uv;    // 2 per vertex
  std::vector<S> data;  // per vertex: width values
  std::size_t n() const { return uv.size() / 2; }
};

/// Splits p by the affine function g (values at the vertices) into g >= 0 and g <= 0 parts.
/// snap(row) puts a new vertex exactly on the face (the interpolated values only approximate it
/// in floating point, and that noise would decide later comparisons of equal units).
template <class S, class R, class Snap>
void split_piece(const convex_piece<S, R>& p, std::size_t width_, const std::vector<S>& g, convex_piece<S, R>& pos,
               convex_piece<S, R>& neg, Snap&& snap) {
  const std::size_t n = p.n();
  auto put = [&](convex_piece<S, R>& q, std::size_t k) {
    q.uv.insert(q.uv.end(), p.uv.begin() + std::ptrdiff_t(2 * k), p.uv.begin() + std::ptrdiff_t(2 * k + 2));
    q.data.insert(q.data.end(), p.data.begin() + std::ptrdiff_t(k * width_), p.data.begin() + std::ptrdiff_t((k + 1) * width_));
  };
  for (std::size_t k = 0; k < n; ++k) {
    const std::size_t m = (k + 1) % n;
    if (!(g[k] < S(0))) put(pos, k);
    if (!(g[k] > S(0))) put(neg, k);
    if ((g[k] > S(0) && g[m] < S(0)) || (g[k] < S(0) && g[m] > S(0))) {
      const R a = R(g[k]) / (R(g[k]) - R(g[m]));
      const S as = S(a);
      std::array<R, 2> uv{p.uv[2 * k] + a * (p.uv[2 * m] - p.uv[2 * k]), p.uv[2 * k + 1] + a * (p.uv[2 * m + 1] - p.uv[2 * k + 1])};
      for (convex_piece<S, R>* q : {&pos, &neg}) {
        q->uv.push_back(uv[0]);
        q->uv.push_back(uv[1]);
        const std::size_t row = q->data.size();
        for (std::size_t e = 0; e < width_; ++e) {
          const S va = p.data[k * width_ + e], vb = p.data[m * width_ + e];
          q->data.push_back(va + as * (vb - va));
        }
        snap(q->data.data() + row);
      }
    }
  }
}

/// Clips q (rows of `width` values) to the cell where candidate k of n wins: for each other
/// candidate j, gap(value of col(k), value of col(j)) at every vertex must be >= 0 (q is cut
/// where it changes sign, the new vertices snapped onto the tie).  False when the cell is empty:
/// some j wins on all of q, or ties k on all of q with j < k (the lower index keeps a tie), or a
/// cut leaves fewer than 3 vertices.  vals is scratch.
template <class S, class R, class Col, class Gap>
bool clip_to_winner(convex_piece<S, R>& q, std::size_t width, std::size_t k, std::size_t n, Col&& col, Gap&& gap,
                    std::vector<S>& vals) {
  for (std::size_t j = 0; j < n; ++j) {
    if (j == k) continue;
    bool pos = false, neg = false;
    vals.resize(q.n());
    for (std::size_t v = 0; v < q.n(); ++v) {
      vals[v] = gap(q.data[v * width + col(k)], q.data[v * width + col(j)]);
      pos |= vals[v] > S(0);
      neg |= vals[v] < S(0);
    }
    if (neg && !pos) return false;  // j beats k on all of q
    if (!neg && !pos) {             // equal on q: the lower index keeps it
      if (j < k) return false;
      continue;
    }
    convex_piece<S, R> a, b;
    split_piece(q, width, vals, a, b, [&](S* row) { row[col(j)] = row[col(k)]; });
    q = std::move(a);
    if (q.n() < 3) return false;
  }
  return true;
}

template <class S, class R>
class plane_engine {
 public:
  using pgon = convex_piece<S, R>;

  plane_engine(const plane_options& o, std::size_t width) : opt_(o), cur_(width), width_(width) {}
  std::vector<pgon> polys;

  static constexpr std::string_view name = "exact_plane";
  /// The whole network (exactline/walk.hpp's walk, shared by every engine; no fusion).
  template <class Net>
  void run(const Net& net) {
    line_walk(*this, net, false);
  }
  std::size_t width() const { return width_; }

  // The walk's steps (exactline/walk.hpp) on every polygon.
  void layer_done() {}
  template <class L>
  void refine_knots(const L& l, shape, const layer_site& at) {
    for (double k : pwl_rule<L>::knots(l)) {
      const S kv = S(k);
      for (std::size_t i = 0; i < cur_; ++i)
        cut_all([&](const pgon& p, std::size_t vtx) { return p.data[vtx * width_ + i] - kv; }, [&](S* row) { row[i] = kv; }, at);
    }
  }
  template <class L>
  void refine_window(const L& l, shape in, shape, std::optional<double>, const layer_site& at) {
    std::vector<pgon> work = std::move(polys);
    pwl_rule<L>::for_each_window(l, in, [&](const std::size_t* idx, std::size_t n) {
      std::vector<pgon> next;
      for (auto& p : work) resolve_window(std::move(p), idx, n, next, at);
      work = std::move(next);
    });
    polys = std::move(work);
  }

 private:
  const plane_options& opt_;
  std::size_t cur_, width_;  // current values per vertex; total per vertex (payload after them)

  template <class Snap>
  void split(const pgon& p, const std::vector<S>& g, pgon& pos, pgon& neg, Snap&& snap) const {
    split_piece(p, width_, g, pos, neg, snap);
  }

  template <class G>
  bool crosses(const pgon& p, G&& g, std::vector<S>& vals) const {
    bool pos = false, neg = false;
    vals.resize(p.n());
    for (std::size_t k = 0; k < p.n(); ++k) {
      vals[k] = g(p, k);
      pos |= vals[k] > S(0);
      neg |= vals[k] < S(0);
    }
    return pos && neg;
  }

  template <class G, class Snap>
  void cut_all(G&& g, Snap&& snap, const layer_site& at) {
    std::vector<pgon> out;
    out.reserve(polys.size());
    std::vector<S> vals;
    for (auto& p : polys) {
      if (crosses(p, g, vals)) {
        pgon a, b;
        split(p, vals, a, b, snap);
        keep(std::move(a), out);
        keep(std::move(b), out);
      } else {
        out.push_back(std::move(p));
      }
    }
    polys = std::move(out);
    check_cap(at);
  }

  static void keep(pgon&& p, std::vector<pgon>& out) {
    if (p.n() >= 3) out.push_back(std::move(p));
  }

  void check_cap(const layer_site& at) const {
    if (polys.size() > opt_.max_polygons)
      throw limit_error(concat("exact_plane: ", at.str(), " cuts the polygon into ", polys.size(),
                               " pieces, more than max_polygons = ", opt_.max_polygons));
  }

  /// The arg-max cells of one window on p: for each candidate k, p clipped to v_k >= v_j for
  /// every other j (a candidate equal to an earlier one on all of p loses to it).  The cells are
  /// convex and tile p.
  void resolve_window(pgon&& p, const std::size_t* idx, std::size_t n, std::vector<pgon>& out, const layer_site& at) {
    std::vector<S> vals;
    std::size_t made = 0;
    const std::size_t before = out.size();
    for (std::size_t k = 0; k < n; ++k) {
      pgon q = p;
      const auto col = [&](std::size_t j) { return idx[j]; };
      if (clip_to_winner(q, width_, k, n, col, [](const S& a, const S& b) -> S { return a - b; }, vals)) {
        out.push_back(std::move(q));
        ++made;
      }
    }
    if (made == 0) out.push_back(std::move(p));  // numerically degenerate: keep the polygon whole
    (void)before;
    if (out.size() > opt_.max_polygons)
      throw limit_error(concat("exact_plane: ", at.str(), " cuts the polygon into more than max_polygons = ",
                               opt_.max_polygons, " pieces"));
  }

 public:
  /// Layer forward on the current values of every vertex; payload kept.
  template <class L>
  void apply(const L& l, shape in, shape out) {
    std::size_t total = 0;
    for (const auto& p : polys) total += p.n();
    const std::size_t di = in.size(), dout = out.size(), pay = width_ - cur_;
    NNLENS_EXPECTS(di == cur_);
    value_buffer<S> x(total * di), y(total * dout);
    std::size_t r = 0;
    for (const auto& p : polys)
      for (std::size_t v = 0; v < p.n(); ++v, ++r) std::copy_n(p.data.data() + v * width_, di, x.data() + r * di);
    auto& scratch = layer_scratch<S>();
    const std::size_t need = layer_traits<L>::scratch_size(&l, in, out, total);
    if (scratch.size() < need) scratch.resize(need);
    if (total) layer_traits<L>::forward(l, forward_args<S>{in, out, total, x.data(), y.data(), nullptr, scratch.data()});
    r = 0;
    const std::size_t nw = dout + pay;
    for (auto& p : polys) {
      std::vector<S> d(p.n() * nw);
      for (std::size_t v = 0; v < p.n(); ++v, ++r) {
        std::copy_n(y.data() + r * dout, dout, d.data() + v * nw);
        std::copy_n(p.data.data() + v * width_ + cur_, pay, d.data() + v * nw + dout);
      }
      p.data = std::move(d);
    }
    cur_ = dout;
    width_ = nw;
  }

  /// Rewrites every vertex row with f(old row, new row) to a new width.
  template <class F>
  void relayout(std::size_t new_cur, std::size_t new_width, F&& f) {
    for (auto& p : polys) {
      std::vector<S> d(p.n() * new_width);
      for (std::size_t v = 0; v < p.n(); ++v) f(p.data.data() + v * width_, d.data() + v * new_width);
      p.data = std::move(d);
    }
    cur_ = new_cur;
    width_ = new_width;
  }

  template <class L>
  void composite(const L& l, shape in, shape out, const layer_site& at) {
    // layout during the branches: [current | acc (dout) | x (din) | payload]
    const std::size_t din = in.size(), dout = out.size(), pay = width_ - cur_;
    relayout(din, din + dout + din + pay, [&](const S* o, S* n) {
      std::copy_n(o, din, n);
      std::fill_n(n + din, dout, S(0));
      std::copy_n(o, din, n + din + dout);
      std::copy_n(o + din, pay, n + din + dout + din);
    });
    std::size_t off = 0;  // where the branch's output lands in acc (the join)
    line_branches(*this, l, in, at, [&](std::size_t, auto&& run) {
      run();
      // acc[off ..] += branch output; current = x again
      const std::size_t c = cur_;
      NNLENS_EXPECTS(off + c <= dout);
      relayout(din, din + dout + din + pay, [&](const S* o, S* n) {
        std::copy_n(o + c + dout, din, n);  // x
        std::copy_n(o + c, dout, n + din);  // acc
        for (std::size_t e = 0; e < c; ++e) n[din + off + e] = o[c + off + e] + o[e];
        std::copy_n(o + c + dout, din + pay, n + din + dout);
      });
      if (composite_join_v<L> == branch_join::concat) off += c;
    });
    relayout(dout, dout + pay, [&](const S* o, S* n) {
      std::copy_n(o + din, dout, n);
      std::copy_n(o + din + dout + din, pay, n + dout);
    });
  }
};

}  // namespace detail

/// The restriction of net to the polygon {O + u U + v V : (u, v) in poly} (convex, >= 3 vertices).
template <class S = double, class R = double, class Net, class EO, class EU, class EV>
plane_result<S, R> exact_plane(const Net& net_any, const EO& O, const EU& U, const EV& V,
                               const std::vector<std::array<R, 2>>& poly, const plane_options& opt = {}) {
  static_assert(detail::require_pwl_network<Net>());
  check_shapes(net_any);
  const auto& net = detail::as_scalar<S>(net_any);
  plane_result<S, R> r;
  r.input_shape = input_shape_of(net);
  r.output_shape = output_shape_of(net);
  r.origin = detail::to_values<S>(O);
  r.u = detail::to_values<S>(U);
  r.v = detail::to_values<S>(V);
  const std::size_t di = r.input_shape.size();
  for (const auto* w : {&r.origin, &r.u, &r.v}) {
    if (w->size() != di)
      throw shape_error(detail::concat("exact_plane: O, U and V need ", di, " elements each (the input ", r.input_shape.str(),
                                       "), got ", w->size()));
    for (std::size_t i = 0; i < di; ++i)
      if (!std::isfinite(double((*w)[i]))) throw value_error(detail::concat("exact_plane: element ", i, " of O, U or V is not finite"));
  }
  if (poly.size() < 3) throw value_error(detail::concat("exact_plane: the polygon has ", poly.size(), " vertices, needs at least 3"));
  {
    plane_polygon<S, R> probe;
    probe.vertices = poly;
    if (!(probe.area() != R(0))) throw value_error("exact_plane: the polygon has zero area");
  }
  bool uv_dependent = true;  // U and V must span a plane
  {
    double uu = 0, vv = 0, uv = 0;
    for (std::size_t i = 0; i < di; ++i)
      uu += double(r.u[i]) * double(r.u[i]), vv += double(r.v[i]) * double(r.v[i]), uv += double(r.u[i]) * double(r.v[i]);
    uv_dependent = !(uu * vv - uv * uv > 1e-24 * uu * vv) || uu == 0 || vv == 0;
  }
  if (uv_dependent) throw value_error("exact_plane: U and V do not span a plane (one is zero or they are parallel)");
  detail::plane_engine<S, R> eng(opt, di);
  typename detail::plane_engine<S, R>::pgon p;
  for (const auto& q : poly) {
    p.uv.push_back(q[0]);
    p.uv.push_back(q[1]);
    const auto x = r.point(q[0], q[1]);
    p.data.insert(p.data.end(), x.begin(), x.end());
  }
  eng.polys.push_back(std::move(p));
  eng.run(net);
  const std::size_t dout = r.output_shape.size();
  r.polygons.reserve(eng.polys.size());
  for (auto& q : eng.polys) {
    plane_polygon<S, R> out;
    out.out_size = dout;
    for (std::size_t k = 0; k < q.n(); ++k) {
      out.vertices.push_back({q.uv[2 * k], q.uv[2 * k + 1]});
      out.outputs.insert(out.outputs.end(), q.data.begin() + std::ptrdiff_t(k * eng.width()),
                         q.data.begin() + std::ptrdiff_t(k * eng.width() + dout));
    }
    r.polygons.push_back(std::move(out));
  }
  return r;
}

/// A region of the plane where one class wins (convex: a cell of one linear region).
template <class S = double, class R = double>
struct class_region {
  plane_polygon<S, R> polygon;
  std::size_t label = 0;
};

/// The exact decision regions: every polygon of r cut into the cells where each class wins
/// (arg-max or arg-min of the outputs; a class equal to an earlier one on a whole cell loses to it).
template <class S, class R>
std::vector<class_region<S, R>> classify_plane(const plane_result<S, R>& r, class_rule rule = class_rule::argmax) {
  std::vector<class_region<S, R>> out;
  const std::size_t d = r.output_shape.size();
  const S sign = rule == class_rule::argmax ? S(1) : S(-1);
  std::vector<S> vals;
  for (const auto& P : r.polygons) {
    detail::convex_piece<S, R> p;
    for (std::size_t k = 0; k < P.vertices.size(); ++k) {
      p.uv.push_back(P.vertices[k][0]);
      p.uv.push_back(P.vertices[k][1]);
    }
    p.data = P.outputs;
    for (std::size_t c = 0; c < d; ++c) {
      auto q = p;
      const auto gap = [&](const S& a, const S& b) -> S { return sign * (a - b); };
      if (!detail::clip_to_winner(q, d, c, d, [](std::size_t j) { return j; }, gap, vals)) continue;
      class_region<S, R> reg;
      reg.label = c;
      reg.polygon.out_size = d;
      for (std::size_t v = 0; v < q.n(); ++v) reg.polygon.vertices.push_back({q.uv[2 * v], q.uv[2 * v + 1]});
      reg.polygon.outputs = std::move(q.data);
      out.push_back(std::move(reg));
    }
  }
  return out;
}

}  // namespace nnlens
