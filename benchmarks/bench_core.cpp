// Core throughput: forward at batch 1 and 256, and one training step, on the two reference
// architectures of the PyTorch comparison (benchmarks/compare_pytorch.py):
//   MLP     784-256x6-10 (ReLU)
//   LeNet-5 Conv(6,5,p2)-ReLU-MaxPool2-Conv(16,5)-ReLU-MaxPool2-Dense120-ReLU-Dense84-ReLU-Dense10
//
// Benchmarks are named <what>/<net>/<batch>.  "forward" is the public checked API
// (nnlens::forward, with the host parallel policy from batch 2 on); "forward_into" the raw,
// allocation-free path on one thread; "forward_int8" the int8 twin (compress::quantize) on one
// thread; "train_step" one SGD step on a mini-batch of 64 (forward,
// softmax cross-entropy, backward, update), as train::fit runs it.  Threads: NNLENS_NUM_THREADS
// (default: all cores).
#include <benchmark/benchmark.h>

#include <nnlens/nnlens.hpp>
#include <nnlens/train/fit.hpp>
#include <nnlens/train/optimizer.hpp>

#include <random>

#include "nets.hpp"

using namespace nnlens;

namespace {

/// Two untimed calls before the timing loop.  Google Benchmark times the first iteration with the
/// rest, and that one is cold (first touch of the result and scratch buffers, pool start-up: 10x a
/// warm step for train_step/lenet5/64).  On a loaded machine its wall time alone can exceed
/// --benchmark_min_time, and the "measurement" was then one cold iteration (seen: 200 instead of
/// 4,500 samples/s).  The PyTorch side (compare_pytorch.py) warms up the same way.
template <class F>
void warm_up(F&& run) {
  run();
  run();
}

template <class Net>
xt::xarray<float> random_batch(std::size_t batch, std::uint64_t seed) {
  std::mt19937_64 r(seed);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  xt::xarray<float> x = xt::xarray<float>::from_shape(Net::input_shape.with_batch(batch));
  for (auto& v : x) v = u(r);
  return x;
}

template <class Net>
void bm_forward(benchmark::State& st) {
  const std::size_t batch = std::size_t(st.range(0));
  Net net;
  initialize(net, 1);
  const auto x = random_batch<Net>(batch, 2);
  const auto run = [&] {
    auto y = batch == 1 ? forward(execution::seq, net, x) : forward(execution::par, net, x);
    benchmark::DoNotOptimize(y.data());
  };
  warm_up(run);
  for (auto _ : st) run();
  st.counters["samples/s"] = benchmark::Counter(double(batch), benchmark::Counter::kIsIterationInvariantRate);
}

template <class Net>
void bm_forward_into(benchmark::State& st) {
  const std::size_t batch = std::size_t(st.range(0));
  Net net;
  initialize(net, 1);
  const auto x = random_batch<Net>(batch, 2);
  std::vector<float> y(batch * Net::output_shape.size());
  std::vector<float> ws(inference_workspace_size(net, batch));
  const auto run = [&] {
    forward_into(net, batch, x.data(), y.data(), std::span<float>(ws));
    benchmark::DoNotOptimize(y.data());
  };
  warm_up(run);
  for (auto _ : st) run();
  st.counters["samples/s"] = benchmark::Counter(double(batch), benchmark::Counter::kIsIterationInvariantRate);
}

/// One SGD (momentum 0.9) step on a mini-batch: forward, softmax cross-entropy, backward, update,
/// the mini-batch split over the pool's threads (exactly what train::fit runs per step).
template <class Net>
void bm_train_step(benchmark::State& st) {
  const std::size_t batch = std::size_t(st.range(0));
  Net net;
  initialize(net, 1);
  const auto x = random_batch<Net>(batch, 3);
  std::vector<std::uint8_t> y(batch);
  for (std::size_t i = 0; i < batch; ++i) y[i] = std::uint8_t(i % 10);
  auto& pool = nnlens::detail::default_pool();
  train::trainer<Net> trainer(net, pool.size(), &pool);
  train::sgd opt(net, {.lr = 0.01, .momentum = 0.9});
  const auto run = [&] {
    auto r = trainer.step(net, opt, x.data(), std::span<const std::uint8_t>(y), nullptr);
    benchmark::DoNotOptimize(r.loss);
  };
  warm_up(run);
  for (auto _ : st) run();
  st.counters["samples/s"] = benchmark::Counter(double(batch), benchmark::Counter::kIsIterationInvariantRate);
}

/// The int8 twin (compress::quantize: int8 weights per channel, int8 activations calibrated on
/// 256 random inputs) run on int8 codes, one thread: kernels::gemm_s8 and the requantisation.
template <class Net>
void bm_forward_int8(benchmark::State& st) {
  const std::size_t batch = std::size_t(st.range(0));
  Net net;
  initialize(net, 1);
  const auto q = compress::quantize(net, random_batch<Net>(256, 4));
  const auto x = random_batch<Net>(batch, 2);
  std::vector<float> y(batch * Net::output_shape.size());
  const auto run = [&] {
    q.run_int8(batch, x.data(), y.data());
    benchmark::DoNotOptimize(y.data());
  };
  warm_up(run);
  for (auto _ : st) run();
  st.counters["samples/s"] = benchmark::Counter(double(batch), benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace

BENCHMARK_TEMPLATE(bm_forward, bench::MLP)->Name("forward/mlp")->Arg(1)->Arg(256)->UseRealTime();
BENCHMARK_TEMPLATE(bm_forward_into, bench::MLP)->Name("forward_into/mlp")->Arg(1)->Arg(256)->UseRealTime();
BENCHMARK_TEMPLATE(bm_train_step, bench::MLP)->Name("train_step/mlp")->Arg(64)->UseRealTime();
BENCHMARK_TEMPLATE(bm_forward_int8, bench::MLP)->Name("forward_int8/mlp")->Arg(1)->Arg(256)->UseRealTime();
#if NNLENS_BENCH_HAS_LENET
BENCHMARK_TEMPLATE(bm_forward, bench::LeNet5)->Name("forward/lenet5")->Arg(1)->Arg(256)->UseRealTime();
BENCHMARK_TEMPLATE(bm_forward_into, bench::LeNet5)->Name("forward_into/lenet5")->Arg(1)->Arg(256)->UseRealTime();
BENCHMARK_TEMPLATE(bm_train_step, bench::LeNet5)->Name("train_step/lenet5")->Arg(64)->UseRealTime();
BENCHMARK_TEMPLATE(bm_forward_int8, bench::LeNet5)->Name("forward_int8/lenet5")->Arg(1)->Arg(256)->UseRealTime();
#endif

BENCHMARK_MAIN();
