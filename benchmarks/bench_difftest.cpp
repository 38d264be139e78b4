// DFlare on LeNet-5 against its int8 twins (docs/benchmarks.md, section "DFlare").
//
//   dflare/<twin>/<acceptance>/threads:<t>   one DFlare run over the first NNLENS_DFLARE_SEEDS
//                                           (default 200) Fashion-MNIST test images as seeds
//
// f is the project's LeNet-5 (tools/nnlens/lenet5_recipe.hpp) with the weights `nnlens demo`
// caches (NNLENS_MODELS_CACHE/lenet5-fashion-mnist-e12-s1.nnlw); without that file every benchmark
// is skipped with a message (nothing is trained here).  Twins (compress/quantize.hpp):
//   w8    weight-only int8, per-tensor symmetric max|W|/127, tensors of >= 1024 elements (the
//         TFLite rule behind the paper's q8 pairs: quantize_options::dflare_reference())
//   int8  int8 weights (per channel) and int8 activations calibrated on 1,000 training images
// Seeds are raw pixels (0..255); both black boxes divide by 255 before the network.  Budget per
// seed: 10,000 queries and 10 s.  Counters: success (%), queries (mean over successful seeds),
// ms_per_trigger (mean search time of a successful seed, the paper's "time"), wall_ms_per_trigger
// (the whole run's wall clock / triggers found: what the threads buy), cpu_ms_per_trigger (the
// process's CPU time, all threads, / triggers found), skipped (seeds that already trigger).  Issue targets: 100% success, < 30 queries, < 10 ms per triggering input.
//   bench_difftest --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <nnlens/compress/quantize.hpp>
#include <nnlens/difftest/dflare.hpp>
#include <nnlens/io/idx.hpp>
#include <nnlens/io/weights.hpp>
#include <nnlens/nnlens.hpp>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "../tools/nnlens/lenet5_recipe.hpp"
#include "bench_data.hpp"

using namespace nnlens;
using namespace nnlens::difftest;

namespace {

namespace fs = std::filesystem;

using nnlens_bench::env_or;

struct data {
  std::string error;
  demo::LeNet5 net;
  std::vector<float> seeds;  // raw pixels
  std::size_t n = 0;
  std::optional<compress::quantized_network<demo::LeNet5>> w8, i8;
  black_box f, g_w8, g_i8;
};

data& get() {
  static data* d = [] {
    auto* s = new data;
    try {
      const fs::path w = nnlens_bench::demo_lenet5_weights();
      if (!fs::exists(w)) {
        s->error = "no cached LeNet-5 weights (" + w.string() + "): run `nnlens demo` first; nothing is trained here";
        return s;
      }
      s->net = io::load_weights<demo::LeNet5>(w);
      const fs::path dir = nnlens_bench::fashion_dir();
      const auto test = io::load_mnist<float>(dir, "t10k");
      const auto train = io::load_mnist<float>(dir, "train", 1000);
      s->n = std::min<std::size_t>(test.size(), std::size_t(std::atol(env_or("NNLENS_DFLARE_SEEDS", "200").c_str())));
      s->seeds.resize(s->n * 784);
      for (std::size_t i = 0; i < s->seeds.size(); ++i) s->seeds[i] = std::round(test.images.data()[i] * 255.f);
      s->w8.emplace(compress::quantize_weights(s->net, compress::quantize_options::dflare_reference()));
      compress::quantize_options io8;
      s->i8.emplace(compress::quantize(s->net, train.images, io8));
      const auto norm = normalization::divide_by(255);
      s->f = wrap(s->net, "lenet5", norm);
      s->g_w8 = wrap(s->w8->dequantized(), "lenet5-w8", norm);
      const auto* q = &*s->i8;
      s->g_i8 = wrap([q](std::span<const float> x, std::size_t n, std::span<float> p) {
        std::vector<float> xin(x.size());
        for (std::size_t i = 0; i < x.size(); ++i) xin[i] = x[i] / 255.f;
        q->run_int8(n, xin.data(), p.data());
        softmax_rows(p, 10);
      }, 784, 10, "lenet5-int8");
    } catch (const std::exception& e) {
      s->error = e.what();
    }
    return s;
  }();
  return *d;
}

void bm_dflare(benchmark::State& st) {
  auto& d = get();
  if (!d.error.empty()) {
    st.SkipWithError(d.error.c_str());
    return;
  }
  const bool int8 = st.range(0) == 1;
  dflare_options o;
  o.image = {1, 28, 28};
  o.accept = st.range(1) == 0 ? acceptance::paper : acceptance::reference;
  o.selection = st.range(1) == 0 ? selection_rule::paper : selection_rule::reference;
  o.max_queries = 10000;
  o.max_seconds = 10;
  o.seed = 1;
  o.threads = std::size_t(st.range(2));
  dflare_summary s;
  double wall = 0, cpu = 0;
  for (auto _ : st) {
    const auto t0 = std::chrono::steady_clock::now();
    const std::clock_t c0 = std::clock();
    const auto r = o.threads > 1 ? dflare(execution::par, d.f, int8 ? d.g_i8 : d.g_w8, d.seeds, d.n, o)
                                 : dflare(d.f, int8 ? d.g_i8 : d.g_w8, d.seeds, d.n, o);
    wall += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    cpu += double(std::clock() - c0) / CLOCKS_PER_SEC;
    s = r.summary();
  }
  st.counters["seeds"] = double(s.searched);
  st.counters["skipped"] = double(s.already_triggering);
  st.counters["success"] = 100.0 * s.success_rate;
  st.counters["queries"] = s.mean_queries;
  st.counters["ms_per_trigger"] = 1000.0 * s.mean_seconds;
  const double per = s.found ? 1000.0 / double(st.iterations()) / double(s.found) : 0.0;
  st.counters["wall_ms_per_trigger"] = wall * per;
  st.counters["cpu_ms_per_trigger"] = cpu * per;  // process CPU time (all threads): robust on a loaded machine
}

}  // namespace

// args: twin (0 = w8, 1 = int8), rules (0 = paper, 1 = reference), threads
BENCHMARK(bm_dflare)
    ->ArgNames({"int8", "reference", "threads"})
    ->ArgsProduct({{0, 1}, {0, 1}, {1, 2}})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->UseRealTime();

BENCHMARK_MAIN();
