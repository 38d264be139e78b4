// nnlens/layers/all.hpp -- every layer header, and the list of run-time layer alternatives.
#pragma once

#include <variant>

#include "nnlens/layers/avg_pool2d.hpp"
#include "nnlens/layers/conv2d.hpp"
#include "nnlens/layers/dense.hpp"
#include "nnlens/layers/flatten.hpp"
#include "nnlens/layers/global_avg_pool.hpp"
#include "nnlens/layers/max_pool2d.hpp"
#include "nnlens/layers/relu.hpp"

namespace nnlens::detail {
/// The alternatives of DynamicNetwork's layer variant (each layer's dynamic form).
template <class T>
struct dynamic_layer_list {
  using type = std::variant<Dense<dyn, T>, ReLU, Flatten,
                            Conv2DG<dyn, conv_geometry_dyn, T>, MaxPool2D<dyn>, AvgPool2D<dyn>, GlobalAvgPool>;
};
}  // namespace nnlens::detail
