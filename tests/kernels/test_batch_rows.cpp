// A sample's forward pass does not depend on the batch it comes in (rows of batch 1 and 2 against
// the rows of a batch of 16, LeNet-5 and an MLP over K > 256, float, seq and par), at the build
// type's flags: DFlare's lockstep driver asks a black box for many seeds at once and must see what
// the sequential driver sees one at a time (docs/dev/toolchain.md).
#include <doctest/doctest.h>

#include <nnlens/network/forward.hpp>
#include <nnlens/network/parameters.hpp>
#include <nnlens/network/sequential.hpp>
#include <nnlens/layers/all.hpp>

#include <cstddef>
#include <random>

#include <xtensor/xview.hpp>

namespace {

template <class Net, class Policy>
std::size_t rows_that_differ(const Policy& pol, const Net& net, const xt::xarray<float>& x) {
  const auto all = nnlens::forward(pol, net, x);
  const std::size_t n = x.shape()[0], out = all.size() / n;
  std::size_t differ = 0;
  for (std::size_t i = 0; i + 1 < n; ++i)
    for (std::size_t b : {std::size_t(1), std::size_t(2)}) {
      const xt::xarray<float> xi = xt::view(x, xt::range(i, i + b));
      const auto yi = nnlens::forward(pol, net, xi);
      for (std::size_t j = 0; j < b * out; ++j) differ += yi.data()[j] != all.data()[i * out + j];
    }
  return differ;
}

}  // namespace

TEST_CASE("a sample's forward pass does not depend on its batch (LeNet-5 and an MLP, seq and par)") {
  using namespace nnlens;
  using LeNet5 = Sequential<Input<1, 28, 28>, Conv2D<6, 5, 1, 2>, ReLU, MaxPool2D<2>, Conv2D<16, 5>, ReLU, MaxPool2D<2>,
                            Flatten, Dense<120>, ReLU, Dense<84>, ReLU, Dense<10>>;
  using MLP = Sequential<Input<300>, Dense<70>, ReLU, Dense<600>, ReLU, Dense<5>>;
  LeNet5 lenet;
  MLP mlp;
  initialize(lenet, 5);
  initialize(mlp, 6);
  std::mt19937 r(1);
  std::uniform_real_distribution<float> u(0, 1);
  xt::xarray<float> a = xt::xarray<float>::from_shape({16, 1, 28, 28}), b = xt::xarray<float>::from_shape({16, 300});
  for (auto& v : a) v = u(r);
  for (auto& v : b) v = u(r) - 0.5f;
  CHECK(rows_that_differ(execution::seq, lenet, a) == 0);
  CHECK(rows_that_differ(execution::par, lenet, a) == 0);
  CHECK(rows_that_differ(execution::seq, mlp, b) == 0);
  CHECK(rows_that_differ(execution::par, mlp, b) == 0);
}
