// tools/nnlens/demo.cpp -- `nnlens demo`: LeNet-5 on Fashion-MNIST, trained once, then cached.
#include "demo.hpp"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <string>

#include <nnlens/core/progress.hpp>
#include <nnlens/core/thread_pool.hpp>
#include <nnlens/io/weights.hpp>

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
  const std::size_t threads = recipe.threads ? recipe.threads : nnlens::detail::default_pool().size();

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
  if (!cached) {
    const auto train = io::load_mnist(data, "train");
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
  return 0;
}

}  // namespace nnlens::tool
