// tools/nnlens/lenet5_recipe.hpp -- the LeNet-5 / Fashion-MNIST training recipe of `nnlens demo`.
//
// Shared by the demo command and by the integration test (tests/train/test_fit.cpp), so the test
// checks exactly what the demo runs.  Recipe: PyTorch-default initialisation (seeded), Adam
// (lr 1e-3), mini-batches of 64, shuffled each epoch (seeded), `epochs` epochs with the learning
// rate divided by 10 for the last `fine_epochs` of them.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include <nnlens/io/idx.hpp>
#include <nnlens/nnlens.hpp>
#include <nnlens/train/fit.hpp>
#include <nnlens/train/optimizer.hpp>

namespace nnlens::demo {

using LeNet5 = Sequential<Input<1, 28, 28>,                             //
                          Conv2D<6, 5, 1, 2>, ReLU, MaxPool2D<2>,       // 6 x 14 x 14
                          Conv2D<16, 5>, ReLU, MaxPool2D<2>,            // 16 x 5 x 5
                          Flatten, Dense<120>, ReLU, Dense<84>, ReLU, Dense<10>>;

struct lenet5_recipe {
  std::size_t epochs = 12;
  std::size_t fine_epochs = 3;  // the last ones run at lr / 10
  std::size_t batch_size = 64;
  double lr = 1e-3;
  std::uint64_t seed = 1;       // initialisation; the shuffle uses a seed derived from it
  std::size_t threads = 0;      // 0: the process-wide pool (NNLENS_NUM_THREADS or all cores)
};

/// Initialises `net` (any network the trainer supports; the recipe was tuned on LeNet-5) from the
/// recipe's seed and trains it on `data`.
template <class Net>
train::fit_report train_with_recipe(Net& net, const io::labelled_images<float>& data, const lenet5_recipe& r, bool progress,
                                    const std::function<void(const train::epoch_report&)>& on_epoch = {}) {
  initialize(net, r.seed);
  train::adam opt(net, {.lr = r.lr});
  train::fit_options o;
  o.epochs = r.epochs;
  o.batch_size = r.batch_size;
  o.seed = r.seed ^ 0x9e3779b97f4a7c15ull;
  o.threads = r.threads;
  o.progress = progress;
  return train::fit(execution::par, net, opt, data.images, data.labels, o, [&](const train::epoch_report& e) {
    if (on_epoch) on_epoch(e);
    if (e.epoch + r.fine_epochs == r.epochs) opt.options().lr = r.lr / 10;
  });
}

/// The examples' quick LeNet-5 (their --quick runs without `nnlens demo`'s 12-epoch model): the
/// recipe's 2 epochs, none at lr / 10, on the first 10,000 training images, cached as
/// quick_lenet5_file.  nnslicer_detect, nnslicer_prune, nnslicer_protect, neusemslice_restructure
/// and neusemslice_readapt train the same one, so their ctests share one file (examples/CMakeLists.txt).
inline constexpr const char* quick_lenet5_file = "lenet5-fashion-mnist-quick-e2-n10000.nnlw";
inline constexpr std::size_t quick_lenet5_images = 10000;
inline lenet5_recipe quick_lenet5_recipe() {
  lenet5_recipe r;
  r.epochs = 2;
  r.fine_epochs = 0;
  return r;
}

/// The first n samples of `data` (all of them when it has fewer).
inline io::labelled_images<float> first_samples(const io::labelled_images<float>& data, std::size_t n) {
  n = std::min(n, data.size());
  if (n == data.size()) return data;
  io::labelled_images<float> r;
  auto s = data.images.shape();
  std::vector<std::size_t> shp(s.begin(), s.end());
  shp[0] = n;
  r.images = xt::xarray<float>::from_shape(shp);
  std::copy_n(data.images.data(), r.images.size(), r.images.data());
  r.labels.assign(data.labels.begin(), data.labels.begin() + std::ptrdiff_t(n));
  return r;
}

/// The demo's LeNet-5 recipe.
inline train::fit_report train_lenet5(LeNet5& net, const io::labelled_images<float>& data, const lenet5_recipe& r,
                                      bool progress, const std::function<void(const train::epoch_report&)>& on_epoch = {}) {
  return train_with_recipe(net, data, r, progress, on_epoch);
}

}  // namespace nnlens::demo
