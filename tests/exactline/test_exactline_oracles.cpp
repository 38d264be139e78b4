// ExactLine hand oracles (docs/specs/exactline.md#5-test-oracles, oracles 1-7) in exact rational arithmetic
// (boost cpp_rational for values and ratios: every comparison is ==), plus the envelope walk's tie
// rules and MaxPool windows (padding on both sides, overlapping windows, ceil_mode, 2-D windows)
// against a brute-force exact envelope: every crossing of two window candidates is a break iff the
// slopes of the maximal candidates on its left and on its right differ.
// The MaxPool oracles run both in double on dyadic data (exact) and in cpp_rational.
#include <doctest/doctest.h>

#include <boost/multiprecision/cpp_int.hpp>

#include <cmath>
#include <type_traits>

#include <nnlens/exactline.hpp>
#include <nnlens/nnlens.hpp>

#include <algorithm>
#include <cstddef>
#include <optional>
#include <random>
#include <set>
#include <utility>
#include <vector>


using namespace nnlens;
using Q = boost::multiprecision::cpp_rational;

namespace {

Q q(long n, long d = 1) { return Q(n) / Q(d); }
std::vector<Q> qv(std::initializer_list<Q> l) { return std::vector<Q>(l); }

template <class S, class R>
std::vector<std::vector<Q>> rows(const line_result<S, R>& r) {
  std::vector<std::vector<Q>> out;
  for (std::size_t j = 0; j <= r.pieces(); ++j) {
    auto o = r.output(j);
    out.emplace_back(o.begin(), o.end());
  }
  return out;
}

/// y = x W + b with W given as A^T (A: out x in, row o = weights into output o).
template <std::size_t Out>
Dense<Out, Q> dense_from_A(const std::vector<std::vector<Q>>& A, const std::vector<Q>& b) {
  Dense<Out, Q> d;
  const std::size_t in = A[0].size();
  d.W = tensor<Q, 2>::from_shape({in, Out});
  d.b = tensor<Q, 1>::from_shape({Out});
  for (std::size_t o = 0; o < Out; ++o) {
    for (std::size_t i = 0; i < in; ++i) d.W(i, o) = A[o][i];
    d.b(o) = b[o];
  }
  return d;
}

using PaperNet = Sequential<Input<2>, Dense<2, Q>, ReLU>;
PaperNet paper_net() {
  PaperNet net;
  std::get<0>(net.layers) = dense_from_A<2>({{q(-17, 10), q(1)}, {q(2), q(-13, 10)}}, {q(3), q(3)});
  return net;
}

}  // namespace

TEST_CASE("oracle 1: the paper's example f(x) = ReLU(Ax + b), exact") {
  const auto net = paper_net();
  const auto r = exact_line<Q, Q>(net, qv({20, 30}), qv({30, 50}));
  CHECK(r.t == qv({0, q(1, 3), q(2, 3), 1}));
  REQUIRE(r.pieces() == 3);
  CHECK(rows(r) == std::vector<std::vector<Q>>{{0, 4}, {0, 2}, {1, 0}, {2, 0}});
  // points on the segment
  CHECK(r.point(q(1, 3)) == qv({q(70, 3), q(110, 3)}));
  // eval inside pieces equals the true function (exact)
  for (const Q& tt : {q(1, 7), q(1, 2), q(5, 6)}) {
    const auto x = r.point(tt);
    const Q z0 = q(-17, 10) * x[0] + x[1] + 3, z1 = 2 * x[0] - q(13, 10) * x[1] + 3;
    CHECK(r.eval(tt) == qv({z0 > 0 ? z0 : Q(0), z1 > 0 ? z1 : Q(0)}));
  }
  // piece maps: the three affine maps of the spec
  const auto maps = piece_maps(net, r);
  REQUIRE(maps.size() == 3);
  CHECK(maps[0].J == qv({0, 0, 2, q(-13, 10)}));
  CHECK(maps[0].c == qv({0, 3}));
  CHECK(maps[1].J == qv({q(-17, 10), 1, 2, q(-13, 10)}));
  CHECK(maps[1].c == qv({3, 3}));
  CHECK(maps[2].J == qv({q(-17, 10), 1, 0, 0}));
  CHECK(maps[2].c == qv({3, 0}));

  // exact IG along P -> Q (baseline P, input Q)
  const auto ig0 = exact_ig<Q, Q>(net, qv({30, 50}), qv({20, 30}), 0);
  CHECK(ig0.attributions == qv({q(-34, 3), q(40, 3)}));
  CHECK(ig0.delta == 2);
  CHECK(ig0.sum == 2);
  CHECK(ig0.pieces() == 3);
  const auto ig1 = exact_ig<Q, Q>(net, qv({30, 50}), qv({20, 30}), 1);
  CHECK(ig1.attributions == qv({q(40, 3), q(-52, 3)}));
  CHECK(ig1.delta == -4);
  CHECK(ig1.sum == -4);
  CHECK_THROWS_AS((exact_ig<Q, Q>(net, qv({30, 50}), qv({20, 30}), 2)), value_error);

  // the same network in double agrees within rounding
  const auto rd = exact_line(net, std::vector<double>{20, 30}, std::vector<double>{30, 50});
  REQUIRE(rd.pieces() == 3);
  CHECK(rd.t[1] == doctest::Approx(1.0 / 3).epsilon(1e-14));
  CHECK(rd.t[2] == doctest::Approx(2.0 / 3).epsilon(1e-14));
}

TEST_CASE("oracle 2: ReLU only, (-1, 3) -> (3, -1)") {
  Sequential<Input<2>, ReLU> net;
  const auto r = exact_line<Q, Q>(net, qv({-1, 3}), qv({3, -1}));
  CHECK(r.t == qv({0, q(1, 4), q(3, 4), 1}));
  CHECK(rows(r) == std::vector<std::vector<Q>>{{0, 3}, {0, 2}, {2, 0}, {3, 0}});
  // reversed: breaks 1 - t
  const auto rr = exact_line<Q, Q>(net, qv({3, -1}), qv({-1, 3}));
  CHECK(rr.t == qv({0, q(1, 4), q(3, 4), 1}));
  CHECK(rows(rr) == std::vector<std::vector<Q>>{{3, 0}, {2, 0}, {0, 2}, {0, 3}});
  // an endpoint sitting exactly on the knot never splits
  const auto r0 = exact_line<Q, Q>(net, qv({0, 1}), qv({2, 1}));
  CHECK(r0.t == qv({0, 1}));
  const auto r1 = exact_line<Q, Q>(net, qv({-2, 1}), qv({0, 3}));
  CHECK(r1.t == qv({0, 1}));
}

TEST_CASE("oracle 3: ReLU on the first coordinate only") {
  // z = (x0, x1 + 10) -> ReLU -> (z0, z1 - 10): the second unit stays positive on the line
  Sequential<Input<2>, Dense<2, Q>, ReLU, Dense<2, Q>> net;
  std::get<0>(net.layers) = dense_from_A<2>({{1, 0}, {0, 1}}, {0, 10});
  std::get<2>(net.layers) = dense_from_A<2>({{1, 0}, {0, 1}}, {0, -10});
  const auto r = exact_line<Q, Q>(net, qv({-1, 3}), qv({3, -1}));
  CHECK(r.t == qv({0, q(1, 4), 1}));
  CHECK(rows(r) == std::vector<std::vector<Q>>{{0, 3}, {0, 2}, {3, -1}});
  CHECK(r.stats.points == std::vector<std::size_t>{2, 3, 3});
}

TEST_CASE("oracle 4: HardTanh, (-2, 0.5) -> (2, -0.5)") {
  Sequential<Input<2>, HardTanh> net;
  const auto r = exact_line<Q, Q>(net, qv({-2, q(1, 2)}), qv({2, q(-1, 2)}));
  CHECK(r.t == qv({0, q(1, 4), q(3, 4), 1}));
  CHECK(rows(r) == std::vector<std::vector<Q>>{{-1, q(1, 2)}, {-1, q(1, 4)}, {1, q(-1, 4)}, {1, q(-1, 2)}});
  // Clamp with other bounds: knots lo and hi; a degenerate clamp lo == hi is constant (no breaks)
  Sequential<Input<1>, Clamp> c;
  std::get<0>(c.layers) = Clamp{0, 6};
  const auto rc = exact_line<Q, Q>(c, qv({-2}), qv({8}));
  CHECK(rc.t == qv({0, q(1, 5), q(4, 5), 1}));
  CHECK(rows(rc) == std::vector<std::vector<Q>>{{0}, {0}, {6}, {6}});
  std::get<0>(c.layers) = Clamp{1, 1};
  const auto rcc = exact_line<Q, Q>(c, qv({-2}), qv({8}));  // a knot at 1 (may split; the value is 1)
  for (std::size_t j = 0; j <= rcc.pieces(); ++j) CHECK(rcc.output(j)[0] == 1);
  // LeakyReLU: knot 0, none when alpha == 1
  Sequential<Input<1>, LeakyReLU> lr;
  std::get<0>(lr.layers) = LeakyReLU{0.5};
  const auto rl = exact_line<Q, Q>(lr, qv({-2}), qv({2}));
  CHECK(rl.t == qv({0, q(1, 2), 1}));
  CHECK(rows(rl) == std::vector<std::vector<Q>>{{-1}, {0}, {2}});
  std::get<0>(lr.layers) = LeakyReLU{1.0};
  CHECK(exact_line<Q, Q>(lr, qv({-2}), qv({2})).t == qv({0, 1}));
}

namespace {
// 1x4 input, window 1x2, stride 2, width padding 1: windows [pad,x0] [x1,x2] [x3,pad]
constexpr pool_geometry g5{1, 2, 1, 2, 0, 1, 0, 1};
using Pool5 = MaxPool2DG<g5>;
}  // namespace

template <class T>
void oracle5() {
  auto tv = [](std::initializer_list<Q> l) {
    std::vector<T> v;
    for (const Q& x : l) v.push_back(T(x));
    return v;
  };
  using RT = typename line_result<T, T>::ratio_type;
  Sequential<Input<1, 1, 4>, Pool5, Flatten> net;
  static_assert(decltype(net)::output_shape == shape(3));
  const auto r = exact_line<T, T>(net, tv({1, 2, 1, 3}), tv({1, 2, 5, 3}));
  CHECK(r.t == tv({0, q(1, 4), 1}));
  CHECK(rows(r) == std::vector<std::vector<Q>>{{1, 2, 3}, {1, 2, 3}, {1, 5, 3}});

  const std::vector<T> P{-1, 2, 1, 3}, Qe{1, 2, 5, 3};
  const std::vector<std::vector<Q>> want{{0, 2, 3}, {0, 2, 3}, {0, 3, 3}, {1, 5, 3}};
  Sequential<Input<1, 1, 4>, ReLU, Pool5, Flatten> rp;
  Sequential<Input<1, 1, 4>, Pool5, ReLU, Flatten> pr;
  const auto a = exact_line<T, T>(rp, P, Qe), b = exact_line<T, T>(pr, P, Qe);
  CHECK(a.t == tv({0, q(1, 4), q(1, 2), 1}));
  CHECK(b.t == a.t);
  CHECK(rows(a) == want);
  CHECK(rows(b) == want);
  // the fused rule counts as both layers
  CHECK(a.stats.points == std::vector<std::size_t>{4, 4, 4});

  // fusion off: a superset.  Here the ReLU of x1 (crossing 0 at t = 1/4) is never the max of
  // its window (x2 = 5), so only the unfused run splits there.
  const std::vector<T> P2{1, -1, 5, 1}, Q2{1, 3, 5, 1};
  line_options nofuse;
  nofuse.fuse_max_pool = false;
  for (int order = 0; order < 2; ++order) {
    const auto fused = order ? exact_line<T, T>(pr, P2, Q2) : exact_line<T, T>(rp, P2, Q2);
    const auto plain = order ? exact_line<T, T>(pr, P2, Q2, nofuse) : exact_line<T, T>(rp, P2, Q2, nofuse);
    CHECK(fused.t == tv({0, 1}));
    if (order == 0)
      CHECK(plain.t == tv({0, q(1, 4), 1}));
    else
      CHECK(plain.t == tv({0, 1}));  // MaxPool first: the max is 5 throughout, ReLU(5) never splits
    CHECK(std::includes(plain.t.begin(), plain.t.end(), fused.t.begin(), fused.t.end()));
    CHECK(rows(fused).front() == rows(plain).front());
    CHECK(rows(fused).back() == rows(plain).back());
    // and on the spec's line, unfused gives a superset with the same outputs where both have points
    const auto f1 = order ? exact_line<T, T>(pr, P, Qe) : exact_line<T, T>(rp, P, Qe);
    const auto u1 = order ? exact_line<T, T>(pr, P, Qe, nofuse) : exact_line<T, T>(rp, P, Qe, nofuse);
    CHECK(std::includes(u1.t.begin(), u1.t.end(), f1.t.begin(), f1.t.end()));
    for (const RT& tt : f1.t) CHECK(u1.eval(tt) == f1.eval(tt));
  }
  // all-negative window: max(0, max(x)) is constant 0, no split although the argmax changes
  const auto neg = exact_line<T, T>(rp, tv({-1, -1, -5, -1}), tv({-1, -5, -1, -1}));
  CHECK(neg.t == tv({0, 1}));
  const auto neg_plain = exact_line<T, T>(rp, tv({-1, -1, -5, -1}), tv({-1, -5, -1, -1}), nofuse);
  CHECK(neg_plain.t == tv({0, 1}));  // ReLU output is 0 everywhere, max of zeros
  Sequential<Input<1, 1, 4>, Pool5, Flatten> pool_only;
  CHECK(exact_line<T, T>(pool_only, tv({-1, -1, -5, -1}), tv({-1, -5, -1, -1})).t == tv({0, q(1, 2), 1}));
}

TEST_CASE("oracle 5: MaxPool 1x2 stride 2 with width padding 1, and fused ReLU+MaxPool") {
  // double: every value and ratio here is dyadic, so double is exact and == holds
  oracle5<double>();
  oracle5<Q>();
}

TEST_CASE("oracle 6: classification along a line") {
  // identity networks (an Affine with s = 1, t = 0)
  Sequential<Input<2>, Affine<2, Q>> id2;
  std::get<0>(id2.layers) = Affine<2, Q>{tensor<Q, 1>({Q(1), Q(1)}), tensor<Q, 1>({Q(0), Q(0)})};
  const auto r2 = exact_line<Q, Q>(id2, qv({1, 0}), qv({1, 2}));
  CHECK(r2.t == qv({0, 1}));
  const auto c2 = classify_line(r2);
  REQUIRE(c2.size() == 2);
  CHECK((c2[0].from == 0 && c2[0].to == q(1, 2) && c2[0].label == 0));
  CHECK((c2[1].from == q(1, 2) && c2[1].to == 1 && c2[1].label == 1));
  CHECK(first_change(r2) == std::optional<Q>(q(1, 2)));
  // argmin flips the labels
  const auto c2m = classify_line(r2, class_rule::argmin);
  REQUIRE(c2m.size() == 2);
  CHECK((c2m[0].label == 1 && c2m[1].label == 0 && c2m[0].to == q(1, 2)));

  // the 3-class regression: (1, 1/2, -1) -> (-1, 1/2, 1): t = {0, 1/4, 3/4, 1}, labels 0, 1, 2
  Sequential<Input<3>, Dense<3, Q>> id3;
  std::get<0>(id3.layers) = dense_from_A<3>({{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}, {0, 0, 0});
  const auto r3 = exact_line<Q, Q>(id3, qv({1, q(1, 2), -1}), qv({-1, q(1, 2), 1}));
  CHECK(r3.t == qv({0, 1}));
  const auto c3 = classify_line(r3);
  REQUIRE(c3.size() == 3);
  std::vector<Q> ends{c3[0].from};
  std::vector<std::size_t> labels;
  for (const auto& c : c3) ends.push_back(c.to), labels.push_back(c.label);
  CHECK(ends == qv({0, q(1, 4), q(3, 4), 1}));
  CHECK(labels == std::vector<std::size_t>{0, 1, 2});
  for (std::size_t i = 0; i + 1 < c3.size(); ++i) CHECK(c3[i].to == c3[i + 1].from);
  // argmin: y2 is the smallest until t = 1/2, then y0 (y1 = 1/2 never is)
  const auto c3m = classify_line(r3, class_rule::argmin);
  REQUIRE(c3m.size() == 2);
  CHECK((c3m[0].label == 2 && c3m[1].label == 0));
  CHECK(c3m[0].to == q(1, 2));
  // no change at all
  const auto r3c = exact_line<Q, Q>(id3, qv({3, 1, 0}), qv({2, 0, 1}));
  CHECK(classify_line(r3c).size() == 1);
  CHECK(!first_change(r3c).has_value());
  // density: endpoints / length
  CHECK(line_density(r3) == doctest::Approx(2.0 / std::sqrt(8.0)));

  // ReLU-only nets: (0,1) -> (0,-1): [0,1/2] label 1, [1/2,1] label 0 (a tie at 0 goes to 0)
  Sequential<Input<2>, ReLU> relu;
  const auto ra = exact_line<Q, Q>(relu, qv({0, 1}), qv({0, -1}));
  CHECK(ra.t == qv({0, q(1, 2), 1}));
  CHECK(rows(ra) == std::vector<std::vector<Q>>{{0, 1}, {0, 0}, {0, 0}});
  const auto ca = classify_line(ra);
  REQUIRE(ca.size() == 2);
  CHECK((ca[0].from == 0 && ca[0].to == q(1, 2) && ca[0].label == 1));
  CHECK((ca[1].from == q(1, 2) && ca[1].to == 1 && ca[1].label == 0));
  CHECK(ra.point(ca[0].to) == qv({0, 0}));
  // (2,3) -> (4,3): one affine piece, the class changes at (3,3): labels 1 then 0
  const auto rb = exact_line<Q, Q>(relu, qv({2, 3}), qv({4, 3}));
  CHECK(rb.t == qv({0, 1}));
  const auto cb = classify_line(rb);
  REQUIRE(cb.size() == 2);
  CHECK((cb[0].label == 1 && cb[1].label == 0));
  CHECK(rb.point(cb[0].to) == qv({3, 3}));
}

TEST_CASE("oracle 7: exact IG on ReLU-only nets") {
  Sequential<Input<2>, ReLU> relu;
  // baseline (0,1), input (0,-1)
  const auto a0 = exact_ig<Q, Q>(relu, qv({0, -1}), qv({0, 1}), 0);
  const auto a1 = exact_ig<Q, Q>(relu, qv({0, -1}), qv({0, 1}), 1);
  CHECK(a0.line.t == qv({0, q(1, 2), 1}));
  CHECK(a0.attributions == qv({0, 0}));
  CHECK(a1.attributions == qv({0, -1}));
  CHECK(a1.delta == -1);
  CHECK(a1.gradients == qv({0, 1, 0, 0}));  // piece 0: d y1/d x1 = 1; piece 1: 0
  // baseline (2,3), input (4,3)
  const auto b0 = exact_ig<Q, Q>(relu, qv({4, 3}), qv({2, 3}), 0);
  const auto b1 = exact_ig<Q, Q>(relu, qv({4, 3}), qv({2, 3}), 1);
  CHECK(b0.line.t == qv({0, 1}));
  CHECK(b0.attributions == qv({2, 0}));
  CHECK(b1.attributions == qv({0, 0}));
  CHECK(b0.delta == 2);
  CHECK(b1.delta == 0);
}

TEST_CASE("envelope_walk: ties") {
  using exactline::envelope_walk;
  auto walk = [](std::vector<Q> a, std::vector<Q> b, std::optional<Q> floor = std::nullopt) {
    std::vector<std::pair<Q, std::size_t>> ch;
    const std::size_t first = envelope_walk<Q, Q>(
        a.size(), [&](std::size_t k) { return std::pair<Q, Q>(a[k], b[k]); }, floor,
        [&](const Q& s, std::size_t w) { ch.emplace_back(s, w); });
    return std::make_pair(first, ch);
  };
  using CH = std::vector<std::pair<Q, std::size_t>>;
  {  // two lines overtake the constant 0 at the same s = 1/2: the steeper (index 2) wins, one break
    auto [f, ch] = walk({0, -1, -2}, {0, 1, 2});
    CHECK(f == 0);
    CHECK(ch == CH{{q(1, 2), 2}});
  }
  {  // same, the steeper listed first
    auto [f, ch] = walk({0, -2, -1}, {0, 2, 1});
    CHECK(f == 0);
    CHECK(ch == CH{{q(1, 2), 1}});
  }
  {  // tied at s = 0: the steeper wins at once, no break
    auto [f, ch] = walk({0, 0}, {0, 1});
    CHECK(f == 1);
    CHECK(ch.empty());
  }
  {  // tied at s = 0 with equal slopes: the lower index
    auto [f, ch] = walk({1, 1, 1}, {0, 2, 2});
    CHECK(f == 1);
    CHECK(ch.empty());
  }
  {  // identical lines everywhere: lower index, no break
    auto [f, ch] = walk({1, 1}, {3, 3});
    CHECK(f == 0);
    CHECK(ch.empty());
  }
  {  // three lines take turns (the 3-class regression), then a tie with a fourth at the end s = 1
    auto [f, ch] = walk({1, q(1, 2), -1, -3}, {-1, q(1, 2), 1, 1});
    CHECK(f == 0);
    CHECK(ch == CH{{q(1, 4), 1}, {q(3, 4), 2}});
  }
  {  // the floor: winner index n stands for it
    auto [f, ch] = walk({-1, -2}, {1, -1}, Q(0));
    CHECK(f == 2);
    CHECK(ch == CH{{q(1, 2), 0}});
    auto [f2, ch2] = walk({-1, -2}, {-1, -1}, Q(0));
    CHECK(f2 == 2);
    CHECK(ch2.empty());
    auto [f3, ch3] = walk({}, {}, Q(5));
    CHECK(f3 == 0);
    CHECK(ch3.empty());
  }
  {  // a crossing exactly at s = 1 is not a break
    auto [f, ch] = walk({0, -1}, {0, 0});
    CHECK(ch.empty());
    (void)f;
  }
  {  // many lines: at most n - 1 breaks, slopes rise
    auto [f, ch] = walk({3, 2, 1, 0}, {3, 4, 5, 6});
    CHECK(f == 0);
    CHECK(ch == CH{{q(1, 2), 3}});  // all four meet at s = 1/2: the steepest wins
  }
}

namespace {

/// Brute force: breaks in (0,1) of max_k (a_k + s d_k) (+ an optional floor constant).
std::set<Q> brute_envelope(const std::vector<std::pair<Q, Q>>& lines) {
  std::set<Q> out;
  for (std::size_t i = 0; i < lines.size(); ++i)
    for (std::size_t j = i + 1; j < lines.size(); ++j) {
      const Q di = lines[i].second - lines[i].first, dj = lines[j].second - lines[j].first;
      if (di == dj) continue;
      const Q s = (lines[i].first - lines[j].first) / (dj - di);
      if (!(s > 0 && s < 1)) continue;
      // the maximal lines at s: left slope = smallest slope among them, right slope = largest
      Q best = lines[0].first + s * (lines[0].second - lines[0].first);
      for (const auto& l : lines) best = std::max(best, Q(l.first + s * (l.second - l.first)));
      std::optional<Q> lo, hi;
      for (const auto& l : lines) {
        const Q d = l.second - l.first;
        if (l.first + s * d != best) continue;
        if (!lo || d < *lo) lo = d;
        if (!hi || d > *hi) hi = d;
      }
      if (*lo != *hi) out.insert(s);
    }
  return out;
}

/// The expected breaks of a max pool over a [C, H, W] input given explicit windows per axis.
std::vector<Q> brute_pool(const std::vector<Q>& a, const std::vector<Q>& b, std::size_t C, std::size_t H, std::size_t W,
                          const std::vector<std::pair<std::size_t, std::size_t>>& rows_,
                          const std::vector<std::pair<std::size_t, std::size_t>>& cols_, std::optional<Q> floor = {}) {
  std::set<Q> all{Q(0), Q(1)};
  for (std::size_t c = 0; c < C; ++c)
    for (auto [h0, h1] : rows_)
      for (auto [w0, w1] : cols_) {
        std::vector<std::pair<Q, Q>> lines;
        for (std::size_t h = h0; h < h1; ++h)
          for (std::size_t w = w0; w < w1; ++w) lines.emplace_back(a[(c * H + h) * W + w], b[(c * H + h) * W + w]);
        if (floor) lines.emplace_back(*floor, *floor);
        for (const Q& s : brute_envelope(lines)) all.insert(s);
      }
  return {all.begin(), all.end()};
}

template <class T>
bool same_ratios(const std::vector<T>& got, const std::vector<Q>& want) {
  if (got.size() != want.size()) return false;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if constexpr (std::is_same_v<T, Q>) {
      if (got[i] != want[i]) return false;
    } else if (std::abs(double(got[i]) - double(want[i])) > 1e-15) {
      return false;
    }
  }
  return true;
}

/// Random dyadic segments (exact in double too); the partition must be the brute-force envelope's
/// and the outputs the window maxima.
template <class T, class Net>
void check_pool_net(const Net& net, std::size_t C, std::size_t H, std::size_t W,
                    const std::vector<std::pair<std::size_t, std::size_t>>& rw,
                    const std::vector<std::pair<std::size_t, std::size_t>>& cw, std::uint64_t seed, bool relu_floor) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> u(-6, 6);
  const std::size_t n = C * H * W;
  static_assert(Net::output_shape.rank == 1);
  REQUIRE(Net::output_shape.size() == C * rw.size() * cw.size());
  std::size_t total_breaks = 0;
  for (int rep = 0; rep < 25; ++rep) {
    std::vector<Q> a(n), b(n);
    for (auto& v : a) v = Q(u(rng)) / 2;
    for (auto& v : b) v = Q(u(rng)) / 4;
    if (a == b) continue;
    std::vector<T> at(a.begin(), a.end()), bt(b.begin(), b.end());
    if constexpr (!std::is_same_v<T, Q>)
      for (std::size_t i = 0; i < n; ++i) at[i] = T(a[i]), bt[i] = T(b[i]);
    const auto r = exact_line<T, T>(net, at, bt);
    const auto want = brute_pool(a, b, C, H, W, rw, cw, relu_floor ? std::optional<Q>(Q(0)) : std::nullopt);
    CHECK(same_ratios(r.t, want));
    total_breaks += want.size() - 2;
    // outputs at every point: the true window max (floored)
    for (std::size_t j = 0; j <= r.pieces(); ++j) {
      const auto x = r.point(r.t[j]);
      auto o = r.output(j);
      std::size_t e = 0;
      for (std::size_t c = 0; c < C; ++c)
        for (auto [h0, h1] : rw)
          for (auto [w0, w1] : cw) {
            std::optional<T> m;
            if (relu_floor) m = T(0);
            for (std::size_t h = h0; h < h1; ++h)
              for (std::size_t w = w0; w < w1; ++w) {
                const T v = x[(c * H + h) * W + w];
                if (!m || v > *m) m = v;
              }
            if constexpr (std::is_same_v<T, Q>)
              CHECK(o[e] == *m);
            else
              CHECK(std::abs(o[e] - *m) <= 1e-12);
            ++e;
          }
    }
  }
  CHECK(total_breaks >= 5);  // the cases are not trivial
}

template <class T>
void pool_windows() {
  using W = std::vector<std::pair<std::size_t, std::size_t>>;
  {  // 1x3 window, stride 1, padding 1 on both sides (windows overlap and touch both paddings)
    static constexpr pool_geometry g{1, 3, 1, 1, 0, 1, 0, 1};  // static: clang 14 rejects a local NTTP here
    using Net = Sequential<Input<1, 1, 3>, MaxPool2DG<g>, Flatten>;
    check_pool_net<T>(Net{}, 1, 1, 3, W{{0, 1}}, W{{0, 2}, {0, 3}, {1, 3}}, 1, false);
    using NetR = Sequential<Input<1, 1, 3>, ReLU, MaxPool2DG<g>, Flatten>;
    check_pool_net<T>(NetR{}, 1, 1, 3, W{{0, 1}}, W{{0, 2}, {0, 3}, {1, 3}}, 2, true);
  }
  {  // window wider than the input, padding on both sides: one window clipped at both ends
    static constexpr pool_geometry g{1, 4, 1, 1, 0, 1, 0, 1};
    using Net = Sequential<Input<1, 1, 2>, MaxPool2DG<g>, Flatten>;
    check_pool_net<T>(Net{}, 1, 1, 2, W{{0, 1}}, W{{0, 2}}, 3, false);
  }
  {  // 3x3 window, stride 2 (overlap), padding 1, 2 channels; also fused with a ReLU after it
    using Net = Sequential<Input<2, 5, 5>, MaxPool2D<3, 2, 1>, Flatten>;
    const W w{{0, 2}, {1, 4}, {3, 5}};
    check_pool_net<T>(Net{}, 2, 5, 5, w, w, 4, false);
    using NetR = Sequential<Input<2, 5, 5>, MaxPool2D<3, 2, 1>, ReLU, Flatten>;
    check_pool_net<T>(NetR{}, 2, 5, 5, w, w, 5, true);
  }
  {  // ceil_mode: a last partial window
    static constexpr pool_geometry g{2, 2, 2, 2, 0, 0, 0, 0, true};
    using Net = Sequential<Input<1, 5, 5>, MaxPool2DG<g>, Flatten>;
    const W w{{0, 2}, {2, 4}, {4, 5}};
    check_pool_net<T>(Net{}, 1, 5, 5, w, w, 6, false);
  }
  {  // asymmetric padding (top/left only), rectangular window, different strides
    static constexpr pool_geometry g{2, 3, 1, 2, 1, 2, 0, 0};
    using Net = Sequential<Input<1, 3, 4>, MaxPool2DG<g>, Flatten>;
    // rows: o - 1 + [0,2) -> [0,1) [0,2) [1,3); cols: 2o - 2 + [0,3) -> [0,1) [0,3)
    check_pool_net<T>(Net{}, 1, 3, 4, W{{0, 1}, {0, 2}, {1, 3}}, W{{0, 1}, {0, 3}}, 7, false);
  }
}

}  // namespace

TEST_CASE("MaxPool windows: padding on both sides, overlapping windows, ceil_mode, 2-D windows") {
  pool_windows<double>();  // dyadic data: double is exact up to the final division's rounding
  pool_windows<Q>();
}

TEST_CASE("oracles hold in double and float within rounding (same partitions as rational)") {
  Sequential<Input<2>, ReLU> net;
  const auto rd = exact_line(net, std::vector<double>{-1, 3}, std::vector<double>{3, -1});
  CHECK(rd.t == std::vector<double>{0, 0.25, 0.75, 1});
  const auto rf = exact_line<float>(net, std::vector<float>{-1, 3}, std::vector<float>{3, -1});
  CHECK(rf.t == std::vector<double>{0, 0.25, 0.75, 1});
  CHECK(std::vector<float>(rf.output(1).begin(), rf.output(1).end()) == std::vector<float>{0, 2});
}
