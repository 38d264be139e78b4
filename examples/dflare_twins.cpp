// DFlare's compressed twins (docs/specs/dflare.md#4-evaluation-setup-and-headline-numbers (§4-§5); docs/compress.md): for the project's
// Fashion-MNIST LeNet-5, MLP and small ResNet, build the int8 (per tensor, per channel), DFlare-reference
// (weight-only, >= 1024 elements) and pruned (magnitude 50% / 80%, L1 channels 50%) twins, and
// report test accuracy, the number of test images on which a twin's top-1 label differs from the
// original's (DFlare's "triggering inputs already in the dataset", Table 1), and int8 vs float
// forward throughput.
//
//   dflare_twins [--models DIR] [--fashion DIR] [--limit N] [--calib N]
//
// --models: the folder with lenet5-, mlp- and resnet-fashion-mnist-e12-s1.nnlw
// (the project's trained models; default ./models-cache); --limit: test images (0 = all 10,000);
// --calib: training images used to calibrate the int8 activations (default 1000).  A missing model
// is skipped.  Exit status 1 if a per-channel int8 twin loses more than 2 points of accuracy.
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <nnlens/compress/magnitude.hpp>
#include <nnlens/compress/quantize.hpp>
#include <nnlens/io/idx.hpp>
#include <nnlens/io/weights.hpp>
#include <nnlens/nnlens.hpp>

#include "../tools/nnlens/lenet5_recipe.hpp"

namespace fs = std::filesystem;
using namespace nnlens;

using MLP = Sequential<Input<1, 28, 28>, Flatten, Dense<512>, ReLU, Dense<256>, ReLU, Dense<10>>;
/// The project's small residual network (examples/nnslicer_detect.cpp; models-cache/resnet-fashion-
/// mnist-e12-s1.nnlw): its block weights are quantised as dequantised floats, the blocks run in float.
using SmallResNet = Sequential<Input<1, 28, 28>, Conv2D<8, 3, 1, 1>, ReLU,
                               Residual<Block<Conv2D<8, 3, 1, 1>, ReLU, Conv2D<8, 3, 1, 1>>>, ReLU, MaxPool2D<2>,
                               Residual<Block<Conv2D<16, 3, 2, 1>, ReLU, Conv2D<16, 3, 1, 1>>, Block<Conv2D<16, 1, 2, 0>>>,
                               ReLU, Flatten, Dense<64>, ReLU, Dense<10>>;

namespace {

struct args {
  fs::path models = "models-cache";
  fs::path fashion = "/usr/share/datasets/fashion-mnist";
  std::size_t limit = 0, calib = 1000;
};

xt::xarray<float> slice(const xt::xarray<float>& x, std::size_t b0, std::size_t b1) {
  auto s = x.shape();
  std::vector<std::size_t> shp(s.begin(), s.end());
  const std::size_t per = x.size() / shp[0];
  shp[0] = b1 - b0;
  xt::xarray<float> r = xt::xarray<float>::from_shape(shp);
  std::copy_n(x.data() + b0 * per, (b1 - b0) * per, r.data());
  return r;
}

template <class Out>
std::vector<std::size_t> labels_of(const Out& y) {
  const std::size_t F = y.shape()[1], n = y.shape()[0];
  std::vector<std::size_t> r(n);
  for (std::size_t i = 0; i < n; ++i) {
    const float* p = y.data() + i * F;
    r[i] = std::size_t(std::max_element(p, p + F) - p);
  }
  return r;
}

/// CPU time of this thread (robust to other processes on a shared machine, unlike wall time).
double thread_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

/// Runs f(batch) over the test set in batches of 256; returns (labels, seconds).
template <class F>
std::pair<std::vector<std::size_t>, double> run_all(const xt::xarray<float>& x, F&& f) {
  std::vector<std::size_t> all;
  const std::size_t N = x.shape()[0], B = 256;
  double secs = 0;
  for (std::size_t b0 = 0; b0 < N; b0 += B) {
    const auto xb = slice(x, b0, std::min(N, b0 + B));
    const double t0 = thread_seconds();
    const auto y = f(xb);
    secs += thread_seconds() - t0;
    const auto l = labels_of(y);
    all.insert(all.end(), l.begin(), l.end());
  }
  return {all, secs};
}

template <class Net>
bool study(const char* name, const Net& net, const io::labelled_images<float>& test, const xt::xarray<float>& cal) {
  const std::size_t N = test.size();
  auto accuracy = [&](const std::vector<std::size_t>& l) {
    std::size_t ok = 0;
    for (std::size_t i = 0; i < N; ++i) ok += l[i] == test.labels[i];
    return 100.0 * double(ok) / double(N);
  };
  (void)run_all(test.images, [&](const auto& xb) { return forward(net, xb); });  // warm-up (buffers, caches)
  const auto float_run = run_all(test.images, [&](const auto& xb) { return forward(net, xb); });
  const auto& lf = float_run.first;  // not a structured binding: the lambdas below capture it (clang 14)
  const double tf = float_run.second;
  const double acc_f = accuracy(lf);
  std::printf("\n%s (%zu test images)\n", name, N);
  std::printf("  %-34s %8s %10s %12s\n", "twin", "acc %", "deviate", "images/s");
  std::printf("  %-34s %8.2f %10s %12.0f\n", "float (original)", acc_f, "-", double(N) / tf);
  bool ok = true;
  auto row = [&](const char* what, const std::vector<std::size_t>& l, double secs) {
    std::size_t dev = 0;
    for (std::size_t i = 0; i < N; ++i) dev += l[i] != lf[i];
    std::printf("  %-34s %8.2f %10zu %12.0f\n", what, accuracy(l), dev, secs > 0 ? double(N) / secs : 0.0);
  };
  using compress::quant_granularity;
  for (auto g : {quant_granularity::per_tensor, quant_granularity::per_channel}) {
    compress::quantize_options o;
    o.granularity = g;
    const auto q = compress::quantize(net, cal, o);
    const auto [lq, tq] = run_all(test.images, [&](const auto& xb) { return q.forward(xb); });
    const bool pc = g == quant_granularity::per_channel;
    row(pc ? "int8 per channel" : "int8 per tensor", lq, tq);
    if (pc && accuracy(lq) < acc_f - 2.0) ok = false;
  }
  {
    compress::quantize_options o;
    o.mode = compress::quant_mode::weight_only;
    const auto q = compress::quantize_weights(net, o);
    const auto [lq, tq] = run_all(test.images, [&](const auto& xb) { return q.forward(xb); });
    row("weight-only int8 per channel", lq, tq);
  }
  {
    const auto q = compress::quantize_weights(net, compress::quantize_options::dflare_reference());
    const auto [lq, tq] = run_all(test.images, [&](const auto& xb) { return q.forward(xb); });
    row("DFlare reference (w-only, >=1024)", lq, tq);
  }
  for (double r : {0.5, 0.8}) {
    const Net p = compress::magnitude_prune(net, r);
    const auto [lp, tp] = run_all(test.images, [&](const auto& xb) { return forward(p, xb); });
    const std::string what = "magnitude " + std::to_string(int(r * 100)) + "% (layerwise)";
    row(what.c_str(), lp, tp);
  }
  {
    compress::magnitude_options g;
    g.scope = compress::prune_scope::global;
    const Net p = compress::magnitude_prune(net, 0.8, g);
    const auto [lp, tp] = run_all(test.images, [&](const auto& xb) { return forward(p, xb); });
    row("magnitude 80% (global)", lp, tp);
  }
  for (double r : {0.25, 0.5}) {
    const Net p = compress::channel_prune(net, r);
    const auto [lp, tp] = run_all(test.images, [&](const auto& xb) { return forward(p, xb); });
    const std::string what = "L1 channels " + std::to_string(int(r * 100)) + "%";
    row(what.c_str(), lp, tp);
  }
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  args a;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", s.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (s == "--models") a.models = next();
    else if (s == "--fashion") a.fashion = next();
    else if (s == "--limit") a.limit = std::stoul(next());
    else if (s == "--calib") a.calib = std::stoul(next());
    else {
      std::fprintf(stderr, "usage: dflare_twins [--models DIR] [--fashion DIR] [--limit N] [--calib N]\n");
      return 2;
    }
  }
  try {
    const auto test = io::load_mnist<float>(a.fashion, "t10k", a.limit);
    const auto cal = io::load_mnist<float>(a.fashion, "train", a.calib).images;
    std::printf("DFlare twins on Fashion-MNIST; int8 calibrated on the first %zu training images; "
                "one thread, batches of 256, images/s from thread CPU time\n", std::size_t(cal.shape()[0]));
    bool ok = true;
    const fs::path l5 = a.models / "lenet5-fashion-mnist-e12-s1.nnlw", mlp = a.models / "mlp-fashion-mnist-e12-s1.nnlw";
    if (fs::exists(l5)) ok = study("LeNet-5", io::load_weights<demo::LeNet5>(l5), test, cal) && ok;
    else std::printf("skipped: %s not found\n", l5.string().c_str());
    if (fs::exists(mlp)) ok = study("MLP 784-512-256-10", io::load_weights<MLP>(mlp), test, cal) && ok;
    else std::printf("skipped: %s not found\n", mlp.string().c_str());
    const fs::path rn = a.models / "resnet-fashion-mnist-e12-s1.nnlw";
    if (fs::exists(rn)) ok = study("small ResNet (2 residual blocks)", io::load_weights<SmallResNet>(rn), test, cal) && ok;
    else std::printf("skipped: %s not found\n", rn.string().c_str());
    return ok ? 0 : 1;
  } catch (const nnlens::error& e) {
    std::fprintf(stderr, "dflare_twins: %s\n", e.what());
    return 1;
  }
}
