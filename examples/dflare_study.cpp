// examples/dflare_study.cpp -- DFlare's evaluation (docs/specs/dflare.md#4-evaluation-setup-and-headline-numbers, Tables 1, 4, 6, 7) on the
// project's models: docs/dflare.md.
//
// Pairs (original f, compressed twin g):
//   Fashion-MNIST, the project's LeNet-1 (6 epochs), LeNet-5 and MLP 784-512-256-10 (12 epochs,
//   models-cache/; trained with the demo recipe when missing), each against
//     int8     full int8 inference (compress::quantize: int8 weights per channel, int8 activations
//              calibrated on 1,000 training images, int32 accumulation)
//     q8       DFlare's reference rule (compress::quantize_options::dflare_reference(): weight-only
//              int8 of every weight tensor with >= 1024 elements, TFLite's rule)
//     prune    50% unstructured magnitude pruning, per layer (compress::magnitude_prune)
//   DeepXplore's MNIST LeNet-1 and LeNet-5 (../shared/models/deepxplore-mnist, with nnlens::onnx),
//   against their q8 and int8 twins (int8 calibrated on DeepXplore's 96 images), seeded with
//   those 96 images.
// For each pair: the accuracies (Fashion-MNIST test set) and the test images on which f and g
// already disagree (Table 1); then over the seeds (test images in [0, 255], in order)
//   DFlare      the paper's rules (spec defaults), per-seed budget --queries / --seconds
//   DFlare_D    the ablation without novelty (fitness = D only), on --ablation-seeds seeds
//   DFlare_R    uniform operator selection, on --ablation-seeds seeds
//   DiffChaser  the genetic baseline, on --diffchaser-seeds seeds with --diffchaser-seconds each
//   DRepair     5-fold cross-validation of the post-processor on DFlare's (seed, trigger) pairs
// Success rate, mean time and mean queries per triggering input (over the successful seeds),
// as Table 4; markdown tables at the end.
//
//   dflare_study [--fashion DIR] [--cache DIR] [--models DIR] [--pairs fashion,deepxplore]
//                [--seeds 100] [--queries 10000] [--seconds 30] [--ablation-seeds 30]
//                [--diffchaser-seeds 10] [--diffchaser-seconds 5] [--weights LENET5.nnlw] [--quick]
//                [--rules paper|reference|both] [--repair 0|1]
//   dflare_study --efficiency [--runs 5] [--models DIR] [--write-csv DIR]
// --rules: which acceptance and selection rules DFlare, DFlare_D and DFlare_R follow (spec §2.3,
// §2.5): paper (default: acceptance::paper, selection_rule::paper; DFlare_D = no_novelty with
// the paper's selection), reference (the reference code's, which produced the paper's Tables 4-10:
// acceptance::reference + selection_rule::reference; DFlare_D = code mode "c", no_novelty with the
// reference selection; DFlare_R = the reference acceptance with uniform selection), or both (the
// two tables, same seeds and budgets).  --repair 0 skips DRepair.
// --efficiency: the new user's case of docs/dflare.md ("Queries per trigger on a quantised
// LeNet-5"): DeepXplore's LeNet-5 against what `nnlens compress --int8` writes (the dequantised
// weight-only part of compress::quantize, calibrated on the 52 non-seed images), seeded with the
// first 20 *_orig images (sorted by name), 10,000 queries / 180 s per seed; DFlare with the paper's
// rules, the reference rules, and with the options beyond the spec (skip_repeats, the
// logit-margin distance), for RNG seeds 1..--runs.  --write-csv DIR writes seeds20.csv and calib52.csv (rows in [0, 1]) for the tool.
// --quick (the ctest): LeNet-5 only (the cached demo weights, else 1 epoch on 5,000 images cached
// in --cache), its int8 and q8 twins, 10 seeds, ablation 5 seeds, DiffChaser 2 seeds of 1 s.
// Self-checks (exit status 1): every reported triggering input makes f and g disagree when
// queried again; DFlare with a query budget gives the same result sequentially and in parallel;
// rates in [0, 1].
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nnlens/compress/magnitude.hpp>
#include <nnlens/compress/quantize.hpp>
#include <nnlens/difftest/black_box.hpp>
#include <nnlens/difftest/dflare.hpp>
#include <nnlens/difftest/diffchaser.hpp>
#include <nnlens/difftest/repair.hpp>
#include <nnlens/io/csv.hpp>
#include <nnlens/io/idx.hpp>
#include <nnlens/io/image.hpp>
#include <nnlens/io/weights.hpp>
#include <nnlens/nnlens.hpp>
#ifdef NNLENS_EXAMPLE_WITH_ONNX
#include <nnlens/io/onnx.hpp>
#endif

#include "../tools/nnlens/lenet5_recipe.hpp"
#include "example_cli.hpp"
#include "fashion_models.hpp"

using namespace nnlens;
using namespace nnlens::difftest;
using namespace nnlens_examples;
namespace fs = std::filesystem;

namespace {

using LeNet1 = Sequential<Input<1, 28, 28>, Conv2D<4, 5, 1, 2>, ReLU, MaxPool2D<2>, Conv2D<12, 5, 1, 2>, ReLU, MaxPool2D<2>,
                          Flatten, Dense<10>>;
using DxLeNet5 = Sequential<Input<1, 28, 28>, Conv2D<6, 5, 1, 2>, ReLU, MaxPool2D<2>, Conv2D<16, 5, 1, 2>, ReLU, MaxPool2D<2>,
                            Flatten, Dense<120>, ReLU, Dense<84>, ReLU, Dense<10>>;

int failures = 0;
void check(bool ok, const std::string& what) {
  if (!ok) {
    ++failures;
    std::printf("SELF-CHECK FAILED: %s\n", what.c_str());
  }
}

struct settings {
  std::size_t seeds = 100, queries = 10000, ablation_seeds = 30, diffchaser_seeds = 10;
  double seconds = 30, diffchaser_seconds = 5;
  bool quick = false, paper_rules = true, reference_rules = false, repair = true;
};

/// The rules of one run of DFlare and its two ablations (spec §2.3, §2.5, Table 6).
struct rule_set {
  acceptance accept;          // DFlare and DFlare_R
  selection_rule selection;   // DFlare and DFlare_D
};
constexpr rule_set paper_rules{acceptance::paper, selection_rule::paper};
constexpr rule_set reference_rules{acceptance::reference, selection_rule::reference};

/// A quantised twin as a black box on raw pixels in [0, 255] (the network reads pixels / 255).
template <class Net>
black_box wrap_twin(std::shared_ptr<const compress::quantized_network<Net>> q, std::string name) {
  return wrap(
      [q](std::span<const float> x, std::size_t n, std::span<float> probs) {
        xt::xarray<float> a = xt::xarray<float>::from_shape({n, std::size_t(1), std::size_t(28), std::size_t(28)});
        for (std::size_t i = 0; i < a.size(); ++i) a.data()[i] = x[i] / 255.0f;
        const xt::xarray<float> p = q->predict(a);
        std::copy_n(p.data(), p.size(), probs.data());
      },
      784, 10, std::move(name));
}

/// Top-1 labels of a black box on n raw-pixel images.
std::vector<std::size_t> labels_of(const black_box& b, std::span<const float> x, std::size_t n) {
  std::vector<float> p(n * b.classes);
  b(x, n, p);
  std::vector<std::size_t> r(n);
  for (std::size_t i = 0; i < n; ++i) r[i] = top1(std::span<const float>(p.data() + i * b.classes, b.classes));
  return r;
}

struct row {
  std::string pair;
  double acc_f = -1, acc_g = -1;  // < 0: no labelled test set
  std::size_t already = 0, test = 0;
  dflare_summary dflare, dflare_d, dflare_r, chaser;
  dflare_summary ref, ref_d, ref_r;  // the same under the reference code's rules (--rules reference|both)
  repair_metrics repair;
  std::size_t repair_pairs = 0;
};
std::vector<row> rows;

std::string srq(const dflare_summary& s) {
  if (s.searched == 0) return "n/a";
  char b[96];
  std::snprintf(b, sizeof b, "%.1f / %.4f / %.1f", 100 * s.success_rate, s.mean_seconds, s.mean_queries);
  return b;
}

void check_triggers(const black_box& f, const black_box& g, const dflare_result& r, const std::string& what) {
  std::size_t bad = 0;
  for (const auto& s : r.seeds) {
    if (!s.found() || s.input.empty()) continue;
    const auto lf = labels_of(f, s.input, 1), lg = labels_of(g, s.input, 1);
    bad += lf[0] == lg[0] || lf[0] != s.label_f || lg[0] != s.label_g;
    bad += *std::min_element(s.input.begin(), s.input.end()) < 0.f || *std::max_element(s.input.begin(), s.input.end()) > 255.f;
  }
  check(bad == 0, what + ": a reported triggering input does not trigger (or leaves [0, 255])");
}

/// The study of one pair over raw-pixel seeds; test = labelled test images for the accuracies.
void study(const std::string& name, const black_box& f, const black_box& g, const std::vector<float>& seeds, std::size_t n,
           const std::vector<float>* test, const std::vector<std::size_t>* test_labels, const settings& st) {
  row rw;
  rw.pair = name;
  stopwatch sw;
  const std::vector<float>& tx = test ? *test : seeds;
  const std::size_t tn = tx.size() / 784;
  const auto lf = labels_of(f, tx, tn), lg = labels_of(g, tx, tn);
  rw.test = tn;
  std::size_t ok_f = 0, ok_g = 0;
  for (std::size_t i = 0; i < tn; ++i) {
    rw.already += lf[i] != lg[i];
    if (test_labels) ok_f += lf[i] == (*test_labels)[i], ok_g += lg[i] == (*test_labels)[i];
  }
  if (test_labels) rw.acc_f = double(ok_f) / double(tn), rw.acc_g = double(ok_g) / double(tn);

  dflare_options o;
  o.image = {1, 28, 28};
  o.max_queries = st.queries;
  o.max_seconds = st.seconds;
  o.seed = 1;
  const std::size_t ns = std::min(n, st.seeds);
  const std::size_t na = std::min(ns, st.ablation_seeds);
  const std::span<const float> sd(seeds.data(), ns * 784);
  // DFlare on every seed, DFlare_D (fitness D only) and DFlare_R (uniform selection) on the first na
  auto run_rules = [&](rule_set rs, dflare_summary& full, dflare_summary& d_only, dflare_summary& uniform, const char* tag) {
    dflare_options b = o;
    b.accept = rs.accept;
    b.selection = rs.selection;
    const auto r = dflare(execution::par, f, g, sd, ns, b);
    full = r.summary();
    check_triggers(f, g, r, name + " DFlare (" + tag + " rules)");
    check(full.success_rate >= 0 && full.success_rate <= 1, name + ": success rate outside [0, 1]");
    dflare_options d = b;
    d.accept = acceptance::no_novelty;
    d_only = dflare(execution::par, f, g, sd.first(na * 784), na, d).summary();
    dflare_options u = b;
    u.selection = selection_rule::uniform;
    uniform = dflare(execution::par, f, g, sd.first(na * 784), na, u).summary();
    return r;
  };
  dflare_result r;
  if (st.paper_rules) r = run_rules(paper_rules, rw.dflare, rw.dflare_d, rw.dflare_r, "paper");
  if (st.reference_rules) {
    auto rr = run_rules(reference_rules, rw.ref, rw.ref_d, rw.ref_r, "reference");
    if (!st.paper_rules) r = std::move(rr);
  }

  // determinism: a query budget alone gives the same result sequentially and in parallel
  {
    dflare_options d = o;
    if (!st.paper_rules) d.accept = reference_rules.accept, d.selection = reference_rules.selection;
    d.max_seconds = 0;
    d.max_queries = 200;
    const std::size_t nd = std::min<std::size_t>(ns, 8);
    const auto a = dflare(execution::seq, f, g, sd.first(nd * 784), nd, d);
    const auto b = dflare(execution::par, f, g, sd.first(nd * 784), nd, d);
    bool same = a.seeds.size() == b.seeds.size();
    for (std::size_t i = 0; same && i < a.seeds.size(); ++i)
      same = a.seeds[i].status == b.seeds[i].status && a.seeds[i].queries == b.seeds[i].queries && a.seeds[i].input == b.seeds[i].input;
    check(same, name + ": DFlare seq != par under a query budget");
  }

  {
    diffchaser_options c;
    c.image = {1, 28, 28};
    c.max_seconds = st.diffchaser_seconds;
    c.max_queries = 0;
    c.seed = 1;
    const std::size_t nc = std::min(ns, st.diffchaser_seeds);
    const auto rc = diffchaser(execution::par, f, g, sd.first(nc * 784), nc, c);
    rw.chaser = rc.summary();
    check_triggers(f, g, rc, name + " DiffChaser");
  }
  // DRepair: 5-fold cross-validation on DFlare's (seed, trigger) pairs
  if (st.repair) {
    const auto pairs = collect_repair_pairs(g, r, sd);
    rw.repair_pairs = pairs.size();
    if (pairs.size() >= 10) {
      repair_options ro;
      ro.epochs = st.quick ? 20 : 200;
      const auto folds = cross_validate_repair(pairs, 5, 0, ro);
      rw.repair = mean(std::span<const repair_metrics>(folds));
    }
  }
  std::printf("%-26s acc %6.2f -> %6.2f, already differ %zu/%zu | DFlare %s | D %s | R %s | reference rules: DFlare %s | D %s | R %s | "
              "DiffChaser %s | repair %.1f/%.1f/%.1f (%zu pairs) [%.0f s]\n",
              name.c_str(), 100 * rw.acc_f, 100 * rw.acc_g, rw.already, rw.test, srq(rw.dflare).c_str(), srq(rw.dflare_d).c_str(),
              srq(rw.dflare_r).c_str(), srq(rw.ref).c_str(), srq(rw.ref_d).c_str(), srq(rw.ref_r).c_str(), srq(rw.chaser).c_str(),
              100 * rw.repair.repair_ratio, 100 * rw.repair.inducing_ratio, 100 * rw.repair.improvement_ratio, rw.repair_pairs,
              sw.seconds());
  std::fflush(stdout);
  rows.push_back(rw);
}

template <class Net>
void get_model(Net& net, const fs::path& file, const io::labelled_images<float>& train, std::size_t epochs, std::size_t limit) {
  initialize(net, 1);
  if (fs::exists(file)) {
    io::load_weights(file, net);
    return;
  }
  std::printf("training %s (%zu epochs, demo recipe) ...\n", file.string().c_str(), epochs);
  std::fflush(stdout);
  io::labelled_images<float> t = train;
  if (limit && t.size() > limit) {
    t.images = xt::xarray<float>::from_shape({limit, std::size_t(1), std::size_t(28), std::size_t(28)});
    std::copy_n(train.images.data(), t.images.size(), t.images.data());
    t.labels.assign(train.labels.begin(), train.labels.begin() + std::ptrdiff_t(limit));
  }
  demo::lenet5_recipe r;
  r.epochs = epochs;
  r.fine_epochs = epochs >= 4 ? 3 : 0;
  demo::train_with_recipe(net, t, r, false);
  fs::create_directories(file.parent_path());
  io::save_weights(file, net);
}

/// f and its twins (int8, q8, prune) on Fashion-MNIST.
template <class Net>
void fashion_pairs(const std::string& name, const Net& net, const io::labelled_images<float>& train, const std::vector<float>& seeds,
                   const std::vector<float>& test, const std::vector<std::size_t>& labels, const settings& st) {
  const auto f = wrap(net, name, normalization::divide_by(255));
  auto calib = xt::xarray<float>::from_shape({std::size_t(1000), std::size_t(1), std::size_t(28), std::size_t(28)});
  std::copy_n(train.images.data(), calib.size(), calib.data());
  auto q_int8 = std::make_shared<const compress::quantized_network<Net>>(compress::quantize(net, calib));
  auto q_q8 = std::make_shared<const compress::quantized_network<Net>>(
      compress::quantize_weights(net, compress::quantize_options::dflare_reference()));
  const std::size_t n = seeds.size() / 784;
  study(name + " / int8", f, wrap_twin(q_int8, name + "-int8"), seeds, n, &test, &labels, st);
  study(name + " / q8 (TFLite rule)", f, wrap_twin(q_q8, name + "-q8"), seeds, n, &test, &labels, st);
  if (!st.quick)
    study(name + " / prune 50%", f, wrap(compress::magnitude_prune(net, 0.5), name + "-prune50", normalization::divide_by(255)),
          seeds, n, &test, &labels, st);
}

#ifdef NNLENS_EXAMPLE_WITH_ONNX
/// --efficiency (header comment): queries per trigger on the new user's quantised LeNet-5.
void efficiency(const fs::path& models, std::size_t runs, const std::string& csv_dir) {
  const fs::path dir = models / "deepxplore-mnist";
  std::vector<fs::path> orig, rest;
  for (const auto& e : fs::directory_iterator(dir / "images"))
    if (e.path().extension() == ".png") (e.path().filename().string().find("_orig") != std::string::npos ? orig : rest).push_back(e.path());
  std::sort(orig.begin(), orig.end());
  std::sort(rest.begin(), rest.end());
  if (orig.size() < 20) throw data_error(dir.string() + ": fewer than 20 *_orig images");
  orig.resize(20);
  const auto xs = io::load_images<float>(orig), cal = io::load_images<float>(rest);
  if (!csv_dir.empty()) {
    fs::create_directories(csv_dir);
    io::write_csv(fs::path(csv_dir) / "seeds20.csv", xs);
    io::write_csv(fs::path(csv_dir) / "calib52.csv", cal);
  }
  std::vector<float> seeds(xs.size());
  for (std::size_t i = 0; i < seeds.size(); ++i) seeds[i] = std::round(xs.data()[i] * 255.0f);
  const DxLeNet5 net = io::load_onnx<DxLeNet5>((dir / "lenet5.onnx").string());
  const auto f = wrap(net, "lenet5", normalization::divide_by(255));
  const DxLeNet5 twin = compress::quantize(net, cal).dequantized();  // a copy: wrap(lvalue) does not own it
  const auto g = wrap(twin, "lenet5-int8-file", normalization::divide_by(255));
  std::printf("DeepXplore LeNet-5 vs `compress --int8` (weight-only part, calibrated on %zu images); %zu seeds; 10000 queries / 180 s\n"
              "| rules | RNG seed | success %% | queries per trigger | s per trigger |\n|---|---|---|---|---|\n",
              rest.size(), orig.size());
  struct variant {
    const char* name;
    rule_set rules;
    bool skip;
    distance_measure distance = distance_measure::top1_probability;
  };
  constexpr auto margin = distance_measure::logit_margin;
  for (const variant v : {variant{"paper (default)", paper_rules, false}, variant{"paper + skip_repeats", paper_rules, true},
                          variant{"paper + logit_margin", paper_rules, false, margin},
                          variant{"paper + logit_margin + skip_repeats", paper_rules, true, margin},
                          variant{"reference", reference_rules, false}, variant{"reference + skip_repeats", reference_rules, true},
                          variant{"reference + logit_margin + skip_repeats", reference_rules, true, margin}}) {
    double sum = 0, lo = INFINITY, hi = 0;
    for (std::size_t run = 1; run <= runs; ++run) {
      dflare_options o;
      o.image = {1, 28, 28};
      o.max_queries = 10000;
      o.max_seconds = 180;
      o.seed = run;
      o.accept = v.rules.accept;
      o.selection = v.rules.selection;
      o.skip_repeats = v.skip;
      o.distance = v.distance;
      const auto r = dflare(execution::par, f, g, seeds, orig.size(), o);
      check_triggers(f, g, r, std::string("efficiency ") + v.name);
      const auto s = r.summary();
      std::printf("| %s | %zu | %.1f | %.2f | %.4f |\n", v.name, run, 100 * s.success_rate, s.mean_queries, s.mean_seconds);
      sum += s.mean_queries, lo = std::min(lo, s.mean_queries), hi = std::max(hi, s.mean_queries);
    }
    std::printf("| %s | mean of %zu | | **%.2f** (%.2f-%.2f) | |\n", v.name, runs, sum / double(runs), lo, hi);
    std::fflush(stdout);
  }
}
#endif

}  // namespace

int main(int argc, char** argv) try {
  const cli c(argc, argv);
  settings st;
  st.quick = c.has("quick");
  st.seeds = c.num("seeds", st.quick ? 10 : 100);
  st.queries = c.num("queries", 10000);
  st.seconds = c.real("seconds", st.quick ? 5 : 30);
  st.ablation_seeds = c.num("ablation-seeds", st.quick ? 5 : 30);
  st.diffchaser_seeds = c.num("diffchaser-seeds", st.quick ? 2 : 10);
  st.diffchaser_seconds = c.real("diffchaser-seconds", st.quick ? 1 : 5);
  const fs::path fashion = c.str("fashion", "/usr/share/datasets/fashion-mnist");
  const fs::path cache = c.str("cache", "models-cache");
  const fs::path models = c.str("models", "../shared/models");
  const std::string pairs = c.str("pairs", st.quick ? "fashion" : "fashion,deepxplore");
#ifdef NNLENS_EXAMPLE_WITH_ONNX
  if (c.has("efficiency")) {
    efficiency(c.str("models", "../shared/models"), c.num("runs", 5), c.str("write-csv", ""));
    std::printf("self-checks: %s\n", failures ? "FAILED" : "passed");
    return failures ? 1 : 0;
  }
#endif
  const std::string rules = c.str("rules", "paper");
  if (rules != "paper" && rules != "reference" && rules != "both")
    throw value_error("--rules: expected paper, reference or both, got '" + rules + "'");
  st.paper_rules = rules != "reference";
  st.reference_rules = rules != "paper";
  st.repair = c.num("repair", 1) != 0;
  stopwatch total;
  std::printf("DFlare study: %zu seeds, budget %zu queries / %g s per seed; ablations on %zu seeds; DiffChaser %zu seeds x %g s; "
              "rules %s; %zu threads\n",
              st.seeds, st.queries, st.seconds, st.ablation_seeds, st.diffchaser_seeds, st.diffchaser_seconds, rules.c_str(),
              nnlens::detail::default_pool().size());

  if (pairs.find("fashion") != std::string::npos) {
    const auto train = io::load_mnist<float>(fashion, "train");
    const auto tst = io::load_mnist<float>(fashion, "t10k");
    std::vector<float> test(tst.images.size());
    for (std::size_t i = 0; i < test.size(); ++i) test[i] = std::round(tst.images.data()[i] * 255.0f);
    const std::vector<std::size_t> labels(tst.labels.begin(), tst.labels.end());
    const std::vector<float> seeds(test.begin(), test.begin() + std::ptrdiff_t(std::min<std::size_t>(st.seeds, tst.size()) * 784));
    {
      demo::LeNet5 net;
      fs::path w = c.str("weights", (cache / "lenet5-fashion-mnist-e12-s1.nnlw").string());
      if (st.quick && !fs::exists(w)) w = cache / "lenet5-fashion-mnist-quick-e1-n5000.nnlw";  // never write a quick model there
      get_model(net, w, train, st.quick ? 1 : 12, st.quick ? 5000 : 0);
      fashion_pairs("LeNet-5", net, train, seeds, test, labels, st);
    }
    if (!st.quick) {
      LeNet1 l1;
      get_model(l1, cache / "lenet1-fashion-mnist-e6-s1.nnlw", train, 6, 0);
      fashion_pairs("LeNet-1", l1, train, seeds, test, labels, st);
      FashionMLP mlp;
      get_model(mlp, cache / "mlp-fashion-mnist-e12-s1.nnlw", train, 12, 0);
      fashion_pairs("MLP", mlp, train, seeds, test, labels, st);
    }
  }
#ifdef NNLENS_EXAMPLE_WITH_ONNX
  if (pairs.find("deepxplore") != std::string::npos) {
    const fs::path dir = models / "deepxplore-mnist";
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(dir / "images"))
      if (e.path().extension() == ".png") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    const auto imgs = io::load_images<float>(files);
    std::vector<float> seeds(imgs.size());
    for (std::size_t i = 0; i < seeds.size(); ++i) seeds[i] = std::round(imgs.data()[i] * 255.0f);
    auto dx = [&](auto tag, const std::string& file, const std::string& name) {
      using Net = typename decltype(tag)::type;
      const Net net = io::load_onnx<Net>((dir / file).string());
      const auto f = wrap(net, name, normalization::divide_by(255));
      auto q8 = std::make_shared<const compress::quantized_network<Net>>(
          compress::quantize_weights(net, compress::quantize_options::dflare_reference()));
      auto i8 = std::make_shared<const compress::quantized_network<Net>>(compress::quantize(net, imgs));
      study(name + " / q8 (TFLite rule)", f, wrap_twin(q8, name + "-q8"), seeds, files.size(), nullptr, nullptr, st);
      study(name + " / int8", f, wrap_twin(i8, name + "-int8"), seeds, files.size(), nullptr, nullptr, st);
    };
    dx(std::type_identity<LeNet1>{}, "lenet1.onnx", "DeepXplore LeNet-1");
    dx(std::type_identity<DxLeNet5>{}, "lenet5.onnx", "DeepXplore LeNet-5");
  }
#else
  if (pairs.find("deepxplore") != std::string::npos) std::printf("(built without nnlens::onnx: DeepXplore's pairs skipped)\n");
#endif

  std::printf("\n| pair | acc f -> g (%%) | already differ | DFlare SR / s / q | DFlare_D | DFlare_R | DiffChaser | DRepair repair / inducing / improvement |\n"
              "|---|---|---|---|---|---|---|---|\n");
  double sum_s = 0, sum_q = 0;
  std::size_t k = 0;
  for (const auto& r : rows) {
    char acc[64];
    if (r.acc_f >= 0)
      std::snprintf(acc, sizeof acc, "%.2f -> %.2f", 100 * r.acc_f, 100 * r.acc_g);
    else
      std::snprintf(acc, sizeof acc, "n/a");
    std::printf("| %s | %s | %zu / %zu | %s | %s | %s | %s | %.1f / %.1f / %.1f |\n", r.pair.c_str(), acc, r.already, r.test,
                srq(r.dflare).c_str(), srq(r.dflare_d).c_str(), srq(r.dflare_r).c_str(), srq(r.chaser).c_str(),
                100 * r.repair.repair_ratio, 100 * r.repair.inducing_ratio, 100 * r.repair.improvement_ratio);
    if (r.dflare.found) sum_s += r.dflare.mean_seconds, sum_q += r.dflare.mean_queries, ++k;
  }
  if (st.reference_rules) {
    std::printf("\nUnder the reference code's rules (acceptance::reference, selection_rule::reference; DFlare_D = no_novelty, "
                "DFlare_R = uniform selection):\n| pair | DFlare SR / s / q | DFlare_D | DFlare_R |\n|---|---|---|---|\n");
    double rs = 0, rq = 0;
    std::size_t rk = 0;
    for (const auto& r : rows) {
      std::printf("| %s | %s | %s | %s |\n", r.pair.c_str(), srq(r.ref).c_str(), srq(r.ref_d).c_str(), srq(r.ref_r).c_str());
      if (r.ref.found) rs += r.ref.mean_seconds, rq += r.ref.mean_queries, ++rk;
    }
    if (rk) std::printf("\nDFlare (reference rules) over the %zu pairs: mean %.4f s and %.2f queries per triggering input\n", rk, rs / double(rk), rq / double(rk));
  }
  if (k) std::printf("\nDFlare over the %zu pairs: mean %.4f s and %.2f queries per triggering input\n", k, sum_s / double(k), sum_q / double(k));
  std::printf("\ntotal %.1f s; self-checks: %s\n", total.seconds(), failures ? "FAILED" : "passed");
  return failures ? 1 : 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "dflare_study: %s\n", e.what());
  return 2;
}
