// ExactLine properties P1-P12 (P4 on the knot MLPs) (docs/specs/exactline.md#5-test-oracles) on random networks in double: MLPs with
// ReLU / LeakyReLU / HardTanh / Clamp, a CNN (Conv2D, ReLU, MaxPool2D, AvgPool2D, Flatten, Dense),
// a residual MLP and a residual CNN (identity and projection shortcuts); the same networks as a
// DynamicNetwork give identical partitions.  P9 (affine-layer neutrality, BatchNorm folding), P10
// (fusion), P11 (piece-count bound) and P12 (float / double / rational agree) have their own cases.
#include "exactline_checks.hpp"

#include <boost/multiprecision/cpp_int.hpp>

#include <cmath>
#include <random>
#include <vector>

using namespace nnlens;
using namespace el_test;

namespace {

using MlpRelu = Sequential<Input<4>, Dense<16, double>, ReLU, Dense<16, double>, ReLU, Dense<16, double>, ReLU, Dense<3, double>>;
using MlpMixed = Sequential<Input<4>, Dense<12, double>, LeakyReLU, Dense<12, double>, HardTanh, Dense<12, double>, Clamp,
                            Dense<3, double>>;
using Cnn = PoolCnn<double>;
using ResMlp = Sequential<Input<5>, Dense<8, double>, ReLU, Residual<Block<Dense<8, double>, ReLU, Dense<8, double>>>, ReLU,
                          Residual<Block<Dense<6, double>, ReLU, Dense<6, double>>, Block<Dense<6, double>>>, ReLU,
                          Dense<3, double>>;
using ResCnn = ResidualCnn<double>;

template <class Net>
Net make(std::uint64_t seed) {
  Net net;
  initialize(net, seed);
  return net;
}

MlpMixed make_mixed(std::uint64_t seed) {
  auto net = make<MlpMixed>(seed);
  std::get<1>(net.layers) = LeakyReLU{0.1};
  std::get<3>(net.layers) = HardTanh{-0.4, 0.4};
  std::get<5>(net.layers) = Clamp{-0.3, 0.5};
  return net;
}

/// P1-P3, P5-P8 and static == dynamic on `lines` random segments.
template <class Net>
void run_properties(const Net& net, std::uint64_t seed, int lines, double span, std::size_t dense_samples,
                    std::size_t min_total_pieces) {
  std::mt19937_64 rng(seed);
  const std::size_t di = input_shape_of(net).size(), dout = output_shape_of(net).size();
  const auto dyn_net = to_dynamic(net);
  std::size_t total = 0;
  for (int l = 0; l < lines; ++l) {
    const auto P = random_point(di, rng, -span, span), Q = random_point(di, rng, -span, span);
    const auto r = exact_line(net, P, Q);
    total += r.pieces();
    check_structure(r);                          // P1
    CHECK(r.from == P);
    CHECK(r.to == Q);
    check_affinity(net, r, rng, 1e-9, 2);        // P2
    check_gradient_constancy(net, r, 0, 1e-9);   // P3
    check_gradient_constancy(net, r, dout - 1, 1e-9);
    check_completeness(net, Q, P, dout - 1, 1e-6);  // P5
    std::uniform_real_distribution<double> ut(0.1, 0.9);
    check_refinement(net, r, ut(rng), 1e-9);     // P6
    check_reversal(net, r, 1e-9);                // P7
    if (dense_samples) {
      check_minimality(net, r);                                          // P4
      check_dense_sampling(net, r, dense_samples, 1e-9);                 // P8
    }
    const auto rd = exact_line(dyn_net, P, Q);   // the DynamicNetwork: the same partition
    CHECK(rd.t == r.t);
    CHECK(rd.values.size() == r.values.size());
    double dv = 0;
    for (std::size_t i = 0; i < r.values.size() && i < rd.values.size(); ++i) dv = std::max(dv, std::abs(r.values[i] - rd.values[i]));
    CHECK(dv <= 1e-12 * value_scale(r));
    // P6, first half: inside a piece, ExactLine finds no interior break (up to rounding at the ends)
    for (std::size_t j = 0; j < r.pieces(); j += std::max<std::size_t>(1, r.pieces() / 3)) {
      if (r.t[j + 1] - r.t[j] < 1e-6) continue;
      const auto a = r.point(r.t[j] + 1e-9 * (r.t[j + 1] - r.t[j]));
      const auto b = r.point(r.t[j + 1] - 1e-9 * (r.t[j + 1] - r.t[j]));
      CHECK(exact_line(net, a, b).pieces() == 1);
    }
  }
  MESSAGE(lines, " lines, ", total, " pieces in all");
  CHECK(total >= min_total_pieces);  // the lines do cross regions
}

}  // namespace

TEST_CASE("P1-P8 on a ReLU MLP, and the DynamicNetwork gives the same partition") {
  for (std::uint64_t s : {1u, 2u}) run_properties(make<MlpRelu>(s), 100 + s, 3, 3.0, 20000, 30);
}

TEST_CASE("P1-P8 on an MLP with LeakyReLU, HardTanh and Clamp") {
  run_properties(make_mixed(3), 200, 3, 3.0, 20000, 15);
}

TEST_CASE("P1-P7 on a CNN (Conv2D, ReLU, MaxPool2D, AvgPool2D, Flatten, Dense)") {
  run_properties(make<Cnn>(4), 300, 2, 1.0, 0, 20);
}

TEST_CASE("P1-P7 on residual networks (identity and projection shortcuts)") {
  run_properties(make<ResMlp>(5), 400, 3, 3.0, 0, 20);
  run_properties(make<ResCnn>(6), 500, 2, 1.0, 0, 20);
}

TEST_CASE("P8 on a CNN: every change of the ReLU pattern or of a max-pool arg-max is bracketed by a break") {
  const auto net = make<Cnn>(7);
  std::mt19937_64 rng(700);
  const auto P = random_point(128, rng), Q = random_point(128, rng);
  const auto r = exact_line(net, P, Q);
  // pattern = ReLU sides of layer 4 + the arg-max of max(0, window) for every window of the fused
  // ReLU(1)+MaxPool(2) (a ReLU unit that is never its window's max does not split the line)
  constexpr std::size_t N = 10000;
  trace<double> tr;
  std::vector<int> prev, cur;
  std::size_t missed = 0, changes = 0;
  double tp = 0;
  for (std::size_t s0 = 0; s0 <= N; s0 += 500) {
    const std::size_t nb = std::min<std::size_t>(500, N + 1 - s0);
    std::vector<double> X;
    for (std::size_t q = 0; q < nb; ++q) {
      const auto p = r.point(double(s0 + q) / N);
      X.insert(X.end(), p.begin(), p.end());
    }
    forward_trace(net, nb, X.data(), tr);
    for (std::size_t q = 0; q < nb; ++q) {
      cur.clear();
      for (std::size_t i : {4u}) {
        const std::size_t d = tr.shape_at(i).size();
        for (std::size_t e = 0; e < d; ++e) cur.push_back(tr.activation(i)[q * d + e] > 0);
      }
      const shape s = tr.shape_at(2);  // [4, 8, 8] -> 2x2 windows
      const auto a = tr.activation(2);
      for (std::size_t c = 0; c < s[0]; ++c)
        for (std::size_t oh = 0; oh < 4; ++oh)
          for (std::size_t ow = 0; ow < 4; ++ow) {
            int best = 0;
            double bv = -1e300;
            for (int k = 0; k < 4; ++k) {
              const double v = a[q * s.size() + (c * 8 + 2 * oh + k / 2) * 8 + 2 * ow + k % 2];
              if (v > bv) bv = v, best = k;
            }
            cur.push_back(bv > 0 ? best : -1);  // an all-zero window has no arg-max (fused floor)
          }
      const double tq = double(s0 + q) / N;
      if (!prev.empty() && prev != cur) {
        ++changes;
        auto it = std::lower_bound(r.t.begin(), r.t.end(), tp - 1e-12);
        if (it == r.t.end() || *it > tq + 1e-12) ++missed;
      }
      prev.swap(cur);
      tp = tq;
    }
  }
  CHECK(changes > 10);
  CHECK(missed == 0);
}

TEST_CASE("P9: inserting Identity / Affine layers and folding BatchNorm leave the breaks unchanged") {
  using Base = Sequential<Input<4>, Dense<10, double>, ReLU, Dense<10, double>, ReLU, Dense<3, double>>;
  const auto base = make<Base>(11);
  std::mt19937_64 rng(1100);
  std::uniform_real_distribution<double> pos(0.5, 2.0), any(-1, 1);
  // Identity anywhere; Affine(s > 0, 0) before a ReLU compensated in the next Dense; Affine(s, t)
  // before a Dense folded into it
  using Ins = Sequential<Input<4>, Identity, Dense<10, double>, Affine<10, double>, ReLU, Affine<10, double>, Dense<10, double>,
                         Identity, ReLU, Dropout, Dense<3, double>>;
  Ins ins;
  const auto& d0 = std::get<0>(base.layers);
  const auto& d1 = std::get<2>(base.layers);
  std::get<1>(ins.layers) = d0;
  Affine<10, double> a1{tensor<double, 1>::from_shape({10}), tensor<double, 1>::from_shape({10})};
  Affine<10, double> a2 = a1;
  for (std::size_t i = 0; i < 10; ++i) a1.s(i) = pos(rng), a1.t(i) = 0, a2.s(i) = pos(rng), a2.t(i) = any(rng);
  std::get<2>(ins.layers) = a1;
  std::get<4>(ins.layers) = a2;
  // next Dense sees u = a2(a1 * relu(z)) = a2s * a1s * r + a2t: W' = W / (a1s a2s) row-wise, b' = b - sum a2t W'
  auto d1f = d1;
  for (std::size_t i = 0; i < 10; ++i)
    for (std::size_t o = 0; o < 10; ++o) d1f.W(i, o) = d1.W(i, o) / (a1.s(i) * a2.s(i));
  for (std::size_t o = 0; o < 10; ++o)
    for (std::size_t i = 0; i < 10; ++i) d1f.b(o) -= a2.t(i) * d1f.W(i, o);
  std::get<5>(ins.layers) = d1f;
  std::get<9>(ins.layers) = std::get<4>(base.layers);

  for (int l = 0; l < 4; ++l) {
    const auto P = random_point(4, rng, -3, 3), Q = random_point(4, rng, -3, 3);
    const auto rb = exact_line(base, P, Q), ri = exact_line(ins, P, Q);
    CHECK(rb.pieces() >= 2);
    CHECK(rb.pieces() == ri.pieces());
    CHECK(same_breaks(rb.t, ri.t, 1e-9));
    for (std::size_t e = 0; e < rb.values.size() && e < ri.values.size(); ++e)
      CHECK(std::abs(rb.values[e] - ri.values[e]) <= 1e-9 * value_scale(rb));
  }
}

TEST_CASE("P9: BatchNorm folded into the convolution before it gives the same breaks") {
  using WithBn = Sequential<Input<2, 6, 6>, Conv2D<3, 3, 1, 1, 1, 1, double>, BatchNorm<3, double>, ReLU, MaxPool2D<2>, Flatten,
                            Dense<8, double>, BatchNorm<8, double>, ReLU, Dense<2, double>>;
  using Folded = Sequential<Input<2, 6, 6>, Conv2D<3, 3, 1, 1, 1, 1, double>, ReLU, MaxPool2D<2>, Flatten, Dense<8, double>, ReLU,
                            Dense<2, double>>;
  auto bn = make<WithBn>(12);
  std::mt19937_64 rng(1200);
  std::uniform_real_distribution<double> pos(0.3, 2.0), any(-0.5, 0.5);
  auto randomise = [&](auto& b) {
    for (auto& v : b.gamma) v = any(rng) + (any(rng) > 0 ? 1.0 : -1.0);  // both signs (flips ReLU sides)
    for (auto& v : b.beta) v = any(rng);
    for (auto& v : b.running_mean) v = any(rng);
    for (auto& v : b.running_var) v = pos(rng);
  };
  randomise(std::get<1>(bn.layers));
  randomise(std::get<6>(bn.layers));
  Folded f;
  {
    auto c = std::get<0>(bn.layers);
    const auto& b = std::get<1>(bn.layers);
    for (std::size_t o = 0; o < 3; ++o) {
      const double k = b.gamma(o) / std::sqrt(b.running_var(o) + b.eps);
      for (std::size_t i = 0; i < c.W.size() / 3; ++i) c.W.data()[o * (c.W.size() / 3) + i] *= k;
      c.b(o) = (c.b(o) - b.running_mean(o)) * k + b.beta(o);
    }
    std::get<0>(f.layers) = c;
  }
  {
    auto d = std::get<5>(bn.layers);
    const auto& b = std::get<6>(bn.layers);
    for (std::size_t o = 0; o < 8; ++o) {
      const double k = b.gamma(o) / std::sqrt(b.running_var(o) + b.eps);
      for (std::size_t i = 0; i < d.W.shape(0); ++i) d.W(i, o) *= k;
      d.b(o) = (d.b(o) - b.running_mean(o)) * k + b.beta(o);
    }
    std::get<4>(f.layers) = d;
  }
  std::get<6>(f.layers) = std::get<8>(bn.layers);
  std::size_t total = 0;
  for (int l = 0; l < 3; ++l) {
    const auto P = random_point(72, rng), Q = random_point(72, rng);
    const auto ra = exact_line(bn, P, Q), rf = exact_line(f, P, Q);
    total += ra.pieces();
    CHECK(ra.pieces() == rf.pieces());
    CHECK(same_breaks(ra.t, rf.t, 1e-9));
    check_affinity(bn, ra, rng, 1e-9);
  }
  CHECK(total >= 6);
}

TEST_CASE("P10: ReLU->MaxPool, MaxPool->ReLU and the fused rule give identical breaks") {
  using A = Sequential<Input<3, 8, 8>, Conv2D<4, 3, 1, 1, 1, 1, double>, ReLU, MaxPool2D<3, 2, 1>, Flatten, Dense<4, double>>;
  using B = Sequential<Input<3, 8, 8>, Conv2D<4, 3, 1, 1, 1, 1, double>, MaxPool2D<3, 2, 1>, ReLU, Flatten, Dense<4, double>>;
  const auto a = make<A>(13);
  B b;
  std::get<0>(b.layers) = std::get<0>(a.layers);
  std::get<4>(b.layers) = std::get<4>(a.layers);
  line_options nofuse;
  nofuse.fuse_max_pool = false;
  std::mt19937_64 rng(1300);
  std::size_t extra = 0;
  for (int l = 0; l < 3; ++l) {
    const auto P = random_point(192, rng), Q = random_point(192, rng);
    const auto ra = exact_line(a, P, Q), rb = exact_line(b, P, Q);
    CHECK(ra.pieces() >= 2);
    CHECK(ra.t == rb.t);  // the same fused rule on the same values
    CHECK(ra.values == rb.values);
    for (const auto* n : {&ra}) check_affinity(a, *n, rng, 1e-9);
    const auto ua = exact_line(a, P, Q, nofuse), ub = exact_line(b, P, Q, nofuse);
    // unfused: a superset (the ReLU or the pool splits where the composition does not)
    CHECK(ua.pieces() >= ra.pieces());
    CHECK(ub.pieces() >= ra.pieces());
    // (within rounding: unfused, the same crossing is computed on a sub-piece)
    auto near = [](const std::vector<double>& v, double x) {
      auto it = std::lower_bound(v.begin(), v.end(), x - 1e-9);
      return it != v.end() && *it <= x + 1e-9;
    };
    std::size_t lost_a = 0, lost_b = 0;
    for (double tt : ra.t) lost_a += !near(ua.t, tt), lost_b += !near(ub.t, tt);
    CHECK(lost_a == 0);
    CHECK(lost_b == 0);
    check_affinity(a, ua, rng, 1e-9);
    check_affinity(b, ub, rng, 1e-9);
    extra += ua.pieces() - ra.pieces();
  }
  MESSAGE("unfused ReLU->MaxPool adds ", extra, " breaks");
  CHECK(extra > 0);  // fusion matters on these lines
}

TEST_CASE("P11: piece counts stay under 1 + sum(units x knots) per incoming piece") {
  const auto net = make<MlpRelu>(14);
  std::mt19937_64 rng(1400);
  for (int l = 0; l < 4; ++l) {
    const auto r = exact_line(net, random_point(4, rng, -3, 3), random_point(4, rng, -3, 3));
    const auto& pts = r.stats.points;
    REQUIRE(pts.size() == 7);
    std::size_t prev = 2;
    for (std::size_t i = 0; i < pts.size(); ++i) {
      const bool relu = i % 2 == 1;
      if (relu)
        CHECK(pts[i] - 1 <= (prev - 1) * (1 + 16));
      else
        CHECK(pts[i] == prev);  // affine layers never split
      prev = pts[i];
    }
    CHECK(pts.back() == r.t.size());
    CHECK(r.pieces() <= 17u * 17u * 17u);
  }
}

TEST_CASE("P12: float, double and exact rational agree on a small net") {
  using Qr = boost::multiprecision::cpp_rational;
  using Net = Sequential<Input<3>, Dense<6, double>, ReLU, Dense<6, double>, ReLU, Dense<2, double>>;
  auto net = make<Net>(15);
  // weights and endpoints on a coarse dyadic grid: exact in float, double and rational alike
  std::mt19937_64 rng(1500);
  std::uniform_int_distribution<int> u(-16, 16);
  for_each_layer(net, [&](auto& l, auto, shape, shape) {
    if constexpr (requires { l.W; }) {
      for (auto& v : l.W) v = u(rng) / 16.0;
      for (auto& v : l.b) v = u(rng) / 16.0;
    }
  });
  std::size_t total = 0;
  for (int l = 0; l < 6; ++l) {
    std::vector<double> P(3), Q(3);
    for (auto& v : P) v = u(rng) / 4.0;
    for (auto& v : Q) v = u(rng) / 4.0;
    if (P == Q) continue;
    const auto rq = exact_line<Qr, Qr>(net, std::vector<Qr>(P.begin(), P.end()), std::vector<Qr>(Q.begin(), Q.end()));
    const auto rd = exact_line<double>(net, P, Q);
    const auto rf = exact_line<float>(net, P, Q);
    total += rq.pieces();
    CHECK(rd.pieces() == rq.pieces());
    CHECK(rf.pieces() == rq.pieces());
    if (rd.pieces() == rq.pieces() && rf.pieces() == rq.pieces())
      for (std::size_t j = 0; j < rq.t.size(); ++j) {
        CHECK(std::abs(rd.t[j] - double(rq.t[j])) <= 1e-12);
        CHECK(std::abs(rf.t[j] - double(rq.t[j])) <= 1e-5);
      }
    // exact values at the rational breaks
    for (std::size_t j = 0; j <= rq.pieces(); ++j) {
      auto y = rq.output(j);
      CHECK(std::abs(double(y[0]) - rd.eval(double(rq.t[j]))[0]) <= 1e-12);
    }
  }
  CHECK(total >= 8);
}

TEST_CASE("execution::par (parallel over pieces and points) gives the same line as seq on a wide CNN") {
  using Wide = Sequential<Input<3, 16, 16>, Conv2D<8, 3, 1, 1, 1, 1, double>, ReLU, Conv2D<8, 3, 1, 1, 1, 1, double>, ReLU,
                          MaxPool2D<2>, Flatten, Dense<10, double>>;
  const auto net = make<Wide>(16);
  std::mt19937_64 rng(1600);
  const auto P = random_point(768, rng), Q = random_point(768, rng);
  const auto s = exact_line(net, P, Q), p = exact_line(execution::par, net, P, Q);
  MESSAGE("wide CNN line: ", s.pieces(), " pieces");
  CHECK(s.pieces() >= 64);  // enough points for the parallel paths
  CHECK(s.t == p.t);
  CHECK(s.values == p.values);
  check_affinity(net, p, rng, 1e-9, 0);
}
