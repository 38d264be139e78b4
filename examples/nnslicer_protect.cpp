// examples/nnslicer_protect.cpp -- NNSlicer's selective model protection (Zhang et al. FSE'20
// §6.3; spec docs/specs/nnslicer.md#43-selective-model-protection) on the project's Fashion-MNIST LeNet-5.
// docs/nnslicer-protection.md.
//
// The owner hides 50% of the synapses of every layer (their values are kept secret, e.g. in a
// TEE) and exposes the rest:
//   NNSlicer   the top 50% by |CONTRIB^T| (criterion: I_T = 500 training samples per target
//              class, O_T = the target logits): synapse_mask(net, table, 0.5)
//   Weight     the 50% of largest |w|
//   Random     a seeded random 50%
//   (Scratch   everything hidden: the attacker trains from nothing, for reference)
// The attacker knows the architecture and the exposed weights, re-initialises the hidden ones
// randomly (PyTorch's default initialisation, a seed of its own) and retrains every weight for
// 5 epochs (Adam lr 1e-3, batch 64) on a budget of B labelled training images (a seeded random
// draw over all classes).  Reported: accuracy on the target classes' test images (lower = better
// protection) and on the whole test set, argmax over all 10 logits.
//
//   nnslicer_protect [--fashion DIR] [--cache DIR] [--out DIR] [--scratch DIR] [--quick]
//                    [--targets 2,4,6] [--budgets 1000,5000,10000,30000,50000] [--epochs 5]
//                    [--per-class 500] [--seed 1]   (the attacker's: its initialisation, data draw
//                    and shuffle; Random's mask)
//   --scratch: where --quick caches the 2-epoch model when --cache has no 12-epoch one (default
//   --out; the ctests share one directory, so the tree trains that model once)
//
// Self-checks (exit status 1 on failure): every method hides exactly S - floor(S/2) synapses per
// layer; NNSlicer's hidden synapses all have |CONTRIB^T| >= every exposed one's in their layer;
// the attacker's starting network equals the owner's on the exposed synapses (and all biases)
// and the fresh initialisation on the hidden ones.
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "nnslicer_studies.hpp"

using namespace slicing_studies;

namespace {

int failures = 0;
void check(bool ok, const std::string& what) {
  if (!ok) {
    ++failures;
    std::printf("SELF-CHECK FAILED: %s\n", what.c_str());
  }
}

enum method { nns, weight, random_, scratch, n_methods };
const char* method_name[] = {"NNSlicer", "Weight", "Random", "Scratch"};

/// 1 = hidden.
masks hidden_masks(method m, const Net& net, const contrib_table& tab, std::uint64_t seed) {
  const auto L = weighted_layers(net);
  switch (m) {
    case nns: return per_layer(synapse_mask(net, tab, 0.5));
    case weight: {
      std::vector<std::vector<double>> key;
      for (const auto& w : L) {
        auto& k = key.emplace_back();
        for (float v : w.W) k.push_back(std::abs(double(v)));
      }
      return complement(smallest(key, 0.5));  // the S - floor(S/2) largest
    }
    case random_: {
      std::mt19937_64 rng(seed);
      std::vector<std::vector<double>> key;
      for (const auto& w : L) {
        auto& k = key.emplace_back();
        for (std::size_t i = 0; i < w.W.size(); ++i) k.push_back(double(rng() >> 11));
      }
      return complement(smallest(key, 0.5));
    }
    default: {
      masks all;
      for (const auto& w : L) all.emplace_back(w.W.size(), 1);
      return all;
    }
  }
}

}  // namespace

int main(int argc, char** argv) try {
  const cli c(argc, argv);
  const bool quick = c.has("quick");
  const fs::path fashion = c.str("fashion", "/usr/share/datasets/fashion-mnist");
  const fs::path out = c.str("out", "nnslicer_protect_out");
  const auto T = parse_classes(c.str("targets", "2,4,6"));
  const std::size_t per_class = c.num("per-class", quick ? 100 : 500);
  const std::size_t epochs = c.num("epochs", quick ? 1 : 5);
  const std::uint64_t seed = c.num("seed", 1);
  std::vector<std::size_t> budgets;
  {
    std::stringstream ss(c.str("budgets", quick ? "1000" : "1000,5000,10000,30000,50000"));
    std::string s;
    while (std::getline(ss, s, ',')) budgets.push_back(std::stoul(s));
  }
  fs::create_directories(out);
  stopwatch total;

  const auto train = io::load_mnist<float>(fashion, "train");
  const auto test = io::load_mnist<float>(fashion, "t10k");
  Net net;
  load_model(net, c.str("cache", "models-cache"), c.str("scratch", out.string()), quick, train);
  std::vector<std::size_t> all10(10);
  std::iota(all10.begin(), all10.end(), std::size_t(0));
  const dataset test_T = select(test, T), test_all = select(test, all10);
  const auto base_T = evaluate(net, test_T, T), base_all = evaluate(net, test_all, all10);
  std::printf("owner's model: %.1f%% on the target classes %s, %.1f%% on all classes\n", 100 * base_T.all, set_name(T).c_str(),
              100 * base_all.all);

  stopwatch sw;
  const profile prof = profile_network(execution::par, net, train.images);
  const dataset IT = select(train, T, per_class);
  const contrib_table tab = nnslicer(execution::par, net, prof, IT.x, criterion::fixed(T));
  std::printf("profile (60k images) and CONTRIB^T (%zu samples): %.2f s\n", IT.size(), sw.seconds());

  // the attacker's random initialisation of the hidden weights
  Net fresh;
  initialize(fresh, 20200913 + (seed - 1));
  const auto L0 = weighted_layers(net);
  const auto LF = weighted_layers(fresh);

  // acc[method][budget index + 1] (index 0: before retraining)
  std::vector<std::vector<accuracy>> accT(n_methods), accA(n_methods);
  for (int m = 0; m < n_methods; ++m) {
    const masks hid = hidden_masks(method(m), net, tab, 99 + (seed - 1));
    for (std::size_t l = 0; l < L0.size(); ++l) {
      const std::size_t S = L0[l].W.size(), expect = m == scratch ? S : S - S / 2;
      check(count(hid[l]) == expect, std::string(method_name[m]) + ": layer " + std::to_string(l) + " hides " +
                                         std::to_string(count(hid[l])) + ", expected " + std::to_string(expect));
      if (m == nns) {  // the hidden ones are the top |CONTRIB^T| of the layer
        std::int64_t min_hid = INT64_MAX, max_exp = 0;
        std::size_t k = 0, node = 0;
        for (std::size_t nd = 0; nd < tab.synapses.size(); ++nd)
          if (!tab.synapses[nd].empty() && k++ == l) node = nd;
        for (std::size_t i = 0; i < S; ++i) {
          const std::int64_t a = std::llabs(tab.synapses[node][i]);
          if (hid[l][i]) min_hid = std::min(min_hid, a);
          else max_exp = std::max(max_exp, a);
        }
        check(min_hid >= max_exp, "NNSlicer: layer " + std::to_string(l) + " hides a synapse of smaller |CONTRIB| than an exposed one");
      }
    }
    // the attacker's start: exposed weights and every bias as published, hidden weights re-drawn
    Net start = net;
    {
      auto LS = weighted_layers(start);
      for (std::size_t l = 0; l < LS.size(); ++l) {
        for (std::size_t i = 0; i < LS[l].W.size(); ++i)
          if (hid[l][i]) LS[l].W[i] = LF[l].W[i];
        if (m == scratch) std::copy(LF[l].b.begin(), LF[l].b.end(), LS[l].b.begin());
      }
      bool ok = true;
      for (std::size_t l = 0; l < LS.size(); ++l) {
        for (std::size_t i = 0; i < LS[l].W.size(); ++i) ok = ok && LS[l].W[i] == (hid[l][i] ? LF[l].W[i] : L0[l].W[i]);
        if (m != scratch) ok = ok && std::equal(LS[l].b.begin(), LS[l].b.end(), L0[l].b.begin());
      }
      check(ok, std::string(method_name[m]) + ": the attacker's start is not exposed + fresh");
    }
    accT[m].push_back(evaluate(start, test_T, T));
    accA[m].push_back(evaluate(start, test_all, all10));
    for (std::size_t bi = 0; bi < budgets.size(); ++bi) {
      const dataset D = select(train, all10, 0, budgets[bi], 1000 + bi + 100 * (seed - 1));
      Net a = start;
      train::adam opt(a, {.lr = 1e-3});
      train::fit_options fo;
      fo.epochs = epochs;
      fo.batch_size = 64;
      fo.seed = 5 + (seed - 1);
      train::fit(execution::par, a, opt, D.x, D.y, fo);
      accT[m].push_back(evaluate(a, test_T, T));
      accA[m].push_back(evaluate(a, test_all, all10));
      std::printf("  %-8s B = %6zu: target classes %5.1f%%, all classes %5.1f%%  (%.0f s)\n", method_name[m], budgets[bi],
                  100 * accT[m].back().all, 100 * accA[m].back().all, total.seconds());
      std::fflush(stdout);
    }
  }

  std::printf("\n== after the attacker's retraining (%zu epochs): accuracy on the target classes %s (lower = better protected) | on all classes\n",
              epochs, set_name(T).c_str());
  std::printf("  budget B |");
  for (int m = 0; m < n_methods; ++m) std::printf(" %8s", method_name[m]);
  std::printf(" |");
  for (int m = 0; m < n_methods; ++m) std::printf(" %8s", method_name[m]);
  std::printf("\n");
  for (std::size_t bi = 0; bi <= budgets.size(); ++bi) {
    if (bi == 0)
      std::printf("  (before) |");
    else
      std::printf("  %8zu |", budgets[bi - 1]);
    for (int m = 0; m < n_methods; ++m) std::printf("   %5.1f%%", 100 * accT[m][bi].all);
    std::printf(" |");
    for (int m = 0; m < n_methods; ++m) std::printf("   %5.1f%%", 100 * accA[m][bi].all);
    std::printf("\n");
  }
  std::printf("  owner's model: %.1f%% | %.1f%%.  Paper (ResNet10/CIFAR-10, 50%% hidden): NNSlicer < 10%% on the target classes\n"
              "  even at B = 50k; Weight and Random > 30%%; EffectivePath ~90%%.\n",
              100 * base_T.all, 100 * base_all.all);

  std::vector<series> ss;
  std::vector<std::string> ticks{"0"};
  for (std::size_t b : budgets) ticks.push_back(b >= 1000 ? std::to_string(b / 1000) + "k" : std::to_string(b));
  for (int m = 0; m < n_methods; ++m) {
    series s{method_name[m], {}, {}};
    for (std::size_t bi = 0; bi <= budgets.size(); ++bi) s.x.push_back(double(bi)), s.y.push_back(accT[m][bi].all);
    ss.push_back(s);
  }
  const fs::path p = out / "protect.svg";
  write_svg(p, "LeNet-5 / Fashion-MNIST: 50% hidden, attacker retrains " + std::to_string(epochs) + " epochs",
            "attacker's budget B (training images)", "accuracy on the target classes " + set_name(T), ss, 0,
            double(std::max<std::size_t>(1, budgets.size())), false, ticks);
  std::printf("wrote %s\ntotal %.1f s; self-checks: %s\n", p.string().c_str(), total.seconds(), failures ? "FAILED" : "passed");
  return failures ? 1 : 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "nnslicer_protect: %s\n", e.what());
  return 2;
}
