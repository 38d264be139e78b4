// examples/neusemslice_readapt.cpp -- NeuSemSlice's model re-adaptation (docs/specs/neusemslice.md#42-model-re-adaptation,
// Table 6) on the project's Fashion-MNIST models: docs/neusemslice-readapt.md.
//
// For each model (the paper's MLP 784-512-256-10 and LeNet-5) and each attack (FGSM, PGD), repair
// the model with L = CE(x) + CE(adv_x) on 1,000 adversarial samples made against it, either
// training every parameter (Full) or only the critical neurons' parameters (NSS: semslice with
// Taylor, Theta = 0.95, on 10,000 training images, 1,000 per category for the metric), with the
// same epochs/optimiser for both.  Reported per row, as means over --seeds repetitions (the
// seed draws the training sources, the shuffle, PGD's start and the RAA sources):
//   TPR  trained parameters / all;   RA  accuracy on the training adversarial samples (A14);
//   RAA  accuracy on 1,000 new adversarial samples made against the repaired model;
//   clean accuracy on the 10,000 test images before/after;  adv0: the attack before repair.
//
//   neusemslice_readapt [--fashion DIR] [--cache DIR] [--models mlp,lenet5,vgg] [--seeds 3]
//                       [--epochs 5] [--lr 0.001] [--samples 1000] [--eps 0.1] [--pgd-steps 10]
//                       [--theta 0.95] [--weights FILE] [--quick]
// The MLP is trained with demo::train_with_recipe (12 epochs, seed 1) and cached in --cache
// (mlp-fashion-mnist-e12-s1.nnlw) the first time; LeNet-5 is read from
// --weights FILE when it exists, else <cache>/lenet5-fashion-mnist-e12-s1.nnlw (the file `nnlens demo`
// writes; trained here and saved there if missing; --quick: the examples' quick LeNet-5,
// <cache>/lenet5-fashion-mnist-quick-e2-n10000.nnlw, 2 epochs on the first 10,000 images).
// --quick: LeNet-5 only, 200 adversarial samples, 2 epochs, one seed, semslice on 2,000 images.
//
// Self-checks (exit status 1 on failure): NSS's frozen parameters are bit-identical to the
// original's; TPR equals the mask's trainable fraction (1 for Full); RA >= the accuracy before
// repair on the same samples; every accuracy in [0, 1].
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include <xtensor/xview.hpp>

#include <nnlens/io/idx.hpp>
#include <nnlens/io/weights.hpp>
#include <nnlens/nnlens.hpp>
#include <nnlens/neusemslice/readapt.hpp>
#include <nnlens/neusemslice/semslice.hpp>

#include "../tools/nnlens/lenet5_recipe.hpp"
#include "example_cli.hpp"
#include "fashion_models.hpp"

using namespace nnlens;
using namespace nnlens_examples;
namespace fs = std::filesystem;

namespace {

// as examples/neusemslice_restructure.cpp, so both share models-cache/mlp-fashion-mnist-e12-s1.nnlw
using Mlp = Sequential<Input<1, 28, 28>, Flatten, Dense<512>, ReLU, Dense<256>, ReLU, Dense<10>>;
using LeNet5 = demo::LeNet5;

int failures = 0;
void check(bool ok, const std::string& what) {
  if (!ok) {
    ++failures;
    std::printf("SELF-CHECK FAILED: %s\n", what.c_str());
  }
}

template <class Net>
void get_model(Net& net, const fs::path& file, const io::labelled_images<float>& train, std::size_t epochs) {
  initialize(net, 1);
  if (fs::exists(file)) {
    io::load_weights(file, net);
    std::printf("loaded %s\n", file.string().c_str());
    return;
  }
  std::printf("training %s (%zu epochs, demo recipe) ...\n", file.string().c_str(), epochs);
  std::fflush(stdout);
  demo::lenet5_recipe r;
  r.epochs = epochs;
  r.fine_epochs = epochs >= 4 ? 3 : 0;
  demo::train_with_recipe(net, train, r, false);
  fs::create_directories(file.parent_path());
  io::save_weights(file, net, {{"epochs", std::to_string(epochs)}, {"recipe", "demo lenet5_recipe, seed 1"}});
}

struct row {
  double tpr = 0, adv0 = 0, ra = 0, raa = 0, clean0 = 0, clean = 0, secs = 0;
  std::size_t n = 0;
  void add(const readapt_report& r) {
    tpr += r.tpr, adv0 += r.adv_before, ra += r.ra, raa += r.raa, clean0 += r.clean_before, clean += r.clean_after;
    secs += r.train_seconds;
    ++n;
  }
};

template <class Net>
void study(const char* name, const Net& net, const io::labelled_images<float>& train, const io::labelled_images<float>& test,
           const cli& c, bool quick) {
  const std::size_t seeds = c.num("seeds", quick ? 1 : 3);
  const std::size_t samples = c.num("samples", quick ? 200 : 1000);
  const double eps = c.real("eps", 0.1);
  readapt_options o;
  o.epochs = c.num("epochs", quick ? 2 : 5);
  o.lr = c.real("lr", 1e-3);
  o.batch = 64;

  // the slice: Taylor, Theta = 0.95 on the first 10,000 training images (A12)
  const std::size_t ns = quick ? 2000 : 10000;
  xt::xarray<float> xs = xt::view(train.images, xt::range(0, ns));
  std::vector<std::uint8_t> ys(train.labels.begin(), train.labels.begin() + std::ptrdiff_t(ns));
  stopwatch sw;
  semslice_options so;
  so.metric = metric::taylor;
  so.theta = c.real("theta", 0.95);
  so.metric_samples = 1000;
  const auto sl = semslice(execution::par, net, xs, ys, so);
  const auto us = neuron_units(net);
  std::printf("\n== %s: semslice (Taylor, Theta %.2f, %zu images) in %.1f s keeps", name, so.theta, ns, sw.seconds());
  for (std::size_t u = 0; u < us.size(); ++u) std::printf(" %zu/%zu", sl.mask.kept(u), us[u].neurons);
  const auto pm = neuron_parameter_mask(net, sl.mask);
  std::printf("; trains %zu of %zu parameters (%.2f%%)\n", pm.trainable_count(), pm.size(),
              100.0 * double(pm.trainable_count()) / double(pm.size()));

  std::printf("  %-5s %-5s | %7s %7s %7s %7s | %7s %7s | %6s\n", "att.", "meth.", "TPR", "adv0", "RA", "RAA", "clean0",
              "clean", "train s");
  for (int a = 0; a < 2; ++a) {
    row full, nss;
    for (std::size_t s = 1; s <= seeds; ++s) {
      o.seed = s;
      const readapt_attack atk = a == 0 ? fgsm_attack(eps, samples) : pgd_attack(eps, c.num("pgd-steps", 10), samples, s);
      for (int m = 0; m < 2; ++m) {
        const auto r = readapt(execution::par, net, m == 0 ? nullptr : &sl.mask, train.images, train.labels, test.images,
                               test.labels, atk, o);
        (m == 0 ? full : nss).add(r.report);
        const auto& rp = r.report;
        for (double v : {rp.ra, rp.raa, rp.adv_before, rp.clean_before, rp.clean_after})
          check(v >= 0 && v <= 1, std::string(name) + ": an accuracy outside [0, 1]");
        check(rp.ra >= rp.adv_before, std::string(name) + " " + atk.name + ": RA below the accuracy before repair");
        if (m == 0) {
          check(rp.tpr == 1.0, "Full: TPR != 1");
        } else {
          check(rp.trained_parameters == pm.trainable_count(), "NSS: TPR is not the mask's trainable fraction");
          const auto p0 = parameter_spans(net), p1 = parameter_spans(r.model);
          std::size_t moved = 0;
          for (std::size_t k = 0; k < p0.size(); ++k)
            for (std::size_t i = 0; i < p0[k].size(); ++i)
              if (!pm.trainable(k, i) && std::memcmp(&p0[k][i], &p1[k][i], sizeof(float)) != 0) ++moved;
          check(moved == 0, "NSS: " + std::to_string(moved) + " frozen parameters moved");
        }
      }
    }
    for (int m = 0; m < 2; ++m) {
      const row& r = m == 0 ? full : nss;
      const double k = 100.0 / double(r.n);
      std::printf("  %-5s %-5s | %7.2f %7.2f %7.2f %7.2f | %7.2f %7.2f | %6.1f\n", a == 0 ? "FGSM" : "PGD",
                  m == 0 ? "Full" : "NSS", r.tpr * k, r.adv0 * k, r.ra * k, r.raa * k, r.clean0 * k, r.clean * k,
                  r.secs / double(r.n));
    }
    std::fflush(stdout);
  }
}

}  // namespace

int main(int argc, char** argv) try {
  const cli c(argc, argv);
  const bool quick = c.has("quick");
  const fs::path fashion = c.str("fashion", "/usr/share/datasets/fashion-mnist");
  const fs::path cache = c.str("cache", "models-cache");
  const std::string models = c.str("models", quick ? "lenet5" : "mlp,lenet5,vgg");
  stopwatch total;
  const auto train = io::load_mnist<float>(fashion, "train");
  const auto test = io::load_mnist<float>(fashion, "t10k");
  std::printf("re-adaptation: epochs %zu, Adam lr %g, %zu adversarial samples per attack, eps %g (PGD %zu steps of eps/4)\n",
              c.num("epochs", quick ? 2 : 5), c.real("lr", 1e-3), c.num("samples", quick ? 200 : 1000), c.real("eps", 0.1),
              c.num("pgd-steps", 10));
  if (models.find("mlp") != std::string::npos) {
    const auto& ftrain = train;
    const auto& ftest = test;
    Mlp mlp;
    get_model(mlp, cache / "mlp-fashion-mnist-e12-s1.nnlw", ftrain, 12);
    std::printf("MLP 784-512-256-10: test accuracy %.2f%%\n", 100 * train::evaluate(execution::par, mlp, ftest.images, ftest.labels).accuracy);
    study("MLP-FMNIST", mlp, ftrain, ftest, c, quick);
  }
  if (models.find("lenet5") != std::string::npos) {
    LeNet5 net;
    const fs::path w = c.str("weights", "");
    if (!w.empty() && fs::exists(w))
      get_model(net, w, train, 12);
    else if (quick)  // the examples' quick LeNet-5 (2 epochs on the first 10,000 images), shared with the NNSlicer studies
      get_model(net, cache / demo::quick_lenet5_file, demo::first_samples(train, demo::quick_lenet5_images), 2);
    else
      get_model(net, cache / "lenet5-fashion-mnist-e12-s1.nnlw", train, 12);
    std::printf("LeNet-5: test accuracy %.2f%%\n", 100 * train::evaluate(execution::par, net, test.images, test.labels).accuracy);
    study("LeNet5-FMNIST", net, train, test, c, quick);
  }
  if (models.find("vgg") != std::string::npos) {
    FashionVGG net;
    get_model(net, cache / (quick ? "vgg-fashion-mnist-e2-s1.nnlw" : "vgg-fashion-mnist-e12-s1.nnlw"), train, quick ? 2 : 12);
    std::printf("VGG-style 8-8-16-16-64: test accuracy %.2f%%\n", 100 * train::evaluate(execution::par, net, test.images, test.labels).accuracy);
    study("VGG-FMNIST", net, train, test, c, quick);
  }
  std::printf("\ntotal %.1f s; self-checks: %s\n", total.seconds(), failures ? "FAILED" : "passed");
  return failures ? 1 : 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "neusemslice_readapt: %s\n", e.what());
  return 2;
}
