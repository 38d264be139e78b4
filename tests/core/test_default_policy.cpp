// The policy of calls that name none (core/execution.hpp: default_dispatch).  In the plain build
// it is execution::seq.  Built with NNLENS_DEFAULT_POLICY_THRUST (nnlens/thrust/all.hpp first) and
// run as test_core_thrust (NNLENS_DEFAULT_POLICY unset or "thrust"), every such call on a network
// with thrust kernels runs on execution::thrust, which this file proves with the device pass
// counter, and networks without thrust kernels stay on the host; run as test_core
// (NNLENS_DEFAULT_POLICY=seq), the same binary keeps every call on the host.
#include <doctest/doctest.h>

#include <nnlens/nnlens.hpp>

#include <random>
#include <string>
#include <type_traits>

using namespace nnlens;

namespace {
using Small = Sequential<Input<1, 8, 8>, Conv2D<4, 3>, ReLU, MaxPool2D<2>, Flatten, Dense<6>, ReLU, Dense<3>>;
using WithRes = Sequential<Input<6>, Dense<5>, Residual<Block<Dense<5>, ReLU>>, Dense<2>>;  // a composite

xt::xarray<float> inputs(std::vector<std::size_t> shp, std::uint64_t seed) {
  std::mt19937_64 r(seed);
  std::normal_distribution<double> n(0, 1);
  xt::xarray<float> x = xt::xarray<float>::from_shape(shp);
  for (auto& v : x) v = float(n(r));
  return x;
}

#if defined(NNLENS_DEFAULT_POLICY_THRUST)
const bool thrust_default = execution::default_is_thrust();
std::size_t passes() { return thrust_device_passes(); }
#else
constexpr bool thrust_default = false;
std::size_t passes() { return 0; }
#endif
}  // namespace

TEST_CASE("with_default_policy hands the callable the build's default policy") {
  // tests/CMakeLists.txt fails test_core_thrust on "seq" here and test_core on "thrust", so a run
  // registered with the wrong NNLENS_DEFAULT_POLICY cannot pass unnoticed
  MESSAGE("the default policy of this run: " << std::string(thrust_default ? "thrust" : "seq"));
  Small net;
  const bool seq = execution::with_default_policy(net, [](const auto& pol) {
    return std::is_same_v<std::decay_t<decltype(pol)>, execution::sequenced_policy>;
  });
  CHECK(seq == !thrust_default);
  // a composite network too: every analysis of it has a device form
  WithRes res;
  CHECK(execution::with_default_policy(res, [](const auto& pol) {
    return std::is_same_v<std::decay_t<decltype(pol)>, execution::sequenced_policy>;
  }) == !thrust_default);
  // calls on black boxes (no network)
  CHECK(execution::with_default_policy([](const auto& pol) {
          return std::is_same_v<std::decay_t<decltype(pol)>, execution::sequenced_policy>;
        }) == !thrust_default);
}

TEST_CASE("forward(net, X) runs where the default says, with the host's results") {
  Small net;
  initialize(net, 7);
  const auto x = inputs({13, 1, 8, 8}, 3);
  const std::size_t before = passes();
  const auto y = forward(net, x);
  const auto h = forward(execution::seq, net, x);
  REQUIRE(y.shape() == h.shape());
  double worst = 0;
  for (std::size_t i = 0; i < y.size(); ++i) worst = std::max(worst, double(std::abs(y.data()[i] - h.data()[i])));
  CHECK(worst <= 1e-5);
  if (thrust_default) {
    CHECK(passes() > before);  // it ran on the device
  } else {
    CHECK(worst == 0.0);
  }

  // the dynamic form: decided at run time from its layers
  const auto dnet = to_dynamic(net);
  const std::size_t before_dyn = passes();
  const auto yd = forward(dnet, x);
  CHECK(passes() - before_dyn == (thrust_default ? 1u : 0u));
  for (std::size_t i = 0; i < yd.size(); ++i) CHECK(yd.data()[i] == doctest::Approx(h.data()[i]).epsilon(1e-5));
}

TEST_CASE("networks with GlobalAvgPool and Softmax run where the default says (every op has thrust kernels)") {
  using Gap = Sequential<Input<2, 4, 4>, Conv2D<3, 3, 1, 1>, ReLU, GlobalAvgPool, Flatten, Dense<3>, Softmax>;
  Gap net;
  initialize(net, 5);
  const auto x = inputs({4, 2, 4, 4}, 9);
  const std::size_t before = passes();
  const auto y = forward(net, x);
  CHECK(passes() - before == (thrust_default ? 1u : 0u));
  const auto h = forward(execution::seq, net, x);
  for (std::size_t i = 0; i < y.size(); ++i) CHECK(y.data()[i] == doctest::Approx(h.data()[i]).epsilon(1e-5));
}

TEST_CASE("networks with a composite op run where the default says (forward and ExactLine)") {
  WithRes net;
  initialize(net, 5);
  const auto x = inputs({4, 6}, 9);
  const std::size_t before = passes();
  const auto y = forward(net, x);
  CHECK(passes() - before == (thrust_default ? 1u : 0u));
  const auto h = forward(execution::seq, net, x);
  for (std::size_t i = 0; i < y.size(); ++i) CHECK(y.data()[i] == doctest::Approx(h.data()[i]).epsilon(1e-5));
  const auto dnet = to_dynamic(net);
  const auto yd = forward(dnet, x);
  CHECK(passes() - before == (thrust_default ? 2u : 0u));
  for (std::size_t i = 0; i < yd.size(); ++i) CHECK(yd.data()[i] == doctest::Approx(h.data()[i]).epsilon(1e-5));
  const std::vector<std::vector<float>> A{{-1, 0, 1, 0.5f, -0.5f, 2}}, B{{1, 1, -1, 0, 0.5f, -2}};
  const auto l = exact_lines(dnet, A, B);
  CHECK(passes() - before == (thrust_default ? 3u : 0u));
  const auto lh = exact_lines(execution::seq, dnet, A, B);
  REQUIRE(l[0].t.size() == lh[0].t.size());
  for (std::size_t i = 0; i < l[0].t.size(); ++i) CHECK(l[0].t[i] == doctest::Approx(lh[0].t[i]).epsilon(1e-9));
}

TEST_CASE("profile_network(net, X) runs where the default says") {
  Small net;
  initialize(net, 11);
  const auto x = inputs({40, 1, 8, 8}, 4);
  const std::size_t before = passes();
  const auto p = profile_network(net, x);
  const auto h = profile_network(execution::seq, net, x);
  CHECK((passes() > before) == thrust_default);
  REQUIRE(p.sums.size() == h.sums.size());
  CHECK(p.samples == h.samples);
  for (std::size_t a = 0; a < p.sums.size(); ++a)
    for (std::size_t k = 0; k < p.sums[a].size(); ++k)
      CHECK(p.sums[a][k] == doctest::Approx(h.sums[a][k]).epsilon(1e-5).scale(1.0));
}

TEST_CASE("exact_lines(net, A, B) runs where the default says, with the host's pieces") {
  using Mlp = Sequential<Input<3>, Dense<8>, ReLU, Dense<8>, ReLU, Dense<2>>;
  Mlp net;
  initialize(net, 21);
  std::vector<std::vector<double>> A, B;
  std::mt19937_64 r(5);
  std::uniform_real_distribution<double> u(-2, 2);
  for (int i = 0; i < 6; ++i) {
    A.push_back({u(r), u(r), u(r)});
    B.push_back({u(r), u(r), u(r)});
  }
  const std::size_t before = passes();
  const auto lines = exact_lines(net, A, B);
  CHECK((passes() > before) == thrust_default);
  const auto host = exact_lines(execution::seq, net, A, B);
  REQUIRE(lines.size() == host.size());
  for (std::size_t i = 0; i < lines.size(); ++i) {
    REQUIRE(lines[i].t.size() == host[i].t.size());
    for (std::size_t j = 0; j < host[i].t.size(); ++j) CHECK(lines[i].t[j] == doctest::Approx(host[i].t[j]).epsilon(1e-12));
  }
}
