// examples/exactline_studies.hpp -- what the two ExactLine research examples share:
// DeepXplore's MNIST images, the project's own Fashion-MNIST models (trained once, cached with
// io::save_weights), a tiny command line and a stopwatch.
//
// Used by examples/exactline_ig.cpp (paper §4) and examples/exactline_linearity.cpp (paper §5).
// Not a library header: it is part of the examples and may change with them.
#pragma once

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nnlens/exactline.hpp>
#include <nnlens/io/idx.hpp>
#include <nnlens/io/image.hpp>
#include <nnlens/io/weights.hpp>
#include <nnlens/nnlens.hpp>
#include <nnlens/train/fit.hpp>
#include <nnlens/train/loss.hpp>
#include <nnlens/train/optimizer.hpp>

#include "../tools/nnlens/lenet5_recipe.hpp"  // the project's LeNet-5 recipe (nnlens demo)
#include "example_cli.hpp"

namespace studies {

namespace fs = std::filesystem;
using namespace nnlens;

// ------------------------------------------------------------------------------------------------
// command line: --flag value / --switch

using nnlens_examples::cli;
using nnlens_examples::stopwatch;

/// A name usable as a file name: every character but letters and digits becomes '_'.
inline std::string file_name(std::string s) {
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
}

// ------------------------------------------------------------------------------------------------
// images: raw 0-255 pixels (the §5 perturbation works on those) and the network input (p / 255)

struct image {
  std::string name;
  std::vector<double> raw;  // 0..255, NCHW order
  std::size_t label = 0;    // see each source for what "label" is
};

inline std::vector<double> to_input(const std::vector<double>& raw) {
  std::vector<double> x(raw.size());
  for (std::size_t i = 0; i < raw.size(); ++i) x[i] = raw[i] / 255.0;
  return x;
}

/// DeepXplore's 44 `*_orig.png` seed images (real MNIST digits).  There is no ground truth in the
/// folder except the `_to_` names' first number; expected.csv shows that the three LeNets agree
/// on every seed (and on the `_to_` seeds with the name's label), so `label` is that common
/// prediction.  `logits[model]` holds expected.csv's reference logits (h5 weights, float64).
struct deepxplore_set {
  std::vector<image> images;
  std::map<std::string, std::vector<std::vector<double>>> logits;  // model -> per image
};

inline deepxplore_set load_deepxplore(const fs::path& dir, std::size_t limit = 0) {
  std::ifstream csv(dir / "expected.csv");
  if (!csv) throw io_error((dir / "expected.csv").string() + ": cannot open");
  std::map<std::string, std::map<std::string, std::pair<std::size_t, std::vector<double>>>> rows;  // image -> model
  std::string line;
  std::getline(csv, line);  // header
  while (std::getline(csv, line)) {
    std::stringstream ss(line);
    std::string img, model, cell;
    std::getline(ss, img, ',');
    std::getline(ss, model, ',');
    std::getline(ss, cell, ',');
    const std::size_t pred = std::stoul(cell);
    std::vector<double> lg;
    while (std::getline(ss, cell, ',')) lg.push_back(std::stod(cell));
    rows[img][model] = {pred, lg};
  }
  deepxplore_set s;
  for (const auto& [img, by_model] : rows) {  // std::map: sorted by name, deterministic
    if (img.size() < 9 || img.substr(img.size() - 9) != "_orig.png") continue;
    const std::size_t l1 = by_model.at("lenet1").first;
    if (by_model.at("lenet4").first != l1 || by_model.at("lenet5").first != l1)
      throw data_error(img + ": the three LeNets disagree on a seed image (expected.csv)");
    const auto px = io::load_image<double>((dir / img).string(), {.color = io::image_color::gray});
    image im;
    im.name = fs::path(img).filename().string();
    for (double v : px) im.raw.push_back(std::round(v * 255.0));
    im.label = l1;
    s.images.push_back(std::move(im));
    for (const char* m : {"lenet1", "lenet4", "lenet5"}) s.logits[m].push_back(by_model.at(m).second);
    if (limit && s.images.size() == limit) break;
  }
  return s;
}

/// The first n Fashion-MNIST test images with their true labels.
inline std::vector<image> fashion_test_images(const io::labelled_images<float>& test, std::size_t n) {
  std::vector<image> out;
  const std::size_t d = 28 * 28;
  for (std::size_t k = 0; k < std::min<std::size_t>(n, test.labels.size()); ++k) {
    image im;
    im.name = "t10k[" + std::to_string(k) + "]";
    for (std::size_t i = 0; i < d; ++i) im.raw.push_back(std::round(double(test.images.data()[k * d + i]) * 255.0));
    im.label = test.labels[k];
    out.push_back(std::move(im));
  }
  return out;
}

// ------------------------------------------------------------------------------------------------
// networks

template <class Net>
std::vector<double> logits(const Net& net, const std::vector<double>& x) {
  auto a = xt::xarray<double>::from_shape(input_shape_of(net).with_batch(1));
  std::copy(x.begin(), x.end(), a.begin());
  const auto y = forward(net, a);
  return {y.begin(), y.end()};
}

inline std::size_t argmax(const std::vector<double>& v) {
  return std::size_t(std::max_element(v.begin(), v.end()) - v.begin());
}

using FashionLeNet5 = demo::LeNet5;
using FashionMLP = Sequential<Input<1, 28, 28>, Flatten, Dense<512>, ReLU, Dense<256>, ReLU, Dense<10>>;

struct training_budget {
  std::size_t epochs = 12;       // the project's LeNet-5 recipe
  std::size_t train_limit = 0;  // 0: all 60,000 images
  double fgsm_eps = 0.1;        // adversarial training: FGSM step in [0, 1] pixel units
  fs::path cache_dir = ".";
  bool verbose = true;
};

inline std::string cache_name(const std::string& what, const training_budget& b) {
  return what + "_e" + std::to_string(b.epochs) + "_n" + std::to_string(b.train_limit) + ".nnlw";
}

/// Loads `net` from the cache file if it exists (and matches), else trains it with `train` and
/// saves it there.  Returns the test accuracy (recorded in the file's metadata).
template <class Net, class Train>
double cached_model(Net& net, const std::string& what, const training_budget& b, const io::labelled_images<float>& test,
                    Train&& train) {
  const fs::path path = b.cache_dir / cache_name(what, b);
  if (fs::exists(path)) {
    try {
      initialize(net, 1);  // a static network's parameter buffers exist only once initialised
      const auto meta = io::load_weights(path, net);
      const auto ev = train::evaluate(execution::par, net, test.images, test.labels);
      if (b.verbose) std::printf("  %s: loaded %s (test accuracy %.2f%%)\n", what.c_str(), path.string().c_str(), 100 * ev.accuracy);
      return ev.accuracy;
    } catch (const error& e) {
      std::printf("  %s: ignoring %s (%s)\n", what.c_str(), path.string().c_str(), e.what());
    }
  }
  stopwatch sw;
  train();
  const auto ev = train::evaluate(execution::par, net, test.images, test.labels);
  if (b.verbose)
    std::printf("  %s: trained %zu epochs on %zu images in %.1f s, test accuracy %.2f%% -> %s\n", what.c_str(), b.epochs,
                b.train_limit ? b.train_limit : std::size_t(60000), sw.seconds(), 100 * ev.accuracy, path.string().c_str());
  fs::create_directories(b.cache_dir);
  io::save_weights(path, net, {{"test_accuracy", std::to_string(ev.accuracy)}, {"epochs", std::to_string(b.epochs)}});
  return ev.accuracy;
}

/// The project's LeNet-5 recipe (tools/nnlens/lenet5_recipe.hpp) with `epochs` epochs, the last
/// epochs / 4 of them at lr / 10 (12 epochs: exactly the recipe, 3 fine epochs).
inline double fashion_lenet5(FashionLeNet5& net, const io::labelled_images<float>& trn, const io::labelled_images<float>& test,
                             const training_budget& b) {
  return cached_model(net, "fashion_lenet5", b, test, [&] {
    demo::lenet5_recipe r;
    r.epochs = b.epochs;
    r.fine_epochs = b.epochs / 4;
    demo::train_lenet5(net, trn, r, false);
  });
}

/// The MLP 784-512-256-10 with the same optimiser settings (Adam 1e-3, batches of 64, seed 1).
inline double fashion_mlp(FashionMLP& net, const io::labelled_images<float>& trn, const io::labelled_images<float>& test,
                          const training_budget& b) {
  return cached_model(net, "fashion_mlp", b, test, [&] {
    initialize(net, 1);
    train::adam opt(net, {.lr = 1e-3});
    train::fit(execution::par, net, opt, trn.images, trn.labels, {.epochs = b.epochs, .batch_size = 64, .seed = 1});
  });
}

/// FGSM examples for the cross-entropy loss: x + eps sign(d loss / d x), clipped to [0, 1].
template <class Net>
xt::xarray<float> fgsm_batch(const Net& net, const xt::xarray<float>& x, const std::vector<std::uint8_t>& y, double eps) {
  const std::size_t n = y.size(), d = x.size() / n, dout = 10;
  xt::xarray<float> adv = x;
  trace<float> tr;
  std::vector<float> dy, dx;
  constexpr std::size_t chunk = 512;
  for (std::size_t b0 = 0; b0 < n; b0 += chunk) {
    const std::size_t nb = std::min(chunk, n - b0);
    forward_trace(net, nb, x.data() + b0 * d, tr);
    const auto out = tr.output();
    dy.assign(nb * dout, 0.f);
    for (std::size_t r = 0; r < nb; ++r) {  // softmax - onehot
      const float* o = out.data() + r * dout;
      const float m = *std::max_element(o, o + dout);
      double s = 0;
      for (std::size_t c = 0; c < dout; ++c) s += std::exp(double(o[c] - m));
      for (std::size_t c = 0; c < dout; ++c) dy[r * dout + c] = float(std::exp(double(o[c] - m)) / s) - (c == y[b0 + r] ? 1.f : 0.f);
    }
    dx.resize(nb * d);
    backward(net, tr, dy.data(), static_cast<Net*>(nullptr), dx.data());
    for (std::size_t i = 0; i < nb * d; ++i) {
      const float g = dx[i], v = adv.data()[b0 * d + i];
      const float s = g > 0 ? 1.f : (g < 0 ? -1.f : 0.f);
      adv.data()[b0 * d + i] = std::clamp(v + float(eps) * s, 0.f, 1.f);
    }
  }
  return adv;
}

/// The robust counterpart: FGSM adversarial training (Goodfellow et al.).  Each mini-batch of 64
/// clean images is joined by their FGSM(eps) copies made with the current weights, and one Adam
/// step is taken on the 128.  (Regenerating the copies once per epoch instead does not work: the
/// network learns that epoch's stale perturbations and ends up less robust than normal training.)
inline double fashion_mlp_fgsm(FashionMLP& net, const io::labelled_images<float>& trn, const io::labelled_images<float>& test,
                               const training_budget& b) {
  return cached_model(net, "fashion_mlp_fgsmat" + std::to_string(int(std::lround(b.fgsm_eps * 100))), b, test, [&] {
    initialize(net, 1);
    train::adam opt(net, {.lr = 1e-3});
    const std::size_t n = trn.labels.size(), d = 28 * 28, bs = 64;
    std::vector<std::size_t> order(n);
    for (std::size_t i = 0; i < n; ++i) order[i] = i;
    std::mt19937_64 rng(1);
    xt::xarray<float> xb = xt::xarray<float>::from_shape({bs, 1, 28, 28});
    xt::xarray<float> x2 = xt::xarray<float>::from_shape({2 * bs, 1, 28, 28});
    std::vector<std::uint8_t> yb, y2;
    std::vector<float> dlogits;
    trace<float> tr;
    FashionMLP grad = zeros_like(net);
    for (std::size_t e = 0; e < b.epochs; ++e) {
      std::shuffle(order.begin(), order.end(), rng);
      for (std::size_t b0 = 0; b0 < n; b0 += bs) {
        const std::size_t nb = std::min(bs, n - b0);
        xb = xt::xarray<float>::from_shape({nb, 1, 28, 28});
        yb.resize(nb);
        for (std::size_t r = 0; r < nb; ++r) {
          std::copy_n(trn.images.data() + order[b0 + r] * d, d, xb.data() + r * d);
          yb[r] = trn.labels[order[b0 + r]];
        }
        const auto adv = fgsm_batch(net, xb, yb, b.fgsm_eps);
        x2 = xt::xarray<float>::from_shape({2 * nb, 1, 28, 28});
        std::copy(xb.begin(), xb.end(), x2.begin());
        std::copy(adv.begin(), adv.end(), x2.begin() + std::ptrdiff_t(nb * d));
        y2 = yb;
        y2.insert(y2.end(), yb.begin(), yb.end());
        forward_trace(net, 2 * nb, x2.data(), tr);
        dlogits.assign(2 * nb * 10, 0.f);
        const auto out = tr.output();
        train::softmax_cross_entropy<float, std::uint8_t>(out, 10, y2, dlogits);
        fill_parameters(grad, 0);
        backward(net, tr, dlogits.data(), &grad, static_cast<float*>(nullptr));
        opt.step(net, grad);
      }
      if (b.verbose) std::printf("    FGSM training epoch %zu done\n", e + 1), std::fflush(stdout);
    }
  });
}

/// Accuracy on FGSM(eps) versions of the first n test images (how robust a model is).
template <class Net>
double fgsm_accuracy(const Net& net, const io::labelled_images<float>& test, double eps, std::size_t n = 2000) {
  n = std::min(n, test.labels.size());
  xt::xarray<float> x = xt::xarray<float>::from_shape({n, 1, 28, 28});
  std::copy_n(test.images.begin(), n * 784, x.begin());
  std::vector<std::uint8_t> y(test.labels.begin(), test.labels.begin() + std::ptrdiff_t(n));
  const auto adv = fgsm_batch(net, x, y, eps);
  return train::evaluate(execution::par, net, adv, y).accuracy;
}

// ------------------------------------------------------------------------------------------------
// statistics

inline double quantile(std::vector<double> v, double q) {  // linear interpolation (numpy's default)
  if (v.empty()) return std::nan("");
  std::sort(v.begin(), v.end());
  const double pos = q * double(v.size() - 1);
  const std::size_t lo = std::size_t(std::floor(pos)), hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - double(lo)) * (v[hi] - v[lo]);
}

inline double mean(const std::vector<double>& v) {
  if (v.empty()) return std::nan("");
  double s = 0;
  for (double x : v) s += x;
  return s / double(v.size());
}

}  // namespace studies
