// The README's one-screen example, verbatim (the test suite builds and runs it).
#include <nnlens/network.hpp>  // the network alone; nnlens/nnlens.hpp adds every analysis

using LeNet5 = nnlens::Sequential<
    nnlens::Input<1, 28, 28>,
    nnlens::Conv2D<6, 5, /*stride*/ 1, /*pad*/ 2>, nnlens::ReLU, nnlens::MaxPool2D<2>,
    nnlens::Conv2D<16, 5>, nnlens::ReLU, nnlens::MaxPool2D<2>,
    nnlens::Flatten, nnlens::Dense<120>, nnlens::ReLU, nnlens::Dense<84>, nnlens::ReLU,
    nnlens::Dense<10>>;                        // a wrong chain is a compile error naming the layer

int main() {
  LeNet5 net;
  nnlens::initialize(net, /*seed*/ 1);         // or load trained weights
  xt::xarray<float> x = xt::zeros<float>({8, 1, 28, 28});          // [batch, C, H, W]
  auto logits = nnlens::forward(nnlens::execution::par, net, x);   // [8, 10]
  auto dyn = nnlens::to_dynamic(net);          // the same network with run-time extents
  auto same = nnlens::forward(dyn, x);         // identical outputs, same code path
  return logits == same ? 0 : 1;
}
