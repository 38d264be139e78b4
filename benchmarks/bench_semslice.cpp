// NeuSemSlice throughput (docs/benchmarks.md, section "NeuSemSlice").
//
//   metric/<avg|var|ens|taylor|deeplift>   category_neuron_scores over the 60,000 Fashion-MNIST
//                                          training images (every category's D_c, all of it: the
//                                          paper's "time per metric", 5.4-30.9 s on MNIST with GPUs)
//   slice/taylor/full                      semslice(): Taylor on all 60,000 images, the centred CKA
//                                          scan (m = 500 per category, full maps, Theta 0.95), the
//                                          union: one complete semantic slice of LeNet-5
//   slice/taylor/m1000                     the same with metric_samples = 1000 per category (the
//                                          examples' setting)
//
// The LeNet-5 is the project's (tools/nnlens/lenet5_recipe.hpp) with the weights `nnlens demo`
// caches (NNLENS_MODELS_CACHE/lenet5-fashion-mnist-e12-s1.nnlw); without that file it is
// initialised with seed 1 (the label says "untrained").  Counters: images/s, threads.
// Threads: NNLENS_NUM_THREADS, read once when the pool is first used, so run once per count:
//   NNLENS_NUM_THREADS=1 bench_semslice --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
//   NNLENS_NUM_THREADS=2 bench_semslice --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
// Data: NNLENS_FASHION_DIR and NNLENS_MODELS_CACHE (compile-time; environment variables of the
// same names override them).  Missing Fashion-MNIST skips the benchmarks with a message.
#include <benchmark/benchmark.h>

#include <nnlens/io/idx.hpp>
#include <nnlens/io/weights.hpp>
#include <nnlens/nnlens.hpp>
#include <nnlens/neusemslice/semslice.hpp>

#include <cstdlib>
#include <exception>
#include <filesystem>
#include <numeric>
#include <string>
#include <vector>

#include "../tools/nnlens/lenet5_recipe.hpp"
#include "bench_data.hpp"

using namespace nnlens;

namespace {

namespace fs = std::filesystem;

using nnlens_bench::env_or;

struct data {
  std::string error;
  bool trained = false;
  io::labelled_images<float> train;
  demo::LeNet5 lenet;
};

data& get() {
  static data* d = [] {
    auto* s = new data;
    try {
      s->train = io::load_mnist<float>(nnlens_bench::fashion_dir(), "train");
      s->trained = nnlens_bench::load_demo_lenet5(s->lenet);
    } catch (const std::exception& e) {
      s->error = e.what();
    }
    return s;
  }();
  return *d;
}

void counters(benchmark::State& st, double images) {
  st.counters["images/s"] = benchmark::Counter(images, benchmark::Counter::kIsRate);
  st.counters["threads"] = double(detail::default_pool().size());
  if (!get().trained) st.SetLabel("untrained LeNet-5");
}

void bm_metric(benchmark::State& st, metric mt) {
  auto& d = get();
  if (!d.error.empty()) {
    st.SkipWithError(d.error.c_str());
    return;
  }
  std::vector<std::size_t> cats(10);
  std::iota(cats.begin(), cats.end(), std::size_t(0));
  double n = 0;
  for (auto _ : st) {
    const auto s = category_neuron_scores(execution::par, d.lenet, d.train.images, d.train.labels, mt, cats);
    benchmark::DoNotOptimize(s.data());
    n += double(d.train.size());
  }
  counters(st, n);
}

void bm_slice(benchmark::State& st, std::size_t metric_samples) {
  auto& d = get();
  if (!d.error.empty()) {
    st.SkipWithError(d.error.c_str());
    return;
  }
  semslice_options o;
  o.metric = metric::taylor;
  o.metric_samples = metric_samples;
  double n = 0;
  std::size_t kept = 0;
  for (auto _ : st) {
    const auto r = semslice(execution::par, d.lenet, d.train.images, d.train.labels, o);
    kept = 0;
    for (std::size_t u = 0; u < r.mask.keep.size(); ++u) kept += r.mask.kept(u);
    benchmark::DoNotOptimize(kept);
    n += double(d.train.size());
  }
  counters(st, n);
  st.counters["kept neurons"] = double(kept);
}

const int registered = [] {
  for (metric m : {metric::avg, metric::var, metric::ens, metric::taylor, metric::deeplift})
    benchmark::RegisterBenchmark((std::string("metric/") + to_string(m)).c_str(), bm_metric, m)
        ->Unit(benchmark::kSecond)->UseRealTime()->Iterations(1);
  benchmark::RegisterBenchmark("slice/taylor/full", bm_slice, std::size_t(0))->Unit(benchmark::kSecond)->UseRealTime()->Iterations(1);
  benchmark::RegisterBenchmark("slice/taylor/m1000", bm_slice, std::size_t(1000))->Unit(benchmark::kSecond)->UseRealTime()->Iterations(1);
  return 0;
}();

}  // namespace

BENCHMARK_MAIN();
