// The training loop: gradients it applies, determinism (seeds, thread counts), masks, errors,
// a small MLP on Fashion-MNIST, and the LeNet-5 demo configuration end to end.
#include <doctest/doctest.h>

#include <nnlens/io/idx.hpp>
#include <nnlens/nnlens.hpp>
#include <nnlens/train/fit.hpp>
#include <nnlens/train/optimizer.hpp>

#include "test_skip.hpp"

#include "../../tools/nnlens/lenet5_recipe.hpp"

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>
#include <vector>

using namespace nnlens;
using namespace nnlens::train;

namespace {
using Small = Sequential<Input<8>, Dense<16>, ReLU, Dense<4>>;
using Smalld = rebind_scalar_t<Small, double>;

/// N samples of 8 features; the label is the argmax of a fixed random linear map (learnable).
template <class T>
std::pair<xt::xarray<T>, std::vector<std::uint8_t>> synthetic(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 r(seed);
  std::normal_distribution<double> nd(0, 1);
  double A[4][8];
  for (auto& row : A)
    for (auto& a : row) a = nd(r);
  xt::xarray<T> x = xt::xarray<T>::from_shape({n, 8});
  std::vector<std::uint8_t> y(n);
  for (std::size_t i = 0; i < n; ++i) {
    double best = -1e300;
    for (std::size_t j = 0; j < 8; ++j) x(i, j) = T(nd(r));
    for (std::uint8_t c = 0; c < 4; ++c) {
      double s = 0;
      for (std::size_t j = 0; j < 8; ++j) s += A[c][j] * double(x(i, j));
      if (s > best) best = s, y[i] = c;
    }
  }
  return {x, y};
}

template <class Net>
bool bit_identical(const Net& a, const Net& b) {
  const auto pa = parameter_spans(a), pb = parameter_spans(b);
  if (pa.size() != pb.size()) return false;
  for (std::size_t k = 0; k < pa.size(); ++k)
    if (pa[k].size() != pb[k].size() || std::memcmp(pa[k].data(), pb[k].data(), pa[k].size_bytes()) != 0) return false;
  return true;
}
}  // namespace

TEST_CASE("fit applies the gradient of the mini-batch mean loss (chunked, summed in order)") {
  auto xy = synthetic<double>(10, 4);  // not a structured binding: lambdas capture x, y (clang 14)
  auto &x = xy.first;
  auto &y = xy.second;
  Smalld net;
  initialize(net, 8);
  const Smalld before = net;
  // Reference: the whole batch at once, by hand.
  trace<double> tr;
  forward_trace(net, 10, x.data(), tr);
  std::vector<double> d(40);
  const double loss0 = softmax_cross_entropy<double, std::uint8_t>(tr.output(), 4, y, d);
  Smalld g = zeros_like(net);
  backward(net, tr, d.data(), &g, static_cast<double*>(nullptr));
  // Finite differences of the mean loss on a few parameters confirm the reference.
  auto mean_loss = [&](const Smalld& n) {
    auto out = forward(n, x);
    return softmax_cross_entropy<double, std::uint8_t>(std::span<const double>(out.data(), out.size()), 4, y);
  };
  CHECK(mean_loss(net) == doctest::Approx(loss0));
  Smalld probe = net;
  for (auto [k, i] : {std::pair{0, 3}, std::pair{1, 5}, std::pair{2, 17}, std::pair{3, 2}}) {
    auto ps = parameter_spans(probe);
    const double w = ps[k][i], h = 1e-6;
    ps[k][i] = w + h;
    const double lp = mean_loss(probe);
    ps[k][i] = w - h;
    const double lm = mean_loss(probe);
    ps[k][i] = w;
    CHECK(parameter_spans(g)[k][i] == doctest::Approx((lp - lm) / (2 * h)).epsilon(1e-6));
  }
  for (std::size_t chunks : {1, 3, 10}) {
    Smalld n2 = before;
    sgd opt(n2, {.lr = 1.0});
    auto rep = fit(execution::par, n2, opt, x, y, {.epochs = 1, .batch_size = 10, .shuffle = false, .chunks = chunks});
    CHECK(rep.steps == 1);
    CHECK(rep.epochs.at(0).loss == doctest::Approx(loss0).epsilon(1e-12));
    const auto pn = parameter_spans(std::as_const(n2)), pb = parameter_spans(before), pg = parameter_spans(std::as_const(g));
    for (std::size_t k = 0; k < pn.size(); ++k)
      for (std::size_t i = 0; i < pn[k].size(); ++i) CHECK(pn[k][i] == doctest::Approx(pb[k][i] - pg[k][i]).epsilon(1e-12));
  }
}

TEST_CASE("fit is deterministic: same seed, same weights, whatever the threads") {
  auto xy = synthetic<float>(300, 1);  // not a structured binding: lambdas capture x, y (clang 14)
  auto &x = xy.first;
  auto &y = xy.second;
  auto run = [&](auto policy, std::uint64_t seed, std::size_t chunks, std::size_t threads) {
    Small net;
    initialize(net, 5);
    adam opt(net, {.lr = 1e-2});
    fit(policy, net, opt, x, y, {.epochs = 3, .batch_size = 32, .seed = seed, .chunks = chunks, .threads = threads});
    return net;
  };
  const Small a = run(execution::seq, 1, 1, 0);
  CHECK(bit_identical(a, run(execution::seq, 1, 1, 0)));
  CHECK(!bit_identical(a, run(execution::seq, 2, 1, 0)));  // another shuffle
  const Small p = run(execution::par, 1, 4, 0);
  CHECK(bit_identical(p, run(execution::par, 1, 4, 0)));
  CHECK(bit_identical(p, run(execution::par, 1, 4, 3)));  // 3 threads, same 4 chunks
  CHECK(bit_identical(p, run(execution::par, 1, 4, 1)));
  CHECK(bit_identical(p, run(execution::seq, 1, 4, 0)));  // the sequential loop over the same chunks
  // The same on the dynamic form.
  Small s;
  initialize(s, 5);
  auto d1 = to_dynamic(s), d2 = to_dynamic(s);
  adam o1(d1), o2(d2);
  fit(execution::par, d1, o1, x, y, {.epochs = 2, .seed = 9, .chunks = 2});
  fit(execution::seq, d2, o2, x, y, {.epochs = 2, .seed = 9, .chunks = 2});
  CHECK(bit_identical(d1, d2));
  // And it matches the static network trained the same way.
  Small st = s;
  adam o3(st);
  fit(execution::par, st, o3, x, y, {.epochs = 2, .seed = 9, .chunks = 2});
  const auto y1 = forward(st, x), y2 = forward(d1, x);
  for (std::size_t i = 0; i < y1.size(); ++i) CHECK(y1.data()[i] == y2.data()[i]);
}

TEST_CASE("fit learns, reports epochs, honours masks and early stopping") {
  auto xy = synthetic<float>(600, 2);  // not a structured binding: lambdas capture x, y (clang 14)
  auto &x = xy.first;
  auto &y = xy.second;
  Small net;
  initialize(net, 3);
  const Small before = net;
  adam opt(net, {.lr = 1e-2});
  std::vector<epoch_report> seen;
  auto rep = fit(execution::par, net, opt, x, y, {.epochs = 20, .batch_size = 32, .seed = 1},
                 [&](const epoch_report& e) { seen.push_back(e); });
  REQUIRE(rep.epochs.size() == 20);
  CHECK(seen.size() == 20);
  CHECK(seen.back().epoch == 20);
  CHECK(rep.steps == 20 * 19);  // ceil(600 / 32)
  CHECK(rep.epochs.back().loss < rep.epochs.front().loss / 2);
  CHECK(evaluate(execution::par, net, x, y).accuracy > 0.9);
  const auto ev = evaluate(net, x, y, 7);
  CHECK(ev.samples == 600);
  CHECK(ev.accuracy == doctest::Approx(evaluate(execution::par, net, x, y).accuracy));
  CHECK(ev.loss == doctest::Approx(rep.epochs.back().loss).epsilon(0.2));

  Small m = before;
  adam om(m, {.lr = 1e-2, .weight_decay = 0.1});
  const parameter_mask frozen = freeze(layer_mask(m, {0}));
  std::size_t calls = 0;
  auto r2 = fit(execution::par, m, om, x, y, {.epochs = 10, .seed = 1, .mask = &frozen},
                [&](const epoch_report&) { return ++calls < 3; });  // stop after 3 epochs
  CHECK(r2.epochs.size() == 3);
  CHECK(std::memcmp(m.layer<0>().W.data(), before.layer<0>().W.data(), m.layer<0>().W.size() * sizeof(float)) == 0);
  CHECK(std::memcmp(m.layer<0>().b.data(), before.layer<0>().b.data(), m.layer<0>().b.size() * sizeof(float)) == 0);
  CHECK(m.layer<2>().W != before.layer<2>().W);
}

TEST_CASE("fit and evaluate reject bad datasets") {
  auto xy = synthetic<float>(20, 2);  // not a structured binding: lambdas capture x, y (clang 14)
  auto &x = xy.first;
  auto &y = xy.second;
  Small net;
  initialize(net, 3);
  adam opt(net);
  xt::xarray<float> empty = xt::zeros<float>({0, 8});
  CHECK_THROWS_WITH_AS(fit(net, opt, empty, std::vector<int>{}), doctest::Contains("fit: the dataset is empty"), data_error);
  CHECK_THROWS_WITH_AS(evaluate(net, empty, std::vector<int>{}), doctest::Contains("empty"), data_error);
  auto short_y = y;
  short_y.pop_back();
  CHECK_THROWS_WITH_AS(fit(net, opt, x, short_y), doctest::Contains("20 samples but 19 labels"), data_error);
  auto bad_y = y;
  bad_y[13] = 4;
  CHECK_THROWS_WITH_AS(fit(net, opt, x, bad_y), doctest::Contains("label of sample 13 is 4, expected 0..3"), data_error);
  CHECK_THROWS_WITH_AS(evaluate(net, x, std::vector<int>(20, -1)), doctest::Contains("label of sample 0 is -1"), data_error);
  xt::xarray<float> wrong = xt::zeros<float>({20, 9});
  CHECK_THROWS_AS(fit(net, opt, wrong, y), shape_error);
  auto nan_x = x;
  nan_x(4, 2) = std::nanf("");
  CHECK_THROWS_WITH_AS(fit(net, opt, nan_x, y), doctest::Contains("NaN at sample 4"), value_error);
  CHECK_THROWS_AS(fit(net, opt, x, y, {.batch_size = 0}), value_error);
  CHECK(opt.steps() == 0);  // nothing was trained by the failed calls
  xt::xarray<double> xd = x;  // another scalar type is converted
  CHECK_NOTHROW(fit(net, opt, xd, y, {.epochs = 1}));
}

TEST_CASE("an MLP learns a Fashion-MNIST subset within seconds") {
  const std::filesystem::path dir = nnlens_test::fashion_dir();
#if !NNLENS_HAS_ZLIB
  NNLENS_SKIP("built without zlib: the gzipped Fashion-MNIST cannot be read");
#endif
  if (!std::filesystem::exists(dir / "train-images-idx3-ubyte.gz")) NNLENS_SKIP("Fashion-MNIST not installed at ", dir.string());
  const auto t0 = std::chrono::steady_clock::now();
  const auto tr = io::load_mnist(dir, "train", 10000);
  const auto te = io::load_mnist(dir, "t10k", 2000);
  using MLP = Sequential<Input<1, 28, 28>, Flatten, Dense<256>, ReLU, Dense<256>, ReLU, Dense<10>>;
  MLP net;
  initialize(net, 1);
  adam opt(net, {.lr = 1e-3});
  fit(execution::par, net, opt, tr.images, tr.labels, {.epochs = 3, .batch_size = 64, .seed = 1});
  const auto ev = evaluate(execution::par, net, te.images, te.labels);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  MESSAGE("MLP 784-256-256-10, 10k images x 3 epochs: test accuracy " << ev.accuracy << " in " << s << " s");
  CHECK(ev.accuracy >= 0.80);  // measured 0.83-0.84; chance is 0.10
}

TEST_CASE("integration: the LeNet-5 demo configuration reaches >= 89% on Fashion-MNIST") {
  const std::filesystem::path dir = nnlens_test::fashion_dir();
#if !NNLENS_HAS_ZLIB
  NNLENS_SKIP("built without zlib: the gzipped Fashion-MNIST cannot be read");
#endif
  if (!std::filesystem::exists(dir / "train-images-idx3-ubyte.gz")) NNLENS_SKIP("Fashion-MNIST not installed at ", dir.string());
  const auto tr = io::load_mnist(dir, "train");
  const auto te = io::load_mnist(dir, "t10k");
  const demo::lenet5_recipe recipe;
  demo::LeNet5 net;
  const auto rep = demo::train_lenet5(net, tr, recipe, false);
  const auto ev = evaluate(execution::par, net, te.images, te.labels);
  MESSAGE("LeNet-5, " << recipe.epochs << " epochs: test accuracy " << ev.accuracy << ", training " << rep.seconds << " s");
  CHECK(ev.accuracy >= 0.89);
}
