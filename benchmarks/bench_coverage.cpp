// DeepImportance throughput (docs/benchmarks.md, section "Coverage").
//
//   idc/prepare/<policy>       prepare_idc on the 60,000 Fashion-MNIST training images: forward,
//                              LRP from the predicted logit down to the subject layer (LeNet-5's
//                              ReLU after Dense<84>), relevance totals over T', clustering of the
//                              m = 6 important neurons (exact 1-D k-means, k in {2,3,4} by
//                              silhouette)
//   idc/prepare_conv/<policy>  the same with the second conv block as subject layer (16 channels):
//                              LRP goes through Dense<120>, Dense<84> and the flatten
//   idc/measure/<policy>       measure() of the 10,000 test images (a fresh covered set each time)
//   lrp/input/<policy>         relevance() down to the pixels of 1,000 test images (αβ rule, as
//                              for the RQ1/RQ2 perturbations)
// The LeNet-5 is the project's (tools/nnlens/lenet5_recipe.hpp) with the weights `nnlens demo`
// caches (NNLENS_MODELS_CACHE/lenet5-fashion-mnist-e12-s1.nnlw); without that file it is
// initialised with seed 1 (label "untrained").  Threads: NNLENS_NUM_THREADS, read once when the
// pool is first used, so run once per count:
//   NNLENS_NUM_THREADS=1 bench_coverage --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
//   NNLENS_NUM_THREADS=2 bench_coverage --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <nnlens/coverage.hpp>
#include <nnlens/io/idx.hpp>
#include <nnlens/io/weights.hpp>
#include <nnlens/nnlens.hpp>

#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>

#include "../tools/nnlens/lenet5_recipe.hpp"
#include "bench_data.hpp"

using namespace nnlens;

namespace {

namespace fs = std::filesystem;

using nnlens_bench::env_or;

struct data {
  std::string error;
  bool trained = false;
  io::labelled_images<float> train, test;
  xt::xarray<float> test1k;
  demo::LeNet5 net;
  idc prepared;
};

data& get() {
  static data* d = [] {
    auto* s = new data;
    try {
      const fs::path dir = nnlens_bench::fashion_dir();
      s->train = io::load_mnist<float>(dir, "train");
      s->test = io::load_mnist<float>(dir, "t10k");
      s->test1k = xt::xarray<float>::from_shape({1000, 1, 28, 28});
      std::copy_n(s->test.images.data(), s->test1k.size(), s->test1k.data());
      s->trained = nnlens_bench::load_demo_lenet5(s->net);
      s->prepared = prepare_idc(execution::par, s->net, s->train.images, s->train.labels);
    } catch (const std::exception& e) {
      s->error = e.what();
    }
    return s;
  }();
  return *d;
}

void finish(benchmark::State& st, const data& d, double samples) {
  st.counters["samples/s"] = benchmark::Counter(samples, benchmark::Counter::kIsRate);
  st.counters["threads"] = double(detail::default_pool().size());
  if (!d.trained) st.SetLabel("untrained (no cached weights)");
}

template <class Policy>
void bm_prepare(benchmark::State& st, Policy pol, bool conv) {
  auto& d = get();
  if (!d.error.empty()) return st.SkipWithError(d.error.c_str());
  idc_options o;
  if (conv) o.layer = 4;  // the ReLU after the second Conv2D: 16 channels
  double n = 0;
  for (auto _ : st) {
    const idc c = prepare_idc(pol, d.net, d.train.images, d.train.labels, o);
    benchmark::DoNotOptimize(c.incc_size());
    n += double(d.train.size());
  }
  finish(st, d, n);
}

template <class Policy>
void bm_measure(benchmark::State& st, Policy pol) {
  auto& d = get();
  if (!d.error.empty()) return st.SkipWithError(d.error.c_str());
  double n = 0;
  for (auto _ : st) {
    idc c = d.prepared;
    c.reset();
    const auto r = measure(pol, d.net, d.test.images, c);
    benchmark::DoNotOptimize(r.percent);
    n += double(d.test.size());
  }
  st.counters["IDC %"] = d.prepared.incc_size() > 0 ? [&] {
    idc c = d.prepared;
    return measure(pol, d.net, d.test.images, c).percent;
  }() : 0.0;
  finish(st, d, n);
}

template <class Policy>
void bm_lrp_input(benchmark::State& st, Policy pol) {
  auto& d = get();
  if (!d.error.empty()) return st.SkipWithError(d.error.c_str());
  lrp_options o;
  o.rule = lrp_rule::alpha_beta;
  double n = 0;
  for (auto _ : st) {
    const auto R = relevance(pol, d.net, d.test1k, lrp_input, o);
    benchmark::DoNotOptimize(R.data());
    n += 1000;
  }
  finish(st, d, n);
}

}  // namespace

BENCHMARK_CAPTURE(bm_prepare, idc / prepare / seq, execution::seq, false)->Unit(benchmark::kSecond)->UseRealTime()->Iterations(1);
BENCHMARK_CAPTURE(bm_prepare, idc / prepare / par, execution::par, false)->Unit(benchmark::kSecond)->UseRealTime()->Iterations(1);
BENCHMARK_CAPTURE(bm_prepare, idc / prepare_conv / seq, execution::seq, true)->Unit(benchmark::kSecond)->UseRealTime()->Iterations(1);
BENCHMARK_CAPTURE(bm_prepare, idc / prepare_conv / par, execution::par, true)->Unit(benchmark::kSecond)->UseRealTime()->Iterations(1);
BENCHMARK_CAPTURE(bm_measure, idc / measure / seq, execution::seq)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(bm_measure, idc / measure / par, execution::par)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(bm_lrp_input, lrp / input / seq, execution::seq)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(bm_lrp_input, lrp / input / par, execution::par)->Unit(benchmark::kMillisecond)->UseRealTime();

BENCHMARK_MAIN();
