// nnlens/core/properties.hpp -- what an analysis or a backend may ask about an op, as properties
// with defaults, never as the op's name (docs/adding-a-layer.md, "Properties").
//
// Each property is an optional static member of layer_traits<L>, declared in the op's own header.
// Generic code reads it through the variable templates and concepts below, which supply the default
// when the member is absent (so a layer_traits that does not inherit layer_defaults still works):
//
//   reshape_only_v<L>            static constexpr bool reshape_only          default false
//       y holds x's elements in the same order, only the shape may change (Flatten, Dropout at
//       inference, Identity).  Coverage's layer lists skip it; int8 data passes it unchanged.
//   output_is_distribution_v<L>  static constexpr bool output_is_distribution   default false
//       every output sample is a probability distribution (Softmax).  DFlare's black box does not
//       apply a softmax again; NeuSemSlice's gradient metrics refuse it (they need logits).
//   output_channel_axis_v<L>     static constexpr int output_channel_axis     default -1
//       >= 0: the op is y = W x + b with members W and b, and W's axis `output_channel_axis` runs
//       over the output channels/units (Dense [in, out]: 1; Conv2D [OC, IC, KH, KW]: 0).  Int8
//       quantisation and magnitude pruning treat such an op as a weight layer, per output channel.
//   has_window_geometry<L>       static conv_geometry geometry_of(const L*)  (a convolution: the
//       int8 path runs it through im2col)
//   pool_reduction_v<L>          static constexpr nnlens::pool_reduce pool_reduction   default none
//       the op pools windows: geometry_of(const L*) returns the pool_geometry (kernels/conv.hpp)
//       of its windows, channel c of the output reads channel c of the input, and y[c, oh, ow]
//       is, over the window's elements inside the input, pool_reduce::max: their maximum (padding
//       never wins; MaxPool2D), pool_reduce::mean: their sum over the window's divisor (the
//       geometry's count_include_pad; AvgPool2D).  Windows that depend on the input come from
//       geometry_of(const L*, shape in) instead (GlobalAvgPool: one window per plane); read
//       either through pooling_windows(l, in).  PoolingWindow<L> says the op has one; the
//       thrust backend runs it by the window kernel of its reduction (forward, LRP, ExactLine).
//   Int8Op<L>                    static void int8_forward(const L&, shape in, shape out,
//                                    std::size_t batch, const std::int8_t* x, std::int8_t* y,
//                                    int zero_point)
//       the op runs on int8 codes directly and its output keeps its input's quantisation parameters
//       (ReLU: max(q, zero point); MaxPool2D: the max of the codes, the quantisation being monotone).
//   fuses_into_linear_v<L>       static constexpr bool int8_fuses_into_linear  default false
//       an int8 weight layer directly before this op takes this op's output range as its own
//       (PyTorch's fused Linear+ReLU / Conv+ReLU observer).
//   ElementwiseMap<L>            static constexpr auto scalar_map(const L&)
//       y[i] = f(x[i]) for every element, f = scalar_map(l): a small trivially-copyable functor with
//         template <class T> NNLENS_HD T operator()(T x) const        f(x)
//         template <class T> NNLENS_HD T grad(T x, T dy) const        dy f'(x), the op's own
//                                                                     convention at a kink
//       usable on the host and on a device (NNLENS_HD: __host__ __device__ under nvcc).  The op's
//       host forward/backward run the same functor; the thrust backend runs the op as one
//       thrust::transform (ReLU, LeakyReLU, HardTanh, Clamp).
//   ElementwiseAffine<L>         template <class V> static affine_coefficients<V>
//                                    elementwise_affine(const L&, shape in)
//       y[e] = (x[e] - center[k]) * scale[k] + shift[k] for element e of a sample (channel-major
//       order), k = e / (in.size() / n), n = scale.size() = shift.size(): 1 (one value), in[0]
//       (per channel of {C,H,W}, per feature of {F}) or in.size() (per element); center is empty
//       (then y = x * scale + shift) or has n values.  The coefficients are computed in V as the
//       op's own forward computes them, so that expression gives its forward bit for bit.  The op
//       is affine for ExactLine, and its relevance_rule (if any) is the affine rules with
//       w = scale, b = shift - scale * center in double, one input per output.  The thrust backend
//       runs it by one element-wise kernel (BatchNorm at inference, Affine).
//   ParametricMap<L>             static constexpr auto param_map(const L&)
//                                template <class V> static std::vector<V> map_parameters(const L&, shape in)
//       y[e] = f(x[e], p[k]) for element e of a sample (channel-major), k = e / (in.size() / n),
//       p = map_parameters<V>(l, in) with n values: 1 (shared), in[0] (per channel of {C,H,W}, per
//       feature of {F}) or in.size(); f = param_map(l): a trivially-copyable functor with
//         template <class T> NNLENS_HD T operator()(T x, T p) const
//       The op's host forward runs the same functor on the same parameters (cast to V as the
//       forward casts them), so the thrust backend's one element-wise kernel gives its forward
//       bit for bit (PReLU: p = the slope).
//   SampleMap<L>                 static constexpr auto sample_map(const L&)
//       y = f(x) over each sample as a whole: f(x, y, n) reads and writes one sample's n =
//       in.size() elements, a trivially-copyable functor with
//         template <class T> NNLENS_HD void operator()(const T* x, T* y, std::size_t n) const
//       The op's host forward and the thrust backend's kernel (one work item per sample) run the
//       same functor (Softmax).
//   ChannelMap<L>                static constexpr auto channel_map(const L&, shape in)
//       every output element copies one input element, a whole channel at a time: a sample holds
//       in[0] input and out[0] output channels (features of a rank-1 shape) of P = in.size() /
//       in[0] elements each (H W of {C,H,W}; 1 of {F}), and output channel k is input channel
//       f(k), f = channel_map(l, in): a trivially-copyable functor with
//         NNLENS_HD std::size_t operator()(std::size_t k) const    the source channel, < in[0]
//       for k < out[0] (a permutation, a slice, a repetition).  Written once for every such op,
//       never naming it: channel_map_defaults<L> (host forward: the copy; backward: dx[f(k)] +=
//       dy[k]; int8_forward: the codes copied, so the scale stays), sign_channel_map_rule (NNSlicer:
//       the source neuron's item (x_src, -, Δx_src)), relevance_channel_map_rule (LRP: an output
//       element's R to its source element), pwl_affine_rule (ExactLine: linear, no knots); coverage
//       does not count the op as a layer of neurons (they are its input's, permuted or sliced); the
//       thrust backend gathers by f on the device (thrust/index_map.hpp) and firmware by the map's
//       table (fw::gather_channels).  channel_map_source(f, ...) is the flat source index.
//   PositionMap<L>               static constexpr auto position_map(const L&)
//                                template <class V> static std::vector<V> position_parameters(const L&, shape in)
//       y = f(x) over the C = in[0] channels at each position of a sample, f(x, y, C, stride, p)
//       reading x[c stride] and writing y[c stride] for c < C (stride P = in.size() / C: positions
//       H W of {C,H,W}, one position of {F}), p = position_parameters<V>(l, in) the same for every
//       position; f = position_map(l), a trivially-copyable functor with
//         template <class T> NNLENS_HD void operator()(const T* x, T* y, std::size_t C,
//                                                      std::size_t stride, const T* p) const
//       The op's host forward runs the same functor on the same parameters (cast to V as its
//       forward casts them), so the thrust backend's kernel (one work item per sample and
//       position, thrust/index_map.hpp) gives its forward bit for bit (LayerNorm: p = gamma then
//       beta).  A position map mixes channels (not element-wise, not piecewise linear).
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "nnlens/core/hd.hpp"
#include "nnlens/core/shape.hpp"
#include "nnlens/core/traits.hpp"

namespace nnlens {

template <class L>
inline constexpr bool reshape_only_v = [] {
  if constexpr (requires { layer_traits<L>::reshape_only; })
    return bool(layer_traits<L>::reshape_only);
  else
    return false;
}();

template <class L>
inline constexpr bool output_is_distribution_v = [] {
  if constexpr (requires { layer_traits<L>::output_is_distribution; })
    return bool(layer_traits<L>::output_is_distribution);
  else
    return false;
}();

template <class L>
inline constexpr int output_channel_axis_v = [] {
  if constexpr (requires { layer_traits<L>::output_channel_axis; })
    return int(layer_traits<L>::output_channel_axis);
  else
    return -1;
}();

/// An op y = W x + b with members W and b (a weight layer for quantisation and pruning).
template <class L>
concept WeightLayer = output_channel_axis_v<L> >= 0 && requires(const L& l) {
  l.W;
  l.b;
};

template <class L>
concept has_window_geometry = requires(const L* l) { layer_traits<L>::geometry_of(l); };

/// What a pooling op computes over each window (pool_reduction_v, see the header table).
enum class pool_reduce { none, max, mean };

template <class L>
inline constexpr pool_reduce pool_reduction_v = [] {
  if constexpr (requires { layer_traits<L>::pool_reduction; })
    return pool_reduce(layer_traits<L>::pool_reduction);
  else
    return pool_reduce::none;
}();

namespace detail {
/// Windows that depend on the input (geometry_of(const L*, shape in): GlobalAvgPool, one window
/// per plane).
template <class L>
concept has_input_windows = requires(const L* l, shape in) { layer_traits<L>::geometry_of(l, in); };
}  // namespace detail

/// A pooling op: a reduction (max or mean) over the windows of its geometry_of(const L*), or of
/// geometry_of(const L*, shape in) when they depend on the input.
template <class L>
concept PoolingWindow = pool_reduction_v<L> != pool_reduce::none && (has_window_geometry<L> || detail::has_input_windows<L>);

/// The pool_geometry of pooling op l's windows on input `in`.
template <class L>
  requires PoolingWindow<L>
constexpr auto pooling_windows(const L& l, shape in) {
  if constexpr (detail::has_input_windows<L>)
    return layer_traits<L>::geometry_of(&l, in);
  else
    return layer_traits<L>::geometry_of(&l);
}

template <class L>
concept Int8Op = requires(const L& l, shape s, const std::int8_t* x, std::int8_t* y) {
  layer_traits<L>::int8_forward(l, s, s, std::size_t(1), x, y, 0);
};

namespace detail {
/// What an element-wise map's functor provides (see ElementwiseMap in the header table).
template <class F>
concept scalar_map_functor = std::is_trivially_copyable_v<F> && requires(const F& f, float a, double b) {
  { f(a) } -> std::same_as<float>;
  { f(b) } -> std::same_as<double>;
  { f.grad(a, a) } -> std::same_as<float>;
  { f.grad(b, b) } -> std::same_as<double>;
};
}  // namespace detail

/// An element-wise op y[i] = f(x[i]), f = layer_traits<L>::scalar_map(l), usable on a device.
template <class L>
concept ElementwiseMap = requires(const L& l) { layer_traits<L>::scalar_map(l); } &&
                         detail::scalar_map_functor<decltype(layer_traits<L>::scalar_map(std::declval<const L&>()))>;

/// The layer_traits base of an element-wise map (ElementwiseMap): any shape passes through, and the
/// host forward / backward run the op's own scalar_map over every element; layer_traits<L> adds its
/// name and scalar_map (and an output_shape of its own where the op checks its parameters).
template <class L>
struct elementwise_map_defaults : layer_defaults {
  static constexpr shape_check infer(shape in) { return {in, nullptr}; }
  static shape output_shape(const L&, shape in) { return in; }
  template <class T>
  static void forward(const L& l, const forward_args<T>& a) {
    const auto f = layer_traits<L>::scalar_map(l);
    const std::size_t n = a.batch * a.in.size();
    for (std::size_t i = 0; i < n; ++i) a.y[i] = f(a.x[i]);
  }
  template <class T>
  static void backward(const L& l, const backward_args<T>& a, L*) {
    if (!a.dx) return;
    const auto f = layer_traits<L>::scalar_map(l);
    const std::size_t n = a.batch * a.in.size();
    for (std::size_t i = 0; i < n; ++i) a.dx[i] = f.grad(a.x[i], a.dy[i]);
  }
};

/// The analysis rules and codegen spelling of an element-wise activation whose rules are ready
/// forms: NNSlicer's (sign_passthrough_rule or sign_slope_rule), LRP's (relevance_passthrough_rule)
/// and the plain codegen spelling.  Written at namespace nnlens scope after the op's layer_traits, e.g.
/// NNLENS_ELEMENTWISE_RULES(SiLU, sign_slope_rule, relevance_passthrough_rule); the op's header says
/// above it which reading each rule follows.
#define NNLENS_ELEMENTWISE_RULES(Op, SignForm, RelevanceForm)   \
  template <>                                                   \
  struct sign_rule<Op> : SignForm {};                           \
  template <>                                                   \
  struct relevance_rule<Op> : RelevanceForm {};                 \
  template <>                                                   \
  struct codegen_rule<Op> : detail::codegen_plain<Op> {}

/// An element-wise map with parameters (see the header table).
template <class L>
concept ParametricMap = requires(const L& l, shape s) {
  layer_traits<L>::param_map(l);
  { layer_traits<L>::template map_parameters<float>(l, s) } -> std::same_as<std::vector<float>>;
  { layer_traits<L>::template map_parameters<double>(l, s) } -> std::same_as<std::vector<double>>;
};

/// A map over whole samples (see the header table).
template <class L>
concept SampleMap = requires(const L& l, const float* x, float* y, const double* xd, double* yd) {
  layer_traits<L>::sample_map(l)(x, y, std::size_t(1));
  layer_traits<L>::sample_map(l)(xd, yd, std::size_t(1));
};

/// The coefficients of an element-wise affine op (ElementwiseAffine, see the header table).
template <class V>
struct affine_coefficients {
  std::vector<V> scale, shift;  // n values each
  std::vector<V> center;        // empty (no centring) or n values
  /// Elements of a sample that share one coefficient (in.size() / n).
  std::size_t per(shape in) const { return in.size() / scale.size(); }
};

/// An element-wise affine op y = (x - center) * scale + shift, coefficients broadcast per element,
/// per channel (feature) or as one value: layer_traits<L>::elementwise_affine<V>(l, in).
template <class L>
concept ElementwiseAffine = requires(const L& l, shape s) {
  { layer_traits<L>::template elementwise_affine<float>(l, s) } -> std::same_as<affine_coefficients<float>>;
  { layer_traits<L>::template elementwise_affine<double>(l, s) } -> std::same_as<affine_coefficients<double>>;
};

template <class L>
inline constexpr bool fuses_into_linear_v = [] {
  if constexpr (requires { layer_traits<L>::int8_fuses_into_linear; })
    return bool(layer_traits<L>::int8_fuses_into_linear);
  else
    return false;
}();

// ---- channel maps: each output channel copies one input channel (see the header table)

namespace detail {
template <class F>
concept channel_map_functor = std::is_trivially_copyable_v<F> && requires(const F& f, std::size_t k) {
  { f(k) } -> std::convertible_to<std::size_t>;
};
}  // namespace detail

/// An op whose output channel k is its input channel f(k), f = layer_traits<L>::channel_map(l, in).
template <class L>
concept ChannelMap = requires(const L& l, shape s) { layer_traits<L>::channel_map(l, s); } &&
                     detail::channel_map_functor<decltype(layer_traits<L>::channel_map(std::declval<const L&>(),
                                                                                       std::declval<shape>()))>;

/// Elements of one channel of a sample of shape s (H W of {C,H,W}, 1 of {F}).
constexpr std::size_t channel_elements(shape s) { return s.rank == 0 || s[0] == 0 ? 0 : s.size() / s[0]; }

/// The flat index (batch axis included) of the input element that output element i of a channel
/// map f copies, with Cin input and Cout output channels of P elements per sample: the host's
/// rules and the thrust kernels alike.
template <class F>
NNLENS_HD inline std::size_t channel_map_source(const F& f, std::size_t Cin, std::size_t Cout, std::size_t P, std::size_t i) {
  const std::size_t per = Cout * P, n = i / per, r = i - n * per, k = r / P;
  return (n * Cin + std::size_t(f(k))) * P + (r - k * P);
}

/// The layer_traits base of a channel map (ChannelMap): host forward and backward, and the int8
/// form (the codes copied: the output keeps its input's scale), from the op's channel_map;
/// layer_traits<L> adds its name, channel_map, infer and output_shape.
template <class L>
struct channel_map_defaults : layer_defaults {
  /// y = the gathered channels of x (any element type: activations, int8 codes).
  template <class V>
  static void gather(const L& l, shape in, shape out, std::size_t batch, const V* x, V* y) {
    const auto f = layer_traits<L>::channel_map(l, in);
    const std::size_t Cin = in[0], Cout = out[0], P = channel_elements(in);
    for (std::size_t n = 0; n < batch; ++n)
      for (std::size_t k = 0; k < Cout; ++k) {
        const V* s = x + (n * Cin + std::size_t(f(k))) * P;
        V* d = y + (n * Cout + k) * P;
        for (std::size_t p = 0; p < P; ++p) d[p] = s[p];
      }
  }
  template <class T>
  static void forward(const L& l, const forward_args<T>& a) {
    gather(l, a.in, a.out, a.batch, a.x, a.y);
  }
  /// dx = J^T dy: each input element sums the dy of the outputs that copy it (0 if none).
  template <class T>
  static void backward(const L& l, const backward_args<T>& a, L*) {
    if (!a.dx) return;
    const auto f = layer_traits<L>::channel_map(l, a.in);
    const std::size_t Cin = a.in[0], Cout = a.out[0], P = channel_elements(a.in);
    for (std::size_t i = 0; i < a.batch * a.in.size(); ++i) a.dx[i] = T(0);
    for (std::size_t n = 0; n < a.batch; ++n)
      for (std::size_t k = 0; k < Cout; ++k) {
        const T* dy = a.dy + (n * Cout + k) * P;
        T* dx = a.dx + (n * Cin + std::size_t(f(k))) * P;
        for (std::size_t p = 0; p < P; ++p) dx[p] += dy[p];
      }
  }
  /// Int8Op: the same copy on the int8 codes (zero point unused).
  static void int8_forward(const L& l, shape in, shape out, std::size_t batch, const std::int8_t* x, std::int8_t* y, int) {
    gather(l, in, out, batch, x, y);
  }
};

/// NNSlicer's rule of a channel map: output neuron n is a copy of one input neuron, which receives
/// the vote with its own Δ, (x_src, -, Δx_src): the channel f(n) at channel granularity (and for a
/// rank-1 input), element f(c) P + p of output element c P + p at element granularity.
struct sign_channel_map_rule {
  template <class L>
  static void items(const L& l, const sign_ctx& c, std::size_t n, std::vector<sign_item>& out) {
    const auto f = layer_traits<L>::channel_map(l, c.in);
    std::size_t src = std::size_t(f(n));
    if (c.element && c.in.rank == 3) {
      const std::size_t P = channel_elements(c.in);
      src = std::size_t(f(n / P)) * P + n % P;
    }
    out.push_back({src, sign_item::none, c.dx[src]});
  }
};

/// LRP's rule of a channel map: the relevance of each output element goes to the input element it
/// copies (an input element copied twice sums both; one not copied gets 0): conservative.
struct relevance_channel_map_rule {
  template <class L>
  static void relevance(const L& l, const relevance_args& a) {
    const auto f = layer_traits<L>::channel_map(l, a.in);
    const std::size_t Cin = a.in[0], Cout = a.out[0], P = channel_elements(a.in);
    for (std::size_t i = 0; i < a.in.size(); ++i) a.r_in[i] = 0.0;
    for (std::size_t i = 0; i < Cout * P; ++i) a.r_in[channel_map_source(f, Cin, Cout, P, i)] += a.r_out[i];
  }
};

// ---- position maps: one functor over the channels at each position (see the header table)

/// An op that maps the channel vector at each position of a sample (layer_traits<L>::position_map
/// with its parameters position_parameters<V>).
template <class L>
concept PositionMap = requires(const L& l, shape s, const float* x, float* y, const double* xd, double* yd) {
  layer_traits<L>::position_map(l)(x, y, std::size_t(1), std::size_t(1), x);
  layer_traits<L>::position_map(l)(xd, yd, std::size_t(1), std::size_t(1), xd);
  { layer_traits<L>::template position_parameters<float>(l, s) } -> std::same_as<std::vector<float>>;
  { layer_traits<L>::template position_parameters<double>(l, s) } -> std::same_as<std::vector<double>>;
} && std::is_trivially_copyable_v<decltype(layer_traits<L>::position_map(std::declval<const L&>()))>;

}  // namespace nnlens
