// nnlens/difftest/repair.hpp -- DRepair (spec dflare.md §2.9): post-processing that maps the
// compressed model's probability vector g(x) to the original's label l_f(x), without retraining g.
//
//   auto pairs = collect_repair_pairs(g, dflare_result, seeds);     // (seed, trigger) pairs
//   repair_model h = train_repair(pairs, {.hidden = 100, .epochs = 200, .seed = 1});
//   black_box g2 = repaired(g, h);                  // deployed: softmax(h(g(x)))
//   repair_metrics m = evaluate_repair(h.h, test_pairs);   // repair / inducing / improvement
//   double before = deviation_rate(f, g, x, n), after = deviation_rate(f, g2, x, n);
//   auto folds = cross_validate_repair(pairs, 5, /*seed*/ 0);      // the paper's 5-fold protocol
//
// Training data: per pair, two samples (g(x_s), l_f(x_s)) and (g(x_t), l_f(x_t)).  h is trained
// with nnlens/train (fit, softmax cross-entropy, Adam).  Metrics on a test set X = X_t ∪ X_s, with
// o_x = [h(g(x)) = l_f(x)] and k_x = [h(g(x)) != l_f(x)]:
//   repair ratio      = Σ_{X_t} o_x / |X_t|        inducing ratio = Σ_{X_s} k_x / |X_s|
//   improvement ratio = (|X_t| - Σ_X k_x) / |X_t|   (<= 0: the repair failed)
// and the deviation rates on X: before = #{argmax g(x) != l_f(x)} / |X|, after = Σ_X k_x / |X|.
//
// Spec readings (§2.9 proposals; the paper's "single-layer perceptron with a single hidden layer"
// is self-contradictory and gives no sizes): h = MLP classes -> 100 ReLU -> classes (sklearn
// MLPClassifier's defaults: Adam lr 1e-3, L2 1e-4 as Adam weight decay, <= 200 epochs, batches of
// min(200, N)); hidden = 0 gives softmax regression.  PyTorch's default initialisation
// U(-1/sqrt(fan_in), 1/sqrt(fan_in)), seeded.  The repaired black box outputs h's softmax (what
// DFlare's fitness sees when it tests g∘h, Table 8).
//
// requires: probabilities of `classes` values per row, labels in [0, classes).
// ensures:  the same pairs, options and seed give the same h (fit is deterministic under seq).
// throws:   data_error for an empty training set or labels out of range; shape_error for sizes.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "nnlens/core/error.hpp"
#include "nnlens/core/execution.hpp"
#include "nnlens/core/random.hpp"
#include "nnlens/core/tensor.hpp"
#include "nnlens/difftest/black_box.hpp"
#include "nnlens/difftest/oracle.hpp"
#include "nnlens/difftest/seeds.hpp"
#include "nnlens/network/dynamic_network.hpp"
#include "nnlens/train/fit.hpp"
#include "nnlens/train/optimizer.hpp"

namespace nnlens::difftest {

/// (seed, trigger) pairs: g's probability vectors (rows of `classes`) and f's labels.
struct repair_pairs {
  std::size_t classes = 0;
  std::vector<float> g_seed, g_trigger;            // size() x classes each
  std::vector<std::uint32_t> f_seed, f_trigger;    // size() each
  std::size_t size() const { return f_seed.size(); }
  /// Appends one pair.
  void add(std::span<const float> gs, std::size_t ls, std::span<const float> gt, std::size_t lt) {
    if (classes == 0) classes = gs.size();
    if (gs.size() != classes || gt.size() != classes)
      throw shape_error(nnlens::detail::concat("repair_pairs: probability vectors of ", gs.size(), " and ", gt.size(),
                                               " values, expected ", classes));
    if (ls >= classes || lt >= classes)
      throw data_error(nnlens::detail::concat("repair_pairs: label ", std::max(ls, lt), " outside [0, ", classes, ")"));
    g_seed.insert(g_seed.end(), gs.begin(), gs.end());
    g_trigger.insert(g_trigger.end(), gt.begin(), gt.end());
    f_seed.push_back(std::uint32_t(ls));
    f_trigger.push_back(std::uint32_t(lt));
  }
  /// The pairs at the given positions.
  repair_pairs subset(std::span<const std::size_t> idx) const {
    repair_pairs s;
    s.classes = classes;
    for (std::size_t i : idx)
      s.add(std::span<const float>(g_seed.data() + i * classes, classes), f_seed[i],
            std::span<const float>(g_trigger.data() + i * classes, classes), f_trigger[i]);
    return s;
  }
};

/// The pairs of every `found` seed of a DFlare/DiffChaser result: g(x_t) and l_f(x_t) come from the
/// result (probs_g, label_f), l_f(x_s) is seed_label, and g(x_s) is queried.  `seeds` holds the
/// searched images; seed_result::index - first_index is the row.
inline repair_pairs collect_repair_pairs(const black_box& g, const dflare_result& r, std::span<const float> seeds,
                                         std::size_t first_index = 0) {
  repair_pairs p;
  p.classes = g.classes;
  std::vector<float> gs(g.classes);
  for (const auto& s : r.seeds) {
    if (!s.found()) continue;
    const std::size_t row = s.index - first_index;
    if (s.index < first_index || (row + 1) * g.input_size > seeds.size())
      throw shape_error(nnlens::detail::concat("collect_repair_pairs: seed ", s.index, " is not in the ",
                                               seeds.size() / std::max<std::size_t>(1, g.input_size), " seeds given"));
    if (s.probs_g.size() != g.classes)
      throw shape_error(nnlens::detail::concat("collect_repair_pairs: seed ", s.index, " has no g probabilities"));
    g(seeds.subspan(row * g.input_size, g.input_size), 1, gs);
    p.add(gs, s.seed_label, s.probs_g, s.label_f);
  }
  return p;
}

struct repair_options {
  std::size_t hidden = 100;        // 0: softmax regression (no hidden layer)
  double lr = 1e-3;
  double weight_decay = 1e-4;      // Adam's L2 term
  std::size_t epochs = 200;
  std::size_t batch_size = 200;    // min(batch_size, N)
  std::uint64_t seed = 0;          // initialisation and shuffling
};

/// The trained post-processor: h.predict(p, n, out) maps g's probability rows to softmax(h(p)).
struct repair_model {
  DynamicNetwork net;   // classes -> [hidden -> ReLU ->] classes (logits)
  black_box h;          // softmax of net (owns a copy of it)
  std::size_t classes = 0;
  double train_loss = 0, train_accuracy = 0;  // last epoch
  /// argmax h(p) for one probability vector.
  std::size_t label(std::span<const float> p) const {
    std::vector<float> out(classes);
    h(p, 1, out);
    return top1(out);
  }
};

namespace detail {

inline Dense<dyn> repair_dense(std::size_t in, std::size_t out, std::mt19937_64& rng) {
  Dense<dyn> d;
  d.W = xt::zeros<float>({in, out});
  d.b = xt::zeros<float>({out});
  const double bound = 1.0 / std::sqrt(double(in));
  auto u = [&] { return float((nnlens::detail::draw_unit(rng) * 2 - 1) * bound); };
  for (auto& w : d.W) w = u();
  for (auto& b : d.b) b = u();
  return d;
}

}  // namespace detail

/// Trains h on the pairs' 2 * size() samples (see the header comment).  A template (Net: always
/// DynamicNetwork) only so that a program including this header without calling it does not
/// instantiate the trainer (about 3 s of every compile of <nnlens/nnlens.hpp>).
template <class Net = DynamicNetwork>
repair_model train_repair(const repair_pairs& pairs, const repair_options& o = {}) {
  const std::size_t c = pairs.classes, n = pairs.size();
  if (n == 0 || c == 0) throw data_error("train_repair: no (seed, trigger) pairs to train on");
  if (o.epochs == 0 || o.batch_size == 0) throw value_error("train_repair: epochs and batch_size must be positive");
  std::mt19937_64 rng(o.seed);
  repair_model m;
  m.classes = c;
  Net net{shape(c)};
  if (o.hidden) {
    net.add(detail::repair_dense(c, o.hidden, rng)).add(ReLU{}).add(detail::repair_dense(o.hidden, c, rng));
  } else {
    net.add(detail::repair_dense(c, c, rng));
  }
  xt::xtensor<float, 2> x = xt::zeros<float>({2 * n, c});
  std::vector<std::uint32_t> y(2 * n);
  std::copy(pairs.g_seed.begin(), pairs.g_seed.end(), x.data());
  std::copy(pairs.g_trigger.begin(), pairs.g_trigger.end(), x.data() + n * c);
  std::copy(pairs.f_seed.begin(), pairs.f_seed.end(), y.begin());
  std::copy(pairs.f_trigger.begin(), pairs.f_trigger.end(), y.begin() + std::ptrdiff_t(n));
  train::adam opt(net, {.lr = o.lr, .weight_decay = o.weight_decay});
  const auto rep = train::fit(execution::seq, net, opt, x, y,
                              {.epochs = o.epochs, .batch_size = std::min(o.batch_size, 2 * n), .seed = o.seed});
  if (!rep.epochs.empty()) m.train_loss = rep.epochs.back().loss, m.train_accuracy = rep.epochs.back().accuracy;
  m.h = wrap(Net(net), "drepair");
  m.net = std::move(net);
  return m;
}

/// g followed by h: the deployed, repaired model (softmax of h on g's probabilities).
inline black_box repaired(black_box g, const repair_model& h, std::string name = {}) {
  if (g.classes != h.classes)
    throw shape_error(nnlens::detail::concat("repaired: '", g.name, "' has ", g.classes, " classes, h has ", h.classes));
  black_box b;
  b.input_size = g.input_size;
  b.classes = g.classes;
  b.name = name.empty() ? g.name + "+drepair" : std::move(name);
  b.predict = [g = std::move(g), hb = h.h](std::span<const float> x, std::size_t n, std::span<float> probs) {
    thread_local std::vector<float> pg;
    pg.resize(n * g.classes);
    g.predict(x, n, pg);
    hb.predict(pg, n, probs);
  };
  return b;
}

struct repair_metrics {
  std::size_t triggers = 0, seeds = 0;      // |X_t|, |X_s|
  std::size_t repaired = 0, induced = 0;    // Σ_{X_t} o_x, Σ_{X_s} k_x
  double repair_ratio = 0, inducing_ratio = 0, improvement_ratio = 0;
  double deviation_before = 0, deviation_after = 0;  // on X = X_t ∪ X_s
};

/// The §2.9 metrics of a post-processor `h` (a black box on probability vectors) on test pairs.
inline repair_metrics evaluate_repair(const black_box& h, const repair_pairs& test) {
  const std::size_t c = test.classes, n = test.size();
  if (h.input_size != c || h.classes != c)
    throw shape_error(nnlens::detail::concat("evaluate_repair: h maps ", h.input_size, " -> ", h.classes,
                                             ", the pairs have ", c, " classes"));
  repair_metrics m;
  m.triggers = m.seeds = n;
  if (n == 0) return m;
  std::vector<float> out(n * c);
  std::size_t dev_before = 0;
  h(test.g_trigger, n, out);
  for (std::size_t i = 0; i < n; ++i) {
    m.repaired += top1(std::span<const float>(out.data() + i * c, c)) == test.f_trigger[i];
    dev_before += top1(std::span<const float>(test.g_trigger.data() + i * c, c)) != test.f_trigger[i];
  }
  h(test.g_seed, n, out);
  for (std::size_t i = 0; i < n; ++i) {
    m.induced += top1(std::span<const float>(out.data() + i * c, c)) != test.f_seed[i];
    dev_before += top1(std::span<const float>(test.g_seed.data() + i * c, c)) != test.f_seed[i];
  }
  const double nt = double(n);
  const std::size_t k_total = (n - m.repaired) + m.induced;  // Σ_X k_x
  m.repair_ratio = double(m.repaired) / nt;
  m.inducing_ratio = double(m.induced) / nt;
  m.improvement_ratio = (nt - double(k_total)) / nt;
  m.deviation_before = double(dev_before) / (2 * nt);
  m.deviation_after = double(k_total) / (2 * nt);
  return m;
}
inline repair_metrics evaluate_repair(const repair_model& h, const repair_pairs& test) { return evaluate_repair(h.h, test); }

/// The mean of several metrics (counts summed, ratios averaged).
inline repair_metrics mean(std::span<const repair_metrics> ms) {
  repair_metrics a;
  if (ms.empty()) return a;
  for (const auto& m : ms) {
    a.triggers += m.triggers, a.seeds += m.seeds, a.repaired += m.repaired, a.induced += m.induced;
    a.repair_ratio += m.repair_ratio, a.inducing_ratio += m.inducing_ratio, a.improvement_ratio += m.improvement_ratio;
    a.deviation_before += m.deviation_before, a.deviation_after += m.deviation_after;
  }
  const double k = double(ms.size());
  a.repair_ratio /= k, a.inducing_ratio /= k, a.improvement_ratio /= k, a.deviation_before /= k, a.deviation_after /= k;
  return a;
}

/// The paper's protocol: the pairs shuffled (seed) and split into `folds` folds by pair; for each
/// fold, h is trained on the others and evaluated on it.  Returns one metrics per fold.
template <class Net = DynamicNetwork>  // a template for train_repair's reason
std::vector<repair_metrics> cross_validate_repair(const repair_pairs& pairs, std::size_t folds = 5, std::uint64_t seed = 0,
                                                  repair_options o = {}) {
  const std::size_t n = pairs.size();
  if (folds < 2 || folds > n)
    throw value_error(nnlens::detail::concat("cross_validate_repair: ", folds, " folds for ", n, " pairs"));
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t(0));
  std::mt19937_64 rng(seed);
  nnlens::detail::shuffle(order, rng);
  std::vector<repair_metrics> out;
  for (std::size_t k = 0; k < folds; ++k) {
    const std::size_t a = k * n / folds, b = (k + 1) * n / folds;
    std::vector<std::size_t> test(order.begin() + std::ptrdiff_t(a), order.begin() + std::ptrdiff_t(b)), trainset;
    trainset.insert(trainset.end(), order.begin(), order.begin() + std::ptrdiff_t(a));
    trainset.insert(trainset.end(), order.begin() + std::ptrdiff_t(b), order.end());
    o.seed = seed * 1000 + k;
    const repair_model h = train_repair<Net>(pairs.subset(trainset), o);
    out.push_back(evaluate_repair(h, pairs.subset(test)));
  }
  return out;
}

/// The fraction of the n inputs on which the top-1 labels of f and g differ.
inline double deviation_rate(const black_box& f, const black_box& g, std::span<const float> x, std::size_t n) {
  if (n == 0) return 0;
  std::vector<float> pf(n * f.classes), pg(n * g.classes);
  f(x, n, pf);
  g(x, n, pg);
  std::size_t d = 0;
  for (std::size_t i = 0; i < n; ++i)
    d += is_triggering(std::span<const float>(pf.data() + i * f.classes, f.classes),
                       std::span<const float>(pg.data() + i * g.classes, g.classes));
  return double(d) / double(n);
}

}  // namespace nnlens::difftest
