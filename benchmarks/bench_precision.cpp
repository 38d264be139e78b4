// benchmarks/bench_precision.cpp -- what --precision f64 costs against f32: ExactLine on
// ACAS Xu segments, and forward passes of an MNIST MLP and a CIFAR ResNet.
//
//   nnlens_bench_precision SHARED_DIR [pairs = 7]
// Each measurement is interleaved: f32, f64, f32, f64, ... (`pairs` pairs, one thread:
// execution::seq), and reported as the median of the per-pair ratios t(f64) / t(f32) with their
// range, next to the median times.  The machines are shared VMs: only the interleaved ratio is
// meaningful (docs/benchmarks.md).
//   exactline  ACAS Xu 1_1 and 5_9 (.nnet parsed at each precision, as `nnlens exact-line` does),
//              200 seeded segments inside the clamp box, exact_lines<T> (values T, ratios double)
//   forward    mnist-net_256x6.onnx (784-256x6-10) on a batch of 256, resnet_2b.onnx (CIFAR-10,
//              3x32x32) on a batch of 64: forward(execution::seq, net<T>, x<T>), 20 times per timing
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <nnlens/io/nnet.hpp>
#include <nnlens/io/onnx.hpp>
#include <nnlens/nnlens.hpp>

namespace {

namespace fs = std::filesystem;
using clk = std::chrono::steady_clock;

double seconds(const std::function<void()>& f) {
  const auto t0 = clk::now();
  f();
  return std::chrono::duration<double>(clk::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// Interleaved pairs: a (f32), b (f64); prints the median times and the ratio b / a.
void compare(const char* name, int pairs, const std::function<void()>& a, const std::function<void()>& b) {
  a(), b();  // warm-up
  std::vector<double> ta, tb, r;
  for (int p = 0; p < pairs; ++p) {
    ta.push_back(seconds(a));
    tb.push_back(seconds(b));
    r.push_back(tb.back() / ta.back());
  }
  std::printf("%-44s f32 %8.1f ms  f64 %8.1f ms  f64/f32 median %.2fx (range %.2f-%.2f, %d pairs)\n", name,
              1e3 * median(ta), 1e3 * median(tb), median(r), *std::min_element(r.begin(), r.end()),
              *std::max_element(r.begin(), r.end()), pairs);
  std::fflush(stdout);
}

template <class T>
std::vector<std::vector<T>> segments_in_box(const nnlens::io::nnet_normalization& n, std::size_t count, unsigned seed) {
  std::mt19937_64 g(seed);
  std::vector<std::vector<T>> v(count, std::vector<T>(n.inputs()));
  for (auto& x : v)
    for (std::size_t i = 0; i < x.size(); ++i)
      x[i] = T(std::uniform_real_distribution<double>(n.input_min[i], n.input_max[i])(g));
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s SHARED_DIR [pairs]\n", argv[0]);
    return 2;
  }
  const fs::path shared = argv[1];
  const int pairs = argc > 2 ? std::max(5, std::atoi(argv[2])) : 7;
  using namespace nnlens;

  for (const char* id : {"1_1", "5_9"}) {
    const fs::path p = shared / "models" / "acasxu-nnet" / (std::string("ACASXU_run2a_") + id + "_batch_2000.nnet");
    const auto mf = io::load_nnet<float>(p);
    const auto md = io::load_nnet<double>(p);
    const auto Af = segments_in_box<float>(mf.norm, 200, 1), Bf = segments_in_box<float>(mf.norm, 200, 2);
    const auto Ad = segments_in_box<double>(md.norm, 200, 1), Bd = segments_in_box<double>(md.norm, 200, 2);
    std::size_t pf = 0, pd = 0;
    compare((std::string("exactline ACAS Xu ") + id + ", 200 segments").c_str(), pairs,
            [&] {
              pf = 0;
              for (const auto& r : exact_lines<float>(execution::seq, mf.net, Af, Bf)) pf += r.pieces();
            },
            [&] {
              pd = 0;
              for (const auto& r : exact_lines<double>(execution::seq, md.net, Ad, Bd)) pd += r.pieces();
            });
    std::printf("  pieces: f32 %zu, f64 %zu\n", pf, pd);
  }

  struct fwd {
    const char* name;
    fs::path file;
    std::size_t batch;
  };
  for (const fwd& f : {fwd{"forward mnist-net_256x6 (MLP), batch 256", shared / "models" / "vnncomp-mnistfc" / "mnist-net_256x6.onnx", 256},
                       fwd{"forward resnet_2b (CIFAR-10), batch 64", shared / "models" / "vnncomp2021-cifar10_resnet" / "resnet_2b.onnx", 64}}) {
    const DynamicNetwork nf = io::load_onnx(f.file.string());
    const auto nd = network_cast<double>(nf);
    std::mt19937_64 g(3);
    xt::xarray<float> xf = xt::zeros<float>(nf.input_shape().with_batch(f.batch));
    for (auto& v : xf) v = std::uniform_real_distribution<float>(0, 1)(g);
    const xt::xarray<double> xd = xt::cast<double>(xf);
    double sink = 0;
    constexpr int reps = 20;  // ~0.1 s per timing: less exposed to the shared machine's noise
    compare(f.name, pairs,
            [&] {
              for (int k = 0; k < reps; ++k) sink += double(forward(execution::seq, nf, xf)(0));
            },
            [&] {
              for (int k = 0; k < reps; ++k) sink += forward(execution::seq, nd, xd)(0);
            });
    if (sink == 12345.678) std::printf("%g\n", sink);
  }
  return 0;
}
