// The thrust backend against the host policies (docs/scale.md, section "Thrust backend").
//
//   forward/lenet5/<policy>/<batch>   forward of LeNet-5 (Input<1,28,28> ... Dense<10>, seed 1) on
//                                     `batch` random images, batch 1 ... 4096
//   forward/mlp/<policy>/<batch>      the same for benchmarks/nets.hpp's MLP (784, 6 x 256, 10)
//   profile/lenet5/<policy>           profile_network (channel grain) over 60,000 images
//       policy = seq (one host thread) | par (the host pool: NNLENS_NUM_THREADS) |
//                thrust1 / thrust2 (execution::thrust with 1 / 2 OpenMP threads)
// Images: uniform [0, 1) (the kernels' cost does not depend on the values).  Counter: samples/s
// (wall clock).  Run: NNLENS_NUM_THREADS=2 bin/benchmarks/bench_thrust --benchmark_repetitions=3
//      --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <random>

#include <nnlens/layers/all.hpp>
#include <nnlens/network/forward.hpp>
#include <nnlens/network/parameters.hpp>
#include <nnlens/slicing/profile.hpp>
#include <nnlens/thrust/forward.hpp>
#include <nnlens/thrust/profile.hpp>

#if defined(_OPENMP)
#include <omp.h>
#endif

using namespace nnlens;

namespace {

using LeNet5 = Sequential<Input<1, 28, 28>, Conv2D<6, 5, 1, 2>, ReLU, MaxPool2D<2>, Conv2D<16, 5>, ReLU, MaxPool2D<2>,
                          Flatten, Dense<120>, ReLU, Dense<84>, ReLU, Dense<10>>;
using MLP = Sequential<Input<784>, Dense<256>, ReLU, Dense<256>, ReLU, Dense<256>, ReLU, Dense<256>, ReLU, Dense<256>,
                       ReLU, Dense<256>, ReLU, Dense<10>>;

enum pol { seq, par, thrust1, thrust2 };

template <class Net>
const Net& net() {
  static const Net n = [] {
    Net r;
    initialize(r, 1);
    return r;
  }();
  return n;
}

xt::xarray<float> images(std::size_t n, shape s) {
  xt::xarray<float> x = xt::xarray<float>::from_shape(s.with_batch(n));
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<float> u(0, 1);
  for (auto& v : x) v = u(rng);
  return x;
}

void set_threads([[maybe_unused]] pol p) {
#if defined(_OPENMP)
  omp_set_num_threads(p == thrust1 ? 1 : 2);
#endif
}

template <class Net>
void bm_forward(benchmark::State& st, pol p) {
  const std::size_t batch = std::size_t(st.range(0));
  const auto x = images(batch, Net::input_shape);
  set_threads(p);
  for (auto _ : st) {
    xt::xarray<float> y;
    if (p == seq) y = forward(execution::seq, net<Net>(), x);
    else if (p == par) y = forward(execution::par, net<Net>(), x);
    else y = forward(execution::thrust, net<Net>(), x);
    benchmark::DoNotOptimize(y.data());
  }
  st.counters["samples/s"] = benchmark::Counter(double(batch) * double(st.iterations()), benchmark::Counter::kIsRate);
}

void bm_profile(benchmark::State& st, pol p) {
  static const auto x = images(60000, LeNet5::input_shape);
  set_threads(p);
  for (auto _ : st) {
    profile r;
    if (p == seq) r = profile_network(execution::seq, net<LeNet5>(), x);
    else if (p == par) r = profile_network(execution::par, net<LeNet5>(), x);
    else r = profile_network(execution::thrust, net<LeNet5>(), x);
    benchmark::DoNotOptimize(r.sums.data());
  }
  st.counters["samples/s"] = benchmark::Counter(60000.0 * double(st.iterations()), benchmark::Counter::kIsRate);
}

void bm_forward_lenet5(benchmark::State& st, pol p) { bm_forward<LeNet5>(st, p); }
void bm_forward_mlp(benchmark::State& st, pol p) { bm_forward<MLP>(st, p); }

void batches(benchmark::internal::Benchmark* b) {
  for (int n : {1, 4, 16, 64, 256, 1024, 4096}) b->Arg(n);
  b->UseRealTime()->Unit(benchmark::kMillisecond);
}

}  // namespace

BENCHMARK_CAPTURE(bm_forward_lenet5, lenet5/seq, seq)->Apply(batches);
BENCHMARK_CAPTURE(bm_forward_lenet5, lenet5/par, par)->Apply(batches);
BENCHMARK_CAPTURE(bm_forward_lenet5, lenet5/thrust1, thrust1)->Apply(batches);
BENCHMARK_CAPTURE(bm_forward_lenet5, lenet5/thrust2, thrust2)->Apply(batches);
BENCHMARK_CAPTURE(bm_forward_mlp, mlp/seq, seq)->Apply(batches);
BENCHMARK_CAPTURE(bm_forward_mlp, mlp/par, par)->Apply(batches);
BENCHMARK_CAPTURE(bm_forward_mlp, mlp/thrust2, thrust2)->Apply(batches);
BENCHMARK_CAPTURE(bm_profile, profile/lenet5/seq, seq)->Iterations(1)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(bm_profile, profile/lenet5/par, par)->Iterations(1)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(bm_profile, profile/lenet5/thrust1, thrust1)->Iterations(1)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(bm_profile, profile/lenet5/thrust2, thrust2)->Iterations(1)->UseRealTime()->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
