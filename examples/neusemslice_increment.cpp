// examples/neusemslice_increment.cpp -- NeuSemSlice's incremental development (
// docs/specs/neusemslice.md#43-incremental-development, Tables 7 and 8) on the project's Fashion-MNIST models: docs/neusemslice-increment.md.
//
// Scenario I: task A = classes 0-4, task B = classes 5-9, one shared 10-way head.  A model is
// trained on task A only (demo recipe, cached), then learns task B by
//   Retrain      every parameter, task B's data only
//   Replay x%    every parameter, task B's data + x% of task A's training data (5, 10, 100)
//   NSS          only theta_{N \ Omega_A}: Omega_A = semslice (Taylor, Theta 0.95) on task A's
//                data and categories, output unit keep = task A's classes (A15)
//   NSS+R10%     NSS's mask with Replay 10%'s data
// all with the same optimiser and epochs.  Reported: accuracy on task A's and task B's test images
// (argmax over all 10 outputs) and their mean, as means over --seeds (the seed draws the replay
// subset and the shuffle).
// NSS-iso and NSS-iso+R10%: the same after isolate_kept (Omega_A reads only Omega_A, so its logits
// cannot change; not in the paper, see docs/neusemslice-increment.md).
// Scenario II (--scenario2, on by default in a full run): A = 0-2, B = 3-5, C = 6-9; A -> B -> C,
// NSS freezing Omega_A while learning B and Omega_A u Omega_B (Omega_B sliced on the updated model
// with B's categories) while learning C; Retrain / Replay 5% / Replay 10% (of all old tasks' data);
// the mean over the three tasks' test accuracies (Table 8).
//
//   neusemslice_increment [--fashion DIR] [--cache DIR] [--models mlp,lenet5,vgg] [--seeds 1]
//                         [--epochs 3] [--task-epochs 6] [--lr 0.001] [--theta 0.95]
//                         [--scenario2 0|1] [--quick]
// --quick: LeNet-5 only; the task-A model trained 2 epochs on 5,000 images (cached in --cache),
// task B 5,000 images for 1 epoch, scenario I only.
//
// Self-checks (exit status 1 on failure): NSS's frozen parameters (Omega_A's, the task-A output
// rows) are bit-identical to the task-A model's; every accuracy in [0, 1]; Retrain forgets task A
// more than NSS does.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <numeric>
#include <string>
#include <vector>

#include <nnlens/io/idx.hpp>
#include <nnlens/io/weights.hpp>
#include <nnlens/nnlens.hpp>
#include <nnlens/neusemslice/increment.hpp>
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

using Data = io::labelled_images<float>;

/// The samples whose label is in `classes` (at most `limit`, 0 = all), in dataset order; images
/// flattened to [n, 784] when `flat`.
Data select(const Data& d, const std::vector<std::size_t>& classes, bool flat, std::size_t limit = 0) {
  std::vector<std::size_t> idx;
  for (std::size_t i = 0; i < d.size() && (limit == 0 || idx.size() < limit); ++i)
    if (std::find(classes.begin(), classes.end(), std::size_t(d.labels[i])) != classes.end()) idx.push_back(i);
  Data r;
  const std::size_t px = 784;
  r.images = flat ? xt::xarray<float>::from_shape({idx.size(), px}) : xt::xarray<float>::from_shape({idx.size(), std::size_t(1), std::size_t(28), std::size_t(28)});
  for (std::size_t i = 0; i < idx.size(); ++i) {
    std::copy_n(d.images.data() + idx[i] * px, px, r.images.data() + i * px);
    r.labels.push_back(d.labels[idx[i]]);
  }
  return r;
}

std::vector<std::size_t> range(std::size_t a, std::size_t b) {
  std::vector<std::size_t> r(b - a);
  std::iota(r.begin(), r.end(), a);
  return r;
}

std::string name_of(const std::vector<std::size_t>& cs) {
  return std::to_string(cs.front()) + "-" + std::to_string(cs.back());
}

template <class Net>
void get_task_model(Net& net, const fs::path& file, const Data& train, std::size_t epochs) {
  initialize(net, 1);
  if (fs::exists(file)) {
    io::load_weights(file, net);
    std::printf("loaded %s\n", file.string().c_str());
    return;
  }
  stopwatch sw;
  std::printf("training %s (%zu epochs on %zu images, demo recipe) ...", file.string().c_str(), epochs, train.size());
  std::fflush(stdout);
  demo::lenet5_recipe r;
  r.epochs = epochs;
  r.fine_epochs = epochs >= 4 ? 2 : 0;
  demo::train_with_recipe(net, train, r, false);
  fs::create_directories(file.parent_path());
  io::save_weights(file, net, {{"epochs", std::to_string(epochs)}, {"task", "classes " + file.stem().string()}});
  std::printf(" %.0f s\n", sw.seconds());
}

template <class Net>
neuron_mask slice_task(const Net& net, const Data& d, const std::vector<std::size_t>& classes, double theta, std::size_t limit) {
  semslice_options so;
  so.metric = metric::taylor;
  so.theta = theta;
  so.metric_samples = 1000;
  so.categories = classes;
  Data s = d;
  if (limit && d.size() > limit) {
    s.images = xt::xarray<float>::from_shape([&] { auto sh = d.images.shape(); std::vector<std::size_t> v(sh.begin(), sh.end()); v[0] = limit; return v; }());
    std::copy_n(d.images.data(), s.images.size(), s.images.data());
    s.labels.assign(d.labels.begin(), d.labels.begin() + std::ptrdiff_t(limit));
  }
  auto r = semslice(execution::par, net, s.images, s.labels, so);
  set_output_classes(net, r.mask, classes);
  return r.mask;
}

template <class Net>
std::size_t frozen_moved(const Net& a, const Net& b, const neuron_mask& m) {
  const auto frozen = neuron_parameter_mask(a, m);
  const auto p0 = parameter_spans(a), p1 = parameter_spans(b);
  std::size_t moved = 0;
  for (std::size_t k = 0; k < p0.size(); ++k)
    for (std::size_t i = 0; i < p0[k].size(); ++i)
      if (frozen.trainable(k, i) && std::memcmp(&p0[k][i], &p1[k][i], sizeof(float)) != 0) ++moved;
  return moved;
}

struct acc3 {
  double a = 0, b = 0, c = 0, ahead = 0;
  std::size_t n = 0;
};

/// Accuracy with the argmax over `classes` only (a task-incremental reading, reported beside the
/// shared-head accuracy as a diagnostic: how much of task A's knowledge survives in the features).
template <class Net>
double restricted_accuracy(const Net& net, const Data& d, const std::vector<std::size_t>& classes) {
  const auto logits = forward(execution::par, net, d.images);
  std::size_t ok = 0;
  for (std::size_t i = 0; i < d.size(); ++i) {
    std::size_t best = classes[0];
    for (auto c : classes)
      if (logits(i, c) > logits(i, best)) best = c;
    ok += best == d.labels[i];
  }
  return double(ok) / double(d.size());
}

template <class Net>
void scenario1(const char* name, const Data& train, const Data& test, const fs::path& cache, const cli& c, bool quick, bool flat) {
  const auto A = range(0, 5), B = range(5, 10);
  const Data trA = select(train, A, flat, quick ? 5000 : 0), trB = select(train, B, flat, quick ? 5000 : 0);
  const Data teA = select(test, A, flat), teB = select(test, B, flat);
  const std::size_t task_epochs = c.num("task-epochs", quick ? 2 : 6);
  Net net;
  get_task_model(net, cache / (std::string(name) + "-fashion-mnist-task" + name_of(A) + "-e" + std::to_string(task_epochs) +
                               (quick ? "-quick" : "") + "-s1.nnlw"),
                 trA, task_epochs);
  const auto orig = task_scores(execution::par, net, teA.images, teA.labels, teB.images, teB.labels);
  stopwatch sw;
  const neuron_mask mA = slice_task(net, trA, A, c.real("theta", 0.95), quick ? 2000 : 10000);
  const auto us = neuron_units(net);
  std::printf("\n== %s scenario I (A = %s, B = %s): original %.2f / %.2f; Omega_A (%.1f s) keeps", name, name_of(A).c_str(),
              name_of(B).c_str(), 100 * orig.old_task, 100 * orig.new_task, sw.seconds());
  for (std::size_t u = 0; u < us.size(); ++u) std::printf(" %zu/%zu", mA.kept(u), us[u].neurons);
  const auto frozen = neuron_parameter_mask(net, mA);
  std::printf(" -> %.2f%% of the parameters frozen\n", 100.0 * double(frozen.trainable_count()) / double(frozen.size()));

  increment_options o;
  o.epochs = c.num("epochs", quick ? 1 : 3);
  o.lr = c.real("lr", 1e-3);
  o.batch = 64;
  const std::size_t seeds = c.num("seeds", 1);
  constexpr int M = 8;
  const char* names[M] = {"Retrain", "Replay5%", "Replay10%", "Replay100%", "NSS", "NSS+R10%", "NSS-iso", "NSS-iso+R10%"};
  const double replay[M] = {0, 0.05, 0.10, 1.0, 0, 0.10, 0, 0.10};
  const bool masked[M] = {false, false, false, false, true, true, true, true};
  const bool isolated[M] = {false, false, false, false, false, false, true, true};
  // NSS-iso: Omega_A cut off from the non-critical neurons before training (isolate_kept), so
  // that the frozen neurons keep their function, not only their weights (not in the paper).
  const Net iso = isolate_kept(net, mA);
  const auto iso_sc = task_scores(execution::par, iso, teA.images, teA.labels, teB.images, teB.labels);
  std::printf("  Omega_A isolated before training: task A %.2f (A-only head %.2f)\n", 100 * iso_sc.old_task,
              100 * restricted_accuracy(iso, teA, A));
  std::vector<acc3> res(M);
  for (std::size_t s = 1; s <= seeds; ++s) {
    o.seed = s;
    for (int m = 0; m < M; ++m) {
      if (quick && m > 0 && m < 4) continue;
      stopwatch t;
      const Net& start = isolated[m] ? iso : net;
      increment_result<Net> r{net, {}};
      if (replay[m] > 0) {
        const auto mix = replay_mix(trB.images, trB.labels, trA.images, trA.labels, replay[m], 100 + s);
        r = increment(execution::par, start, masked[m] ? &mA : nullptr, mix.x, mix.y, o);
      } else {
        r = increment(execution::par, start, masked[m] ? &mA : nullptr, trB.images, trB.labels, o);
      }
      const auto sc = task_scores(execution::par, r.model, teA.images, teA.labels, teB.images, teB.labels);
      const double ah = restricted_accuracy(r.model, teA, A);
      res[std::size_t(m)].a += sc.old_task, res[std::size_t(m)].b += sc.new_task, res[std::size_t(m)].ahead += ah;
      ++res[std::size_t(m)].n;
      check(sc.old_task >= 0 && sc.old_task <= 1 && sc.new_task >= 0 && sc.new_task <= 1, "accuracy outside [0, 1]");
      check(r.report.frozen_changed == 0, std::string(names[m]) + ": frozen parameters moved");
      if (masked[m]) check(frozen_moved(start, r.model, mA) == 0, std::string(names[m]) + ": Omega_A's parameters moved");
      if (isolated[m])  // Omega_A computes task A's logits alone: they cannot have changed
        check(std::abs(restricted_accuracy(r.model, teA, A) - restricted_accuracy(iso, teA, A)) < 1e-9,
              std::string(names[m]) + ": the isolated Omega_A's task-A outputs changed");
      std::printf("  seed %zu %-10s %6.2f / %6.2f  (A-only head %6.2f; %zu samples, %.0f s)\n", s, names[m], 100 * sc.old_task,
                  100 * sc.new_task, 100 * ah, r.report.samples, t.seconds());
      std::fflush(stdout);
    }
  }
  std::printf("  %-10s | %7s %7s %7s | %s\n", "method", "TaskA", "TaskB", "Avg", "TaskA, argmax over A's outputs only");
  std::printf("  %-10s | %7.2f %7.2f %7.2f | %7.2f\n", "Original", 100 * orig.old_task, 100 * orig.new_task, 100 * orig.mean,
              100 * restricted_accuracy(net, teA, A));
  for (int m = 0; m < M; ++m) {
    const auto& r = res[std::size_t(m)];
    if (!r.n) continue;
    const double a = 100 * r.a / double(r.n), b = 100 * r.b / double(r.n);
    std::printf("  %-10s | %7.2f %7.2f %7.2f | %7.2f\n", names[m], a, b, (a + b) / 2, 100 * r.ahead / double(r.n));
  }
  check(res[0].a <= res[4].a, std::string(name) + ": Retrain keeps more of task A than NSS");
}

template <class Net>
void scenario2(const char* name, const Data& train, const Data& test, const fs::path& cache, const cli& c, bool flat) {
  const std::vector<std::vector<std::size_t>> T = {range(0, 3), range(3, 6), range(6, 10)};
  std::vector<Data> tr, te;
  for (const auto& t : T) tr.push_back(select(train, t, flat)), te.push_back(select(test, t, flat));
  const std::size_t task_epochs = c.num("task-epochs", 6);
  Net net;
  get_task_model(net, cache / (std::string(name) + "-fashion-mnist-task0-2-e" + std::to_string(task_epochs) + "-s1.nnlw"), tr[0],
                 task_epochs);
  increment_options o;
  o.epochs = c.num("epochs", 3);
  o.lr = c.real("lr", 1e-3);
  o.batch = 64;
  const std::size_t seeds = c.num("seeds", 1);
  const double theta = c.real("theta", 0.95);
  auto acc = [&](const Net& n, std::size_t t) { return train::evaluate(execution::par, n, te[t].images, te[t].labels).accuracy; };
  std::printf("\n== %s scenario II (A = 0-2, B = 3-5, C = 6-9), means over %zu seed(s)\n  %-10s | %7s %7s %7s %7s\n", name,
              seeds, "method", "TaskA", "TaskB", "TaskC", "Avg");
  const char* names[] = {"Retrain", "Replay5%", "Replay10%", "NSS", "NSS-iso"};
  // one run of method m: A -> B -> C; returns the final model
  auto run_once = [&](int m, std::size_t seed) {
    o.seed = seed;
    Net cur = net;
    neuron_mask frozen;
    if (m >= 3) frozen = slice_task(net, tr[0], T[0], theta, 10000);
    for (std::size_t step = 1; step < 3; ++step) {
      if (m >= 3) {
        if (m == 4) cur = isolate_kept(cur, frozen);
        auto r = increment(execution::par, cur, &frozen, tr[step].images, tr[step].labels, o);
        check(r.report.frozen_changed == 0, "scenario II: frozen parameters moved");
        cur = r.model;
        if (step == 1) {
          neuron_mask mB = slice_task(cur, tr[1], T[1], theta, 10000);
          frozen = mask_union(frozen, mB);
          std::vector<std::size_t> ab = T[0];
          ab.insert(ab.end(), T[1].begin(), T[1].end());
          set_output_classes(cur, frozen, ab);
        }
      } else if (m == 0) {
        cur = increment(execution::par, cur, nullptr, tr[step].images, tr[step].labels, o).model;
      } else {
        // the old tasks' data: all of A (and B) ...
        Data old = tr[0];
        if (step == 2) {
          const auto both = replay_mix(tr[0].images, tr[0].labels, tr[1].images, tr[1].labels, 1.0, 0);
          old.images = both.x;
          old.labels.assign(both.y.begin(), both.y.end());
        }
        const auto mix =
            replay_mix(tr[step].images, tr[step].labels, old.images, old.labels, m == 1 ? 0.05 : 0.10, 200 * seed + step);
        cur = increment(execution::par, cur, nullptr, mix.x, mix.y, o).model;
      }
    }
    return cur;
  };
  for (int m = 0; m < 5; ++m) {
    stopwatch t;
    double sum[3] = {0, 0, 0};
    for (std::size_t seed = 1; seed <= seeds; ++seed) {
      const Net cur = run_once(m, seed);
      for (std::size_t k = 0; k < 3; ++k) sum[k] += acc(cur, k);
    }
    const double a = sum[0] / double(seeds), b = sum[1] / double(seeds), cc = sum[2] / double(seeds);
    std::printf("  %-10s | %7.2f %7.2f %7.2f %7.2f   (%.0f s)\n", names[m], 100 * a, 100 * b, 100 * cc, 100 * (a + b + cc) / 3,
                t.seconds());
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
  const bool s2 = c.num("scenario2", quick ? 0 : 1) != 0;
  stopwatch total;
  const auto train = io::load_mnist<float>(fashion, "train");
  const auto test = io::load_mnist<float>(fashion, "t10k");
  std::printf("incremental development: %zu epochs per task, Adam lr %g, batch 64\n", c.num("epochs", quick ? 1 : 3),
              c.real("lr", 1e-3));
  if (models.find("mlp") != std::string::npos) {
    scenario1<Mlp>("mlp", train, test, cache, c, quick, false);
    if (s2) scenario2<Mlp>("mlp", train, test, cache, c, false);
  }
  if (models.find("lenet5") != std::string::npos) {
    scenario1<LeNet5>("lenet5", train, test, cache, c, quick, false);
    if (s2) scenario2<LeNet5>("lenet5", train, test, cache, c, false);
  }
  if (models.find("vgg") != std::string::npos) {
    scenario1<FashionVGG>("vgg", train, test, cache, c, quick, false);
    if (s2) scenario2<FashionVGG>("vgg", train, test, cache, c, false);
  }
  std::printf("\ntotal %.1f s; self-checks: %s\n", total.seconds(), failures ? "FAILED" : "passed");
  return failures ? 1 : 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "neusemslice_increment: %s\n", e.what());
  return 2;
}
