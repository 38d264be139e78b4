// The reference architectures shared by the benchmarks (and mirrored in compare_pytorch.py).
#pragma once

#include <nnlens/nnlens.hpp>

namespace bench {
using namespace nnlens;
using MLP = Sequential<Input<784>, Dense<256>, ReLU, Dense<256>, ReLU, Dense<256>, ReLU, Dense<256>, ReLU, Dense<256>,
                       ReLU, Dense<256>, ReLU, Dense<10>>;
}  // namespace bench

#if __has_include(<nnlens/layers/conv2d.hpp>) && __has_include(<nnlens/layers/max_pool2d.hpp>)
#define NNLENS_BENCH_HAS_LENET 1
#include <nnlens/layers/conv2d.hpp>
#include <nnlens/layers/max_pool2d.hpp>
namespace bench {
using LeNet5 = Sequential<Input<1, 28, 28>, Conv2D<6, 5, 1, 2>, ReLU, MaxPool2D<2>, Conv2D<16, 5>, ReLU, MaxPool2D<2>,
                          Flatten, Dense<120>, ReLU, Dense<84>, ReLU, Dense<10>>;
}  // namespace bench
#else
#define NNLENS_BENCH_HAS_LENET 0
#endif
