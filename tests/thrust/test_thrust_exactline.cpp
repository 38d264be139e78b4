// ExactLine over many segments on the thrust device system (nnlens/thrust/exactline.hpp) against
// hand-computed breakpoints and against the host policy: same pieces per segment, ratios within
// 1e-9 absolute, values within 1e-6 relative, same stats (points, merged) and the same errors
// (messages included).  Nets: 1- and 2-input ReLU nets worked out by hand, ACAS Xu (.nnet, in
// normalised units) over seeded random segments of the normalised input box, small conv nets with
// ReLU + MaxPool2D (fused, unfused, pool before ReLU, the GEMM convolution path).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <nnlens/exactline/line.hpp>
#include <nnlens/io/nnet.hpp>
#include <nnlens/layers/all.hpp>
#include <nnlens/network/dynamic_network.hpp>
#include <nnlens/network/parameters.hpp>
#include <nnlens/thrust/exactline.hpp>

#include "test_skip.hpp"
#include "thrust_test_util.hpp"

using namespace nnlens;
using namespace nnlens_thrust_test;

namespace {

bool contains(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

std::filesystem::path acas(int a, int b) {
  return nnlens_test::shared_dir() / "models" / "acasxu-nnet" /
         ("ACASXU_run2a_" + std::to_string(a) + "_" + std::to_string(b) + "_batch_2000.nnet");
}

io::basic_nnet_model<double> load_acas(int a, int b) {
  io::nnet_options o;
  o.normalize_inputs = o.clamp_inputs = o.rescale_outputs = false;  // a pure Dense/ReLU chain, normalised units
  return io::load_nnet<double>(acas(a, b), o);
}

/// n segments between uniform random points of the normalised input box [(min - mean) / range,
/// (max - mean) / range].
void acas_segments(const io::nnet_normalization& norm, std::size_t n, std::uint64_t seed, rows& A, rows& B) {
  std::mt19937_64 rng(seed);
  auto point = [&] {
    std::vector<double> x(norm.inputs());
    for (std::size_t i = 0; i < x.size(); ++i) {
      const double lo = (norm.input_min[i] - norm.input_mean[i]) / norm.input_range[i];
      const double hi = (norm.input_max[i] - norm.input_mean[i]) / norm.input_range[i];
      x[i] = std::uniform_real_distribution<double>(lo, hi)(rng);
    }
    return x;
  };
  A.clear(), B.clear();
  for (std::size_t i = 0; i < n; ++i) A.push_back(point()), B.push_back(point());
}

// 1 input: h = (x, 1 - x), y = ReLU(h0) + ReLU(h1)
using Net1 = Sequential<Input<1>, Dense<2, double>, ReLU, Dense<1, double>>;
Net1 net1() {
  Net1 n;
  n.layer<0>().W = {{1.0, -1.0}};
  n.layer<0>().b = {0.0, 1.0};
  n.layer<2>().W = {{1.0}, {1.0}};
  n.layer<2>().b = {0.0};
  return n;
}
// 2 inputs: h = (x, y, x + y - 1), out = sum of ReLU(h)
using Net2 = Sequential<Input<2>, Dense<3, double>, ReLU, Dense<1, double>>;
Net2 net2() {
  Net2 n;
  n.layer<0>().W = {{1.0, 0.0, 1.0}, {0.0, 1.0, 1.0}};
  n.layer<0>().b = {0.0, 0.0, -1.0};
  n.layer<2>().W = {{1.0}, {1.0}, {1.0}};
  n.layer<2>().b = {0.0};
  return n;
}

}  // namespace

TEST_CASE("thrust exact_lines: hand-made 1-input and 2-input ReLU nets") {
  const thrust_policy pol{.batch = 2};
  {
    // x from -1 to 3: h0 = 0 at x = 0 (t = 1/4), h1 = 0 at x = 1 (t = 1/2)
    const auto net = net1();
    const rows A{{-1.0}, {3.0}, {0.5}}, B{{3.0}, {-1.0}, {0.75}};
    const auto d = exact_lines(execution::thrust, net, A, B);
    REQUIRE(d.size() == 3);
    CHECK(d[0].t == std::vector<double>{0, 0.25, 0.5, 1});
    CHECK(d[0].values == std::vector<double>{2, 1, 1, 3});
    CHECK(d[1].t == std::vector<double>{0, 0.5, 0.75, 1});
    CHECK(d[1].values == std::vector<double>{3, 1, 1, 2});
    CHECK(d[2].t == std::vector<double>{0, 1});  // no crossing inside (0, 1)
    CHECK(d[2].stats.points == std::vector<std::size_t>{2, 2, 2});
    CHECK(d[0].stats.points == std::vector<std::size_t>{2, 4, 4});
    check_same_lines(exact_lines(execution::seq, net, A, B), d);
    check_same_lines(exact_lines(execution::seq, net, A, B), exact_lines(pol, net, A, B));
    // merge_tol: the break at 1/4 lies within 0.3 of t = 0: merged (counted)
    line_options o;
    o.merge_tol = 0.3;
    const auto m = exact_lines(execution::thrust, net, A, B, o);
    CHECK(m[0].t == std::vector<double>{0, 0.5, 1});
    CHECK(m[0].stats.merged == 1);
    check_same_lines(exact_lines(execution::seq, net, A, B, o), m);
    // float values (ratios stay double)
    const rows Af{{-1.0}}, Bf{{3.0}};
    const auto f = exact_lines<float>(execution::thrust, net, std::vector<std::vector<float>>{{-1.0f}},
                                      std::vector<std::vector<float>>{{3.0f}});
    CHECK(f[0].t == std::vector<double>{0, 0.25, 0.5, 1});
    CHECK(f[0].values == std::vector<float>{2, 1, 1, 3});
  }
  {
    // (-1,-1) -> (1,3): x = 0 at t = 1/2, y = 0 at t = 1/4, x + y - 1 = 0 at t = 1/2 (a repeat: not
    // counted as merged); out = 0, 0, 1, 7
    const auto net = net2();
    const rows A{{-1.0, -1.0}, {0.0, -1.0}, {0.0, 0.0}}, B{{1.0, 3.0}, {1.0, 1.0}, {0.0, 2.0}};
    const auto d = exact_lines(execution::thrust, net, A, B);
    CHECK(d[0].t == std::vector<double>{0, 0.25, 0.5, 1});
    CHECK(d[0].values == std::vector<double>{0, 0, 1, 7});
    CHECK(d[0].stats.merged == 0);
    // x = 0 at the start (an end on the knot never splits); y = 0 at 1/2; x + y - 1 = 0 at 2/3
    CHECK(d[1].t.size() == 4);
    CHECK(d[1].t[1] == 0.5);
    CHECK(std::abs(d[1].t[2] - 2.0 / 3) < 1e-15);
    // x = 0 all along, y from 0 to 2: x + y - 1 = 0 at t = 1/2
    CHECK(d[2].t == std::vector<double>{0, 0.5, 1});
    check_same_lines(exact_lines(execution::seq, net, A, B), d);
    check_same_lines(exact_lines(execution::seq, net, A, B), exact_lines(pol, net, A, B));
    // the same as a DynamicNetwork
    check_same_lines(exact_lines(execution::seq, net, A, B), exact_lines(execution::thrust, to_dynamic(net), A, B));
  }
}

TEST_CASE("thrust exact_lines: ACAS Xu against the host policy") {
  for (auto [a, b] : {std::pair{1, 1}, std::pair{3, 5}, std::pair{5, 9}, std::pair{2, 3}})
    if (!std::filesystem::exists(acas(a, b))) NNLENS_SKIP(acas(a, b).string(), " not found");
  double worst = 0;
  std::size_t pieces = 0, segs = 0;
  for (auto [a, b] : {std::pair{1, 1}, std::pair{3, 5}, std::pair{5, 9}}) {
    const auto m = load_acas(a, b);
    rows A, B;
    acas_segments(m.norm, 200, 1000 + std::uint64_t(a * 10 + b), A, B);
    const auto h = exact_lines(execution::par, m.net, A, B);
    const auto d = exact_lines(thrust_policy{.batch = 64}, m.net, A, B);
    worst = std::max(worst, check_same_lines(h, d).worst);
    for (const auto& r : d) pieces += r.pieces(), ++segs;
    // a segment whose endpoint puts a neuron exactly on 0: P = a point where hidden unit 0 of the
    // first layer is 0 (move along input 0: x0 = -(b + sum_{i>0} W[i,0] x_i) / W[0,0])
    const auto& l0 = std::get<Dense<dyn, double>>(m.net.layer(0));
    std::vector<double> P = A[0];
    double z = l0.b(0);
    for (std::size_t i = 1; i < 5; ++i) z += l0.W(i, 0) * P[i];
    P[0] = -z / l0.W(0, 0);
    const rows A0{P, B[1]}, B0{B[0], P};
    const line_diff ld = check_same_lines(exact_lines(execution::seq, m.net, A0, B0), exact_lines(execution::thrust, m.net, A0, B0));
    worst = std::max(worst, ld.worst);
  }
  MESSAGE("ACAS Xu: ", segs, " segments, ", double(pieces) / double(segs), " pieces per segment, worst |t_host - t_thrust| = ",
          worst);
  // reanchor and validate
  const auto m = load_acas(2, 3);
  rows A, B;
  acas_segments(m.norm, 40, 77, A, B);
  line_options o;
  o.reanchor = true;
  o.validate = true;
  const auto h = exact_lines(execution::seq, m.net, A, B, o);
  const auto d = exact_lines(thrust_policy{.batch = 16}, m.net, A, B, o);
  check_same_lines(h, d);
  for (std::size_t i = 0; i < d.size(); ++i) {
    CHECK(d[i].stats.validated_pieces == h[i].stats.validated_pieces);
    CHECK(d[i].stats.violations == 0);
    CHECK(d[i].stats.max_deviation <= 1e-9);
  }
}

TEST_CASE("thrust exact_lines: conv nets with ReLU and MaxPool2D") {
  using Conv = Sequential<Input<2, 8, 8>, Conv2D<4, 3, 1, 1, 1, 1, double>, ReLU, MaxPool2D<2>, Conv2D<16, 3, 1, 1, 1, 1, double>,
                          MaxPool2D<2>, ReLU, Flatten, Dense<6, double>, ReLU, Dense<3, double>>;
  Conv net;
  initialize(net, 5);
  const rows A = random_rows(24, 128, 11), B = random_rows(24, 128, 12);
  for (bool fuse : {true, false}) {
    CAPTURE(fuse);
    line_options o;
    o.fuse_max_pool = fuse;
    const auto h = exact_lines(execution::par, net, A, B, o);
    const auto d = exact_lines(thrust_policy{.batch = 10}, net, A, B, o);
    const double w = check_same_lines(h, d).worst;
    std::size_t pieces = 0;
    for (const auto& r : d) pieces += r.pieces();
    MESSAGE("conv net, fuse_max_pool = ", fuse, ": ", double(pieces) / 24, " pieces per segment, worst ratio difference ", w);
    CHECK(pieces > 24 * 4);
  }
  // the same network as a DynamicNetwork
  const auto dn = to_dynamic(net);
  check_same_lines(exact_lines(execution::seq, net, A, B), exact_lines(execution::thrust, dn, A, B));
}

TEST_CASE("thrust exact_lines: errors as the host's") {
  const auto net = net2();
  const std::vector<double> P{-1, -1}, Q{1, 3};
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const rows As{P, P, {nan, 0}, {0, 0, 0}, Q}, Bs{Q, P, Q, {1, 1}, P};
  // without keep_going: the first failing segment's error, the same type and message
  std::string host_msg;
  try {
    (void)exact_lines(execution::seq, net, As, Bs);
  } catch (const value_error& e) {
    host_msg = e.what();
  }
  REQUIRE(contains(host_msg, "segment 1"));
  try {
    (void)exact_lines(execution::thrust, net, As, Bs);
    FAIL("no error");
  } catch (const value_error& e) {
    CHECK(std::string(e.what()) == host_msg);
  }
  // keep_going: errors recorded, the others computed
  line_options kg;
  kg.keep_going = true;
  const auto h = exact_lines(execution::seq, net, As, Bs, kg);
  const auto d = exact_lines(thrust_policy{.batch = 2}, net, As, Bs, kg);
  check_same_lines(h, d);
  CHECK(d[0].error.empty());
  CHECK(contains(d[1].error, "degenerate"));
  CHECK(contains(d[2].error, "not finite"));
  CHECK(contains(d[3].error, "elements"));
  CHECK(d[4].error.empty());
  CHECK(d[4].pieces() == 3);
  // shape mismatch: a row of the wrong size, A and B of different sizes
  CHECK_THROWS_AS(exact_lines(execution::thrust, net, rows{{0, 0, 0}}, rows{{1, 1, 1}}), shape_error);
  CHECK_THROWS_AS(exact_lines(execution::thrust, net, rows{P, P}, rows{Q}), shape_error);
  CHECK(exact_lines(execution::thrust, net, rows{}, rows{}).empty());
  // max_pieces / max_bytes: limit_error with the host's message; keep_going finishes the others
  if (!std::filesystem::exists(acas(1, 1))) NNLENS_SKIP(acas(1, 1).string(), " not found");
  const auto m = load_acas(1, 1);
  rows A, B;
  acas_segments(m.norm, 30, 5, A, B);
  const auto full = exact_lines(execution::seq, m.net, A, B);
  line_options cap;
  cap.max_pieces = 100;
  std::string hm, dm;
  try {
    (void)exact_lines(execution::seq, m.net, A, B, cap);
  } catch (const limit_error& e) {
    hm = e.what();
  }
  try {
    (void)exact_lines(execution::thrust, m.net, A, B, cap);
  } catch (const limit_error& e) {
    dm = e.what();
  }
  CHECK(!hm.empty());
  CHECK(hm == dm);
  cap.keep_going = true;
  const auto hc = exact_lines(execution::seq, m.net, A, B, cap);
  const auto dc = exact_lines(thrust_policy{.batch = 7}, m.net, A, B, cap);
  check_same_lines(hc, dc);
  std::size_t failed = 0;
  for (const auto& r : dc) failed += !r.error.empty();
  CHECK(failed > 0);
  CHECK(failed < dc.size());
  line_options bytes;
  bytes.max_memory = 0;  // the host unbounded, as the device runs: max_bytes caps a layer
  bytes.max_bytes = 2000;
  bytes.keep_going = true;
  check_same_lines(exact_lines(execution::seq, m.net, A, B, bytes), exact_lines(execution::thrust, m.net, A, B, bytes));
  // a layer that is not piecewise-linear, or has no thrust kernels, in a DynamicNetwork
  Sequential<Input<3>, Dense<4, double>, ReLU, Dense<3, double>, Softmax> sm;
  initialize(sm, 28);
  try {
    (void)exact_lines(execution::thrust, to_dynamic(sm), rows{{0, 0, 0}}, rows{{1, 2, 3}});
    FAIL("no error");
  } catch (const logic_error& e) {
    CHECK(contains(e.what(), "Softmax"));
    CHECK(contains(e.what(), "layer 3"));
  }
  // a composite with more branches than the device's join holds (8): refused before any segment
  // runs, by the check that walks the network as every ExactLine engine does (exactline/walk.hpp)
  using Br = Block<Dense<2, double>, ReLU>;
  Sequential<Input<3>, Dense<4, double>, Concat<Br, Br, Br, Br, Br, Br, Br, Br, Br>, Dense<3, double>> wide;
  initialize(wide, 30);
  CHECK(exact_lines(execution::seq, wide, rows{{0, 0, 0}}, rows{{1, 2, 3}}).at(0).pieces() >= 1);
  for (int form = 0; form < 2; ++form) {
    try {
      if (form == 0)
        (void)exact_lines(execution::thrust, wide, rows{{0, 0, 0}}, rows{{1, 2, 3}});
      else
        (void)exact_lines(execution::thrust, to_dynamic(wide), rows{{0, 0, 0}}, rows{{1, 2, 3}});
      FAIL("no error");
    } catch (const logic_error& e) {
      CHECK(contains(e.what(), "layer 1 (Concat) has more than 8 branches"));
      CHECK(contains(e.what(), "execution::seq"));
    }
  }
  // a composite runs on the device (tests/thrust/test_thrust_composite.cpp has the full checks)
  Sequential<Input<3>, Dense<4, double>, Residual<Block<Dense<4, double>, ReLU>>, Dense<3, double>> lk;
  initialize(lk, 29);
  check_same_lines(exact_lines(execution::seq, lk, rows{{0, 0, 0}}, rows{{1, 2, 3}}),
                   exact_lines(execution::thrust, to_dynamic(lk), rows{{0, 0, 0}}, rows{{1, 2, 3}}));
}
