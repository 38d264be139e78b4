// ExactLine within a memory budget (line_options::max_memory, exactline/bounded.hpp): runs split
// into sub-segments give the unbounded run's pieces bit for bit (ACAS Xu, a CNN with max pools, a
// residual MLP and a residual CNN, in double and float), cuts inside a single piece are merged
// away where the network is affine across them, and a piece that alone passes the budget is
// limit_error naming max_memory.
#include "exactline_checks.hpp"

#include <nnlens/io/nnet.hpp>

#include "test_skip.hpp"

#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

using namespace nnlens;
using namespace el_test;

namespace {

template <class S>
using Cnn = PoolCnn<S>;
template <class S>
using ResMlp = Sequential<Input<5>, Dense<8, S>, ReLU, Residual<Block<Dense<8, S>, ReLU, Dense<8, S>>>, ReLU,
                          Residual<Block<Dense<6, S>, ReLU, Dense<6, S>>, Block<Dense<6, S>>>, ReLU, Dense<3, S>>;
template <class S>
using ResCnn = ResidualCnn<S>;

/// Budgets from ample down to a few points of the widest layer: each run that split at all
/// must be the unbounded run, bit for bit, with the same per-layer point counts.
template <class S, class Net>
void check_budgets(const Net& net, const std::vector<S>& P, const std::vector<S>& Q, std::size_t widest,
                   std::size_t fewest = 32) {
  line_options unbounded;
  unbounded.max_memory = 0;
  const auto ref = exact_line<S>(net, P, Q, unbounded);
  REQUIRE(ref.pieces() >= 8);
  std::size_t split_runs = 0;
  // (depth first, each level keeps its step's input while its parts run: a budget of a few points
  // of the widest layer can leave a deep part no room, a limit_error; the floor avoids that)
  for (std::size_t points : {std::size_t(1) << 20, ref.t.size() / 2, ref.t.size() / 5, 2 * fewest, fewest}) {
    line_options o;
    o.max_memory = std::max(points, fewest) * widest * sizeof(S);
    CAPTURE(o.max_memory);
    const auto r = exact_line<S>(net, P, Q, o);
    CHECK(r.stats.cuts == 0);
    CHECK(same_bits(r, ref));
    CHECK(r.stats.points == ref.stats.points);
    CHECK(r.stats.merged == ref.stats.merged);
    split_runs += r.stats.sub_segments > 0;
  }
  CHECK(split_runs >= 1);  // the small budgets did split
}

}  // namespace

TEST_CASE_TEMPLATE("bounded ExactLine: sub-segments give the unbounded pieces bit for bit", S, double, float) {
  std::mt19937_64 rng(4400);
  SUBCASE("a CNN with a max pool (fused ReLU + MaxPool2D)") {
    Cnn<S> net;
    initialize(net, 41);
    const auto P = random_point(128, rng), Q = random_point(128, rng);
    check_budgets(net, std::vector<S>(P.begin(), P.end()), std::vector<S>(Q.begin(), Q.end()), 4 * 64);
  }
  SUBCASE("a residual MLP (composites after refines)") {
    ResMlp<S> net;
    initialize(net, 42);
    const auto P = random_point(5, rng, -4, 4), Q = random_point(5, rng, -4, 4);
    check_budgets(net, std::vector<S>(P.begin(), P.end()), std::vector<S>(Q.begin(), Q.end()), 8);
  }
  SUBCASE("a residual CNN") {
    ResCnn<S> net;
    initialize(net, 43);
    const auto P = random_point(72, rng, -2, 2), Q = random_point(72, rng, -2, 2);
    check_budgets(net, std::vector<S>(P.begin(), P.end()), std::vector<S>(Q.begin(), Q.end()), 4 * 36);
  }
}

TEST_CASE("bounded ExactLine: ACAS Xu 1_1, the unbounded pieces bit for bit") {
  const auto path = nnlens_test::shared_dir() / "models" / "acasxu-nnet" / "ACASXU_run2a_1_1_batch_2000.nnet";
  if (!std::filesystem::exists(path)) NNLENS_SKIP("no ", path.string());
  io::nnet_options no;
  no.normalize_inputs = false;
  no.rescale_outputs = false;
  const auto model = io::load_nnet<double>(path, no);
  const auto& net = model.net;
  std::mt19937_64 rng(4401);
  for (int k = 0; k < 3; ++k) {
    const auto P = random_point(5, rng, -0.5, 0.5), Q = random_point(5, rng, -0.5, 0.5);
    check_budgets<double>(net, P, Q, 50, 256);
  }
}

TEST_CASE("bounded ExactLine: a single piece cut inside a composite, the cuts merged away") {
  // the first step is a composite on the segment's one piece: a small budget cuts that piece at
  // points the unbounded run does not have; after the join each is dropped (the network is
  // affine across it) and the pieces are the unbounded ones up to rounding
  using Net = Sequential<Input<3>, Residual<Block<Dense<24, double>, ReLU, Dense<3, double>>>, ReLU, Dense<4, double>, ReLU,
                         Dense<2, double>>;
  Net net;
  initialize(net, 44);
  std::mt19937_64 rng(4402);
  const auto P = random_point(3, rng, -20, 20), Q = random_point(3, rng, -20, 20);
  line_options unbounded;
  unbounded.max_memory = 0;
  const auto ref = exact_line(net, P, Q, unbounded);
  REQUIRE(ref.pieces() >= 6);
  line_options o;
  o.max_memory = 8 * 24 * sizeof(double);  // the branch's 24 values at 8 points
  const auto r = exact_line(net, P, Q, o);
  MESSAGE("pieces ", ref.pieces(), ", sub-segments ", r.stats.sub_segments, ", cuts ", r.stats.cuts, " (merged ",
          r.stats.cuts_merged, ")");
  check_structure(r);
  CHECK(r.stats.cuts > 0);
  CHECK(r.stats.cuts_merged == r.stats.cuts);
  REQUIRE(r.t.size() == ref.t.size());
  double dt = 0, dy = 0;
  for (std::size_t i = 0; i < r.t.size(); ++i) dt = std::max(dt, std::abs(r.t[i] - ref.t[i]));
  for (std::size_t i = 0; i < r.values.size(); ++i) dy = std::max(dy, std::abs(r.values[i] - ref.values[i]));
  CHECK(dt < 1e-12);
  CHECK(dy < 1e-9 * value_scale(ref));
  // the result is still exact: affine on every piece
  std::mt19937_64 check_rng(4403);
  check_affinity(net, r, check_rng, 1e-9);
}

TEST_CASE("bounded ExactLine: a piece that alone passes max_memory is limit_error naming it") {
  Cnn<double> net;
  initialize(net, 45);
  std::mt19937_64 rng(4404);
  const auto P = random_point(128, rng), Q = random_point(128, rng);
  line_options o;
  o.max_memory = 100 * sizeof(double);  // less than two points of the input
  CHECK_THROWS_AS(exact_line(net, P, Q, o), limit_error);
  try {
    (void)exact_line(net, P, Q, o);
  } catch (const limit_error& e) {
    CHECK(std::string(e.what()).find("max_memory") != std::string::npos);
  }
}
