// Product (the squeeze-and-excitation gate, layers/product.hpp) on the thrust device system: the
// join runs as one gate_multiply kernel, the gate's layers by their own kernels.  Forward and
// NNSlicer's profile against the host, LRP (all of R to the signal, none to the gate) against the
// host's, and ExactLine's refusal.  Tolerances as the other thrust suites: |thrust - host| <= 1e-5
// (1 + max |host|) in float, 1e-12 forward and 1e-10 relevance in double.
#include <nnlens/thrust/coverage.hpp>  // first: it overloads detail::importance_pass (see its header)

#include <doctest/doctest.h>

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
using SENet = Sequential<Input<3, 6, 6>, Conv2D<8, 3, 1, 1, 1, 1, T>, ReLU,
                         Product<Block<>, Block<GlobalAvgPool, Conv2D<4, 1, 1, 0, 1, 1, T>, ReLU, Conv2D<8, 1, 1, 0, 1, 1, T>,
                                              HardSigmoid>>,
                         Conv2D<4, 1, 1, 0, 1, 1, T>, SiLU,
                         Product<Block<Conv2D<4, 3, 1, 1, 1, 1, T>>, Block<Conv2D<4, 3, 1, 1, 1, 1, T>, Sigmoid>>,
                         GlobalAvgPool, Flatten, Dense<5, T>>;
}  // namespace

TEST_CASE("thrust Product: forward and profile against the host, static and run-time") {
  SENet<float> net;
  initialize(net, 3);
  static_assert(ThrustLayer<std::decay_t<decltype(net.layer<2>())>>);
  const auto x = random_x<float>(20, shape(3, 6, 6), 4, -2.f, 2.f);
  CHECK(rel_diff(forward(execution::seq, net, x), forward(thrust_policy{.batch = 8}, net, x)) <= 1e-5);
  CHECK(rel_diff(forward(execution::seq, net, x), forward(execution::thrust, to_dynamic(net), x)) <= 1e-5);
  for (auto g : {granularity::element, granularity::channel})
    CHECK(profile_diff(profile_network(execution::seq, net, x, {.grain = g}),
                       profile_network(thrust_policy{.batch = 16}, net, x, {.grain = g})) <= 1e-5);
  SENet<double> nd;
  initialize(nd, 5);
  const auto xd = random_x<double>(10, shape(3, 6, 6), 6, -2., 2.);
  CHECK(rel_diff(forward(execution::seq, nd, xd), forward(execution::thrust, nd, xd)) <= 1e-12);
}

TEST_CASE("thrust Product: LRP gives the signal all of R, as the host") {
  SENet<double> nd;
  initialize(nd, 7);
  const auto xd = random_x<double>(12, shape(3, 6, 6), 8, -2., 2.);
  const double dd = relevance_diff(nd, xd, {.batch = 5});
  MESSAGE("relevance, SE network in double: worst relative difference " << dd);
  CHECK(dd <= 1e-10);
}

TEST_CASE("thrust Product: ExactLine refuses it, naming the layer") {
  SENet<double> nd;
  initialize(nd, 9);
  rows p(1, std::vector<double>(108, 0.0)), q(1, std::vector<double>(108, 1.0));
  try {
    (void)exact_lines(execution::thrust, to_dynamic(nd), p, q);
    FAIL("no error");
  } catch (const logic_error& e) {
    CHECK(std::string(e.what()).find("Product") != std::string::npos);
  }
}
