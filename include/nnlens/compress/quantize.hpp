// nnlens/compress/quantize.hpp -- post-training int8 quantisation: DFlare's "compressed twins"
// (docs/specs/dflare.md#4-evaluation-setup-and-headline-numbers (§4-§5): TFLite / fbgemm 8-bit post-training quantisation).
//
//   auto q = compress::quantize(net, calibration, opts);   // calibration: [N, in...], N >= 1
//   auto w = compress::quantize_weights(net, opts);        // weight-only (no calibration needed)
//   q.forward(x)      [batch, out...] float outputs (logits, or probabilities if net ends in Softmax)
//   q.predict(x)      [batch, classes] probabilities (softmax of forward unless net ends in Softmax)
//   q.classify(x)     argmax per sample (lowest index on ties)
//   q.layer(i)        quantized_layer: int8 weights, scales, int32 bias, requantisation multipliers
//   q.activation(i)   quant_params (scale, zero point) of the tensor entering layer i (int8 mode)
//   q.dequantized()   a network of the SAME type as net whose quantised weights are replaced by
//                     their dequantised values (q_w * s_w): the weight-only twin, exportable to ONNX
//
// Two modes (quantize_options::mode):
//   int8         weights int8 (symmetric, zero point 0, [-127, 127], per tensor or per output
//                channel); activations int8 between layers (asymmetric, [-128, 127], scale and zero
//                point from the calibrated per-tensor min/max, the range widened to contain 0);
//                Dense and Conv2D run kernels::gemm_s8 (int8 x int8 -> int32), with the bias as
//                int32 at scale s_x*s_w and the zero-point correction folded into it, then
//                requantise: q_y = clamp(round(acc * s_x*s_w/s_y) + z_y, -128, 127) (a float
//                multiplier, not gemmlowp's fixed-point one).  ReLU is max(q, z) on int8; a ReLU
//                right after a Dense/Conv2D is fused (the layer's output takes the ReLU's range, as
//                TFLite does).  Flatten, Identity, Dropout and MaxPool2D keep their input's scale
//                (MaxPool2D takes the max of the int8 codes: the quantisation is monotone).  Every other
//                layer (BatchNorm, AvgPool2D, GlobalAvgPool, Residual, Softmax, ...) runs in float
//                between a dequantise and a requantise to its calibrated output range (as a
//                TFLite/fbgemm graph with a float fallback op would).  The network's output leaves
//                the last layer as float: a final Dense/Conv2D dequantises its int32 accumulator
//                directly (acc * s_x*s_w + 0), with no int8 rounding of the logits.
//   weight_only  int8 weights dequantised to float, float activations (TFLite "dynamic range" /
//                DFlare's reference rule): forward is the float forward of dequantized().
// A weight tensor with fewer than min_elements elements stays float (the layer then runs in float).
// quantize_options::dflare_reference(): weight_only, per tensor, min_elements = 1024, symmetric
// max|W|/127 -- TFLite's post-training weight quantisation (tensorflow/lite/tools/optimize/
// quantize_weights.cc: kWeightsMinNumElementsDefault = 1024), our reading of the "TFLite 8-bit"
// LeNet/ResNet twins DFlare took from DiffChaser.  The spec (docs/specs/dflare.md#4-evaluation-setup-and-headline-numbers) names the tool,
// not the rule: see docs/compress.md.
// Inside a Residual (nested too), the Dense/Conv2D weights are quantised by the same rule and
// kept as their dequantised values; the block itself runs in float in both modes (int8 mode
// requantises its output).
// Rounding is half away from zero (kernels::round_half_away), as TFLite's reference quantiser.
//
// requires: a float or double network whose shapes check; finite weights.
// ensures:  deterministic: integer arithmetic is exact, everything else is a fixed sequence of
//           float operations; the static and the run-time (DynamicNetwork) forms give the same
//           bits (one code path: for_each_layer).
// throws:   data_error: empty calibration set; value_error: NaN/Inf in the calibration data or the
//           input of forward (naming sample and element), non-finite weights, calibration_batch 0;
//           shape_error: a calibration set or input of the wrong shape.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "nnlens/core/composite.hpp"
#include "nnlens/core/error.hpp"
#include "nnlens/core/properties.hpp"
#include "nnlens/core/finite.hpp"
#include "nnlens/core/tensor.hpp"
#include "nnlens/kernels/int8.hpp"
#include "nnlens/layers/all.hpp"
#include "nnlens/network/forward.hpp"
#include "nnlens/network/trace.hpp"

namespace nnlens::compress {

enum class quant_mode { int8, weight_only };
enum class quant_granularity { per_tensor, per_channel };

struct quantize_options {
  quant_mode mode = quant_mode::int8;
  quant_granularity granularity = quant_granularity::per_channel;
  std::size_t min_elements = 0;        // weight tensors with fewer elements stay float
  bool fuse_relu = true;               // int8: a Dense/Conv2D followed by ReLU takes the ReLU's range
  std::size_t calibration_batch = 256;  // samples per calibration forward pass

  /// DFlare's / TFLite's reference rule: weight-only int8, symmetric per-tensor scale max|W|/127,
  /// only weight tensors with at least 1024 elements.
  static quantize_options dflare_reference() {
    quantize_options o;
    o.mode = quant_mode::weight_only;
    o.granularity = quant_granularity::per_tensor;
    o.min_elements = 1024;
    return o;
  }
};

/// Affine int8 quantisation of one tensor: real = (q - zero_point) * scale.
struct quant_params {
  float scale = 1.0f;
  std::int32_t zero_point = 0;
  /// clamp(round(v / scale) + zero_point, -128, 127) in float arithmetic (what forward does).
  std::int8_t quantize(double v) const { return kernels::quantize_one(float(v), scale, zero_point); }
  float dequantize(std::int8_t q) const { return float(std::int32_t(q) - zero_point) * scale; }
  bool operator==(const quant_params&) const = default;
};

/// Asymmetric int8 parameters of a calibrated range [lo, hi] (widened to contain 0, so that 0 is
/// exact: zero padding and ReLU need it): scale = (hi - lo) / 255, zero point = round(-128 - lo /
/// scale) in [-128, 127].  A range of width 0 gets scale 1.
inline quant_params activation_params(double lo, double hi) {
  lo = std::min(lo, 0.0), hi = std::max(hi, 0.0);
  quant_params p;
  const double s = (hi - lo) / 255.0;
  if (!(s > 0) || !std::isfinite(s)) return p;
  p.scale = float(s);
  p.zero_point = std::clamp<std::int32_t>(std::int32_t(std::round(-128.0 - lo / double(p.scale))), -128, 127);
  return p;
}

/// Symmetric weight scale max|w| / 127 (1 for an all-zero tensor or channel).
inline float symmetric_scale(double max_abs) { return max_abs > 0 ? float(max_abs / 127.0) : 1.0f; }

/// What quantize did to one layer.
struct quantized_layer {
  std::string name;                   // layer_traits<L>::name
  bool quantized = false;             // int8 weights (false: the layer stays float)
  std::size_t channels = 0;           // output channels (Conv2D) / units (Dense)
  std::vector<std::int8_t> weights;   // the layout of the float W: Dense [in, out], Conv2D [out, in/g, kh, kw]
  std::vector<float> weight_scales;   // one (per tensor) or one per output channel
  // int8 mode only:
  std::vector<std::int32_t> bias;     // round(b / (s_x s_w)) - z_x * sum of the channel's int8 weights
  std::vector<float> multiplier;      // s_x s_w / s_y, or s_x s_w when the output stays float
  bool float_output = false;          // the network's last layer: output = (acc + bias) * multiplier
  bool fused_relu = false;            // followed by a ReLU whose range this layer's output uses
  std::vector<std::int32_t> packed;   // Dense: kernels::pack_b_s8 of the weights (packed once)
  std::size_t inner_quantized = 0;    // Residual: inner Dense/Conv2D weight tensors quantised (kept
                                      // as dequantised floats: the block runs in float)
  bool runs_in_float = false;         // int8 mode: the layer runs in float between a dequantise and
                                      // a requantise (no int8 rule: neither int8 weights, nor an
                                      // int8_forward on the codes, nor a reshape-only copy)

  /// Output channel of weight element e.
  std::size_t channel_of(std::size_t e, bool conv) const {
    return conv ? e / (weights.size() / channels) : e % channels;
  }
  float scale_of(std::size_t channel) const { return weight_scales.size() == 1 ? weight_scales[0] : weight_scales.at(channel); }
};

namespace detail {

/// A weight layer y = W x + b (core/properties.hpp: output_channel_axis; Dense, Conv2D, static or
/// run-time form): quantize turns its W into int8.
template <class L>
inline constexpr bool is_linear_v = WeightLayer<L>;
/// ... a convolution (it has a window geometry): the int8 path runs it through im2col.
template <class L>
inline constexpr bool is_conv_v = is_linear_v<L> && has_window_geometry<L>;
/// Layers that move int8 data unchanged (reshape-only: Flatten, Dropout, Identity).
template <class L>
inline constexpr bool int8_passthrough_v = reshape_only_v<L>;
/// Layers whose int8 output keeps the input's quantisation parameters: the reshape-only ones and
/// those with an int8_forward on the codes (ReLU, MaxPool2D).
template <class L>
inline constexpr bool keeps_scale_v = int8_passthrough_v<L> || Int8Op<L>;

}  // namespace detail

/// How a layer runs in an int8 twin (quantize_options::mode int8): "int8" (its weights are int8,
/// a Dense or Conv2D), "codes" (it moves or maps the int8 codes and keeps their scale: ReLU,
/// MaxPool2D, Flatten, ChannelShuffle...), or "float" (no int8 rule: float between a dequantise
/// and a requantise, as a TFLite graph's float fallback op).  A weight tensor below
/// quantize_options::min_elements stays float at run time (quantized_network::float_layers()).
template <class L>
inline constexpr std::string_view int8_form_v =
    detail::is_linear_v<L> ? std::string_view("int8") : detail::keeps_scale_v<L> ? std::string_view("codes") : std::string_view("float");

namespace detail {
struct range {
  double lo = std::numeric_limits<double>::infinity(), hi = -std::numeric_limits<double>::infinity();
};

template <class T>
void check_finite_weights(const T* w, std::size_t n, std::size_t layer, std::string_view name) {
  for (std::size_t i = 0; i < n; ++i)
    if (!std::isfinite(w[i]))
      throw value_error(nnlens::detail::concat("quantize: layer ", layer, " (", name, ") has a non-finite weight at ",
                                               "element ", i));
}
}  // namespace detail

template <class Net>
class quantized_network;

template <class Net>
quantized_network<Net> quantize_weights(const Net& net, const quantize_options& opt);
template <class Net, class E>
quantized_network<Net> quantize(const Net& net, const E& calibration, const quantize_options& opt = {});

/// A quantised twin of a network of type Net.  See the header comment.
template <class Net>
class quantized_network {
 public:
  using network_type = Net;
  using T = network_scalar_t<Net>;
  static_assert(std::is_floating_point_v<T>, "compress::quantize: a float or double network");

  const quantize_options& options() const { return opt_; }
  std::size_t size() const { return layers_.size(); }
  const quantized_layer& layer(std::size_t i) const { return layers_.at(i); }
  /// int8 mode: parameters of the tensor entering layer i (i == size(): the output's range).
  const quant_params& activation(std::size_t i) const { return act_.at(i); }
  /// The float network with the quantised weights dequantised (the weight-only twin).
  const Net& dequantized() const { return net_; }
  /// int8 mode: the top-level layers that run in float between a dequantise and a requantise, as a
  /// TFLite graph's float fallback ops (empty in weight_only mode: everything is float there).
  std::vector<std::size_t> float_layers() const {
    std::vector<std::size_t> r;
    if (opt_.mode == quant_mode::int8)
      for (std::size_t i = 0; i < layers_.size(); ++i)
        if (layers_[i].runs_in_float) r.push_back(i);
    return r;
  }
  /// Top-level Dense/Conv2D layers whose weights are int8.
  std::size_t quantized_layers() const {
    return std::size_t(std::count_if(layers_.begin(), layers_.end(), [](const auto& l) { return l.quantized; }));
  }

  /// [batch, in...] -> [batch, out...] float outputs.
  template <class E>
  xt::xarray<T> forward(const E& xin) const {
    const shape in = input_shape_of(net_), out = output_shape_of(net_);
    const std::size_t batch = nnlens::detail::check_batch_input(xin, in, "quantized forward");
    if (opt_.mode == quant_mode::weight_only) return nnlens::forward(net_, xin);
    const xt::xarray<T> x = xin;
    require_finite(std::span<const T>(x.data(), x.size()), in.size(), "quantized forward: input");
    xt::xarray<T> y = xt::xarray<T>::from_shape(out.with_batch(batch));
    if (batch == 0) return y;
    run_int8(batch, x.data(), y.data());
    return y;
  }

  /// Probabilities [batch, classes]: softmax of forward (forward itself when Net ends in Softmax).
  template <class E>
  xt::xarray<T> predict(const E& x) const {
    xt::xarray<T> y = forward(x);
    if (ends_in_softmax_) return y;
    const std::size_t F = output_shape_of(net_).size(), batch = F ? y.size() / F : 0;
    for (std::size_t n = 0; n < batch; ++n) {
      T* r = y.data() + n * F;
      const T m = *std::max_element(r, r + F);
      T s = 0;
      for (std::size_t i = 0; i < F; ++i) s += (r[i] = std::exp(r[i] - m));
      for (std::size_t i = 0; i < F; ++i) r[i] /= s;
    }
    return y;
  }

  /// Top-1 label per sample (lowest index on ties).
  template <class E>
  std::vector<std::size_t> classify(const E& x) const {
    const xt::xarray<T> y = forward(x);
    const std::size_t F = output_shape_of(net_).size(), batch = F ? y.size() / F : 0;
    std::vector<std::size_t> r(batch);
    for (std::size_t n = 0; n < batch; ++n) {
      const T* p = y.data() + n * F;
      r[n] = std::size_t(std::max_element(p, p + F) - p);
    }
    return r;
  }

  /// Raw int8-mode inference (no input checks): y[batch, out] = twin(x[batch, in]).  int8 mode only
  /// (logic_error otherwise).
  void run_int8(std::size_t batch, const T* x, T* y) const;

 private:
  template <class N, class E>
  friend quantized_network<N> quantize(const N&, const E&, const quantize_options&);
  template <class N>
  friend quantized_network<N> quantize_weights(const N&, const quantize_options&);

  void quantize_weights_();
  void set_int8_constants_();

  Net net_;
  quantize_options opt_;
  std::vector<quantized_layer> layers_;
  std::vector<quant_params> act_;
  bool ends_in_softmax_ = false;
};

// ---- weight quantisation ----
namespace detail {
/// Quantises the weights of a Dense/Conv2D: the record, and l.W replaced by q_w * s_w.
template <class L>
void quantize_linear(L& l, std::size_t idx, const quantize_options& opt, quantized_layer& q) {
  using T = std::remove_cvref_t<decltype(*l.W.data())>;
  const std::size_t ne = l.W.size();
  q.name = std::string(layer_traits<L>::name);
  check_finite_weights(l.W.data(), ne, idx, q.name);
  check_finite_weights(l.b.data(), l.b.size(), idx, q.name);
  constexpr bool conv = is_conv_v<L>;
  q.channels = conv ? l.W.shape(0) : l.W.shape(1);
  if (ne == 0 || ne < opt.min_elements) return;  // stays float
  q.quantized = true;
  const bool per_channel = opt.granularity == quant_granularity::per_channel;
  std::vector<double> max_abs(per_channel ? q.channels : 1, 0.0);
  q.weights.assign(ne, 0);
  auto ch = [&](std::size_t e) { return per_channel ? (conv ? e / (ne / q.channels) : e % q.channels) : 0; };
  T* W = l.W.data();
  for (std::size_t e = 0; e < ne; ++e) max_abs[ch(e)] = std::max(max_abs[ch(e)], std::abs(double(W[e])));
  q.weight_scales.resize(max_abs.size());
  for (std::size_t c = 0; c < max_abs.size(); ++c) q.weight_scales[c] = symmetric_scale(max_abs[c]);
  for (std::size_t e = 0; e < ne; ++e) {
    const float sc = q.weight_scales[ch(e)];
    q.weights[e] = std::int8_t(kernels::round_saturate(double(W[e]) / double(sc), -127, 127));
    W[e] = T(float(q.weights[e]) * sc);  // the dequantised twin
  }
}

/// The Dense/Conv2D weights inside a composite (every branch, nested composites too): quantised and
/// kept as their dequantised values; returns how many tensors were quantised.
template <class L>
std::size_t quantize_inner(L& l, std::size_t idx, const quantize_options& opt) {
  if constexpr (is_linear_v<L>) {
    quantized_layer q;
    quantize_linear(l, idx, opt, q);
    return q.quantized ? 1 : 0;
  } else if constexpr (Composite<L>) {
    std::size_t n = 0;
    layer_traits<L>::for_each_inner(l, [&](auto& in) { n += quantize_inner(in, idx, opt); });
    return n;
  } else {
    (void)l, (void)idx, (void)opt;
    return 0;
  }
}
}  // namespace detail

template <class Net>
void quantized_network<Net>::quantize_weights_() {
  const std::size_t n = layer_count(net_);
  layers_.assign(n, {});
  for_each_layer(net_, [&](auto& l, auto idx, shape, shape) {
    using L = std::decay_t<decltype(l)>;
    quantized_layer& q = layers_[idx];
    q.name = std::string(layer_traits<L>::name);
    if constexpr (detail::is_linear_v<L>)
      detail::quantize_linear(l, idx, opt_, q);
    else
      q.inner_quantized = detail::quantize_inner(l, idx, opt_);
    q.runs_in_float = !q.quantized && !detail::keeps_scale_v<L>;
  });
}

// ---- int8 constants (bias, multipliers) once the activation ranges are known ----
template <class Net>
void quantized_network<Net>::set_int8_constants_() {
  const std::size_t n = layer_count(net_);
  for_each_layer(net_, [&](const auto& l, auto idx, shape, shape) {
    using L = std::decay_t<decltype(l)>;
    quantized_layer& q = layers_[idx];
    if constexpr (detail::is_linear_v<L>) {
      if (!q.quantized) return;
      const std::size_t i = idx, C = q.channels, ne = q.weights.size();
      constexpr bool conv = detail::is_conv_v<L>;
      const quant_params& px = act_[i];
      const quant_params& py = act_[i + 1];
      q.float_output = i + 1 == n;
      std::vector<std::int64_t> wsum(C, 0);
      for (std::size_t e = 0; e < ne; ++e) wsum[q.channel_of(e, conv)] += q.weights[e];
      q.bias.resize(C);
      q.multiplier.resize(C);
      if constexpr (!conv) q.packed = kernels::pack_b_s8(ne / C, C, q.weights.data(), C);
      for (std::size_t c = 0; c < C; ++c) {
        const double sxw = double(px.scale) * double(q.scale_of(c));
        const double bq = std::round(double(l.b.data()[c]) / sxw);
        const double v = bq - double(px.zero_point) * double(wsum[c]);
        q.bias[c] = std::int32_t(std::clamp(v, -2147483648.0, 2147483647.0));
        q.multiplier[c] = float(q.float_output ? sxw : sxw / double(py.scale));
      }
    } else {
      (void)l, (void)q;
    }
  });
}

// ---- int8 inference ----
template <class Net>
void quantized_network<Net>::run_int8(std::size_t batch, const T* x, T* y) const {
  const std::size_t n = layer_count(net_);
  const std::size_t in_n = input_shape_of(net_).size(), out_n = output_shape_of(net_).size();
  NNLENS_EXPECTS(opt_.mode == quant_mode::int8 && act_.size() == n + 1);
  if (n == 0) {
    std::copy_n(x, batch * in_n, y);
    return;
  }
  // per-thread buffers: they grow once, and resize() on a grown vector does not zero-fill again
  struct buffers {
    std::vector<T> fa, fb, scratch;
    std::vector<std::int8_t> qa, qb, pad, col;
    std::vector<std::int32_t> acc;
  };
  thread_local buffers bufs;
  // named references, not a structured binding: clang 14 cannot capture bindings in lambdas
  auto &fa = bufs.fa, &fb = bufs.fb, &scratch = bufs.scratch;
  auto &qa = bufs.qa, &qb = bufs.qb, &pad = bufs.pad, &col = bufs.col;
  auto& acc = bufs.acc;
  fa.assign(x, x + batch * in_n);
  bool is_q = false;
  for_each_layer(net_, [&](const auto& l, auto idx, shape sin, shape sout) {
    using L = std::decay_t<decltype(l)>;
    const std::size_t i = idx, nin = batch * sin.size(), nout = batch * sout.size();
    const quantized_layer& ql = layers_[i];
    const quant_params& px = act_[i];
    const auto to_int8 = [&] {
      if (is_q) return;
      qa.resize(nin);
      kernels::quantize_s8(fa.data(), nin, px.scale, px.zero_point, qa.data());
      is_q = true;
    };
    if constexpr (detail::is_linear_v<L>) {
      if (ql.quantized) {
        to_int8();
        const std::size_t C = ql.channels;
        const std::int32_t zy = ql.float_output ? 0 : act_[i + 1].zero_point;
        if (ql.float_output) fa.resize(nout);
        else qb.resize(nout);
        // one output channel's run of n accumulators -> its int8 codes (or floats) at offset off
        const auto emit = [&](std::size_t c, const std::int32_t* a, std::size_t n, std::size_t off) {
          if (ql.float_output) {
            const std::int64_t bc = ql.bias[c];
            const float m = ql.multiplier[c];
            for (std::size_t p = 0; p < n; ++p) fa[off + p] = T(float(std::int64_t(a[p]) + bc) * m);
          } else {
            kernels::requantize_s8(a, n, ql.bias[c], ql.multiplier[c], zy, qb.data() + off);
          }
        };
        if constexpr (detail::is_conv_v<L>) {
          const conv_geometry g = layer_traits<L>::geometry_of(&l);
          const std::size_t Cin = sin[0], H = sin[1], Wd = sin[2], OH = sout[1], OW = sout[2], P = OH * OW;
          const std::size_t G = g.groups, Cg = Cin / G, Og = C / G, Kc = Cg * g.kh * g.kw;
          const std::size_t Hp = H + g.pad_top + g.pad_bottom, Wp = Wd + g.pad_left + g.pad_right;
          conv_geometry g0 = g;
          g0.pad_top = g0.pad_bottom = g0.pad_left = g0.pad_right = 0;
          // several samples side by side in one im2col buffer, so that each GEMM is >= 512 wide
          const std::size_t nb = std::max<std::size_t>(
              1, std::min({batch, (512 + P - 1) / P, (std::size_t(1) << 22) / std::max<std::size_t>(1, Kc * P)}));
          pad.resize(Cg * Hp * Wp);
          col.resize(Kc * nb * P);
          acc.resize(Og * nb * P);
          for (std::size_t s0 = 0; s0 < batch; s0 += nb) {
            const std::size_t m = std::min(nb, batch - s0), ld = m * P;
            for (std::size_t gi = 0; gi < G; ++gi) {
              for (std::size_t s = 0; s < m; ++s) {
                kernels::pad_planes_s8(qa.data() + (s0 + s) * sin.size() + gi * Cg * H * Wd, Cg, H, Wd, g,
                                       std::int8_t(px.zero_point), pad.data());
                kernels::im2col(pad.data(), Cg, Hp, Wp, g0, OH, OW, col.data() + s * P, ld);
              }
              kernels::gemm_s8(Og, ld, Kc, ql.weights.data() + gi * Og * Kc, Kc, col.data(), ld, acc.data(), ld);
              for (std::size_t o = 0; o < Og; ++o)
                for (std::size_t s = 0; s < m; ++s)
                  emit(gi * Og + o, acc.data() + o * ld + s * P, P, ((s0 + s) * C + gi * Og + o) * P);
            }
          }
        } else {
          acc.resize(nout);
          kernels::gemm_s8(batch, C, sin[0], qa.data(), sin[0], ql.weights.data(), C, acc.data(), C,
                           ql.packed.empty() ? nullptr : ql.packed.data());
          for (std::size_t s = 0; s < batch; ++s) {
            if (ql.float_output) {
              for (std::size_t c = 0; c < C; ++c) emit(c, acc.data() + s * C + c, 1, s * C + c);
            } else {
              kernels::requantize_row_s8(acc.data() + s * C, C, ql.bias.data(), ql.multiplier.data(), zy,
                                         qb.data() + s * C);
            }
          }
        }
        if (ql.float_output) {
          is_q = false;
        } else {
          qa.swap(qb);
          is_q = true;
        }
        return;
      }
    }
    if constexpr (detail::int8_passthrough_v<L>) {
      if (is_q) return;  // the same bytes in a new shape
    }
    if constexpr (Int8Op<L>) {
      if (is_q) {  // the op on the codes (ReLU: max(q, z); MaxPool2D: max of the codes); the scale stays
        qb.resize(nout);
        layer_traits<L>::int8_forward(l, sin, sout, batch, qa.data(), qb.data(), px.zero_point);
        qa.swap(qb);
        return;
      }
    }
    // float fallback: dequantise, the layer's own float forward, requantise to its output range
    if (is_q) {
      fa.resize(nin);
      kernels::dequantize_s8(qa.data(), nin, px.scale, px.zero_point, fa.data());
      is_q = false;
    }
    fb.resize(nout);
    scratch.resize(layer_traits<L>::scratch_size(&l, sin, sout, batch));
    layer_traits<L>::forward(l, forward_args<T>{sin, sout, batch, fa.data(), fb.data(), nullptr, scratch.data()});
    fa.swap(fb);
    if (i + 1 < n) {
      const quant_params& py = act_[i + 1];
      qa.resize(nout);
      kernels::quantize_s8(fa.data(), nout, py.scale, py.zero_point, qa.data());
      is_q = true;
    }
  });
  if (is_q) kernels::dequantize_s8(qa.data(), batch * out_n, act_[n].scale, act_[n].zero_point, y);
  else std::copy_n(fa.data(), batch * out_n, y);
}

// ---- entry points ----

/// Weight-only twin (no calibration): opt.mode must be weight_only.
template <class Net>
quantized_network<Net> quantize_weights(const Net& net, const quantize_options& opt) {
  if (opt.mode != quant_mode::weight_only)
    throw value_error("quantize_weights: int8 activations need a calibration set; call quantize(net, calibration, opts)");
  check_shapes(net);
  quantized_network<Net> q;
  q.net_ = net;
  q.opt_ = opt;
  q.quantize_weights_();
  const std::size_t n = layer_count(net);
  for_each_layer(net, [&](const auto& l, auto idx, shape, shape) {
    (void)l;
    if (std::size_t(idx) + 1 == n) q.ends_in_softmax_ = output_is_distribution_v<std::decay_t<decltype(l)>>;
  });
  return q;
}

/// Post-training quantisation calibrated on `calibration` ([N, in...], N >= 1, finite).
template <class Net, class E>
quantized_network<Net> quantize(const Net& net, const E& calibration, const quantize_options& opt) {
  using T = network_scalar_t<Net>;
  const shape in = input_shape_of(net);
  const std::size_t N = nnlens::detail::check_batch_input(calibration, in, "quantize: calibration set");
  if (N == 0) throw data_error("quantize: the calibration set is empty (need at least one sample)");
  if (opt.calibration_batch == 0) throw value_error("quantize: calibration_batch must be at least 1");
  const xt::xarray<T> cal = calibration;
  require_finite(std::span<const T>(cal.data(), cal.size()), in.size(), "quantize: calibration set");
  quantize_options wopt = opt;
  wopt.mode = quant_mode::weight_only;
  quantized_network<Net> q = quantize_weights(net, wopt);
  q.opt_ = opt;
  if (opt.mode == quant_mode::weight_only) return q;

  // per-tensor min/max of every activation of the float network over the calibration set
  const std::size_t n = layer_count(net);
  std::vector<detail::range> r(n + 1);
  trace<T> tr;
  for (std::size_t b0 = 0; b0 < N; b0 += opt.calibration_batch) {
    const std::size_t nb = std::min(opt.calibration_batch, N - b0);
    forward_trace(net, nb, cal.data() + b0 * in.size(), tr);
    for (std::size_t i = 0; i <= n; ++i)
      for (T v : tr.activation(i)) {
        if (!std::isfinite(v))
          throw value_error(nnlens::detail::concat("quantize: calibration activation ", i,
                                                   " is not finite (overflow in the float network)"));
        r[i].lo = std::min(r[i].lo, double(v)), r[i].hi = std::max(r[i].hi, double(v));
      }
  }
  // parameters of every tensor: layers that keep the scale pass their input's on; a Dense/Conv2D
  // followed by a ReLU takes the ReLU's output range (fused)
  q.act_.assign(n + 1, {});
  q.act_[0] = activation_params(r[0].lo, r[0].hi);
  std::vector<bool> keeps(n, false), linear_q(n, false), relu(n, false);
  for_each_layer(net, [&](const auto& l, auto idx, shape, shape) {
    using L = std::decay_t<decltype(l)>;
    (void)l;
    keeps[idx] = detail::keeps_scale_v<L>;
    relu[idx] = fuses_into_linear_v<L>;
    linear_q[idx] = detail::is_linear_v<L> && q.layers_[idx].quantized;
  });
  for (std::size_t i = 0; i < n; ++i) {
    if (keeps[i]) {
      q.act_[i + 1] = q.act_[i];
    } else if (linear_q[i] && opt.fuse_relu && i + 1 < n && relu[i + 1]) {
      q.act_[i + 1] = activation_params(r[i + 2].lo, r[i + 2].hi);
      q.layers_[i].fused_relu = true;
    } else {
      q.act_[i + 1] = activation_params(r[i + 1].lo, r[i + 1].hi);
    }
  }
  q.set_int8_constants_();
  return q;
}

}  // namespace nnlens::compress
