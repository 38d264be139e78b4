// ExactLine on real .nnet models from ../shared/models (ACAS Xu 1_1 and others, MNIST MLPs from
// Marabou, sisl's TestNetwork), in normalised units (the file's own Dense/ReLU chain): lines between
// random points of the normalised input box.  P1, P2 at every piece midpoint (relative 1e-9 in
// double), P4, P5, P6, P7, P8 (10k samples), and the ACAS decision intervals (argmin) against the
// network at their midpoints.
#include "exactline_checks.hpp"

#include <nnlens/io/nnet.hpp>

#include "test_skip.hpp"

#include <filesystem>
#include <random>
#include <string>
#include <vector>

using namespace nnlens;
using namespace el_test;

namespace {

const std::filesystem::path models = nnlens_test::shared_dir() / "models";

io::basic_nnet_model<double> load_plain(const std::filesystem::path& p) {
  io::nnet_options o;
  o.normalize_inputs = false;
  o.rescale_outputs = false;
  return io::load_nnet<double>(p, o);
}

/// A random point of the normalised input box ((min - mean) / range .. (max - mean) / range).
std::vector<double> box_point(const io::nnet_normalization& n, std::mt19937_64& rng) {
  std::vector<double> x(n.inputs());
  std::uniform_real_distribution<double> u(0, 1);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double lo = (n.input_min[i] - n.input_mean[i]) / n.input_range[i];
    const double hi = (n.input_max[i] - n.input_mean[i]) / n.input_range[i];
    x[i] = lo + u(rng) * (hi - lo);
  }
  return x;
}

void run_model(const std::string& rel, int lines, std::size_t dense, std::uint64_t seed) {
  const auto p = models / rel;
  if (!std::filesystem::exists(p)) NNLENS_SKIP(p.string(), " not found");
  const auto m = load_plain(p);
  const auto& net = m.net;
  std::mt19937_64 rng(seed);
  std::size_t total = 0;
  for (int l = 0; l < lines; ++l) {
    const auto P = box_point(m.norm, rng), Q = box_point(m.norm, rng);
    const auto r = exact_line(net, P, Q);
    total += r.pieces();
    check_structure(r);                                        // P1
    check_affinity(net, r, rng, 1e-9, 0);                      // P2 at every midpoint (and every t_j)
    check_completeness(net, Q, P, 0, 1e-6);                    // P5
    check_completeness(net, Q, P, r.out_size() - 1, 1e-6);
    std::uniform_real_distribution<double> ut(0.2, 0.8);
    check_refinement(net, r, ut(rng), 1e-9);                   // P6
    check_reversal(net, r, 1e-9);                              // P7
    check_minimality(net, r);                                  // P4
    if (dense) check_dense_sampling(net, r, dense, 1e-9);      // P8
    // validate agrees: no violations
    line_options o;
    o.validate = true;
    const auto rv = exact_line(net, P, Q, o);
    CHECK(rv.t == r.t);
    CHECK(rv.stats.violations == 0);
  }
  MESSAGE(rel, ": ", lines, " lines, ", total, " pieces");
  CHECK(total >= std::size_t(lines));
}

}  // namespace

TEST_CASE("ACAS Xu 1_1: P1, P2, P5-P8 on random lines of the normalised input box") {
  run_model("acasxu-nnet/ACASXU_run2a_1_1_batch_2000.nnet", 3, 10000, 31);
}

TEST_CASE("ACAS Xu 2_3, 5_9, sisl TestNetwork, Marabou MNIST MLPs: P1, P2, P5-P8") {
  run_model("acasxu-nnet/ACASXU_run2a_2_3_batch_2000.nnet", 2, 10000, 32);
  run_model("acasxu-nnet/ACASXU_run2a_5_9_batch_2000.nnet", 2, 10000, 33);
  run_model("sisl-NNet/TestNetwork.nnet", 2, 10000, 34);
  run_model("marabou/mnist10x10.nnet", 2, 10000, 35);
}

TEST_CASE("ACAS Xu 1_1: decision intervals (argmin advisory) on a head-on distance line") {
  const auto p = models / "acasxu-nnet/ACASXU_run2a_1_1_batch_2000.nnet";
  if (!std::filesystem::exists(p)) NNLENS_SKIP(p.string(), " not found");
  // raw units with the file's normalisation folded in (clamp included): rho from 0 to 12000 ft at
  // theta = -68 deg, psi = -180 deg (head-on), v_own = v_int = 150 (docs/specs/exactline.md#3a-acas-xu-decision-boundaries)
  const auto m = io::load_nnet<double>(p);
  const double th = -68.0 * 3.14159265358979323846 / 180.0, psi = -3.141592;
  const std::vector<double> P{0, th, psi, 150, 150}, Q{12000, th, psi, 150, 150};
  const auto r = exact_line(m.net, P, Q);
  check_structure(r);
  std::mt19937_64 rng(36);
  check_affinity(m.net, r, rng, 1e-9, 0);
  const auto iv = classify_line(r, class_rule::argmin);
  REQUIRE(!iv.empty());
  MESSAGE("distance line: ", r.pieces(), " pieces, ", iv.size(), " advisory intervals");
  for (const auto& c : iv) {
    const auto y = eval(m.net, r.point((c.from + c.to) / 2), 1);
    std::size_t best = 0;
    for (std::size_t o = 1; o < y.size(); ++o)
      if (y[o] < y[best]) best = o;
    CHECK(best == c.label);
  }
  // the paper's Fig. 2a finding on this line: a Strong Left (3) island inside Weak Left (1)
  bool island = false;
  for (std::size_t i = 1; i + 1 < iv.size(); ++i)
    island = island || (iv[i].label == 3 && iv[i - 1].label == 1 && iv[i + 1].label == 1);
  CHECK(island);
  // a 15-sample plot sees at most as many advisory changes as the exact intervals
  std::size_t sampled_changes = 0, prev = 99;
  for (int s = 0; s < 15; ++s) {
    const auto y = eval(m.net, r.point(s / 14.0), 1);
    std::size_t best = 0;
    for (std::size_t o = 1; o < y.size(); ++o)
      if (y[o] < y[best]) best = o;
    if (prev != 99 && best != prev) ++sampled_changes;
    prev = best;
  }
  CHECK(sampled_changes <= iv.size() - 1);
}
