// LRP (coverage/lrp.hpp, core/relevance.hpp): the oracles of docs/specs/deepimportance.md#6-testable-properties-and-oracles (1-4) and
// the rules of §2.2 on tiny hand-made networks, random networks, residual blocks and BatchNorm.
#include <doctest/doctest.h>

#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include <nnlens/coverage/lrp.hpp>
#include <nnlens/nnlens.hpp>

using namespace nnlens;

namespace {

xt::xarray<double> rand_batch(std::size_t n, shape s, std::uint64_t seed, double lo = -1, double hi = 1) {
  std::vector<std::size_t> sh{n};
  for (std::size_t i = 0; i < s.rank; ++i) sh.push_back(s[i]);
  xt::xarray<double> x = xt::xarray<double>::from_shape(sh);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  for (auto& v : x) v = u(rng);
  return x;
}

/// Sets every bias of a network to zero (Dense, Conv2D: the second parameter tensor).
template <class Net>
void zero_biases(Net& net) {
  for_each_layer(net, [&](auto& l, auto, shape, shape) {
    using L = std::decay_t<decltype(l)>;
    if constexpr (layer_traits<L>::name == "Dense" || layer_traits<L>::name == "Conv2D") l.b.fill(0);
  });
}

double row_sum(const xt::xarray<double>& R, std::size_t r) {
  const std::size_t s = R.size() / R.shape()[0];
  return std::accumulate(R.data() + r * s, R.data() + (r + 1) * s, 0.0);
}

std::vector<double> logits_max(const auto& net, const xt::xarray<double>& X) {
  const auto y = forward(net, X);
  const std::size_t n = X.shape()[0], c = y.size() / n;
  std::vector<double> m(n);
  for (std::size_t i = 0; i < n; ++i) m[i] = *std::max_element(y.data() + i * c, y.data() + (i + 1) * c);
  return m;
}

using ConvNet = Sequential<Input<2, 8, 8>, Conv2D<4, 3, 1, 1, 1, 1, double>, ReLU, MaxPool2D<2>, Conv2D<5, 3, 1, 0, 1, 1, double>, ReLU,
                           AvgPool2D<2>, Flatten, Dense<6, double>, ReLU, Dropout, Dense<3, double>>;

}  // namespace

TEST_CASE("oracle 1: the dense hand example (ε-rule, bias in z, bias redistribution)") {
  using Net = Sequential<Input<2>, Dense<1, double>>;
  Net net;
  auto& d = std::get<0>(net.layers);
  d.W = tensor<double, 2>::from_shape({2, 1});
  d.W(0, 0) = 1, d.W(1, 0) = 1;
  d.b = tensor<double, 1>::from_shape({1});
  xt::xarray<double> x = {{1.0, 2.0}};
  SUBCASE("b = 0: z = 3, R = [1, 2]") {
    d.b(0) = 0;
    const auto R = relevance(net, x);
    CHECK(R(0, 0) == doctest::Approx(1.0));
    CHECK(R(0, 1) == doctest::Approx(2.0));
  }
  SUBCASE("b = 1: the reference rule loses the bias share (sum 3 of 4)") {
    d.b(0) = 1;
    const auto R = relevance(net, x);
    CHECK(R(0, 0) == doctest::Approx(1.0));
    CHECK(R(0, 1) == doctest::Approx(2.0));
  }
  SUBCASE("b = 1 with bias redistribution: [1.5, 2.5] (sum 4)") {
    d.b(0) = 1;
    lrp_options o;
    o.bias_redistribution = true;
    const auto R = relevance(net, x, lrp_input, o);
    CHECK(R(0, 0) == doctest::Approx(1.5));
    CHECK(R(0, 1) == doctest::Approx(2.5));
  }
  SUBCASE("z+ and alpha-beta on mixed signs") {
    // x = [1, 2], w = [2, -1], b = 0.5: z = 0.5; z+ = {2}, z- = {-2}
    d.W(0, 0) = 2, d.W(1, 0) = -1, d.b(0) = 0.5;
    lrp_options o;
    o.rule = lrp_rule::zplus;
    auto R = relevance(net, x, lrp_input, o);
    CHECK(R(0, 0) == doctest::Approx(0.5));  // all of R = z = 0.5 to the positive contribution
    CHECK(R(0, 1) == doctest::Approx(0.0));
    o.rule = lrp_rule::alpha_beta;  // α = 3, β = -2: pos denominator 2 + 0.5, neg denominator -2
    R = relevance(net, x, lrp_input, o);
    CHECK(R(0, 0) == doctest::Approx(3 * 2 / 2.5 * 0.5));
    CHECK(R(0, 1) == doctest::Approx(-2 * (-2.0) / (-2.0) * 0.5));
  }
}

TEST_CASE("oracle 2: conservation in bias-free networks, at every layer") {
  ConvNet net;
  initialize(net, 5);
  zero_biases(net);
  const auto X = rand_batch(12, shape(2, 8, 8), 7, 0, 1);
  const auto z = logits_max(net, X);
  for (std::size_t layer = 0; layer + 1 < layer_count(net); ++layer) {
    CAPTURE(layer);
    const auto R = relevance(net, X, layer);
    for (std::size_t r = 0; r < 12; ++r) CHECK(row_sum(R, r) == doctest::Approx(z[r]).epsilon(1e-9));
  }
  const auto R = relevance(execution::par, net, X);  // the input, in parallel
  for (std::size_t r = 0; r < 12; ++r) CHECK(row_sum(R, r) == doctest::Approx(z[r]).epsilon(1e-9));
}

TEST_CASE("conservation with biases: exact with bias redistribution, lossy without") {
  ConvNet net;
  initialize(net, 9);
  for_each_layer(net, [&](auto& l, auto, shape, shape) {
    using L = std::decay_t<decltype(l)>;
    if constexpr (layer_traits<L>::name == "Dense" || layer_traits<L>::name == "Conv2D")
      for (auto& b : l.b) b = 0.05;
  });
  const auto X = rand_batch(10, shape(2, 8, 8), 8, 0, 1);
  const auto z = logits_max(net, X);
  lrp_options o;
  o.bias_redistribution = true;
  const auto R = relevance(net, X, lrp_input, o);
  const auto R0 = relevance(net, X);
  std::size_t differ = 0;
  for (std::size_t r = 0; r < 10; ++r) {
    CHECK(row_sum(R, r) == doctest::Approx(z[r]).epsilon(1e-9));
    differ += std::abs(row_sum(R0, r) - z[r]) > 1e-6 * std::abs(z[r]);
  }
  CHECK(differ > 0);
}

TEST_CASE("oracle 3: LRP-0 equals gradient x input for bias-free ReLU networks") {
  ConvNet net;
  initialize(net, 11);
  zero_biases(net);
  const auto X = rand_batch(6, shape(2, 8, 8), 12, 0, 1);
  lrp_options o;
  o.epsilon = 0;
  const auto R = relevance(net, X, lrp_input, o);
  trace<double> tr;
  forward_trace(net, 6, X.data(), tr);
  const auto out = tr.output();
  std::vector<double> dy(out.size(), 0.0), dx(X.size());
  for (std::size_t r = 0; r < 6; ++r) {
    const auto b = out.begin() + std::ptrdiff_t(r * 3);
    dy[r * 3 + std::size_t(std::max_element(b, b + 3) - b)] = 1;
  }
  backward(net, tr, dy.data(), static_cast<ConvNet*>(nullptr), dx.data());
  double worst = 0;
  for (std::size_t i = 0; i < X.size(); ++i) worst = std::max(worst, std::abs(R.data()[i] - X.data()[i] * dx[i]));
  CHECK(worst < 1e-12);
}

TEST_CASE("oracle 4: max-pool winner-take-all with ties; pass-through layers") {
  using Net = Sequential<Input<1, 2, 4>, MaxPool2D<2>, Flatten, Dense<1, double>>;
  Net net;
  auto& d = std::get<2>(net.layers);
  d.W = tensor<double, 2>::from_shape({2, 1});
  d.W(0, 0) = 1, d.W(1, 0) = 1;
  d.b = tensor<double, 1>::from_shape({1});
  d.b(0) = 0;
  // window 0: {1, 3, 3, 0} -> tie of two 3s; window 1: {5, 1, 2, 2} -> 5
  xt::xarray<double> x = xt::xarray<double>::from_shape({1, 1, 2, 4});
  const double v[8] = {1, 3, 5, 1, 3, 0, 2, 2};
  std::copy(v, v + 8, x.data());
  const auto R = relevance(net, x);  // z = 3 + 5 = 8; R(window 0) = 3 -> 1.5 each; R(window 1) = 5
  const double expect[8] = {0, 1.5, 5, 0, 1.5, 0, 0, 0};
  for (std::size_t i = 0; i < 8; ++i) CHECK(R.data()[i] == doctest::Approx(expect[i]));
  // after the pool (flatten's input): the relevance of each pooled value is its contribution
  const auto Rp = relevance(net, x, 0);
  CHECK(Rp.data()[0] == doctest::Approx(3.0));
  CHECK(Rp.data()[1] == doctest::Approx(5.0));
  const auto Rf = relevance(net, x, 1);  // Flatten passes it through
  CHECK(Rf.data()[0] == doctest::Approx(3.0));
  CHECK(Rf.data()[1] == doctest::Approx(5.0));
}

TEST_CASE("the rules the host and thrust share equal the generic affine rule, every LRP rule") {
  // kernels::mean_pool_relevance / max_pool_relevance and detail::elementwise_relevance are what the
  // host's relevance rules and the thrust kernels both call (so host-against-device checks cannot
  // see a mistake in them): here each is checked against an independent formulation, the generic
  // detail::affine_relevance with the window walked explicitly, or a winner list, per rule
  std::mt19937_64 rng(41);
  std::uniform_real_distribution<double> u(-1, 1);
  const std::size_t C = 2, H = 5, W = 6;
  pool_geometry g;
  g.kh = 3, g.kw = 2, g.stride_h = 2, g.stride_w = 2, g.pad_top = 1, g.pad_left = 0, g.pad_bottom = 1, g.pad_right = 1;
  g.count_include_pad = false;
  const std::size_t OH = (H + g.pad_top + g.pad_bottom - g.kh) / g.stride_h + 1,
                    OW = (W + g.pad_left + g.pad_right - g.kw) / g.stride_w + 1;
  const shape in(C, H, W), out(C, OH, OW);
  const kernels::window_dims d = kernels::window_of(g, in, out);
  std::vector<double> x(in.size()), z(out.size()), R(out.size()), got(in.size()), want(in.size());
  for (auto& v : x) v = u(rng);
  for (std::size_t k = 0; k < R.size(); ++k) R[k] = k % 5 == 3 ? 0.0 : u(rng);  // some outputs without relevance
  for (std::size_t c = 0; c < C; ++c)
    for (std::size_t o = 0; o < OH * OW; ++o) z[c * OH * OW + o] = kernels::pool_output<double, false>(d, x.data() + c * H * W, o / OW, o % OW);
  std::vector<lrp_options> rules(4);
  rules[1].bias_redistribution = true;
  rules[2].rule = lrp_rule::zplus;
  rules[3].rule = lrp_rule::alpha_beta;
  for (const lrp_options& o : rules) {
    CAPTURE(int(o.rule));
    CAPTURE(o.bias_redistribution);
    relevance_args a;
    a.in = in, a.out = out, a.x = x.data(), a.z = z.data(), a.r_out = R.data(), a.r_in = want.data(), a.o = &o;
    detail::affine_relevance(a, OH * OW, [](std::size_t) { return 0.0; }, [&](std::size_t k, auto&& f) {
      const std::size_t c = k / (OH * OW), oh = k % (OH * OW) / OW, ow = k % OW;
      const auto r = kernels::pool_rows(d, oh), q = kernels::pool_cols(d, ow);
      for (std::size_t h = r.lo; h < r.hi; ++h)
        for (std::size_t w = q.lo; w < q.hi; ++w) f(c * H * W + h * W + w, 1.0 / double(r.count * q.count));
    });
    for (std::size_t c = 0; c < C; ++c)
      kernels::mean_pool_relevance(d, x.data() + c * H * W, z.data() + c * OH * OW, R.data() + c * OH * OW, got.data() + c * H * W, o);
    double mass = 0;
    for (std::size_t i = 0; i < in.size(); ++i) {
      CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-12));
      mass += std::abs(got[i]);
    }
    CHECK(mass > 0.1);  // the windows did hand relevance down
    // element-wise affine (one input per output, a bias): R_in = elementwise_relevance per element
    std::vector<double> wk(in.size()), bk(in.size()), zz(in.size()), Rk(in.size()), e_want(in.size());
    for (std::size_t i = 0; i < in.size(); ++i) wk[i] = u(rng), bk[i] = u(rng), zz[i] = x[i] * wk[i] + bk[i], Rk[i] = u(rng);
    relevance_args b;
    b.in = b.out = in, b.x = x.data(), b.z = zz.data(), b.r_out = Rk.data(), b.r_in = e_want.data(), b.o = &o;
    detail::affine_relevance(b, 1, [&](std::size_t k) { return bk[k]; }, [&](std::size_t k, auto&& f) { f(k, wk[k]); });
    for (std::size_t i = 0; i < in.size(); ++i)
      CHECK(detail::elementwise_relevance(o, x[i], zz[i], Rk[i], wk[i], bk[i]) == doctest::Approx(e_want[i]).epsilon(1e-12));
  }
  // max pooling with ties (values on a grid of 0.25, so windows tie often): each output's R split
  // equally among the positions holding its window's maximum, windows adding up
  for (auto& v : x) v = std::round(u(rng) * 4) / 4;
  pool_geometry mg;
  mg.kh = mg.kw = 3, mg.stride_h = mg.stride_w = 2, mg.pad_top = mg.pad_left = mg.pad_bottom = mg.pad_right = 1;
  const std::size_t MH = (H + 2 - 3) / 2 + 1, MW = (W + 2 - 3) / 2 + 1;
  const kernels::window_dims md = kernels::window_of(mg, in, shape(C, MH, MW));
  std::vector<double> MR(C * MH * MW), mwant(in.size(), 0.0);
  for (auto& v : MR) v = u(rng);
  std::size_t tied = 0;
  for (std::size_t c = 0; c < C; ++c)
    for (std::size_t k = 0; k < MH * MW; ++k) {
      const auto r = kernels::pool_rows(md, k / MW), q = kernels::pool_cols(md, k % MW);
      std::vector<std::size_t> win;
      double best = -INFINITY;
      for (std::size_t h = r.lo; h < r.hi; ++h)
        for (std::size_t w = q.lo; w < q.hi; ++w) {
          const std::size_t j = c * H * W + h * W + w;
          if (x[j] > best) best = x[j], win.assign(1, j);
          else if (x[j] == best) win.push_back(j);
        }
      tied += win.size() > 1;
      for (std::size_t j : win) mwant[j] += MR[c * MH * MW + k] / double(win.size());
    }
  CHECK(tied > 0);  // the test does exercise ties
  for (std::size_t c = 0; c < C; ++c)
    kernels::max_pool_relevance(md, x.data() + c * H * W, MR.data() + c * MH * MW, got.data() + c * H * W);
  for (std::size_t i = 0; i < in.size(); ++i) CHECK(got[i] == doctest::Approx(mwant[i]).epsilon(1e-12));
}

TEST_CASE("relevance from a given class; bad input") {
  ConvNet net;
  initialize(net, 3);
  const auto X = rand_batch(4, shape(2, 8, 8), 4, 0, 1);
  const std::vector<std::size_t> cls{2, 2, 2, 2};
  const auto R = relevance(net, X, 8, {}, cls);
  CHECK(R.shape()[1] == 6);
  const std::vector<std::size_t> bad{3, 0, 0, 0};
  CHECK_THROWS_AS(relevance(net, X, 8, {}, bad), value_error);
  CHECK_THROWS_AS(relevance(net, X, 99), value_error);
  const auto Y = rand_batch(2, shape(2, 8, 7), 4);
  CHECK_THROWS_AS(relevance(net, Y), shape_error);
  auto Z = X;
  Z(1, 0, 0, 0) = std::nan("");
  CHECK_THROWS_AS(relevance(net, Z), error);
}

TEST_CASE("residual blocks: the addition splits relevance in proportion; exact conservation") {
  using Net = Sequential<Input<2, 6, 6>, Conv2D<3, 3, 1, 1, 1, 1, double>, ReLU,
                         Residual<Block<Conv2D<3, 3, 1, 1, 1, 1, double>, ReLU, Conv2D<3, 3, 1, 1, 1, 1, double>>>, ReLU,
                         Residual<Block<Conv2D<4, 3, 2, 1, 1, 1, double>>, Block<Conv2D<4, 1, 2, 0, 1, 1, double>>>, ReLU,
                         Flatten, Dense<3, double>>;
  Net net;
  initialize(net, 17);
  const auto X = rand_batch(8, shape(2, 6, 6), 18, 0, 1);
  const auto z = logits_max(net, X);
  lrp_options o;
  o.bias_redistribution = true;
  for (std::size_t layer : {lrp_input, std::size_t(0), std::size_t(2), std::size_t(4), std::size_t(5)}) {
    CAPTURE(layer);
    const auto R = relevance(net, X, layer, o);
    for (std::size_t r = 0; r < 8; ++r) CHECK(row_sum(R, r) == doctest::Approx(z[r]).epsilon(1e-9));
  }
  // the dynamic form gives the same relevance
  const auto dnet = to_dynamic(net);
  const auto Rs = relevance(net, X, lrp_input, o), Rd = relevance(dnet, X, lrp_input, o);
  double worst = 0;
  for (std::size_t i = 0; i < Rs.size(); ++i) worst = std::max(worst, std::abs(Rs.data()[i] - Rd.data()[i]));
  CHECK(worst < 1e-12);
}

TEST_CASE("BatchNorm folds into the preceding layer: the same relevance as the folded network") {
  using BNNet = Sequential<Input<2, 6, 6>, Conv2D<3, 3, 1, 1, 1, 1, double>, BatchNorm<3, double>, ReLU, Flatten,
                           Dense<4, double>, BatchNorm<4, double>, ReLU, Dense<3, double>>;
  using Folded = Sequential<Input<2, 6, 6>, Conv2D<3, 3, 1, 1, 1, 1, double>, ReLU, Flatten, Dense<4, double>, ReLU,
                            Dense<3, double>>;
  BNNet net;
  initialize(net, 21);
  std::mt19937_64 rng(22);
  std::uniform_real_distribution<double> u(0.5, 1.5), v(-0.3, 0.3);
  auto randomise = [&](auto& bn) {
    for (auto& g : bn.gamma) g = u(rng);
    for (auto& b : bn.beta) b = v(rng);
    for (auto& m : bn.running_mean) m = v(rng);
    for (auto& s : bn.running_var) s = u(rng);
  };
  randomise(std::get<1>(net.layers));
  randomise(std::get<5>(net.layers));
  Folded f;
  auto fold = [](const auto& lin, const auto& bn, auto& out, std::size_t per_out_stride, bool conv) {
    out = lin;
    const std::size_t C = bn.gamma.size();
    for (std::size_t c = 0; c < C; ++c) {
      const double a = bn.gamma(c) / std::sqrt(bn.running_var(c) + bn.eps), t = bn.beta(c) - a * bn.running_mean(c);
      if (conv)
        for (std::size_t k = 0; k < per_out_stride; ++k) out.W.data()[c * per_out_stride + k] *= a;
      else
        for (std::size_t i = 0; i < out.W.shape(0); ++i) out.W(i, c) *= a;
      out.b(c) = a * lin.b(c) + t;
    }
  };
  fold(std::get<0>(net.layers), std::get<1>(net.layers), std::get<0>(f.layers), 2 * 9, true);
  fold(std::get<4>(net.layers), std::get<5>(net.layers), std::get<3>(f.layers), 0, false);
  std::get<5>(f.layers) = std::get<7>(net.layers);
  const auto X = rand_batch(5, shape(2, 6, 6), 23, 0, 1);
  // same function
  const auto y1 = forward(net, X), y2 = forward(f, X);
  for (std::size_t i = 0; i < y1.size(); ++i) REQUIRE(y1.data()[i] == doctest::Approx(y2.data()[i]).epsilon(1e-12));
  for (bool redistribute : {false, true}) {
    lrp_options o;
    o.bias_redistribution = redistribute;
    const auto R1 = relevance(net, X, lrp_input, o), R2 = relevance(f, X, lrp_input, o);
    double worst = 0;
    for (std::size_t i = 0; i < R1.size(); ++i) worst = std::max(worst, std::abs(R1.data()[i] - R2.data()[i]));
    CHECK(worst < 1e-10);
  }
  // asking for the Conv2D's own output stops the fold there (it must carry relevance itself)
  const auto Rc = relevance(net, X, 0);
  CHECK(Rc.shape()[1] == 3);
}
