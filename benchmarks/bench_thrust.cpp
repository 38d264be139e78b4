// The thrust backend against the host policies (docs/scale.md, sections "Thrust backend" and
// "GPU check").  Built twice: by g++ (bench_thrust: the OMP device system) and by nvcc
// (bench_thrust_cuda, benchmarks/bench_thrust.cu: the CUDA device system, scripts/gpu-check).
//
//   forward/lenet5/<policy>/<batch>   forward of LeNet-5 (Input<1,28,28> ... Dense<10>, seed 1) on
//                                     `batch` random images, batch 1 ... 16,384
//   forward/mlp/<policy>/<batch>      the same for benchmarks/nets.hpp's MLP (784, 6 x 256, 10)
//   profile/lenet5/<policy>           profile_network (channel grain) over 60,000 random images
//   idc/prepare/lenet5/<policy>       prepare_idc (m = 6, subject layer: the ReLU after Dense<84>)
//                                     on 60,000 Fashion-MNIST images: the 10,000 test images
//                                     (NNLENS_FASHION_DIR/t10k-*) six times over, with their labels
//       policy = seq (one host thread) | par (the host pool: NNLENS_NUM_THREADS) |
//                thrust1 / thrust2 (g++: execution::thrust with 1 / 2 OpenMP threads) |
//                cuda (nvcc: execution::thrust on the GPU)
// Images for forward and profiling: uniform [0, 1) (the kernels' cost does not depend on the
// values).  Counters: samples/s and s/sample (wall clock).
//
// Every row makes one untimed call of the same work before its timed loop (on a smaller input
// for profiling and IDC): the first call at a new size grows the host's per-thread workspace and
// page-faults it in (on the 2-core VM ~15 us per fault, 10 faults per LeNet-5 image: a first
// forward call costs 8-10x a later one), and on the GPU it creates the CUDA context.  Google
// Benchmark runs a slow row for one iteration only, so without the warm-up call that first call
// was the whole measurement (docs/scale.md: "the batch-4096 cliff").
//
// Run: NNLENS_NUM_THREADS=2 OMP_WAIT_POLICY=passive bin/benchmarks/bench_thrust
//      --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <exception>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <xtensor/xview.hpp>

#include <nnlens/coverage/idc.hpp>
#include <nnlens/io/idx.hpp>
#include <nnlens/layers/all.hpp>
#include <nnlens/network/forward.hpp>
#include <nnlens/network/parameters.hpp>
#include <nnlens/nnslicer/profile.hpp>
#include <nnlens/thrust/coverage.hpp>
#include <nnlens/thrust/forward.hpp>
#include <nnlens/thrust/profile.hpp>

#include "cuda_device.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif

#ifndef NNLENS_FASHION_DIR
#define NNLENS_FASHION_DIR "/usr/share/datasets/fashion-mnist"
#endif

using namespace nnlens;

namespace {

using LeNet5 = Sequential<Input<1, 28, 28>, Conv2D<6, 5, 1, 2>, ReLU, MaxPool2D<2>, Conv2D<16, 5>, ReLU, MaxPool2D<2>,
                          Flatten, Dense<120>, ReLU, Dense<84>, ReLU, Dense<10>>;
using MLP = Sequential<Input<784>, Dense<256>, ReLU, Dense<256>, ReLU, Dense<256>, ReLU, Dense<256>, ReLU, Dense<256>,
                       ReLU, Dense<256>, ReLU, Dense<10>>;

enum pol { seq, par, thrust1, thrust2, gpu };  // gpu: the nvcc build's execution::thrust

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

/// f(policy) with the policy `p` names.
template <class F>
decltype(auto) with_policy(pol p, F&& f) {
  if (p == seq) return f(execution::seq);
  if (p == par) return f(execution::par);
  return f(execution::thrust);
}

/// Skips a device row (with the reason) when the device cannot run; true if it did.
bool skip_without_device(benchmark::State& st, pol p) {
  if (p == seq || p == par || nnlens_bench::device_unavailable().empty()) return false;
  st.SkipWithError(nnlens_bench::device_unavailable().c_str());
  return true;
}

void per_sample(benchmark::State& st, double samples) {
  st.counters["samples/s"] = benchmark::Counter(samples * double(st.iterations()), benchmark::Counter::kIsRate);
  st.counters["s/sample"] = benchmark::Counter(samples * double(st.iterations()),
                                               benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

template <class Net>
void bm_forward(benchmark::State& st, pol p) {
  if (skip_without_device(st, p)) return;
  const std::size_t batch = std::size_t(st.range(0));
  const auto x = images(batch, Net::input_shape);
  set_threads(p);
  auto run = [&] { return with_policy(p, [&](const auto& pol) { return forward(pol, net<Net>(), x); }); };
  benchmark::DoNotOptimize(run().data());  // warm-up, untimed (see the header)
  for (auto _ : st) {
    xt::xarray<float> y = run();
    benchmark::DoNotOptimize(y.data());
  }
  per_sample(st, double(batch));
}

const xt::xarray<float>& images60k() {
  static const auto x = images(60000, LeNet5::input_shape);
  return x;
}

void bm_profile(benchmark::State& st, pol p) {
  if (skip_without_device(st, p)) return;
  const auto& x = images60k();
  set_threads(p);
  auto run = [&](const xt::xarray<float>& X) {
    return with_policy(p, [&](const auto& pol) { return profile_network(pol, net<LeNet5>(), X); });
  };
  benchmark::DoNotOptimize(run(xt::xarray<float>(xt::view(x, xt::range(0, 4096)))).sums.data());  // warm-up
  for (auto _ : st) {
    profile r = run(x);
    benchmark::DoNotOptimize(r.sums.data());
  }
  per_sample(st, 60000.0);
}

/// 60,000 Fashion-MNIST images and labels: the 10,000 test images six times over.
struct fashion {
  std::string error;
  xt::xarray<float> images;
  std::vector<std::uint8_t> labels;
};

const fashion& fashion60k() {
  static const fashion f = [] {
    fashion r;
    try {
      const char* env = std::getenv("NNLENS_FASHION_DIR");
      const auto t = io::load_mnist<float>(env ? env : NNLENS_FASHION_DIR, "t10k");
      const std::size_t n = t.size(), each = t.images.size() / n, copies = 6;
      r.images = xt::xarray<float>::from_shape({copies * n, 1, 28, 28});
      for (std::size_t c = 0; c < copies; ++c) {
        std::copy_n(t.images.data(), n * each, r.images.data() + c * n * each);
        r.labels.insert(r.labels.end(), t.labels.begin(), t.labels.end());
      }
    } catch (const std::exception& e) {
      r.error = e.what();
    }
    return r;
  }();
  return f;
}

void bm_idc(benchmark::State& st, pol p) {
  const auto& d = fashion60k();
  if (!d.error.empty()) return st.SkipWithError(d.error.c_str());
  if (skip_without_device(st, p)) return;
  set_threads(p);
  auto run = [&](const xt::xarray<float>& X, const std::vector<std::uint8_t>& y) {
    return with_policy(p, [&](const auto& pol) { return prepare_idc(pol, net<LeNet5>(), X, y); });
  };
  {  // warm-up on the first 4,096 images, untimed
    const xt::xarray<float> X = xt::view(d.images, xt::range(0, 4096));
    const std::vector<std::uint8_t> y(d.labels.begin(), d.labels.begin() + 4096);
    benchmark::DoNotOptimize(run(X, y).incc_size());
  }
  for (auto _ : st) {
    const idc c = run(d.images, d.labels);
    benchmark::DoNotOptimize(c.incc_size());
  }
  per_sample(st, double(d.labels.size()));
}

void bm_forward_lenet5(benchmark::State& st, pol p) { bm_forward<LeNet5>(st, p); }
void bm_forward_mlp(benchmark::State& st, pol p) { bm_forward<MLP>(st, p); }

void batches(benchmark::internal::Benchmark* b) {
  for (int n : {1, 4, 16, 64, 256, 1024, 4096}) b->Arg(n);
  b->UseRealTime()->Unit(benchmark::kMillisecond);
}
// LeNet-5 also at 2,048 ... 16,384: per-sample time stays flat above 256 (docs/scale.md)
void lenet_batches(benchmark::internal::Benchmark* b) {
  for (int n : {1, 4, 16, 64, 256, 1024, 2048, 4096, 8192, 16384}) b->Arg(n);
  b->UseRealTime()->Unit(benchmark::kMillisecond);
}
void once(benchmark::internal::Benchmark* b) { b->Iterations(1)->UseRealTime()->Unit(benchmark::kMillisecond); }

/// One row a back-end: seq and par, then the GPU (nvcc) or thrust on 1 and 2 OpenMP threads (g++;
/// the MLP on 2 only), each named <function>/<row>/<policy> as BENCHMARK_CAPTURE(function, row/policy)
/// would, registered in this order (as the BENCHMARK_CAPTURE lines were).
struct backend {
  const char* name;
  pol p;
};
#if defined(__CUDACC__)
const std::vector<backend> backends{{"seq", seq}, {"par", par}, {"cuda", gpu}};
const std::vector<backend> mlp_backends = backends;
#else
const std::vector<backend> backends{{"seq", seq}, {"par", par}, {"thrust1", thrust1}, {"thrust2", thrust2}};
const std::vector<backend> mlp_backends{{"seq", seq}, {"par", par}, {"thrust2", thrust2}};
#endif

void add_rows(const std::string& row, void (*fn)(benchmark::State&, pol), const std::vector<backend>& bs,
              void (*apply)(benchmark::internal::Benchmark*)) {
  for (const auto& b : bs) benchmark::RegisterBenchmark((row + "/" + b.name).c_str(), fn, b.p)->Apply(apply);
}

[[maybe_unused]] const bool registered = [] {
  add_rows("bm_forward_lenet5/lenet5", bm_forward_lenet5, backends, lenet_batches);
  add_rows("bm_forward_mlp/mlp", bm_forward_mlp, mlp_backends, batches);
  add_rows("bm_profile/profile/lenet5", bm_profile, backends, once);
  add_rows("bm_idc/idc/prepare/lenet5", bm_idc, backends, once);
  return true;
}();

}  // namespace

BENCHMARK_MAIN();
