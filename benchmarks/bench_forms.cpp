// bench_forms: the static form (Sequential, every layer's type known to the compiler) against the
// run-time form (DynamicNetwork, a vector of variant layers) of the same network, for each
// analysis: forward, NNSlicer slicing, LRP and ExactLine: the static form must not be
// slower.  Both forms hold the same weights (to_dynamic of the static network); before it
// measures, the benchmark checks that their forward outputs on the samples are equal (bitwise), and
// skips the rows with an error otherwise.
//
//   forward/<net>/<form>      a batch of 256 samples                     samples/s
//   slice/<net>/<form>        NNSlicer CONTRIB tables of 16 samples      samples/s
//   lrp/<net>/<form>          input relevance (LRP) of 64 samples        samples/s
//   exactline/<net>/<form>    exact lines of 64 segments                 segments/s
// <net>: lenet5 (the DeepXplore/LeNet-5 shape, seeded PyTorch-default weights: the timing does not
// depend on training) and acasxu (ACAS Xu 1_1 from ../shared/models/acasxu-nnet, its real weights,
// raw units; inputs drawn in [-1, 1] of the raw units, so the Clamp cuts many lines short); <form>:
// static, dynamic.  All on one thread (execution::seq), values in float (ExactLine's ratios in
// double).
// Run: bin/benchmarks/bench_forms --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//      (docs/benchmarks.md, "Static and run-time forms": run it interleaved, static and dynamic rows
//      of one analysis next to each other, and quote the ratio of medians).
#include <benchmark/benchmark.h>

#include <nnlens/io/nnet.hpp>
#include <nnlens/nnlens.hpp>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "nets.hpp"

using namespace nnlens;

namespace {

namespace fs = std::filesystem;

using LeNet5 = bench::LeNet5;
using Acas = Sequential<Input<5>, Affine<5>, Clamp, Dense<50>, ReLU, Dense<50>, ReLU, Dense<50>, ReLU, Dense<50>, ReLU, Dense<50>, ReLU,
                        Dense<50>, ReLU, Dense<5>>;

fs::path shared_dir() {
  if (const char* s = std::getenv("NNLENS_SHARED_DIR")) return s;
  return NNLENS_SHARED_DIR;
}

template <class Net>
struct pair_of_forms {
  Net s;
  basic_dynamic_network<float> d;
  std::vector<float> x;           // [n, in] samples
  std::vector<float> a, b;        // segment endpoints, [lines, in] each
  profile prof;                   // NNSlicer's profile of x
  std::size_t n = 0, lines = 0, in = 0;
  std::string error;
};

template <class Net>
void fill_inputs(pair_of_forms<Net>& p, std::size_t n, std::size_t lines, float lo, float hi, std::uint64_t seed) {
  p.in = input_shape_of(p.s).size();
  p.n = n, p.lines = lines;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  p.x.resize(n * p.in);
  for (auto& v : p.x) v = u(rng);
  p.a.resize(lines * p.in), p.b.resize(lines * p.in);
  for (auto& v : p.a) v = u(rng);
  for (auto& v : p.b) v = u(rng);
  const shape s = input_shape_of(p.s);
  auto X = s.rank == 3 ? xt::xarray<float>(xt::adapt(p.x, std::vector<std::size_t>{n, s[0], s[1], s[2]}))
                       : xt::xarray<float>(xt::adapt(p.x, std::vector<std::size_t>{n, s[0]}));
  p.prof = profile_network(execution::seq, p.s, X);
  // the two forms must compute the same thing, or the comparison means nothing
  const xt::xarray<float> ys = forward(execution::seq, p.s, X), yd = forward(execution::seq, p.d, X);
  if (ys != yd) p.error = "the static and the run-time form give different outputs";
}

pair_of_forms<LeNet5>& lenet() {
  static pair_of_forms<LeNet5> p = [] {
    pair_of_forms<LeNet5> r;
    initialize(r.s, 7);
    r.d = to_dynamic(r.s);
    fill_inputs(r, 256, 64, 0.0f, 1.0f, 11);
    return r;
  }();
  return p;
}

pair_of_forms<Acas>& acas() {
  static pair_of_forms<Acas> p = [] {
    pair_of_forms<Acas> r;
    try {
      const auto f = shared_dir() / "models" / "acasxu-nnet" / "ACASXU_run2a_1_1_batch_2000.nnet";
      auto m = io::load_nnet<float>(f.string());  // raw units: Affine -> Clamp{0, 1} -> 6 x (Dense, ReLU) -> Dense
      r.s = from_dynamic<Acas>(m.net);
      r.d = to_dynamic(r.s);
      fill_inputs(r, 256, 64, -1.0f, 1.0f, 12);
    } catch (const std::exception& e) {
      r.error = e.what();
    }
    return r;
  }();
  return p;
}

template <class Net>
xt::xarray<float> batch(const pair_of_forms<Net>& p, const std::vector<float>& v, std::size_t n) {
  const shape s = input_shape_of(p.s);
  if (s.rank == 3) return xt::adapt(v.data(), n * s.size(), xt::no_ownership(), std::vector<std::size_t>{n, s[0], s[1], s[2]});
  return xt::adapt(v.data(), n * s.size(), xt::no_ownership(), std::vector<std::size_t>{n, s[0]});
}

template <class Net, class F>
void run(benchmark::State& st, pair_of_forms<Net>& p, double per_iter, F&& f) {
  if (!p.error.empty()) {
    st.SkipWithError(p.error.c_str());
    return;
  }
  double items = 0;
  for (auto _ : st) {
    f();
    items += per_iter;
  }
  st.counters["items/s"] = benchmark::Counter(items, benchmark::Counter::kIsRate);
}

template <class Net>
void register_net(const std::string& name, pair_of_forms<Net>& (*get)()) {
  for (bool dyn : {false, true}) {
    const std::string form = dyn ? "dynamic" : "static";
    benchmark::RegisterBenchmark(("forward/" + name + "/" + form).c_str(), [get, dyn](benchmark::State& st) {
      auto& p = get();
      if (p.error.empty()) {
        const auto X = batch(p, p.x, p.n);
        run(st, p, double(p.n), [&] {
          if (dyn)
            benchmark::DoNotOptimize(forward(execution::seq, p.d, X).data());
          else
            benchmark::DoNotOptimize(forward(execution::seq, p.s, X).data());
        });
      } else {
        run(st, p, 0, [] {});
      }
    });
    benchmark::RegisterBenchmark(("slice/" + name + "/" + form).c_str(), [get, dyn](benchmark::State& st) {
      auto& p = get();
      if (p.error.empty()) {
        const auto X = batch(p, p.x, 16);
        run(st, p, 16.0, [&] {
          if (dyn)
            benchmark::DoNotOptimize(nnslicer(execution::seq, p.d, p.prof, X, criterion::predicted()).synapses.data());
          else
            benchmark::DoNotOptimize(nnslicer(execution::seq, p.s, p.prof, X, criterion::predicted()).synapses.data());
        });
      } else {
        run(st, p, 0, [] {});
      }
    });
    benchmark::RegisterBenchmark(("lrp/" + name + "/" + form).c_str(), [get, dyn](benchmark::State& st) {
      auto& p = get();
      if (p.error.empty()) {
        const auto X = batch(p, p.x, 64);
        run(st, p, 64.0, [&] {
          if (dyn)
            benchmark::DoNotOptimize(relevance(execution::seq, p.d, X).data());
          else
            benchmark::DoNotOptimize(relevance(execution::seq, p.s, X).data());
        });
      } else {
        run(st, p, 0, [] {});
      }
    });
    benchmark::RegisterBenchmark(("exactline/" + name + "/" + form).c_str(), [get, dyn](benchmark::State& st) {
      auto& p = get();
      if (p.error.empty()) {
        std::vector<std::vector<float>> A, B;  // any range with one sample's elements
        for (std::size_t l = 0; l < p.lines; ++l) {
          A.emplace_back(p.a.begin() + std::ptrdiff_t(l * p.in), p.a.begin() + std::ptrdiff_t((l + 1) * p.in));
          B.emplace_back(p.b.begin() + std::ptrdiff_t(l * p.in), p.b.begin() + std::ptrdiff_t((l + 1) * p.in));
        }
        run(st, p, double(p.lines), [&] {
          std::size_t pieces = 0;
          for (std::size_t l = 0; l < p.lines; ++l) {
            if (dyn)
              pieces += exact_line<float>(execution::seq, p.d, A[l], B[l]).pieces();
            else
              pieces += exact_line<float>(execution::seq, p.s, A[l], B[l]).pieces();
          }
          benchmark::DoNotOptimize(pieces);
        });
      } else {
        run(st, p, 0, [] {});
      }
    });
  }
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  register_net<LeNet5>("lenet5", &lenet);
  register_net<Acas>("acasxu", &acas);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
