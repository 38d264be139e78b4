// LRP and coverage mapping on the thrust device system (nnlens/thrust/relevance.hpp, coverage.hpp)
// against the host policy: relevance for every rule, layer stop and explicit classes (LeNet-5, an
// MLP, odd conv/pool geometries, float and double, hand-computed values, an ACAS Xu .nnet);
// neuron_relevance_of, prepare_idc + measure, NC / TKNC / KMNC / NBC / SNAC and Surprise Adequacy
// on Fashion-MNIST images through a briefly trained LeNet-5; the errors; and proof that the thrust
// path is taken on a residual network (the device pass counter moves; its LRP goes through the
// join on the device).
// Tolerances, relative to 1 + max |host| (relevance is double on both sides; differences come from
// the float forward pass, which sums in another order than the host GEMM): relevance 1e-4 in float
// (observed <= 1.5e-8 on LeNet-5, 0 elsewhere), 1e-10 in double (observed 0: bit-identical where
// the forward passes agree, and checked so); relevance totals 1e-4 and identical
// important neurons; IDC centroids 1e-5 (observed 0) and identical covered combinations; neuron
// bounds 1e-5 (observed 8e-7) and identical NC/TKNC/KMNC/NBC/SNAC counts; DSA 1e-4 (observed 1e-6);
// LSA 5e-3 (observed 1e-3: -log KDE through a near-singular covariance amplifies the rounding).
#include <nnlens/thrust/coverage.hpp>  // first: it overloads detail::importance_pass (see its header)

#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <random>
#include <string>
#include <unistd.h>

#include <nnlens/coverage.hpp>
#include <nnlens/io/idx.hpp>
#include <nnlens/io/nnet.hpp>
#include <nnlens/layers/all.hpp>
#include <nnlens/network/dynamic_network.hpp>
#include <nnlens/network/forward.hpp>
#include <nnlens/network/parameters.hpp>
#include <nnlens/thrust/forward.hpp>
#include <nnlens/train/fit.hpp>
#include <nnlens/train/optimizer.hpp>

#include <xtensor/xview.hpp>

#include "test_skip.hpp"
#include "thrust_test_util.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif

using namespace nnlens;

namespace {

using LeNet5 = Sequential<Input<1, 28, 28>, Conv2D<6, 5, 1, 2>, ReLU, MaxPool2D<2>, Conv2D<16, 5>, ReLU, MaxPool2D<2>,
                          Flatten, Dense<120>, ReLU, Dense<84>, ReLU, Dense<10>>;
using MLP = Sequential<Input<20>, Dense<32>, ReLU, Dense<16>, ReLU, Dense<5>>;
using MLPd = Sequential<Input<20>, Dense<32, double>, ReLU, Dense<16, double>, ReLU, Dense<5, double>>;
// strides, dilation, asymmetric padding, groups, a padded overlapping ceil-mode pool, 1x1 conv
using Odd = Sequential<Input<4, 13, 11>,
                       Conv2DG<6, conv_geometry{.kh = 3, .kw = 2, .stride_h = 2, .stride_w = 1, .pad_top = 1, .pad_left = 0,
                                                .pad_bottom = 2, .pad_right = 1, .groups = 2}>,
                       ReLU, Conv2DG<8, conv_geometry{.kh = 3, .stride_h = 1, .stride_w = 2, .pad_top = 2, .dilation_h = 2}>,
                       MaxPool2DG<pool_geometry{.kh = 3, .kw = 2, .stride_h = 1, .stride_w = 2, .pad_top = 1, .pad_left = 1,
                                                .ceil_mode = true}>,
                       Conv2D<3, 1>, ReLU, Flatten, Dense<7>>;
using CNNd = Sequential<Input<2, 9, 9>, Conv2DG<5, conv_geometry{.kh = 3, .stride_h = 2, .pad_top = 1, .dilation_w = 2}, double>,
                        ReLU, MaxPool2DG<pool_geometry{.kh = 3, .stride_h = 2, .pad_top = 1}>, Flatten, Dense<6, double>>;

template <class Net>
Net make(std::uint64_t seed) {
  Net net;
  initialize(net, seed);
  return net;
}

template <class T>
xt::xarray<T> random_x(std::size_t n, shape s, std::uint64_t seed, T lo = -1) {
  xt::xarray<T> x = xt::xarray<T>::from_shape(s.with_batch(n));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<T> u(lo, 1);
  for (auto& v : x) v = u(rng);
  return x;
}

/// max |a - b| / (1 + max |a|)
double rel_diff(const xt::xarray<double>& a, const xt::xarray<double>& b) {
  REQUIRE(a.shape() == b.shape());
  double scale = 0, err = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    scale = std::max(scale, std::abs(a.data()[i]));
    err = std::max(err, std::abs(a.data()[i] - b.data()[i]));
  }
  return err / (1 + scale);
}

const lrp_options all_rules[] = {
    {},
    {.rule = lrp_rule::epsilon, .epsilon = 0.01},
    {.rule = lrp_rule::epsilon, .epsilon = 0.01, .bias_redistribution = true},
    {.rule = lrp_rule::zplus},
    {.rule = lrp_rule::alpha_beta},
    {.rule = lrp_rule::alpha_beta, .alpha = 2, .beta = -1},
};

/// Every rule, every layer stop, predicted and given classes; returns the worst rel_diff.
template <class Net, class X>
double compare_relevance(const Net& net, const X& x, std::size_t outputs, const thrust_policy& pol = {}) {
  double worst = 0;
  std::vector<std::size_t> cls(x.shape()[0]);
  for (std::size_t i = 0; i < cls.size(); ++i) cls[i] = (i * 7 + 3) % outputs;
  std::vector<std::size_t> stops{lrp_input};
  for (std::size_t l = 0; l < layer_count(net); ++l) stops.push_back(l);
  for (const auto& o : all_rules)
    for (std::size_t stop : stops) {
      worst = std::max(worst, rel_diff(relevance(execution::seq, net, x, stop, o), relevance(pol, net, x, stop, o)));
      if (stop == lrp_input || stop == 1)
        worst = std::max(worst, rel_diff(relevance(execution::seq, net, x, stop, o, cls), relevance(pol, net, x, stop, o, cls)));
    }
  return worst;
}

/// The first n Fashion-MNIST t10k images and labels, read without zlib (test_thrust does not link
/// it): gunzipped with the gzip tool into temp files.  Empty when unavailable.
io::labelled_images<float> fashion(std::size_t n) {
  io::labelled_images<float> r;
  const std::filesystem::path dir = nnlens_test::fashion_dir();
  const std::string stem = (std::filesystem::temp_directory_path() / ("nnlens_thrust_cov_" + std::to_string(::getpid()))).string();
  auto gunzip = [&](const char* name, const std::string& to) {
    const auto gz = dir / name;
    return std::filesystem::exists(gz) && std::system(("gzip -dc '" + gz.string() + "' > '" + to + "'").c_str()) == 0;
  };
  if (!gunzip("t10k-images-idx3-ubyte.gz", stem + ".img") || !gunzip("t10k-labels-idx1-ubyte.gz", stem + ".lbl")) return r;
  const xt::xarray<float> all = io::read_idx_images<float>(stem + ".img");
  const auto labels = io::read_idx_labels(stem + ".lbl");
  std::filesystem::remove(stem + ".img");
  std::filesystem::remove(stem + ".lbl");
  n = std::min<std::size_t>(n, all.shape()[0]);
  r.images = xt::xarray<float>::from_shape({n, 1, 28, 28});
  std::copy(all.data(), all.data() + r.images.size(), r.images.data());
  r.labels.assign(labels.begin(), labels.begin() + std::ptrdiff_t(n));
  return r;
}

/// The network's own predictions, every 7th shifted (so T' is a strict subset).
template <class Net, class X>
std::vector<std::size_t> self_labels(const Net& net, const X& x) {
  const auto z = forward(execution::par, net, x);
  const std::size_t n = x.shape()[0], c = z.size() / n;
  std::vector<std::size_t> y(n);
  for (std::size_t i = 0; i < n; ++i) {
    const auto* zi = z.data() + i * c;
    const std::size_t p = std::size_t(std::max_element(zi, zi + c) - zi);
    y[i] = i % 7 == 6 ? (p + 1) % c : p;
  }
  return y;
}

}  // namespace

TEST_CASE("thrust relevance: every rule, layer stop and given classes on LeNet-5, float") {
  const auto net = make<LeNet5>(3);
  const auto x = random_x<float>(23, LeNet5::input_shape, 1, 0);
  const double w = compare_relevance(net, x, 10, thrust_policy{.batch = 8});  // 3 passes
  MESSAGE("LeNet-5 float: worst |thrust - host| / (1 + max |host|) = " << w);
  CHECK(w <= 1e-4);
  SUBCASE("the dynamic form") {
    const auto d = to_dynamic(net);
    for (const auto& o : all_rules) CHECK(rel_diff(relevance(net, x, lrp_input, o), relevance(execution::thrust, d, x, lrp_input, o)) <= 1e-4);
  }
}

TEST_CASE("thrust relevance: MLP float and double, odd geometries, a double CNN") {
  const auto m = make<MLP>(4);
  const double wf = compare_relevance(m, random_x<float>(41, MLP::input_shape, 2), 5);
  const auto md = make<MLPd>(4);
  const double wd = compare_relevance(md, random_x<double>(41, MLPd::input_shape, 2), 5, thrust_policy{.batch = 16});
  const auto odd = make<Odd>(11);
  const double wo = compare_relevance(odd, random_x<float>(9, Odd::input_shape, 4), 7);
  const auto cd = make<CNNd>(5);
  const double wc = compare_relevance(cd, random_x<double>(13, CNNd::input_shape, 5), 6, thrust_policy{.batch = 5});
  MESSAGE("worst relative difference: MLP float " << wf << ", MLP double " << wd << ", odd geometries float " << wo
                                                  << ", CNN double " << wc);
  CHECK(wf <= 1e-4);
  CHECK(wo <= 1e-4);
  CHECK(wd <= 1e-10);
  CHECK(wc <= 1e-10);
  // where the two forward passes agree bit for bit, so does relevance (the kernels add the host's
  // terms in the host's order)
  const auto xd = random_x<double>(41, MLPd::input_shape, 2);
  if (forward(md, xd) == forward(execution::thrust, md, xd))
    for (const auto& o : all_rules) CHECK(relevance(md, xd, lrp_input, o) == relevance(execution::thrust, md, xd, lrp_input, o));
  CHECK(rel_diff(relevance(odd, random_x<float>(9, Odd::input_shape, 4)),
                 relevance(execution::thrust, to_dynamic(odd), random_x<float>(9, Odd::input_shape, 4))) <= 1e-4);
}

TEST_CASE("thrust relevance: a hand-made network (values by hand)") {
  // y = relu(W1 x + b1) then z = W2 h + b2; x = (1, 2): h = relu(1 + 2 - 1, 1 - 2 + 0) = (2, 0)
  using H = Sequential<Input<2>, Dense<2, double>, ReLU, Dense<1, double>>;
  H net;
  auto& d1 = std::get<0>(net.layers);
  auto& d2 = std::get<2>(net.layers);
  d1.W = {{1, 1}, {1, -1}}, d1.b = {-1, 0};
  d2.W = {{3}, {5}}, d2.b = {1};
  xt::xarray<double> x = {{1, 2}};
  // z = 3*2 + 1 = 7; epsilon: R_h = (6/7*7, 0) = (6, 0); R_x = (1*6/2, 2*6/2) = (3, 6)
  const auto r = relevance(execution::thrust, net, x, lrp_input, {.epsilon = 0});
  CHECK(r(0, 0) == doctest::Approx(3));
  CHECK(r(0, 1) == doctest::Approx(6));
  // bias redistribution: R_h = (6 + 1/2, 0 + 1/2); the first Dense: s = (6.5 / 2, 0.5 / -1),
  // R_x0 = (1 - 1/2) 3.25 + 1 (-0.5) = 1.125, R_x1 = (2 - 1/2) 3.25 + (-2)(-0.5) = 5.875 (sum 7)
  const auto rb = relevance(execution::thrust, net, x, lrp_input, {.epsilon = 0, .bias_redistribution = true});
  CHECK(rb(0, 0) == doctest::Approx(1.125));
  CHECK(rb(0, 1) == doctest::Approx(5.875));
  // zplus at the hidden layer: R_h = (7, 0) * 6 / 6 = (7, 0) (bias ignored, h2 = 0)
  const auto rz = relevance(execution::thrust, net, x, 1, {.rule = lrp_rule::zplus});
  CHECK(rz(0, 0) == doctest::Approx(7));
  CHECK(rz(0, 1) == 0);
}

TEST_CASE("thrust relevance: a real network (ACAS Xu 1_1 .nnet)") {
  const auto path = nnlens_test::shared_dir() / "models/acasxu-nnet/ACASXU_run2a_1_1_batch_2000.nnet";
  if (!std::filesystem::exists(path)) NNLENS_SKIP("no ACAS Xu model at ", path.string());
  const auto model = io::load_nnet<float>(path, {.clamp_inputs = false});  // a Dense/ReLU chain
  const auto& net = model.net;
  xt::xarray<float> x = xt::xarray<float>::from_shape({64, 5});
  std::mt19937_64 rng(3);
  for (std::size_t i = 0; i < 64; ++i)
    for (std::size_t k = 0; k < 5; ++k) {
      std::uniform_real_distribution<double> u(model.norm.input_min[k], model.norm.input_max[k]);
      x(i, k) = float(u(rng));
    }
  const double w = compare_relevance(net, x, 5, thrust_policy{.batch = 20});
  MESSAGE("ACAS Xu 1_1 (float): worst relative difference " << w);
  CHECK(w <= 1e-4);
}

TEST_CASE("thrust coverage: DeepImportance and neuron coverage on Fashion-MNIST through LeNet-5") {
  const auto data = fashion(900);
  if (data.labels.empty()) NNLENS_SKIP("Fashion-MNIST (or gzip) not available at ", nnlens_test::fashion_dir().string());
  // LeNet-5 trained for four epochs on 600 images (seeded, deterministic); T' = the 300 training
  // images it classifies correctly among images 600..899, tested on the first 100
  auto net = make<LeNet5>(21);
  {
    const auto fit_x = xt::xarray<float>(xt::view(data.images, xt::range(0, 600)));
    const std::vector<std::uint8_t> fit_y(data.labels.begin(), data.labels.begin() + 600);
    train::adam opt(net, {.lr = 2e-3});
    train::fit(execution::seq, net, opt, fit_x, fit_y, {.epochs = 4, .batch_size = 32, .seed = 3});
  }
  const auto train = xt::xarray<float>(xt::view(data.images, xt::range(600, 900)));
  const auto test = xt::xarray<float>(xt::view(data.images, xt::range(0, 100)));
  const std::vector<std::size_t> y(data.labels.begin() + 600, data.labels.begin() + 900);

  for (auto agg : {importance_aggregation::sum, importance_aggregation::mean_abs, importance_aggregation::count})
    for (std::size_t layer : {std::size_t(-1), std::size_t(3), std::size_t(7)}) {
      CAPTURE(aggregation_name(agg));
      CAPTURE(layer);
      const importance_options io{.layer = layer, .lrp = {.rule = lrp_rule::zplus}, .aggregation = agg};
      const auto h = neuron_relevance_of(execution::seq, net, train, y, io);
      const auto t = neuron_relevance_of(execution::thrust, net, train, y, io);
      CHECK(h.samples == t.samples);
      CHECK(h.seen == t.seen);
      CHECK(h.fingerprint == t.fingerprint);
      CHECK(h.layer == t.layer);
      REQUIRE(h.total.size() == t.total.size());
      double scale = 0, err = 0;
      for (std::size_t q = 0; q < h.total.size(); ++q)
        scale = std::max(scale, std::abs(h.total[q])), err = std::max(err, std::abs(h.total[q] - t.total[q]));
      CHECK(err <= 1e-4 * (1 + scale));
      CHECK(important_neurons(h, 6) == important_neurons(t, 6));
    }

  const idc ih = prepare_idc(execution::seq, net, train, y, {.m = 5});
  const idc it = prepare_idc(execution::thrust, net, train, y, {.m = 5});
  CHECK(ih.layer() == it.layer());
  CHECK(ih.training_inputs() == it.training_inputs());
  CHECK(ih.training_inputs() < 300);  // not every image is classified correctly
  CHECK(ih.training_inputs() > 150);
  MESSAGE("IDC: " << ih.training_inputs() << " of 300 training images classified correctly");
  REQUIRE(ih.neurons() == it.neurons());
  const double cworst = nnlens_thrust_test::centroid_diff(ih, it);
  MESSAGE("IDC centroids: worst relative difference " << cworst);
  CHECK(cworst <= 1e-5);
  idc ch = ih, ct = ih;  // the same preparation, measured by both policies
  const auto rh = measure(execution::seq, net, test, ch);
  const auto rt = measure(thrust_policy{.batch = 32}, net, test, ct);
  CHECK(rh.covered == rt.covered);
  CHECK(rh.total == rt.total);
  CHECK(ch.covered_combinations() == ct.covered_combinations());
  idc it2 = it;
  CHECK(measure(execution::thrust, net, test, it2).covered == rt.covered);

  const auto bh = prepare_neuron_bounds(execution::seq, net, train);
  const auto bt = prepare_neuron_bounds(execution::thrust, net, train);
  REQUIRE(bh.low.size() == bt.low.size());
  double bworst = 0;
  for (std::size_t i = 0; i < bh.low.size(); ++i)
    bworst = std::max(bworst, std::max(std::abs(bh.low[i] - bt.low[i]) / (1 + std::abs(bh.low[i])),
                                       std::abs(bh.high[i] - bt.high[i]) / (1 + std::abs(bh.high[i]))));
  MESSAGE("neuron bounds: worst |thrust - host| / (1 + |host|) " << bworst);
  CHECK(bworst <= 1e-5);
  auto same = [&](auto c) {
    auto c2 = c;
    const auto a = measure(execution::seq, net, test, c);
    const auto b = measure(thrust_policy{.batch = 48}, net, test, c2);
    CHECK(a.covered == b.covered);
    CHECK(a.total == b.total);
    CHECK(a.covered > 0);
  };
  same(nc_criterion(net, {.threshold = 0.5}));
  same(tknc_criterion(net, {.k = 2}));
  same(kmnc_criterion(bh, 20));
  same(nbc_criterion(bh));
  same(snac_criterion(bh));

  // Surprise Adequacy: the preparation's activation traces and the test ATs come from the device
  const std::size_t at = surprise_default_layer(net);
  const auto sh = prepare_surprise(execution::seq, net, train, at);
  const auto st = prepare_surprise(execution::thrust, net, train, at);
  // LSA = -log KDE goes through the inverse of a near-singular covariance: the float rounding of the
  // forward pass grows ~1000x (observed 4e-4 relative); DSA is a ratio of distances (observed 1e-6)
  for (auto [h, t, tol] : {std::tuple{lsa_values(execution::seq, net, sh, test), lsa_values(execution::thrust, net, st, test), 5e-3},
                           std::tuple{dsa_values(execution::seq, net, sh, test), dsa_values(execution::thrust, net, st, test), 1e-4}}) {
    REQUIRE(h.size() == t.size());
    double err = 0;
    for (std::size_t i = 0; i < h.size(); ++i)
      if (std::isfinite(h[i]) || std::isfinite(t[i])) err = std::max(err, std::abs(h[i] - t[i]) / (1 + std::abs(h[i])));
    MESSAGE("surprise values: worst relative difference " << err);
    CHECK(err <= tol);
  }
}

TEST_CASE("thrust coverage: a residual network runs on the device (device passes), as on the host") {
  using L = Sequential<Input<2, 4, 4>, Conv2D<8, 3, 1, 1>, ReLU, Residual<Block<Conv2D<8, 3, 1, 1>, ReLU>>, GlobalAvgPool, Flatten,
                       Dense<3>>;
  const auto net = to_dynamic(make<L>(2));
  const auto x = random_x<float>(12, L::input_shape, 7);
  const auto y2 = self_labels(net, x);
  nc_criterion nh(net), nt(net);
  const std::size_t before = thrust_device_passes();
  CHECK(measure(execution::seq, net, x, nh).total > 0);
  CHECK(thrust_device_passes() == before);
  CHECK(measure(execution::thrust, net, x, nt).total == measure(execution::seq, net, x, nh).total);
  CHECK(thrust_device_passes() > before);  // measure(thrust) ran on the device
  std::size_t mid = thrust_device_passes();
  CHECK_NOTHROW(prepare_neuron_bounds(execution::thrust, net, x));
  CHECK(thrust_device_passes() > mid);
  // IDC's relevance through the residual join, on the device (layer 2: the Residual's output)
  for (std::size_t layer : {1u, 2u}) {
    CAPTURE(layer);
    mid = thrust_device_passes();
    const auto h = neuron_relevance_of(execution::seq, net, x, y2, {.layer = layer});
    const auto t = neuron_relevance_of(execution::thrust, net, x, y2, {.layer = layer});
    CHECK(thrust_device_passes() > mid);
    REQUIRE(h.total.size() == t.total.size());
    double scale = 0, err = 0;
    for (std::size_t q = 0; q < h.total.size(); ++q)
      scale = std::max(scale, std::abs(h.total[q])), err = std::max(err, std::abs(h.total[q] - t.total[q]));
    CHECK(err <= 1e-4 * (1 + scale));
    const idc ih = prepare_idc(execution::seq, net, x, y2, {.layer = layer, .m = 2});
    const idc it = prepare_idc(execution::thrust, net, x, y2, {.layer = layer, .m = 2});
    CHECK(nnlens_thrust_test::centroid_diff(ih, it) <= 1e-5);
  }
  CHECK(rel_diff(relevance(execution::seq, net, x), relevance(execution::thrust, net, x)) <= 1e-4);
}

TEST_CASE("thrust relevance and coverage: the host's errors") {
  const auto net = make<MLP>(1);
  auto x = random_x<float>(4, MLP::input_shape, 1);
  CHECK_THROWS_AS(relevance(execution::thrust, net, random_x<float>(2, shape(19), 1)), shape_error);
  const std::vector<std::size_t> three{0, 1, 2}, bad{0, 1, 2, 5};
  CHECK_THROWS_AS(relevance(execution::thrust, net, x, lrp_input, {}, three), shape_error);
  CHECK_THROWS_AS(relevance(execution::thrust, net, x, lrp_input, {}, bad), value_error);
  CHECK_THROWS_AS(relevance(execution::thrust, net, x, 5), value_error);
  CHECK(relevance(execution::thrust, net, random_x<float>(0, MLP::input_shape, 1)).size() == 0);
  x(2, 3) = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS_AS(relevance(execution::thrust, net, x), value_error);
  const std::vector<std::size_t> y{0, 1, 2, 3};
  CHECK_THROWS_AS(neuron_relevance_of(execution::thrust, net, x, y, {.layer = 1}), value_error);
  const auto ok = random_x<float>(4, MLP::input_shape, 1);
  CHECK_THROWS_AS(neuron_relevance_of(execution::thrust, net, ok, std::vector<std::size_t>{0}, {.layer = 1}), shape_error);
  CHECK_THROWS_AS(neuron_relevance_of(execution::thrust, net, ok, y, {.layer = 9}), value_error);
  CHECK_THROWS_AS(neuron_relevance_of(execution::thrust, net, random_x<float>(0, MLP::input_shape, 1), std::vector<std::size_t>{}),
                  data_error);
  const std::vector<std::size_t> wrong(4, 7);  // no output 7: nothing classified correctly
  CHECK_THROWS_AS(neuron_relevance_of(execution::thrust, net, ok, wrong, {.layer = 1}), data_error);
  CHECK_THROWS_AS(prepare_idc(execution::thrust, net, ok, y, {.layer = 1, .m = 0}), value_error);
  const std::size_t layers[] = {9};
  CHECK_THROWS_AS(stream_neurons(execution::thrust, net, std::span<const float>(ok.data(), ok.size()), 4, layers, [](const auto&) {}),
                  value_error);
  CHECK_THROWS_AS(stream_neurons(execution::thrust, net, std::span<const float>(ok.data(), 5), 4, {}, [](const auto&) {}), shape_error);
}

#if defined(_OPENMP) && THRUST_DEVICE_SYSTEM == THRUST_DEVICE_SYSTEM_OMP
TEST_CASE("thrust relevance: results do not depend on the number of OpenMP threads") {
  const auto net = make<LeNet5>(2);
  const auto x = random_x<float>(9, LeNet5::input_shape, 3, 0);
  const int before = omp_get_max_threads();
  omp_set_num_threads(1);
  const auto r1 = relevance(execution::thrust, net, x, lrp_input, {.rule = lrp_rule::alpha_beta});
  omp_set_num_threads(2);
  const auto r2 = relevance(execution::thrust, net, x, lrp_input, {.rule = lrp_rule::alpha_beta});
  omp_set_num_threads(before);
  CHECK(r1 == r2);
}
#endif
