// examples/neusemslice_restructure.cpp -- NeuSemSlice's model restructure (RQ2, Table 5; spec
// docs/specs/neusemslice.md#41-model-restructure) on the project's Fashion-MNIST models.  docs/neusemslice-restructure.md.
//
// Models: the paper's MLP 784-512-256-10 (trained here with the LeNet-5 recipe on the 60,000
// training images and cached in models-cache/) and LeNet-5 (the cached `nnlens demo` weights).
// For each pruner (LAMP, Global, Uniform+, ERK) and seed:
//   alone   iterative magnitude pruning of all weights
//   NSS+    semslice (Taylor, Theta = 0.95, metric_samples 1,000, on the first 10,000 training
//           images; its Gram-sample draw seeded) masks the non-critical neurons first, then the
//           same pruner on the weights left
// Each iteration prunes p = 0.05 of the remaining weights (§3: 0.10 is for MLP-MNIST only),
// fine-tunes 1 epoch on `--finetune` training images (Adam lr 1e-4, batch 64, the shuffle seeded)
// and stops at the first iteration whose test accuracy falls below the original accuracy - 1
// point (A13).  Reported: CR / NI / MA, means over the seeds.
//
//   neusemslice_restructure [--fashion DIR] [--cache DIR] [--quick] [--models mlp,lenet5,vgg] [--theta 0.95]
//       [--seeds 1,2,3] [--finetune 10000] [--test 10000] [--epochs 1] [--lr 1e-4]
//       [--tolerance 1] [--max-iter 40] [--methods lamp,global,uniform,erk]
//
// Self-checks (exit status 1 on failure): the neuron mask's CR equals parameter_accounting's; every
// accepted iteration's pruned share of the pool is 1 - (1-p)^NI up to rounding (oracle 8); the
// final network has exactly 0 in every removed or pruned parameter; NI counts the accepted
// iterations; the final accuracy is >= the reference - tolerance.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nnlens/compress/pruning.hpp>
#include <nnlens/io/idx.hpp>
#include <nnlens/io/weights.hpp>
#include <nnlens/nnlens.hpp>
#include <nnlens/neusemslice/restructure.hpp>
#include <nnlens/neusemslice/semslice.hpp>
#include <nnlens/train/fit.hpp>

#include "../tools/nnlens/lenet5_recipe.hpp"
#include "example_cli.hpp"
#include "fashion_models.hpp"

namespace fs = std::filesystem;
using namespace nnlens;
using namespace nnlens_examples;
using compress::pruning_method;

namespace {

using MLP = Sequential<Input<1, 28, 28>, Flatten, Dense<512>, ReLU, Dense<256>, ReLU, Dense<10>>;

int failures = 0;
void check(bool ok, const std::string& what) {
  if (!ok) {
    ++failures;
    std::printf("SELF-CHECK FAILED: %s\n", what.c_str());
  }
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> r;
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, ',');)
    if (!x.empty()) r.push_back(x);
  return r;
}

pruning_method method_of(const std::string& s) {
  if (s == "lamp") return pruning_method::lamp;
  if (s == "global") return pruning_method::global;
  if (s == "uniform" || s == "uniform+") return pruning_method::uniform_plus;
  if (s == "erk") return pruning_method::erk;
  throw value_error("--methods: unknown pruner '" + s + "' (lamp, global, uniform, erk)");
}

template <class Net>
void load_or_train(Net& net, const char* name, const fs::path& wpath, const fs::path& fashion, bool quick) {
  initialize(net, 1);
  if (fs::exists(wpath)) {
    io::load_weights(wpath, net);
    std::printf("model: %s loaded from %s\n", name, wpath.string().c_str());
    return;
  }
  const auto trn = io::load_mnist<float>(fashion, "train", quick ? 10000 : 0);
  demo::lenet5_recipe r;
  if (quick) r.epochs = 2, r.fine_epochs = 0;
  std::printf("model: training %s (%zu epochs on %zu images) ...\n", name, r.epochs, trn.size());
  std::fflush(stdout);
  demo::train_with_recipe(net, trn, r, false);
  fs::create_directories(wpath.parent_path().empty() ? fs::path(".") : wpath.parent_path());
  io::save_weights(wpath, net);
  std::printf("model: trained and cached in %s\n", wpath.string().c_str());
}

struct cell {
  double cr = 0, ni = 0, ma = 0, s = 0, seconds = 0;
  int n = 0;
  void add(const restructure_report& r) {
    cr += r.compression, ni += double(r.ni), ma += r.accuracy, s += r.start_compression, seconds += r.seconds, ++n;
  }
};

struct study_args {
  std::vector<pruning_method> methods;
  std::vector<std::uint64_t> seeds;
  double p = 0.05, tolerance = 1.0, lr = 1e-4, theta = 0.95;
  std::size_t epochs = 1, max_iter = 40, semslice_images = 10000, metric_samples = 1000;
  bool verbose = true;
};

template <class Net>
void self_check_final(const Net& net, const Net& original, const neuron_mask* m, const restructure_report& r,
                      const restructure_options& o, const std::string& tag) {
  std::size_t accepted = 0;
  for (const auto& it : r.iterations) accepted += it.accepted;
  check(accepted == r.ni, tag + ": NI counts the accepted iterations");
  check(r.ni == 0 || r.accuracy >= r.reference_accuracy - o.tolerance - 1e-9, tag + ": final accuracy within the tolerance");
  const double want = 100.0 * (1 - std::pow(1 - o.p, double(r.ni)));
  check(std::abs(r.weight_pruned - want) <= 100.0 * (0.5 * double(r.ni) + 1) / double(r.prunable),
        tag + ": pruned share of the pool is 1 - (1-p)^NI (oracle 8)");
  if (m) {
    const auto acc = parameter_accounting(original, *m);
    check(std::abs(acc.compression - r.start_compression) < 1e-9, tag + ": the mask's CR equals parameter_accounting's");
  }
  // every parameter counted as removed is exactly 0; the count matches the final CR
  const auto ps = parameter_spans(net);
  std::size_t zero = 0, all = 0;
  for (const auto& s : ps)
    for (auto v : s) zero += v == 0, ++all;
  check(100.0 * double(zero) / double(all) >= r.compression - 1e-9, tag + ": every removed or pruned parameter is 0");
}

template <class Net>
bool study(const char* name, const Net& original, const io::labelled_images<float>& fine, const io::labelled_images<float>& sem,
           const io::labelled_images<float>& tst, const study_args& a, std::map<std::string, std::string>& md) {
  const double ref = 100.0 * train::evaluate(execution::par, original, tst.images, tst.labels).accuracy;
  std::printf("\n== %s: %zu parameters, test accuracy %.2f%% on %zu images; p = %.2f, tolerance %.1f point(s), "
              "fine-tuning %zu epoch(s) on %zu images per iteration ==\n",
              name, parameter_count(original), ref, tst.size(), a.p, a.tolerance, a.epochs, fine.size());
  std::map<pruning_method, cell> alone, nss;
  for (auto seed : a.seeds) {
    stopwatch sw;
    semslice_options so;
    so.metric = metric::taylor;
    so.theta = a.theta;
    so.metric_samples = a.metric_samples;
    so.seed = seed;
    const auto sl = semslice(execution::par, original, sem.images, sem.labels, so);
    const auto acc = parameter_accounting(original, sl.mask);
    std::printf("seed %llu: semslice (Taylor, Theta %g) keeps", (unsigned long long)seed, a.theta);
    for (std::size_t u = 0; u < sl.mask.keep.size(); ++u) std::printf(" %zu/%zu", sl.mask.kept(u), sl.mask.keep[u].size());
    std::printf(" neurons: s = CR %.2f%% (%.1f s)\n", acc.compression, sw.seconds());
    for (auto method : a.methods) {
      for (int with = 0; with < 2; ++with) {
        Net net = original;
        restructure_options o;
        o.method = method;
        o.p = a.p;
        o.tolerance = a.tolerance;
        o.reference_accuracy = ref;
        o.epochs = a.epochs;
        o.lr = a.lr;
        o.max_iterations = a.max_iter;
        o.seed = seed;
        const std::string tag = std::string(name) + " " + std::string(compress::pruning_method_name(method)) +
                                (with ? " NSS+" : " alone") + " seed " + std::to_string(seed);
        if (a.verbose)
          o.on_iteration = [&](const restructure_iteration& it) {
            std::printf("   %-28s it %2zu: CR %6.2f%%  (pool %5.2f%% pruned)  acc %6.2f%%  %s  %.1f s\n", tag.c_str(),
                        it.iteration, it.compression, it.weight_pruned, it.accuracy, it.accepted ? "accepted" : "REJECTED",
                        it.seconds);
            std::fflush(stdout);
          };
        const auto r = restructure(execution::par, net, with ? &sl.mask : nullptr, fine.images, fine.labels, tst.images,
                                   tst.labels, o);
        std::printf("  %-28s CR %6.2f%%  NI %2zu  MA %6.2f%%  (start %6.2f%% / %.2f%%, %.0f s)\n", tag.c_str(), r.compression,
                    r.ni, r.accuracy, r.start_compression, r.start_accuracy, r.seconds);
        std::fflush(stdout);
        self_check_final(net, original, with ? &sl.mask : nullptr, r, o, tag);
        (with ? nss : alone)[method].add(r);
      }
    }
  }
  std::ostringstream t;
  t << "| pruner | alone CR / NI / MA | NSS+ CR / NI / MA | NSS s |\n|---|---|---|---|\n";
  std::printf("\n%s (means over %zu seed(s); reference accuracy %.2f%%)\n", name, a.seeds.size(), ref);
  std::printf("%-9s | %-24s | %-24s | s\n", "pruner", "alone CR/NI/MA", "NSS+ CR/NI/MA");
  for (auto method : a.methods) {
    const auto& x = alone[method];
    const auto& y = nss[method];
    char b[256];
    std::snprintf(b, sizeof b, "%-9s | %6.2f / %4.1f / %6.2f    | %6.2f / %4.1f / %6.2f    | %5.2f",
                  std::string(compress::pruning_method_name(method)).c_str(), x.cr / x.n, x.ni / x.n, x.ma / x.n, y.cr / y.n,
                  y.ni / y.n, y.ma / y.n, y.s / y.n);
    std::printf("%s\n", b);
    char m[256];
    std::snprintf(m, sizeof m, "| %s | %.2f / %.1f / %.2f | %.2f / %.1f / %.2f | %.2f |\n",
                  std::string(compress::pruning_method_name(method)).c_str(), x.cr / x.n, x.ni / x.n, x.ma / x.n, y.cr / y.n,
                  y.ni / y.n, y.ma / y.n, y.s / y.n);
    t << m;
  }
  md[name] = t.str();
  std::printf("\nmarkdown:\n%s", t.str().c_str());
  return true;
}

}  // namespace

int main(int argc, char** argv) try {
  const cli c(argc, argv);
  const bool quick = c.has("quick");
  const fs::path fashion = c.str("fashion", "/usr/share/datasets/fashion-mnist");
  const fs::path cache = c.str("cache", "models-cache");
  const auto models = split(c.str("models", quick ? "lenet5" : "mlp,lenet5,vgg"));
  study_args a;
  for (const auto& m : split(c.str("methods", "lamp,global,uniform,erk"))) a.methods.push_back(method_of(m));
  for (const auto& s : split(c.str("seeds", "1"))) a.seeds.push_back(std::stoull(s));
  a.tolerance = c.real("tolerance", 1.0);
  a.theta = c.real("theta", 0.95);
  a.lr = c.real("lr", 1e-4);
  a.epochs = c.num("epochs", 1);
  a.max_iter = c.num("max-iter", quick ? 3 : 40);
  a.semslice_images = c.num("semslice-images", quick ? 2000 : 10000);
  a.metric_samples = c.num("metric-samples", quick ? 200 : 1000);
  const std::size_t n_fine = c.num("finetune", quick ? 2000 : 10000);
  const std::size_t n_test = c.num("test", quick ? 2000 : 10000);
  if (a.methods.empty() || a.seeds.empty()) throw value_error("--methods and --seeds must not be empty");

  std::printf("NeuSemSlice model restructure (docs/specs/neusemslice.md#41-model-restructure, Table 5)%s; %zu threads\n",
              quick ? " --quick" : "", nnlens::detail::default_pool().size());
  stopwatch sw;
  const auto fine = io::load_mnist<float>(fashion, "train", n_fine);
  const auto sem = io::load_mnist<float>(fashion, "train", a.semslice_images);
  const auto tst = io::load_mnist<float>(fashion, "t10k", n_test);
  std::map<std::string, std::string> md;
  for (const auto& m : models) {
    if (m == "mlp") {
      MLP net;
      load_or_train(net, "MLP 784-512-256-10", cache / (quick ? "mlp-fashion-mnist-quick-e2-n10000.nnlw" : "mlp-fashion-mnist-e12-s1.nnlw"),
                    fashion, quick);
      study_args b = a;
      b.p = c.real("p", 0.05);  // spec §3: 0.10 only for MLP-MNIST; Table 5 MLP-FMNIST fits 0.05
      study("MLP-FMNIST", net, fine, sem, tst, b, md);
    } else if (m == "lenet5") {
      demo::LeNet5 net;
      fs::path w = c.str("weights", (cache / "lenet5-fashion-mnist-e12-s1.nnlw").string());
      if (quick && !fs::exists(w)) w = cache / demo::quick_lenet5_file;  // never write a quick model there
      load_or_train(net, "LeNet-5", w, fashion, quick);
      study_args b = a;
      b.p = c.real("p", 0.05);
      study("LeNet5-FMNIST", net, fine, sem, tst, b, md);
    } else if (m == "vgg") {
      FashionVGG net;
      load_or_train(net, "VGG-style 8-8-16-16-64", cache / (quick ? "vgg-fashion-mnist-quick-e2-n10000.nnlw" : "vgg-fashion-mnist-e12-s1.nnlw"),
                    fashion, quick);
      study_args b = a;
      b.p = c.real("p", 0.05);
      study("VGG-FMNIST", net, fine, sem, tst, b, md);
    } else {
      throw value_error("--models: unknown model '" + m + "' (mlp, lenet5, vgg)");
    }
  }
  std::printf("\ntotal %.0f s; %s\n", sw.seconds(), failures ? "SOME CHECKS FAILED" : "all checks passed");
  return failures ? 1 : 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "neusemslice_restructure: %s\n", e.what());
  return 2;
}
