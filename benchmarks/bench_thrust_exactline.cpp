// ExactLine over many segments: the host policies against the thrust backend (docs/scale.md,
// sections "Thrust backend" and "GPU check").  Built twice: by g++ (bench_thrust_exactline: the OMP
// device system) and by nvcc (bench_thrust_exactline_cuda, benchmarks/bench_thrust_exactline.cu).
//
//   exactline/acasxu/<policy>/<segments>   exact_lines on ACASXU_run2a_1_1 (.nnet read with every
//                                          fold off: 6 x 50 ReLU, normalised units, double) as the
//                                          DynamicNetwork the loader returns, the first `segments`
//                                          of 10,000 fixed segments (g++ build only: nvcc 13's
//                                          front end rejects the host analyses of a DynamicNetwork)
//   exactline/acasxu_static/<policy>/<segments>   the same weights in a Sequential<Input<5>,
//                                          Dense<50, double>, ReLU, ... Dense<5, double>>
//   exactline/resnet/<policy>/<segments>   a small residual CNN in double (Input 3x8x8, Conv2D 4
//                                          3x3, ReLU, Residual<Conv, ReLU, Conv>, ReLU, MaxPool2D 2,
//                                          Flatten, Dense 10; seeded PyTorch-default weights) on
//                                          segments between uniform points of [-1, 1]^192 (seed
//                                          2027): ExactLine through a composite's join
//       policy = seq (one host thread) | par (the host pool: NNLENS_NUM_THREADS threads) |
//                thrust (execution::thrust: the default policy.batch, 256 on CPU systems, hence
//                passes of 32 segments; OMP_NUM_THREADS threads) |
//                thrust_b<S> (passes of S segments: policy.batch = 8 S) |
//                cuda (nvcc build: execution::thrust on the GPU, its default policy.batch)
// The model is read from $NNLENS_SHARED_DIR/models/acasxu-nnet/ (else the CMake definition).
// Every row makes one untimed call before its timed loop (workspaces, the CUDA context).
// Segments: both endpoints uniform in the normalised input box [(min - mean) / range,
// (max - mean) / range] per input, std::mt19937_64 seeded 2026 (A[i], then B[i], for i = 0, 1, ...).
// Counters: segments/s (wall clock), pieces/segment.
// Run quietly: OMP_WAIT_POLICY=passive OMP_NUM_THREADS=1 NNLENS_NUM_THREADS=1 (then 2 and 2)
//      bin/benchmarks/bench_thrust_exactline --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <exception>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <nnlens/exactline/line.hpp>
#include <nnlens/io/nnet.hpp>
#include <nnlens/layers/all.hpp>
#include <nnlens/network/parameters.hpp>
#include <nnlens/thrust/exactline.hpp>

#include "cuda_device.hpp"

using namespace nnlens;

namespace {

using rows = std::vector<std::vector<double>>;

// ACAS Xu's 6 x 50 ReLU network in double, as a static network
using AcasStatic = Sequential<Input<5>, Dense<50, double>, ReLU, Dense<50, double>, ReLU, Dense<50, double>, ReLU,
                              Dense<50, double>, ReLU, Dense<50, double>, ReLU, Dense<50, double>, ReLU, Dense<5, double>>;

struct data {
  std::string error;  // why the model could not be read (the rows skip with it)
  io::basic_nnet_model<double> model;
  AcasStatic fixed;  // model.net's weights
  rows A, B;
};

std::filesystem::path shared_dir() {
  const char* env = std::getenv("NNLENS_SHARED_DIR");
  return env ? env : NNLENS_SHARED_DIR;
}

const data& acas() {
  static const data d = [] {
    data r;
    io::nnet_options o;
    o.normalize_inputs = o.clamp_inputs = o.rescale_outputs = false;
    try {
      r.model = io::load_nnet<double>(shared_dir() / "models" / "acasxu-nnet" / "ACASXU_run2a_1_1_batch_2000.nnet", o);
      initialize(r.fixed, 1);  // allocates the static network's tensors; the .nnet's values follow
      const auto from = parameter_spans(r.model.net);
      const auto to = parameter_spans(r.fixed);
      auto sizes = [](const auto& spans) {
        std::string t;
        for (const auto& x : spans) t += (t.empty() ? "" : ",") + std::to_string(x.size());
        return t;
      };
      bool same = from.size() == to.size();
      for (std::size_t i = 0; same && i < to.size(); ++i) same = from[i].size() == to[i].size();
      if (!same)
        throw shape_error("bench_thrust_exactline: ACASXU_run2a_1_1 has parameter tensors of sizes " + sizes(from) +
                          ", expected " + sizes(to) + " (6 x 50 ReLU)");
      for (std::size_t i = 0; i < to.size(); ++i) std::copy(from[i].begin(), from[i].end(), to[i].begin());
    } catch (const std::exception& e) {
      r.error = e.what();
      return r;
    }
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

// a residual CNN (ExactLine's composite step: the union of the branches' breaks)
using ResNet = Sequential<Input<3, 8, 8>, Conv2D<4, 3, 1, 1, 1, 1, double>, ReLU,
                          Residual<Block<Conv2D<4, 3, 1, 1, 1, 1, double>, ReLU, Conv2D<4, 3, 1, 1, 1, 1, double>>>, ReLU,
                          MaxPool2D<2>, Flatten, Dense<10, double>>;

struct res_data {
  ResNet net;
  rows A, B;
};

const res_data& resnet() {
  static const res_data d = [] {
    res_data r;
    initialize(r.net, 7);
    std::mt19937_64 rng(2027);
    std::uniform_real_distribution<double> u(-1, 1);
    for (int i = 0; i < 64; ++i) {
      r.A.emplace_back(ResNet::input_shape.size()), r.B.emplace_back(ResNet::input_shape.size());
      for (auto& v : r.A.back()) v = u(rng);
      for (auto& v : r.B.back()) v = u(rng);
    }
    return r;
  }();
  return d;
}

enum pol { seq, par, thr };

template <class Net>
void bm_lines(benchmark::State& st, const Net& net, pol p, std::size_t segments_per_pass, const rows* AA = nullptr,
              const rows* BB = nullptr) {
  if (p == thr && !nnlens_bench::device_unavailable().empty())
    return st.SkipWithError(nnlens_bench::device_unavailable().c_str());
  if (!AA) {
    const auto& d = acas();
    if (!d.error.empty()) return st.SkipWithError(d.error.c_str());
    AA = &d.A, BB = &d.B;
  }
  const auto& d = *AA;
  const std::size_t n = std::size_t(st.range(0));
  const rows A(d.begin(), d.begin() + std::ptrdiff_t(n)), B(BB->begin(), BB->begin() + std::ptrdiff_t(n));
  auto run = [&] {
    if (p == seq) return exact_lines(execution::seq, net, A, B);
    if (p == par) return exact_lines(execution::par, net, A, B);
    return exact_lines(segments_per_pass ? thrust_policy{.batch = segments_per_pass * thrust_line_batch_divisor} : thrust_policy{},
                       net, A, B);
  };
  benchmark::DoNotOptimize(run().data());  // warm-up, untimed
  std::size_t pieces = 0;
  for (auto _ : st) {
    std::vector<line_result<double>> r = run();
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

void bm_static(benchmark::State& st, pol p, std::size_t segments_per_pass) {
  bm_lines(st, acas().fixed, p, segments_per_pass);
}
void bm_resnet(benchmark::State& st, pol p) {
  const auto& r = resnet();
  bm_lines(st, r.net, p, 0, &r.A, &r.B);
}
void res_sizes(benchmark::internal::Benchmark* b) {
  for (int n : {4, 16, 64}) b->Arg(n);
  b->UseRealTime()->Unit(benchmark::kMillisecond);
}
#if !defined(__CUDACC__)
void bm_dynamic(benchmark::State& st, pol p, std::size_t segments_per_pass) {
  bm_lines(st, acas().model.net, p, segments_per_pass);
}
#endif

}  // namespace

BENCHMARK_CAPTURE(bm_static, acasxu_static/seq, seq, 0)->Apply(sizes);
BENCHMARK_CAPTURE(bm_static, acasxu_static/par, par, 0)->Apply(sizes);
BENCHMARK_CAPTURE(bm_resnet, resnet/seq, seq)->Apply(res_sizes);
BENCHMARK_CAPTURE(bm_resnet, resnet/par, par)->Apply(res_sizes);
#if defined(__CUDACC__)
BENCHMARK_CAPTURE(bm_static, acasxu_static/cuda, thr, 0)->Apply(sizes);
BENCHMARK_CAPTURE(bm_resnet, resnet/cuda, thr)->Apply(res_sizes);
#else
BENCHMARK_CAPTURE(bm_resnet, resnet/thrust, thr)->Apply(res_sizes);
BENCHMARK_CAPTURE(bm_static, acasxu_static/thrust, thr, 0)->Apply(sizes);
BENCHMARK_CAPTURE(bm_dynamic, acasxu/seq, seq, 0)->Apply(sizes);
BENCHMARK_CAPTURE(bm_dynamic, acasxu/par, par, 0)->Apply(sizes);
BENCHMARK_CAPTURE(bm_dynamic, acasxu/thrust, thr, 0)->Apply(sizes);
BENCHMARK_CAPTURE(bm_dynamic, acasxu/thrust_b16, thr, 16)->Arg(10000)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(bm_dynamic, acasxu/thrust_b32, thr, 32)->Arg(10000)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(bm_dynamic, acasxu/thrust_b64, thr, 64)->Arg(10000)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(bm_dynamic, acasxu/thrust_b128, thr, 128)->Arg(10000)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(bm_dynamic, acasxu/thrust_b256, thr, 256)->Arg(10000)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(bm_dynamic, acasxu/thrust_b1024, thr, 1024)->Arg(10000)->UseRealTime()->Unit(benchmark::kMillisecond);
#endif

BENCHMARK_MAIN();
