// EXPECT: error_exact_line_needs_a_piecewise_linear_layer<nnlens::Softmax>
// ExactLine on a static network with a layer that is not piecewise-linear (Softmax) must not
// compile, and the diagnostic must name the layer.
#include <nnlens/exactline.hpp>
#include <nnlens/layers/all.hpp>
#include <nnlens/network/parameters.hpp>

#include <vector>

int main() {
  nnlens::Sequential<nnlens::Input<3>, nnlens::Dense<4, double>, nnlens::ReLU, nnlens::Dense<3, double>, nnlens::Softmax> net;
  nnlens::initialize(net, 1);
  const auto r = nnlens::exact_line(net, std::vector<double>{0, 0, 0}, std::vector<double>{1, 1, 1});
  return int(r.pieces());
}
