// kmeans1d_dump: clusters whitespace-separated doubles (a file argument, else stdin) the way
// cluster_neuron does and prints, as JSON, for every candidate k the silhouette, centroids and SSE
// (optionally the labels), and Algorithm 2's choice.  Used by tests/coverage/sklearn_kmeans.py and
// benchmarks/compare_clustering.py.
//
//   kmeans1d_dump [--keep-zeros] [--min-samples N] [--round D] [--labels] [--repeat R] [FILE]
//
// The per-k entries are computed on the values cluster_neuron clusters (zeros dropped unless
// --keep-zeros), with unrounded centroids; "silhouette" is null where cluster_neuron skipped k.
// "seconds" is the median wall time of R calls of cluster_neuron (reading and printing excluded).
#include <nnlens/coverage/kmeans1d.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace {
void print_number(double v) {
  if (std::isnan(v))
    std::printf("null");
  else
    std::printf("%.17g", v);
}
template <class T>
void print_array(const std::vector<T>& v) {
  std::printf("[");
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) std::printf(",");
    if constexpr (std::is_floating_point_v<T>)
      print_number(v[i]);
    else
      std::printf("%zu", std::size_t(v[i]));
  }
  std::printf("]");
}
}  // namespace

int main(int argc, char** argv) try {
  nnlens::cluster_options o;
  bool labels = false;
  int repeat = 1;
  std::string file;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error("missing value after " + a);
      return argv[++i];
    };
    if (a == "--keep-zeros")
      o.drop_zeros = false;
    else if (a == "--min-samples")
      o.min_samples = std::stoul(next());
    else if (a == "--round")
      o.round_decimals = std::stoi(next());
    else if (a == "--labels")
      labels = true;
    else if (a == "--repeat")
      repeat = std::max(1, std::stoi(next()));
    else if (!a.empty() && a[0] == '-')
      throw std::runtime_error("unknown option " + a);
    else
      file = a;
  }
  std::vector<double> values;
  {
    std::ifstream f;
    if (!file.empty()) {
      f.open(file);
      if (!f) throw std::runtime_error("cannot open " + file);
    }
    std::istream& in = file.empty() ? std::cin : f;
    double v;
    while (in >> v) values.push_back(v);
    if (!in.eof()) throw std::runtime_error("input: not a number after value " +
                                            std::to_string(values.size()));
  }

  std::vector<double> times;
  nnlens::neuron_clusters c;
  for (int r = 0; r < repeat; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    c = nnlens::cluster_neuron(values, o);
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(times.begin(), times.end());

  std::vector<double> used;
  for (const double v : values)
    if (!(o.drop_zeros && v == 0.0)) used.push_back(v);

  std::printf("{\"n_input\":%zu,\"n_used\":%zu,\"ks\":[", values.size(), c.n_used);
  for (std::size_t i = 0; i < o.ks.size(); ++i) {
    if (i) std::printf(",");
    std::printf("{\"k\":%zu,\"silhouette\":", o.ks[i]);
    print_number(c.silhouettes[i]);
    if (!std::isnan(c.silhouettes[i])) {
      const auto r = nnlens::kmeans_1d(used, o.ks[i]);
      std::printf(",\"sse\":");
      print_number(r.sse);
      std::printf(",\"centroids\":");
      print_array(r.centroids);
      if (labels) {
        std::printf(",\"labels\":");
        print_array(r.labels);
      }
    }
    std::printf("}");
  }
  std::printf("],\"chosen_k\":%zu,\"centroids\":", c.k);
  print_array(c.centroids);
  std::printf(",\"seconds\":%.9g}\n", times[times.size() / 2]);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "kmeans1d_dump: %s\n", e.what());
  return 1;
}
