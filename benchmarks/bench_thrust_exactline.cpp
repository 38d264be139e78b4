// ExactLine over many segments: the host policies against the thrust backend (OMP device system)
// (docs/scale.md, section "Thrust backend").
//
//   exactline/acasxu/<policy>/<segments>   exact_lines on ACASXU_run2a_1_1 (.nnet read with every
//                                          fold off: 6 x 50 ReLU, normalised units, double), the
//                                          first `segments` of 10,000 fixed segments
//       policy = seq (one host thread) | par (the host pool: NNLENS_NUM_THREADS threads) |
//                thrust (execution::thrust: the default policy.batch, 256 on CPU systems, hence
//                passes of 32 segments; OMP_NUM_THREADS threads) |
//                thrust_b<S> (passes of S segments: policy.batch = 8 S)
// Segments: both endpoints uniform in the normalised input box [(min - mean) / range,
// (max - mean) / range] per input, std::mt19937_64 seeded 2026 (A[i], then B[i], for i = 0, 1, ...).
// Counters: segments/s (wall clock), pieces/segment.
// Run quietly: OMP_WAIT_POLICY=passive OMP_NUM_THREADS=1 NNLENS_NUM_THREADS=1 (then 2 and 2)
//      bin/benchmarks/bench_thrust_exactline --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <nnlens/exactline/line.hpp>
#include <nnlens/io/nnet.hpp>
#include <nnlens/thrust/exactline.hpp>

using namespace nnlens;

namespace {

using rows = std::vector<std::vector<double>>;

struct data {
  io::basic_nnet_model<double> model;
  rows A, B;
};

const data& acas() {
  static const data d = [] {
    data r;
    io::nnet_options o;
    o.normalize_inputs = o.clamp_inputs = o.rescale_outputs = false;
    r.model = io::load_nnet<double>(
        std::filesystem::path(NNLENS_SHARED_DIR) / "models" / "acasxu-nnet" / "ACASXU_run2a_1_1_batch_2000.nnet", o);
    const auto& nm = r.model.norm;
    std::mt19937_64 rng(2026);
    auto point = [&] {
      std::vector<double> x(nm.inputs());
      for (std::size_t i = 0; i < x.size(); ++i)
        x[i] = std::uniform_real_distribution<double>((nm.input_min[i] - nm.input_mean[i]) / nm.input_range[i],
                                                      (nm.input_max[i] - nm.input_mean[i]) / nm.input_range[i])(rng);
      return x;
    };
    for (int i = 0; i < 10000; ++i) {
      r.A.push_back(point());
      r.B.push_back(point());
    }
    return r;
  }();
  return d;
}

enum pol { seq, par, thr };

void bm_lines(benchmark::State& st, pol p, std::size_t segments_per_pass) {
  const auto& d = acas();
  const std::size_t n = std::size_t(st.range(0));
  const rows A(d.A.begin(), d.A.begin() + std::ptrdiff_t(n)), B(d.B.begin(), d.B.begin() + std::ptrdiff_t(n));
  std::size_t pieces = 0;
  for (auto _ : st) {
    std::vector<line_result<double>> r;
    if (p == seq)
      r = exact_lines(execution::seq, d.model.net, A, B);
    else if (p == par)
      r = exact_lines(execution::par, d.model.net, A, B);
    else
      r = exact_lines(segments_per_pass ? thrust_policy{.batch = segments_per_pass * thrust_line_batch_divisor} : thrust_policy{},
                      d.model.net, A, B);
    pieces = 0;
    for (const auto& x : r) pieces += x.pieces();
    benchmark::DoNotOptimize(r.data());
  }
  st.counters["segments/s"] = benchmark::Counter(double(n) * double(st.iterations()), benchmark::Counter::kIsRate);
  st.counters["pieces/segment"] = double(pieces) / double(n);
}

void sizes(benchmark::internal::Benchmark* b) {
  for (int n : {1, 4, 16, 64, 256, 1024, 10000}) b->Arg(n);
  b->UseRealTime()->Unit(benchmark::kMillisecond);
}

}  // namespace

BENCHMARK_CAPTURE(bm_lines, acasxu/seq, seq, 0)->Apply(sizes);
BENCHMARK_CAPTURE(bm_lines, acasxu/par, par, 0)->Apply(sizes);
BENCHMARK_CAPTURE(bm_lines, acasxu/thrust, thr, 0)->Apply(sizes);
BENCHMARK_CAPTURE(bm_lines, acasxu/thrust_b16, thr, 16)->Arg(10000)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(bm_lines, acasxu/thrust_b32, thr, 32)->Arg(10000)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(bm_lines, acasxu/thrust_b64, thr, 64)->Arg(10000)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(bm_lines, acasxu/thrust_b128, thr, 128)->Arg(10000)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(bm_lines, acasxu/thrust_b256, thr, 256)->Arg(10000)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(bm_lines, acasxu/thrust_b1024, thr, 1024)->Arg(10000)->UseRealTime()->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
