// EXPECT: error_lrp_needs_a_relevance_rule<nnlens::Softmax>
// LRP on a static network ending in Softmax (which has no relevance rule: LRP starts at the logits)
// must not compile, and the diagnostic must name the layer.
#include <nnlens/coverage/lrp.hpp>
#include <nnlens/layers/all.hpp>
#include <nnlens/network/parameters.hpp>

int main() {
  nnlens::Sequential<nnlens::Input<3>, nnlens::Dense<4, double>, nnlens::ReLU, nnlens::Dense<3, double>, nnlens::Softmax> net;
  nnlens::initialize(net, 1);
  xt::xarray<double> x = xt::zeros<double>({2, 3});
  const auto r = nnlens::relevance(net, x);
  return int(r.size());
}
