// NNSlicer: the test oracles of docs/specs/nnslicer.md#7-test-oracles (1-11), with exact expected tables.
// Conventions: nnlens' Dense stores W [in, out] (y = x W + b), so the spec's W1 (y = W x) is
// transposed, and a Dense synapse index is the flat index into W: i * out + j (input i -> unit j).
#include "nnslicer_test_util.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

using namespace slicetest;

namespace {

// The spec's worked-example network: h = W1 x, y = W2 h, W1 = [[1,1],[1,-1]], W2 = [[1,2]], no bias.
using ExNet = Sequential<Input<2>, Dense<2, double>, Dense<1, double>>;
ExNet example_net() {
  ExNet net;
  std::get<0>(net.layers) = dense_A<2>({{1, 1}, {1, -1}});
  std::get<1>(net.layers) = dense_A<1>({{1, 2}});
  return net;
}
profile example_profile(const ExNet& net) { return profile_network(net, batch1({{0, 0}, {2, 2}})); }

// Synapse indices of the first Dense (h_j <- x_i = i*2 + j) and the second (y <- h_i = i).
constexpr std::size_t h1x1 = 0, h2x1 = 1, h1x2 = 2, h2x2 = 3;

// A small ReLU conv net used by the property oracles.
using ConvNet = Sequential<Input<2, 6, 6>, Conv2D<3, 3, 1, 1, 1, 1, double>, ReLU, MaxPool2D<2>, Conv2D<4, 2, 1, 0, 1, 1, double>,
                           ReLU, Flatten, Dense<5, double>, ReLU, Dense<3, double>>;

using MlpNet = Sequential<Input<4>, Dense<6, double>, ReLU, Dense<5, double>, ReLU, Dense<3, double>>;

}  // namespace

TEST_CASE("oracle 1: worked example 1 (theta = 0.3 and 0.6)") {
  const auto net = example_net();
  const auto p = example_profile(net);
  REQUIRE(p.samples == 2);
  CHECK(p.mean(0) == std::vector<double>{1, 1});
  CHECK(p.mean(1) == std::vector<double>{2, 0});
  CHECK(p.mean(2) == std::vector<double>{2});

  const auto t = nnslicer(net, p, batch1({{2, 0}}), criterion::target(0), {.theta = 0.3});
  CHECK(t.samples == 1);
  CHECK(t.neurons[2] == I64{1});
  CHECK(t.neurons[1] == I64{0, 1});
  CHECK(t.neurons[0] == I64{1, 1});
  CHECK(t.synapses[1] == I64{0, 1});         // y <- h1 absent, y <- h2 = +1
  CHECK(t.synapses[0] == I64{0, 1, 0, 1});   // the W1 row of h1 is absent; h2 <- x1, h2 <- x2 = +1
  // the slice: neurons {y, h2, x1, x2}, synapses {y<-h2, h2<-x1, h2<-x2}
  const auto sz = slice_sizes(t);
  REQUIRE(sz.size() == 3);
  CHECK(sz[0].neurons_in_slice == 2);
  CHECK(sz[1].neurons_in_slice == 1);
  CHECK(sz[1].synapses_in_slice == 2);
  CHECK(sz[2].synapses_in_slice == 1);

  // θ = 0.6: at h2 the items x1, x2 tie (c = 1 each); the first in item order (x1) is dropped.
  const auto t6 = nnslicer(net, p, batch1({{2, 0}}), criterion::target(0), {.theta = 0.6});
  CHECK(t6.neurons[0] == I64{0, 1});
  CHECK(t6.synapses[0] == I64{0, 0, 0, 1});
  CHECK(t6.synapses[0][h2x2] == 1);
  CHECK(t6.neurons[1] == I64{0, 1});
}

TEST_CASE("oracle 2: worked example 2 (a negative contribution and cancellation)") {
  const auto net = example_net();
  const auto p = example_profile(net);
  const auto t = nnslicer(net, p, batch1({{1.5, -0.5}}), criterion::target(0), {.theta = 0.3});
  CHECK(t.neurons[2] == I64{1});
  CHECK(t.neurons[1] == I64{-1, 1});  // h1 opposes, h2 supports
  CHECK(t.synapses[1] == I64{-1, 1});
  CHECK(t.neurons[0] == I64{1, 0});   // x2: -1 + 1 = 0, not in the neuron slice
  CHECK(t.synapses[0][h1x1] == 1);
  CHECK(t.synapses[0][h2x1] == 0);    // dropped at h2 (0.5 / 2 = 0.25 <= θ)
  CHECK(t.synapses[0][h1x2] == -1);
  CHECK(t.synapses[0][h2x2] == 1);
  // x2's synapses are in the slice although x2 is not
  CHECK(slice_sizes(t)[0].neurons_in_slice == 1);
  CHECK(slice_sizes(t)[1].synapses_in_slice == 3);
}

TEST_CASE("oracle 3: zero reaction -- a sample equal to the profile gives only O") {
  SUBCASE("MLP") {
    MlpNet net;
    initialize(net, 3);
    const auto x = random_batch(1, shape(4), 11);
    for (auto g : {granularity::channel, granularity::element}) {
      const auto p = profile_network(net, x, {.grain = g});
      const auto t = nnslicer(net, p, x, criterion::fixed({0, 2}), {.theta = 0.0});
      for (std::size_t a = 0; a + 1 < t.neurons.size(); ++a) CHECK(nonzero(t.neurons[a]) == 0);
      CHECK(t.neurons.back() == I64{1, 0, 1});
      for (const auto& s : t.synapses) CHECK(nonzero(s) == 0);
    }
  }
  SUBCASE("conv net, channel and element") {
    ConvNet net;
    initialize(net, 5);
    const auto x = random_batch(1, shape(2, 6, 6), 12);
    for (auto g : {granularity::channel, granularity::element}) {
      const auto p = profile_network(net, x, {.grain = g});
      // the same sample three times: each contributes +1 to O and nothing else
      xt::xarray<double> x3 = xt::concatenate(xt::xtuple(x, x, x));
      const auto t = nnslicer(net, p, x3, criterion::target(1), {.theta = 0.3});
      for (std::size_t a = 0; a + 1 < t.neurons.size(); ++a) CHECK(nonzero(t.neurons[a]) == 0);
      CHECK(t.neurons.back() == I64{0, 3, 0});
      for (const auto& s : t.synapses) CHECK(nonzero(s) == 0);
    }
  }
}

TEST_CASE("oracle 4: linearity of the profile (dense, and conv without padding at element level)") {
  SUBCASE("dense") {
    Sequential<Input<3>, Dense<2, double>> net;
    initialize(net, 7);
    const auto X = random_batch(50, shape(3), 21);
    const auto p = profile_network(net, X);
    const auto xm = p.mean(0);
    const auto& d = std::get<0>(net.layers);
    for (std::size_t j = 0; j < 2; ++j) {
      double y = d.b(j);
      for (std::size_t i = 0; i < 3; ++i) y += d.W(i, j) * xm[i];
      CHECK(p.mean(1)[j] == doctest::Approx(y).epsilon(1e-12));
    }
    // Δy = Σ w Δx for one sample
    const auto xs = batch1({{0.3, -0.7, 0.2}});
    const auto ys = forward(net, xs);
    for (std::size_t j = 0; j < 2; ++j) {
      double dy = 0;
      for (std::size_t i = 0; i < 3; ++i) dy += d.W(i, j) * (xs(0, i) - xm[i]);
      CHECK(ys(0, j) - p.mean(1)[j] == doctest::Approx(dy).epsilon(1e-12));
    }
  }
  SUBCASE("conv, element granularity: the mean output is the conv of the mean input") {
    Sequential<Input<2, 5, 5>, Conv2D<3, 3, 1, 0, 1, 1, double>> net;
    initialize(net, 8);
    const auto X = random_batch(40, shape(2, 5, 5), 22);
    const auto p = profile_network(net, X, {.grain = granularity::element});
    const auto xm = p.mean(0);
    REQUIRE(xm.size() == 50);
    xt::xarray<double> xb = xt::xarray<double>::from_shape({1, 2, 5, 5});
    std::copy(xm.begin(), xm.end(), xb.begin());
    const auto ym = forward(net, xb);
    const auto pm = p.mean(1);
    REQUIRE(pm.size() == ym.size());
    for (std::size_t i = 0; i < pm.size(); ++i) CHECK(pm[i] == doctest::Approx(ym.data()[i]).epsilon(1e-12));
    // channel granularity: the channel means of the element means
    const auto pc = profile_network(net, X);
    for (std::size_t c = 0; c < 3; ++c) {
      double s = 0;
      for (std::size_t i = 0; i < 9; ++i) s += pm[c * 9 + i];
      CHECK(pc.mean(1)[c] == doctest::Approx(s / 9).epsilon(1e-12));
    }
  }
}

TEST_CASE("oracle 5: positive rescaling of a hidden ReLU unit leaves the tables unchanged") {
  MlpNet net;
  initialize(net, 13);
  const auto D = random_batch(64, shape(4), 31);
  const auto I = random_batch(20, shape(4), 32);
  const auto p = profile_network(net, D);
  const auto t = nnslicer(net, p, I, criterion::predicted(), {.theta = 0.3});
  for (double alpha : {4.0, 0.5, 2.0}) {  // powers of two: the rescaled values are exact
    auto net2 = net;
    auto& d0 = std::get<0>(net2.layers);
    auto& d1 = std::get<2>(net2.layers);
    for (std::size_t j : {1u, 4u}) {
      for (std::size_t i = 0; i < 4; ++i) d0.W(i, j) *= alpha;
      d0.b(j) *= alpha;
      for (std::size_t k = 0; k < 5; ++k) d1.W(j, k) /= alpha;
    }
    const auto p2 = profile_network(net2, D);
    const auto t2 = nnslicer(net2, p2, I, criterion::predicted(), {.theta = 0.3});
    CHECK(tables_equal(t, t2));
  }
  CHECK(nonzero(t.neurons[0]) > 0);  // the tables are not trivially empty
}

TEST_CASE("oracle 6: permuting hidden units permutes the tables") {
  MlpNet net;
  initialize(net, 17);
  const std::vector<std::size_t> pi{3, 0, 5, 1, 4, 2};  // unit j of net -> unit pi[j] of net2
  auto net2 = net;
  {
    const auto& a0 = std::get<0>(net.layers);
    const auto& a1 = std::get<2>(net.layers);
    auto& b0 = std::get<0>(net2.layers);
    auto& b1 = std::get<2>(net2.layers);
    for (std::size_t j = 0; j < 6; ++j) {
      for (std::size_t i = 0; i < 4; ++i) b0.W(i, pi[j]) = a0.W(i, j);
      b0.b(pi[j]) = a0.b(j);
      for (std::size_t k = 0; k < 5; ++k) b1.W(pi[j], k) = a1.W(j, k);
    }
  }
  const auto D = random_batch(64, shape(4), 41);
  const auto I = random_batch(25, shape(4), 42);
  const auto t = nnslicer(net, profile_network(net, D), I, criterion::predicted());
  const auto t2 = nnslicer(net2, profile_network(net2, D), I, criterion::predicted());
  for (std::size_t a : {1u, 2u})  // the first Dense's output and its ReLU
    for (std::size_t j = 0; j < 6; ++j) CHECK(t2.neurons[a][pi[j]] == t.neurons[a][j]);
  for (std::size_t a : {0u, 3u, 4u, 5u}) CHECK(t2.neurons[a] == t.neurons[a]);
  for (std::size_t j = 0; j < 6; ++j) {
    for (std::size_t i = 0; i < 4; ++i) CHECK(t2.synapses[0][i * 6 + pi[j]] == t.synapses[0][i * 6 + j]);
    for (std::size_t k = 0; k < 5; ++k) CHECK(t2.synapses[2][pi[j] * 5 + k] == t.synapses[2][j * 5 + k]);
  }
  CHECK(t2.synapses[4] == t.synapses[4]);
  CHECK(nonzero(t.synapses[0]) > 0);
}

TEST_CASE("oracle 7: additivity over sample sets; independent of threads and batch size") {
  ConvNet net;
  initialize(net, 19);
  const auto D = random_batch(60, shape(2, 6, 6), 51);
  const auto I = random_batch(23, shape(2, 6, 6), 52);
  for (auto g : {granularity::channel, granularity::element}) {
    CAPTURE(granularity_name(g));
    const auto p = profile_network(net, D, {.grain = g});
    const auto whole = nnslicer(execution::seq, net, p, I, criterion::predicted());
    CHECK(whole.samples == 23);
    const auto a = nnslicer(net, p, rows_of(I, 0, 9), criterion::predicted());
    const auto b = nnslicer(net, p, rows_of(I, 9, 23), criterion::predicted());
    CHECK(tables_equal(merge(a, b), whole));
    // per sample, summed
    contrib_table sum = nnslicer(net, p, rows_of(I, 0, 1), criterion::predicted());
    for (std::size_t i = 1; i < 23; ++i) sum = merge(sum, nnslicer(net, p, rows_of(I, i, i + 1), criterion::predicted()));
    CHECK(tables_equal(sum, whole));
    CHECK(tables_equal(nnslicer(execution::par, net, p, I, criterion::predicted()), whole));
    for (std::size_t bs : {1u, 4u, 7u, 100u})
      CHECK(tables_equal(nnslicer(net, p, I, criterion::predicted(), {.batch = bs}), whole));
    CHECK(nonzero(whole.synapses[0]) > 0);
  }
}

TEST_CASE("oracle 8: gates -- a closed ReLU passes nothing; element max-pool only at the arg-max") {
  SUBCASE("ReLU") {
    // h = ReLU(A x), y = h1 + h2 (+ a direct look at the pre-activation's table)
    Sequential<Input<2>, Dense<2, double>, ReLU, Dense<1, double>> net;
    std::get<0>(net.layers) = dense_A<2>({{1, 1}, {1, -1}});
    std::get<2>(net.layers) = dense_A<1>({{1, 1}});
    const auto p = profile_network(net, batch1({{0, 0}}));  // all means 0
    // ξ = (1, 2): pre = (3, -1): unit 2 closed.
    const auto t = nnslicer(net, p, batch1({{1, 2}}), criterion::target(0), {.theta = 0.0});
    // at y: items h1 = 3 (ReLU out), h2 = 0 (dropped: c = 0)
    CHECK(t.neurons[2] == I64{1, 0});
    CHECK(t.neurons[1] == I64{1, 0});        // the closed unit's pre-activation gets nothing
    CHECK(t.synapses[0] == I64{1, 0, 1, 0});  // only h1's row
    CHECK(t.neurons[0] == I64{1, 1});
    // force C != 0 on the closed unit: y = h1 - h2 with profile making Δh2 != 0
    Sequential<Input<2>, Dense<2, double>, ReLU, Dense<1, double>> net2 = net;
    std::get<2>(net2.layers) = dense_A<1>({{1, -1}});
    const auto p2 = profile_network(net2, batch1({{-1, -3}}));  // pre = (-4, 2): ReLU mean = (0, 2)
    const auto t2 = nnslicer(net2, p2, batch1({{1, 2}}), criterion::target(0), {.theta = 0.0});
    CHECK(t2.neurons[2][1] != 0);  // the ReLU output of unit 2 reacts (0 - 2) and is in the slice
    CHECK(t2.neurons[1][1] == 0);  // ... but its gate is closed (pre-activation -1 <= 0)
    CHECK(t2.synapses[0][1] == 0);
    CHECK(t2.synapses[0][3] == 0);
  }
  SUBCASE("element-level max-pool") {
    Sequential<Input<1, 4, 4>, MaxPool2D<2>, Flatten, Dense<1, double>> net;
    std::get<2>(net.layers) = dense_A<1>({{1, -1, 2, 1}});
    const auto p = profile_network(net, xt::xarray<double>(xt::zeros<double>({1, 1, 4, 4})), {.grain = granularity::element});
    std::vector<double> img(16);
    for (std::size_t i = 0; i < 16; ++i) img[i] = double((i * 7) % 16) / 4 + 0.25;  // distinct, positive
    const auto t = nnslicer(net, p, batch({img}, shape(1, 4, 4)), criterion::target(0), {.theta = 0.0});
    // window arg-maxes
    std::vector<std::size_t> args;
    for (std::size_t oh = 0; oh < 2; ++oh)
      for (std::size_t ow = 0; ow < 2; ++ow) {
        std::size_t best = 0;
        double bv = -1;
        for (std::size_t r = 0; r < 2; ++r)
          for (std::size_t q = 0; q < 2; ++q) {
            const std::size_t i = (2 * oh + r) * 4 + 2 * ow + q;
            if (img[i] > bv) bv = img[i], best = i;
          }
        args.push_back(best);
      }
    // pooled Δ > 0 everywhere; y's items: W_j * Δpool_j, signs (+,-,+,+); Δy > 0
    const std::int64_t expect[4] = {1, -1, 1, 1};
    for (std::size_t i = 0; i < 16; ++i) {
      const auto it = std::find(args.begin(), args.end(), i);
      CAPTURE(i);
      if (it == args.end())
        CHECK(t.neurons[0][i] == 0);
      else
        CHECK(t.neurons[0][i] == expect[it - args.begin()]);
    }
  }
}

TEST_CASE("oracle 9: θ monotonicity under first_violation with same-signed items") {
  // y = Σ w_i x_i with w > 0, Δx > 0: every item c_i > 0
  constexpr std::size_t K = 12;
  Sequential<Input<K>, Dense<1, double>> net;
  std::vector<double> w(K), xs(K);
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> u(0.1, 2.0);
  for (auto& v : w) v = u(rng);
  for (auto& v : xs) v = u(rng);
  std::get<0>(net.layers) = dense_A<1>({w});
  const auto p = profile_network(net, batch1({std::vector<double>(K, 0.0)}));
  std::vector<std::size_t> prev_kept;
  std::size_t prev_count = K + 1;
  for (double theta : {0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9, 0.99, 1.5}) {
    CAPTURE(theta);
    const auto t = nnslicer(net, p, batch1({xs}), criterion::target(0), {.theta = theta, .cutoff = theta_cutoff::first_violation});
    std::vector<std::size_t> kept;
    for (std::size_t i = 0; i < K; ++i)
      if (t.synapses[0][i] != 0) {
        CHECK(t.synapses[0][i] == 1);
        kept.push_back(i);
      }
    // reference: drop the smallest items while their sum stays <= θ Σ c (at least one kept)
    std::vector<std::size_t> ord(K);
    std::iota(ord.begin(), ord.end(), std::size_t(0));
    std::vector<double> c(K);
    double tot = 0;
    for (std::size_t i = 0; i < K; ++i) tot += c[i] = w[i] * xs[i];
    std::stable_sort(ord.begin(), ord.end(), [&](auto a, auto b) { return c[a] < c[b]; });
    double s = 0;
    std::size_t drop = 0;
    while (drop < K && s + c[ord[drop]] <= theta * tot) s += c[ord[drop++]];
    drop = std::min(drop, K - 1);
    CHECK(kept.size() == K - drop);
    CHECK(kept.size() <= prev_count);
    if (prev_count != K + 1)
      for (auto i : kept) CHECK(std::find(prev_kept.begin(), prev_kept.end(), i) != prev_kept.end());
    prev_kept = kept;
    prev_count = kept.size();
  }
  CHECK(prev_count == 1);  // θ >= 1: never drop everything
}

TEST_CASE("oracle 10: pruning with apply_slice (keep = 1 - r)") {
  ConvNet net;
  initialize(net, 23);
  const auto D = random_batch(40, shape(2, 6, 6), 61);
  const auto I = random_batch(12, shape(2, 6, 6), 62);
  const auto p = profile_network(net, D);
  const auto t = nnslicer(net, p, I, criterion::target(2));
  const op_graph<double> g(net);
  auto weights_of = [](const auto& n) {
    std::vector<std::vector<double>> w;
    const op_graph<double> gg(n);
    for (const auto& nd : gg.nodes()) w.emplace_back(nd.weights.begin(), nd.weights.end());
    return w;
  };
  const auto w0 = weights_of(net);

  SUBCASE("r = 0 (keep just below 1): bit-identical") {
    const auto r0 = apply_slice(net, t, std::nextafter(1.0, 0.0));
    auto net_copy = net;
    const auto a = parameter_spans(net_copy);
    auto net_r0 = r0;
    const auto b = parameter_spans(net_r0);
    REQUIRE(a.size() == b.size());
    for (std::size_t k = 0; k < a.size(); ++k) {
      REQUIRE(a[k].size() == b[k].size());
      CHECK(std::memcmp(a[k].data(), b[k].data(), a[k].size() * sizeof(double)) == 0);
    }
  }
  SUBCASE("keep = 1: the slice itself (CONTRIB != 0)") {
    const auto s = apply_slice(net, t, 1.0);
    const auto ws = weights_of(s);
    for (std::size_t k = 0; k < g.nodes().size(); ++k)
      for (std::size_t i = 0; i < t.synapses[k].size(); ++i) {
        const bool zero = ws[k][i] == 0, expect_zero = t.synapses[k][i] == 0 || w0[k][i] == 0;
        CHECK(zero == expect_zero);
      }
  }
  SUBCASE("r = 1 (keep = 0): every weighted layer is zero") {
    const auto z = apply_slice(net, t, 0.0);
    const auto wz = weights_of(z);
    std::size_t layers = 0;
    for (std::size_t k = 0; k < g.nodes().size(); ++k)
      if (g.nodes()[k].synapses) {
        ++layers;
        for (double v : wz[k]) CHECK(v == 0.0);
      }
    CHECK(layers == 4);
  }
  SUBCASE("a neuron with no synapse left loses its bias (zero_bias), or keeps it (keep_bias)") {
    auto biases_of = [](const auto& n) {
      std::vector<std::vector<double>> b;
      const op_graph<double> gg(n);
      for (const auto& nd : gg.nodes()) b.emplace_back(nd.bias.begin(), nd.bias.end());
      return b;
    };
    const auto b0 = biases_of(net);
    std::size_t biased = 0;
    for (std::size_t k = 0; k < g.nodes().size(); ++k) biased += !b0[k].empty();
    CHECK(biased == 4);  // two Conv2D (per channel) and two Dense (per neuron)
    std::size_t dead_total = 0;
    for (double keep : {1.0, 0.5, 0.25, 0.0625, 0.0}) {
      CAPTURE(keep);
      const auto m = synapse_mask(net, t, keep);
      const auto bz = biases_of(apply_slice(net, t, keep));
      const auto bk = biases_of(apply_slice(net, t, keep, dead_neurons::keep_bias));
      for (std::size_t k = 0; k < g.nodes().size(); ++k) {
        CHECK(bk[k] == b0[k]);
        const std::size_t nb = b0[k].size();
        if (nb == 0) continue;
        const std::size_t per = m[k].size() / nb;  // weights [out][in...] for Conv2D; Dense is [in][out]
        const bool dense = g.nodes()[k].type == "Dense";
        for (std::size_t n = 0; n < nb; ++n) {
          bool dead = true;
          for (std::size_t q = 0; q < per; ++q) dead = dead && !m[k][dense ? q * nb + n : n * per + q];
          dead_total += dead;
          CHECK(bz[k][n] == (dead ? 0.0 : b0[k][n]));
        }
      }
    }
    CHECK(dead_total > 0);
  }
  SUBCASE("per layer exactly floor(r S) pruned, the smallest |CONTRIB| first") {
    for (double r : {0.25, 0.5, 0.75, 0.125, 0.9375}) {  // exact in binary: keep = 1 - r is exact too
      CAPTURE(r);
      const auto m = synapse_mask(net, t, 1.0 - r);
      const auto pr = apply_slice(net, t, 1.0 - r);
      const auto wp = weights_of(pr);
      for (std::size_t k = 0; k < g.nodes().size(); ++k) {
        const std::size_t S = t.synapses[k].size();
        REQUIRE(m[k].size() == S);
        const std::size_t pruned = std::size_t(std::count(m[k].begin(), m[k].end(), std::uint8_t(0)));
        CHECK(pruned == std::size_t(std::floor(r * double(S))));
        std::int64_t max_pruned = -1, min_kept = std::numeric_limits<std::int64_t>::max();
        for (std::size_t i = 0; i < S; ++i) {
          const auto a = std::llabs(t.synapses[k][i]);
          if (m[k][i]) min_kept = std::min<std::int64_t>(min_kept, a);
          else max_pruned = std::max<std::int64_t>(max_pruned, a);
          CHECK(wp[k][i] == (m[k][i] ? w0[k][i] : 0.0));
        }
        if (S) {
          CHECK(max_pruned <= min_kept);
        }
      }
    }
  }
}

TEST_CASE("pruning: ratios inexact in binary (0.1, 0.2, 0.45) prune exactly floor(r S) per layer") {
  // keep = 1 - r, then 1 - keep, is just below r for r = 0.1, 0.2, 0.45: floor((1 - keep) S)
  // pruned one synapse fewer than floor(r S) whenever r S is a whole number (fixed in 3efe331).
  // The layers have S = 100, 60, 120 synapses: r S is whole for all three ratios and every layer,
  // so the old formula would fail every check below.  The expected count is integer arithmetic.
  using Net = Sequential<Input<10>, Dense<10, double>, ReLU, Dense<6, double>, ReLU, Dense<20, double>>;
  Net net;
  initialize(net, 17);
  const auto p = profile_network(net, random_batch(50, shape(10), 91));
  const auto t = nnslicer(net, p, random_batch(25, shape(10), 92), criterion::predicted());
  const op_graph<double> g(net);
  std::vector<std::size_t> sizes;
  for (const auto& syn : t.synapses)
    if (!syn.empty()) sizes.push_back(syn.size());
  REQUIRE(sizes == std::vector<std::size_t>{100, 60, 120});
  for (int percent : {10, 20, 45}) {
    const double r = percent / 100.0;
    // the caller's keep (1 - r, computed) and the literal keep (0.9, 0.8, 0.55): both round the same
    for (double keep : {1.0 - r, (100 - percent) / 100.0}) {
      CAPTURE(percent);
      CAPTURE(keep);
      CHECK(1.0 - keep < r);  // the inexactness the formula has to absorb is really there
      const auto m = synapse_mask(net, t, keep);
      const auto pruned_net = apply_slice(net, t, keep);
      const op_graph<double> gp(pruned_net);
      for (std::size_t k = 0; k < g.nodes().size(); ++k) {
        const std::size_t S = t.synapses[k].size();
        if (!S) continue;
        CAPTURE(S);
        const std::size_t pruned = std::size_t(std::count(m[k].begin(), m[k].end(), std::uint8_t(0)));
        CHECK(pruned == std::size_t(percent) * S / 100);
        std::size_t differ = 0;  // apply_slice zeroes exactly the mask's pruned synapses
        for (std::size_t i = 0; i < S; ++i)
          differ += gp.nodes()[k].weights[i] != (m[k][i] ? g.nodes()[k].weights[i] : 0.0);
        CHECK(differ == 0);
        std::int64_t max_pruned = -1, min_kept = std::numeric_limits<std::int64_t>::max();
        for (std::size_t i = 0; i < S; ++i) {
          const auto a = std::llabs(t.synapses[k][i]);
          if (m[k][i]) min_kept = std::min<std::int64_t>(min_kept, a);
          else max_pruned = std::max<std::int64_t>(max_pruned, a);
        }
        CHECK(max_pruned <= min_kept);
      }
    }
  }
}

TEST_CASE("pruning: ties in |CONTRIB| are broken by |w|, the larger kept") {
  ConvNet net;
  initialize(net, 31);
  const auto x = random_batch(1, shape(2, 6, 6), 63);
  // a zero reaction: every synapse has CONTRIB 0, so the order is by |w| alone
  const auto t = nnslicer(net, profile_network(net, x), x, criterion::target(0));
  const op_graph<double> g(net);
  for (double keep : {0.5, 0.25}) {
    const auto m = synapse_mask(net, t, keep);
    for (std::size_t k = 0; k < g.nodes().size(); ++k) {
      const auto w = g.nodes()[k].weights;
      if (!g.nodes()[k].synapses) continue;
      double min_kept = 1e300, max_pruned = -1;
      std::size_t kept = 0;
      for (std::size_t i = 0; i < m[k].size(); ++i) {
        CHECK(t.synapses[k][i] == 0);
        if (m[k][i]) min_kept = std::min(min_kept, std::abs(w[i])), ++kept;
        else max_pruned = std::max(max_pruned, std::abs(w[i]));
      }
      CHECK(max_pruned <= min_kept);
      CHECK(kept == m[k].size() - std::size_t(std::floor((1 - keep) * double(m[k].size()))));
    }
  }
}

TEST_CASE("oracle 11: the output neurons in O get +1 per sample; nothing reaches other outputs") {
  MlpNet net;
  initialize(net, 29);
  const auto D = random_batch(30, shape(4), 71);
  const auto I = random_batch(9, shape(4), 72);
  const auto p = profile_network(net, D);
  for (bool abs_sum : {false, true}) {
    const auto t = nnslicer(net, p, I, criterion::fixed({0, 2}), {.abs_sum = abs_sum});
    CHECK(t.neurons.back() == I64{9, 0, 9});
  }
  // predicted: one +1 per sample at the arg-max logit
  const auto y = forward(net, I);
  I64 expect(3, 0);
  for (std::size_t i = 0; i < 9; ++i) {
    std::size_t b = 0;
    for (std::size_t k = 1; k < 3; ++k)
      if (y(i, k) > y(i, b)) b = k;
    ++expect[b];
  }
  CHECK(nnslicer(net, p, I, criterion::predicted()).neurons.back() == expect);
}

TEST_CASE("predicted() on a rank-3 output at channel granularity: the channel of largest mean") {
  // A 1x1 identity convolution: the output is the input, 3 channels of 2x2.  Sample 0's channel 1
  // holds the largest element (10) but a negative mean; channel 2 has the largest mean (2), and
  // channel 0 is neither.  The predicted class at channel granularity is channel 2: not channel 0,
  // and not the channel of the largest raw element (docs/specs/nnslicer.md#21-granularity: a conv neuron's value
  // is its spatial mean).
  using Net = Sequential<Input<3, 2, 2>, Conv2D<3, 1, 1, 0, 1, 1, double>>;
  Net net;
  auto& c = std::get<0>(net.layers);
  c.W = xt::zeros<double>({3, 3, 1, 1});
  for (std::size_t k = 0; k < 3; ++k) c.W(k, k, 0, 0) = 1.0;
  c.b = xt::zeros<double>({3});
  const auto x = batch({{0, 0, 0, 0, /**/ 10, -10, -10, 0, /**/ 2, 2, 2, 2},
                        {3, 3, 3, -1, /**/ 9, 0, 0, 0, /**/ -5, 0, 0, 0},  // means 2, 2.25, -1.25; max element 9 (ch 1)
                        {0, 0, 0, 8, /**/ 1, 1, 1, 1, /**/ 1.5, 1.5, 1.5, 1.5}},  // means 2, 1, 1.5; max 8 (ch 0)
                       shape(3, 2, 2));
  const auto p = profile_network(net, random_batch(20, shape(3, 2, 2), 5));
  const auto t = nnslicer(net, p, x, criterion::predicted());
  // sample 0 -> channel 2, sample 1 -> channel 1, sample 2 -> channel 0
  CHECK(t.neurons.back() == I64{1, 1, 1});
  for (std::size_t i = 0; i < 3; ++i) {
    CAPTURE(i);
    const auto ti = nnslicer(net, p, rows_of(x, i, i + 1), criterion::predicted());
    I64 want(3, 0);
    want[2 - i] = 1;
    CHECK(ti.neurons.back() == want);
    CHECK(tables_equal(ti, nnslicer(net, p, rows_of(x, i, i + 1), criterion::target(2 - i))));
  }
  // at element granularity the neurons are the elements: the largest element is predicted
  const auto pe = profile_network(net, random_batch(20, shape(3, 2, 2), 5), {.grain = granularity::element});
  const auto te = nnslicer(net, pe, rows_of(x, 0, 1), criterion::predicted());
  I64 want_e(12, 0);
  want_e[4] = 1;  // channel 1, position (0, 0): 10
  CHECK(te.neurons.back() == want_e);
}

TEST_CASE("predicted() on a rank-3 output: one +1 per sample at the largest channel mean of forward()") {
  // a random conv net ending in a convolution (no Flatten): the expected class of each sample is
  // computed here from forward()'s output, independently of the slicer's graph
  using Net = Sequential<Input<2, 6, 6>, Conv2D<4, 3, 1, 1, 1, 1, double>, ReLU, Conv2D<5, 3, 1, 0, 1, 1, double>>;
  Net net;
  initialize(net, 41);
  const auto D = random_batch(40, shape(2, 6, 6), 81);
  const auto I = random_batch(30, shape(2, 6, 6), 82);
  const auto p = profile_network(net, D);
  const auto y = forward(net, I);  // [30, 5, 4, 4]
  I64 expect(5, 0);
  std::size_t differ_from_raw = 0;
  for (std::size_t i = 0; i < 30; ++i) {
    std::size_t best = 0, raw = 0;
    double best_mean = -1e300, raw_max = -1e300;
    for (std::size_t k = 0; k < 5; ++k) {
      double s = 0;
      for (std::size_t h = 0; h < 4; ++h)
        for (std::size_t w = 0; w < 4; ++w) {
          s += y(i, k, h, w);
          if (y(i, k, h, w) > raw_max) raw_max = y(i, k, h, w), raw = k;
        }
      if (s / 16 > best_mean) best_mean = s / 16, best = k;
    }
    ++expect[best];
    differ_from_raw += best != raw;
  }
  CHECK(differ_from_raw > 0);              // the largest raw element is not always in the predicted channel
  CHECK(expect[0] < 30);                   // and the predicted channel is not always 0
  CHECK(nnslicer(net, p, I, criterion::predicted()).neurons.back() == expect);
  CHECK(nnslicer(execution::par, net, p, I, criterion::predicted()).neurons.back() == expect);
}
