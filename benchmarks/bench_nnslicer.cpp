// NNSlicer throughput (docs/benchmarks.md, section "NNSlicer").
//
//   lenet5/<grain>/seq        one slice per iteration: nnslicer(execution::seq, ...) on one
//                             Fashion-MNIST test image (cycling through 256), criterion = the
//                             predicted class (the paper's per-sample criterion, Table 3)
//   lenet5/<grain>/par256     nnslicer(execution::par, ...) on 256 test images at once (the
//                             summed table; one engine per pool thread, then merged)
//   resnet/<grain>/seq|par256 the same on a small residual network, built here and initialised
//                             with seed 1: Input<1,28,28>, Conv2D<8,3,1,1>, ReLU,
//                             Residual<Block<Conv2D<8,3,1,1>, ReLU, Conv2D<8,3,1,1>>>, ReLU,
//                             MaxPool2D<2>, Flatten, Dense<10> (its profile: 5,000 training images)
//       grain = channel (the default: a conv channel is one neuron) | element
//   profile/lenet5/<seq|par>  profile_network over the 60,000 training images (channel grain)
//
// The LeNet-5 is the project's (tools/nnlens/lenet5_recipe.hpp) with the weights `nnlens demo`
// caches (NNLENS_MODELS_CACHE/lenet5-fashion-mnist-e12-s1.nnlw); without that file it is
// initialised with seed 1 (the label says "untrained").  Profiles are computed once, outside the
// timing.  Counters: samples/s (wall clock: every benchmark uses real time), s/sample, threads.
// Threads: NNLENS_NUM_THREADS, read once when the pool is first used, so run once per count:
//   NNLENS_NUM_THREADS=1 bench_nnslicer --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//   NNLENS_NUM_THREADS=2 bench_nnslicer --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
// Data: NNLENS_FASHION_DIR and NNLENS_MODELS_CACHE (compile-time; environment variables of the
// same names override them).  Missing Fashion-MNIST skips the benchmarks with a message.
#include <benchmark/benchmark.h>

#include <nnlens/io/idx.hpp>
#include <nnlens/io/weights.hpp>
#include <nnlens/nnlens.hpp>
#include <nnlens/nnslicer/nnslicer.hpp>
#include <nnlens/nnslicer/profile.hpp>

#include <cstdlib>
#include <exception>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "../tools/nnlens/lenet5_recipe.hpp"
#include "bench_data.hpp"

using namespace nnlens;

namespace {

namespace fs = std::filesystem;

using nnlens_bench::env_or;

using LeNet5 = demo::LeNet5;
using ResNet = Sequential<Input<1, 28, 28>, Conv2D<8, 3, 1, 1>, ReLU,
                          Residual<Block<Conv2D<8, 3, 1, 1>, ReLU, Conv2D<8, 3, 1, 1>>>, ReLU, MaxPool2D<2>, Flatten,
                          Dense<10>>;

struct data {
  std::string error;
  bool trained = false;
  io::labelled_images<float> train;
  xt::xarray<float> batch;                 // 256 test images
  std::vector<xt::xarray<float>> singles;  // the same, one per array [1, 1, 28, 28]
  LeNet5 lenet;
  ResNet resnet;
  std::unique_ptr<profile> lenet_prof[2], resnet_prof[2];  // [grain]
};

data& get() {
  static data* d = [] {
    auto* s = new data;
    try {
      const fs::path dir = nnlens_bench::fashion_dir();
      s->train = io::load_mnist<float>(dir, "train");
      const auto test = io::load_mnist<float>(dir, "t10k", 256);
      s->batch = test.images;
      for (std::size_t i = 0; i < 256; ++i) {
        auto x = xt::xarray<float>::from_shape({1, 1, 28, 28});
        std::copy_n(test.images.data() + i * 784, 784, x.data());
        s->singles.push_back(std::move(x));
      }
      s->trained = nnlens_bench::load_demo_lenet5(s->lenet);
      initialize(s->resnet, 1);
      auto sub = xt::xarray<float>::from_shape({5000, 1, 28, 28});
      std::copy_n(s->train.images.data(), sub.size(), sub.data());
      for (int g = 0; g < 2; ++g) {
        const granularity gr = g ? granularity::element : granularity::channel;
        s->lenet_prof[g] = std::make_unique<profile>(profile_network(execution::par, s->lenet, s->train.images, {.grain = gr}));
        s->resnet_prof[g] = std::make_unique<profile>(profile_network(execution::par, s->resnet, sub, {.grain = gr}));
      }
    } catch (const std::exception& e) {
      s->error = e.what();
    }
    return s;
  }();
  return *d;
}

void counters(benchmark::State& st, double samples) {
  st.counters["samples/s"] = benchmark::Counter(samples, benchmark::Counter::kIsRate);
  st.counters["s/sample"] = benchmark::Counter(samples, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  st.counters["threads"] = double(detail::default_pool().size());
}

template <class Net>
void bm_slice(benchmark::State& st, bool resnet, int grain, bool par) {
  auto& d = get();
  if (!d.error.empty()) {
    st.SkipWithError(d.error.c_str());
    return;
  }
  const Net* net;
  const profile* p;
  if constexpr (std::is_same_v<Net, LeNet5>) {
    net = &d.lenet, p = d.lenet_prof[grain].get();
  } else {
    net = &d.resnet, p = d.resnet_prof[grain].get();
  }
  (void)resnet;
  (void)detail::default_pool();
  double samples = 0;
  std::size_t i = 0;
  for (auto _ : st) {
    if (par) {
      const auto t = nnslicer(execution::par, *net, *p, d.batch, criterion::predicted());
      benchmark::DoNotOptimize(t.synapses.data());
      samples += 256;
    } else {
      const auto t = nnslicer(execution::seq, *net, *p, d.singles[i++ % 256], criterion::predicted());
      benchmark::DoNotOptimize(t.synapses.data());
      samples += 1;
    }
  }
  counters(st, samples);
  if constexpr (std::is_same_v<Net, LeNet5>)
    if (!d.trained) st.SetLabel("untrained (no cached weights)");
}

void bm_profile(benchmark::State& st, bool par) {
  auto& d = get();
  if (!d.error.empty()) {
    st.SkipWithError(d.error.c_str());
    return;
  }
  (void)detail::default_pool();
  double samples = 0;
  for (auto _ : st) {
    const auto p = par ? profile_network(execution::par, d.lenet, d.train.images)
                       : profile_network(execution::seq, d.lenet, d.train.images);
    benchmark::DoNotOptimize(p.sums.data());
    samples += double(d.train.size());
  }
  counters(st, samples);
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  for (int g = 0; g < 2; ++g) {
    const std::string gn = g ? "element" : "channel";
    for (bool par : {false, true}) {
      const std::string m = par ? "/par256" : "/seq";
      benchmark::RegisterBenchmark(("lenet5/" + gn + m).c_str(), [g, par](benchmark::State& st) { bm_slice<LeNet5>(st, false, g, par); })
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
      benchmark::RegisterBenchmark(("resnet/" + gn + m).c_str(), [g, par](benchmark::State& st) { bm_slice<ResNet>(st, true, g, par); })
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
  for (bool par : {false, true})
    benchmark::RegisterBenchmark(par ? "profile/lenet5/par" : "profile/lenet5/seq", [par](benchmark::State& st) { bm_profile(st, par); })
        ->UseRealTime()
        ->Iterations(1)
        ->Unit(benchmark::kMillisecond);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
