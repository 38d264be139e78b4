// ExactLine applications and options: exact IG vs Riemann sums (network gradients and piece
// gradients agree when no sample lands on a break), samples_to_reach and m_tilde on a case worked
// out by hand, exact_lines (seq == par, keep_going), exact_path, merge_tol, reanchor, validate
// (clean runs and deliberately corrupted results), and the error paths (degenerate segment, NaN
// endpoints, wrong sizes, max_pieces / max_bytes, Softmax in a DynamicNetwork).
#include "exactline_checks.hpp"

#include <boost/multiprecision/cpp_int.hpp>

#include <cmath>
#include <random>
#include <string>
#include <vector>

using namespace nnlens;
using namespace el_test;

namespace {
using Mlp = Sequential<Input<5>, Dense<12, double>, ReLU, Dense<12, double>, ReLU, Dense<4, double>>;
Mlp make_mlp(std::uint64_t seed) {
  Mlp net;
  initialize(net, seed);
  return net;
}
bool contains(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }
}  // namespace

TEST_CASE("exact IG: Riemann sums from the network and from the pieces agree; exact IG is complete") {
  const auto net = make_mlp(21);
  std::mt19937_64 rng(2100);
  for (int l = 0; l < 3; ++l) {
    const auto x = random_point(5, rng, -3, 3), b = random_point(5, rng, -3, 3);
    const auto ig = exact_ig(net, x, b, 2);
    REQUIRE(ig.pieces() >= 2);
    CHECK(ig.gradients.size() == ig.pieces() * 5);
    CHECK(std::abs(ig.sum - ig.delta) <= 1e-9 * (1 + std::abs(ig.delta)));
    for (auto rule : {riemann_rule::left, riemann_rule::right, riemann_rule::trapezoid}) {
      for (std::size_t m : {7u, 50u, 333u}) {
        bool on_break = false;  // a sample exactly on a break would take the right piece by convention
        for (std::size_t q = 0; q <= m; ++q)
          on_break = on_break || std::binary_search(ig.line.t.begin() + 1, ig.line.t.end() - 1, double(q) / double(m));
        if (on_break) continue;
        const auto a = riemann_ig(net, x, b, 2, m, rule), p = riemann_from_pieces(ig, m, rule);
        double worst = 0, scale = 1e-12;
        for (std::size_t i = 0; i < 5; ++i) worst = std::max(worst, std::abs(a[i] - p[i])), scale = std::max(scale, std::abs(p[i]));
        CHECK_MESSAGE(worst <= 1e-9 * scale, rule_name(rule), " m=", m);
      }
    }
    // fine Riemann sums converge to the exact IG
    const auto fine = riemann_from_pieces(ig, 200000, riemann_rule::trapezoid);
    for (std::size_t i = 0; i < 5; ++i) CHECK(std::abs(fine[i] - ig.attributions[i]) <= 1e-4 * (1 + std::abs(ig.attributions[i])));
    // a left sum with few samples generally misses completeness; the exact one does not
    CHECK(ig_relative_error(ig.attributions, ig.attributions) == 0);
  }
  CHECK_THROWS_AS(riemann_ig(net, std::vector<double>(5, 1.0), std::vector<double>(5, 0.0), 0, 0, riemann_rule::left), value_error);
  CHECK_THROWS_AS(riemann_ig(net, std::vector<double>(5, 1.0), std::vector<double>(4, 0.0), 0, 3, riemann_rule::left), shape_error);
}

TEST_CASE("samples_to_reach and m_tilde on f(x) = ReLU(x), baseline -1, input 1") {
  // exact IG = 1 (the gradient is 1 on the right half).  With m partitions (a sample on the break
  // t = 1/2 takes the right piece): left error 0 for even m, 1/m for odd m; right 2/m for even m,
  // 1/m for odd; trapezoid 1/m for even, 0 for odd.  With tolerance 4.5 %, the first n with
  // n..n+4 all below it: left 22, right 45, trapezoid 23 (reported as 24 samples).
  Sequential<Input<1>, ReLU> net;
  const auto ig = exact_ig(net, std::vector<double>{1}, std::vector<double>{-1}, 0);
  REQUIRE(ig.line.t == std::vector<double>{0, 0.5, 1});
  CHECK(ig.attributions == std::vector<double>{1});
  CHECK(ig.delta == 1);
  CHECK(std::abs(riemann_from_pieces(ig, 21, riemann_rule::left)[0] - 20.0 / 21) < 1e-12);
  CHECK(std::abs(riemann_from_pieces(ig, 20, riemann_rule::right)[0] - 1.1) < 1e-12);
  CHECK(std::abs(riemann_from_pieces(ig, 20, riemann_rule::trapezoid)[0] - 1.05) < 1e-12);
  CHECK(std::abs(riemann_from_pieces(ig, 21, riemann_rule::trapezoid)[0] - 1.0) < 1e-12);
  // the network's own gradients agree (ReLU'(0) = 0 at a sample on the break: the LEFT piece)
  CHECK(std::abs(riemann_ig(net, std::vector<double>{1}, std::vector<double>{-1}, 0, 21, riemann_rule::left)[0] - 20.0 / 21) < 1e-12);
  CHECK(samples_to_reach(ig, riemann_rule::left, 0.045) == std::optional<std::size_t>(22));
  CHECK(samples_to_reach(ig, riemann_rule::right, 0.045) == std::optional<std::size_t>(45));
  CHECK(samples_to_reach(ig, riemann_rule::trapezoid, 0.045) == std::optional<std::size_t>(24));
  CHECK(samples_to_reach(ig, riemann_rule::right, 0.045, 44) == std::nullopt);  // an outlier
  CHECK(m_tilde(ig, 0.01) == std::optional<std::size_t>(20));
  CHECK(m_tilde(ig, 0.01, 21) == std::optional<std::size_t>(22));
  CHECK(m_tilde(ig, 0.001, 21, 999) == std::optional<std::size_t>(22));
}

TEST_CASE("classification of real lines: intervals tile [0, 1] and labels are the argmax inside them") {
  const auto net = make_mlp(22);
  std::mt19937_64 rng(2200);
  std::size_t changes = 0;
  for (int l = 0; l < 5; ++l) {
    const auto r = exact_line(net, random_point(5, rng, -4, 4), random_point(5, rng, -4, 4));
    for (auto rule : {class_rule::argmax, class_rule::argmin}) {
      const auto iv = classify_line(r, rule);
      REQUIRE(!iv.empty());
      CHECK(iv.front().from == 0);
      CHECK(iv.back().to == 1);
      changes += iv.size() - 1;
      for (std::size_t i = 0; i < iv.size(); ++i) {
        if (i + 1 < iv.size()) {
          CHECK(iv[i].to == iv[i + 1].from);
          CHECK(iv[i].label != iv[i + 1].label);
        }
        // the label wins at 1/4, 1/2, 3/4 of the interval (network evaluated at the point)
        for (double a : {0.25, 0.5, 0.75}) {
          const double tt = iv[i].from + a * (iv[i].to - iv[i].from);
          const auto y = eval(net, r.point(tt), 1);
          std::size_t best = 0;
          for (std::size_t o = 1; o < y.size(); ++o)
            if (rule == class_rule::argmax ? y[o] > y[best] : y[o] < y[best]) best = o;
          CHECK(best == iv[i].label);
        }
      }
      const auto fc = first_change(r, rule);
      CHECK(fc.has_value() == (iv.size() > 1));
    }
  }
  CHECK(changes >= 3);
}

TEST_CASE("exact_lines: seq and par give identical results; exact_path concatenates segments") {
  const auto net = make_mlp(23);
  std::mt19937_64 rng(2300);
  std::vector<std::vector<double>> A, B;
  for (int i = 0; i < 12; ++i) A.push_back(random_point(5, rng, -3, 3)), B.push_back(random_point(5, rng, -3, 3));
  const auto s = exact_lines(net, A, B), p = exact_lines(execution::par, net, A, B);
  REQUIRE(s.size() == 12);
  REQUIRE(p.size() == 12);
  for (std::size_t i = 0; i < 12; ++i) {
    CHECK(s[i].t == p[i].t);
    CHECK(s[i].values == p[i].values);
    const auto one = exact_line(net, A[i], B[i]);
    CHECK(one.t == s[i].t);
  }
  // exact_line with execution::par (parallel over pieces) equals seq
  const auto a = exact_line(net, A[0], B[0]), b = exact_line(execution::par, net, A[0], B[0]);
  CHECK(a.t == b.t);
  CHECK(a.values == b.values);

  const std::vector<std::vector<double>> X{A[0], B[0], A[1], B[1]};
  const auto path = exact_path(net, X);
  REQUIRE(path.segments.size() == 3);
  std::size_t k = 0;
  double len = 0;
  for (std::size_t i = 0; i < 3; ++i) {
    const auto r = exact_line(net, X[i], X[i + 1]);
    CHECK(path.segments[i].t == r.t);
    k += r.pieces();
    len += r.length();
  }
  CHECK(path.pieces() == k);
  CHECK(path.length() == doctest::Approx(len));
  CHECK_THROWS_AS(exact_path(net, std::vector<std::vector<double>>{A[0]}), value_error);
  const auto pp = exact_path(execution::par, net, X);
  for (std::size_t i = 0; i < 3; ++i) CHECK(pp.segments[i].t == path.segments[i].t);
}

TEST_CASE("options: merge_tol merges close breaks and counts them") {
  Sequential<Input<2>, ReLU> net;
  // breaks at t = 0.5 and t = 0.5000001
  const std::vector<double> P{-1, -0.5000001}, Q{1, 0.4999999};
  const auto exact = exact_line(net, P, Q);
  CHECK(exact.pieces() == 3);
  CHECK(exact.stats.merged == 0);
  line_options o;
  o.merge_tol = 1e-6;
  const auto merged = exact_line(net, P, Q, o);
  CHECK(merged.pieces() == 2);
  CHECK(merged.stats.merged == 1);
  CHECK(merged.t[1] == doctest::Approx(0.5).epsilon(1e-6));
  // a break within merge_tol of an end is dropped too
  o.merge_tol = 0.01;
  const auto end = exact_line(net, std::vector<double>{-0.001, 5}, std::vector<double>{1, 5}, o);
  CHECK(end.pieces() == 1);
  CHECK(end.stats.merged == 1);
  // on a residual network (branches' points merged as well)
  using Res = Sequential<Input<3>, Residual<Block<Dense<3, double>, ReLU, Dense<3, double>>>, ReLU, Dense<2, double>>;
  Res res;
  initialize(res, 24);
  std::mt19937_64 rng(2400);
  const auto p0 = random_point(3, rng, -3, 3), q0 = random_point(3, rng, -3, 3);
  const auto r0 = exact_line(res, p0, q0);
  o.merge_tol = 0.05;
  const auto r1 = exact_line(res, p0, q0, o);
  CHECK(r1.pieces() <= r0.pieces());
  for (std::size_t j = 0; j + 1 < r1.t.size(); ++j) CHECK(r1.t[j + 1] - r1.t[j] > 0.05);
  CHECK(r1.pieces() + r1.stats.merged >= r0.pieces());
}

TEST_CASE("options: reanchor gives the same breaks and values closer to forward") {
  // a deep, badly conditioned MLP: interpolated values drift
  using Deep = Sequential<Input<6>, Dense<24, double>, ReLU, Dense<24, double>, ReLU, Dense<24, double>, ReLU, Dense<24, double>,
                          ReLU, Dense<24, double>, ReLU, Dense<3, double>>;
  Deep net;
  initialize(net, 25);
  for_each_layer(net, [](auto& l, auto, shape, shape) {
    if constexpr (requires { l.W; })
      for (auto& v : l.W) v *= 2.5;
  });
  std::mt19937_64 rng(2500);
  line_options ro;
  ro.reanchor = true;
  double dev_i = 0, dev_r = 0;
  for (int l = 0; l < 3; ++l) {
    const auto P = random_point(6, rng, -2, 2), Q = random_point(6, rng, -2, 2);
    const auto a = exact_line(net, P, Q), b = exact_line(net, P, Q, ro);
    CHECK(a.pieces() >= 5);
    CHECK(a.pieces() == b.pieces());
    CHECK(same_breaks(a.t, b.t, 1e-9));
    auto dev = [&](const line_result<double>& r) {
      std::vector<double> X;
      for (double tt : r.t) {
        const auto p = r.point(tt);
        X.insert(X.end(), p.begin(), p.end());
      }
      const auto Y = eval(net, X, r.t.size());
      double d = 0;
      for (std::size_t i = 0; i < Y.size(); ++i) d = std::max(d, std::abs(Y[i] - r.values[i]));
      return d / value_scale(r);
    };
    dev_i = std::max(dev_i, dev(a));
    dev_r = std::max(dev_r, dev(b));
  }
  MESSAGE("max relative deviation from forward: interpolated ", dev_i, ", reanchored ", dev_r);
  CHECK(dev_r <= dev_i);
  CHECK(dev_r <= 1e-13);
}

TEST_CASE("options: validate counts no violations on correct runs and finds corrupted ones") {
  const auto net = make_mlp(26);
  std::mt19937_64 rng(2600);
  line_options o;
  o.validate = true;
  for (int l = 0; l < 3; ++l) {
    auto r = exact_line(net, random_point(5, rng, -3, 3), random_point(5, rng, -3, 3), o);
    REQUIRE(r.pieces() >= 3);
    CHECK(r.stats.validated_pieces == r.pieces());
    CHECK(r.stats.violations == 0);
    CHECK(r.stats.max_deviation <= 1e-12);
    // corrupt: drop an interior break (and its values row) -> that merged piece is not affine
    const std::size_t j = r.pieces() / 2, d = r.out_size();
    r.t.erase(r.t.begin() + std::ptrdiff_t(j));
    r.values.erase(r.values.begin() + std::ptrdiff_t(j * d), r.values.begin() + std::ptrdiff_t((j + 1) * d));
    r.stats = {};
    detail::validate_line(net, r, o);
    CHECK(r.stats.validated_pieces == r.pieces());
    CHECK(r.stats.violations >= 1);
    CHECK(r.stats.max_deviation > 1e-9);
    // corrupt a value instead
    auto r2 = exact_line(net, random_point(5, rng, -3, 3), random_point(5, rng, -3, 3));
    r2.values[r2.out_size() * 1] += 0.5;
    detail::validate_line(net, r2, o);
    CHECK(r2.stats.violations >= 1);
    CHECK(r2.stats.violations <= 2);  // only the two pieces next to that point
  }
}

TEST_CASE("errors: degenerate and non-finite segments, wrong sizes, caps, non-PWL layers, keep_going") {
  const auto net = make_mlp(27);
  const std::vector<double> P(5, 0.5), Q{1, -1, 2, 0, 3};
  CHECK_THROWS_AS(exact_line(net, P, P), value_error);
  auto nanP = P;
  nanP[3] = std::nan("");
  try {
    (void)exact_line(net, nanP, Q);
    FAIL("no error");
  } catch (const value_error& e) {
    CHECK(contains(e.what(), "P[3]"));
  }
  auto infQ = Q;
  infQ[1] = INFINITY;
  try {
    (void)exact_line(net, P, infQ);
    FAIL("no error");
  } catch (const value_error& e) {
    CHECK(contains(e.what(), "Q[1]"));
  }
  CHECK_THROWS_AS(exact_line(net, std::vector<double>(4, 0.0), Q), shape_error);
  CHECK_THROWS_AS(exact_line(net, P, std::vector<double>(6, 0.0)), shape_error);

  std::mt19937_64 rng(2700);
  const auto A = random_point(5, rng, -3, 3), B = random_point(5, rng, -3, 3);
  const auto full = exact_line(net, A, B);
  REQUIRE(full.pieces() >= 3);
  line_options cap;
  cap.max_pieces = full.pieces() - 1;
  CHECK_THROWS_AS(exact_line(net, A, B, cap), limit_error);
  cap.max_pieces = full.pieces();
  CHECK(exact_line(net, A, B, cap).t == full.t);
  line_options bytes;
  bytes.max_memory = 0;  // unbounded: max_bytes caps a layer instead
  bytes.max_bytes = 64;
  CHECK_THROWS_AS(exact_line(net, A, B, bytes), limit_error);
  try {
    (void)exact_line(net, A, B, bytes);
  } catch (const limit_error& e) {
    CHECK(contains(e.what(), "max_bytes"));
  }

  // Softmax in a DynamicNetwork: logic_error naming it
  Sequential<Input<3>, Dense<4, double>, ReLU, Dense<3, double>, Softmax> sm;
  initialize(sm, 28);
  const auto d = to_dynamic(sm);
  try {
    (void)exact_line(d, std::vector<double>{0, 0, 0}, std::vector<double>{1, 2, 3});
    FAIL("no error");
  } catch (const logic_error& e) {
    CHECK(contains(e.what(), "Softmax"));
    CHECK(contains(e.what(), "layer 3"));
  }

  // exact_lines: an error names the segment; keep_going records it and finishes the others
  std::vector<std::vector<double>> As{A, P, B}, Bs{B, P, A};
  try {
    (void)exact_lines(net, As, Bs);
    FAIL("no error");
  } catch (const value_error& e) {
    CHECK(contains(e.what(), "segment 1"));
  }
  line_options kg;
  kg.keep_going = true;
  for (int par = 0; par < 2; ++par) {
    const auto rs = par ? exact_lines(execution::par, net, As, Bs, kg) : exact_lines(net, As, Bs, kg);
    REQUIRE(rs.size() == 3);
    CHECK(rs[0].error.empty());
    CHECK(contains(rs[1].error, "degenerate"));
    CHECK(rs[1].t.empty());
    CHECK(rs[2].error.empty());
    CHECK(rs[0].t == full.t);
    CHECK(rs[2].pieces() == full.pieces());
  }
  CHECK_THROWS_AS(exact_lines(net, As, std::vector<std::vector<double>>{B}), shape_error);
}

TEST_CASE("hotspot: a line through the origin of a bias-free ReLU net (every unit switches at one t)") {
  using Qr = boost::multiprecision::cpp_rational;
  using Net = Sequential<Input<6>, Dense<16, double>, ReLU, Dense<16, double>, ReLU, Dense<3, double>>;
  Net net;
  initialize(net, 29);
  for_each_layer(net, [](auto& l, auto, shape, shape) {
    if constexpr (requires { l.b; })
      for (auto& v : l.b) v = 0;
  });
  std::mt19937_64 rng(2900);
  std::uniform_int_distribution<int> u(1, 8);
  std::vector<double> v(6);
  for (auto& x : v) x = (u(rng) % 2 ? -1 : 1) * u(rng) / 8.0;  // 3 v is exact: the segment does hit 0
  std::vector<double> P(6), Q(6);
  for (std::size_t i = 0; i < 6; ++i) P[i] = -v[i], Q[i] = 3 * v[i];  // the origin at t = 1/4
  // exact: one break, at 1/4 (f is positively homogeneous: linear on each side of the origin)
  const auto rq = exact_line<Qr, Qr>(net, std::vector<Qr>(P.begin(), P.end()), std::vector<Qr>(Q.begin(), Q.end()));
  CHECK(rq.t == std::vector<Qr>{0, Qr(1) / 4, 1});
  // double: rounding may scatter that break into several within a few ulps; merge_tol reports them
  line_options o;
  o.validate = true;
  const auto rd = exact_line(net, P, Q, o);
  CHECK(rd.stats.violations == 0);
  for (std::size_t j = 1; j + 1 < rd.t.size(); ++j) CHECK(std::abs(rd.t[j] - 0.25) <= 1e-12);
  o.merge_tol = 1e-9;
  const auto rm = exact_line(net, P, Q, o);
  MESSAGE("through the origin: ", rd.pieces(), " pieces in double, ", rm.pieces(), " after merging (", rm.stats.merged,
          " merged)");
  CHECK(rm.pieces() == 2);
  CHECK(rm.stats.merged + 2 >= rd.pieces());
  CHECK(rm.stats.violations == 0);
}

TEST_CASE("Gauss-Legendre: numpy's leggauss nodes and weights on [0, 1], exact on polynomials, IG converges") {
  std::vector<double> t, w;
  detail::riemann_samples(2, riemann_rule::gauss_legendre, t, w);  // 1/2 -+ 1/(2 sqrt 3), weights 1/2
  REQUIRE(t.size() == 2);
  CHECK(t[0] == doctest::Approx(0.5 - 0.5 / std::sqrt(3.0)).epsilon(1e-15));
  CHECK(t[1] == doctest::Approx(0.5 + 0.5 / std::sqrt(3.0)).epsilon(1e-15));
  CHECK(w[0] == doctest::Approx(0.5).epsilon(1e-15));
  detail::riemann_samples(3, riemann_rule::gauss_legendre, t, w);  // 1/2 -+ sqrt(3/5)/2, 1/2; 5/18, 8/18
  REQUIRE(t.size() == 3);
  CHECK(t[0] == doctest::Approx(0.5 - 0.5 * std::sqrt(0.6)).epsilon(1e-15));
  CHECK(t[1] == doctest::Approx(0.5).epsilon(1e-15));
  CHECK(w[0] == doctest::Approx(5.0 / 18).epsilon(1e-15));
  CHECK(w[1] == doctest::Approx(8.0 / 18).epsilon(1e-15));
  for (std::size_t m : {1u, 2u, 5u, 8u, 13u, 20u, 50u, 200u, 1010u}) {
    CAPTURE(m);
    detail::riemann_samples(m, riemann_rule::gauss_legendre, t, w);
    REQUIRE(t.size() == m);
    double sw = 0;
    for (std::size_t q = 0; q < m; ++q) {
      sw += w[q];
      CHECK(t[q] > 0);
      CHECK(t[q] < 1);
      if (q) CHECK(t[q] > t[q - 1]);
    }
    CHECK(sw == doctest::Approx(1).epsilon(1e-13));
    if (m <= 20) {  // exact for degree 2m - 1: the integral of t^(2m-1) over [0, 1] is 1 / (2m)
      double s = 0;
      for (std::size_t q = 0; q < m; ++q) s += w[q] * std::pow(t[q], double(2 * m - 1));
      CHECK(s == doctest::Approx(1.0 / double(2 * m)).epsilon(1e-13));
    }
  }
  // IG: from the network and from the pieces alike; converging to the exact IG
  const auto net = make_mlp(22);
  std::mt19937_64 rng(2200);
  const auto x = random_point(5, rng, -3, 3), b = random_point(5, rng, -3, 3);
  const auto ig = exact_ig(net, x, b, 1);
  REQUIRE(ig.pieces() >= 2);
  const auto a = riemann_ig(net, x, b, 1, 16, riemann_rule::gauss_legendre);
  const auto p = riemann_from_pieces(ig, 16, riemann_rule::gauss_legendre);
  for (std::size_t i = 0; i < 5; ++i) CHECK(a[i] == doctest::Approx(p[i]).epsilon(1e-9));
  const double coarse = ig_relative_error(riemann_from_pieces(ig, 4, riemann_rule::gauss_legendre), ig.attributions);
  const double fine = ig_relative_error(riemann_from_pieces(ig, 2000, riemann_rule::gauss_legendre), ig.attributions);
  CHECK(fine < coarse);
  CHECK(fine < 1e-2);
  CHECK(rule_name(riemann_rule::gauss_legendre) == "gauss_legendre");
}
