// examples/train_lenet5.cpp -- train LeNet-5 on Fashion-MNIST with nnlens, evaluate it, save it.
//
//   train_lenet5 [DATA_DIR [EPOCHS [TRAIN_LIMIT [MIN_ACCURACY]]]]
//
// DATA_DIR defaults to Debian's dataset-fashion-mnist (/usr/share/datasets/fashion-mnist);
// TRAIN_LIMIT > 0 trains on the first TRAIN_LIMIT images only; the program exits with status 1
// if the test accuracy is below MIN_ACCURACY (used by ctest with a tiny budget).
// Build: link nnlens::idx (nnlens + zlib for the gzipped IDX files).
#include <cstdio>
#include <cstdlib>
#include <exception>

#include <nnlens/io/idx.hpp>      // load_mnist
#include <nnlens/io/weights.hpp>  // save_weights / load_weights
#include <nnlens/nnlens.hpp>
#include <nnlens/train/fit.hpp>        // fit, evaluate
#include <nnlens/train/optimizer.hpp>  // adam, sgd

// 1. The network is a type: every shape is checked at compile time.
using LeNet5 = nnlens::Sequential<nnlens::Input<1, 28, 28>,                                  //
                                  nnlens::Conv2D<6, 5, /*stride*/ 1, /*pad*/ 2>, nnlens::ReLU,  //
                                  nnlens::MaxPool2D<2>,                                     //
                                  nnlens::Conv2D<16, 5>, nnlens::ReLU, nnlens::MaxPool2D<2>,  //
                                  nnlens::Flatten, nnlens::Dense<120>, nnlens::ReLU,        //
                                  nnlens::Dense<84>, nnlens::ReLU, nnlens::Dense<10>>;

int main(int argc, char** argv) try {
  const char* dir = argc > 1 ? argv[1] : "/usr/share/datasets/fashion-mnist";
  const std::size_t epochs = argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 3;
  const std::size_t limit = argc > 3 ? std::strtoul(argv[3], nullptr, 10) : 0;
  const double min_accuracy = argc > 4 ? std::atof(argv[4]) : 0.0;

  // 2. Data: images as float [N, 1, 28, 28] in [0, 1], labels as bytes.
  const auto train = nnlens::io::load_mnist(dir, "train", limit);
  const auto test = nnlens::io::load_mnist(dir, "t10k");

  // 3. Seeded initialisation (PyTorch's defaults), Adam, mini-batches of 64 on all cores.
  LeNet5 net;
  nnlens::initialize(net, /*seed*/ 1);
  nnlens::train::adam opt(net, {.lr = 1e-3});
  nnlens::train::fit(nnlens::execution::par, net, opt, train.images, train.labels,
                     {.epochs = epochs, .batch_size = 64, .seed = 1, .progress = true},
                     [&](const nnlens::train::epoch_report& e) {
                       std::printf("epoch %zu: loss %.4f, training accuracy %.2f%% (%.1f s)\n", e.epoch, e.loss,
                                   100 * e.accuracy, e.seconds);
                     });

  // 4. Evaluate on the 10,000 test images and keep the weights.
  const auto ev = nnlens::train::evaluate(nnlens::execution::par, net, test.images, test.labels);
  std::printf("test accuracy %.2f%% (%zu/%zu)\n", 100 * ev.accuracy, ev.correct, ev.samples);
  nnlens::io::save_weights("lenet5.nnlw", net, {{"test_accuracy", std::to_string(ev.accuracy)}});
  const auto again = nnlens::io::load_weights<LeNet5>("lenet5.nnlw");  // e.g. in another program
  (void)again;
  return ev.accuracy >= min_accuracy ? 0 : 1;
} catch (const std::exception& e) {  // nnlens::error and friends: one line, non-zero exit
  std::fprintf(stderr, "train_lenet5: %s\n", e.what());
  return 1;
}
