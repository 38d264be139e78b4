// The thrust overloads of the coverage analyses are found whatever the include order: here the
// host headers come first and nnlens/thrust/all.hpp last (importance_pass is reached through
// detail::importance_backend<Policy>, stream_neurons by argument-dependent lookup).
#include <doctest/doctest.h>

#include <nnlens/coverage/neuron_coverage.hpp>
#include <nnlens/nnlens.hpp>
#include <nnlens/thrust/all.hpp>

#include <string>
#include <vector>

using namespace nnlens;

TEST_CASE("thrust coverage: host headers first, thrust headers last, the thrust path is still taken") {
  // the device pass counter moves only when the thrust overloads run
  using Net = Sequential<Input<4>, Dense<6>, PReLU<>, Dense<3>>;
  Net s;
  initialize(s, 3);
  const auto net = to_dynamic(s);
  xt::xarray<float> X = xt::xarray<float>::from_shape({8, 4});
  for (std::size_t i = 0; i < X.size(); ++i) X.data()[i] = float(i % 5) - 2.f;
  std::vector<std::size_t> y(8, 0);
  for (std::size_t i = 0; i < 8; ++i) y[i] = i % 3;
  std::size_t before = thrust_device_passes();
  CHECK_NOTHROW(neuron_relevance_of(execution::seq, net, X, y, {.layer = 1}));
  CHECK(thrust_device_passes() == before);
  CHECK_NOTHROW(neuron_relevance_of(execution::thrust, net, X, y, {.layer = 1}));
  CHECK(thrust_device_passes() > before);
  before = thrust_device_passes();
  CHECK_NOTHROW(prepare_idc(execution::thrust, net, X, y, {.m = 2}));
  CHECK(thrust_device_passes() > before);
  nc_criterion nc(net);
  before = thrust_device_passes();
  CHECK_NOTHROW(measure(execution::thrust, net, X, nc));
  CHECK(thrust_device_passes() > before);
}
