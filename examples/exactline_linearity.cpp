// examples/exactline_linearity.cpp -- is an FGSM step "linear"?  Density of linear pieces along
// FGSM lines vs random lines around test images (the ExactLine paper's §5, Tables 3 and 4;
// docs/specs/exactline.md#3c-linearity-of-adversarial-directions; docs/exactline-linearity.md).
//
//   exactline_linearity [--quick] [--images N] [--epochs E] [--train-limit N] [--fgsm-eps E]
//                       [--no-robust] [--models DIR] [--fashion DIR] [--cache DIR] [--verbose]
//
// Protocol (the paper's code): for each correctly classified image with raw pixels p in 0..255,
//   FGSM +3 %:  s = sign(d logit[(label + 1) mod 10] / dx) at the image, end = clip(p + s * floor(0.03 p), 0, 255)
//   random j:   s = +-1 from mt19937_64(20 i + j), j = 0..3, the same magnitude rule (i = image index)
// the network input is p / 255; density = (#endpoints of ExactLine's partition) / ||end - start||_2
// in that input space; ratio = density(FGSM) / density(random j): four per image, reported as
// median (25 %, 75 %).  Gradient-error follow-up on each FGSM line: mean over features of
// |g_start - g_piece| / |g_piece + 1e-12| (g = gradient of the FGSM target logit), averaged over
// the pieces weighted by their length.  Table 4: density(normal) / density(robust) on the same
// lines (same image and random direction; each network its own FGSM direction), for the
// Fashion-MNIST MLP and its FGSM-adversarially-trained copy.
// Networks: DeepXplore's MNIST LeNet-1/4/5 (ONNX; their 44 real seed digits; the label is the three
// nets' common prediction, so every seed counts as "correct") and the project's own Fashion-MNIST
// LeNet-5 and MLP 784-512-256-10 (trained here, weights cached in --cache), plus the robust MLP.
// Self-checks (exit status 1 when one fails): every line is a valid partition (0 = t_0 < ... <
// t_k = 1), its end values equal a forward pass at the end point (1e-9 relative), and every
// density is finite and positive.
#include <array>
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

bool g_ok = true;
fs::path g_svg_dir;  // --out: Fig. 4 for the first image of every network (empty: none)

struct image_lines {
  bool used = false;
  double d_fgsm = std::nan(""), grad_err = std::nan("");
  std::array<double, 4> d_rand{};
  std::size_t pieces_fgsm = 0, pieces_rand = 0;
  bool flipped = false;  // the FGSM end point is classified differently
};

struct net_study {
  std::string name;
  std::vector<image_lines> per_image;  // indexed like the image list
  std::size_t wrong = 0, degenerate = 0;
  double seconds = 0;
};

/// One ExactLine run with the self-checks.
template <class Net>
line_result<double> checked_line(const Net& net, const std::vector<double>& a, const std::vector<double>& b, const std::string& what) {
  auto r = exact_line<double>(execution::par, net, a, b);
  bool ok = r.t.size() >= 2 && r.t.front() == 0 && r.t.back() == 1;
  for (std::size_t j = 0; ok && j + 1 < r.t.size(); ++j) ok = r.t[j] < r.t[j + 1];
  const auto y = logits(net, b);
  double scale = 1, dev = 0;
  for (std::size_t o = 0; o < y.size(); ++o) scale = std::max(scale, std::abs(y[o])), dev = std::max(dev, std::abs(y[o] - r.output(r.pieces())[o]));
  const double dens = line_density(r);
  if (!ok || !(dev <= 1e-9 * scale) || !std::isfinite(dens) || !(dens > 0)) {
    std::printf("  FAIL %s: partition ok %d, |end - forward| = %.3g, density %.6g\n", what.c_str(), int(ok), dev, dens);
    g_ok = false;
  }
  return r;
}

std::vector<double> perturb(const std::vector<double>& raw, const std::vector<double>& sign) {
  std::vector<double> e(raw.size());
  for (std::size_t i = 0; i < raw.size(); ++i) e[i] = std::clamp(raw[i] + sign[i] * std::floor(0.03 * raw[i]), 0.0, 255.0);
  return e;
}

template <class Net>
net_study run_net(const std::string& name, const Net& net, const std::vector<image>& imgs, bool verbose) {
  net_study s;
  s.name = name;
  s.per_image.resize(imgs.size());
  bool drew = false;
  stopwatch sw;
  for (std::size_t i = 0; i < imgs.size(); ++i) {
    const auto& im = imgs[i];
    const auto x = to_input(im.raw);
    if (argmax(logits(net, x)) != im.label) {
      ++s.wrong;
      continue;
    }
    image_lines& L = s.per_image[i];
    const std::size_t target = (im.label + 1) % 10;
    const auto g = input_gradients<double>(net, x, 1, target);
    std::vector<double> sg(g.size());
    for (std::size_t k = 0; k < g.size(); ++k) sg[k] = g[k] > 0 ? 1.0 : (g[k] < 0 ? -1.0 : 0.0);
    const auto end_f = perturb(im.raw, sg);
    if (end_f == im.raw) {  // nothing to perturb (no pixel >= 34 with a non-zero gradient sign)
      ++s.degenerate;
      continue;
    }
    const auto xf = to_input(end_f);
    const auto lf = checked_line(net, x, xf, name + " " + im.name + " FGSM");
    L.d_fgsm = line_density(lf);
    L.pieces_fgsm = lf.pieces();
    L.flipped = argmax(logits(net, xf)) != im.label;
    {  // gradient error: the tangent at the start vs the real gradient on each piece
      const auto gp = piece_gradients(net, lf, target);
      const std::size_t d = x.size();
      double acc = 0;
      for (std::size_t j = 0; j < lf.pieces(); ++j) {
        double e = 0;
        for (std::size_t k = 0; k < d; ++k) e += std::abs(g[k] - gp[j * d + k]) / std::abs(gp[j * d + k] + 1e-12);
        acc += (lf.t[j + 1] - lf.t[j]) * e / double(d);
      }
      L.grad_err = acc;
    }
    bool all = true;
    std::vector<line_result<double>> fig{lf};  // Fig. 4: the FGSM line, then the random ones
    for (std::size_t j = 0; j < 4; ++j) {
      std::mt19937_64 rng(20 * i + j);
      std::vector<double> sr(x.size());
      for (auto& v : sr) v = (rng() & 1) ? 1.0 : -1.0;
      const auto end_r = perturb(im.raw, sr);
      if (end_r == im.raw) {
        all = false;
        break;
      }
      const auto lr = checked_line(net, x, to_input(end_r), name + " " + im.name + " random " + std::to_string(j));
      L.d_rand[j] = line_density(lr);
      L.pieces_rand += lr.pieces();
      fig.push_back(lr);
    }
    if (!all) {
      ++s.degenerate;
      continue;
    }
    L.used = true;
    if (!g_svg_dir.empty() && !drew) {  // the first used image
      drew = true;
      fs::create_directories(g_svg_dir);
      svg_options so;
      so.title = name + ", image " + im.name + ": line 0 = FGSM +3%, lines 1-4 = random signs (ticks: linear pieces)";
      std::ofstream(g_svg_dir / (file_name(name) + "_lines.svg")) << line_svg(fig, class_rule::argmax, {}, so);
    }
    if (verbose)
      std::printf("  %s %s: FGSM %zu pieces (density %.3g%s), random %.1f pieces avg, gradient error %.3g\n", name.c_str(),
                  im.name.c_str(), L.pieces_fgsm, L.d_fgsm, L.flipped ? ", label flips" : "", double(L.pieces_rand) / 4, L.grad_err);
  }
  s.seconds = sw.seconds();
  std::size_t used = 0, pf = 0, pr = 0, flips = 0;
  for (const auto& L : s.per_image)
    if (L.used) ++used, pf += L.pieces_fgsm, pr += L.pieces_rand, flips += L.flipped;
  std::printf("  %-20s %3zu lines x5 (%zu misclassified, %zu degenerate skipped): FGSM %.1f pieces avg, random %.1f; FGSM end flips "
              "the label on %zu; %.1f s\n",
              name.c_str(), used, s.wrong, s.degenerate, used ? double(pf) / double(used) : 0.0,
              used ? double(pr) / double(4 * used) : 0.0, flips, s.seconds);
  std::fflush(stdout);
  return s;
}

struct summary {
  double med, q25, q75;
  std::size_t n;
};
summary summarize(const std::vector<double>& v) { return {quantile(v, 0.5), quantile(v, 0.25), quantile(v, 0.75), v.size()}; }

std::vector<double> fgsm_random_ratios(const net_study& s) {
  std::vector<double> r;
  for (const auto& L : s.per_image)
    if (L.used)
      for (double d : L.d_rand) r.push_back(L.d_fgsm / d);
  return r;
}

}  // namespace

int main(int argc, char** argv) try {
  const cli a(argc, argv);
  const bool quick = a.has("quick");
  const fs::path models = a.str("models", "../shared/models");
  const fs::path fashion = a.str("fashion", "/usr/share/datasets/fashion-mnist");
  const std::size_t n_img = a.num("images", quick ? 3 : 500);  // DeepXplore has 44 seeds
  const bool verbose = a.has("verbose"), robust = !a.has("no-robust");
  g_svg_dir = a.str("out", "exactline_linearity_out");
  training_budget tb;
  tb.epochs = a.num("epochs", quick ? 1 : 12);
  tb.train_limit = a.num("train-limit", quick ? 2000 : 0);
  tb.fgsm_eps = a.real("fgsm-eps", 0.1);
  tb.cache_dir = a.str("cache", "exactline_models");
  stopwatch total;
  std::vector<net_study> studies_run;

#if NNLENS_EXAMPLE_WITH_ONNX
  const fs::path dx = models / "deepxplore-mnist";
  if (fs::exists(dx / "expected.csv")) {
    const auto set = load_deepxplore(dx, std::min<std::size_t>(n_img, quick ? 2 : 44));
    std::printf("DeepXplore MNIST LeNets: %zu seed images (*_orig.png; label = the three nets' common prediction)\n", set.images.size());
    for (const char* m : {"lenet1", "lenet4", "lenet5"}) {
      if (quick && std::string(m) != "lenet1") continue;
      const auto net = network_cast<double>(io::load_onnx((dx / (std::string(m) + ".onnx")).string()));
      studies_run.push_back(run_net(std::string("DeepXplore ") + m, net, set.images, verbose));
    }
  }
#else
  std::printf("built without nnlens::onnx: only the Fashion-MNIST part runs\n");
  (void)models;
#endif

  std::optional<net_study> mlp_normal, mlp_robust;
  if (fs::exists(fashion)) {
    const auto trn = io::load_mnist(fashion, "train", tb.train_limit);
    const auto test = io::load_mnist(fashion, "t10k");
    const auto imgs = fashion_test_images(test, n_img);
    std::printf("Fashion-MNIST (%zu epochs on %zu images; the first %zu test images, true labels):\n", tb.epochs,
                tb.train_limit ? tb.train_limit : std::size_t(60000), imgs.size());
    {
      auto lenet = std::make_unique<FashionLeNet5>();
      fashion_lenet5(*lenet, trn, test, tb);
      studies_run.push_back(run_net("Fashion LeNet-5", network_cast<double>(*lenet), imgs, verbose));
    }
    auto mlp = std::make_unique<FashionMLP>();
    fashion_mlp(*mlp, trn, test, tb);
    std::printf("  fashion_mlp: FGSM(eps %.2f) accuracy on 2000 test images %.2f%%\n", tb.fgsm_eps, 100 * fgsm_accuracy(*mlp, test, tb.fgsm_eps));
    studies_run.push_back(run_net("Fashion MLP", network_cast<double>(*mlp), imgs, verbose));
    mlp_normal = studies_run.back();
    if (robust) {
      auto rob = std::make_unique<FashionMLP>();
      fashion_mlp_fgsm(*rob, trn, test, tb);
      std::printf("  fashion_mlp_fgsm: FGSM(eps %.2f) accuracy on 2000 test images %.2f%%\n", tb.fgsm_eps,
                  100 * fgsm_accuracy(*rob, test, tb.fgsm_eps));
      studies_run.push_back(run_net("Fashion MLP FGSM-AT", network_cast<double>(*rob), imgs, verbose));
      mlp_robust = studies_run.back();
    }
  } else {
    std::printf("skipping Fashion-MNIST: %s not found\n", fashion.string().c_str());
  }

  std::printf("\nTable 3: density(FGSM line) / density(random line), 4 ratios per image: median (25%%, 75%%)\n");
  std::printf("  %-22s %7s %8s %8s %8s   %s\n", "network", "ratios", "median", "25%", "75%", "gradient error (FGSM lines): mean, median");
  for (const auto& s : studies_run) {
    const auto r = summarize(fgsm_random_ratios(s));
    std::vector<double> ge;
    for (const auto& L : s.per_image)
      if (L.used) ge.push_back(L.grad_err);
    std::printf("  %-22s %7zu %8.2f %8.2f %8.2f   %.3g%%, %.3g%%\n", s.name.c_str(), r.n, r.med, r.q25, r.q75, 100 * mean(ge),
                100 * quantile(ge, 0.5));
  }
  std::printf("  paper (ERAN ConvSmall, MNIST block as recovered): Normal 1.36 (0.99, 1.76); DiffAI? 0.98 (0.92, 1.38); PGD? 1.22 (0.97, 1.51)\n");
  std::printf("  paper: gradient error on the normal networks' FGSM lines > 250%% on average\n");

  if (mlp_normal && mlp_robust) {
    std::vector<double> rf, rr;
    for (std::size_t i = 0; i < mlp_normal->per_image.size(); ++i) {
      const auto &A = mlp_normal->per_image[i], &B = mlp_robust->per_image[i];
      if (!A.used || !B.used) continue;
      rf.push_back(A.d_fgsm / B.d_fgsm);
      for (std::size_t j = 0; j < 4; ++j) rr.push_back(A.d_rand[j] / B.d_rand[j]);
    }
    const auto f = summarize(rf), r = summarize(rr);
    std::printf("\nTable 4: density(normal MLP) / density(FGSM-trained MLP) on corresponding lines: median (25%%, 75%%)\n");
    std::printf("  FGSM   %.2f (%.2f, %.2f)  [%zu lines]\n", f.med, f.q25, f.q75, f.n);
    std::printf("  random %.2f (%.2f, %.2f)  [%zu lines]\n", r.med, r.q25, r.q75, r.n);
    std::printf("  paper MNIST ConvSmall: Normal/DiffAI FGSM 3.05 (2.05, 4.11), random 2.50 (1.67, 3.00); Normal/PGD FGSM 0.88 (0.66, 1.14), "
                "random 0.80 (0.62, 1.00)\n");
  }
  std::printf("\ntotal %.1f s; self-checks %s\n", total.seconds(), g_ok ? "passed" : "FAILED");
  return g_ok ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "exactline_linearity: %s\n", e.what());
  return 1;
}
