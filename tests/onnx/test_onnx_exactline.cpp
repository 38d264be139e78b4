// ExactLine on ONNX models from ../shared/models (imported with io::load_onnx, float weights, run
// in double): mnist-net_256x6 on an image-to-image line (Fashion-MNIST test images when zlib is
// available, else random [0,1] images), vnncomp2021 cifar10 resnet_2b (residual), verivital
// Convnet_maxpool (MaxPool 4x4), DeepXplore LeNet-1.  P1, P2 at every piece midpoint (relative
// 1e-9 of the output scale, network evaluated in double), completeness of exact IG where cheap.
// A case whose model (nnlens_test::shared_dir(), $NNLENS_SHARED_DIR) or Fashion-MNIST
// (nnlens_test::fashion_dir(), $NNLENS_FASHION_DIR) is missing skips (NNLENS_SKIP).
#include <doctest/doctest.h>

#include <nnlens/exactline.hpp>
#include <nnlens/nnlens.hpp>

#include "nnlens/io/idx.hpp"
#include "nnlens/io/onnx.hpp"
#include "test_skip.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

using namespace nnlens;

namespace {

const std::filesystem::path models = nnlens_test::shared_dir() / "models";

template <class Net>
std::vector<double> eval(const Net& net, const std::vector<double>& X, std::size_t n) {
  auto x = xt::xarray<double>::from_shape(input_shape_of(net).with_batch(n));
  std::copy(X.begin(), X.end(), x.begin());
  const auto y = forward(net, x);
  return {y.begin(), y.end()};
}

std::vector<double> random_image(std::size_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<double> x(n);
  for (auto& v : x) v = u(rng);
  return x;
}

/// P1 and P2 at every piece midpoint and every break, on the double copy of the network.
template <class Net>
void check_line(const Net& net, const line_result<double>& r, double rel) {
  REQUIRE(r.t.size() >= 2);
  CHECK(r.t.front() == 0);
  CHECK(r.t.back() == 1);
  bool inc = true;
  for (std::size_t j = 0; j + 1 < r.t.size(); ++j) inc = inc && r.t[j] < r.t[j + 1];
  CHECK(inc);
  CHECK(r.values.size() == r.t.size() * r.out_size());
  std::vector<double> ts, X;
  for (std::size_t j = 0; j < r.pieces(); ++j) ts.push_back((r.t[j] + r.t[j + 1]) / 2);
  for (double t : ts) {
    const auto p = r.point(t);
    X.insert(X.end(), p.begin(), p.end());
  }
  double scale = 1;
  for (double v : r.values) scale = std::max(scale, std::abs(v));
  double worst = 0;
  constexpr std::size_t chunk = 256;
  const std::size_t di = r.from.size(), dout = r.out_size();
  for (std::size_t s0 = 0; s0 < ts.size(); s0 += chunk) {
    const std::size_t nb = std::min(chunk, ts.size() - s0);
    const auto Y = eval(net, std::vector<double>(X.begin() + std::ptrdiff_t(s0 * di), X.begin() + std::ptrdiff_t((s0 + nb) * di)), nb);
    for (std::size_t q = 0; q < nb; ++q) {
      const auto want = r.eval(ts[s0 + q]);
      for (std::size_t o = 0; o < dout; ++o) worst = std::max(worst, std::abs(Y[q * dout + o] - want[o]));
    }
  }
  CHECK(worst <= rel * scale);
  MESSAGE(r.pieces(), " pieces, worst |f(mid) - interpolation| / scale = ", worst / scale);
}

}  // namespace

TEST_CASE("ExactLine on mnist-net_256x6.onnx: an image-to-image line") {
  const auto p = models / "vnncomp-mnistfc/mnist-net_256x6.onnx";
  if (!std::filesystem::exists(p)) NNLENS_SKIP(p.string(), " not found");
  const auto net = network_cast<double>(io::load_onnx(p));
  const std::size_t di = input_shape_of(net).size();
  REQUIRE(di == 784);
  std::vector<double> A, B;
#if defined(NNLENS_HAS_ZLIB)
  {
    const std::filesystem::path dir = nnlens_test::fashion_dir();
    if (!std::filesystem::exists(dir / "t10k-images-idx3-ubyte.gz") && !std::filesystem::exists(dir / "t10k-images-idx3-ubyte"))
      NNLENS_SKIP("Fashion-MNIST not installed at ", dir.string());
    const auto fm = io::load_mnist<double>(dir, "t10k", 2);
    A.assign(fm.images.begin(), fm.images.begin() + 784);
    B.assign(fm.images.begin() + 784, fm.images.begin() + 1568);
    if (*std::max_element(A.begin(), A.end()) > 1.5)
      for (auto* v : {&A, &B})
        for (auto& x : *v) x /= 255.0;
  }
#else
  std::mt19937_64 rng(41);
  A = random_image(di, rng);
  B = random_image(di, rng);
#endif
  const auto r = exact_line(net, A, B);
  CHECK(r.pieces() >= 2);
  check_line(net, r, 1e-9);
  // exact IG of the predicted class at B, baseline A: complete
  const auto yb = eval(net, B, 1);
  const std::size_t k = std::size_t(std::max_element(yb.begin(), yb.end()) - yb.begin());
  const auto ig = exact_ig(net, B, A, k);
  CHECK(ig.line.t == r.t);
  double s = 0;
  for (double v : ig.attributions) s += v;
  const double delta = yb[k] - eval(net, A, 1)[k];
  CHECK(std::abs(s - delta) <= 1e-6 * (1 + std::abs(delta)));
  // the float network run with float values gives the same number of pieces (no near-ties here)
  const auto rf = exact_line<float>(io::load_onnx(p), A, B);
  CHECK(rf.pieces() == doctest::Approx(double(r.pieces())).epsilon(0.02));
}

TEST_CASE("ExactLine on vnncomp2021 cifar10 resnet_2b.onnx (residual blocks): one line, P2 at midpoints") {
  const auto p = models / "vnncomp2021-cifar10_resnet/resnet_2b.onnx";
  if (!std::filesystem::exists(p)) NNLENS_SKIP(p.string(), " not found");
  const auto net = network_cast<double>(io::load_onnx(p));
  std::mt19937_64 rng(42);
  const std::size_t di = input_shape_of(net).size();
  const auto r = exact_line(net, random_image(di, rng), random_image(di, rng));
  CHECK(r.pieces() >= 2);
  check_line(net, r, 1e-9);
  const auto rd = exact_line(execution::par, net, r.from, r.to);
  CHECK(rd.t == r.t);
}

TEST_CASE("ExactLine on verivital Convnet_maxpool.onnx (MaxPool) and DeepXplore LeNet-1") {
  for (const char* rel : {"vnncomp2021-verivital/Convnet_maxpool.onnx", "deepxplore-mnist/lenet1.onnx"})
    if (!std::filesystem::exists(models / rel)) NNLENS_SKIP((models / rel).string(), " not found");
  for (const char* rel : {"vnncomp2021-verivital/Convnet_maxpool.onnx", "deepxplore-mnist/lenet1.onnx"}) {
    const auto p = models / rel;
    CAPTURE(rel);
    const auto net = network_cast<double>(io::load_onnx(p));
    std::mt19937_64 rng(43);
    const std::size_t di = input_shape_of(net).size();
    for (int l = 0; l < 2; ++l) {
      const auto r = exact_line(net, random_image(di, rng), random_image(di, rng));
      CHECK(r.pieces() >= 2);
      check_line(net, r, 1e-9);
      // fusion off: a superset of the breaks, the same function
      line_options o;
      o.fuse_max_pool = false;
      const auto u = exact_line(net, r.from, r.to, o);
      CHECK(u.pieces() >= r.pieces());
      check_line(net, u, 1e-9);
    }
  }
}
