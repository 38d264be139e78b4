// EXPECT: error_exact_line_needs_a_piecewise_linear_layer<nnlens::LayerNorm<4, double>
// ExactLine on a static network with a LayerNorm (no pwl_rule: a normalisation is not piecewise
// linear) must not compile, and the diagnostic must name the layer.
#include <nnlens/exactline.hpp>
#include <nnlens/layers/all.hpp>
#include <nnlens/network/parameters.hpp>

#include <vector>

int main() {
  nnlens::Sequential<nnlens::Input<3>, nnlens::Dense<4, double>, nnlens::LayerNorm<4, double>, nnlens::Dense<3, double>> net;
  nnlens::initialize(net, 1);
  const auto r = nnlens::exact_line(net, std::vector<double>{0, 0, 0}, std::vector<double>{1, 1, 1});
  return int(r.pieces());
}
