// tests/firmware/every_op.cpp -- writes the firmware check's third model: an ONNX file with every
// layer form `nnlens codegen --freestanding` supports (strided, dilated, grouped and padded
// convolutions, BatchNorm with real statistics, LeakyReLU, PReLU, HardTanh, Clamp, HardSigmoid, max
// and average pooling with padding and ceil mode, global average pooling, a channel slice (ONNX
// Slice) and a channel shuffle (Reshape, Transpose, Reshape), Flatten, Dense), random weights.
// The smooth activations (Sigmoid, Tanh, HardSwish, SiLU, GELU) and LayerNorm have no freestanding
// form.
//   every_op OUT.onnx
#include <cstdio>
#include <exception>
#include <random>

#include <nnlens/io/onnx_export.hpp>
#include <nnlens/nnlens.hpp>

using namespace nnlens;

using EveryOp = Sequential<Input<2, 13, 12>,
                           Conv2DG<4, conv_geometry{3, 3, 1, 2, 1, 1, 1, 0, 2, 1, 2}>,  // strides 1/2, pads, dilation 2, groups 2
                           BatchNorm<4>, LeakyReLU,
                           MaxPool2DG<pool_geometry{3, 2, 2, 2, 1, 0, 1, 0, true, true}>,  // padded, ceil mode
                           Conv2D<6, 3, 1, 1>, PReLU<6>, ChannelSlice<1, 5>, ChannelShuffle,  // channels 1..4 of 6, shuffled
                           AvgPool2DG<pool_geometry{2, 2, 1, 1, 0, 0, 1, 1, false, false}>,  // divisor: the input elements
                           HardTanh, Conv2D<8, 1>, GlobalAvgPool, Flatten, Dense<10>, Clamp, HardSigmoid>;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: every_op OUT.onnx\n");
    return 2;
  }
  try {
    EveryOp net;
    initialize(net, 5);
    std::mt19937_64 rng(6);
    std::uniform_real_distribution<float> u(-0.5f, 0.5f), pos(0.5f, 1.5f);
    auto& bn = std::get<1>(net.layers);
    for (std::size_t c = 0; c < 4; ++c)
      bn.gamma(c) = pos(rng), bn.beta(c) = u(rng), bn.running_mean(c) = u(rng), bn.running_var(c) = pos(rng);
    std::get<2>(net.layers).alpha = 0.125;
    auto& pr = std::get<5>(net.layers);
    for (auto& a : pr.a) a = u(rng);
    std::get<7>(net.layers).groups = 2;
    std::get<9>(net.layers) = HardTanh{-0.75, 0.5};
    std::get<14>(net.layers) = Clamp{-1.0, 2.0};
    std::get<15>(net.layers) = HardSigmoid{0.5, 0.5};  // knots -1, 1 inside the Clamp's [-1, 2]
    io::save_onnx(argv[1], net);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "every_op: %s\n", e.what());
    return 1;
  }
  return 0;
}
