// DeepImportance's clustering step (nnlens/coverage/kmeans1d.hpp) on one neuron's activations over
// 60,000 training inputs: a seeded mixture of 3 Gaussians plus 20% exact zeros (the data of
// benchmarks/compare_clustering.py, generated here with the same recipe, not the same numbers).
//   kmeans_1d/k          exact 1-D k-means on the 48,000 non-zero values
//   silhouette_1d/k      the exact silhouette of those labels (general labels path)
//   cluster_neuron       Algorithm 2: drop zeros, k in {2,3,4} (one DP), silhouettes, rounding
//   cluster_neuron/workspace   the same with a reused cluster_workspace (as when clustering the
//                        m important neurons one after another)
#include <benchmark/benchmark.h>

#include <nnlens/coverage/kmeans1d.hpp>

#include <random>
#include <vector>

namespace {

std::vector<double> neuron_activations(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 r(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::normal_distribution<double> g(0.0, 1.0);
  const double mu[3] = {0.5, 2.0, 4.5}, sd[3] = {0.3, 0.5, 0.8}, w[3] = {0.3, 0.3, 0.2};
  std::vector<double> x(n);
  for (auto& v : x) {
    const double p = u(r);
    if (p < 0.2) {
      v = 0.0;
      continue;
    }
    const int c = p < 0.2 + w[0] ? 0 : p < 0.2 + w[0] + w[1] ? 1 : 2;
    v = mu[c] + sd[c] * g(r);
  }
  return x;
}

std::vector<double> non_zero(const std::vector<double>& x) {
  std::vector<double> y;
  for (double v : x)
    if (v != 0.0) y.push_back(v);
  return y;
}

void bm_kmeans(benchmark::State& st) {
  const auto x = non_zero(neuron_activations(60000, 1));
  const auto k = std::size_t(st.range(0));
  for (auto _ : st) benchmark::DoNotOptimize(nnlens::kmeans_1d(x, k));
  st.SetItemsProcessed(std::int64_t(st.iterations()) * std::int64_t(x.size()));
}
BENCHMARK(bm_kmeans)->Name("kmeans_1d")->Arg(2)->Arg(3)->Arg(4)->Unit(benchmark::kMillisecond);

void bm_silhouette(benchmark::State& st) {
  const auto x = non_zero(neuron_activations(60000, 1));
  const auto k = std::size_t(st.range(0));
  const auto r = nnlens::kmeans_1d(x, k);
  for (auto _ : st) benchmark::DoNotOptimize(nnlens::silhouette_1d(x, r.labels, k));
  st.SetItemsProcessed(std::int64_t(st.iterations()) * std::int64_t(x.size()));
}
BENCHMARK(bm_silhouette)->Name("silhouette_1d")->Arg(2)->Arg(3)->Arg(4)->Unit(benchmark::kMillisecond);

void bm_cluster_neuron(benchmark::State& st) {
  const auto x = neuron_activations(60000, 1);
  for (auto _ : st) benchmark::DoNotOptimize(nnlens::cluster_neuron(x));
  st.SetItemsProcessed(std::int64_t(st.iterations()) * std::int64_t(x.size()));
}
BENCHMARK(bm_cluster_neuron)->Name("cluster_neuron")->Unit(benchmark::kMillisecond);

void bm_cluster_neuron_ws(benchmark::State& st) {
  const auto x = neuron_activations(60000, 1);
  nnlens::cluster_workspace ws;
  for (auto _ : st) benchmark::DoNotOptimize(nnlens::cluster_neuron(x, {}, ws));
  st.SetItemsProcessed(std::int64_t(st.iterations()) * std::int64_t(x.size()));
}
BENCHMARK(bm_cluster_neuron_ws)->Name("cluster_neuron/workspace")->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
