// The baseline of scripts/compile-times: an xtensor hello-world.
#include <xtensor/xarray.hpp>
#include <xtensor/xbuilder.hpp>
#include <xtensor/xmath.hpp>

int main() {
  xt::xarray<float> x = xt::zeros<float>({8, 10});
  xt::xarray<float> y = x + 1.f;
  return xt::sum(y)() == 80.f ? 0 : 1;
}
