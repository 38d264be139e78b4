// examples/exactline_ig.cpp -- exact integrated gradients vs the Riemann sums they replace
// (the ExactLine paper's §4, Tables 1 and 2; docs/specs/exactline.md#3b-exact-integrated-gradients; docs/exactline-ig.md).
//
//   exactline_ig [--quick] [--images N] [--resnet-images N] [--epochs E] [--train-limit N]
//                [--models DIR] [--fashion DIR] [--cache DIR] [--check-images N] [--verbose]
//                [--out DIR]   (pictures of each network's first image: its pieces, exact IG, m~ left sum)
//
// Networks: DeepXplore's MNIST LeNet-1/4/5 (ONNX, on their 44 real seed digits, x = pixel / 255),
// the VNN-COMP 2021 CIFAR-10 resnet_2b (ONNX, on seeded random [0, 1] images: no CIFAR data
// here), and a Fashion-MNIST LeNet-5 trained here with the project's recipe (weights cached in
// --cache).  For each image: black baseline (zeros), F = the logit of the image's label (the
// three LeNets' common prediction on DeepXplore's seeds, the true label on Fashion-MNIST, the
// predicted label on the random CIFAR inputs), exact IG along baseline -> image, and the paper's
// two protocols:
//   Table 1: m~ = the smallest m in [20, 1000] whose left sum is "complete" within 1 %, and the
//            mean relative error of that left sum against exact IG;
//   Table 2: the samples that left / right / trapezoid sums need before n .. n+4 partitions all
//            stay below 5 % error (images that never get there within 1006 are dropped, counted).
// Self-checks (exit status 1 when one fails): exact IG sums to F(x) - F(0) within 1e-6 relative
// on every image; on the first --check-images images the right Riemann sum from riemann_ig (the
// network's own gradients at the samples) agrees with riemann_from_pieces within 1e-6 of the
// largest attribution (left / trapezoid differences are printed: they sample the baseline, where
// MaxPool windows tie -- see study()); the ONNX
// LeNets reproduce expected.csv's logits within 1e-4.
// ONNX models need the optional component nnlens::onnx (see examples/CMakeLists.txt).
#include <cctype>
#include <cstdio>
#include <fstream>
#include <exception>
#include <optional>

#if NNLENS_EXAMPLE_WITH_ONNX  // set by examples/CMakeLists.txt when nnlens::onnx exists
#include <nnlens/io/onnx.hpp>
#endif

#include "exactline_studies.hpp"

using namespace nnlens;
using namespace studies;

namespace {

struct ig_row {
  std::string net;
  std::size_t images = 0;
  std::vector<double> pieces, mt, err_mt, s_left, s_right, s_trap;
  std::size_t no_mt = 0, no_left = 0, no_right = 0, no_trap = 0, trap_worse = 0;
  double worst_completeness = 0;   // |sum - delta| / scale
  double worst_riemann = 0;        // max |riemann_ig - riemann_from_pieces| / max |IG|, right sums
  double worst_riemann_t0 = 0;     // the same for left / trapezoid sums (they sample t = 0)
  double ig_seconds = 0, protocol_seconds = 0;
};

bool g_ok = true;
fs::path g_svg_dir;  // --out: the pictures of the first image of every network (empty: none)

/// Fig. 3 of the paper for one image (the piece boundaries along baseline -> image) and the
/// attribution maps: exact IG beside the m~ left sum the prior work would use.
void write_pictures(const std::string& name, const ig_result<double>& ig, std::size_t mt) {
  if (g_svg_dir.empty()) return;
  fs::create_directories(g_svg_dir);
  const std::string base = file_name(name);
  svg_options so;
  so.title = name + ": black baseline -> image, " + std::to_string(ig.pieces()) + " linear pieces (ticks)";
  std::ofstream(g_svg_dir / (base + "_line.svg")) << line_svg(std::vector<line_result<double>>{ig.line}, class_rule::argmax, {}, so);
  const std::size_t n = ig.attributions.size();
  const std::size_t side = n == 784 ? 28 : 32, planes = n / (side * side);
  auto map = [&](const std::vector<double>& v) {  // channels summed
    std::vector<double> m(side * side, 0.0);
    for (std::size_t c = 0; c < planes; ++c)
      for (std::size_t i = 0; i < side * side; ++i) m[i] += v[c * side * side + i];
    return m;
  };
  std::ofstream(g_svg_dir / (base + "_ig_exact.svg")) << heatmap_svg(map(ig.attributions), side, side, "exact IG", 8);
  const auto left = riemann_from_pieces(ig, mt, riemann_rule::left);
  std::ofstream(g_svg_dir / (base + "_ig_left.svg"))
      << heatmap_svg(map(left), side, side, "left sum, m = " + std::to_string(mt), 8);
}

template <class Net>
ig_row study(const std::string& name, const Net& net, const std::vector<std::vector<double>>& xs, const std::vector<std::size_t>& ks,
             std::size_t check_images, bool verbose) {
  ig_row row;
  row.net = name;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const std::vector<double>& x = xs[i];
    const std::vector<double> base(x.size(), 0.0);
    const std::size_t k = ks[i];
    stopwatch sw;
    const auto ig = exact_ig<double>(net, x, base, k);
    row.ig_seconds += sw.seconds();
    const double f1 = ig.line.output(ig.pieces())[k], f0 = ig.line.output(0)[k];
    const double scale = std::max({std::abs(ig.delta), std::abs(f0), std::abs(f1), 1e-300});
    const double compl_err = std::abs(ig.sum - ig.delta) / scale;
    row.worst_completeness = std::max(row.worst_completeness, compl_err);
    if (!(compl_err <= 1e-6)) {
      std::printf("  FAIL %s image %zu: sum IG = %.9g but F(x) - F(0) = %.9g\n", name.c_str(), i, ig.sum, ig.delta);
      g_ok = false;
    }
    ++row.images;
    row.pieces.push_back(double(ig.pieces()));

    stopwatch sp;
    const auto mt = m_tilde(ig, 0.01);
    if (i == 0) write_pictures(name, ig, mt ? *mt : 20);
    double err = std::nan("");
    if (mt) {
      err = ig_relative_error(riemann_from_pieces(ig, *mt, riemann_rule::left), ig.attributions);
      row.mt.push_back(double(*mt));
      row.err_mt.push_back(err);
    } else {
      ++row.no_mt;
    }
    const auto sl = samples_to_reach(ig, riemann_rule::left, 0.05);
    const auto sr = samples_to_reach(ig, riemann_rule::right, 0.05);
    const auto st = samples_to_reach(ig, riemann_rule::trapezoid, 0.05);
    if (sl) row.s_left.push_back(double(*sl)); else ++row.no_left;
    if (sr) row.s_right.push_back(double(*sr)); else ++row.no_right;
    if (st) row.s_trap.push_back(double(*st)); else ++row.no_trap;
    if (st && ((sl && *st > *sl) || (sr && *st > *sr))) ++row.trap_worse;
    row.protocol_seconds += sp.seconds();

    if (i < check_images) {  // real gradients at the samples vs the pieces' gradients
      double amax = 0;
      for (double a : ig.attributions) amax = std::max(amax, std::abs(a));
      const std::size_t m = mt ? *mt : 50;
      for (auto rule : {riemann_rule::left, riemann_rule::right, riemann_rule::trapezoid}) {
        const auto a = riemann_ig<double>(net, x, base, k, m, rule);
        const auto b = riemann_from_pieces(ig, m, rule);
        double d = 0;
        for (std::size_t j = 0; j < a.size(); ++j) d = std::max(d, std::abs(a[j] - b[j]));
        // The left and trapezoid sums sample t = 0, the black baseline itself, where every MaxPool
        // window is a tie (zero input: each channel is its bias everywhere): the network's gradient
        // there is a tie-break, not the gradient of the piece to the right that riemann_from_pieces
        // uses.  Only the right sum (no sample at t = 0) must agree to rounding.
        if (rule == riemann_rule::right)
          row.worst_riemann = std::max(row.worst_riemann, d / std::max(amax, 1e-300));
        else
          row.worst_riemann_t0 = std::max(row.worst_riemann_t0, d / std::max(amax, 1e-300));
      }
    }
    if (verbose) {
      auto s = [](const std::optional<std::size_t>& v) { return v ? std::to_string(*v) : std::string("-"); };
      std::printf("  %s image %zu (label %zu): %zu pieces, F(x)-F(0) = %.4g, m~ = %s (error %.2f%%), to 5%%: left %s right %s trap %s (%.2f s)\n",
                  name.c_str(), i, k, ig.pieces(), ig.delta, s(mt).c_str(), 100 * err, s(sl).c_str(), s(sr).c_str(), s(st).c_str(),
                  sw.seconds());
      std::fflush(stdout);
    }
  }
  if (row.worst_riemann > 1e-6) {
    std::printf("  FAIL %s: riemann_ig and riemann_from_pieces differ by %.3g of the largest attribution\n", name.c_str(), row.worst_riemann);
    g_ok = false;
  }
  std::printf("  %-16s %3zu images: %.0f pieces avg, exact IG %.3f s/image, protocols %.3f s/image, completeness <= %.1e, Riemann check: right %.1e, left/trap %.1e\n",
              name.c_str(), row.images, mean(row.pieces), row.ig_seconds / double(row.images), row.protocol_seconds / double(row.images),
              row.worst_completeness, row.worst_riemann, row.worst_riemann_t0);
  std::fflush(stdout);
  return row;
}

std::string fmt(double v, const char* f = "%.2f") {
  if (std::isnan(v)) return "-";
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

}  // namespace

int main(int argc, char** argv) try {
  const cli a(argc, argv);
  const bool quick = a.has("quick");
  const fs::path models = a.str("models", "../shared/models");
  const fs::path fashion = a.str("fashion", "/usr/share/datasets/fashion-mnist");
  const std::size_t n_img = a.num("images", quick ? 2 : 100);  // DeepXplore has 44 seeds
  const std::size_t n_res = a.num("resnet-images", quick ? 1 : 20);
  const std::size_t check = a.num("check-images", quick ? 2 : 3);
  const bool verbose = a.has("verbose");
  g_svg_dir = a.str("out", "exactline_ig_out");
  training_budget tb;
  tb.epochs = a.num("epochs", quick ? 1 : 12);
  tb.train_limit = a.num("train-limit", quick ? 2000 : 0);
  tb.cache_dir = a.str("cache", "exactline_models");
  stopwatch total;
  std::vector<ig_row> rows;

#if NNLENS_EXAMPLE_WITH_ONNX
  // DeepXplore's LeNets on their real seed digits ------------------------------------------------
  const fs::path dx = models / "deepxplore-mnist";
  if (fs::exists(dx / "expected.csv")) {
    const auto set = load_deepxplore(dx, std::min<std::size_t>(n_img, 44));
    std::vector<std::vector<double>> xs;
    std::vector<std::size_t> ks;
    for (const auto& im : set.images) xs.push_back(to_input(im.raw)), ks.push_back(im.label);
    std::printf("DeepXplore MNIST LeNets: %zu seed images (*_orig.png), F = logit of the three nets' common label\n", xs.size());
    for (const char* m : {"lenet1", "lenet4", "lenet5"}) {
      const auto net = network_cast<double>(io::load_onnx((dx / (std::string(m) + ".onnx")).string()));
      double dev = 0;
      for (std::size_t i = 0; i < xs.size(); ++i) {
        const auto y = logits(net, xs[i]);
        for (std::size_t o = 0; o < 10; ++o) dev = std::max(dev, std::abs(y[o] - set.logits.at(m)[i][o]));
      }
      std::printf("  %s: max |logit - expected.csv| = %.2g\n", m, dev);
      if (!(dev <= 1e-4)) g_ok = false;
      rows.push_back(study(std::string("DeepXplore ") + m, net, xs, ks, check, verbose));
    }
  } else {
    std::printf("skipping DeepXplore: %s not found\n", (dx / "expected.csv").string().c_str());
  }

  // CIFAR-10 resnet_2b on random images ------------------------------------------------------------
  const fs::path rp = models / "vnncomp2021-cifar10_resnet/resnet_2b.onnx";
  if (n_res && fs::exists(rp)) {
    const auto net = network_cast<double>(io::load_onnx(rp.string()));
    std::vector<std::vector<double>> xs;
    std::vector<std::size_t> ks;
    for (std::size_t i = 0; i < n_res; ++i) {
      std::mt19937_64 rng(2021 + i);
      std::uniform_real_distribution<double> u(0, 1);
      std::vector<double> x(3 * 32 * 32);
      for (auto& v : x) v = u(rng);
      ks.push_back(argmax(logits(net, x)));
      xs.push_back(std::move(x));
    }
    std::printf("VNN-COMP 2021 CIFAR-10 resnet_2b: %zu random [0,1] images (mt19937_64 seeds 2021+i), F = logit of the predicted label\n",
                xs.size());
    rows.push_back(study("resnet_2b (rand)", net, xs, ks, check, verbose));
  }
#else
  std::printf("built without nnlens::onnx: only the Fashion-MNIST part runs\n");
  (void)models;
  (void)n_res;
#endif

  // Fashion-MNIST LeNet-5 trained with the project's recipe ----------------------------------------
  if (fs::exists(fashion)) {
    const auto trn = io::load_mnist(fashion, "train", tb.train_limit);
    const auto test = io::load_mnist(fashion, "t10k");
    std::printf("Fashion-MNIST LeNet-5 (project recipe, %zu epochs):\n", tb.epochs);
    auto net_f = std::make_unique<FashionLeNet5>();
    fashion_lenet5(*net_f, trn, test, tb);
    const auto net = network_cast<double>(*net_f);
    std::vector<std::vector<double>> xs;
    std::vector<std::size_t> ks;
    for (const auto& im : fashion_test_images(test, n_img)) xs.push_back(to_input(im.raw)), ks.push_back(im.label);
    std::printf("  %zu test images, F = logit of the true label\n", xs.size());
    rows.push_back(study("Fashion LeNet-5", net, xs, ks, check, verbose));
  } else {
    std::printf("skipping Fashion-MNIST: %s not found\n", fashion.string().c_str());
  }

  // Tables -----------------------------------------------------------------------------------------
  std::printf("\nTable 1: mean relative error of the m~ left Riemann sum vs exact IG (m~: smallest m in [20,1000], completeness < 1%%)\n");
  std::printf("  %-18s %7s %9s %10s %10s\n", "network", "images", "m~ avg", "error %", "no m~");
  for (const auto& r : rows)
    std::printf("  %-18s %7zu %9s %10s %10zu\n", r.net.c_str(), r.images, fmt(mean(r.mt), "%.1f").c_str(), fmt(100 * mean(r.err_mt)).c_str(),
                r.no_mt);
  std::printf("  paper (ERAN CIFAR10, 100 images): convsmall 24.95, convmedium 24.05, convbig 45.34\n");

  std::printf("\nTable 2: average samples needed to reach 5%% mean relative error (n..n+4 all below; dropped = never within 1006)\n");
  std::printf("  %-18s %10s %9s %9s %9s %14s %11s\n", "network", "exact", "left", "right", "trap.", "dropped l/r/t", "trap worse");
  for (const auto& r : rows)
    std::printf("  %-18s %10.2f %9s %9s %9s %8zu/%zu/%zu %11zu\n", r.net.c_str(), mean(r.pieces), fmt(mean(r.s_left)).c_str(),
                fmt(mean(r.s_right)).c_str(), fmt(mean(r.s_trap)).c_str(), r.no_left, r.no_right, r.no_trap, r.trap_worse);
  std::printf("  paper: convsmall  2582.74 136.74 139.40  91.67\n");
  std::printf("         convmedium 3578.89 150.31 147.59  91.57\n");
  std::printf("         convbig   14064.65 269.43 278.20 222.79\n");
  std::printf("\ntotal %.1f s; self-checks %s\n", total.seconds(), g_ok ? "passed" : "FAILED");
  return g_ok ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "exactline_ig: %s\n", e.what());
  return 1;
}
