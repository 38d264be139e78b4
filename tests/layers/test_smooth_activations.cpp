// Sigmoid, Tanh, HardSigmoid, HardSwish, SiLU, GELU (both forms): hand-computed values, std:: and
// torch.nn.functional references (values recorded from torch 1.13, no torch at test time),
// backward against central finite differences in double, stability at ±1e4
// (float and double), static vs DynamicNetwork bit for bit, HardSigmoid's ExactLine breaks
// against hand-computed ones, ExactLine's refusal of the smooth ones in a DynamicNetwork (naming
// the layer, before any work), NNSlicer's local-slope rule and LRP's pass-through on tiny nets,
// codegen (host; freestanding: HardSigmoid only), the int8 twin's float fallback.
#include <doctest/doctest.h>

#include <nnlens/io/codegen.hpp>
#include <nnlens/io/codegen_freestanding.hpp>
#include <nnlens/nnlens.hpp>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gradient_check.hpp"

using namespace nnlens;
using namespace nnlens_test;

namespace {
template <class L>
std::vector<double> map1(const L& l, const std::vector<double>& x) {
  return run_forward(l, shape(x.size()), 1, x, false).y;
}
template <class L, class T>
T value_of(const L& l, T x) {
  return layer_traits<L>::scalar_map(l)(x);
}
template <class L, class T>
T slope_of(const L& l, T x) {
  return layer_traits<L>::scalar_map(l).grad(x, T(1));
}
double sigmoid_ref(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double gelu_erf_ref(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh_ref(double x) {
  const double k = std::sqrt(2.0 / std::acos(-1.0));
  return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}
const std::vector<double> probes{-7.5, -3.0, -2.25, -1.5, -1.0, -0.4, 0.0, 0.3, 1.0, 2.0, 3.0, 4.5, 9.0};
}  // namespace

TEST_CASE("Sigmoid and Tanh: std:: references, hand values, stable at ±1e4") {
  const auto s = map1(Sigmoid{}, probes);
  const auto t = map1(Tanh{}, probes);
  for (std::size_t i = 0; i < probes.size(); ++i) {
    CAPTURE(probes[i]);
    CHECK(s[i] == doctest::Approx(sigmoid_ref(probes[i])).epsilon(1e-15));
    CHECK(t[i] == doctest::Approx(std::tanh(probes[i])).epsilon(1e-15));  // kernels::tanh: <= 3 ulp
  }
  CHECK(value_of(Sigmoid{}, 0.0) == 0.5);
  CHECK(slope_of(Sigmoid{}, 0.0) == 0.25);
  CHECK(slope_of(Tanh{}, 0.0) == 1.0);
  for (double big : {1e4, -1e4, 800.0, -800.0}) {
    CAPTURE(big);
    const float bf = float(big);
    CHECK(value_of(Sigmoid{}, big) == (big > 0 ? 1.0 : 0.0));
    CHECK(value_of(Sigmoid{}, bf) == (big > 0 ? 1.0f : 0.0f));
    CHECK(slope_of(Sigmoid{}, big) == 0.0);
    CHECK(slope_of(Sigmoid{}, bf) == 0.0f);
    CHECK(value_of(Tanh{}, bf) == (big > 0 ? 1.0f : -1.0f));
    CHECK(slope_of(Tanh{}, big) == 0.0);
  }
  // the small tail keeps its precision (1/(1+e^{x}) would round 1 - tiny): σ(-30) = e^-30/(1+e^-30)
  CHECK(value_of(Sigmoid{}, -30.0) == doctest::Approx(std::exp(-30.0)).epsilon(1e-12));
}

TEST_CASE("HardSigmoid: defaults, hand values, derivative alpha strictly inside, bad parameters") {
  HardSigmoid d;
  CHECK(d.alpha == 1.0 / 6.0);  // PyTorch's nn.Hardsigmoid: relu6(x + 3) / 6
  CHECK(d.beta == 0.5);
  const HardSigmoid onnx_default{0.2, 0.5};
  const auto y = map1(onnx_default, {-5.0, -2.5, 0.0, 1.0, 2.5, 7.0});
  CHECK(y[0] == 0.0);
  CHECK(y[1] == 0.0);
  CHECK(y[2] == 0.5);
  CHECK(y[3] == doctest::Approx(0.7));
  CHECK(y[4] == 1.0);
  CHECK(y[5] == 1.0);
  CHECK(slope_of(onnx_default, 0.0) == 0.2);
  CHECK(slope_of(onnx_default, 2.5) == 0.0);   // at the knots: 0 (hardsigmoid_backward: open interval)
  CHECK(slope_of(onnx_default, -2.5) == 0.0);
  CHECK(slope_of(onnx_default, 3.0) == 0.0);
  CHECK(value_of(HardSigmoid{}, 1e4f) == 1.0f);
  CHECK(value_of(HardSigmoid{}, -1e4) == 0.0);
  const HardSigmoid neg{-0.25, 0.5};  // decreasing
  CHECK(value_of(neg, -2.0) == 1.0);
  CHECK(value_of(neg, 2.0) == 0.0);
  CHECK(slope_of(neg, 0.0) == -0.25);
  CHECK_THROWS_AS(layer_traits<HardSigmoid>::output_shape(HardSigmoid{std::nan(""), 0.5}, shape(3)), value_error);
  CHECK_THROWS_AS(layer_traits<HardSigmoid>::output_shape(HardSigmoid{0.2, std::numeric_limits<double>::infinity()}, shape(3)),
                  value_error);
}

TEST_CASE("HardSwish: PyTorch's expression and derivative conventions") {
  const auto y = map1(HardSwish{}, {-4.0, -3.0, -1.5, 0.0, 1.5, 3.0, 5.0});
  CHECK(y[0] == 0.0);
  CHECK(y[1] == 0.0);
  CHECK(y[2] == -0.375);  // the minimum
  CHECK(y[3] == 0.0);
  CHECK(y[4] == 1.125);
  CHECK(y[5] == 3.0);
  CHECK(y[6] == 5.0);
  CHECK(slope_of(HardSwish{}, -3.5) == 0.0);
  CHECK(slope_of(HardSwish{}, -3.0) == -0.5);  // x = -3 takes x/3 + 1/2 (hardswish_backward)
  CHECK(slope_of(HardSwish{}, -1.5) == 0.0);
  CHECK(slope_of(HardSwish{}, 3.0) == 1.5);
  CHECK(slope_of(HardSwish{}, 3.5) == 1.0);
  CHECK(value_of(HardSwish{}, 1e4f) == 1e4f);
  CHECK(value_of(HardSwish{}, -1e4f) == 0.0f);
}

TEST_CASE("SiLU and GELU: std:: references, hand values, stable at ±1e4") {
  const auto si = map1(SiLU{}, probes);
  const auto ge = map1(GELU{}, probes);
  const auto gt = map1(GELU{true}, probes);
  for (std::size_t i = 0; i < probes.size(); ++i) {
    const double x = probes[i];
    CAPTURE(x);
    CHECK(si[i] == doctest::Approx(x * sigmoid_ref(x)).epsilon(1e-15));
    CHECK(ge[i] == doctest::Approx(gelu_erf_ref(x)).epsilon(1e-15));
    CHECK(gt[i] == doctest::Approx(gelu_tanh_ref(x)).epsilon(1e-15));
    CHECK(std::abs(gt[i] - ge[i]) < 1e-3);  // the approximation's known error is below 5e-4
  }
  CHECK(value_of(SiLU{}, 0.0) == 0.0);
  CHECK(slope_of(SiLU{}, 0.0) == 0.5);
  CHECK(value_of(GELU{}, 1.0) == doctest::Approx(0.8413447460685429));  // Φ(1)
  CHECK(slope_of(GELU{}, 0.0) == 0.5);
  CHECK(slope_of(GELU{true}, 0.0) == 0.5);
  CHECK(GELU{}.tanh_approximation == false);
  for (double big : {1e4, -1e4}) {
    CAPTURE(big);
    const float bf = float(big);
    const double hi = big > 0 ? big : 0.0;
    CHECK(value_of(SiLU{}, big) == hi);
    CHECK(value_of(SiLU{}, bf) == float(hi));
    CHECK(value_of(GELU{}, big) == hi);
    CHECK(value_of(GELU{}, bf) == float(hi));
    CHECK(value_of(GELU{true}, big) == hi);
    CHECK(value_of(GELU{true}, bf) == float(hi));
    const double s1 = big > 0 ? 1.0 : 0.0;
    CHECK(slope_of(SiLU{}, big) == s1);
    CHECK(slope_of(SiLU{}, bf) == float(s1));
    CHECK(slope_of(GELU{}, big) == s1);
    CHECK(slope_of(GELU{}, bf) == float(s1));
    CHECK(slope_of(GELU{true}, big) == s1);
    CHECK(slope_of(GELU{true}, bf) == float(s1));
  }
  // the tanh form's x³ overflows float past ~7e12: still no NaN
  CHECK(value_of(GELU{true}, 1e30f) == 1e30f);
  CHECK(slope_of(GELU{true}, -1e30f) == 0.0f);
  CHECK(!std::isnan(slope_of(GELU{true}, 3e19f)));
}

TEST_CASE("backward of the smooth activations matches central finite differences in double") {
  std::mt19937_64 r(77);
  for (int t = 0; t < 10; ++t) {
    const shape in = random_shape(r);
    const std::size_t batch = 1 + r() % 3;
    auto x = randn(batch * in.size(), r, 2.5);
    CAPTURE(t);
    check_backward(Sigmoid{}, in, batch, x, r);
    check_backward(Tanh{}, in, batch, x, r);
    check_backward(SiLU{}, in, batch, x, r);
    check_backward(GELU{}, in, batch, x, r);
    check_backward(GELU{true}, in, batch, x, r);
    for (auto& v : x)  // HardSigmoid's and HardSwish's kinks at ±3, HardSigmoid{0.2, 0.5}'s at -2.5, 2.5
      for (double k : {-3.0, 3.0, -2.5, 2.5})
        if (std::abs(v - k) < 1e-3) v = k + 2e-3;
    check_backward(HardSigmoid{}, in, batch, x, r);
    check_backward(HardSigmoid{0.2, 0.5}, in, batch, x, r);
    check_backward(HardSigmoid{-0.3, 0.1}, in, batch, x, r);
    check_backward(HardSwish{}, in, batch, x, r);
  }
}

TEST_CASE("static and dynamic networks with the smooth activations agree bitwise; from_dynamic round-trips") {
  using Net = Sequential<Input<2, 3, 3>, Sigmoid, Flatten, Dense<9>, Tanh, Dense<8>, HardSigmoid, Dense<7>, HardSwish,
                         Dense<6>, SiLU, Dense<5>, GELU, Dense<4>, GELU>;
  Net net;
  initialize(net, 3);
  net.layer<5>() = HardSigmoid{0.25, 0.375};
  net.layer<13>().tanh_approximation = true;
  std::mt19937_64 r(4);
  xt::xarray<float> x = xt::xarray<float>::from_shape({5, 2, 3, 3});
  for (auto& v : x) v = float(randn(1, r, 3.0)[0]);
  auto d = to_dynamic(net);
  CHECK(d.layer_name(0) == "Sigmoid");
  CHECK(d.layer_name(3) == "Tanh");
  CHECK(d.layer_name(5) == "HardSigmoid");
  CHECK(d.layer_name(7) == "HardSwish");
  CHECK(d.layer_name(9) == "SiLU");
  CHECK(d.layer_name(11) == "GELU");
  const auto y = forward(net, x);
  check_bitwise(y, forward(d, x));
  check_bitwise(y, forward(execution::par, d, x));
  auto back = from_dynamic<Net>(d);
  CHECK(back.layer<5>().alpha == 0.25);
  CHECK(back.layer<5>().beta == 0.375);
  CHECK(back.layer<11>().tanh_approximation == false);
  CHECK(back.layer<13>().tanh_approximation == true);
  check_bitwise(y, forward(back, x));
  // double: network_cast converts the fields
  const auto nd = network_cast<double>(d);
  CHECK(std::get<GELU>(nd.layer(13)).tanh_approximation);
  CHECK(std::get<HardSigmoid>(nd.layer(5)).beta == 0.375);
}

TEST_CASE("codegen spells the smooth activations and sets their fields") {
  codegen_context c("float");
  CHECK(codegen_rule<GELU>::type(GELU{true}, c) == "nnlens::GELU");
  codegen_rule<GELU>::fill(GELU{true}, c, "l");
  CHECK(c.fills.find("l.tanh_approximation = true;") != std::string::npos);
  codegen_rule<HardSigmoid>::fill(HardSigmoid{0.25, 0.5}, c, "h");
  CHECK(c.fills.find("h.alpha = 0x1p-2;") != std::string::npos);
  CHECK(codegen_rule<SiLU>::type(SiLU{}, c) == "nnlens::SiLU");
  // the whole header, and the freestanding one: HardSigmoid by its pieces, the smooth ones refused
  using Net = Sequential<Input<4>, Dense<3>, Sigmoid, Dense<3>, Tanh, HardSigmoid, HardSwish, SiLU, GELU, Dense<2>>;
  Net net;
  initialize(net, 1);
  net.layer<7>().tanh_approximation = true;
  const std::string h = io::generate_header(net, {.name = "smooth"});
  for (const char* t : {"nnlens::Sigmoid", "nnlens::Tanh", "nnlens::HardSigmoid", "nnlens::HardSwish", "nnlens::SiLU",
                        "nnlens::GELU", ".tanh_approximation = true;", ".alpha = "})
    CHECK_MESSAGE(h.find(t) != std::string::npos, t);
  Sequential<Input<4>, Dense<3>, HardSigmoid, Dense<2>> pw;
  initialize(pw, 2);
  const std::string f = io::generate_freestanding_header(to_dynamic(pw), {.name = "pw"});
  CHECK(f.find("pwl_map") != std::string::npos);
  auto refused = [](auto op) {
    using L = decltype(op);
    Sequential<Input<4>, Dense<3>, L> n;
    initialize(n, 3);
    const std::string name(layer_traits<L>::name);
    CAPTURE(name);
    try {
      (void)io::generate_freestanding_header(to_dynamic(n), {.name = "x"});
      FAIL("no error");
    } catch (const value_error& e) {
      CHECK(std::string(e.what()).find(name) != std::string::npos);
      CHECK(std::string(e.what()).find("no freestanding form") != std::string::npos);
    }
  };
  refused(Sigmoid{});
  refused(Tanh{});
  refused(HardSwish{});
  refused(SiLU{});
  refused(GELU{});
}

TEST_CASE("ExactLine: HardSigmoid's breaks are its two knots; the smooth ones are refused, naming the layer") {
  SUBCASE("one unit: knots -2 and 2 of HardSigmoid{0.25, 0.5} on the segment -4 -> 4: t = 1/4, 3/4") {
    Sequential<Input<1>, HardSigmoid> net;
    net.layer<0>() = HardSigmoid{0.25, 0.5};
    const auto r = exact_line(net, std::vector<double>{-4}, std::vector<double>{4});
    CHECK(r.t == std::vector<double>{0, 0.25, 0.75, 1});
    REQUIRE(r.values.size() == 4);
    CHECK(r.values[0] == 0.0);
    CHECK(r.values[1] == 0.0);
    CHECK(r.values[2] == 1.0);
    CHECK(r.values[3] == 1.0);
  }
  SUBCASE("two units with PyTorch's default (knots ±3): x0 on -6 -> 6, x1 = 2 x0") {
    Sequential<Input<2>, HardSigmoid> net;
    const auto r = exact_line(net, std::vector<double>{-6, -12}, std::vector<double>{6, 12});
    CHECK(r.t == std::vector<double>{0, 0.25, 0.375, 0.625, 0.75, 1});
  }
  SUBCASE("a decreasing one (alpha < 0) in a DynamicNetwork: the same knots, sorted") {
    Sequential<Input<1>, HardSigmoid> net;
    net.layer<0>() = HardSigmoid{-0.25, 0.5};
    const auto r = exact_line(to_dynamic(net), std::vector<double>{-4}, std::vector<double>{4});
    CHECK(r.t == std::vector<double>{0, 0.25, 0.75, 1});
  }
  SUBCASE("Sigmoid, Tanh, HardSwish, SiLU, GELU in a DynamicNetwork: logic_error naming the op and its place") {
    auto refuse = [](auto op, const char* name) {
      Sequential<Input<3>, Dense<4, double>, ReLU, Dense<4, double>, decltype(op), Dense<2, double>> net;
      initialize(net, 8);
      const auto d = to_dynamic(net);
      try {
        (void)exact_line(d, std::vector<double>{0, 0, 0}, std::vector<double>{1, 2, 3});
        FAIL("no error");
      } catch (const logic_error& e) {
        const std::string w = e.what();
        CAPTURE(w);
        CHECK(w.find(name) != std::string::npos);
        CHECK(w.find("layer 3") != std::string::npos);
        CHECK(w.find("not piecewise-linear") != std::string::npos);
        CHECK(w.find("logits") == std::string::npos);  // not an output distribution: no "drop it" hint
      }
    };
    refuse(Sigmoid{}, "Sigmoid");
    refuse(Tanh{}, "Tanh");
    refuse(HardSwish{}, "HardSwish");
    refuse(SiLU{}, "SiLU");
    refuse(GELU{}, "GELU");
  }
  static_assert(PiecewiseLinearLayer<HardSigmoid>);
  static_assert(!PiecewiseLinearLayer<Sigmoid> && !PiecewiseLinearLayer<Tanh> && !PiecewiseLinearLayer<HardSwish> &&
                !PiecewiseLinearLayer<SiLU> && !PiecewiseLinearLayer<GELU>);
}

namespace {
Dense<1, double> unit_dense(double w) {
  Dense<1, double> d;
  d.W = tensor<double, 2>::from_shape({1, 1});
  d.b = tensor<double, 1>::from_shape({1});
  d.W(0, 0) = w;
  d.b(0) = 0;
  return d;
}
template <class Act>
contrib_table slice_one(Act act, double sample = -3.0) {
  // x -> h = x -> a = act(h) -> y = a; profile x in {-4, 0} (mean -2), the sample x (Δh = x + 2)
  Sequential<Input<1>, Dense<1, double>, Act, Dense<1, double>> net;
  net.template layer<0>() = unit_dense(1);
  net.template layer<1>() = act;
  net.template layer<2>() = unit_dense(1);
  xt::xarray<double> P = xt::xarray<double>::from_shape({2, 1});
  P(0, 0) = -4.0, P(1, 0) = 0.0;
  const auto p = profile_network(net, P);
  xt::xarray<double> X = xt::xarray<double>::from_shape({1, 1});
  X(0, 0) = sample;
  return nnslicer(net, p, X, criterion::target(0), {.theta = 0});
}
}  // namespace

TEST_CASE("NNSlicer: monotone ones pass the sign of Δx, the non-monotone ones the sign of slope·Δx") {
  // Tanh: Δa = tanh(-3) - mean < 0, so y votes -·- = + into a; a passes Δh (-1) on: h gets + as well
  const auto tt = slice_one(Tanh{});
  CHECK(tt.neurons[2] == std::vector<std::int64_t>{1});
  CHECK(tt.neurons[1] == std::vector<std::int64_t>{1});
  // SiLU at h = -3 is on its falling branch (slope ≈ -0.088): c = slope·Δh > 0, so h gets -1
  CHECK(slope_of(SiLU{}, -3.0) < 0);
  const auto ts = slice_one(SiLU{});
  CHECK(ts.neurons[2] == std::vector<std::int64_t>{1});
  CHECK(ts.neurons[1] == std::vector<std::int64_t>{-1});
  // GELU at -3: slope ≈ -0.012 (falling), the same reversal; HardSwish at -2.5 (Δh = -0.5): slope
  // -1/3, Δa = hardswish(-2.5) - 0 < 0: the same reversal
  CHECK(slope_of(GELU{}, -3.0) < 0);
  CHECK(slice_one(GELU{}).neurons[1] == std::vector<std::int64_t>{-1});
  CHECK(slice_one(HardSwish{}, -2.5).neurons[1] == std::vector<std::int64_t>{-1});
  // at -3 HardSwish is 0 for the sample and for both profile inputs: Δa = 0, nothing is voted
  CHECK(slice_one(HardSwish{}).neurons[2] == std::vector<std::int64_t>{0});
  // HardSigmoid increasing: Δa = 0 - 0.25 < 0 with Δh = -1 (pass-through): h gets +1.  Decreasing
  // (alpha < 0): Δa = 1 - 0.75 > 0 with Δh = -1; the item -Δh > 0 agrees with Δa, so h gets +1 as
  // well (the pass-through item Δh would have given -1)
  CHECK(slice_one(HardSigmoid{0.25, 0.5}).neurons[1] == std::vector<std::int64_t>{1});
  CHECK(slice_one(HardSigmoid{-0.25, 0.5}).neurons[1] == std::vector<std::int64_t>{1});
}

TEST_CASE("LRP: relevance passes through the smooth activations unchanged") {
  // x (2) -> Dense W1 (no bias) -> Sigmoid -> Dense w2 (no bias) -> z; epsilon rule with ε -> 0
  Sequential<Input<2>, Dense<2, double>, Sigmoid, Dense<1, double>> net;
  auto& d1 = net.layer<0>();
  d1.W = tensor<double, 2>::from_shape({2, 2});
  d1.b = tensor<double, 1>::from_shape({2});
  d1.W(0, 0) = 1.0, d1.W(0, 1) = -0.5, d1.W(1, 0) = 0.25, d1.W(1, 1) = 2.0;
  d1.b.fill(0);
  auto& d2 = net.layer<2>();
  d2.W = tensor<double, 2>::from_shape({2, 1});
  d2.b = tensor<double, 1>::from_shape({1});
  d2.W(0, 0) = 1.5, d2.W(1, 0) = -0.75;
  d2.b(0) = 0;
  const double x0 = 0.8, x1 = -0.6;
  xt::xarray<double> X = {{x0, x1}};
  const double h0 = x0 * 1.0 + x1 * 0.25, h1 = x0 * -0.5 + x1 * 2.0;
  const double s0 = sigmoid_ref(h0), s1 = sigmoid_ref(h1);
  // R at the sigmoid outputs: s_j w_j (their sum is z); passed to h unchanged, then h_j's share by x_i W_ij / h_j
  const double R0 = s0 * 1.5, R1 = s1 * -0.75;
  const double want0 = x0 * 1.0 / h0 * R0 + x0 * -0.5 / h1 * R1;
  const double want1 = x1 * 0.25 / h0 * R0 + x1 * 2.0 / h1 * R1;
  const auto R = relevance(net, X);
  CHECK(R(0, 0) == doctest::Approx(want0).epsilon(1e-12));
  CHECK(R(0, 1) == doctest::Approx(want1).epsilon(1e-12));
  // every smooth activation has the pass-through rule
  static_assert(relevance_rule<Sigmoid>::passthrough && relevance_rule<Tanh>::passthrough &&
                relevance_rule<HardSigmoid>::passthrough && relevance_rule<HardSwish>::passthrough &&
                relevance_rule<SiLU>::passthrough && relevance_rule<GELU>::passthrough);
}

TEST_CASE("int8 quantisation runs the smooth activations in float between dequantise and requantise") {
  using Net = Sequential<Input<6>, Dense<16>, SiLU, Dense<16>, GELU, Dense<16>, Sigmoid, Dense<4>>;
  Net net;
  initialize(net, 12);
  std::mt19937_64 r(13);
  xt::xarray<float> cal = xt::xarray<float>::from_shape({64, 6});
  for (auto& v : cal) v = float(randn(1, r, 1.5)[0]);
  const auto q = compress::quantize(net, cal);
  const auto qd = compress::quantize(to_dynamic(net), cal);
  const auto y = forward(net, cal), yq = q.forward(cal), yqd = qd.forward(cal);
  REQUIRE(y.size() == yq.size());
  double worst = 0, scale = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    worst = std::max(worst, std::abs(double(y.data()[i]) - double(yq.data()[i])));
    scale = std::max(scale, std::abs(double(y.data()[i])));
  }
  MESSAGE("int8 twin of a SiLU/GELU/Sigmoid MLP: worst |float - int8| " << worst << " of max |y| " << scale);
  CHECK(worst <= 0.1 * (1 + scale));
  check_bitwise(yq, yqd);  // the static and run-time forms: one code path
}

namespace {
// torch 1.13 (torch.nn.functional, float64, y.sum().backward()), written out by a script at the
// time this test was written: y and dy/dx at `probes`.  The suite needs no torch.
struct torch_row {
  std::vector<double> y, dydx;
};

const torch_row torch_sigmoid{{0x1.21d0b15711bf3p-11, 0x1.848343c905445p-5, 0x1.868d2916eca5bp-4, 0x1.759b8355a1bb0p-3,
     0x1.136561454ba86p-2, 0x1.9af19f3d3169cp-2, 0x1.0000000000000p-1, 0x1.261d545e46a8bp-1,
     0x1.764d4f5d5a2bdp-1, 0x1.c2f7d5a8a79c9p-1, 0x1.e7b7cbc36fabdp-1, 0x1.fa5feb616fe8fp-1,
     0x1.ffefd390a9cc1p-1},
    {0x1.21a7ae3bc0d76p-11, 0x1.72165282c6f73p-5, 0x1.615002a66a779p-4, 0x1.3173b1efa6ef5p-3,
     0x1.92a946fa34394p-3, 0x1.ec0dd36bc78e1p-3, 0x1.0000000000000p-2, 0x1.f4a68f2f93b7dp-3,
     0x1.92a946fa34394p-3, 0x1.ae0dc0f990c4cp-4, 0x1.72165282c6f5fp-5, 0x1.64108aa4d5fe8p-7,
     0x1.02bec8b6351bap-13}};
const torch_row torch_tanh{{-0x1.ffffeb78a3c73p-1, -0x1.fd77d111a0b00p-1, -0x1.f4bfd6c2dfd1ep-1, -0x1.cf6f9786df577p-1,
     -0x1.85efab514f394p-1, -0x1.8511573c242d6p-2, 0x0.0p+0, 0x1.2a4dda7d914fap-2,
     0x1.85efab514f394p-1, 0x1.ed9505e1bc3d4p-1, 0x1.fd77d111a0b00p-1, 0x1.ffdfa72153983p-1,
     0x1.fffffefa59d78p-1},
    {0x1.4875bcf74812fp-20, 0x1.434a517bbc5e6p-7, 0x1.64108aa4d5fe8p-5, 0x1.72165282c6f75p-3,
     0x1.ae0dc0f990c46p-2, 0x1.b6164976d0cafp-1, 0x1.0000000000000p+0, 0x1.d48cd4f4cff5ep-1,
     0x1.ae0dc0f990c46p-2, 0x1.2162c262e0518p-4, 0x1.434a517bbc5e6p-7, 0x1.02bec8b6349bbp-11,
     0x1.05a6283d24f16p-24}};
const torch_row torch_hardsigmoid{{0x0.0p+0, 0x0.0p+0, 0x1.0000000000000p-3, 0x1.0000000000000p-2,
     0x1.5555555555555p-2, 0x1.bbbbbbbbbbbbcp-2, 0x1.0000000000000p-1, 0x1.1999999999999p-1,
     0x1.5555555555555p-1, 0x1.aaaaaaaaaaaabp-1, 0x1.0000000000000p+0, 0x1.0000000000000p+0,
     0x1.0000000000000p+0},
    {0x0.0p+0, 0x0.0p+0, 0x1.5555560000000p-3, 0x1.5555560000000p-3,
     0x1.5555560000000p-3, 0x1.5555560000000p-3, 0x1.5555560000000p-3, 0x1.5555560000000p-3,
     0x1.5555560000000p-3, 0x1.5555560000000p-3, 0x0.0p+0, 0x0.0p+0,
     0x0.0p+0}};
const torch_row torch_hardswish{{-0x0.0p+0, -0x0.0p+0, -0x1.2000000000000p-2, -0x1.8000000000000p-2,
     -0x1.5555555555555p-2, -0x1.62fc962fc9630p-3, 0x0.0p+0, 0x1.51eb851eb851ep-3,
     0x1.5555555555555p-1, 0x1.aaaaaaaaaaaabp+0, 0x1.8000000000000p+1, 0x1.2000000000000p+2,
     0x1.2000000000000p+3},
    {0x0.0p+0, -0x1.0000000000000p-1, -0x1.0000000000000p-2, 0x0.0p+0,
     0x1.5555555555556p-3, 0x1.7777777777778p-2, 0x1.0000000000000p-1, 0x1.3333333333333p-1,
     0x1.aaaaaaaaaaaaap-1, 0x1.2aaaaaaaaaaaap+0, 0x1.8000000000000p+0, 0x1.0000000000000p+0,
     0x1.0000000000000p+0}};
const torch_row torch_silu{{-0x1.0fb3a641a0a34p-8, -0x1.236272d6c3f34p-3, -0x1.b75ece39ca3a6p-3, -0x1.1834a280394c4p-2,
     -0x1.136561454ba86p-2, -0x1.48c14c30f454ap-3, 0x0.0p+0, 0x1.60effed787fdap-3,
     0x1.764d4f5d5a2bdp-1, 0x1.c2f7d5a8a79c9p+0, 0x1.6dc9d8d293c0dp+1, 0x1.1cd5f466cef31p+2,
     0x1.1ff6e7015f82dp+3},
    {-0x1.d6a63a5a45240p-9, -0x1.68dfd9dfa7d09p-4, -0x1.9466dcdf82e77p-4, -0x1.52481e4762afep-5,
     0x1.2842f720c62f0p-4, 0x1.388874f46fe6ep-2, 0x1.0000000000000p-1, 0x1.4ba9d24ea4f02p-1,
     0x1.daf7a11be73a3p-1, 0x1.173da2f385e6ep+0, 0x1.168dfd9dfa7cfp+0, 0x1.09b48a90837a6p+0,
     0x1.0040af70c8250p+0}};
const torch_row torch_gelu{{-0x1.0d88000000000p-42, -0x1.096697b244880p-8, -0x1.c2a499060dcc0p-6, -0x1.9a76a44e16be2p-4,
     -0x1.44ed0bb7cb20ap-3, -0x1.1a474c623a67bp-3, 0x0.0p+0, 0x1.7ba510284da91p-3,
     0x1.aec4bd120d37ep-1, 0x1.f45a183e9b13dp+0, 0x1.7f7b4cb426ddcp+1, 0x1.1fffbfdefe40ep+2,
     0x1.2000000000000p+3},
    {-0x1.f8ea75e64d9ccp-40, -0x1.876f5a0927b0ep-7, -0x1.e4e1e3d43a62cp-5, -0x1.050e915f009d2p-3,
     -0x1.55429a56cca5cp-4, 0x1.94026659be29dp-3, 0x1.0000000000000p-1, 0x1.76f3aa40f346fp-1,
     0x1.155429a56cca6p+0, 0x1.15d1c05635c4cp+0, 0x1.030edeb4124f6p+0, 0x1.00047dba824d8p+0,
     0x1.0000000000000p+0}};
const torch_row torch_gelu_tanh{{-0x0.0p+0, -0x1.dcc2a01161280p-9, -0x1.bdaaa594428c0p-6, -0x1.9b5ad587570d8p-4,
     -0x1.453d22357147ap-3, -0x1.1a4b3eab6d57dp-3, 0x0.0p+0, 0x1.7ba3c031f6b79p-3,
     0x1.aeb0b772a3ae2p-1, 0x1.f46083b4f1aa6p+0, 0x1.7f88cf57fba7bp+1, 0x1.1fffea74785f2p+2,
     0x1.2000000000000p+3},
    {0x0.0p+0, -0x1.7b97086a6c452p-7, -0x1.ead1e2c9e21d8p-5, -0x1.058d3c7f73f84p-3,
     -0x1.53d225adc3890p-4, 0x1.94279ae28bb19p-3, 0x1.0000000000000p-1, 0x1.76ef6def98ae2p-1,
     0x1.153d225adc389p+0, 0x1.160a99d36889cp+0, 0x1.02f72e10d4d88p+0, 0x1.0001ebf2314dfp+0,
     0x1.0000000000000p+0}};
}  // namespace

TEST_CASE("the smooth activations against torch.nn.functional (values recorded from torch 1.13, float64)") {
  // slope_eps: torch's hardsigmoid_backward multiplies by the float 1.0f / 6 even in float64
  // (0x1.555556p-3), nnlens by alpha = 1/6 in double: they agree to float precision only.
  auto against = [](auto op, const torch_row& t, const char* what, double slope_eps = 1e-14) {
    const std::string name = what;
    CAPTURE(name);
    for (std::size_t i = 0; i < probes.size(); ++i) {
      CAPTURE(probes[i]);
      CHECK(value_of(op, probes[i]) == doctest::Approx(t.y[i]).epsilon(1e-15));
      CHECK(slope_of(op, probes[i]) == doctest::Approx(t.dydx[i]).epsilon(slope_eps));
    }
  };
  against(Sigmoid{}, torch_sigmoid, "Sigmoid");
  against(Tanh{}, torch_tanh, "Tanh");
  against(HardSigmoid{}, torch_hardsigmoid, "HardSigmoid", 1e-7);
  against(HardSwish{}, torch_hardswish, "HardSwish");
  against(SiLU{}, torch_silu, "SiLU");
  against(GELU{}, torch_gelu, "GELU");
  against(GELU{true}, torch_gelu_tanh, "GELU{true}");
}
