// exact_plane and classify_plane: tiling, affinity on every polygon (against forward passes),
// exact rational cases, static == dynamic, residual and max-pool networks, and the error paths.
#include <doctest/doctest.h>

#include <boost/multiprecision/cpp_int.hpp>

#include <nnlens/exactline.hpp>
#include <nnlens/nnlens.hpp>

#include <array>
#include <cmath>
#include <random>
#include <vector>

using namespace nnlens;

namespace {

using Q = boost::multiprecision::cpp_rational;

const std::vector<std::array<double, 2>> square{{-1, -1}, {1, -1}, {1, 1}, {-1, 1}};

struct plane_in {
  std::vector<double> O, U, V;
};
plane_in random_plane(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd;
  plane_in p{std::vector<double>(n), std::vector<double>(n), std::vector<double>(n)};
  for (auto* w : {&p.O, &p.U, &p.V})
    for (auto& x : *w) x = nd(rng);
  return p;
}

template <class Net>
std::vector<double> f(const Net& net, const std::vector<double>& x) {
  auto X = xt::xarray<double>::from_shape(input_shape_of(net).with_batch(1));
  std::copy(x.begin(), x.end(), X.begin());
  const auto y = forward(network_cast<double>(net), X);
  return std::vector<double>(y.begin(), y.end());
}

bool inside(const plane_polygon<double>& p, double u, double v) {
  for (std::size_t i = 0, n = p.vertices.size(); i < n; ++i) {
    const auto& a = p.vertices[i];
    const auto& b = p.vertices[(i + 1) % n];
    if ((b[0] - a[0]) * (v - a[1]) - (b[1] - a[1]) * (u - a[0]) < -1e-12) return false;
  }
  return true;
}

/// The output at (u, v) inside polygon p from three of its vertices (barycentric: exact when the
/// network is affine on p).
std::vector<double> interpolate(const plane_polygon<double>& p, double u, double v) {
  // the three vertices spanning the largest triangle (well conditioned)
  std::size_t bi = 0, bj = 1, bk = 2;
  double best = -1;
  const std::size_t n = p.vertices.size();
  for (std::size_t j = 1; j < n; ++j)
    for (std::size_t k = j + 1; k < n; ++k) {
      const auto &a = p.vertices[0], &b = p.vertices[j], &c = p.vertices[k];
      const double det = std::abs((b[0] - a[0]) * (c[1] - a[1]) - (c[0] - a[0]) * (b[1] - a[1]));
      if (det > best) best = det, bj = j, bk = k;
    }
  const auto &a = p.vertices[bi], &b = p.vertices[bj], &c = p.vertices[bk];
  const double det = (b[0] - a[0]) * (c[1] - a[1]) - (c[0] - a[0]) * (b[1] - a[1]);
  const double l1 = ((u - a[0]) * (c[1] - a[1]) - (c[0] - a[0]) * (v - a[1])) / det;
  const double l2 = ((b[0] - a[0]) * (v - a[1]) - (u - a[0]) * (b[1] - a[1])) / det;
  std::vector<double> y(p.out_size);
  for (std::size_t o = 0; o < y.size(); ++o)
    y[o] = p.output(bi)[o] + l1 * (p.output(bj)[o] - p.output(bi)[o]) + l2 * (p.output(bk)[o] - p.output(bi)[o]);
  return y;
}

/// Tiling (areas add up, no point in two polygons, every point in one), vertex values and
/// affinity at random points, relative tolerance rel.
template <class Net>
void check_plane(const Net& net, const plane_result<double>& r, std::uint64_t seed, double rel = 1e-9) {
  REQUIRE(!r.polygons.empty());
  CHECK(r.area() == doctest::Approx(4.0).epsilon(1e-12));
  double worst_vertex = 0;
  for (const auto& p : r.polygons) {
    CHECK(p.vertices.size() >= 3);
    CHECK(p.area() >= -1e-15);
    for (std::size_t k = 0; k < p.vertices.size(); k += 2) {  // every other vertex against forward
      const auto y = f(net, r.point(p.vertices[k][0], p.vertices[k][1]));
      for (std::size_t o = 0; o < y.size(); ++o)
        worst_vertex = std::max(worst_vertex, std::abs(y[o] - p.output(k)[o]) / (1 + std::abs(y[o])));
    }
  }
  CHECK(worst_vertex < rel);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  std::size_t twice = 0, none = 0;
  double worst = 0;
  for (int q = 0; q < 300; ++q) {
    const double a = u(rng), b = u(rng);
    const plane_polygon<double>* hit = nullptr;
    std::size_t hits = 0;
    for (const auto& p : r.polygons)
      if (inside(p, a, b)) ++hits, hit = &p;
    if (hits == 0) ++none;
    if (hits > 1) ++twice;  // only on shared edges: measure zero for random points
    if (!hit) continue;
    const auto y = f(net, r.point(a, b));
    const auto yi = interpolate(*hit, a, b);
    for (std::size_t o = 0; o < y.size(); ++o) worst = std::max(worst, std::abs(y[o] - yi[o]) / (1 + std::abs(y[o])));
  }
  CHECK(none == 0);
  CHECK(twice == 0);
  CHECK(worst < 1e3 * rel);  // barycentric coordinates amplify rounding on thin polygons
}

}  // namespace

TEST_CASE("exact_plane: one ReLU in exact rationals cuts the square along its kink") {
  // f(x) = relu(x0 - x1 / 2) on the plane x = (u, v): the kink is the line u = v / 2
  using Net = Sequential<Input<2>, Dense<1, Q>, ReLU>;
  Net net;
  auto& d = net.layer<0>();
  d.W = tensor<Q, 2>::from_shape({2, 1});
  d.b = tensor<Q, 1>::from_shape({1});
  d.W(0, 0) = Q(1);
  d.W(1, 0) = Q(-1, 2);
  d.b(0) = Q(0);
  const std::vector<Q> O{0, 0}, U{1, 0}, V{0, 1};
  const std::vector<std::array<Q, 2>> sq{{-1, -1}, {1, -1}, {1, 1}, {-1, 1}};
  const auto r = exact_plane<Q, Q>(net, O, U, V, sq);
  REQUIRE(r.polygons.size() == 2);
  CHECK(r.area() == Q(4));
  Q total(0);
  for (const auto& p : r.polygons) {
    // every vertex is on the boundary of the square or on the kink u = v/2; outputs exact
    for (std::size_t k = 0; k < p.vertices.size(); ++k) {
      const Q pre = p.vertices[k][0] - p.vertices[k][1] / 2;
      CHECK(p.output(k)[0] == (pre > 0 ? pre : Q(0)));
    }
    total += p.area();
  }
  CHECK(total == Q(4));
  // the two areas: the kink runs from (-1/2, -1) to (1/2, 1): the left part has area 2, the right 2
  CHECK(r.polygons[0].area() == Q(2));
  CHECK(r.polygons[1].area() == Q(2));
}

TEST_CASE("exact_plane: MLPs with ReLU, LeakyReLU, HardTanh, Clamp tile the square; static == dynamic") {
  using MLP = Sequential<Input<6>, Dense<16>, ReLU, Dense<12>, LeakyReLU, Dense<8>, HardTanh, Dense<6>, Clamp, Dense<3>>;
  MLP net;
  initialize(net, 11);
  std::get<5>(net.layers) = HardTanh{-0.5, 0.5};
  std::get<7>(net.layers) = Clamp{0.0, 0.3};
  const auto P = random_plane(6, 12);
  const auto r = exact_plane(net, P.O, P.U, P.V, square);
  check_plane(net, r, 13);
  const DynamicNetwork dn = to_dynamic(net);
  const auto rd = exact_plane(dn, P.O, P.U, P.V, square);
  CHECK(rd.polygons.size() == r.polygons.size());
  // more than one region, and fewer than the count a brute-force unit split would bound
  CHECK(r.polygons.size() > 10);
}

TEST_CASE("exact_plane: CNN with Conv2D, ReLU, MaxPool2D, AvgPool2D; residual networks") {
  SUBCASE("CNN") {
    using CNN = Sequential<Input<1, 6, 6>, Conv2D<3, 3, 1, 1>, ReLU, MaxPool2D<2>, AvgPool2D<3>, Flatten, Dense<4>>;
    CNN net;
    initialize(net, 21);
    const auto P = random_plane(36, 22);
    const auto r = exact_plane(net, P.O, P.U, P.V, square);
    check_plane(net, r, 23);
    const DynamicNetwork dn = to_dynamic(net);
    CHECK(exact_plane(dn, P.O, P.U, P.V, square).polygons.size() == r.polygons.size());
  }
  SUBCASE("residual MLP with identity and projection shortcuts") {
    using Res = Sequential<Input<6>, Dense<12>, ReLU, Residual<Block<Dense<12>, ReLU, Dense<12>>>, ReLU,
                           Residual<Block<Dense<8>, ReLU>, Block<Dense<8>>>, Dense<3>>;
    Res net;
    initialize(net, 31);
    const auto P = random_plane(6, 32);
    const auto r = exact_plane(net, P.O, P.U, P.V, square);
    check_plane(net, r, 33);
    const DynamicNetwork dn = to_dynamic(net);
    CHECK(exact_plane(dn, P.O, P.U, P.V, square).polygons.size() == r.polygons.size());
  }
}

TEST_CASE("exact_plane agrees with exact_line on a segment of the plane") {
  using MLP = Sequential<Input<4>, Dense<10>, ReLU, Dense<10>, ReLU, Dense<2>>;
  MLP net;
  initialize(net, 41);
  const auto P = random_plane(4, 42);
  const auto r = exact_plane(net, P.O, P.U, P.V, square);
  // the segment v = 0.3, u from -1 to 1: every break of the line is on a polygon edge, so along
  // the segment the polygons it crosses change exactly at the line's breaks
  const auto A = r.point(-1, 0.3), B = r.point(1, 0.3);
  const auto line = exact_line(net, A, B);
  std::size_t crossings = 0;  // how many polygon edges the segment crosses strictly inside
  for (std::size_t j = 1; j + 1 < line.t.size(); ++j) {
    const double u = -1 + 2 * line.t[j];
    // just left and right of the break the point lies in different polygons
    const double e = 1e-7;
    const plane_polygon<double>* L = nullptr;
    const plane_polygon<double>* Rr = nullptr;
    for (const auto& p : r.polygons) {
      if (inside(p, u - e, 0.3)) L = &p;
      if (inside(p, u + e, 0.3)) Rr = &p;
    }
    REQUIRE(L);
    REQUIRE(Rr);
    if (L != Rr) ++crossings;
  }
  CHECK(crossings == line.pieces() - 1);
}

TEST_CASE("classify_plane: decision cells tile the plane and match forward passes") {
  using MLP = Sequential<Input<5>, Dense<16>, ReLU, Dense<16>, ReLU, Dense<4>>;
  MLP net;
  initialize(net, 51);
  const auto P = random_plane(5, 52);
  const auto r = exact_plane(net, P.O, P.U, P.V, square);
  for (auto rule : {class_rule::argmax, class_rule::argmin}) {
    const auto cells = classify_plane(r, rule);
    double area = 0;
    for (const auto& c : cells) area += c.polygon.area();
    CHECK(area == doctest::Approx(4.0).epsilon(1e-12));
    CHECK(cells.size() >= r.polygons.size());
    std::mt19937_64 rng(53);
    std::uniform_real_distribution<double> u(-1, 1);
    std::size_t wrong = 0;
    for (int q = 0; q < 300; ++q) {
      const double a = u(rng), b = u(rng);
      const auto y = f(net, r.point(a, b));
      std::size_t want = 0;
      for (std::size_t c = 1; c < y.size(); ++c)
        if (rule == class_rule::argmax ? y[c] > y[want] : y[c] < y[want]) want = c;
      for (const auto& c : cells)
        if (inside(c.polygon, a, b) && c.label != want && std::abs(y[c.label] - y[want]) > 1e-9) ++wrong;
    }
    CHECK(wrong == 0);
  }
}

TEST_CASE("exact_plane: errors") {
  using MLP = Sequential<Input<3>, Dense<4>, ReLU, Dense<2>>;
  MLP net;
  initialize(net, 61);
  const std::vector<double> O{0, 0, 0}, U{1, 0, 0}, V{0, 1, 0};
  CHECK_THROWS_AS(exact_plane(net, O, U, U, square), value_error);                 // parallel
  CHECK_THROWS_AS(exact_plane(net, O, U, std::vector<double>{0, 0, 0}, square), value_error);  // zero
  CHECK_THROWS_AS(exact_plane(net, std::vector<double>{0, 0}, U, V, square), shape_error);
  CHECK_THROWS_AS(exact_plane(net, std::vector<double>{0, NAN, 0}, U, V, square), value_error);
  const std::vector<std::array<double, 2>> line_poly{{0, 0}, {1, 1}, {2, 2}};
  CHECK_THROWS_AS(exact_plane(net, O, U, V, line_poly), value_error);  // zero area
  CHECK_THROWS_AS(exact_plane(net, O, U, V, std::vector<std::array<double, 2>>{{0, 0}, {1, 0}}), value_error);
  plane_options tiny;
  tiny.max_polygons = 1;
  using Big = Sequential<Input<3>, Dense<32>, ReLU, Dense<2>>;
  Big big;
  initialize(big, 62);
  CHECK_THROWS_AS(exact_plane(big, O, std::vector<double>{5, 0, 0}, std::vector<double>{0, 5, 0}, square, tiny),
                  limit_error);
  DynamicNetwork dn = to_dynamic(net);
  dn.add(Softmax{});
  try {
    (void)exact_plane(dn, O, U, V, square);
    FAIL("expected logic_error");
  } catch (const logic_error& e) {
    CHECK(std::string(e.what()).find("Softmax") != std::string::npos);
  }
}
