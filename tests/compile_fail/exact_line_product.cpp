// EXPECT: error_exact_line_needs_a_piecewise_linear_layer<nnlens::Product<
// ExactLine on a static network with a squeeze-and-excitation gate (Product: the product of two
// activations is not piecewise-linear, no pwl_rule) must not compile, and the diagnostic must name
// the layer.
#include <nnlens/exactline.hpp>
#include <nnlens/layers/all.hpp>
#include <nnlens/network/parameters.hpp>

#include <vector>

int main() {
  using SE = nnlens::Product<nnlens::Block<>, nnlens::Block<nnlens::Dense<4, double>, nnlens::HardSigmoid>>;
  nnlens::Sequential<nnlens::Input<3>, nnlens::Dense<4, double>, SE, nnlens::Dense<3, double>> net;
  nnlens::initialize(net, 1);
  const auto r = nnlens::exact_line(net, std::vector<double>{0, 0, 0}, std::vector<double>{1, 1, 1});
  return int(r.pieces());
}
