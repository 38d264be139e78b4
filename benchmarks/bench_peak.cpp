// bench_peak -- this machine's measured fused multiply-add peak, so that the limit a
// kernel is held against is measured rather than assumed.  Each thread runs ACC independent chains of xsimd fma on full
// vectors of the compile-time target (-march=native: AVX-512 here), enough chains to cover the FMA
// latency on every current x86 and ARM core; nothing is loaded or stored inside the loop.
//
//   peak/fma/float/threads:1   GFLOP/s of one core (2 flops per lane per fma)
//   peak/fma/float/threads:2   both cores together (Google Benchmark's threads, real time)
//   peak/fma/double/...        the same in double
//
// A kernel's fraction of the peak is its GFLOP/s over the row with the same thread count
// (docs/benchmarks.md, "The GEMM against the measured peak").
#include <benchmark/benchmark.h>

#include <xsimd/xsimd.hpp>

#include <cstddef>

namespace {

constexpr std::size_t ACC = 12;        // independent accumulator chains per thread
constexpr std::size_t ITER = 1 << 16;  // fma rounds per benchmark iteration

template <class T>
void bm_peak_fma(benchmark::State& st) {
  using B = xsimd::batch<T>;
  // opaque, so the compiler cannot fold the chains: a volatile read.  Not DoNotOptimize(seed): on a
  // floating-point lvalue, Google Benchmark 1.7's "+r,m" constraint lets g++ 12 hand back garbage
  // (denormal or huge seeds, 100-250x slower chains of micro-code assists)
  volatile T seed_source = T(1);
  const T seed = seed_source;
  const B a(seed * T(0.999999)), b(seed * T(1e-7));
  B acc[ACC];
  for (std::size_t k = 0; k < ACC; ++k) acc[k] = B(T(k));
  for (auto _ : st) {
    for (std::size_t i = 0; i < ITER; ++i) {
      for (std::size_t k = 0; k < ACC; ++k) acc[k] = xsimd::fma(acc[k], a, b);
    }
    for (std::size_t k = 0; k < ACC; ++k) benchmark::DoNotOptimize(acc[k]);
  }
  const double flops = 2.0 * double(B::size) * double(ACC) * double(ITER);
  // per thread, averaged over the threads, times every thread's iterations, over the real time: the
  // machine's total rate
  st.counters["GFLOP/s"] = benchmark::Counter(
      flops * 1e-9, benchmark::Counter::Flags(benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kAvgThreads));
  st.counters["lanes"] = benchmark::Counter(double(B::size), benchmark::Counter::kAvgThreads);
}

}  // namespace

BENCHMARK_TEMPLATE(bm_peak_fma, float)->Name("peak/fma/float")->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK_TEMPLATE(bm_peak_fma, double)->Name("peak/fma/double")->Threads(1)->Threads(2)->UseRealTime();

BENCHMARK_MAIN();
