// DeepImportance on real networks written by others: DeepXplore's MNIST LeNet-1/4/5 (ONNX, with
// their 96 test images; ../shared/models/deepxplore-mnist) and the VNN-COMP residual CIFAR net.
// LRP conserves relevance exactly with bias redistribution and loses exactly the bias share
// without it; IDC prepares and measures on the real images; the dynamic (ONNX) network gives the
// same relevance in double as the model's float run.  Without the models (nnlens_test::shared_dir(),
// $NNLENS_SHARED_DIR) each case skips (NNLENS_SKIP).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <string>
#include <vector>

#include "nnlens/coverage.hpp"
#include "nnlens/io/image.hpp"
#include "nnlens/io/onnx.hpp"
#include "nnlens/network/cast.hpp"
#include "nnlens/network/forward.hpp"
#include "test_skip.hpp"

using namespace nnlens;
namespace fs = std::filesystem;

namespace {
const fs::path models = nnlens_test::shared_dir() / "models";

xt::xarray<float> deepxplore_images(bool generated) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(models / "deepxplore-mnist" / "images")) {
    const std::string n = e.path().filename().string();
    const bool orig = n.find("_orig") != std::string::npos || n.rfind("already_differ", 0) == 0;
    if (orig != generated) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  xt::xarray<float> X = xt::xarray<float>::from_shape({files.size(), 1, 28, 28});
  for (std::size_t i = 0; i < files.size(); ++i) {
    const auto x = io::load_image<float>(files[i]);
    REQUIRE(x.size() == 784);
    std::copy(x.begin(), x.end(), X.data() + i * 784);
  }
  return X;
}
}  // namespace

TEST_CASE("LRP on DeepXplore's LeNets: exact conservation with bias redistribution, at every layer") {
  for (const char* f : {"images", "lenet1.onnx", "lenet4.onnx", "lenet5.onnx"})
    if (!fs::exists(models / "deepxplore-mnist" / f)) NNLENS_SKIP((models / "deepxplore-mnist" / f).string(), " not found");
  const auto X = deepxplore_images(false);
  REQUIRE(X.shape()[0] == 52);
  for (const char* m : {"lenet1", "lenet4", "lenet5"}) {
    CAPTURE(m);
    const auto net = network_cast<double>(io::load_onnx((models / "deepxplore-mnist" / (std::string(m) + ".onnx")).string()));
    const xt::xarray<double> Xd = X;
    const auto z = forward(net, Xd);
    const std::size_t n = Xd.shape()[0], c = z.size() / n;
    std::vector<double> zc(n);
    for (std::size_t i = 0; i < n; ++i) zc[i] = *std::max_element(z.data() + i * c, z.data() + (i + 1) * c);
    lrp_options o;
    o.bias_redistribution = true;
    for (std::size_t layer = 0; layer + 1 < layer_count(net); ++layer) {
      if (std::string(net.layer_name(layer)) == "Flatten") continue;
      const auto R = relevance(execution::par, net, Xd, layer, o);
      const std::size_t s = R.size() / n;
      double worst = 0;
      for (std::size_t i = 0; i < n; ++i)
        worst = std::max(worst, std::abs(std::accumulate(R.data() + i * s, R.data() + (i + 1) * s, 0.0) - zc[i]) / std::abs(zc[i]));
      CHECK(worst < 1e-9);
    }
    const auto R = relevance(execution::par, net, Xd, lrp_input, o);
    const std::size_t s = R.size() / n;
    for (std::size_t i = 0; i < n; ++i)
      CHECK(std::accumulate(R.data() + i * s, R.data() + (i + 1) * s, 0.0) == doctest::Approx(zc[i]).epsilon(1e-9));
    // without redistribution the biases' share is lost: the sum differs from the logit
    const auto R0 = relevance(execution::par, net, Xd);
    double lost = 0;
    for (std::size_t i = 0; i < n; ++i) lost += std::abs(std::accumulate(R0.data() + i * s, R0.data() + (i + 1) * s, 0.0) - zc[i]);
    CHECK(lost > 1e-3);
  }
}

TEST_CASE("LRP through residual blocks of a real CIFAR net: conservation with bias redistribution") {
  const fs::path p = models / "vnncomp2021-cifar10_resnet" / "resnet_2b.onnx";
  if (!fs::exists(p)) NNLENS_SKIP(p.string(), " not found");
  const auto net = network_cast<double>(io::load_onnx(p.string()));
  xt::xarray<double> X = xt::xarray<double>::from_shape({3, 3, 32, 32});
  for (std::size_t i = 0; i < X.size(); ++i) X.data()[i] = double((i * 7919) % 255) / 255.0 - 0.5;
  const auto z = forward(net, X);
  lrp_options o;
  o.bias_redistribution = true;
  const auto R = relevance(net, X, lrp_input, o);
  const std::size_t n = 3, s = R.size() / n, c = z.size() / n;
  for (std::size_t i = 0; i < n; ++i) {
    const double zc = *std::max_element(z.data() + i * c, z.data() + (i + 1) * c);
    CHECK(std::accumulate(R.data() + i * s, R.data() + (i + 1) * s, 0.0) == doctest::Approx(zc).epsilon(1e-9));
  }
}

TEST_CASE("IDC on DeepXplore's LeNet-5 with its real images: prepare on the seeds, the generated images add coverage") {
  for (const char* f : {"images", "lenet5.onnx"})
    if (!fs::exists(models / "deepxplore-mnist" / f)) NNLENS_SKIP((models / "deepxplore-mnist" / f).string(), " not found");
  const auto net = io::load_onnx((models / "deepxplore-mnist" / "lenet5.onnx").string());
  const auto seeds = deepxplore_images(false), gen = deepxplore_images(true);
  REQUIRE(gen.shape()[0] == 44);
  const auto z = forward(net, seeds);
  std::vector<std::size_t> y;
  for (std::size_t i = 0; i < seeds.shape()[0]; ++i)
    y.push_back(std::size_t(std::max_element(z.data() + i * 10, z.data() + (i + 1) * 10) - (z.data() + i * 10)));
  idc_options o;
  o.m = 4;
  idc c = prepare_idc(execution::par, net, seeds, y, o);
  CHECK(c.layer() == subject_layer(net));
  CHECK(c.neurons().size() == 4);
  const auto r1 = measure(net, seeds, c);
  const auto r2 = measure(net, gen, c);
  CHECK(r1.covered > 0);
  CHECK(r2.covered >= r1.covered);
  CHECK(r2.percent <= 100);
  const idc again = prepare_idc(net, seeds, y, o);  // deterministic
  CHECK(again.neurons() == c.neurons());
  CHECK(again.centroids() == c.centroids());
}
