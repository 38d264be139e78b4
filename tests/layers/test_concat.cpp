// Concat<Block<...>, ...> (layers/concat.hpp): hand-computed forward (features and channels,
// empty branches as the identity), backward (dx and every inner parameter) against central
// differences in double, inference vs training forward, compile-time and run-time shape errors,
// static vs DynamicNetwork bitwise and from_dynamic, training (loss goes down), NNLW weights
// round trip, ExactLine (breaks = union of the branches', values equal forward, affine between),
// NNSlicer (the join routes each output neuron to its own branch), LRP (relevance of a branch's
// channels stays in that branch; conservation at epsilon 0), NeuSemSlice, IDC, the int8 twin
// (inner weights quantised), magnitude pruning, codegen and ONNX export spellings.
#include <doctest/doctest.h>

#include <nnlens/compress.hpp>
#include <nnlens/io/codegen.hpp>
#include <nnlens/io/weights.hpp>
#include <nnlens/nnlens.hpp>
#include <nnlens/train.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "gradient_check.hpp"

using namespace nnlens;
using namespace nnlens_test;

namespace {
template <std::size_t O, std::size_t I>
Dense<O, double> dense(const double (&w)[I][O], const double (&b)[O]) {
  Dense<O, double> d;
  d.W = tensor<double, 2>::from_shape({I, O});
  d.b = tensor<double, 1>::from_shape({O});
  for (std::size_t i = 0; i < I; ++i)
    for (std::size_t o = 0; o < O; ++o) d.W(i, o) = w[i][o];
  for (std::size_t o = 0; o < O; ++o) d.b(o) = b[o];
  return d;
}

using FeatNet = Sequential<Input<2>, Concat<Block<>, Block<Dense<2, double>, ReLU>, Block<Dense<1, double>>>, Dense<1, double>>;

FeatNet feat_net() {
  FeatNet net;
  auto& c = net.layer<0>();
  std::get<0>(std::get<1>(c.branches).layers) = dense<2, 2>({{1, -1}, {2, 1}}, {0, 1});
  std::get<0>(std::get<2>(c.branches).layers) = dense<1, 2>({{3}, {-1}}, {0.5});
  net.layer<1>() = dense<1, 5>({{1}, {1}, {1}, {1}, {1}}, {0});
  return net;
}
}  // namespace

TEST_CASE("Concat: hand-computed forward on features; the empty branch is the identity") {
  auto net = feat_net();
  static_assert(FeatNet::output_shape == shape(1));
  CHECK(layer_traits<Concat<Block<>, Block<Dense<2, double>, ReLU>, Block<Dense<1, double>>>>::infer(shape(2)).out == shape(5));
  xt::xarray<double> x = {{1.0, 2.0}, {-1.0, 0.5}};
  // x = (1, 2): branch 1: Dense -> (1*1 + 2*2 + 0, -1 + 2 + 1) = (5, 2), ReLU (5, 2); branch 2: 3 - 2 + 0.5 = 1.5
  // concat: (1, 2, 5, 2, 1.5) -> sum 11.5
  // x = (-1, .5): branch 1: (-1 + 1, 1 + .5 + 1) = (0, 2.5); branch 2: -3 - .5 + .5 = -3; concat (-1, .5, 0, 2.5, -3) -> -1
  const auto y = forward(net, x);
  CHECK(y(0, 0) == doctest::Approx(11.5));
  CHECK(y(1, 0) == doctest::Approx(-1.0));
  // the Concat's own output, element by element
  trace<double> tr;
  forward_trace(net, 2, x.data(), tr);
  const auto a = tr.activation(1);
  const std::vector<double> want = {1, 2, 5, 2, 1.5, -1, 0.5, 0, 2.5, -3};
  REQUIRE(a.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) CHECK(a[i] == doctest::Approx(want[i]));
}

TEST_CASE("Concat: hand-computed forward on channels (NCHW: each sample's channels one after another)") {
  using C = Concat<Block<AvgPool2D<2, 1>>, Block<>, Block<MaxPool2D<2, 1>>>;
  static_assert(layer_traits<C>::infer(shape(2, 3, 3)).error != nullptr);  // 2x2 vs 3x3 spatial: refused
  using C2 = Concat<Block<Conv2D<1, 1, 1, 0, 1, 1, double>>, Block<>>;
  CHECK(layer_traits<C2>::infer(shape(2, 3, 3)).out == shape(3, 3, 3));
  Sequential<Input<2, 2, 2>, C2> net;
  auto& conv = std::get<0>(std::get<0>(net.layer<0>().branches).layers);
  conv.W = tensor<double, 4>::from_shape({1, 2, 1, 1});
  conv.W(0, 0, 0, 0) = 2, conv.W(0, 1, 0, 0) = -1;
  conv.b = tensor<double, 1>::from_shape({1});
  conv.b(0) = 0.25;
  xt::xarray<double> x = xt::xarray<double>::from_shape({2, 2, 2, 2});
  for (std::size_t i = 0; i < x.size(); ++i) x.data()[i] = double(i) - 5;
  const auto y = forward(net, x);
  REQUIRE(y.shape() == std::vector<std::size_t>{2, 3, 2, 2});
  for (std::size_t n = 0; n < 2; ++n)
    for (std::size_t h = 0; h < 2; ++h)
      for (std::size_t w = 0; w < 2; ++w) {
        CHECK(y(n, 0, h, w) == doctest::Approx(2 * x(n, 0, h, w) - x(n, 1, h, w) + 0.25));
        CHECK(y(n, 1, h, w) == x(n, 0, h, w));
        CHECK(y(n, 2, h, w) == x(n, 1, h, w));
      }
}

TEST_CASE("Concat: backward (dx and every inner parameter) matches central differences") {
  std::mt19937_64 r(3);
  SUBCASE("features, three branches, one empty") {
    Concat<Block<Dense<3, double>, LeakyReLU>, Block<>, Block<Dense<2, double>, Dense<1, double>>> c;
    layer_traits<decltype(c)>::init(c, shape(4), r);
    const auto x = randn(3 * 4, r);
    check_backward(c, shape(4), 3, x, r);
  }
  SUBCASE("channels: conv + batch norm, identity, max pool with padding") {
    Concat<Block<Conv2D<2, 3, 1, 1, 1, 1, double>, BatchNorm<2, double>>, Block<>, Block<MaxPool2D<3, 1, 1>>> c;
    layer_traits<decltype(c)>::init(c, shape(2, 4, 4), r);
    const auto x = randn(2 * 2 * 16, r);
    check_backward(c, shape(2, 4, 4), 2, x, r);
  }
  SUBCASE("run-time form") {
    DynamicConcat<double> c;
    c.branches.resize(2);
    c.branches[0].layers.emplace_back(Dense<dyn, double>{});
    c.branches[1].layers.emplace_back(ReLU{});
    auto& d = std::get<Dense<dyn, double>>(c.branches[0].layers[0]);
    d.W = tensor<double, 2>::from_shape({3, 4});
    d.b = tensor<double, 1>::from_shape({4});
    for (auto& v : d.W) v = randn(1, r)[0];
    for (auto& v : d.b) v = randn(1, r)[0];
    CHECK(layer_traits<DynamicConcat<double>>::output_shape(c, shape(3)) == shape(7));
    const auto x = randn(2 * 3, r);
    check_backward(c, shape(3), 2, x, r);
  }
}

TEST_CASE("Concat: run-time shape errors name the branch and both shapes; inner errors name the layer") {
  DynamicConcat<double> c;
  c.branches.resize(2);
  c.branches[0].layers.emplace_back(MaxPool2D<dyn>{});
  auto& p = std::get<MaxPool2D<dyn>>(c.branches[0].layers[0]);
  p.geometry.kh = p.geometry.kw = 2, p.geometry.stride_h = p.geometry.stride_w = 2;
  std::string msg;
  try {
    (void)layer_traits<DynamicConcat<double>>::output_shape(c, shape(1, 4, 4));
  } catch (const shape_error& e) {
    msg = e.what();
  }
  CHECK(msg.find("branch 0 outputs [1,2,2] but branch 1 outputs [1,4,4]") != std::string::npos);
  c.branches[1].layers.emplace_back(Dense<dyn, double>{});
  msg.clear();
  try {
    (void)layer_traits<DynamicConcat<double>>::output_shape(c, shape(1, 4, 4));
  } catch (const error& e) {
    msg = e.what();
  }
  CHECK(msg.find("Concat branch 1 layer 0 (Dense)") != std::string::npos);
  DynamicConcat<double> none;
  CHECK_THROWS_AS((void)layer_traits<DynamicConcat<double>>::output_shape(none, shape(3)), shape_error);
}

using ImgNet = Sequential<Input<1, 6, 6>, Conv2D<3, 3, 1, 1, 1, 1, double>, ReLU,
                          Concat<Block<Conv2D<2, 1, 1, 0, 1, 1, double>, ReLU>, Block<>, Block<Conv2D<2, 3, 1, 1, 1, 1, double>, BatchNorm<2, double>, ReLU>>,
                          MaxPool2D<2>, Flatten, Dense<8, double>, ReLU, Dense<3, double>>;

TEST_CASE("Concat: static and DynamicNetwork agree bitwise; from_dynamic; parameters and buffers in branch order") {
  ImgNet net;
  initialize(net, 17);
  std::mt19937_64 r(18);
  const auto X = batch_of(5, {1, 6, 6}, r);
  const auto d = to_dynamic(net);
  check_bitwise(forward(net, X), forward(d, X));
  const auto back = from_dynamic<ImgNet>(d);
  check_bitwise(forward(net, X), forward(back, X));
  using C = std::decay_t<decltype(net.layer<2>())>;
  static_assert(layer_traits<C>::parameter_tensors == 2 + 2 + 2);  // conv W b | conv W b, bn gamma beta
  static_assert(layer_traits<C>::buffer_tensors == 2);
  const auto ps = layer_traits<C>::parameters(net.layer<2>());
  CHECK(ps[0].data() == std::get<0>(std::get<0>(net.layer<2>().branches).layers).W.data());
  CHECK(ps[2].data() == std::get<0>(std::get<2>(net.layer<2>().branches).layers).W.data());
  // a static type whose branch count differs from the network's is refused, naming the branch count
  using Wrong = Sequential<Input<1, 6, 6>, Conv2D<3, 3, 1, 1, 1, 1, double>, ReLU,
                           Concat<Block<Conv2D<2, 1, 1, 0, 1, 1, double>, ReLU>, Block<>>, MaxPool2D<2>, Flatten,
                           Dense<8, double>, ReLU, Dense<3, double>>;
  std::string msg;
  try {
    (void)from_dynamic<Wrong>(d);
  } catch (const shape_error& e) {
    msg = e.what();
  }
  CHECK(msg.find("2 branches, the network has 3") != std::string::npos);
}

TEST_CASE("composites without weights of their own in a double network: to_dynamic and from_dynamic") {
  // A Concat or Residual whose branches hold no weights has no scalar of its own (its default
  // run-time form is float); in a double network it takes the network's scalar.
  using Net = Sequential<Input<2, 4, 4>, Conv2D<3, 3, 1, 1, 1, 1, double>, Residual<Block<ReLU>>,
                         Concat<Block<MaxPool2D<3, 1, 1>>, Block<>, Block<LeakyReLU>>, Flatten, Dense<3, double>>;
  static_assert(std::is_same_v<dynamic_form_t<Residual<Block<ReLU>>>, DynamicResidual<float>>);
  static_assert(std::is_same_v<dynamic_form_in_t<Residual<Block<ReLU>>, double>, DynamicResidual<double>>);
  static_assert(std::is_same_v<dynamic_form_in_t<Concat<Block<>, Block<ReLU>>, double>, DynamicConcat<double>>);
  Net net;
  initialize(net, 31);
  std::mt19937_64 r(32);
  const auto X = batch_of(4, {2, 4, 4}, r);
  const auto d = to_dynamic(net);
  static_assert(std::is_same_v<std::decay_t<decltype(d)>, basic_dynamic_network<double>>);
  CHECK(std::holds_alternative<DynamicResidual<double>>(d.layer(1)));
  CHECK(std::holds_alternative<DynamicConcat<double>>(d.layer(2)));
  check_bitwise(forward(net, X), forward(d, X));
  check_bitwise(forward(net, X), forward(from_dynamic<Net>(d), X));
}

TEST_CASE("Concat: training lowers the loss; NNLW round trip keeps outputs and the inner BatchNorm's running statistics") {
  ImgNet net;
  initialize(net, 23);
  std::mt19937_64 r(24);
  const auto X = batch_of(48, {1, 6, 6}, r);
  std::vector<std::size_t> y(48);
  for (std::size_t i = 0; i < 48; ++i) y[i] = (X(i, 0, 2, 2) > 0) + (X(i, 0, 3, 3) > 0);
  auto loss_of = [&] {
    const auto z = forward(net, X);
    double s = 0;
    for (std::size_t i = 0; i < 48; ++i) {
      double m = z(i, 0);
      for (std::size_t k = 1; k < 3; ++k) m = std::max(m, z(i, k));
      double e = 0;
      for (std::size_t k = 0; k < 3; ++k) e += std::exp(z(i, k) - m);
      s += m + std::log(e) - z(i, y[i]);
    }
    return s / 48;
  };
  const double before = loss_of();
  train::sgd<ImgNet> opt(net, {.lr = 0.05, .momentum = 0.9});
  train::fit_options o;
  o.epochs = 15;
  o.batch_size = 16;
  o.seed = 1;
  train::fit(net, opt, X, y, o);
  const double after = loss_of();
  CHECK(after < 0.8 * before);
  // BatchNorm runs in inference form (running statistics are buffers, not trained): give them
  // values that a round trip must keep
  auto& bn = std::get<1>(std::get<2>(net.layer<2>().branches).layers);
  bn.running_mean(0) = 0.375, bn.running_mean(1) = -0.25, bn.running_var(0) = 1.5, bn.running_var(1) = 0.625;
  const auto dir = std::filesystem::temp_directory_path() / "nnlens_test_concat";
  std::filesystem::create_directories(dir);
  io::save_weights(dir / "c.nnlw", net);
  const ImgNet back = io::load_weights<ImgNet>(dir / "c.nnlw");
  check_bitwise(forward(net, X), forward(back, X));
  const auto& bn2 = std::get<1>(std::get<2>(back.layer<2>().branches).layers);
  CHECK(bn2.running_mean(0) == 0.375);
  CHECK(bn2.running_mean(1) == -0.25);
  CHECK(bn2.running_var(0) == 1.5);
  CHECK(bn2.running_var(1) == 0.625);
  std::filesystem::remove_all(dir);
}

TEST_CASE("Concat: ExactLine breaks are the union of the branches' breaks; values equal forward; affine between") {
  // x in R^2 -> Concat(Block<Dense<3>, ReLU>, Block<Dense<2>, HardTanh>) -> Dense<2>
  using Net = Sequential<Input<2>, Concat<Block<Dense<3, double>, ReLU>, Block<Dense<2, double>, HardTanh>>, Dense<2, double>>;
  Net net;
  initialize(net, 31);
  std::mt19937_64 r(32);
  std::size_t breaks = 0;
  for (int trial = 0; trial < 8; ++trial) {
    const auto P = randn(2, r, 3.0), Q = randn(2, r, 3.0);
    const auto res = exact_line(net, P, Q);
    auto at = [&](double t, std::size_t layer) {
      std::vector<double> p(2);
      for (std::size_t i = 0; i < 2; ++i) p[i] = P[i] + t * (Q[i] - P[i]);
      trace<double> tr;
      forward_trace(net, 1, p.data(), tr);
      auto a = tr.activation(layer);
      return std::vector<double>(a.begin(), a.end());
    };
    // expected breaks: each pre-activation unit of either branch crossing a knot (linear in t)
    std::vector<double> want;
    const auto& c = net.layer<0>();
    const auto& d1 = std::get<0>(std::get<0>(c.branches).layers);
    const auto& d2 = std::get<0>(std::get<1>(c.branches).layers);
    auto crossings = [&](const auto& d, std::size_t units, std::vector<double> knots) {
      for (std::size_t k = 0; k < units; ++k) {
        double z0 = d.b(k), z1 = d.b(k);
        for (std::size_t i = 0; i < 2; ++i) z0 += P[i] * d.W(i, k), z1 += Q[i] * d.W(i, k);
        for (double kn : knots)
          if ((z0 > kn) != (z1 > kn)) want.push_back((kn - z0) / (z1 - z0));
      }
    };
    crossings(d1, 3, {0.0});
    crossings(d2, 2, {-1.0, 1.0});
    std::sort(want.begin(), want.end());
    REQUIRE(res.t.size() == want.size() + 2);
    for (std::size_t j = 0; j < want.size(); ++j) CHECK(res.t[j + 1] == doctest::Approx(want[j]).epsilon(1e-12));
    breaks += want.size();
    for (std::size_t j = 0; j < res.t.size(); ++j) {
      const auto y = at(res.t[j], 2);
      for (std::size_t k = 0; k < 2; ++k) CHECK(res.output(j)[k] == doctest::Approx(y[k]).epsilon(1e-10));
    }
    for (std::size_t j = 0; j + 1 < res.t.size(); ++j) {
      const auto m = at(0.5 * (res.t[j] + res.t[j + 1]), 2);
      for (std::size_t k = 0; k < 2; ++k)
        CHECK(m[k] == doctest::Approx(0.5 * (res.output(j)[k] + res.output(j + 1)[k])).epsilon(1e-10));
    }
  }
  CHECK(breaks >= 8);
  // a network with image branches and a max pool after the join: values at the breaks equal forward
  ImgNet img;
  initialize(img, 33);
  const auto P = randn(36, r), Q = randn(36, r);
  const auto res = exact_line(img, P, Q);
  CHECK(res.t.size() > 2);
  for (std::size_t j = 0; j < res.t.size(); j += std::max<std::size_t>(1, res.t.size() / 7)) {
    xt::xarray<double> p = xt::xarray<double>::from_shape({1, 1, 6, 6});
    for (std::size_t i = 0; i < 36; ++i) p.data()[i] = P[i] + res.t[j] * (Q[i] - P[i]);
    const auto y = forward(img, p);
    for (std::size_t k = 0; k < 3; ++k) CHECK(res.output(j)[k] == doctest::Approx(y(0, k)).epsilon(1e-9));
  }
}

TEST_CASE("Concat: NNSlicer routes each output neuron to its own branch; the graph's join has offsets") {
  auto net = feat_net();
  const op_graph<double> g(net);
  // nodes: branch1 Dense, branch1 ReLU, branch2 Dense, Concat, Dense
  REQUIRE(g.nodes().size() == 5);
  const auto& j = g.nodes()[3];
  CHECK(j.type == "Concat");
  CHECK(j.name == "0 Concat");
  CHECK(g.nodes()[0].name == "0.branch1.0 Dense");
  CHECK(j.operands.ins == std::vector<std::size_t>{0, 2, 3});
  CHECK(j.operands.offsets == std::vector<std::size_t>{0, 2, 4});
  CHECK(j.operands.sizes == std::vector<std::size_t>{2, 2, 1});
  // slicing from the output: every tensor gets contributions, and the join's run equals forward
  std::mt19937_64 r(41);
  const auto D = batch_of(40, {2}, r), I = batch_of(6, {2}, r);
  const auto t = nnslicer(net, profile_network(net, D), I, criterion::predicted());
  REQUIRE(t.neurons.size() == g.acts().size());
  std::vector<std::vector<double>> buf;
  g.run(6, I.data(), buf);
  const auto y = forward(net, I);
  for (std::size_t i = 0; i < 6; ++i) CHECK(buf[g.output()][i] == y(i, 0));
  // a network whose last Dense reads only the second branch's channels: the first branch (and the
  // identity's input share) get nothing from the join
  auto n2 = feat_net();
  n2.layer<1>() = dense<1, 5>({{0}, {0}, {1}, {1}, {0}}, {0});
  const auto t2 = nnslicer(n2, profile_network(n2, D), I, criterion::predicted(), {.theta = 1.0});
  const std::size_t concat_out = g.nodes()[3].out, b2_out = g.nodes()[2].out, b1_relu = g.nodes()[1].out;
  CHECK(t2.neurons[concat_out][4] == 0);  // branch 2's neuron: weight 0 in the last Dense
  CHECK(t2.neurons[b2_out][0] == 0);
  CHECK(std::any_of(t2.neurons[b1_relu].begin(), t2.neurons[b1_relu].end(), [](auto v) { return v != 0; }));
}

TEST_CASE("Concat: LRP passes each output's relevance to its own branch (hand-computed at epsilon 0)") {
  auto net = feat_net();
  xt::xarray<double> x = {{1.0, 2.0}};
  // last Dense: all weights 1, bias 0: R of the concat = its values (1, 2, 5, 2, 1.5), total 11.5
  lrp_options o;
  o.epsilon = 0;
  const auto R = relevance(net, x, lrp_input, o);
  // input relevance: identity branch (1, 2) + branch 1 (z-rule through Dense with bias 0 / 1) + branch 2
  const double total = R(0, 0) + R(0, 1);
  // the biases of the branches' Dense layers keep their share (LRP's z-rule), so the total is less
  // than 11.5:
  // branch 1: unit 0 (z = 5 = 1 + 4, b = 0): all 5 to inputs; unit 1 (z = 2 = -1 + 2 + 1): (-1 + 2) / 2 * 2 = 1 to inputs
  // branch 2: z = 1.5 = 3 - 2 + 0.5: (3 - 2) / 1.5 * 1.5 = 1 to inputs
  CHECK(total == doctest::Approx(1 + 2 + 5 + 1 + 1));
  // x0's share: identity 1, branch 1: 1 (unit 0) + (-1)/2*2 = -1 (unit 1), branch 2: 3 -> 4
  CHECK(R(0, 0) == doctest::Approx(1 + 1 - 1 + 3));
  // IDC on the image network runs through the Concat (subject layer: the last hidden Dense)
  ImgNet img;
  initialize(img, 51);
  std::mt19937_64 r(52);
  const auto X = batch_of(30, {1, 6, 6}, r);
  std::vector<std::size_t> lab(30);
  for (std::size_t i = 0; i < 30; ++i) lab[i] = i % 3;
  idc_options io;
  io.m = 3;
  const auto c = prepare_idc(img, X, lab, io);
  CHECK(c.neurons().size() == 3);
}

TEST_CASE("Concat: NeuSemSlice, the int8 twin quantises the inner weights, magnitude pruning reaches them") {
  ImgNet net;
  initialize(net, 61);
  std::mt19937_64 r(62);
  const auto X = batch_of(30, {1, 6, 6}, r);
  std::vector<std::size_t> lab(30);
  for (std::size_t i = 0; i < 30; ++i) lab[i] = i % 3;
  semslice_options so;
  so.theta = 0.9;
  const auto s = semslice(net, X, lab, so);
  CHECK(s.report.categories == std::vector<std::size_t>{0, 1, 2});
  const auto q = compress::quantize(net, X);
  // the two convolutions inside the Concat are quantised: their dequantised weights differ from the
  // originals by at most half a step and are not all equal to them
  const auto& c0 = std::get<0>(std::get<0>(net.layer<2>().branches).layers);
  const auto& q0 = std::get<0>(std::get<0>(q.dequantized().layer<2>().branches).layers);
  double maxabs = 0, maxdiff = 0;
  for (std::size_t i = 0; i < c0.W.size(); ++i) {
    maxabs = std::max(maxabs, std::abs(c0.W.data()[i]));
    maxdiff = std::max(maxdiff, std::abs(c0.W.data()[i] - q0.W.data()[i]));
  }
  CHECK(maxdiff > 0);
  CHECK(maxdiff <= maxabs / 127.0 * 0.5 + 1e-12);
  const auto yq = q.forward(X);
  CHECK(yq.shape() == std::vector<std::size_t>{30, 3});
  const ImgNet pruned = compress::magnitude_prune(net, 0.5);
  const auto& p2 = std::get<0>(std::get<2>(pruned.layer<2>().branches).layers);
  std::size_t zeros = 0;
  for (auto v : p2.W) zeros += v == 0;
  CHECK(zeros > 0);
}

TEST_CASE("Concat: codegen spells Concat<Block<...>, ...> and fills every branch; ONNX export is one Concat node") {
  using Net = Sequential<Input<4>, Concat<Block<Dense<3>, ReLU>, Block<>>, Dense<2>>;
  Net net;
  initialize(net, 71);
  io::codegen_options o;
  o.name = "cc";
  const std::string h = io::generate_header(net, o);
  CHECK(h.find("nnlens::Concat<nnlens::Block<nnlens::Dense<3>, nnlens::ReLU>, nnlens::Block<>>") != std::string::npos);
  CHECK(h.find("std::get<0>(std::get<0>(") != std::string::npos);
  CHECK(h.find(".branches).layers)") != std::string::npos);
}

TEST_CASE("Concat and Residual nest: a Concat inside a residual block and a Residual inside a Concat branch") {
  // Inner: 3 channels in, 1 + 3 out; the outer residual projects its 2 input channels to 4
  using Inner = Concat<Block<Conv2D<1, 1, 1, 0, 1, 1, double>>, Block<Residual<Block<Conv2D<3, 3, 1, 1, 1, 1, double>, ReLU>>>>;
  using Outer = Residual<Block<Conv2D<3, 3, 1, 1, 1, 1, double>, ReLU, Inner>, Block<Conv2D<4, 1, 1, 0, 1, 1, double>>>;
  using Net = Sequential<Input<2, 5, 5>, Outer, ReLU, Flatten, Dense<3, double>>;
  static_assert(Net::output_shape == shape(3));
  Net net;
  initialize(net, 81);
  std::mt19937_64 r(82);
  const auto X = batch_of(4, {2, 5, 5}, r);
  // static = dynamic bitwise; backward through both composites against central differences
  check_bitwise(forward(net, X), forward(to_dynamic(net), X));
  {
    Outer res;
    layer_traits<decltype(res)>::init(res, shape(2, 5, 5), r);
    check_backward(res, shape(2, 5, 5), 2, randn(2 * 50, r), r);
  }
  // the graph: the Residual's join takes the Concat's output; the Concat's join the inner Residual's
  const op_graph<double> g(net);
  std::size_t adds = 0, concats = 0;
  for (const auto& nd : g.nodes()) adds += nd.type == "Add", concats += nd.type == "Concat";
  CHECK(adds == 2);
  CHECK(concats == 1);
  CHECK(std::any_of(g.nodes().begin(), g.nodes().end(), [](const auto& nd) { return nd.name == "0.block.2.branch1.0.block.0 Conv2D"; }));
  std::vector<std::vector<double>> buf;
  g.run(4, X.data(), buf);
  const auto y = forward(net, X);
  for (std::size_t i = 0; i < y.size(); ++i) CHECK(buf[g.output()][i] == doctest::Approx(y.data()[i]).epsilon(1e-12));
  // ExactLine values at the breaks equal forward; LRP and NNSlicer run
  const auto P = randn(50, r), Q = randn(50, r);
  const auto line = exact_line(net, P, Q);
  CHECK(line.t.size() > 2);
  for (std::size_t j = 0; j < line.t.size(); j += std::max<std::size_t>(1, line.t.size() / 6)) {
    xt::xarray<double> p = xt::xarray<double>::from_shape({1, 2, 5, 5});
    for (std::size_t i = 0; i < 50; ++i) p.data()[i] = P[i] + line.t[j] * (Q[i] - P[i]);
    const auto yp = forward(net, p);
    for (std::size_t k = 0; k < 3; ++k) CHECK(line.output(j)[k] == doctest::Approx(yp(0, k)).epsilon(1e-9));
  }
  const auto R = relevance(net, X);
  CHECK(R.shape() == std::vector<std::size_t>{4, 2, 5, 5});
  const auto t = nnslicer(net, profile_network(net, X), X, criterion::predicted());
  CHECK(t.neurons.size() == g.acts().size());
  // the backward analyses' walk (for_each_node_reverse) visits the graph's nodes last first, with
  // their types, in both forms, through both nested composites; it stops when the visitor says so
  const auto dyn = to_dynamic(net);
  for (int form = 0; form < 2; ++form) {
    std::vector<std::size_t> ks;
    std::vector<std::string> types;
    auto visit = [&](std::size_t k, const auto& l, shape, shape) {
      using L = std::remove_cvref_t<decltype(l)>;
      ks.push_back(k);
      if constexpr (is_join_node_v<L>) types.emplace_back(composite_join_name_v<std::remove_cvref_t<decltype(l.layer)>>);
      else types.emplace_back(layer_traits<L>::name);
      return true;
    };
    if (form == 0)
      for_each_node_reverse(net, g.nodes().size(), visit);
    else
      for_each_node_reverse(dyn, g.nodes().size(), visit);
    REQUIRE(ks.size() == g.nodes().size());
    for (std::size_t q = 0; q < ks.size(); ++q) {
      CHECK(ks[q] == g.nodes().size() - 1 - q);
      CHECK(types[q] == std::string(g.nodes()[ks[q]].type));
    }
  }
  std::size_t seen = 0;
  for_each_node_reverse(net, g.nodes().size(), [&](std::size_t, const auto&, shape, shape) { return ++seen < 3; });
  CHECK(seen == 3);
  // the static form's folded walk and the run-time form's visits give the same LRP, bit for bit,
  // and the same NNSlicer tables
  check_bitwise(R, relevance(dyn, X));
  const auto td = nnslicer(dyn, profile_network(dyn, X), X, criterion::predicted());
  CHECK(td.neurons == t.neurons);
  CHECK(td.synapses == t.synapses);
}

TEST_CASE("Concat: NNSlicer at channel granularity maps each output channel to its branch's channel") {
  // x [1,4,4] -> Concat(Conv2D<2,1>, Conv2D<3,1>) -> Flatten -> Dense<1> reading only the second
  // branch's channels 2..4 (elements 32..79): at channel granularity (16 elements a neuron) the
  // join must route output channel c to branch 1's channel c - 2, never to branch 0
  using Net = Sequential<Input<1, 4, 4>, Concat<Block<Conv2D<2, 1, 1, 0, 1, 1, double>>, Block<Conv2D<3, 1, 1, 0, 1, 1, double>>>,
                         Flatten, Dense<1, double>>;
  Net net;
  initialize(net, 91);
  auto& d = net.layer<2>();
  for (std::size_t i = 0; i < 80; ++i) d.W(i, 0) = i >= 32 ? 0.05 * double(1 + i % 7) : 0.0;
  std::mt19937_64 r(92);
  const auto D = batch_of(40, {1, 4, 4}, r), I = batch_of(5, {1, 4, 4}, r);
  for (const auto grain : {granularity::channel, granularity::element}) {
    INFO(granularity_name(grain));
    const auto p = profile_network(net, D, {.grain = grain});
    const auto t = nnslicer(net, p, I, criterion::predicted(), {.theta = 1.0});
    const op_graph<double> g(net);
    // tensors: 0 input, 1 branch0 conv, 2 branch1 conv, 3 concat, 4 flatten, 5 dense
    REQUIRE(g.acts().size() == 6);
    const std::size_t unit = grain == granularity::channel ? 16 : 1;
    REQUIRE(t.neurons[1].size() == 32 / unit);
    REQUIRE(t.neurons[2].size() == 48 / unit);
    CHECK(std::all_of(t.neurons[1].begin(), t.neurons[1].end(), [](auto v) { return v == 0; }));
    CHECK(std::any_of(t.neurons[2].begin(), t.neurons[2].end(), [](auto v) { return v != 0; }));
    // element grain: the join passes each output neuron's vote (+-1 a sample, from Flatten's copy)
    // to exactly its branch neuron, which nothing else reads, so the tables agree on that range
    if (grain == granularity::element)
      for (std::size_t c = 0; c < 48; ++c) CHECK(t.neurons[2][c] == t.neurons[3][32 + c]);
  }
}
