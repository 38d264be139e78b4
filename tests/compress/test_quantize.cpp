// DFlare's compressed twins (compress/quantize.hpp, compress/magnitude.hpp; docs/specs/dflare.md#4-evaluation-setup-and-headline-numbers (§4-§5)):
// hand-computed int8 quantisation of tiny Dense nets (scales, rounding, saturation, zero points,
// the int32 bias with its zero-point correction), per-channel vs per-tensor, the DFlare/TFLite
// reference rule (1023 elements stay float, 1024 become int8), int8 convolutions against float,
// quantised vs float on real models (ACAS Xu .nnet; DeepXplore's LeNet-1/5 ONNX when nnlens::onnx
// is built), static == dynamic bits, pruning ratios, determinism and bad input.
#include <doctest/doctest.h>

#include <nnlens/compress/magnitude.hpp>
#include <nnlens/compress/quantize.hpp>
#include <nnlens/io/image.hpp>
#include <nnlens/io/nnet.hpp>
#include <nnlens/nnlens.hpp>

#include <array>
#include <cmath>
#include <filesystem>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "test_skip.hpp"

#if defined(NNLENS_COMPRESS_WITH_ONNX)
#include <nnlens/io/onnx.hpp>
#include <nnlens/io/onnx_export.hpp>
#endif

using namespace nnlens;
using namespace nnlens::compress;
namespace fs = std::filesystem;

namespace {
const fs::path models = nnlens_test::shared_dir() / "models";

template <class T>
xt::xarray<T> rows(std::initializer_list<std::initializer_list<T>> r) {
  std::vector<T> v;
  for (auto& x : r) v.insert(v.end(), x.begin(), x.end());
  const std::size_t n = r.size(), m = n ? v.size() / n : 0;
  xt::xarray<T> a = xt::xarray<T>::from_shape({n, m});
  std::copy(v.begin(), v.end(), a.begin());
  return a;
}

template <class T>
xt::xarray<T> uniform(std::vector<std::size_t> shp, double lo, double hi, std::uint64_t seed) {
  xt::xarray<T> a = xt::xarray<T>::from_shape(shp);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  for (auto& v : a) v = T(u(rng));
  return a;
}

template <class A>
std::size_t argmax_row(const A& y, std::size_t n, std::size_t F) {
  std::size_t b = 0;
  for (std::size_t i = 1; i < F; ++i)
    if (y.data()[n * F + i] > y.data()[n * F + b]) b = i;
  return b;
}
template <class A>
double max_abs(const A& a) {
  double m = 0;
  for (auto v : a) m = std::max(m, std::abs(double(v)));
  return m;
}
template <class A, class B>
double max_diff(const A& a, const B& b) {
  REQUIRE(a.size() == b.size());
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(double(a.data()[i]) - double(b.data()[i])));
  return m;
}
}  // namespace

TEST_CASE("quantize: activation parameters, weight scales, rounding and saturation by hand") {
  // [-1, 3]: scale 4/255, zero point round(-128 + 63.75) = round(-64.25) = -64
  auto p = activation_params(-1.0, 3.0);
  CHECK(p.scale == float(4.0 / 255.0));
  CHECK(p.zero_point == -64);
  CHECK(p.quantize(0.0) == -64);          // 0 is exact
  CHECK(p.quantize(3.0) == 127);
  CHECK(p.quantize(-1.0) == -128);
  CHECK(p.quantize(100.0) == 127);        // saturates
  CHECK(p.quantize(-100.0) == -128);
  // a positive range is widened to contain 0: [0, 5] -> zero point -128 (ReLU outputs)
  p = activation_params(2.0, 5.0);
  CHECK(p.scale == float(5.0 / 255.0));
  CHECK(p.zero_point == -128);
  // a negative range: [-3, 0] -> zero point 127
  p = activation_params(-3.0, -1.0);
  CHECK(p.zero_point == 127);
  // a constant-0 tensor: scale 1, zero point 0
  p = activation_params(0.0, 0.0);
  CHECK(p.scale == 1.0f);
  CHECK(p.zero_point == 0);
  // rounding is half away from zero
  const quant_params h{0.5f, 0};
  CHECK(h.quantize(0.25) == 1);    // 0.5 -> 1
  CHECK(h.quantize(-0.25) == -1);  // -0.5 -> -1
  CHECK(h.quantize(0.75) == 2);    // 1.5 -> 2
  CHECK(symmetric_scale(2.0) == float(2.0 / 127.0));
  CHECK(symmetric_scale(0.0) == 1.0f);
}

TEST_CASE("quantize: int8 weights of a tiny Dense, per tensor and per channel, by hand") {
  using Net = Sequential<Input<2>, Dense<2, double>>;
  Net net;
  net.layer<0>().W = {{0.5, -1.0}, {0.25, 2.0}};  // [in, out]
  net.layer<0>().b = {0.1, -0.2};
  const auto cal = rows<double>({{-1.0, 3.0}, {0.5, 0.0}});
  quantize_options o;
  o.granularity = quant_granularity::per_tensor;
  const auto qt = quantize(net, cal, o);
  // one scale 2/127: 0.5 -> 31.75 -> 32, -1 -> -63.5 -> -64, 0.25 -> 15.875 -> 16, 2 -> 127
  REQUIRE(qt.layer(0).quantized);
  CHECK(qt.layer(0).weight_scales == std::vector<float>{float(2.0 / 127.0)});
  CHECK(qt.layer(0).weights == std::vector<std::int8_t>{32, -64, 16, 127});
  CHECK(qt.activation(0) == activation_params(-1.0, 3.0));
  // the dequantised twin holds q * s
  CHECK(qt.dequantized().layer<0>().W(0, 0) == doctest::Approx(32 * double(float(2.0 / 127.0))).epsilon(1e-12));

  o.granularity = quant_granularity::per_channel;
  const auto qc = quantize(net, cal, o);
  // column 0 (0.5, 0.25): scale 0.5/127 -> 127, 63.5 -> 64; column 1 (-1, 2): scale 2/127 -> -64, 127
  CHECK(qc.layer(0).weight_scales == std::vector<float>{float(0.5 / 127.0), float(2.0 / 127.0)});
  CHECK(qc.layer(0).weights == std::vector<std::int8_t>{127, -64, 64, 127});
  // per channel is never worse on the weights here: the small column gets 4x the resolution
  const double et = max_diff(qt.dequantized().layer<0>().W, net.layer<0>().W);
  const double ec = max_diff(qc.dequantized().layer<0>().W, net.layer<0>().W);
  CHECK(ec <= et);
}

TEST_CASE("quantize: int8 forward of a Dense, int32 accumulator and bias by hand") {
  using Net = Sequential<Input<2>, Dense<1, double>>;
  Net net;
  net.layer<0>().W = {{1.0}, {-0.5}};
  net.layer<0>().b = {0.25};
  quantize_options o;
  o.granularity = quant_granularity::per_tensor;
  const auto q = quantize(net, rows<double>({{0.0, 0.0}, {1.0, 1.0}}), o);
  // weights: scale 1/127 -> 127, -63.5 -> -64.  Input [0, 1]: scale 1/255, zero point -128.
  CHECK(q.layer(0).weights == std::vector<std::int8_t>{127, -64});
  CHECK(q.activation(0).zero_point == -128);
  // bias: round(0.25 * 255 * 127) = round(8096.25) = 8096, minus z_x * sum(q_w) = -(-128) * 63
  REQUIRE(q.layer(0).bias.size() == 1);
  CHECK(q.layer(0).bias[0] == 8096 + 128 * 63);
  CHECK(q.layer(0).float_output);
  // x = (1, 1): q_x = (127, 127); acc = 127*127 - 64*127 = 8001; y = (8001 + 16160) / (255 * 127)
  // x = (0.6, 0.2): q_x = (153 - 128, 51 - 128) = (25, -77); acc = 3175 + 4928 = 8103
  const auto y = q.forward(rows<double>({{1.0, 1.0}, {0.6, 0.2}}));
  CHECK(y(0, 0) == doctest::Approx(24161.0 / 32385.0).epsilon(1e-6));
  CHECK(y(1, 0) == doctest::Approx(24263.0 / 32385.0).epsilon(1e-6));
  // float: 0.75 both
  CHECK(std::abs(y(0, 0) - 0.75) < 0.005);
  CHECK(std::abs(y(1, 0) - 0.75) < 0.005);
}

TEST_CASE("quantize: a hidden layer is requantised to int8 (fused ReLU range) by hand") {
  using Net = Sequential<Input<1>, Dense<1, double>, ReLU, Dense<1, double>>;
  Net net;
  net.layer<0>().W = {{2.0}};
  net.layer<0>().b = {-0.5};
  net.layer<2>().W = {{1.0}};
  net.layer<2>().b = {0.0};
  // calibration x in [0, 1]: hidden pre-activation [-0.5, 1.5], after ReLU [0, 1.5]
  const auto q = quantize(net, rows<double>({{0.0}, {1.0}}));
  CHECK(q.layer(0).fused_relu);
  // the hidden tensor takes the ReLU's range [0, 1.5]: scale 1.5/255, zero point -128
  CHECK(q.activation(1) == activation_params(0.0, 1.5));
  CHECK(q.activation(1).zero_point == -128);
  CHECK(q.activation(2) == q.activation(1));
  // bias = round(-0.5 / (1/255 * 2/127)) - (-128 * 127) = round(-8096.25) + 16256 = 8160
  CHECK(q.layer(0).bias[0] == 8160);
  // x = 0.75: q_x = round(191.25) - 128 = 63; w: 127 (scale 2/127); acc = 63 * 127 = 8001
  // requantise: (8001 + 8160) * (1/255 * 2/127) / (1.5/255) = 16161 * 2 / 190.5 = 169.67 -> 170;
  // + (-128) = 42, i.e. hidden = 170 * 1.5/255 = 1.0.  Last layer: w = 127 (scale 1/127), input
  // zero point -128: acc = 127 * 42 = 5334, bias = 128 * 127 = 16256; y = 21590 * 1.5/255 / 127 = 1
  const auto y = q.forward(rows<double>({{0.75}}));
  CHECK(y(0, 0) == doctest::Approx(1.0).epsilon(1e-6));
  // x = 0.1: pre-activation -0.3; q_x = round(25.5) - 128 = -102; (127 * -102 + 8160) * mult =
  // -50.3 -> -50 - 128 = -178, saturated to -128 = the zero point (ReLU); the output is exactly 0
  const auto y0 = q.forward(rows<double>({{0.1}}));
  CHECK(y0(0, 0) == 0.0);
}

TEST_CASE("quantize: DFlare's reference rule -- 1023 elements stay float, 1024 become int8 (weight-only)") {
  using Small = Sequential<Input<31>, Dense<33>>;  // 1023 weights
  using Big = Sequential<Input<32>, Dense<32>, ReLU, Dense<10>>;  // 1024 weights, then 320
  Small s;
  initialize(s, 3);
  Big b;
  initialize(b, 4);
  const auto o = quantize_options::dflare_reference();
  CHECK(o.mode == quant_mode::weight_only);
  CHECK(o.granularity == quant_granularity::per_tensor);
  CHECK(o.min_elements == 1024);
  const auto qs = quantize_weights(s, o);
  CHECK_FALSE(qs.layer(0).quantized);
  CHECK(qs.dequantized().layer<0>().W == s.layer<0>().W);  // untouched
  const auto qb = quantize_weights(b, o);
  REQUIRE(qb.layer(0).quantized);
  CHECK_FALSE(qb.layer(2).quantized);
  CHECK(qb.quantized_layers() == 1);
  // symmetric per-tensor scale max|W| / 127, and the weights on that grid
  const double m = max_abs(b.layer<0>().W);
  CHECK(qb.layer(0).weight_scales == std::vector<float>{float(m / 127.0)});
  const auto& W = qb.dequantized().layer<0>().W;
  for (std::size_t i = 0; i < W.size(); ++i)
    CHECK(W.data()[i] == float(qb.layer(0).weights[i]) * qb.layer(0).weight_scales[0]);
  CHECK(qb.dequantized().layer<2>().W == b.layer<2>().W);
  // weight-only forward is the float forward of the dequantised twin; quantize(net, cal, o) agrees
  const auto x = uniform<float>({5, 32}, -1, 1, 7);
  CHECK(qb.forward(x) == forward(qb.dequantized(), x));
  const auto qb2 = quantize(b, x, o);
  CHECK(qb2.forward(x) == qb.forward(x));
  // int8 mode with the same threshold: the small layer runs in float between dequantise/requantise
  quantize_options o8 = o;
  o8.mode = quant_mode::int8;
  const auto q8 = quantize(b, x, o8);
  CHECK(max_diff(q8.forward(x), forward(b, x)) < 0.05 * std::max(1.0, max_abs(forward(b, x))));
  // quantize_weights refuses int8 mode (no calibration)
  CHECK_THROWS_AS(quantize_weights(b, o8), value_error);
}

TEST_CASE("quantize: int8 convolutions (padding, stride, groups, dilation) and padded max-pools track float; static == dynamic") {
  using Net = Sequential<Input<4, 9, 9>, Conv2DG<6, conv_geometry{.kh = 3, .stride_h = 2, .pad_top = 1, .groups = 2}>,
                         ReLU, MaxPool2DG<pool_geometry{.kh = 3, .stride_h = 2, .pad_top = 1}>,
                         Conv2DG<4, conv_geometry{.kh = 3, .pad_top = 2, .dilation_h = 2}>, ReLU, MaxPool2D<2>,
                         Flatten, Dense<5>>;
  Net net;
  initialize(net, 11);
  const auto cal = uniform<float>({32, 4, 9, 9}, 0, 1, 1);
  const auto x = uniform<float>({8, 4, 9, 9}, 0, 1, 2);
  const auto yf = forward(net, x);
  for (auto g : {quant_granularity::per_tensor, quant_granularity::per_channel}) {
    quantize_options o;
    o.granularity = g;
    const auto q = quantize(net, cal, o);
    const auto yq = q.forward(x);
    CHECK(max_diff(yq, yf) < 0.03 * max_abs(yf));
    const auto d = to_dynamic(net);
    const auto qd = quantize(d, cal, o);
    CHECK(qd.forward(x) == yq);  // one code path: the same bits
  }
}

TEST_CASE("quantize: real ACAS Xu networks (.nnet, Affine normalisation in float): int8 follows float") {
  const fs::path p = models / "acasxu-nnet" / "ACASXU_run2a_1_1_batch_2000.nnet";
  if (!fs::exists(p)) NNLENS_SKIP(p.string(), " not found");
  io::nnet_options no;
  no.normalize_inputs = true;  // raw inputs: an Affine layer in front
  const auto net = io::load_nnet<float>(p, no).net;
  const std::size_t in = input_shape_of(net).size();
  // inputs spread over the raw input box: load_nnet normalises them (an Affine layer: float)
  xt::xarray<float> x = xt::xarray<float>::from_shape({512, in});
  const double lo[5] = {0, -3.141593, -3.141593, 100, 0}, hi[5] = {60760, 3.141593, 3.141593, 1200, 1200};
  std::mt19937_64 rng(5);
  for (std::size_t n = 0; n < 512; ++n)
    for (std::size_t i = 0; i < in; ++i) x(n, i) = float(std::uniform_real_distribution<double>(lo[i % 5], hi[i % 5])(rng));
  const auto yf = forward(net, x);
  const std::size_t F = output_shape_of(net).size();
  // ACAS Xu's five scores lie close together (mean spread about 2.6 of a range of about 160), and
  // the weights of a layer span three decades (per-channel scales 6e-5 .. 0.03 in the first
  // Dense): per-tensor scales lose the small channels (measured 201/512 advisories kept, the
  // weight-only twin 215/512), per-channel scales keep them (477/512).
  std::size_t agree_by[2] = {0, 0};
  for (auto g : {quant_granularity::per_tensor, quant_granularity::per_channel}) {
    quantize_options o;
    o.granularity = g;
    const auto q = quantize(net, x, o);
    CHECK(q.quantized_layers() == 7);
    const auto yq = q.forward(x);
    std::size_t agree = 0;
    for (std::size_t n = 0; n < 512; ++n) {  // the advisory is the minimal score
      std::size_t bf = 0, bq = 0;
      for (std::size_t k = 1; k < F; ++k) {
        if (yf(n, k) < yf(n, bf)) bf = k;
        if (yq(n, k) < yq(n, bq)) bq = k;
      }
      agree += bf == bq;
    }
    const bool pc = g == quant_granularity::per_channel;
    agree_by[pc] = agree;
    MESSAGE("ACAS Xu 1_1 int8 (" << (pc ? "per channel" : "per tensor") << "): advisory agrees on " << agree
                                  << "/512, max |dy| " << max_diff(yq, yf) << " of max |y| " << max_abs(yf));
    if (pc) {
      CHECK(agree >= 450);
      CHECK(max_diff(yq, yf) < 0.1 * max_abs(yf));
    }
  }
  CHECK(agree_by[1] > agree_by[0]);
}

#if defined(NNLENS_COMPRESS_WITH_ONNX)
namespace {
// DeepXplore's LeNet-5 ('same' padding; ../shared/models/README.md)
using XLeNet5 = Sequential<Input<1, 28, 28>, Conv2D<6, 5, 1, 2>, ReLU, MaxPool2D<2>, Conv2D<16, 5, 1, 2>, ReLU,
                           MaxPool2D<2>, Flatten, Dense<120>, ReLU, Dense<84>, ReLU, Dense<10>>;
xt::xarray<float> deepxplore_images() {
  const fs::path dir = models / "deepxplore-mnist" / "images";
  std::vector<fs::path> ps;
  for (const auto& e : fs::directory_iterator(dir)) ps.push_back(e.path());
  std::sort(ps.begin(), ps.end());
  REQUIRE(ps.size() == 96);
  return io::load_images<float>(ps);  // x / 255, [96, 1, 28, 28]
}
}  // namespace

TEST_CASE("quantize: DeepXplore LeNet-1/LeNet-5 (real MNIST models, 96 real digits): twins agree with float") {
  if (!fs::is_directory(models / "deepxplore-mnist")) NNLENS_SKIP((models / "deepxplore-mnist").string(), " not found");
  const auto x = deepxplore_images();
  for (const char* m : {"lenet1", "lenet5"}) {
    const auto net = io::load_onnx((models / "deepxplore-mnist" / (std::string(m) + ".onnx")).string());
    const auto yf = forward(net, x);
    struct cfg {
      const char* name;
      quantize_options o;
    };
    quantize_options pt, pc;
    pt.granularity = quant_granularity::per_tensor;
    for (const auto& [name, o] : {cfg{"int8 per tensor", pt}, cfg{"int8 per channel", pc},
                                  cfg{"DFlare reference", quantize_options::dflare_reference()}}) {
      const auto q = quantize(net, x, o);
      const auto yq = q.forward(x);
      std::size_t agree = 0;
      for (std::size_t n = 0; n < 96; ++n) agree += argmax_row(yq, n, 10) == argmax_row(yf, n, 10);
      MESSAGE(std::string(m) << " " << std::string(name) << ": top-1 agrees with float on " << agree << "/96, max |dlogit| " << max_diff(yq, yf)
                << " (max |logit| " << max_abs(yf) << ")");
      CHECK(agree >= 90);  // the 96 include 8 digits on which the three LeNets already disagree
      CHECK(max_diff(yq, yf) < 0.03 * max_abs(yf));
    }
  }
  // the static type runs the same code path: the same bits
  const auto p = (models / "deepxplore-mnist" / "lenet5.onnx").string();
  const auto s = io::load_onnx<XLeNet5>(p);
  const auto d = io::load_onnx(p);
  CHECK(quantize(s, x).forward(x) == quantize(d, x).forward(x));
}

TEST_CASE("quantize/prune: twins export to ONNX as float (weight-only dequantised / zeroed weights)") {
  if (!fs::is_directory(models / "deepxplore-mnist")) NNLENS_SKIP((models / "deepxplore-mnist").string(), " not found");
  const auto x = deepxplore_images();
  const auto net = io::load_onnx<XLeNet5>((models / "deepxplore-mnist" / "lenet5.onnx").string());
  const fs::path dir = fs::temp_directory_path() / "nnlens_test_compress";
  fs::create_directories(dir);
  const auto q = quantize_weights(net, quantize_options::dflare_reference());
  io::save_onnx((dir / "q.onnx").string(), q.dequantized());
  const auto back = io::load_onnx<XLeNet5>((dir / "q.onnx").string());
  CHECK(max_diff(forward(back, x), q.forward(x)) < 1e-5);
  const auto pr = magnitude_prune(net, 0.8);
  io::save_onnx((dir / "p.onnx").string(), pr);
  const auto pb = io::load_onnx<XLeNet5>((dir / "p.onnx").string());
  CHECK(weight_sparsity(pb) == doctest::Approx(weight_sparsity(pr)));
  CHECK(max_diff(forward(pb, x), forward(pr, x)) < 1e-5);
  fs::remove_all(dir);
}
#endif

TEST_CASE("quantize: deterministic; bad input gives nnlens errors") {
  using Net = Sequential<Input<3>, Dense<4>, ReLU, Dense<2>>;
  Net net;
  initialize(net, 9);
  const auto cal = uniform<float>({16, 3}, -1, 1, 3);
  CHECK(quantize(net, cal).forward(cal) == quantize(net, cal).forward(cal));
  // empty calibration set
  xt::xarray<float> empty = xt::xarray<float>::from_shape({0, 3});
  CHECK_THROWS_AS(quantize(net, empty), data_error);
  CHECK_THROWS_WITH_AS(quantize(net, empty), doctest::Contains("calibration set is empty"), data_error);
  // NaN / Inf in the calibration data: named by sample and element
  auto bad = cal;
  bad(5, 1) = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS_WITH_AS(quantize(net, bad), doctest::Contains("NaN at sample 5, element 1"), value_error);
  bad(5, 1) = std::numeric_limits<float>::infinity();
  CHECK_THROWS_AS(quantize(net, bad), value_error);
  // wrong shape, NaN at forward, non-finite weights
  CHECK_THROWS_AS(quantize(net, uniform<float>({4, 2}, 0, 1, 1)), shape_error);
  const auto q = quantize(net, cal);
  bad(5, 1) = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS_AS(q.forward(bad), value_error);
  Net nan_net = net;
  nan_net.layer<0>().W(1, 2) = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS_WITH_AS(quantize(nan_net, cal), doctest::Contains("layer 0 (Dense)"), value_error);
  quantize_options zero_batch;
  zero_batch.calibration_batch = 0;
  CHECK_THROWS_AS(quantize(net, cal, zero_batch), value_error);
  // pruning ratios outside [0, 1]
  for (double r : {-0.1, 1.5, std::numeric_limits<double>::quiet_NaN()}) {
    CHECK_THROWS_AS(magnitude_prune(net, r), value_error);
    CHECK_THROWS_AS(channel_prune(net, r), value_error);
  }
  CHECK_THROWS_WITH_AS(magnitude_prune(net, 2.0), doctest::Contains("ratio must lie in [0, 1]"), value_error);
}

TEST_CASE("magnitude_prune: exact ratios (layerwise and global), same type, deterministic") {
  using Net = Sequential<Input<1, 8, 8>, Conv2D<4, 3>, ReLU, Flatten, Dense<16>, ReLU, Dense<10>>;
  Net net;
  initialize(net, 21);  // no zero weights
  const std::size_t n0 = net.layer<0>().W.size(), n3 = net.layer<3>().W.size(), n5 = net.layer<5>().W.size();
  auto zeros = [](const auto& W) {
    std::size_t z = 0;
    for (auto v : W) z += v == 0;
    return z;
  };
  for (double r : {0.0, 0.25, 0.5, 0.8, 1.0}) {
    const Net p = magnitude_prune(net, r);
    static_assert(std::is_same_v<decltype(magnitude_prune(net, r)), Net>);
    CHECK(zeros(p.layer<0>().W) == std::size_t(std::llround(r * double(n0))));
    CHECK(zeros(p.layer<3>().W) == std::size_t(std::llround(r * double(n3))));
    CHECK(zeros(p.layer<5>().W) == std::size_t(std::llround(r * double(n5))));
    CHECK(p.layer<3>().b == net.layer<3>().b);  // biases stay
    magnitude_options g;
    g.scope = prune_scope::global;
    const Net q = magnitude_prune(net, r, g);
    const std::size_t zt = zeros(q.layer<0>().W) + zeros(q.layer<3>().W) + zeros(q.layer<5>().W);
    CHECK(zt == std::size_t(std::llround(r * double(n0 + n3 + n5))));
    CHECK(weight_sparsity(q) == doctest::Approx(double(zt) / double(n0 + n3 + n5)));
  }
  // the smallest magnitudes go: every surviving |w| >= every pruned original |w| (per tensor)
  const Net p = magnitude_prune(net, 0.5);
  double max_pruned = 0, min_kept = 1e9;
  for (std::size_t i = 0; i < n3; ++i) {
    const double w = std::abs(double(net.layer<3>().W.data()[i]));
    if (p.layer<3>().W.data()[i] == 0) max_pruned = std::max(max_pruned, w);
    else min_kept = std::min(min_kept, w);
  }
  CHECK(max_pruned <= min_kept);
  // deterministic, and the dynamic form prunes the same weights
  CHECK(magnitude_prune(net, 0.5).layer<3>().W == p.layer<3>().W);
  const auto d = magnitude_prune(to_dynamic(net), 0.5);
  CHECK(forward(d, uniform<float>({3, 1, 8, 8}, 0, 1, 1)) == forward(p, uniform<float>({3, 1, 8, 8}, 0, 1, 1)));
}

TEST_CASE("channel_prune: the lowest-L1 filters / units lose weights and bias; the class layer stays") {
  using Net = Sequential<Input<2, 5, 5>, Conv2D<4, 3>, ReLU, Flatten, Dense<6>, ReLU, Dense<3>>;
  Net net;
  initialize(net, 5);
  // make filter 2 and unit 4 the smallest by L1
  for (std::size_t i = 0; i < 18; ++i) net.layer<0>().W.data()[2 * 18 + i] *= 0.01f;
  for (std::size_t i = 0; i < net.layer<3>().W.shape(0); ++i) net.layer<3>().W(i, 4) *= 0.01f;
  const Net p = channel_prune(net, 0.25);  // round(0.25 * 4) = 1 filter, round(0.25 * 6) = round(1.5) = 2 units
  for (std::size_t c = 0; c < 4; ++c) {
    bool all_zero = true;
    for (std::size_t i = 0; i < 18; ++i) all_zero = all_zero && p.layer<0>().W.data()[c * 18 + i] == 0;
    CHECK(all_zero == (c == 2));
    CHECK((p.layer<0>().b(c) == 0) == (c == 2));
  }
  std::size_t dead = 0;
  for (std::size_t o = 0; o < 6; ++o) {
    bool all_zero = true;
    for (std::size_t i = 0; i < p.layer<3>().W.shape(0); ++i) all_zero = all_zero && p.layer<3>().W(i, o) == 0;
    dead += all_zero;
    if (o == 4) CHECK(all_zero);
  }
  CHECK(dead == 2);
  CHECK(p.layer<5>().W == net.layer<5>().W);  // the output layer is kept
  channel_prune_options all;
  all.include_last = true;
  CHECK(channel_prune(net, 1.0, all).layer<5>().W == xt::zeros<float>({6, 3}));
  CHECK(channel_prune(net, 0.0).layer<0>().W == net.layer<0>().W);
  // an int8 twin of a pruned net keeps the zeros exactly (symmetric: 0 -> 0)
  const auto q = quantize(p, uniform<float>({8, 2, 5, 5}, 0, 1, 2));
  for (std::size_t i = 0; i < 18; ++i) CHECK(q.layer(0).weights[2 * 18 + i] == 0);
}

TEST_CASE("kernels::gemm_s8: exact int32 products against a naive loop (tails in M, N, K; pruned zeros)") {
  std::mt19937_64 rng(17);
  std::uniform_int_distribution<int> u(-128, 127);
  for (auto [M, N, K] : {std::array<std::size_t, 3>{1, 1, 1}, {3, 17, 5}, {4, 16, 2}, {6, 35, 31}, {9, 100, 64},
                         {13, 784, 25}, {5, 15, 300}}) {
    std::vector<std::int8_t> A(M * K), B(K * N);
    for (auto& v : A) v = std::int8_t(u(rng) % 3 == 0 ? 0 : u(rng));  // some pruned weights
    for (auto& v : B) v = std::int8_t(u(rng));
    A[0] = -128, B[0] = -128;  // the extreme product
    std::vector<std::int32_t> C(M * N, 12345), P(M * N, 777), R(M * N, 0);
    for (std::size_t i = 0; i < M; ++i)
      for (std::size_t j = 0; j < N; ++j)
        for (std::size_t k = 0; k < K; ++k) R[i * N + j] += std::int32_t(A[i * K + k]) * std::int32_t(B[k * N + j]);
    kernels::gemm_s8(M, N, K, A.data(), K, B.data(), N, C.data(), N);
    kernels::gemm_s8_portable(M, N, K, A.data(), K, B.data(), N, P.data(), N);
    CHECK(C == R);
    CHECK(P == R);
    const auto packed = kernels::pack_b_s8(K, N, B.data(), N);  // constant weights, packed once
    std::fill(C.begin(), C.end(), -1);
    kernels::gemm_s8(M, N, K, A.data(), K, B.data(), N, C.data(), N, packed.empty() ? nullptr : packed.data());
    CHECK(C == R);
  }
}

TEST_CASE("kernels::round_half_away and the int8 saturation (ties both ways, huge values)") {
  for (auto [v, r] : std::vector<std::pair<float, float>>{{0.5f, 1}, {1.5f, 2}, {2.5f, 3}, {-0.5f, -1}, {-1.5f, -2},
                                                          {-2.5f, -3}, {0.49999997f, 0}, {-0.49999997f, 0},
                                                          {2.4999998f, 2}, {1e6f + 0.5f, 1e6f + 1}, {-7.0f, -7}, {0.0f, 0}})
    CHECK(kernels::round_half_away(v) == r);
  CHECK(kernels::saturate_s8(1e30f, 0.0f) == 127);
  CHECK(kernels::saturate_s8(-1e30f, 0.0f) == -128);
  CHECK(kernels::saturate_s8(std::numeric_limits<float>::infinity(), 5.0f) == 127);
  CHECK(kernels::saturate_s8(126.5f, 0.0f) == 127);
  CHECK(kernels::saturate_s8(-128.5f, 0.0f) == -128);
  std::vector<float> x = {0.25f, -0.25f, 0.75f, 1e9f, -1e9f, 0.0f};
  std::vector<std::int8_t> q(x.size());
  kernels::quantize_s8(x.data(), x.size(), 0.5f, 3, q.data());
  CHECK(q == std::vector<std::int8_t>{4, 2, 5, 127, -128, 3});
}

TEST_CASE("quantize: weights inside a Residual are quantised too (static and dynamic); the block runs in float") {
  using Net = Sequential<Input<8>, Dense<16>, ReLU, Residual<Block<Dense<16>, ReLU, Dense<16>>>, ReLU, Dense<4>>;
  Net net;
  initialize(net, 31);
  const auto x = uniform<float>({32, 8}, -1, 1, 4);
  quantize_options o;
  o.mode = quant_mode::weight_only;
  o.granularity = quant_granularity::per_tensor;
  const auto q = quantize_weights(net, o);
  CHECK(q.layer(2).name == "Residual");
  CHECK(q.layer(2).inner_quantized == 2);
  CHECK_FALSE(q.layer(2).quantized);
  // the inner weights lie on the grid max|W| / 127
  const auto& inner = std::get<0>(net.layer<2>().block.layers).W;
  const auto& qinner = std::get<0>(q.dequantized().layer<2>().block.layers).W;
  const double s = max_abs(inner) / 127.0;
  for (std::size_t i = 0; i < qinner.size(); ++i) {
    const double k = double(qinner.data()[i]) / double(float(s));
    CHECK(std::abs(k - std::round(k)) < 1e-3);
    CHECK(std::abs(double(qinner.data()[i]) - double(inner.data()[i])) <= 0.5 * s + 1e-7);
  }
  // the DFlare rule skips the 256-element inner tensors
  CHECK(quantize_weights(net, quantize_options::dflare_reference()).layer(2).inner_quantized == 0);
  // int8 mode: close to float; the dynamic form gives the same bits
  const auto q8 = quantize(net, x);
  CHECK(q8.layer(2).inner_quantized == 2);
  CHECK(max_diff(q8.forward(x), forward(net, x)) < 0.05 * std::max(1.0, max_abs(forward(net, x))));
  CHECK(quantize(to_dynamic(net), x).forward(x) == q8.forward(x));
  CHECK(quantize_weights(to_dynamic(net), o).forward(x) == q.forward(x));
}

TEST_CASE("magnitude_prune / channel_prune reach the layers inside a Residual") {
  using Net = Sequential<Input<8>, Dense<16>, ReLU, Residual<Block<Dense<16>, ReLU, Dense<16>>>, ReLU, Dense<4>>;
  Net net;
  initialize(net, 33);
  const Net p = magnitude_prune(net, 0.5);
  for (const auto* W : {&std::get<0>(p.layer<2>().block.layers).W, &std::get<2>(p.layer<2>().block.layers).W}) {
    std::size_t z = 0;
    for (auto v : *W) z += v == 0;
    CHECK(z == 128);
  }
  CHECK(weight_sparsity(p) == doctest::Approx(0.5).epsilon(1e-3));
  const auto d = magnitude_prune(to_dynamic(net), 0.5);
  const auto x = uniform<float>({4, 8}, -1, 1, 2);
  CHECK(forward(d, x) == forward(p, x));
  const Net c = channel_prune(net, 0.25);  // 4 of 16 units in each hidden Dense, inner ones too
  std::size_t dead = 0;
  const auto& W = std::get<2>(c.layer<2>().block.layers).W;
  for (std::size_t o = 0; o < 16; ++o) {
    bool all_zero = true;
    for (std::size_t i = 0; i < 16; ++i) all_zero = all_zero && W(i, o) == 0;
    dead += all_zero;
  }
  CHECK(dead == 4);
}
