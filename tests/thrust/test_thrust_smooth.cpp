// The smooth activations (Sigmoid, Tanh, HardSigmoid, HardSwish, SiLU, GELU both forms) on the
// thrust device system, run from their ElementwiseMap functor with nothing in thrust/ naming them:
// forward and NNSlicer's profile against the host, LRP by the pass-through rule, ExactLine on
// HardSigmoid (its knots) and the refusal of the others.
// Tolerances: on the OMP device system the device runs the host's functor with the host's libm:
// bit-identical for the weightless networks; as CUDA (nvcc) exp, tanh and erf are the device's own,
// so those compare within 4e-7 (float) and 1e-15 (double) relative to 1 + |host|.  With Dense
// around them: |thrust - host| <= 1e-5 (1 + max |host|) in float, relevance 1e-10 in double.
#include <nnlens/thrust/coverage.hpp>  // first: it overloads detail::importance_pass (see its header)

#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include <nnlens/coverage/lrp.hpp>
#include <nnlens/exactline/line.hpp>
#include <nnlens/layers/all.hpp>
#include <nnlens/network/dynamic_network.hpp>
#include <nnlens/network/forward.hpp>
#include <nnlens/network/parameters.hpp>
#include <nnlens/nnslicer/profile.hpp>
#include <nnlens/thrust/default.hpp>
#include <nnlens/thrust/exactline.hpp>
#include <nnlens/thrust/forward.hpp>
#include <nnlens/thrust/profile.hpp>
#include <nnlens/thrust/relevance.hpp>

#include "thrust_test_util.hpp"

using namespace nnlens;
using namespace nnlens_thrust_test;

namespace {
template <class T>
bool same_map(const xt::xarray<T>& h, const xt::xarray<T>& d) {
#if defined(__CUDACC__)
  const double tol = sizeof(T) == 4 ? 4e-7 : 1e-15;
  if (h.size() != d.size()) return false;
  for (std::size_t i = 0; i < h.size(); ++i)
    if (!(std::abs(double(h.data()[i]) - double(d.data()[i])) <= tol * (1 + std::abs(double(h.data()[i]))))) return false;
  return true;
#else
  return bit_identical(h, d);
#endif
}

template <class T>
using Mlp = Sequential<Input<10>, Dense<12, T>, Sigmoid, Dense<12, T>, Tanh, Dense<12, T>, HardSigmoid, Dense<12, T>,
                       HardSwish, Dense<12, T>, SiLU, Dense<12, T>, GELU, Dense<8, T>, GELU, Dense<4, T>>;
template <class T>
Mlp<T> make_mlp(std::uint64_t seed) {
  Mlp<T> n;
  initialize(n, seed);
  n.template layer<5>() = HardSigmoid{0.3, 0.4};
  n.template layer<13>().tanh_approximation = true;
  return n;
}
}  // namespace

TEST_CASE("thrust smooth activations: every one is an element-wise map the backend runs") {
  static_assert(ElementwiseMap<Sigmoid> && ElementwiseMap<Tanh> && ElementwiseMap<HardSigmoid> && ElementwiseMap<HardSwish> &&
                ElementwiseMap<SiLU> && ElementwiseMap<GELU>);
  static_assert(ThrustLayer<Sigmoid> && ThrustLayer<Tanh> && ThrustLayer<HardSigmoid> && ThrustLayer<HardSwish> &&
                ThrustLayer<SiLU> && ThrustLayer<GELU>);
  static_assert(ThrustLrpLayer<Sigmoid> && ThrustLrpLayer<GELU> && ThrustLrpLayer<HardSwish>);
  static_assert(detail::thrust_supported_type<DynamicNetwork>());
}

TEST_CASE("thrust smooth activations: forward of each alone against the host, float and double, ±1e4 included") {
  auto one = [&](auto op) {
    using L = decltype(op);
    CAPTURE(std::string(layer_traits<L>::name));
    Sequential<Input<64>, L> s;
    s.template layer<0>() = op;
    auto xs = random_x<float>(9, shape(64), 13, -8.f, 8.f);
    xs.data()[0] = 1e4f, xs.data()[1] = -1e4f, xs.data()[2] = 0.f, xs.data()[3] = -0.f, xs.data()[4] = -3.f;
    const auto hf = forward(execution::seq, s, xs);
    const auto df = forward(execution::thrust, s, xs);
    CHECK(same_map(hf, df));
    for (float v : df) CHECK(std::isfinite(v));
    auto xd = random_x<double>(9, shape(64), 14, -8., 8.);
    xd.data()[0] = 1e4, xd.data()[1] = -1e4;
    CHECK(same_map(forward(execution::seq, s, xd), forward(execution::thrust, to_dynamic(s), xd)));
  };
  one(Sigmoid{});
  one(Tanh{});
  one(HardSigmoid{});
  one(HardSigmoid{-0.2, 0.5});
  one(HardSwish{});
  one(SiLU{});
  one(GELU{});
  one(GELU{true});
}

TEST_CASE("thrust smooth activations: with Dense around them, forward, profile and LRP against the host") {
  const auto mlp = make_mlp<float>(3);
  const auto x = random_x<float>(50, shape(10), 4, -3.f, 3.f);
  CHECK(rel_diff(forward(execution::seq, mlp, x), forward(thrust_policy{.batch = 16}, mlp, x)) <= 1e-5);
  CHECK(rel_diff(forward(execution::seq, mlp, x), forward(execution::thrust, to_dynamic(mlp), x)) <= 1e-5);
  for (auto g : {granularity::element, granularity::channel})
    CHECK(profile_diff(profile_network(execution::seq, mlp, x, {.grain = g}),
                       profile_network(thrust_policy{.batch = 32}, mlp, x, {.grain = g})) <= 1e-5);
  const auto mlpd = make_mlp<double>(5);
  const auto xd = random_x<double>(20, shape(10), 6, -3., 3.);
  CHECK(rel_diff(forward(execution::seq, mlpd, xd), forward(execution::thrust, mlpd, xd)) <= 1e-12);
  const double dd = relevance_diff(mlpd, xd, {.batch = 8});
  MESSAGE("relevance, smooth MLP in double: worst relative difference " << dd);
  CHECK(dd <= 1e-10);
}

TEST_CASE("thrust smooth activations: ExactLine splits at HardSigmoid's knots, refuses the smooth ones") {
  Sequential<Input<1>, Dense<1, double>, HardSigmoid, Dense<1, double>> n;
  n.layer<0>().W = {{1.0}};
  n.layer<0>().b = {0.0};
  n.layer<1>() = HardSigmoid{0.5, 0.5};  // knots -1, 1 on the segment -2 -> 2: t = 1/4, 3/4
  n.layer<2>().W = {{3.0}};
  n.layer<2>().b = {0.5};
  const auto d = exact_lines(execution::thrust, n, rows{{-2.0}}, rows{{2.0}});
  const auto h = exact_lines(execution::seq, n, rows{{-2.0}}, rows{{2.0}});
  check_same_lines(h, d);
  REQUIRE(d.size() == 1);
  CHECK(d[0].t == std::vector<double>{0.0, 0.25, 0.75, 1.0});
  CHECK(d[0].values == std::vector<double>{0.5, 0.5, 3.5, 3.5});

  Sequential<Input<1>, Dense<1, double>, SiLU, Dense<1, double>> s;
  initialize(s, 2);
  try {
    (void)exact_lines(execution::thrust, to_dynamic(s), rows{{-2.0}}, rows{{2.0}});
    FAIL("no error");
  } catch (const logic_error& e) {
    CHECK(std::string(e.what()).find("SiLU") != std::string::npos);
  }
}
