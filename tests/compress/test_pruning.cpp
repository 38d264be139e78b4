// Magnitude pruning (compress/pruning.hpp; docs/specs/neusemslice.md#41-model-restructure, docs/specs/neusemslice.md#7-test-oracles oracle 8): each
// allocator on hand-made tensors against hand-computed choices, the 1 - (1-p)^NI schedule, pruned
// weights staying at exactly 0 through fine-tuning, errors.
#include <doctest/doctest.h>

#include <nnlens/compress/pruning.hpp>
#include <nnlens/neusemslice/restructure.hpp>
#include <nnlens/nnlens.hpp>
#include <nnlens/train/fit.hpp>
#include <nnlens/train/optimizer.hpp>

#include <cmath>
#include <limits>
#include <vector>

using namespace nnlens;
using namespace nnlens::compress;

namespace {
using Tiny = Sequential<Input<2>, Dense<2, double>, ReLU, Dense<2, double>>;
using TinyConv = Sequential<Input<1, 4, 4>, Conv2D<2, 3, 1, 0, 1, 1, double>, ReLU, Flatten, Dense<2, double>>;
using Wide = Sequential<Input<8>, Dense<4, double>, ReLU, Dense<2, double>>;
using Mid = Sequential<Input<64>, Dense<32>, ReLU, Dense<16>, ReLU, Dense<10>>;
using LeNet5 = Sequential<Input<1, 28, 28>, Conv2D<6, 5, 1, 2>, ReLU, MaxPool2D<2>, Conv2D<16, 5>, ReLU, MaxPool2D<2>,
                          Flatten, Dense<120>, ReLU, Dense<84>, ReLU, Dense<10>>;

// layer 1 weights {1, 2, 3, 4} (as [in, out]: (1 -4; 2 3) by magnitude), layer 2 {10, 20, 30, 50}
Tiny tiny() {
  Tiny n;
  initialize(n, 1);
  n.layer<0>().W = {{1.0, -4.0}, {2.0, 3.0}};
  n.layer<2>().W = {{-10.0, 50.0}, {30.0, 20.0}};
  return n;
}

std::vector<double> weights(const auto& W) { return std::vector<double>(W.begin(), W.end()); }

std::size_t zeros(const std::vector<double>& w) {
  std::size_t z = 0;
  for (double v : w) z += v == 0.0;
  return z;
}
}  // namespace

TEST_CASE("weight_tensors: the Dense/Conv2D weights with fan-in, fan-out and kernel") {
  TinyConv c;
  initialize(c, 1);
  const auto ws = weight_tensors(c);
  REQUIRE(ws.size() == 2);
  CHECK(ws[0].tensor == 0);
  CHECK(ws[0].size == 18);
  CHECK(ws[0].convolution);
  CHECK(ws[0].first);
  CHECK((ws[0].n_in == 1 && ws[0].n_out == 2 && ws[0].k_h == 3 && ws[0].k_w == 3));
  CHECK(ws[1].tensor == 2);  // after the conv's bias
  CHECK((ws[1].n_in == 8 && ws[1].n_out == 2 && ws[1].k_h == 0 && !ws[1].convolution && ws[1].last));
}

TEST_CASE("Global: one magnitude threshold over all layers") {
  Tiny n = tiny();
  auto m = make_pruning_mask(n);
  const auto r = prune_step(n, m, 0.5, pruning_method::global);
  CHECK(r.remaining_before == 8);
  CHECK(r.pruned == 4);
  CHECK(r.per_tensor == std::vector<std::size_t>{4, 0});
  CHECK(zeros(weights(n.layer<0>().W)) == 4);
  CHECK(weights(n.layer<2>().W) == std::vector<double>{-10, 50, 30, 20});
  CHECK(m.alive_count(0) == 0);
  CHECK(m.alive_count(1) == 2);  // the biases are not prunable
}

TEST_CASE("LAMP: w^2 / sum of the larger-or-equal squares, global threshold on the score") {
  // layer 1 sorted 1,2,3,4: squares 1,4,9,16, suffix 30,29,25,16 -> .0333 .1379 .36 1
  // layer 2 sorted 10,20,30,50: 100,400,900,2500, suffix 3900,3800,3400,2500 -> .0256 .1053 .2647 1
  // the four smallest: 10 (.0256), 1 (.0333), 20 (.1053), 2 (.1379)
  Tiny n = tiny();
  auto m = make_pruning_mask(n);
  const auto r = prune_step(n, m, 0.5, pruning_method::lamp);
  CHECK(r.per_tensor == std::vector<std::size_t>{2, 2});
  CHECK(weights(n.layer<0>().W) == std::vector<double>{0, -4, 0, 3});
  CHECK(weights(n.layer<2>().W) == std::vector<double>{0, 50, 30, 0});
  // one more: of 3, 4, 30, 50 the scores are 9/25 = .36, 1, 900/3400 = .2647, 1 -> 30 goes
  Tiny n2 = tiny();
  auto m2 = make_pruning_mask(n2);
  prune_step(n2, m2, 0.6, pruning_method::lamp);  // round(4.8) = 5
  CHECK(weights(n2.layer<2>().W) == std::vector<double>{0, 50, 0, 0});
  CHECK(weights(n2.layer<0>().W) == std::vector<double>{0, -4, 0, 3});
}

TEST_CASE("LAMP scores are computed on the surviving weights of a layer") {
  // after the step above, layer 2 holds only 50 (score 1) and layer 1 holds 3, 4 (scores 9/25, 1):
  // the next weight to go is 3
  Tiny n = tiny();
  auto m = make_pruning_mask(n);
  prune_step(n, m, 0.6, pruning_method::lamp);
  const auto r = prune_step(n, m, 0.34, pruning_method::lamp);  // round(3 * .34) = 1
  CHECK(r.pruned == 1);
  CHECK(weights(n.layer<0>().W) == std::vector<double>{0, -4, 0, 0});
}

TEST_CASE("Uniform+: equal fraction per layer; the last Dense keeps 20%; the first conv stays dense") {
  {
    Tiny n = tiny();
    auto m = make_pruning_mask(n);
    CHECK(prune_step(n, m, 0.5, pruning_method::uniform_plus).per_tensor == std::vector<std::size_t>{2, 2});
    CHECK(weights(n.layer<0>().W) == std::vector<double>{0, -4, 0, 3});
    CHECK(weights(n.layer<2>().W) == std::vector<double>{0, 50, 30, 0});
  }
  {
    // p = .9: 7 of 8; the last layer would keep .5 < round(.2 * 4) = 1 weight: it loses 3, the
    // first layer the other 4
    Tiny n = tiny();
    auto m = make_pruning_mask(n);
    CHECK(prune_step(n, m, 0.9, pruning_method::uniform_plus).per_tensor == std::vector<std::size_t>{4, 3});
    CHECK(weights(n.layer<2>().W) == std::vector<double>{0, 50, 0, 0});
  }
  {
    // conv 18 weights (dense) + Dense 16: p = .2 of 34 -> 7, all from the Dense
    TinyConv c;
    initialize(c, 3);
    auto m = make_pruning_mask(c);
    CHECK(prune_step(c, m, 0.2, pruning_method::uniform_plus).per_tensor == std::vector<std::size_t>{0, 7});
    CHECK(m.alive_count(0) == 18);
    // p = .5 of 27 -> 14 > 9 prunable outside the conv while the Dense keeps round(3.2) = 3
    CHECK_THROWS_AS(prune_step(c, m, 0.5, pruning_method::uniform_plus), value_error);
  }
}

TEST_CASE("ERK: survivors proportional to n_in + n_out + k_h + k_w, overflowing layers stay dense") {
  {
    // conv e = 1 + 2 + 3 + 3 = 9, Dense e = 8 + 2 = 10; p = .2 of 34 -> 7 pruned, 27 survive:
    // conv 27 * 9/19 = 12.79 (prunes 5.21), Dense 14.21 (prunes 1.79) -> floors 5 + 1, the
    // remainder to the larger fraction (.79, the Dense) -> 5, 2
    TinyConv c;
    initialize(c, 3);
    auto m = make_pruning_mask(c);
    CHECK(prune_step(c, m, 0.2, pruning_method::erk).per_tensor == std::vector<std::size_t>{5, 2});
  }
  {
    // 32 weights (e = 12) + 8 (e = 6); p = .5: 20 survive -> 13.33 / 6.67: prunes 18.67 / 1.33 -> 19, 1
    Wide w;
    initialize(w, 2);
    auto m = make_pruning_mask(w);
    CHECK(prune_step(w, m, 0.5, pruning_method::erk).per_tensor == std::vector<std::size_t>{19, 1});
  }
  {
    // p = .1: 36 survive -> the second layer would get 12 > 8: dense; the first keeps 28 (prunes 4)
    Wide w;
    initialize(w, 2);
    auto m = make_pruning_mask(w);
    CHECK(prune_step(w, m, 0.1, pruning_method::erk).per_tensor == std::vector<std::size_t>{4, 0});
  }
}

TEST_CASE("within a layer the smallest |w| go first, whatever the allocator") {
  for (auto method : {pruning_method::lamp, pruning_method::global, pruning_method::uniform_plus, pruning_method::erk}) {
    Mid n;
    initialize(n, 5);
    const Mid before = n;
    auto m = make_pruning_mask(n);
    prune_step(n, m, 0.3, method);
    const auto ws = weight_tensors(n);
    const auto a = parameter_spans(before);
    for (const auto& w : ws) {
      double max_pruned = 0, min_kept = std::numeric_limits<double>::infinity();
      for (std::size_t i = 0; i < a[w.tensor].size(); ++i) {
        const double v = std::abs(double(a[w.tensor][i]));
        if (m.alive[w.tensor][i])
          min_kept = std::min(min_kept, v);
        else
          max_pruned = std::max(max_pruned, v);
      }
      CHECK(max_pruned <= min_kept);
    }
  }
}

TEST_CASE("oracle 8: after NI steps of p, 1 - (1-p)^NI of the prunable weights are zero") {
  for (auto method : {pruning_method::lamp, pruning_method::global, pruning_method::uniform_plus, pruning_method::erk}) {
    CAPTURE(pruning_method_name(method));
    LeNet5 n;
    initialize(n, 7);
    auto m = make_pruning_mask(n);
    const auto [alive0, base0] = prunable_weights(n, m);
    CHECK(alive0 == 61470);
    CHECK(base0 == 61470);
    for (int step = 1; step <= 12; ++step) {
      prune_step(n, m, 0.05, method);
      std::size_t zero = 0;
      const auto ps = parameter_spans(n);
      for (const auto& w : weight_tensors(n))
        for (float v : ps[w.tensor]) zero += v == 0.0f;
      const double frac = double(zero) / double(base0), want = 1 - std::pow(0.95, step);
      CHECK(std::abs(frac - want) <= 0.5 * step / double(base0) + 1e-12);
      if (step == 6) CHECK(std::round(10000 * frac) / 100 == doctest::Approx(26.49));   // ERK VGG16 in Table 5
      if (step == 12) CHECK(std::round(10000 * frac) / 100 == doctest::Approx(45.96));  // LAMP ResNet101
    }
    // p = .10 for the MLPs: 5 steps give 40.95% (Table 5, MLP-MNIST Global/Uniform)
    Mid mlp;
    initialize(mlp, 8);
    auto mm = make_pruning_mask(mlp);
    for (int s = 0; s < 5; ++s) prune_step(mlp, mm, 0.10, method);
    const auto [alive, base] = prunable_weights(mlp, mm);
    CHECK(std::abs(1 - double(alive) / double(base) - (1 - std::pow(0.9, 5))) <= 2.5 / double(base));
  }
}

TEST_CASE("keep_mask: parameters already removed are zeroed, never counted, never pruned") {
  Tiny n = tiny();
  auto m = make_pruning_mask(n);
  std::vector<std::vector<std::uint8_t>> bits;
  for (auto s : parameter_spans(n)) bits.emplace_back(s.size(), std::uint8_t(1));
  bits[0][1] = 0;  // the -4
  bits[0][3] = 0;  // the 3
  const train::parameter_mask keep(bits);
  const auto r = prune_step(n, m, 0.5, pruning_method::global, keep);
  CHECK(r.remaining_before == 6);
  CHECK(r.pruned == 3);  // 1, 2, 10
  CHECK(weights(n.layer<0>().W) == std::vector<double>{0, 0, 0, 0});
  CHECK(weights(n.layer<2>().W) == std::vector<double>{0, 50, 30, 20});
  CHECK(prunable_weights(n, m) == std::pair<std::size_t, std::size_t>{3, 6});
  // the same through make_pruning_mask(net, present)
  Tiny n2 = tiny();
  auto m2 = make_pruning_mask(n2, keep);
  CHECK(prunable_weights(n2, m2) == std::pair<std::size_t, std::size_t>{6, 6});
}

TEST_CASE("fine-tuning with the mask keeps pruned weights at exactly 0") {
  Mid n;
  initialize(n, 11);
  auto m = make_pruning_mask(n);
  prune_step(n, m, 0.4, pruning_method::lamp);
  const Mid pruned = n;
  xt::xtensor<float, 2> x = xt::zeros<float>({std::size_t(96), std::size_t(64)});
  std::vector<std::uint8_t> y(96);
  std::mt19937_64 rng(3);
  std::normal_distribution<float> g;
  for (auto& v : x) v = g(rng);
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = std::uint8_t(i % 10);
  const auto mask = m.trainable();
  train::adam opt(n, {.lr = 1e-2, .weight_decay = 1e-3});
  train::fit(execution::seq, n, opt, x, y, {.epochs = 3, .batch_size = 16, .seed = 1, .mask = &mask});
  const auto a = parameter_spans(pruned);
  const auto b = parameter_spans(n);
  std::size_t moved = 0, still_zero = 0, gone = 0;
  for (std::size_t t = 0; t < a.size(); ++t)
    for (std::size_t i = 0; i < a[t].size(); ++i) {
      if (!m.alive[t][i]) {
        ++gone;
        still_zero += b[t][i] == 0.0f;
      } else {
        moved += a[t][i] != b[t][i];
      }
    }
  CHECK(gone > 0);
  CHECK(still_zero == gone);
  CHECK(moved > 0);
}

TEST_CASE("bad input is refused") {
  Tiny n = tiny();
  auto m = make_pruning_mask(n);
  CHECK_THROWS_AS(prune_step(n, m, 0.0, pruning_method::lamp), value_error);
  CHECK_THROWS_AS(prune_step(n, m, 1.0, pruning_method::global), value_error);
  CHECK_THROWS_AS(prune_step(n, m, -0.1, pruning_method::erk), value_error);
  CHECK_THROWS_AS(prune_step(n, m, std::nan(""), pruning_method::uniform_plus), value_error);
  Wide w;
  initialize(w, 1);
  CHECK_THROWS_AS(prune_step(w, m, 0.1, pruning_method::lamp), shape_error);
  CHECK(prunable_weights(n, m) == std::pair<std::size_t, std::size_t>{8, 8});  // nothing changed
}

// ---- the §4.1 driver (neusemslice/restructure.hpp) on a small synthetic problem ----

namespace {
using Blob = Sequential<Input<4>, Dense<16>, ReLU, Dense<8>, ReLU, Dense<3>>;
struct blob_data {
  xt::xtensor<float, 2> x;
  std::vector<std::uint8_t> y;
};
blob_data blobs(std::size_t n, std::uint64_t seed) {
  blob_data d{xt::zeros<float>({n, std::size_t(4)}), std::vector<std::uint8_t>(n)};
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> g(0.f, 0.6f);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t c = i % 3;
    d.y[i] = std::uint8_t(c);
    for (std::size_t j = 0; j < 4; ++j) d.x(i, j) = g(rng) + (j == c ? 2.f : 0.f);
  }
  return d;
}
Blob trained_blob(const blob_data& d) {
  Blob n;
  initialize(n, 4);
  train::adam opt(n, {.lr = 1e-2});
  train::fit(execution::seq, n, opt, d.x, d.y, {.epochs = 5, .batch_size = 16, .seed = 2});
  return n;
}
}  // namespace

TEST_CASE("restructure: NI counts accepted iterations; pruned share 1 - (1-p)^NI; rejection undoes") {
  const auto tr = blobs(300, 1), te = blobs(150, 2);
  const Blob original = trained_blob(tr);
  {
    Blob n = original;
    restructure_options o;
    o.method = pruning_method::erk;
    o.p = 0.10;
    o.reference_accuracy = 0;  // every iteration is accepted
    o.max_iterations = 4;
    o.seed = 3;
    std::size_t calls = 0;
    o.on_iteration = [&](const restructure_iteration& it) { CHECK(it.iteration == ++calls); };
    const auto r = restructure(execution::seq, n, nullptr, tr.x, tr.y, te.x, te.y, o);
    CHECK(calls == 4);
    CHECK(r.ni == 4);
    CHECK(r.prunable == 16 * 4 + 8 * 16 + 3 * 8);
    CHECK(std::abs(r.weight_pruned - 100 * (1 - std::pow(0.9, 4))) <= 100 * 2.0 / double(r.prunable));
    // CR: the same pruned weights over every parameter (biases included)
    const double pruned = r.weight_pruned / 100 * double(r.prunable);
    CHECK(r.compression == doctest::Approx(100 * pruned / double(parameter_count(n))));
    std::size_t z = 0;
    for (auto s : parameter_spans(n))
      for (float v : s) z += v == 0.0f;
    CHECK(double(z) >= pruned - 1e-9);
  }
  {
    Blob n = original;
    restructure_options o;
    o.reference_accuracy = 101;  // nothing can be accepted
    o.tolerance = 0;
    const auto r = restructure(n, nullptr, tr.x, tr.y, te.x, te.y, o);
    CHECK(r.ni == 0);
    REQUIRE(r.iterations.size() == 1);
    CHECK(!r.iterations[0].accepted);
    const auto a = parameter_spans(original);
    const auto b = parameter_spans(n);
    bool same = true;
    for (std::size_t t = 0; t < a.size(); ++t)
      for (std::size_t i = 0; i < a[t].size(); ++i) same = same && a[t][i] == b[t][i];
    CHECK(same);
  }
  {
    Blob n = original;
    auto m = full_mask(n);
    m.keep[0][0] = m.keep[0][5] = 0;
    m.keep[1][2] = 0;
    const auto acc = parameter_accounting(original, m);
    CHECK(neuron_mask_present(original, m).frozen_count() == acc.removed);
    restructure_options o;
    o.reference_accuracy = 0;
    o.max_iterations = 2;
    o.p = 0.2;
    const auto r = restructure(execution::seq, n, &m, tr.x, tr.y, te.x, te.y, o);
    CHECK(r.start_compression == doctest::Approx(acc.compression));
    CHECK(r.prunable == 16 * 4 + 8 * 16 + 3 * 8 - (2 * 4 + 2 * 8) - (14 + 3));  // masked rows/columns are gone
    CHECK(r.compression > r.start_compression);
    bool masked_zero = true;  // a masked neuron stays masked: W is [in, out]
    for (std::size_t i = 0; i < 4; ++i) masked_zero = masked_zero && n.layer<0>().W(i, 0) == 0.0f && n.layer<0>().W(i, 5) == 0.0f;
    CHECK(masked_zero);
  }
  Blob n = original;
  restructure_options bad;
  bad.p = 1.5;
  CHECK_THROWS_AS(restructure(n, nullptr, tr.x, tr.y, te.x, te.y, bad), value_error);
}
