// examples/nnslicer_detect.cpp -- NNSlicer's first application: adversarial input detection
// (Zhang et al., FSE 2020, §6.1; docs/specs/nnslicer.md#41-adversarial-input-detection).  docs/nnslicer-detection.md has the
// measured tables.
//
//   nnslicer_detect [--model lenet5|resnet] [--fashion DIR] [--weights FILE] [--cache DIR] [--train N]
//                   [--attack-samples N] [--theta 0.3] [--sweep 0.1,0.5] [--max-features K] [--quick]
//                   [--seed S]
//
// 1. The project's Fashion-MNIST LeNet-5 (the cached `nnlens demo` weights, else trained with the
//    recipe and cached) or the small residual network SmallResNet below (trained with the same
//    recipe and cached); NNSlicer's profile over the training set (execution::par).
// 2. Features of a sample ξ (all three written once over the op graph, so both models use them): NNSlicer -- the CONTRIB of every conv/dense synapse for the criterion
//    ({ξ}, {M(ξ)}) (an int8 vector); EffectivePath (Qiu et al. 2019) -- the binary synapse vector
//    of ξ's effective path from the predicted logit (θ_EP = 0.5); FeatureMap -- the post-ReLU conv
//    feature maps (floats).  NNSlicer-noout: NNSlicer's vector without the last layer's synapses,
//    which spell out M(ξ) (only the predicted logit's row is ever kept).
// 3. One CART tree per method (nnlens/nnslicer/decision_tree.hpp, scikit-learn's defaults) on N
//    normal training samples (default 10,000), target = the model's predicted label.
// 4. Attacks (nnlens/train/attacks.hpp): FGSM eps 2/256, 4/256, 8/256, 0.1; BIM and PGD at 8/256
//    and 0.1; each from the same 500 random correctly classified test samples.  The successful
//    adversarial examples (positives) and their originals (negatives) go to the detector, which
//    flags ξ iff tree(vec_ξ) != M(ξ).  Precision, recall and F1 per attack and method.
// Exit status: 0 when the self-checks pass (the attacks reduce accuracy; the trees fit their
// training sets; precision and recall lie in [0, 1]; on FGSM 0.1 NNSlicer flags a larger share of
// the adversarial examples than of their originals), 1 otherwise.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nnlens/io/idx.hpp>
#include <nnlens/io/weights.hpp>
#include <nnlens/nnlens.hpp>
#include <nnlens/nnslicer.hpp>
#include <nnlens/train/attacks.hpp>
#include <nnlens/nnslicer/decision_tree.hpp>
#include <nnlens/train/fit.hpp>

#include "../tools/nnlens/lenet5_recipe.hpp"
#include "example_cli.hpp"

namespace fs = std::filesystem;
using namespace nnlens;

/// The small residual network of the study (trained by the project with the LeNet-5 recipe):
/// conv stem, two residual blocks (the second halves the resolution with a 1x1 strided shortcut),
/// a dense head.  No BatchNorm: the project's weight files keep parameters only.
using SmallResNet = Sequential<Input<1, 28, 28>,                                                        //
                               Conv2D<8, 3, 1, 1>, ReLU,                                               // 8 x 28 x 28
                               Residual<Block<Conv2D<8, 3, 1, 1>, ReLU, Conv2D<8, 3, 1, 1>>>, ReLU,    //
                               MaxPool2D<2>,                                                           // 8 x 14 x 14
                               Residual<Block<Conv2D<16, 3, 2, 1>, ReLU, Conv2D<16, 3, 1, 1>>,         //
                                        Block<Conv2D<16, 1, 2, 0>>>,                                   //
                               ReLU,                                                                   // 16 x 7 x 7
                               Flatten, Dense<64>, ReLU, Dense<10>>;

namespace {

using nnlens_examples::cli;
using nnlens_examples::stopwatch;

constexpr std::size_t D_IN = 28 * 28;

/// Rows `rows` of images (N x 1 x 28 x 28) as a new [k, 1, 28, 28] array.
xt::xarray<float> gather(const xt::xarray<float>& images, const std::vector<std::size_t>& rows) {
  xt::xarray<float> r = xt::xarray<float>::from_shape({rows.size(), 1, 28, 28});
  for (std::size_t k = 0; k < rows.size(); ++k) std::copy_n(images.data() + rows[k] * D_IN, D_IN, r.data() + k * D_IN);
  return r;
}

template <class Net>
std::vector<std::size_t> predictions(const Net& net, const xt::xarray<float>& X) {
  const auto y = forward(execution::par, net, X);
  const std::size_t n = X.shape()[0], c = y.size() / n;
  std::vector<std::size_t> p(n);
  for (std::size_t i = 0; i < n; ++i) p[i] = std::size_t(std::max_element(y.data() + i * c, y.data() + (i + 1) * c) - (y.data() + i * c));
  return p;
}

// ------------------------------------------------------------------------------------------------
// features

/// A feature matrix: n rows of d values.
template <class V>
struct features {
  std::size_t n = 0, d = 0;
  std::vector<V> v;
  const V* row(std::size_t i) const { return v.data() + i * d; }
};

/// NNSlicer: per sample, the CONTRIB of every synapse of every node with synapses (conv, dense),
/// for the criterion ({ξ}, {M(ξ)}).  One slicer engine per task, reused over its samples (one
/// table per sample; see docs for the comparison with calling nnslicer() per sample).
template <class Net>
features<std::int8_t> slicer_features(const Net& net, const profile& prof, const xt::xarray<float>& X, double theta,
                                      bool use_engine = true) {
  const std::size_t n = X.shape()[0];
  const op_graph<float> g(net);
  std::size_t d = 0;
  for (const auto& nd : g.nodes()) d += nd.synapses;
  features<std::int8_t> f{n, d, std::vector<std::int8_t>(n * d)};
  slice_options so;
  so.theta = theta;
  so.batch = 1;
  std::atomic<bool> overflow{false};
  auto store = [&](std::size_t i, const contrib_table& t) {
    std::int8_t* r = f.v.data() + i * d;
    for (const auto& s : t.synapses)
      for (std::int64_t c : s) {
        if (c < -127 || c > 127) overflow = true;
        *r++ = std::int8_t(std::clamp<std::int64_t>(c, -127, 127));
      }
  };
  auto& pool = detail::default_pool();
  const std::size_t tasks = std::min(pool.size(), n);
  pool.parallel_for(tasks, [&](std::size_t t) {
    const std::size_t b0 = n * t / tasks, b1 = n * (t + 1) / tasks;
    if (use_engine) {
      detail::slicer_engine<float> eng(g, prof, so);
      contrib_table tab = eng.empty_table();
      for (std::size_t i = b0; i < b1; ++i) {
        for (auto& v : tab.neurons) std::fill(v.begin(), v.end(), 0);
        for (auto& v : tab.synapses) std::fill(v.begin(), v.end(), 0);
        eng.run(net, 1, X.data() + i * D_IN, criterion::predicted(), tab);
        store(i, tab);
      }
    } else {
      for (std::size_t i = b0; i < b1; ++i) {
        xt::xarray<float> one = xt::xarray<float>::from_shape({1, 1, 28, 28});
        std::copy_n(X.data() + i * D_IN, D_IN, one.data());
        store(i, nnslicer(execution::seq, net, prof, one, criterion::predicted(), so));
      }
    }
  });
  if (overflow) throw data_error("slicer_features: a CONTRIB value outside [-127, 127] (int8 features)");
  return f;
}

/// FeatureMap: the feature maps after every ReLU with a rank-3 output (after each Conv2D, and after
/// the addition of a residual block), over the op graph, so residual networks work too.
template <class Net>
features<float> featuremap_features(const Net& net, const xt::xarray<float>& X) {
  const std::size_t n = X.shape()[0];
  const op_graph<float> g(net);
  std::vector<std::size_t> acts;  // tensors to keep
  std::size_t d = 0;
  for (const auto& nd : g.nodes())
    if (nd.type == "ReLU" && g.acts()[nd.out].rank == 3) acts.push_back(nd.out), d += g.acts()[nd.out].size();
  features<float> f{n, d, std::vector<float>(n * d)};
  constexpr std::size_t chunk = 256;
  std::vector<std::vector<float>> buf;
  for (std::size_t b0 = 0; b0 < n; b0 += chunk) {
    const std::size_t nb = std::min(chunk, n - b0);
    g.run(nb, X.data() + b0 * D_IN, buf);
    for (std::size_t r = 0; r < nb; ++r) {
      float* out = f.v.data() + (b0 + r) * d;
      for (std::size_t a : acts) {
        const std::size_t s = g.acts()[a].size();
        out = std::copy_n(buf[a].data() + r * s, s, out);
      }
    }
  }
  return f;
}

/// EffectivePath (Qiu et al., CVPR 2019; docs/specs/nnslicer.md#8-baselines): from the predicted logit, each
/// neuron on the path keeps the minimal prefix of its inputs, sorted by descending positive
/// contribution, whose sum reaches θ_EP times the neuron's value (at least the largest one when the
/// value is <= 0), and the path recurses into them.  Written over the op graph with each layer's
/// own sign_rule at element granularity, fed the values themselves instead of NNSlicer's Δ (a zero
/// baseline): a Dense or Conv2D item is then x_i w_i, ReLU and Flatten pass the element through,
/// max-pool names the window's arg-max, and a residual Add offers its two operands (weight 1).
/// A single item (the pass-through ops) is always kept.  The feature is the binary vector of the
/// synapses (weights) on the path, in the layout of slicer_features.
template <class Net>
features<std::uint8_t> effective_path_features(const Net& net, const xt::xarray<float>& X, double theta_ep = 0.5) {
  const std::size_t n = X.shape()[0];
  const op_graph<float> g(net);
  std::vector<std::size_t> syn_off;  // per node: offset of its synapses
  std::size_t d = 0;
  for (const auto& nd : g.nodes()) syn_off.push_back(d), d += nd.synapses;
  features<std::uint8_t> f{n, d, std::vector<std::uint8_t>(n * d, 0)};
  auto& pool = detail::default_pool();
  const std::size_t tasks = std::min(pool.size(), n);
  const std::size_t A = g.acts().size();
  pool.parallel_for(tasks, [&](std::size_t t) {
    const std::size_t b0 = n * t / tasks, b1 = n * (t + 1) / tasks;
    std::vector<std::vector<float>> buf;
    std::vector<std::vector<double>> val(A);
    std::vector<std::vector<std::uint8_t>> mark(A);
    std::vector<sign_item> items;
    for (std::size_t i = b0; i < b1; ++i) {
      g.run(1, X.data() + i * D_IN, buf);
      for (std::size_t a = 0; a < A; ++a) val[a].assign(buf[a].begin(), buf[a].end()), mark[a].assign(buf[a].size(), 0);
      const auto& out = val[g.output()];
      mark[g.output()][std::size_t(std::max_element(out.begin(), out.end()) - out.begin())] = 1;
      std::uint8_t* syn = f.v.data() + i * d;
      for (std::size_t k = g.nodes().size(); k-- > 0;) {
        const auto& nd = g.nodes()[k];
        sign_ctx ctx;
        ctx.in = g.acts()[nd.in], ctx.out = g.acts()[nd.out], ctx.element = true;
        ctx.x = ctx.dx = val[nd.in].data();
        ctx.y = ctx.dy = ctx.yn = val[nd.out].data();
        const std::size_t m = val[nd.out].size();
        for (std::size_t o = 0; o < m; ++o) {
          if (!mark[nd.out][o]) continue;
          items.clear();
          if (nd.is_join())  // one item per operand element feeding o (pred: the operand's index)
            nd.operands.feeding(o, [&](std::size_t q, std::size_t e) {
              items.push_back({q, sign_item::none, val[nd.operands.ins[q]][e]});
            });
          else
            nd.items(ctx, o, items);
          auto keep = [&](const sign_item& it) {
            if (nd.is_join()) mark[nd.operands.ins[it.pred]][o - nd.operands.offset(it.pred)] = 1;  // element grain
            else mark[nd.in][it.pred] = 1;
            if (it.synapse != sign_item::none) syn[syn_off[k] + it.synapse] = 1;
          };
          if (items.size() == 1 && !nd.is_join()) {
            keep(items[0]);
            continue;
          }
          items.erase(std::remove_if(items.begin(), items.end(), [](const sign_item& it) { return !(it.c > 0); }), items.end());
          std::stable_sort(items.begin(), items.end(), [](const sign_item& a, const sign_item& b) { return a.c > b.c; });
          const double target = theta_ep * val[nd.out][o];
          double s = 0;
          for (const auto& it : items) {
            keep(it);
            s += it.c;
            if (s >= target) break;
          }
        }
      }
    }
  });
  return f;
}

/// FeatureMap: the post-ReLU activations of every Conv2D followed by a ReLU.
// ------------------------------------------------------------------------------------------------
// detection

struct prf {
  double precision = 0, recall = 0, f1 = 0;
  std::size_t tp = 0, fp = 0, fn = 0, tn = 0;
};

prf score(const std::vector<bool>& flag, const std::vector<bool>& adversarial) {
  prf r;
  for (std::size_t i = 0; i < flag.size(); ++i) {
    if (adversarial[i]) (flag[i] ? r.tp : r.fn)++;
    else (flag[i] ? r.fp : r.tn)++;
  }
  r.precision = r.tp + r.fp ? double(r.tp) / double(r.tp + r.fp) : 0.0;
  r.recall = r.tp + r.fn ? double(r.tp) / double(r.tp + r.fn) : 0.0;
  r.f1 = r.precision + r.recall > 0 ? 2 * r.precision * r.recall / (r.precision + r.recall) : 0.0;
  return r;
}

struct attack_set {
  std::string name;
  std::size_t attempted = 0;
  std::vector<std::size_t> ok;          // indices (into the 500) of the successful examples
  xt::xarray<float> adv;                // the successful adversarial examples
  std::vector<std::size_t> adv_pred;    // the model's predictions on them
  double accuracy_after = 0;            // model accuracy on all attempted adversarial inputs
};

/// Flags of the detector on originals[ok] then adv: flag iff tree(vec) != the model's prediction.
template <class V>
prf detect(const decision_tree& tree, const features<V>& orig, const std::vector<std::size_t>& orig_pred,
           const features<V>& adv, const attack_set& a, std::size_t* normal_flags = nullptr) {
  std::vector<bool> flag, is_adv;
  std::size_t nf = 0;
  for (std::size_t k : a.ok) {
    const bool fl = tree.predict_one(orig.row(k)) != orig_pred[k];
    flag.push_back(fl), is_adv.push_back(false), nf += fl;
  }
  for (std::size_t k = 0; k < a.ok.size(); ++k)
    flag.push_back(tree.predict_one(adv.row(k)) != a.adv_pred[k]), is_adv.push_back(true);
  if (normal_flags) *normal_flags = nf;
  return score(flag, is_adv);
}

template <class V>
std::size_t training_errors(const decision_tree& t, const features<V>& f, const std::vector<std::size_t>& y) {
  std::size_t e = 0;
  for (std::size_t i = 0; i < f.n; ++i) e += t.predict_one(f.row(i)) != y[i];
  return e;
}

std::string fpr(const prf& r) {
  char b[64];
  std::snprintf(b, sizeof b, "%.2f/%.2f/%.2f", r.f1, r.precision, r.recall);
  return b;
}

struct study_args {
  bool quick = false;
  std::size_t n_train = 0, n_attack = 0, max_features = 0;
  double theta = 0.3;
  std::uint64_t seed = 1;
  std::vector<double> sweep;
};

template <class Net>
bool study(const char* model_name, Net& net, const io::labelled_images<float>& trn, const io::labelled_images<float>& tst,
           const study_args& args, stopwatch& sw) {
  const std::size_t n_train = args.n_train, n_attack = args.n_attack, max_features = args.max_features;
  const double theta = args.theta;
  const std::uint64_t seed = args.seed;
  const auto& sweep = args.sweep;
  bool ok = true;
  auto check = [&](bool c, const std::string& what) {
    std::printf("  check: %-70s %s\n", what.c_str(), c ? "ok" : "FAILED");
    ok = ok && c;
  };
  const auto test_pred = predictions(net, tst.images);
  std::size_t correct = 0;
  for (std::size_t i = 0; i < tst.size(); ++i) correct += test_pred[i] == tst.labels[i];
  std::printf("model: %s, test accuracy %.2f%% (%.1f s)\n", model_name, 100.0 * double(correct) / double(tst.size()), sw.seconds());

  // ---- profile
  stopwatch sp;
  const profile prof = profile_network(execution::par, net, trn.images);
  const double t_profile = sp.seconds();
  std::printf("profile: %zu training images in %.2f s\n", prof.samples, t_profile);

  // ---- the normal training samples (a seeded random subset), target = predicted label
  std::mt19937_64 rng(seed);
  std::vector<std::size_t> tr_rows(trn.size());
  std::iota(tr_rows.begin(), tr_rows.end(), std::size_t(0));
  std::shuffle(tr_rows.begin(), tr_rows.end(), rng);
  tr_rows.resize(std::min(n_train, tr_rows.size()));
  const auto Xtr = gather(trn.images, tr_rows);
  const auto ytr = predictions(net, Xtr);

  // ---- attack sources: random correctly classified test samples
  std::vector<std::size_t> te_rows;
  for (std::size_t i = 0; i < tst.size(); ++i)
    if (test_pred[i] == tst.labels[i]) te_rows.push_back(i);
  std::shuffle(te_rows.begin(), te_rows.end(), rng);
  te_rows.resize(std::min(n_attack, te_rows.size()));
  const auto Xo = gather(tst.images, te_rows);
  std::vector<std::uint8_t> yo;
  for (std::size_t r : te_rows) yo.push_back(tst.labels[r]);
  const auto po = predictions(net, Xo);  // == yo

  // ---- attacks
  struct spec {
    std::string name;
    linf_attack_options o;
  };
  std::vector<spec> specs = {
      {"FGSM_2", {.eps = 2.0 / 256}},
      {"FGSM_4", {.eps = 4.0 / 256}},
      {"FGSM_8", {.eps = 8.0 / 256}},
      {"FGSM_0.1", {.eps = 0.1}},
      {"BIM_8", {.eps = 8.0 / 256, .alpha = 1.0 / 256, .steps = 10}},
      {"BIM_0.1", {.eps = 0.1, .alpha = 0.01, .steps = 20}},
      {"PGD_8", {.eps = 8.0 / 256, .alpha = 1.0 / 256, .steps = 10, .random_start = true, .seed = seed}},
      {"PGD_0.1", {.eps = 0.1, .alpha = 0.01, .steps = 20, .random_start = true, .seed = seed}},
  };
  stopwatch sa;
  std::vector<attack_set> sets;
  for (const auto& s : specs) {
    attack_set as;
    as.name = s.name;
    as.attempted = te_rows.size();
    auto o = s.o;
    if (o.steps == 1) o.alpha = o.eps;
    const auto adv = linf_attack(execution::par, net, Xo, yo, o);
    const auto pa = predictions(net, adv);
    std::size_t still = 0;
    for (std::size_t k = 0; k < pa.size(); ++k) {
      still += pa[k] == yo[k];
      if (pa[k] != yo[k]) as.ok.push_back(k), as.adv_pred.push_back(pa[k]);
    }
    as.accuracy_after = double(still) / double(pa.size());
    as.adv = xt::xarray<float>::from_shape({as.ok.size(), 1, 28, 28});
    for (std::size_t k = 0; k < as.ok.size(); ++k) std::copy_n(adv.data() + as.ok[k] * D_IN, D_IN, as.adv.data() + k * D_IN);
    sets.push_back(std::move(as));
  }
  const double t_attacks = sa.seconds();
  std::printf("attacks: %zu x %zu samples in %.1f s\n", specs.size(), te_rows.size(), t_attacks);
  for (const auto& s : sets)
    std::printf("  %-9s success %3zu / %zu   model accuracy %5.1f%% -> %5.1f%%\n", s.name.c_str(), s.ok.size(), s.attempted,
                100.0, 100 * s.accuracy_after);
  for (const auto& s : sets)
    if (s.name == "FGSM_0.1" || s.name == "PGD_0.1") check(s.accuracy_after < 0.5, s.name + " brings the accuracy below 50%");

  // ---- slicing speed: the engine reused per task vs nnslicer() per sample
  {
    const std::size_t m = std::min<std::size_t>(200, Xtr.shape()[0]);
    const auto Xs = gather(Xtr, [&] { std::vector<std::size_t> r(m); std::iota(r.begin(), r.end(), std::size_t(0)); return r; }());
    stopwatch s1;
    const auto f1 = slicer_features(net, prof, Xs, theta, true);
    const double e1 = s1.seconds();
    stopwatch s2;
    const auto f2 = slicer_features(net, prof, Xs, theta, false);
    const double e2 = s2.seconds();
    std::printf("slicing %zu samples (wall, %zu threads): engine reused %.2f ms/sample, nnslicer() per call %.2f ms/sample\n", m,
                detail::default_pool().size(), 1e3 * e1 / double(m), 1e3 * e2 / double(m));
    check(f1.v == f2.v, "per-sample features: engine reuse == nnslicer() per call");
  }

  // ---- the three methods
  tree_options to;
  to.max_features = max_features;
  to.seed = seed;
  struct result {
    std::string method;
    double theta = 0;
    std::vector<prf> per_attack;
    double t_feat_ms = 0, t_tree = 0;
    std::size_t kept = 0, dims = 0, nodes = 0, depth = 0;
  };
  auto run_method = [&](const std::string& method, auto&& featurize, double th) {
    result r;
    r.method = method;
    r.theta = th;
    stopwatch sf;
    const auto ftr = featurize(Xtr);
    r.t_feat_ms = 1e3 * sf.seconds() / double(Xtr.shape()[0]);
    const auto fo = featurize(Xo);
    decision_tree tree;
    stopwatch st;
    tree.fit(execution::par, ftr.v.data(), ftr.n, ftr.d, ytr.data(), to);
    r.t_tree = st.seconds();
    r.kept = tree.features_kept(), r.dims = ftr.d, r.nodes = tree.nodes(), r.depth = tree.depth();
    const std::size_t err = training_errors(tree, ftr, ytr);
    if (max_features == 0) check(err == 0 || err * 100 < ftr.n, method + ": the tree fits its training set (" + std::to_string(err) + " errors)");
    for (const auto& s : sets) {
      const auto fa = featurize(s.adv);
      std::size_t nflags = 0;
      r.per_attack.push_back(detect(tree, fo, po, fa, s, &nflags));
      const auto& p = r.per_attack.back();
      check(p.precision >= 0 && p.precision <= 1 && p.recall >= 0 && p.recall <= 1, method + " " + s.name + ": precision and recall in [0, 1]");
      if (method == "NNSlicer" && s.name == "FGSM_0.1" && !s.ok.empty())
        check(double(p.tp) / double(s.ok.size()) > double(nflags) / double(s.ok.size()),
              "NNSlicer FGSM_0.1: flags more adversarial (" + std::to_string(p.tp) + ") than originals (" + std::to_string(nflags) + ")");
    }
    std::printf("%-13s theta %.2f: features %zu (kept %zu non-constant), %.3f ms/sample; tree %zu nodes, depth %zu, fit %.1f s\n",
                method.c_str(), th, r.dims, r.kept, r.t_feat_ms, r.nodes, r.depth, r.t_tree);
    std::fflush(stdout);
    return r;
  };
  std::vector<result> results;
  results.push_back(run_method("NNSlicer", [&](const xt::xarray<float>& X) { return slicer_features(net, prof, X, theta); }, theta));
  // The criterion's own output neuron shows in the last layer's synapses (only the predicted logit's
  // are ever kept), so the tree can read M(ξ) off them: the same features without that layer.
  const std::size_t last_syn = [&] {
    const op_graph<float> g(net);
    std::size_t s = 0;
    for (const auto& nd : g.nodes())
      if (nd.synapses) s = nd.synapses;
    return s;
  }();
  results.push_back(run_method("NNSlicer-noout", [&](const xt::xarray<float>& X) {
    auto f = slicer_features(net, prof, X, theta);
    const std::size_t d2 = f.d - last_syn;
    for (std::size_t i = 0; i < f.n; ++i) std::copy_n(f.v.data() + i * f.d, d2, f.v.data() + i * d2);
    f.v.resize(f.n * d2), f.d = d2;
    return f;
  }, theta));
  results.push_back(run_method("EffectivePath", [&](const xt::xarray<float>& X) { return effective_path_features(net, X, 0.5); }, 0.5));
  results.push_back(run_method("FeatureMap", [&](const xt::xarray<float>& X) { return featuremap_features(net, X); }, 0));
  {  // the features are integers in [-127, 127] (int8) and the slices are not empty
    const auto f = slicer_features(net, prof, gather(Xo, {0}), theta);
    std::size_t nz = 0;
    for (auto v : f.v) nz += v != 0;
    check(nz > 0, "NNSlicer: a sample's slice has synapses (" + std::to_string(nz) + " of " + std::to_string(f.d) + ")");
  }

  // ---- Table 4
  auto print_table = [&](const std::vector<const result*>& cols) {
    std::printf("\n| attack | adv / attempted | acc. after |");
    for (const auto* c : cols) std::printf(" %s (θ %.2g) F1/P/R |", c->method.c_str(), c->theta);
    std::printf("\n|---|---|---|");
    for (std::size_t i = 0; i < cols.size(); ++i) std::printf("---|");
    std::printf("\n");
    for (std::size_t s = 0; s < sets.size(); ++s) {
      std::printf("| %s | %zu / %zu | %.1f%% |", sets[s].name.c_str(), sets[s].ok.size(), sets[s].attempted, 100 * sets[s].accuracy_after);
      for (const auto* c : cols) std::printf(" %s |", fpr(c->per_attack[s]).c_str());
      std::printf("\n");
    }
    std::printf("| **Average** | | |");
    for (const auto* c : cols) {
      prf m;
      for (const auto& p : c->per_attack) m.f1 += p.f1, m.precision += p.precision, m.recall += p.recall;
      const double k = double(c->per_attack.size());
      m.f1 /= k, m.precision /= k, m.recall /= k;
      std::printf(" **%s** |", fpr(m).c_str());
    }
    std::printf("\n");
  };
  print_table({&results[0], &results[1], &results[2], &results[3]});
  std::printf("| paper (ResNet10/CIFAR-10, 17 attacks) | | | .91/.83/1.00 | – | .80/.67/1.00 | .62/.63/.62 |\n");

  if (!sweep.empty()) {
    std::vector<result> sw_res;
    for (double th : sweep)
      sw_res.push_back(run_method("NNSlicer", [&](const xt::xarray<float>& X) { return slicer_features(net, prof, X, th); }, th));
    std::vector<const result*> cols = {&results[0]};
    for (const auto& r : sw_res) cols.push_back(&r);
    std::sort(cols.begin(), cols.end(), [](auto* x, auto* y) { return x->theta < y->theta; });
    print_table(cols);
  }

  std::printf("\ntimes: profile %.2f s, attacks %.1f s, total %.1f s\n", t_profile, t_attacks, sw.seconds());
  return ok;
}

/// Loads the cached weights of `net`, or trains it with the recipe and caches them.
template <class Net>
void load_or_train(Net& net, const char* name, const fs::path& wpath, const io::labelled_images<float>& trn, bool quick) {
  initialize(net, 1);
  if (fs::exists(wpath)) {
    io::load_weights(wpath, net);
    std::printf("model: %s loaded from %s\n", name, wpath.string().c_str());
    return;
  }
  demo::lenet5_recipe r;
  if (quick) r.epochs = 2, r.fine_epochs = 0;
  std::printf("model: training %s (%zu epochs on %zu images) ...\n", name, r.epochs, trn.size());
  std::fflush(stdout);
  const auto rep = demo::train_with_recipe(net, trn, r, false);
  (void)rep;
  fs::create_directories(wpath.parent_path().empty() ? fs::path(".") : wpath.parent_path());
  io::save_weights(wpath, net);
  std::printf("model: trained and cached in %s\n", wpath.string().c_str());
}

}  // namespace

int main(int argc, char** argv) try {
  const cli a(argc, argv);
  study_args args;
  args.quick = a.has("quick");
  const bool quick = args.quick;
  const fs::path fashion = a.str("fashion", "/usr/share/datasets/fashion-mnist");
  const fs::path cache = a.str("cache", "models-cache");
  const std::string model = a.str("model", "lenet5");
  args.n_train = a.num("train", quick ? 300 : 10000);
  args.n_attack = a.num("attack-samples", quick ? 100 : 500);
  args.max_features = a.num("max-features", 0);
  args.theta = a.real("theta", 0.3);
  args.seed = a.num("seed", 1);
  {
    std::stringstream ss(a.str("sweep", ""));
    for (std::string s; std::getline(ss, s, ',');)
      if (!s.empty()) args.sweep.push_back(std::stod(s));
  }
  if (model != "lenet5" && model != "resnet")
    throw value_error("nnslicer_detect: --model must be lenet5 or resnet, not '" + model + "'");
  std::printf("NNSlicer adversarial input detection (docs/specs/nnslicer.md#41-adversarial-input-detection)%s; %zu threads\n", quick ? " --quick" : "",
              detail::default_pool().size());
  stopwatch sw;
  const auto trn = io::load_mnist<float>(fashion, "train", quick ? 10000 : 0);
  const auto tst = io::load_mnist<float>(fashion, "t10k");
  bool ok = false;
  if (model == "lenet5") {
    demo::LeNet5 net;
    fs::path w = a.str("weights", (cache / "lenet5-fashion-mnist-e12-s1.nnlw").string());
    if (!fs::exists(w) && quick) w = cache / demo::quick_lenet5_file;
    load_or_train(net, "LeNet-5", w, trn, quick);
    ok = study("LeNet-5", net, trn, tst, args, sw);
  } else {
    SmallResNet net;
    const fs::path w = a.str("weights", (cache / (quick ? "resnet-fashion-mnist-quick-e2-n10000.nnlw" : "resnet-fashion-mnist-e12-s1.nnlw")).string());
    load_or_train(net, "SmallResNet", w, trn, quick);
    ok = study("SmallResNet", net, trn, tst, args, sw);
  }
  std::printf("%s\n", ok ? "all checks passed" : "SOME CHECKS FAILED");
  return ok ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "nnslicer_detect: %s\n", e.what());
  return 2;
}
