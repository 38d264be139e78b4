// nnlens/layers/all.hpp -- every layer header, and the list of run-time layer alternatives.
#pragma once

#include <variant>

#include "nnlens/layers/dense.hpp"
#include "nnlens/layers/flatten.hpp"
#include "nnlens/layers/relu.hpp"

namespace nnlens::detail {
/// The alternatives of DynamicNetwork's layer variant (each layer's dynamic form).
template <class T>
struct dynamic_layer_list {
  using type = std::variant<Dense<dyn, T>, ReLU, Flatten>;
};
}  // namespace nnlens::detail
