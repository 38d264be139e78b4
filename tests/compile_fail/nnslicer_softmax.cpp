// EXPECT: error_nnslicer_needs_a_sign_rule<nnlens::Softmax>
// NNSlicer on a static network ending in Softmax (which has no contribution-sign rule) must not
// compile, and the diagnostic must name the layer: slice the logits instead.
#include <nnlens/layers/all.hpp>
#include <nnlens/network/parameters.hpp>
#include <nnlens/nnslicer.hpp>

int main() {
  nnlens::Sequential<nnlens::Input<3>, nnlens::Dense<4, double>, nnlens::ReLU, nnlens::Dense<3, double>, nnlens::Softmax> net;
  nnlens::initialize(net, 1);
  xt::xarray<double> x = xt::zeros<double>({2, 3});
  const auto p = nnlens::profile_network(net, x);
  const auto t = nnlens::nnslicer(net, p, x, nnlens::criterion::predicted());
  return int(t.samples);
}
