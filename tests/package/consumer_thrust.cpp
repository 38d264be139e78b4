// A program on nnlens::thrust from an installed nnlens (find_package(nnlens COMPONENTS thrust)):
// the forward pass on the thrust device system (OMP here) equals the host's.
#include <nnlens/thrust/all.hpp>
#include <nnlens/nnlens.hpp>

#include <cmath>
#include <cstdio>

using Net = nnlens::Sequential<nnlens::Input<3>, nnlens::Dense<4>, nnlens::ReLU, nnlens::Dense<2>>;

int main() {
  Net net;
  nnlens::initialize(net, 7);
  xt::xarray<float> x = {{0.5f, -1.f, 2.f}, {1.f, 1.f, 1.f}};
  auto host = nnlens::forward(net, x);
  auto dev = nnlens::forward(nnlens::execution::thrust, net, x);
  for (std::size_t i = 0; i < host.size(); ++i)
    if (std::abs(host.data()[i] - dev.data()[i]) > 1e-5f * (1 + std::abs(host.data()[i]))) return 1;
  std::printf("consumer_thrust ok: %zu outputs on the thrust backend (%zu device passes)\n", dev.size(),
              nnlens::thrust_device_passes());
  return nnlens::thrust_device_passes() > 0 ? 0 : 1;
}
