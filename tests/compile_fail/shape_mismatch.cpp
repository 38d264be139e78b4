// EXPECT: error_layer_rejects_input_shape<1, nnlens::Dense<10[^>]*>, nnlens::shape\{3, .*1, 28, 28.*Dense needs a flat
// A Dense layer straight after an image input (no Flatten) must not compile, and the diagnostic
// must name the layer index, the layer, its input shape and what it expected.
#include <nnlens/layers/dense.hpp>
#include <nnlens/layers/input.hpp>
#include <nnlens/layers/relu.hpp>
#include <nnlens/network/sequential.hpp>

using Bad = nnlens::Sequential<nnlens::Input<1, 28, 28>, nnlens::ReLU, nnlens::Dense<10>>;

int main() {
  Bad net;
  (void)net;
}
