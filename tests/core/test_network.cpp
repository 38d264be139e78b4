// Networks: static and dynamic forms, shapes, forward, trace/backward, errors.
#include <doctest/doctest.h>

#include <nnlens/nnlens.hpp>

#include <cmath>
#include <random>

using namespace nnlens;

namespace {
using MLP = Sequential<Input<5>, Dense<7>, ReLU, Dense<3>>;
using MLPd = rebind_scalar_t<MLP, double>;

template <class T>
xt::xarray<T> random_input(std::vector<std::size_t> shp, std::uint64_t seed) {
  std::mt19937_64 r(seed);
  std::normal_distribution<double> n(0, 1);
  xt::xarray<T> x = xt::xarray<T>::from_shape(shp);
  for (auto& v : x) v = T(n(r));
  return x;
}
}  // namespace

TEST_CASE("compile-time shape inference") {
  static_assert(MLP::size == 3);
  static_assert(MLP::input_shape == shape(5));
  static_assert(MLP::shapes[1] == shape(7));
  static_assert(MLP::output_shape == shape(3));
  using Img = Sequential<Input<2, 4, 4>, ReLU, Flatten, Dense<5>>;
  static_assert(Img::shapes[2] == shape(32));
  static_assert(std::is_same_v<network_scalar_t<MLPd>, double>);
  static_assert(std::is_same_v<network_scalar_t<MLP>, float>);
  CHECK(inference_workspace_v<MLP> == 2 * 7);
}

TEST_CASE("a hand-computed Dense/ReLU network") {
  Sequential<Input<2>, Dense<2, double>, ReLU> net;
  auto& d = net.layer<0>();
  d.W = {{-1.7, 2.0}, {1.0, -1.3}};  // W[in,out]: ExactLine spec example A^T
  d.b = {3.0, 3.0};
  xt::xarray<double> x = {{20.0, 30.0}, {30.0, 50.0}};
  auto y = forward(net, x);
  CHECK(y(0, 0) == doctest::Approx(0.0));
  CHECK(y(0, 1) == doctest::Approx(4.0));
  CHECK(y(1, 0) == doctest::Approx(2.0));
  CHECK(y(1, 1) == doctest::Approx(0.0));
}

TEST_CASE("Sequential and DynamicNetwork give identical outputs") {
  MLP net;
  initialize(net, 42);
  auto dnet = to_dynamic(net);
  CHECK(dnet.size() == 3);
  CHECK(dnet.output_shape() == shape(3));
  auto x = random_input<float>({9, 5}, 1);
  auto y1 = forward(net, x);
  auto y2 = forward(dnet, x);
  auto y3 = forward(execution::par, net, x);
  auto y4 = forward(execution::par, dnet, x);
  REQUIRE(y1.shape() == y2.shape());
  for (std::size_t i = 0; i < y1.size(); ++i) {
    CHECK(y1.data()[i] == y2.data()[i]);  // bitwise: the very same code path
    CHECK(y1.data()[i] == y3.data()[i]);
    CHECK(y1.data()[i] == y4.data()[i]);
  }
  auto back = from_dynamic<MLP>(dnet);
  auto y5 = forward(back, x);
  for (std::size_t i = 0; i < y1.size(); ++i) CHECK(y1.data()[i] == y5.data()[i]);
}

TEST_CASE("from_dynamic rejects a network of another shape, naming the layer") {
  DynamicNetwork d(shape(5));
  Dense<dyn> l;
  l.W = xt::zeros<float>({5, 4});
  l.b = xt::zeros<float>({4});
  d.add(l).add(ReLU{});
  Dense<dyn> l2;
  l2.W = xt::zeros<float>({4, 3});
  l2.b = xt::zeros<float>({3});
  d.add(l2);
  CHECK_THROWS_WITH_AS(from_dynamic<MLP>(d), doctest::Contains("layer 0 (Dense): Dense expects 7 outputs"), shape_error);
}

TEST_CASE("DynamicNetwork checks shapes as layers are added") {
  DynamicNetwork d(shape(5));
  Dense<dyn> l;
  l.W = xt::zeros<float>({6, 4});  // expects 6 inputs, the net gives 5
  l.b = xt::zeros<float>({4});
  CHECK_THROWS_WITH_AS(d.add(l), doctest::Contains("layer 0 (Dense): Dense: W has shape [6,4], expected [5,4]"),
                       shape_error);
  CHECK(d.size() == 0);  // nothing half-added
  Dense<dyn> bad_b;
  bad_b.W = xt::zeros<float>({5, 4});
  bad_b.b = xt::zeros<float>({3});
  CHECK_THROWS_AS(d.add(bad_b), shape_error);
  CHECK_THROWS_AS(DynamicNetwork(shape(1, dyn, 3)), shape_error);
}

TEST_CASE("DynamicNetwork::add moves a layer already in its run-time form, and copies one given as an lvalue") {
  DynamicNetwork d(shape(5));
  Dense<dyn> l;
  l.W = xt::ones<float>({5, 4});
  l.b = xt::zeros<float>({4});
  d.add(l);  // an lvalue: copied, the caller's layer untouched
  CHECK(l.W.size() == 20);
  CHECK(std::get<Dense<dyn>>(d.layer(0)).W.data() != l.W.data());
  Dense<dyn> m;
  m.W = xt::ones<float>({4, 3});
  m.b = xt::zeros<float>({3});
  const float* w = m.W.data();
  d.add(ReLU{}).add(std::move(m));  // an rvalue: its weights move into the network, not copied
  REQUIRE(d.size() == 3);
  CHECK(std::get<Dense<dyn>>(d.layer(2)).W.data() == w);
  CHECK(d.output_shape() == shape(3));
}

TEST_CASE("forward rejects bad input with a clear error") {
  MLP net;
  initialize(net, 1);
  xt::xarray<float> wrong = xt::zeros<float>({2, 6});
  CHECK_THROWS_WITH_AS(forward(net, wrong), doctest::Contains("expected [batch,5]"), shape_error);
  xt::xarray<float> x = xt::zeros<float>({3, 5});
  x(2, 4) = std::nanf("");
  CHECK_THROWS_WITH_AS(forward(net, x), doctest::Contains("NaN at sample 2, element 4"), value_error);
  x(2, 4) = INFINITY;
  CHECK_THROWS_WITH_AS(forward(net, x), doctest::Contains("Inf at sample 2"), value_error);
  xt::xarray<float> empty = xt::zeros<float>({0, 5});
  CHECK(forward(net, empty).shape()[0] == 0);
}

TEST_CASE("require_finite finds the first bad value past its fast blocks (4096 values each)") {
  std::vector<float> v(3 * 4096 + 7, 1.0f);
  CHECK_NOTHROW(require_finite(std::span<const float>(v), 5, "x"));
  v[4096] = -INFINITY;  // the first value of the second block
  v[9000] = std::nanf("");
  CHECK_THROWS_WITH_AS(require_finite(std::span<const float>(v), 5, "x"),
                       doctest::Contains("x: Inf at sample 819, element 1"), value_error);
  v[4096] = 1.0f;
  CHECK_THROWS_WITH_AS(require_finite(std::span<const float>(v), 5, "x"),
                       doctest::Contains("x: NaN at sample 1800, element 0"), value_error);
  v[9000] = 1.0f;
  v.back() = INFINITY;  // in the last, partial block
  CHECK_THROWS_WITH_AS(require_finite(std::span<const float>(v), 0, "x"),
                       doctest::Contains("Inf at sample 0, element 12294"), value_error);
}

TEST_CASE("NaN/Inf weights are reported with the layer") {
  MLP net;
  initialize(net, 1);
  CHECK_NOTHROW(require_finite_parameters(net));
  net.layer<2>().W(1, 2) = std::nanf("");
  CHECK_THROWS_WITH_AS(require_finite_parameters(net), doctest::Contains("layer 2 (Dense): parameter 0 element 5 is NaN"),
                       value_error);
}

TEST_CASE("trace keeps every activation; backward matches finite differences") {
  MLPd net;
  initialize(net, 3);
  const std::size_t B = 4;
  auto x = random_input<double>({B, 5}, 2);
  trace<double> tr;
  forward_trace(net, B, x.data(), tr);
  REQUIRE(tr.layers() == 3);
  CHECK(tr.shape_at(1) == shape(7));
  auto y = forward(net, x);
  for (std::size_t i = 0; i < y.size(); ++i) CHECK(tr.output()[i] == doctest::Approx(y.data()[i]));
  // loss = sum(c * y) for a fixed random c
  auto c = random_input<double>({B, 3}, 5);
  MLPd g = zeros_like(net);
  xt::xarray<double> dx = xt::zeros<double>(std::vector<std::size_t>{B, 5});
  backward(net, tr, c.data(), &g, dx.data());
  auto loss = [&](const MLPd& n, const xt::xarray<double>& xx) {
    auto yy = forward(n, xx);
    double s = 0;
    for (std::size_t i = 0; i < yy.size(); ++i) s += c.data()[i] * yy.data()[i];
    return s;
  };
  const double h = 1e-6;
  for (std::size_t i = 0; i < x.size(); ++i) {
    auto xp = x, xm = x;
    xp.data()[i] += h;
    xm.data()[i] -= h;
    CHECK(dx.data()[i] == doctest::Approx((loss(net, xp) - loss(net, xm)) / (2 * h)).epsilon(1e-6));
  }
  auto ps = parameter_spans(net);
  auto gs = parameter_spans(g);
  REQUIRE(ps.size() == gs.size());
  for (std::size_t k = 0; k < ps.size(); ++k)
    for (std::size_t i = 0; i < ps[k].size(); ++i) {
      const double w = ps[k][i];
      ps[k][i] = w + h;
      const double lp = loss(net, x);
      ps[k][i] = w - h;
      const double lm = loss(net, x);
      ps[k][i] = w;
      CHECK(gs[k][i] == doctest::Approx((lp - lm) / (2 * h)).epsilon(1e-6));
    }
}

TEST_CASE("parameter helpers") {
  MLP net;
  initialize(net, 9);
  CHECK(parameter_count(net) == 5 * 7 + 7 + 7 * 3 + 3);
  CHECK(parameter_count(to_dynamic(net)) == parameter_count(net));
  MLP z = zeros_like(net);
  for (auto s : parameter_spans(z))
    for (float v : s) CHECK(v == 0.0f);
  MLP a, b;
  initialize(a, 5);
  initialize(b, 5);
  CHECK(a.layer<0>().W == b.layer<0>().W);  // seeded: deterministic
}

TEST_CASE("forward names the layer whose hand-set weights do not fit") {
  MLP net;
  initialize(net, 1);
  net.layer<2>().W = xt::zeros<float>({6, 3});  // expects [7,3]
  xt::xarray<float> x = xt::zeros<float>({1, 5});
  CHECK_THROWS_WITH_AS(forward(net, x), doctest::Contains("layer 2 (Dense): Dense: W has shape [6,3], expected [7,3]"),
                       shape_error);
  CHECK_THROWS_AS(validate(net), shape_error);
}

TEST_CASE("forward names the layer whose weights are not finite") {
  MLP net;
  initialize(net, 1);
  net.layer<0>().b(3) = INFINITY;
  xt::xarray<float> x = xt::ones<float>({2, 5});
  CHECK_THROWS_WITH_AS(forward(net, x), doctest::Contains("layer 0 (Dense): parameter 1 element 3 is Inf"), value_error);
  auto d = to_dynamic(net);
  CHECK_THROWS_WITH_AS(forward(d, x), doctest::Contains("layer 0 (Dense)"), value_error);
}

TEST_CASE("forward reports overflow when everything is finite") {
  Sequential<Input<1>, Dense<1>> net;
  net.layer<0>().W = {{3e38f}};
  net.layer<0>().b = {0.0f};
  xt::xarray<float> x = xt::xarray<float>::from_shape({1, 1});
  x(0, 0) = 10.0f;
  CHECK_THROWS_WITH_AS(forward(net, x), doctest::Contains("overflow"), value_error);
}

TEST_CASE("bad hyper-parameters are reported with the layer index") {
  DynamicNetwork d(shape(4));
  d.add(ReLU{});
  CHECK_THROWS_WITH_AS(d.add(Clamp{3.0, 1.0}), doctest::Contains("layer 1 (Clamp)"), value_error);
  Sequential<Input<4>, ReLU, LeakyReLU> net;
  net.layer<1>().alpha = std::nan("");
  xt::xarray<float> x = xt::zeros<float>({1, 4});
  CHECK_THROWS_WITH_AS(forward(net, x), doctest::Contains("layer 1 (LeakyReLU)"), value_error);
}

TEST_CASE("window_out follows PyTorch's pooling_output_shape, ceil_mode included") {
  using detail::window_out;
  // (in, k, stride, pad, dilation, ceil) -> the output width of PyTorch 1.13's max_pool2d
  CHECK(window_out(28, 2, 2, 0, 0) == 14);
  CHECK(window_out(5, 2, 2, 0, 0, 1, true) == 3);
  CHECK(window_out(5, 2, 2, 0, 0, 1, false) == 2);
  CHECK(window_out(1, 2, 2, 0, 0, 1, true) == 1);  // the window hangs past the input
  CHECK(window_out(3, 4, 3, 0, 0, 1, true) == 1);
  CHECK(window_out(1, 4, 2, 1, 1, 1, true) == 1);
  CHECK(window_out(6, 3, 2, 1, 1, 1, true) == 4);
  CHECK(window_out(4, 3, 2, 1, 1, 1, true) == 3);
  CHECK(window_out(5, 2, 2, 1, 1, 1, true) == 3);  // a 4th window would start in the padding: dropped
  CHECK(window_out(2, 3, 1, 0, 0) == 0);
  CHECK(window_out(7, 3, 2, 0, 0, 2) == 2);        // dilation 2: span 5
}
