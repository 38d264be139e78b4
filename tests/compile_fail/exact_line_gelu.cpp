// EXPECT: error_exact_line_needs_a_piecewise_linear_layer<nnlens::GELU>
// ExactLine on a static network with a smooth activation (GELU: no pwl_rule) must not compile, and
// the diagnostic must name the layer.
#include <nnlens/exactline.hpp>
#include <nnlens/layers/all.hpp>
#include <nnlens/network/parameters.hpp>

#include <vector>

int main() {
  nnlens::Sequential<nnlens::Input<3>, nnlens::Dense<4, double>, nnlens::GELU, nnlens::Dense<3, double>> net;
  nnlens::initialize(net, 1);
  const auto r = nnlens::exact_line(net, std::vector<double>{0, 0, 0}, std::vector<double>{1, 1, 1});
  return int(r.pieces());
}
