// nnlens/core/traits.hpp -- every customization point of nnlens, and the concepts that check them.
//
// A layer is a data-only aggregate (weights as xtensor members, hyper-parameters as template
// arguments or, for `dyn` layers, as members).  Everything nnlens knows about a layer comes from
// trait classes specialised in the layer's own header (the way fmt's formatter<T> works):
//
//   layer_traits<L>   REQUIRED (concept Layer)
//       static constexpr std::string_view name;              // "Dense", "Conv2D", ...
//       static constexpr shape_check infer(shape in);        // type-level shape inference; an
//                                                            // extent the type does not fix is dyn
//       static shape output_shape(const L&, shape in);       // run-time: checks the weights against
//                                                            // `in`, throws shape_error naming what
//       template <class T> static void forward(const L&, const forward_args<T>&);
//       template <class T> static void backward(const L&, const backward_args<T>&, L* grad);
//           // dx = J^T dy (when a.dx != nullptr); parameter gradients are ADDED to *grad (when
//           // grad != nullptr).  Both work on a whole batch (leading batch axis).
//     optional (defaults in layer_defaults):
//       static constexpr std::size_t scratch_size(const L*, shape in, shape out, std::size_t batch);
//           // temporary scalars forward/backward may use; L* may be nullptr for a layer whose
//           // hyper-parameters are all static (so it can be evaluated at compile time)
//       static constexpr std::size_t cache_size(const L*, shape in, shape out);
//           // scalars per sample that forward leaves for backward (e.g. max-pool arg-max)
//       static auto parameters(L&) / parameters(const L&);   // std::array<std::span<T>, K>
//       static auto buffers(L&) / buffers(const L&);         // non-trained state (BatchNorm's
//                                                            // running statistics), same form
//       static void init(L&, shape in, std::mt19937_64&);    // allocate + default initialisation
//       static constexpr bool inference_only;                // true: forward is the identity of
//                                                            // training-only behaviour (Dropout)
//   relevance_rule<L>  LRP rules (coverage)           -- concept RelevanceLayer (core/relevance.hpp)
//   sign_rule<L>       NNSlicer contribution signs    -- concept SignLayer (sign_ctx below)
//   pwl_rule<L>        ExactLine split rules          -- concept PiecewiseLinearLayer
//   rebind_scalar<L,U> the same layer with weights of scalar type U (identity for weightless layers)
//
// Each algorithm entry point checks the concept it needs with a static_assert that names the layer
// (see detail::require_layer below).
#pragma once

#include <array>
#include <concepts>
#include <cstddef>
#include <random>
#include <span>
#include <string_view>
#include <type_traits>
#include <vector>

#include "nnlens/core/hd.hpp"
#include "nnlens/core/relevance.hpp"
#include "nnlens/core/shape.hpp"

namespace nnlens {

template <class L>
struct layer_traits;  // undefined primary: "L is not a layer"
template <class L>
struct relevance_rule;
template <class L>
struct sign_rule;
template <class L>
struct pwl_rule;

/// pwl_rule of a layer that is affine (ExactLine never splits at it): derive from this.
///   pwl_rule<L> forms (nnlens/exactline/line.hpp dispatches on which members exist):
///     affine = true                                   affine: no split (Dense, Conv2D, pools...)
///     knots(l) -> range of double                     element-wise: split where a unit crosses a
///                                                     knot; optional max_floor(l) -> optional<double>
///                                                     when the unit is max(x, c) (fusable with a
///                                                     max pool next to it)
///     breaks(l, in, a, b, floor, out)                 anything else: append the local ratios in
///                                                     (0,1) where the segment a->b of layer inputs
///                                                     changes linear piece (floor: a fused max(., c))
///     for_each_branch(l, in, f)                       a composite (Residual): ExactLine runs every
///                                                     branch on the same segment; output = sum
struct pwl_affine_rule {
  static constexpr bool affine = true;
};

/// One local contribution item of NNSlicer's backward analysis (docs/specs/nnslicer.md#25-local-items-per-op-type): the
/// preceding neuron, the synapse (a flat index into the layer's first parameter tensor, or
/// sign_item::none) and the signed local influence c.
struct sign_item {
  static constexpr std::size_t none = std::size_t(-1);
  std::size_t pred;
  std::size_t synapse;
  double c;
};

/// What a sign_rule sees of one sample.  Neurons follow the granularity: per channel (a rank-3
/// tensor has one neuron per channel, its spatial mean) or per element; a rank-1 tensor has one
/// neuron per element either way.
///   sign_rule<L> forms (nnlens/nnslicer/nnslicer.hpp dispatches on which members exist):
///     items(l, ctx, n, out)        append the items of output neuron n (the threshold filter
///                                  runs on them afterwards); optional synapses(l): the number of
///                                  synapses (the first parameter tensor's size; default 0);
///                                  optional bias_parameter: the index in parameters(l) of the
///                                  tensor with one bias per output channel/neuron (apply_slice
///                                  zeroes the bias of a neuron whose synapses are all pruned)
///     for_each_branch(l, in, f)    a composite (Residual): its branches' layers, joined by an add
struct sign_ctx {
  shape in, out;
  bool element = false;        // granularity: element (true) or channel (false)
  const double* x = nullptr;   // the layer's input, every element
  const double* y = nullptr;   // the layer's output, every element
  const double* dx = nullptr;  // Δ (value - profile mean) of every input neuron
  const double* dy = nullptr;  // Δ of every output neuron
  const double* yn = nullptr;  // the output neurons' values (channel means, or elements)
  bool bn_literal = false;     // BatchNorm: the paper's (x, Δx) item instead of the scaled one
};

/// Neurons of a tensor of per-sample shape s.
constexpr std::size_t neuron_count(shape s, bool element) { return element || s.rank != 3 ? s.size() : s[0]; }

/// A channel's neuron: the mean of its hw values, summed in double in order (the host and the
/// thrust kernels alike; hw = 1: the value itself).
template <class T>
NNLENS_HD inline double neuron_mean(const T* v, std::size_t hw) {
  double acc = 0;
  for (std::size_t i = 0; i < hw; ++i) acc += double(v[i]);
  return acc / double(hw);
}

/// The neurons of tensor values v (one sample, every element) at the given granularity: channel
/// means for a rank-3 tensor at channel granularity, the elements otherwise.
template <class T>
void neuron_values(shape s, bool element, const T* v, double* out) {
  if (element || s.rank != 3) {
    for (std::size_t i = 0; i < s.size(); ++i) out[i] = double(v[i]);
    return;
  }
  const std::size_t hw = s[1] * s[2];
  for (std::size_t c = 0; c < s[0]; ++c) out[c] = neuron_mean(v + c * hw, hw);
}

/// Same layer with scalar type U.  Weightless layers are their own rebind.  convert(l) makes the
/// rebound layer from l (weights converted element by element with static_cast<U>); network_cast
/// (network/cast.hpp) uses it.  A layer with weights specialises both `type` and `convert`.
template <class L, class U>
struct rebind_scalar {
  using type = L;
  static L convert(const L& l) { return l; }
};
template <class L, class U>
using rebind_scalar_t = typename rebind_scalar<L, U>::type;

/// An element-wise layer a producer applies to its own output, in place, while that output is
/// still in cache (core/post_op.hpp: inference runs a map that follows a layer with
/// accepts_post_op this way instead of in a pass of its own; same bits).
template <class T>
struct post_op {
  void (*run)(const void* layer, T* y, std::size_t n) = nullptr;
  const void* layer = nullptr;
  explicit operator bool() const { return run != nullptr; }
  void operator()(T* y, std::size_t n) const { run(layer, y, n); }
};

/// Arguments of a batched forward pass.  x is [batch, in...], y is [batch, out...], both dense.
template <class T>
struct forward_args {
  shape in, out;
  std::size_t batch = 1;
  const T* x = nullptr;
  T* y = nullptr;
  T* cache = nullptr;    // cache_size(in,out) * batch scalars kept for backward
  T* scratch = nullptr;  // scratch_size(in,out,batch) scalars, contents undefined on entry
  post_op<T> post{};     // only for a layer whose traits say accepts_post_op: applied to all of y
};

/// Arguments of a batched backward pass.
template <class T>
struct backward_args {
  shape in, out;
  std::size_t batch = 1;
  const T* x = nullptr;      // the forward input
  const T* y = nullptr;      // the forward output
  const T* dy = nullptr;     // dL/dy
  const T* cache = nullptr;  // what forward left
  T* dx = nullptr;           // dL/dx (written, not added); may be nullptr
  T* scratch = nullptr;
};

/// Defaults a layer_traits specialisation may inherit (Hana's default-impl idiom).
struct layer_defaults {
  static constexpr bool inference_only = false;
  static constexpr std::size_t scratch_size(const void*, shape, shape, std::size_t) { return 0; }
  static constexpr std::size_t cache_size(const void*, shape, shape) { return 0; }
  template <class L>
  static void init(L&, shape, std::mt19937_64&) {}
};

/// A type with layer_traits: shape inference and a forward pass.
template <class L>
concept Layer = requires(const L& l, shape s) {
  { layer_traits<L>::name } -> std::convertible_to<std::string_view>;
  { layer_traits<L>::infer(s) } -> std::same_as<shape_check>;
  { layer_traits<L>::output_shape(l, s) } -> std::same_as<shape>;
};

/// A layer with trainable parameters.
template <class L>
concept HasParameters = Layer<L> && requires(L& l) {
  { layer_traits<L>::parameters(l) };
};

/// A layer with state that is not trained but defines its function (PyTorch's "buffers", e.g.
/// BatchNorm's running statistics): buffers(Self&) -> std::array<std::span<T>, K>.
template <class L>
concept HasBuffers = Layer<L> && requires(L& l) {
  { layer_traits<L>::buffers(l) };
};

template <class L>
concept RelevanceLayer = Layer<L> && requires { sizeof(relevance_rule<L>); };
template <class L>
concept SignLayer = Layer<L> && requires { sizeof(sign_rule<L>); };
template <class L>
concept PiecewiseLinearLayer = Layer<L> && requires { sizeof(pwl_rule<L>); };

/// Scalar type of a layer's weights (void for weightless layers).
template <class L, class = void>
struct layer_scalar {
  using type = void;
};
template <class L>
struct layer_scalar<L, std::void_t<typename L::scalar_type>> {
  using type = typename L::scalar_type;
};
template <class L>
using layer_scalar_t = typename layer_scalar<L>::type;

namespace detail {
/// The incomplete-type trick (fmt) of every compile-time check of a layer: when Ok is false,
/// instantiating Error<L> (declared, never defined) makes the compiler name the layer in its
/// diagnostic (error_exact_line_needs_a_piecewise_linear_layer<nnlens::Softmax>).
template <template <class> class Error, class L, bool Ok>
constexpr bool named_check() {
  if constexpr (!Ok) {
    Error<L> the_incomplete_type_in_this_diagnostic_names_the_layer;
    (void)the_incomplete_type_in_this_diagnostic_names_the_layer;
  }
  return Ok;
}

template <class L>
struct error_type_is_not_a_layer_see_docs_layers_md;
template <class L>
constexpr bool check_layer() {
  return named_check<error_type_is_not_a_layer_see_docs_layers_md, L, Layer<L>>();
}

template <class Tr, class L>
constexpr std::size_t scratch_of(const L* l, shape in, shape out, std::size_t batch) {
  return Tr::scratch_size(l, in, out, batch);
}

/// Number of elements in a layer's parameter tensors.
template <class L>
std::size_t parameter_count(const L& l) {
  if constexpr (HasParameters<L>) {
    std::size_t n = 0;
    for (auto s : layer_traits<L>::parameters(l)) n += s.size();
    return n;
  } else {
    (void)l;
    return 0;
  }
}
}  // namespace detail

/// sign_rule of a layer whose neuron n passes its reaction on to input neuron n unchanged
/// (activations without a gate, Dropout, Identity): one item (n, -, Δx_n).
struct sign_passthrough_rule {
  static void items(const auto&, const sign_ctx& c, std::size_t n, std::vector<sign_item>& out) {
    out.push_back({n, sign_item::none, c.dx[n]});
  }
};

/// sign_rule of an element-wise map that is not monotone (SiLU, HardSwish, GELU): one item
/// (n, -, f'·Δx_n), f' the local slope layer_traits<L>::scalar_map(l).grad(x, 1) at the neuron's
/// input: the element's at element granularity, the mean over the channel's elements at channel
/// granularity (the neuron is the channel's mean, so its Δ moves with the mean slope).
struct sign_slope_rule {
  template <class L>
  static void items(const L& l, const sign_ctx& c, std::size_t n, std::vector<sign_item>& out) {
    const auto f = layer_traits<L>::scalar_map(l);
    double s = 0;
    if (c.element || c.in.rank != 3) {
      s = f.grad(c.x[n], 1.0);
    } else {
      const std::size_t hw = c.in[1] * c.in[2];
      for (std::size_t e = 0; e < hw; ++e) s += f.grad(c.x[n * hw + e], 1.0);
      s /= double(hw);
    }
    out.push_back({n, sign_item::none, s * c.dx[n]});
  }
};

}  // namespace nnlens
