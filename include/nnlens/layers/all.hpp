// nnlens/layers/all.hpp -- every layer header, and the list of run-time layer alternatives.
#pragma once

#include <variant>

#include "nnlens/core/codegen_form.hpp"
#include "nnlens/core/composite.hpp"
#include "nnlens/core/onnx_form.hpp"
#include "nnlens/core/reflect.hpp"
#include "nnlens/core/traits.hpp"

#include "nnlens/layers/affine.hpp"
#include "nnlens/layers/avg_pool2d.hpp"
#include "nnlens/layers/batch_norm.hpp"
#include "nnlens/layers/channel_shuffle.hpp"
#include "nnlens/layers/channel_slice.hpp"
#include "nnlens/layers/concat.hpp"
#include "nnlens/layers/conv2d.hpp"
#include "nnlens/layers/dense.hpp"
#include "nnlens/layers/dropout.hpp"
#include "nnlens/layers/flatten.hpp"
#include "nnlens/layers/gelu.hpp"
#include "nnlens/layers/global_avg_pool.hpp"
#include "nnlens/layers/hard_sigmoid.hpp"
#include "nnlens/layers/hard_swish.hpp"
#include "nnlens/layers/hard_tanh.hpp"
#include "nnlens/layers/layer_norm.hpp"
#include "nnlens/layers/leaky_relu.hpp"
#include "nnlens/layers/max_pool2d.hpp"
#include "nnlens/layers/prelu.hpp"
#include "nnlens/layers/product.hpp"
#include "nnlens/layers/relu.hpp"
#include "nnlens/layers/residual.hpp"
#include "nnlens/layers/sigmoid.hpp"
#include "nnlens/layers/silu.hpp"
#include "nnlens/layers/softmax.hpp"
#include "nnlens/layers/tanh.hpp"

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
                            PReLU<dyn, T>, Sigmoid, Tanh, HardSigmoid, HardSwish, SiLU, GELU,
                            ChannelShuffle, ChannelSlice<>, LayerNorm<dyn, T>,
                            DynamicResidual<T>, DynamicConcat<T>, DynamicProduct<T>>;
};
}  // namespace nnlens::detail

namespace nnlens::detail {
// Every run-time op has the rules that every form of the network needs (the tool, DynamicNetwork's
// readers and writers): a layer_traits (Layer), a codegen_rule and an onnx_export_rule; and an op
// with data declares its fields (NNLENS_FIELDS, core/reflect.hpp: codegen, scalar rebinding and
// `info` read them), unless it is a composite (its data are its branches).  A missing
// rule names the op in the compiler's message through the incomplete type below (the fmt trick).
// Analysis rules that an op may lack on purpose (Softmax has no pwl_rule, sign_rule or
// relevance_rule: it is not piecewise-linear) are checked where the analysis is called, with a
// message naming the op and the analysis.  An ONNX import rule is optional (Dense and Conv2D are
// read by io/onnx's graph rewriting).
template <class L>
struct error_op_lacks_a_rule_see_docs_adding_a_layer_md;
template <class L>
constexpr bool op_has_every_rule() {
  return named_check<error_op_lacks_a_rule_see_docs_adding_a_layer_md, L,
                     Layer<L> && CodegenLayer<L> && OnnxExportable<L> && (std::is_empty_v<L> || Reflected<L> || Composite<L>)>();
}
template <class V>
struct every_op_has_every_rule;
template <class... Ls>
struct every_op_has_every_rule<std::variant<Ls...>> {
  static constexpr bool value = (op_has_every_rule<Ls>() && ...);
};
static_assert(every_op_has_every_rule<typename dynamic_layer_list<float>::type>::value);
static_assert(every_op_has_every_rule<typename dynamic_layer_list<double>::type>::value);
}  // namespace nnlens::detail
