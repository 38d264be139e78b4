// NNSlicer on real models from the shared folder: Marabou's MNIST .nnet networks (784 inputs,
// Dense/ReLU chains) and sisl's TestNetwork.nnet, profiled on a few hundred random inputs.
// (The DeepXplore LeNet ONNX files need nnlens::onnx, which test_nnslicer does not link.)
// Checked, per sample ξ (a one-sample table C_ξ) and for the whole set:
//   1. every Dense node: a unit n with C_ξ[n] != 0 and Δy_n != 0 has at least one synapse of its
//      column W[:, n] with C_ξ != 0 (at least one item is kept), a unit with C_ξ[n] == 0 has none
//      (it is not expanded), and every synapse's C_ξ is in {-1, 0, 1} (one vote per sample);
//   2. every ReLU node: C_ξ[pre_n] != 0 only if C_ξ[post_n] != 0 and the unit is open (y_n > 0);
//   3. the output tensor holds exactly one +1 (the predicted logit) per sample;
//   4. additivity: the table of the set is the sum of the one-sample tables; par == seq;
//   5. |CONTRIB| of a synapse <= the number of samples; the slice is non-empty in every layer.
#include "nnslicer_test_util.hpp"

#include <cmath>
#include <filesystem>

#include "nnlens/io/nnet.hpp"
#include "test_skip.hpp"

using namespace slicetest;
namespace fs = std::filesystem;

namespace {
const fs::path models = nnlens_test::shared_dir() / "models";

template <class Net>
void check_model(const Net& net, double lo, double hi, std::size_t n_profile, std::size_t n_slice) {
  const shape in = input_shape_of(net);
  const auto D = random_batch(n_profile, in, 101, lo, hi);
  const auto I = random_batch(n_slice, in, 102, lo, hi);
  const auto p = profile_network(execution::par, net, D);
  CHECK(p.samples == n_profile);
  const op_graph<double> g(net);
  const auto& nodes = g.nodes();
  const auto whole = nnslicer(execution::seq, net, p, I, criterion::predicted(), {.theta = 0.3});
  CHECK(tables_equal(nnslicer(execution::par, net, p, I, criterion::predicted(), {.theta = 0.3}), whole));

  contrib_table sum;
  std::size_t expanded = 0, multi_votes = 0;
  for (std::size_t s = 0; s < n_slice; ++s) {
    const xt::xarray<double> x = rows_of(I, s, s + 1);
    const auto t = nnslicer(net, p, x, criterion::predicted(), {.theta = 0.3});
    sum = s == 0 ? t : merge(sum, t);
    std::vector<std::vector<double>> buf;
    g.run(1, x.data(), buf);
    // 3: one +1 at the output
    const auto& out = t.neurons.back();
    CHECK(std::count(out.begin(), out.end(), 1) == 1);
    CHECK(nonzero(out) == 1);
    for (std::size_t k = 0; k < nodes.size(); ++k) {
      const auto& nd = nodes[k];
      const auto& Cin = t.neurons[nd.in];
      const auto& Cout = t.neurons[nd.out];
      const auto mean_out = p.mean(nd.out);
      if (nd.type == "Dense") {
        const std::size_t I_ = g.acts()[nd.in][0], O = g.acts()[nd.out][0];
        for (std::size_t n = 0; n < O; ++n) {
          std::size_t votes = 0;
          for (std::size_t i = 0; i < I_; ++i) {
            const auto v = t.synapses[k][i * O + n];
            multi_votes += std::llabs(v) > 1;
            votes += v != 0;
          }
          const double dy = buf[nd.out][n] - mean_out[n];
          if (Cout[n] == 0) CHECK(votes == 0);
          else if (dy != 0) {
            CHECK(votes >= 1);
            ++expanded;
          }
        }
      } else if (nd.type == "ReLU") {
        for (std::size_t n = 0; n < Cin.size(); ++n)
          if (Cin[n] != 0) {
            CHECK(Cout[n] != 0);
            CHECK(buf[nd.out][n] > 0);
          }
      }
    }
  }
  CHECK(multi_votes == 0);
  CHECK(expanded > n_slice);  // more than the output neuron was expanded
  // 4
  CHECK(tables_equal(sum, whole));
  // 5
  std::int64_t max_syn = 0;
  for (const auto& syn : whole.synapses)
    for (auto v : syn) max_syn = std::max<std::int64_t>(max_syn, std::llabs(v));
  CHECK(max_syn <= std::int64_t(n_slice));
  CHECK(max_syn > 1);  // some synapse is kept for several samples
  std::int64_t total_out = 0;
  for (auto v : whole.neurons.back()) {
    CHECK(v >= 0);
    total_out += v;
  }
  CHECK(total_out == std::int64_t(n_slice));
  for (const auto& sz : slice_sizes(whole)) {
    CAPTURE(sz.name);
    CHECK(sz.neurons_in_slice >= 1);
    CHECK(sz.neurons_in_slice <= sz.neurons);
    if (sz.synapses) CHECK(sz.synapses_in_slice >= 1);
  }
  // the pruned model runs and keeps exactly the requested number per layer
  const auto pruned = apply_slice(net, whole, 0.5);
  const auto m = synapse_mask(net, whole, 0.5);
  for (std::size_t k = 0; k < m.size(); ++k)
    CHECK(std::size_t(std::count(m[k].begin(), m[k].end(), std::uint8_t(0))) == m[k].size() / 2);
  const auto y = forward(pruned, I);
  CHECK(y.shape(0) == n_slice);
}
}  // namespace

TEST_CASE("NNSlicer on Marabou's MNIST 10x10 and 20x20 .nnet networks (random images in [0, 1])") {
  for (const char* name : {"mnist10x10.nnet", "mnist20x20.nnet"})
    if (!fs::exists(models / "marabou" / name)) NNLENS_SKIP((models / "marabou" / name).string(), " not found");
  for (const char* name : {"mnist10x10.nnet", "mnist20x20.nnet"}) {
    CAPTURE(name);
    const auto path = models / "marabou" / name;
    const auto m = io::load_nnet<double>(path);
    check_model(m.net, 0.0, 1.0, 300, 40);
  }
}

TEST_CASE("NNSlicer on sisl's TestNetwork.nnet") {
  const auto path = models / "sisl-NNet" / "TestNetwork.nnet";
  if (!fs::exists(path)) NNLENS_SKIP(path.string(), " not found");
  const auto m = io::load_nnet<double>(path);
  check_model(m.net, -1.0, 1.0, 400, 60);
}
