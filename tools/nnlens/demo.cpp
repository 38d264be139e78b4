// tools/nnlens/demo.cpp -- `nnlens demo`: LeNet-5 on Fashion-MNIST, trained once, then cached.
#include "demo.hpp"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include <random>

#include <nnlens/core/progress.hpp>
#include <nnlens/coverage.hpp>
#include <nnlens/coverage/neuron_coverage.hpp>
#include <nnlens/coverage/surprise.hpp>
#include <nnlens/core/thread_pool.hpp>
#include <nnlens/exactline.hpp>
#include <nnlens/exactline/svg.hpp>
#include <nnlens/io/weights.hpp>
#include <nnlens/nnslicer.hpp>
#include <nnlens/neusemslice/semslice.hpp>
#include <nnlens/compress/quantize.hpp>
#include <nnlens/difftest/dflare.hpp>

#include "lenet5_recipe.hpp"

namespace nnlens::tool {

namespace fs = std::filesystem;

namespace {
std::string fixed(double v, int digits) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", digits, v);
  return b;
}
std::string now_utc() {
  const std::time_t t = std::time(nullptr);
  char b[32];
  std::strftime(b, sizeof b, "%Y-%m-%d %H:%M:%S UTC", std::gmtime(&t));
  return b;
}
const std::vector<std::string> fashion_labels = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                                  "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};

std::vector<float> image_of(const io::labelled_images<float>& d, std::size_t i) {
  const std::size_t n = d.images.size() / d.labels.size();
  return std::vector<float>(d.images.data() + i * n, d.images.data() + (i + 1) * n);
}

/// ExactLine step: the segment between two test images of different classes; the classes along it
/// and exact integrated gradients of the far image's class, with the baseline the near image.
void exactline_step(const demo::LeNet5& net, const io::labelled_images<float>& test, const fs::path& out_dir) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::size_t a = 0;
  std::size_t b = 1;
  while (b < test.labels.size() && test.labels[b] == test.labels[a]) ++b;
  const auto A = image_of(test, a), B = image_of(test, b);
  const auto line = exact_line(execution::par, net, A, B);
  const auto classes = classify_line(line);
  const std::size_t k = classes.back().label;  // the class the network gives B
  const auto ig = exact_ig(execution::par, net, B, A, k);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "ExactLine: test image " << a << " (" << fashion_labels[test.labels[a]] << ") -> test image " << b << " ("
            << fashion_labels[test.labels[b]] << "): " << line.pieces() << " linear pieces, "
            << fixed(line_density(line), 1) << " endpoints per unit length\n  classes along the segment:";
  for (const auto& c : classes)
    std::cout << "  [" << fixed(c.from, 3) << ", " << fixed(c.to, 3) << "] " << fashion_labels[c.label];
  const auto left = samples_to_reach(ig, riemann_rule::left), trap = samples_to_reach(ig, riemann_rule::trapezoid);
  std::cout << "\n  exact integrated gradients of '" << fashion_labels[k] << "' (baseline: image " << a << "): "
            << ig.pieces() << " gradients; sum " << fixed(double(ig.sum), 6) << " = F(B) - F(A) " << fixed(double(ig.delta), 6)
            << "\n  Riemann sums need " << (left ? std::to_string(*left) : std::string(">1006")) << " (left) and "
            << (trap ? std::to_string(*trap) : std::string(">1006")) << " (trapezoid) samples for 5% error; "
            << format_duration(secs) << "\n";
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  const fs::path line_svg_path = out_dir / "exactline-classes.svg", ig_svg_path = out_dir / "exactline-ig.svg";
  svg_options so;
  so.title = "classes from test image " + std::to_string(a) + " to " + std::to_string(b) + " (" +
             std::to_string(line.pieces()) + " pieces)";
  std::ofstream(line_svg_path) << line_svg(std::vector<line_result<double>>{line}, class_rule::argmax, fashion_labels, so);
  std::ofstream(ig_svg_path) << heatmap_svg(ig.attributions, 28, 28, "exact IG: " + fashion_labels[k]);
  std::cout << "  pictures: " << line_svg_path.string() << ", " << ig_svg_path.string() << "\n";
}

/// NNSlicer step: the profile of the network (channel means) over the training images, then the
/// slice of test image 0's predicted class: per layer, the neurons and synapses in the slice.
void nnslicer_step(const demo::LeNet5& net, const io::labelled_images<float>& train,
                   const io::labelled_images<float>& test) {
  const auto t0 = std::chrono::steady_clock::now();
  const profile prof = profile_network(execution::par, net, train.images);
  const auto t1 = std::chrono::steady_clock::now();
  auto x0 = image_of(test, 0);
  const auto x = xt::adapt(x0.data(), x0.size(), xt::no_ownership(), std::vector<std::size_t>{1, 1, 28, 28});
  const contrib_table tab = nnslicer(execution::par, net, prof, x, criterion::predicted());
  const auto t2 = std::chrono::steady_clock::now();
  const double prof_secs = std::chrono::duration<double>(t1 - t0).count();
  const double slice_secs = std::chrono::duration<double>(t2 - t1).count();
  const xt::xarray<float> y = forward(net, x);
  const std::size_t k = std::size_t(std::max_element(y.begin(), y.end()) - y.begin());
  std::cout << "NNSlicer: profile of " << prof.samples << " training images (" << prof.sums.size()
            << " tensors, channel means) in " << format_duration(prof_secs) << "; slice of test image 0 ("
            << fashion_labels[test.labels[0]] << "), its predicted class '" << fashion_labels[k] << "', theta 0.3, in "
            << format_duration(slice_secs) << "\n";
  std::printf("  %-12s %18s %22s\n", "layer", "neurons in slice", "synapses in slice");
  std::size_t syn = 0, syn_in = 0;
  for (const auto& s : slice_sizes(tab)) {
    const std::string nr = std::to_string(s.neurons_in_slice) + " / " + std::to_string(s.neurons);
    const std::string sr = s.synapses ? std::to_string(s.synapses_in_slice) + " / " + std::to_string(s.synapses) : "-";
    std::printf("  %-12s %18s %22s\n", s.name.c_str(), nr.c_str(), sr.c_str());
    syn += s.synapses;
    syn_in += s.synapses_in_slice;
  }
  std::printf("  %-12s %18s %22s (%.1f%% of the weights)\n", "total", "",
              (std::to_string(syn_in) + " / " + std::to_string(syn)).c_str(), 100.0 * double(syn_in) / double(syn));
  std::fflush(stdout);
}

/// Coverage step (DeepImportance): IDC and the DeepGauge / surprise criteria prepared on 10,000
/// training images, measured on 2,000 test images, then with their noisy copies added (Gaussian
/// noise, sigma 0.1, seed 1, clipped to [0, 1]): the coverage of the test set and of test + noise.
void coverage_step(const demo::LeNet5& net, const io::labelled_images<float>& train,
                   const io::labelled_images<float>& test) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::size_t per = train.images.size() / train.labels.size();
  const std::size_t ntrain = std::min<std::size_t>(10000, train.labels.size());
  const std::size_t ntest = std::min<std::size_t>(2000, test.labels.size());
  auto batch = [&](const float* p, std::size_t n) {
    return xt::xarray<float>(xt::adapt(p, n * per, xt::no_ownership(), std::vector<std::size_t>{n, 1, 28, 28}));
  };
  const xt::xarray<float> X = batch(train.images.data(), ntrain);
  const std::vector<std::uint8_t> y(train.labels.begin(), train.labels.begin() + std::ptrdiff_t(ntrain));
  const xt::xarray<float> T = batch(test.images.data(), ntest);
  xt::xarray<float> N = T;
  std::mt19937_64 rng(1);
  std::normal_distribution<float> noise(0.0f, 0.1f);
  for (auto& v : N) v = std::clamp(v + noise(rng), 0.0f, 1.0f);

  const idc_options io{.m = 6};
  idc ic = prepare_idc(execution::par, net, X, y, io);
  const auto bounds = std::make_shared<const neuron_bounds>(prepare_neuron_bounds(execution::par, net, X));
  const auto sm = std::make_shared<const surprise_model>(prepare_surprise(execution::par, net, X, ic.layer()));
  const auto t1 = std::chrono::steady_clock::now();
  nc_criterion nc(net);
  kmnc_criterion kmnc(bounds);
  nbc_criterion nbc(bounds);
  snac_criterion snac(bounds);
  tknc_criterion tknc(net);
  lsc_criterion lsc(sm);
  dsc_criterion dsc(sm);
  std::vector<std::pair<std::string, std::pair<double, double>>> rows;
  auto both = [&](auto& c) {
    const double a = measure(execution::par, net, T, c).percent;
    const double b = measure(execution::par, net, N, c).percent;  // adds the noisy copies
    rows.push_back({std::string(c.name()), {a, b}});
  };
  both(ic), both(nc), both(kmnc), both(nbc), both(snac), both(tknc), both(lsc), both(dsc);
  const auto t2 = std::chrono::steady_clock::now();
  std::cout << "Coverage (DeepImportance): prepared on " << ntrain << " training images ("
            << ic.training_inputs() << " correctly classified; IDC: layer " << ic.layer() << ", m " << ic.neurons().size()
            << ", |INCC| " << fixed(ic.incc_size(), 0) << ") in "
            << format_duration(std::chrono::duration<double>(t1 - t0).count()) << "; " << ntest
            << " test images, then their noisy copies added (Gaussian sigma 0.1, seed 1, clipped to [0, 1]), in "
            << format_duration(std::chrono::duration<double>(t2 - t1).count()) << "\n";
  std::printf("  %-9s %9s %12s\n", "criterion", "test", "test+noise");
  for (const auto& [name, v] : rows) std::printf("  %-9s %8.2f%% %11.2f%%\n", name.c_str(), v.first, v.second);
  std::fflush(stdout);
}

/// NeuSemSlice step: the critical neurons of every hidden layer (Taylor metric, theta 0.95, centred
/// linear CKA, m <= 500 per class) on 5,000 training images; the compression rate of their mask and
/// the test accuracy of the masked model.
void semslice_step(const demo::LeNet5& net, const io::labelled_images<float>& train,
                   const io::labelled_images<float>& test, double base_accuracy) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::size_t per = train.images.size() / train.labels.size();
  const std::size_t n = std::min<std::size_t>(5000, train.labels.size());
  const xt::xarray<float> X(xt::adapt(train.images.data(), n * per, xt::no_ownership(), std::vector<std::size_t>{n, 1, 28, 28}));
  const std::vector<std::uint8_t> y(train.labels.begin(), train.labels.begin() + std::ptrdiff_t(n));
  semslice_options so;
  so.metric = metric::taylor, so.theta = 0.95;
  const auto r = semslice(execution::par, net, X, y, so);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto acc = parameter_accounting(net, r.mask);
  const auto ev = train::evaluate(execution::par, apply_neuron_mask(net, r.mask), test.images, test.labels);
  std::cout << "NeuSemSlice: critical neurons on " << n << " training images (Taylor, theta 0.95, linear CKA, m <= 500 "
            << "per class) in " << format_duration(secs) << "\n";
  std::printf("  %-10s %19s\n", "layer", "critical / neurons");
  for (const auto& u : r.report.units) {
    char b[128];
    std::snprintf(b, sizeof b, "  %-10s %10zu / %-6zu%s", u.name.c_str(), u.kept, u.neurons, u.output ? "  (output, never sliced)" : "");
    std::string l = b;
    l.erase(l.find_last_not_of(' ') + 1);
    std::cout << l << "\n";
  }
  std::printf("  parameters kept %zu / %zu: compression %.1f%%; test accuracy of the masked model %.2f%% (unmasked %.2f%%)\n",
              acc.kept, acc.total, acc.compression, 100 * ev.accuracy, 100 * base_accuracy);
  std::fflush(stdout);
}

/// DFlare step: the full int8 twin of the model (per-channel weights, activations calibrated on
/// 1,000 training images), its test accuracy, and DFlare's search on the first 10 test images
/// (raw pixels, budget 10,000 queries per seed): the triggering inputs found.
void dflare_step(const demo::LeNet5& net, const io::labelled_images<float>& train, const io::labelled_images<float>& test,
                 double base_accuracy) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::size_t per = 784, nc = std::min<std::size_t>(1000, train.labels.size());
  const xt::xarray<float> cal(xt::adapt(train.images.data(), nc * per, xt::no_ownership(), std::vector<std::size_t>{nc, 1, 28, 28}));
  auto q = std::make_shared<const compress::quantized_network<demo::LeNet5>>(compress::quantize(net, cal));
  const auto labels = q->classify(test.images);
  std::size_t ok = 0, differ = 0;
  const xt::xarray<float> logits = forward(execution::par, net, test.images);
  for (std::size_t i = 0; i < labels.size(); ++i) {
    const float* row = logits.data() + i * 10;
    const std::size_t fl = std::size_t(std::max_element(row, row + 10) - row);
    ok += labels[i] == test.labels[i], differ += labels[i] != fl;
  }
  const auto f = difftest::wrap(net, "LeNet-5", difftest::normalization::divide_by(255));
  const auto g = difftest::wrap(
      [q](std::span<const float> x, std::size_t n, std::span<float> p) {
        xt::xarray<float> a = xt::xarray<float>::from_shape({n, std::size_t(1), std::size_t(28), std::size_t(28)});
        for (std::size_t i = 0; i < a.size(); ++i) a.data()[i] = x[i] / 255.0f;
        const xt::xarray<float> r = q->predict(a);
        std::copy_n(r.data(), r.size(), p.data());
      },
      784, 10, "LeNet-5 int8");
  const std::size_t ns = std::min<std::size_t>(10, test.labels.size());
  std::vector<float> seeds(ns * per);
  for (std::size_t i = 0; i < seeds.size(); ++i) seeds[i] = std::round(test.images.data()[i] * 255.0f);
  difftest::dflare_options o;
  o.image = {1, 28, 28};
  o.max_queries = 10000;
  o.max_seconds = 10;
  o.seed = 1;
  const auto r = difftest::dflare(execution::par, f, g, seeds, ns, o);
  const auto s = r.summary();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("DFlare: int8 twin (per-channel weights, activations calibrated on %zu images): test accuracy %.2f%% (float %.2f%%), "
              "%zu of %zu test images already classified differently; %.1fs\n",
              nc, 100.0 * double(ok) / double(labels.size()), 100 * base_accuracy, differ, labels.size(), secs);
  for (const auto& x : r.seeds)
    std::printf("  seed %zu: %s%s\n", x.index,
                x.found() ? ("triggering input after " + std::to_string(x.queries) + " queries (" + fixed(x.seconds * 1000, 1) + " ms): float says " +
                             std::to_string(x.label_f) + ", int8 says " + std::to_string(x.label_g))
                                .c_str()
                          : (x.status == difftest::seed_status::already_triggering ? "already differs" : "not found"),
                "");
  std::printf("  found %zu of %zu searched seeds; mean %.1f queries, %.1f ms per triggering input\n", s.found, s.searched, s.mean_queries,
              1000 * s.mean_seconds);
  std::fflush(stdout);
}

std::string get(const io::weights_metadata& m, const std::string& k, const std::string& def = "?") {
  auto it = m.find(k);
  return it == m.end() ? def : it->second;
}
}  // namespace

int run_demo(const demo_options& o) {
  demo::lenet5_recipe recipe;
  recipe.seed = o.seed;
  recipe.threads = o.threads;
  if (o.epochs) {
    recipe.epochs = o.epochs;
    recipe.fine_epochs = std::min(recipe.fine_epochs, o.epochs / 4);
  }
  const fs::path data = o.data_dir;
  std::error_code ec;
  if (!fs::is_directory(data, ec))
    throw io_error(data.string() + ": no such directory (Fashion-MNIST: apt-get install dataset-fashion-mnist)");
  const fs::path cache = o.cache_dir;
  fs::create_directories(cache, ec);
  if (ec) throw io_error(cache.string() + ": cannot create the cache directory (" + ec.message() + ")");
  const fs::path model = cache / ("lenet5-fashion-mnist-e" + std::to_string(recipe.epochs) + "-s" +
                                  std::to_string(recipe.seed) + ".nnlw");
  const std::size_t threads = recipe.threads ? recipe.threads : worker_threads();

  std::cout << "nnlens demo: LeNet-5 on Fashion-MNIST (" << data.string() << ")\n";
  const auto test = io::load_mnist(data, "t10k");
  demo::LeNet5 net;
  io::weights_metadata meta;
  bool cached = false;
  if (!o.retrain && fs::exists(model, ec)) {
    try {
      net = io::load_weights<demo::LeNet5>(model, &meta);
      cached = true;
      std::cout << "Reusing the cached model " << model.string() << " (trained " << get(meta, "trained_at") << " in "
                << get(meta, "train_seconds") << " s; pass --retrain to train again)\n";
    } catch (const nnlens::error& e) {
      std::cerr << "nnlens: the cached model is unusable, retraining: " << e.what() << "\n";
    }
  }
  double train_seconds = 0;
  io::labelled_images<float> train;  // loaded to train, or for the NNSlicer step's profile
  if (!cached) {
    train = io::load_mnist(data, "train");
    std::cout << "Training: " << train.size() << " images, " << recipe.epochs << " epochs, Adam lr " << recipe.lr;
    if (recipe.fine_epochs) std::cout << " (lr/10 for the last " << recipe.fine_epochs << ")";
    std::cout << ", batch " << recipe.batch_size << ", seed " << recipe.seed << ", " << threads << " thread"
              << (threads == 1 ? "" : "s") << "\n"
              << std::flush;
    const auto rep = demo::train_lenet5(net, train, recipe, true);
    train_seconds = rep.seconds;
    meta = {{"model", "LeNet-5"},
            {"dataset", "Fashion-MNIST"},
            {"epochs", std::to_string(recipe.epochs)},
            {"seed", std::to_string(recipe.seed)},
            {"threads", std::to_string(threads)},
            {"train_seconds", fixed(train_seconds, 1)},
            {"final_train_loss", fixed(rep.epochs.back().loss, 4)},
            {"trained_at", now_utc()}};
  }
  const auto t0 = std::chrono::steady_clock::now();
  const auto ev = train::evaluate(execution::par, net, test.images, test.labels);
  const double eval_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!cached) {
    meta["test_accuracy"] = fixed(ev.accuracy, 4);
    io::save_weights(model, net, meta);
  }
  std::cout << "Test accuracy: " << fixed(100 * ev.accuracy, 2) << "% (" << ev.correct << "/" << ev.samples
            << " Fashion-MNIST test images, " << format_duration(eval_seconds) << ")\n";
  if (cached)
    std::cout << "Training time: " << get(meta, "train_seconds") << " s (" << get(meta, "epochs") << " epochs, "
              << get(meta, "threads") << " threads, when the cached model was trained)\n";
  else
    std::cout << "Training time: " << fixed(train_seconds, 1) << " s (" << recipe.epochs << " epochs, " << threads
              << " threads)\n"
              << "Saved the model to " << model.string() << "\n";
  exactline_step(net, test, o.output_dir);
  if (train.size() == 0) train = io::load_mnist(data, "train");
  nnslicer_step(net, train, test);
  coverage_step(net, train, test);
  semslice_step(net, train, test, ev.accuracy);
  dflare_step(net, train, test, ev.accuracy);
  return 0;
}

/// `nnlens demo [--data DIR] [--cache DIR] [--out DIR]`: LeNet-5 on Fashion-MNIST, every analysis.
void register_demo(CLI::App& app, command_list& cmds) {
  auto [cmd, o] = add_command<demo_options>(
      app, cmds, "demo", "Train (or reuse from the cache) LeNet-5 on Fashion-MNIST and report",
      run_demo);
  cmd.add_option("--data", o.data_dir, "Directory with the Fashion-MNIST IDX files")->capture_default_str();
  cmd.add_option("--cache", o.cache_dir, "Directory for trained models")->capture_default_str();
  cmd.add_option("--epochs", o.epochs, "Training epochs (default: the recipe's 12)")->check(CLI::Range(1, 1000));
  cmd.add_option("--seed", o.seed, "Seed of initialisation and shuffling")->capture_default_str();
  add_threads(cmd, &o.threads);
  cmd.add_flag("--retrain", o.retrain, "Train even if a cached model exists");
  cmd.add_option("--out", o.output_dir, "Directory for the pictures (SVG) of the analysis steps")->capture_default_str();
}

}  // namespace nnlens::tool
