// examples/fashion_models.hpp -- the project's Fashion-MNIST architectures beyond LeNet-5 (which is
// nnlens::demo::LeNet5, tools/nnlens/lenet5_recipe.hpp), shared by the examples so that they share
// the cached weights in models-cache/.
//
//   FashionMLP   the NeuSemSlice paper's MLP 784-512-256-10 (535,818 parameters)
//   FashionVGG   a small VGG-style network: two blocks of two 3x3 convolutions (8 and 16
//                channels, padding 1) each closed by a 2x2 max-pool, then Dense 64 and the
//                10-way head (55,042 parameters); the NeuSemSlice paper's VGG-16/19 in miniature,
//                without BatchNorm, small enough to train on 2 cores in minutes
//
// All are trained with the demo's LeNet-5 recipe (Adam 1e-3, batch 64, 12 epochs, the last 3 at
// lr / 10, seed 1) and cached as models-cache/{mlp,vgg}-fashion-mnist-e12-s1.nnlw.
#pragma once

#include <nnlens/nnlens.hpp>

namespace nnlens_examples {

using FashionMLP = nnlens::Sequential<nnlens::Input<1, 28, 28>, nnlens::Flatten, nnlens::Dense<512>, nnlens::ReLU,
                                      nnlens::Dense<256>, nnlens::ReLU, nnlens::Dense<10>>;

using FashionVGG = nnlens::Sequential<nnlens::Input<1, 28, 28>,                                           //
                                      nnlens::Conv2D<8, 3, 1, 1>, nnlens::ReLU, nnlens::Conv2D<8, 3, 1, 1>,  //
                                      nnlens::ReLU, nnlens::MaxPool2D<2>,                                 // 8 x 14 x 14
                                      nnlens::Conv2D<16, 3, 1, 1>, nnlens::ReLU, nnlens::Conv2D<16, 3, 1, 1>, //
                                      nnlens::ReLU, nnlens::MaxPool2D<2>,                                 // 16 x 7 x 7
                                      nnlens::Flatten, nnlens::Dense<64>, nnlens::ReLU, nnlens::Dense<10>>;

}  // namespace nnlens_examples
