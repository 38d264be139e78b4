// nnlens/layers/all.hpp -- every layer header, and the list of run-time layer alternatives.
#pragma once

#include <variant>

#include "nnlens/layers/affine.hpp"
#include "nnlens/layers/avg_pool2d.hpp"
#include "nnlens/layers/batch_norm.hpp"
#include "nnlens/layers/conv2d.hpp"
#include "nnlens/layers/dense.hpp"
#include "nnlens/layers/dropout.hpp"
#include "nnlens/layers/flatten.hpp"
#include "nnlens/layers/global_avg_pool.hpp"
#include "nnlens/layers/hard_tanh.hpp"
#include "nnlens/layers/leaky_relu.hpp"
#include "nnlens/layers/max_pool2d.hpp"
#include "nnlens/layers/prelu.hpp"
#include "nnlens/layers/relu.hpp"
#include "nnlens/layers/residual.hpp"
#include "nnlens/layers/softmax.hpp"

namespace nnlens::detail {
/// The alternatives of DynamicNetwork's layer variant (each layer's dynamic form).
/// The variant is recursive: DynamicResidual<T> holds two DynamicBlock<T>, each a std::vector of
/// this variant.  residual.hpp declares this template and DynamicBlock<T> (a vector of an
/// incomplete type is allowed); the variant is only instantiated after everything is complete.
template <class T>
struct dynamic_layer_list {
  using type = std::variant<Dense<dyn, T>, ReLU, Flatten,
                            Conv2DG<dyn, conv_geometry_dyn, T>, MaxPool2D<dyn>, AvgPool2D<dyn>, GlobalAvgPool,
                            LeakyReLU, HardTanh, Clamp, BatchNorm<dyn, T>, Affine<dyn, T>, Softmax, Dropout, Identity,
                            PReLU<dyn, T>,
                            DynamicResidual<T>>;
};
}  // namespace nnlens::detail
