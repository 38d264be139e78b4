// ExactLine throughput (docs/benchmarks.md, section "ExactLine").
//
//   acasxu/<lines>/<mode>/<scalar>   the 45 ACAS Xu networks (../shared/models/acasxu-nnet), 100 lines
//                                    each (4,500 lines per iteration), RAW units as io::load_nnet
//                                    gives them by default (clamp + normalisation folded in):
//       lines = spokes: the head-on "vary distance" lines of the paper's scenario
//               (examples/exactline_acasxu.cpp: psi = -pi, v_own = v_int = 150 ft/s, theta at 100
//               angles over [-180, 180), rho from 0 to where the ray leaves the
//               [-6000, 10000] x [-6000, 6000] ft box);
//               random: 100 segments between uniform points of the whole input box (min/max of
//               the .nnet header; seeded), a harder case (more pieces per line)
//       mode  = seq: exact_line(execution::seq) on one line after the other;
//               par: exact_lines(execution::par) over the 100 lines of each network
//       scalar = double (default) | float (exact_line<float>, the network loaded in float)
//   mnist256x6/<mode>/<scalar>       vnncomp mnist-net_256x6.onnx, 20 image-to-image lines between
//                                    Fashion-MNIST test images 2i -> 2i+1 (pixels / 255)
//   resnet2b/<mode>/double           vnncomp2021 cifar10 resnet_2b.onnx, 4 lines between seeded
//                                    random [0,1]^(3x32x32) images;
//       mode = seq (one line after the other), par_pieces (exact_line(execution::par): each line
//              parallel over its pieces), par_lines (exact_lines(execution::par) over the 4 lines)
//
// Counters: lines/s and pieces/s (rates over wall-clock time: every benchmark uses real time),
// pieces/line (mean over the lines of one iteration), threads (the pool's size).  The networks are
// converted to the benchmark's scalar once, outside the timed loop.  Threads: NNLENS_NUM_THREADS,
// read once when the pool is first used, so run the binary once per thread count:
//   NNLENS_NUM_THREADS=1 bench_exactline --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//   NNLENS_NUM_THREADS=2 bench_exactline --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
// Models: NNLENS_SHARED_DIR (compile-time, the shared folder; override at run time with the
// environment variable of the same name); Fashion-MNIST: NNLENS_FASHION_DIR likewise.  A missing
// file skips its benchmarks with a message.
#include <benchmark/benchmark.h>

#include <nnlens/exactline.hpp>
#include <nnlens/io/idx.hpp>
#include <nnlens/io/nnet.hpp>
#include <nnlens/nnlens.hpp>
#if NNLENS_BENCH_HAS_ONNX
#include <nnlens/io/onnx.hpp>
#endif

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <memory>
#include <numbers>
#include <random>
#include <string>
#include <vector>

using namespace nnlens;

namespace {

namespace fs = std::filesystem;
template <class S>
using rows = std::vector<std::vector<S>>;

fs::path shared_dir() {
  if (const char* s = std::getenv("NNLENS_SHARED_DIR")) return s;
  return NNLENS_SHARED_DIR;
}
fs::path fashion_dir() {
  if (const char* s = std::getenv("NNLENS_FASHION_DIR")) return s;
  return NNLENS_FASHION_DIR;
}

template <class S>
rows<S> to_scalar(const rows<double>& a) {
  rows<S> r;
  for (const auto& v : a) r.emplace_back(v.begin(), v.end());
  return r;
}

// A set of networks (in double and float) with, for each, the segments A[i] -> B[i].
struct line_set {
  std::vector<basic_dynamic_network<double>> net_d;
  std::vector<basic_dynamic_network<float>> net_f;
  std::vector<rows<double>> A_d, B_d;
  std::vector<rows<float>> A_f, B_f;
  std::string error;  // why the set could not be built (benchmarks skip with it)

  void add(basic_dynamic_network<double> nd, basic_dynamic_network<float> nf, rows<double> A, rows<double> B) {
    net_d.push_back(std::move(nd));
    net_f.push_back(std::move(nf));
    A_f.push_back(to_scalar<float>(A));
    B_f.push_back(to_scalar<float>(B));
    A_d.push_back(std::move(A));
    B_d.push_back(std::move(B));
  }
  template <class S>
  const auto& nets() const {
    if constexpr (std::is_same_v<S, double>) return net_d; else return net_f;
  }
  template <class S>
  const auto& A() const {
    if constexpr (std::is_same_v<S, double>) return A_d; else return A_f;
  }
  template <class S>
  const auto& B() const {
    if constexpr (std::is_same_v<S, double>) return B_d; else return B_f;
  }
};

// ---------------------------------------------------------------- ACAS Xu
constexpr double pi = std::numbers::pi;
constexpr int acas_lines = 100;

/// rho where the ray at angle th leaves the scenario's box [-6000, 10000] x [-6000, 6000] ft
/// (examples/exactline_acasxu.cpp).
double exit_rho(double th) {
  const double xmin = -6000, xmax = 10000, ymin = -6000, ymax = 6000;
  const double c = std::cos(th), sn = std::sin(th), inf = 1e300;
  const double tx = c > 1e-12 ? xmax / c : c < -1e-12 ? xmin / c : inf;
  const double ty = sn > 1e-12 ? ymax / sn : sn < -1e-12 ? ymin / sn : inf;
  return std::min(tx, ty);
}

enum class acas_kind { spokes, random };

const line_set& acas(acas_kind kind) {
  static const auto build = [](acas_kind k) {
    auto s = std::make_unique<line_set>();
    try {
      const fs::path dir = shared_dir() / "models" / "acasxu-nnet";
      std::vector<fs::path> files;
      if (fs::is_directory(dir))
        for (const auto& e : fs::directory_iterator(dir))
          if (e.path().extension() == ".nnet" && e.path().filename().string().starts_with("ACASXU_run2a_"))
            files.push_back(e.path());
      std::sort(files.begin(), files.end());
      if (files.size() != 45) {
        s->error = "expected the 45 ACAS Xu networks in " + dir.string() + ", found " + std::to_string(files.size());
        return s;
      }
      std::mt19937_64 rng(2026);
      for (const auto& f : files) {
        auto md = io::load_nnet<double>(f.string());
        auto mf = io::load_nnet<float>(f.string());
        rows<double> A, B;
        for (int i = 0; i < acas_lines; ++i) {
          if (k == acas_kind::spokes) {
            const double th = -pi + 2 * pi * i / acas_lines;
            A.push_back({0.0, th, -pi, 150.0, 150.0});
            B.push_back({exit_rho(th), th, -pi, 150.0, 150.0});
          } else {
            const auto& n = md.norm;
            std::vector<double> p(n.inputs()), q(n.inputs());
            for (std::size_t j = 0; j < n.inputs(); ++j) {
              std::uniform_real_distribution<double> u(n.input_min[j], n.input_max[j]);
              p[j] = u(rng);
              q[j] = u(rng);
            }
            A.push_back(std::move(p));
            B.push_back(std::move(q));
          }
        }
        s->add(std::move(md.net), std::move(mf.net), std::move(A), std::move(B));
      }
    } catch (const std::exception& e) {
      s->error = e.what();
    }
    return s;
  };
  static const auto spokes = build(acas_kind::spokes);
  static const auto random = build(acas_kind::random);
  return kind == acas_kind::spokes ? *spokes : *random;
}

// ---------------------------------------------------------------- ONNX models
#if NNLENS_BENCH_HAS_ONNX
const line_set& mnist() {
  static const auto s = [] {
    auto s = std::make_unique<line_set>();
    try {
      const fs::path p = shared_dir() / "models" / "vnncomp-mnistfc" / "mnist-net_256x6.onnx";
      auto nf = io::load_onnx(p.string());
      auto nd = network_cast<double>(nf);
      constexpr std::size_t pairs = 20;
      const auto fm = io::load_mnist<double>(fashion_dir(), "t10k", 2 * pairs);
      const std::size_t di = input_shape_of(nd).size(), per = fm.images.size() / fm.size();
      if (per != di || fm.size() < 2 * pairs) {
        s->error = "Fashion-MNIST images do not fit the network's input";
        return s;
      }
      const double scale = *std::max_element(fm.images.begin(), fm.images.end()) > 1.5 ? 1.0 / 255 : 1.0;
      auto image = [&](std::size_t i) {
        std::vector<double> v(fm.images.begin() + std::ptrdiff_t(i * di), fm.images.begin() + std::ptrdiff_t((i + 1) * di));
        for (auto& x : v) x *= scale;
        return v;
      };
      rows<double> A, B;
      for (std::size_t i = 0; i < pairs; ++i) {
        A.push_back(image(2 * i));
        B.push_back(image(2 * i + 1));
      }
      s->add(std::move(nd), std::move(nf), std::move(A), std::move(B));
    } catch (const std::exception& e) {
      s->error = e.what();
    }
    return s;
  }();
  return *s;
}

const line_set& resnet() {
  static const auto s = [] {
    auto s = std::make_unique<line_set>();
    try {
      const fs::path p = shared_dir() / "models" / "vnncomp2021-cifar10_resnet" / "resnet_2b.onnx";
      auto nf = io::load_onnx(p.string());
      auto nd = network_cast<double>(nf);
      const std::size_t di = input_shape_of(nd).size();
      std::mt19937_64 rng(42);
      std::uniform_real_distribution<double> u(0.0, 1.0);
      rows<double> A, B;
      for (int i = 0; i < 4; ++i) {
        std::vector<double> a(di), b(di);
        for (auto& x : a) x = u(rng);
        for (auto& x : b) x = u(rng);
        A.push_back(std::move(a));
        B.push_back(std::move(b));
      }
      s->add(std::move(nd), std::move(nf), std::move(A), std::move(B));
    } catch (const std::exception& e) {
      s->error = e.what();
    }
    return s;
  }();
  return *s;
}
#endif

// ---------------------------------------------------------------- the benchmark bodies
enum class mode { seq, par_pieces, par_lines };

void set_counters(benchmark::State& st, double lines, double pieces) {
  st.counters["lines/s"] = benchmark::Counter(lines, benchmark::Counter::kIsRate);
  st.counters["pieces/s"] = benchmark::Counter(pieces, benchmark::Counter::kIsRate);
  st.counters["pieces/line"] = lines > 0 ? pieces / lines : 0.0;
  st.counters["threads"] = double(detail::default_pool().size());
}

template <class S>
void bm_lines(benchmark::State& st, const line_set& set, mode m) {
  if (!set.error.empty()) {
    st.SkipWithError(set.error.c_str());
    return;
  }
  const auto& nets = set.nets<S>();
  const auto& A = set.A<S>();
  const auto& B = set.B<S>();
  (void)detail::default_pool();  // start the workers outside the timed loop
  double lines = 0, pieces = 0;
  for (auto _ : st) {
    for (std::size_t n = 0; n < nets.size(); ++n) {
      if (m == mode::par_lines) {
        const auto res = exact_lines<S>(execution::par, nets[n], A[n], B[n]);
        for (const auto& r : res) pieces += double(r.pieces());
        benchmark::DoNotOptimize(res.data());
      } else {
        for (std::size_t i = 0; i < A[n].size(); ++i) {
          const auto r = m == mode::seq ? exact_line<S>(execution::seq, nets[n], A[n][i], B[n][i])
                                        : exact_line<S>(execution::par, nets[n], A[n][i], B[n][i]);
          pieces += double(r.pieces());
          benchmark::DoNotOptimize(r.t.data());
        }
      }
      lines += double(A[n].size());
    }
  }
  set_counters(st, lines, pieces);
}

template <class S>
void reg(const std::string& name, const line_set& (*set)(), mode m) {
  benchmark::RegisterBenchmark(name.c_str(), [set, m](benchmark::State& st) { bm_lines<S>(st, set(), m); })
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
}

const line_set& acas_spokes() { return acas(acas_kind::spokes); }
const line_set& acas_random() { return acas(acas_kind::random); }

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  for (const char* kind : {"spokes", "random"}) {
    const auto set = std::string(kind) == "spokes" ? &acas_spokes : &acas_random;
    const std::string base = std::string("acasxu/") + kind;
    reg<double>(base + "/seq/double", set, mode::seq);
    reg<double>(base + "/par/double", set, mode::par_lines);
    reg<float>(base + "/seq/float", set, mode::seq);
    reg<float>(base + "/par/float", set, mode::par_lines);
  }
#if NNLENS_BENCH_HAS_ONNX
  reg<double>("mnist256x6/seq/double", &mnist, mode::seq);
  reg<double>("mnist256x6/par/double", &mnist, mode::par_lines);
  reg<float>("mnist256x6/seq/float", &mnist, mode::seq);
  reg<float>("mnist256x6/par/float", &mnist, mode::par_lines);
  reg<double>("resnet2b/seq/double", &resnet, mode::seq);
  reg<double>("resnet2b/par_pieces/double", &resnet, mode::par_pieces);
  reg<double>("resnet2b/par_lines/double", &resnet, mode::par_lines);
#endif
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
