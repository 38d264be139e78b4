// examples/nnslicer_prune.cpp -- NNSlicer's targeted pruning (Zhang et al. FSE'20 §6.2; spec
// docs/specs/nnslicer.md#42-targeted-pruning) on the project's Fashion-MNIST LeNet-5.  docs/nnslicer-pruning.md.
//
// For each target class set T: the profile of the 60,000 training images; CONTRIB^T with the
// criterion (I_T = 500 training samples per target class, O_T = the target logits); then per
// layer and prune ratio r, four ways to pick the floor(r S) synapses to prune:
//   NNSlicer(T)    smallest |CONTRIB^T|, ties by |w| (synapse_mask's order; apply_slice(net,
//                  table, 1 - r) computed and compared for every r)
//   NNSlicer(all)  smallest |CONTRIB| with O = all 10 logits (same I_T)
//   Weight         smallest |w|                     (Han et al.)
//   Channel        the floor(r N) neurons of smallest mean |incoming weight| (the output layer's
//                  10 neurons are the classes: Channel leaves that layer alone)
// A neuron whose synapses are all pruned loses its bias too.  Accuracy on the target classes'
// test images (argmax over the target logits, and over all 10), without and with 1 epoch of
// fine-tuning (SGD lr 0.01, momentum 0.9, batch 64) on up to 10k training images of the target
// classes, the pruned weights held at 0 by a parameter mask.
//
//   nnslicer_prune [--fashion DIR] [--cache DIR] [--out DIR] [--scratch DIR] [--quick]
//                  [--sets "0,1;2,4,6;..."] [--per-class 500] [--finetune 10000] [--no-finetune]
//   --scratch: where --quick caches the 2-epoch model when --cache has no 12-epoch one (default
//   --out; the ctests share one directory, so the tree trains that model once)
//
// Self-checks (exit status 1 on failure): r = 0 leaves every weight bit-identical and the
// accuracy unchanged; r = 1 zeros every weight and gives exactly chance level (1/|T|, the test
// set has 1,000 images per class); every method prunes exactly floor(r S) synapses per layer
// (Channel: floor(r N) neurons); NNSlicer's pruned set is apply_slice(net, table, 1 - r)'s (or
// one synapse more in a layer where 1 - (1 - r) rounds below r: counted and printed as a note);
// the masked weights are still exactly 0 after fine-tuning.
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

std::size_t library_off_by_one = 0;  // (layer, r) where synapse_mask(1 - r) prunes floor(r S) - 1

enum method { nns_target, nns_all, weight, channel, n_methods };
const char* method_name[] = {"NNSlicer(T)", "NNSlicer(all)", "Weight", "Channel"};
const char* short_name[] = {"NNS(T)", "NNS(all)", "Weight", "Channel"};

struct result {
  accuracy plain, tuned;
};

/// Per layer, the floor(r S) synapses of smallest |CONTRIB| (ties: smaller |w| first, then the
/// lower index): synapse_mask's order.  (synapse_mask(net, t, keep = 1 - r) itself computes
/// floor((1 - keep) S), and 1 - (1 - r) is not r in floating point: at r = 0.1 it prunes 14 of 150.
/// The self-check below compares the two.)
masks smallest_contrib(const Net& net, const contrib_table& t, double r) {
  const auto L = weighted_layers(net);
  masks out;
  std::size_t l = 0;
  for (const auto& c : t.synapses) {
    if (c.empty()) continue;
    const auto& w = L.at(l++);
    const std::size_t S = c.size(), n = std::size_t(std::floor(r * double(S)));
    std::vector<std::size_t> idx(S);
    std::iota(idx.begin(), idx.end(), std::size_t(0));
    std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) {
      const auto ca = std::llabs(c[a]), cb = std::llabs(c[b]);
      if (ca != cb) return ca < cb;
      return std::abs(double(w.W[a])) < std::abs(double(w.W[b]));
    });
    auto& mm = out.emplace_back(S, 0);
    for (std::size_t j = 0; j < n; ++j) mm[idx[j]] = 1;
  }
  return out;
}

/// The synapses each method prunes at ratio r.
masks prune_masks(method m, const Net& net, const contrib_table& tab_t, const contrib_table& tab_a, double r) {
  const auto L = weighted_layers(net);
  switch (m) {
    case nns_target: return smallest_contrib(net, tab_t, r);
    case nns_all: return smallest_contrib(net, tab_a, r);
    case weight: {
      std::vector<std::vector<double>> key;
      for (const auto& w : L) {
        auto& k = key.emplace_back();
        for (float v : w.W) k.push_back(std::abs(double(v)));
      }
      return smallest(key, r);
    }
    default: {  // channel: neurons by mean |incoming weight|
      masks out;
      for (std::size_t l = 0; l < L.size(); ++l) {
        const auto& w = L[l];
        auto& mm = out.emplace_back(w.W.size(), 0);
        if (l + 1 == L.size()) continue;  // the output layer's neurons are the classes
        std::vector<std::vector<double>> key(1, std::vector<double>(w.out, 0.0));
        for (std::size_t i = 0; i < w.W.size(); ++i) key[0][w.neuron(i)] += std::abs(double(w.W[i])) / double(w.fan_in());
        const auto dead = smallest(key, r)[0];
        for (std::size_t i = 0; i < w.W.size(); ++i) mm[i] = dead[w.neuron(i)];
      }
      return out;
    }
  }
}

std::string pct(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%5.1f", 100 * v);
  return b;
}

}  // namespace

int main(int argc, char** argv) try {
  const cli c(argc, argv);
  const bool quick = c.has("quick");
  const fs::path fashion = c.str("fashion", "/usr/share/datasets/fashion-mnist");
  const fs::path out = c.str("out", "nnslicer_prune_out");
  const std::size_t per_class = c.num("per-class", quick ? 100 : 500);
  const std::size_t ft_n = c.num("finetune", quick ? 2000 : 10000);
  const bool finetune = !c.has("no-finetune");
  std::vector<std::vector<std::size_t>> sets;
  {
    std::stringstream ss(c.str("sets", quick ? "0,1" : "0,1;2,4,6;5,7,9;0-4;all"));
    std::string s;
    while (std::getline(ss, s, ';')) sets.push_back(parse_classes(s));
  }
  std::vector<double> ratios;
  if (quick)
    ratios = {0.0, 0.55, 1.0};
  else
    for (int k = 0; k <= 20; ++k) ratios.push_back(k / 20.0);
  fs::create_directories(out);
  stopwatch total;

  const auto train = io::load_mnist<float>(fashion, "train");
  const auto test = io::load_mnist<float>(fashion, "t10k");
  Net net;
  load_model(net, c.str("cache", "models-cache"), c.str("scratch", out.string()), quick, train);
  const auto full = train::evaluate(execution::par, net, test.images, test.labels);
  std::printf("test accuracy (all 10 classes): %.2f%%\n", 100 * full.accuracy);

  stopwatch sw;
  const profile prof = profile_network(execution::par, net, train.images);
  std::printf("profile of %zu training images: %.2f s\n\n", prof.samples, sw.seconds());

  const auto L0 = weighted_layers(net);
  std::vector<std::size_t> all10(10);
  std::iota(all10.begin(), all10.end(), std::size_t(0));

  // acc[set][method][ratio]
  std::vector<std::vector<std::vector<result>>> acc(sets.size(), std::vector<std::vector<result>>(n_methods, std::vector<result>(ratios.size())));
  std::vector<accuracy> base(sets.size());
  for (std::size_t si = 0; si < sets.size(); ++si) {
    const auto& T = sets[si];
    const dataset IT = select(train, T, per_class);
    const dataset test_T = select(test, T);
    const dataset ft = select(train, T, 0, ft_n, 7 + si);
    sw = stopwatch();
    const contrib_table tab_t = nnslicer(execution::par, net, prof, IT.x, criterion::fixed(T));
    const double t_slice = sw.seconds();
    const contrib_table tab_a = T.size() == 10 ? tab_t : nnslicer(execution::par, net, prof, IT.x, criterion::fixed(all10));
    base[si] = evaluate(net, test_T, T);
    std::printf("== target classes %s: I_T %zu samples (CONTRIB^T in %.2f s), %zu test images, %zu fine-tuning images; "
                "unpruned accuracy %.1f%% (target argmax) / %.1f%% (all 10)\n",
                set_name(T).c_str(), IT.size(), t_slice, test_T.size(), ft.size(), 100 * base[si].target, 100 * base[si].all);
    std::fflush(stdout);
    for (int m = 0; m < n_methods; ++m) {
      for (std::size_t ri = 0; ri < ratios.size(); ++ri) {
        const double r = ratios[ri];
        const masks pm = prune_masks(method(m), net, tab_t, tab_a, r);
        Net pruned = net;
        const auto pmask = prune(pruned, pm);
        // self-checks on what was pruned
        for (std::size_t l = 0; l < L0.size(); ++l) {
          const std::size_t S = L0[l].W.size(), N = L0[l].out;
          const std::size_t expect = m == channel ? (l + 1 == L0.size() ? 0 : std::size_t(std::floor(r * double(N))) * L0[l].fan_in())
                                                  : std::size_t(std::floor(r * double(S)));
          check(count(pm[l]) == expect, std::string(method_name[m]) + ": layer " + std::to_string(l) + " pruned " +
                                            std::to_string(count(pm[l])) + " synapses at r = " + std::to_string(r) +
                                            ", expected " + std::to_string(expect));
        }
        if (m == nns_target) {  // the same as the library's apply_slice(net, table, 1 - r)
          // keep = 1 exactly would mean "the slice" (CONTRIB != 0) to synapse_mask, so r = 0 asks
          // for the largest keep below 1 (it prunes floor(~1e-16 S) = 0 synapses)
          const double keep = r == 0 ? std::nextafter(1.0, 0.0) : 1.0 - r;
          const masks lib = complement(per_layer(synapse_mask(net, tab_t, keep)));
          const Net ref = apply_slice(net, tab_t, keep);
          const auto a = weighted_layers(pruned);
          const auto b = weighted_layers(ref);
          for (std::size_t l = 0; l < a.size(); ++l) {
            // apply_slice zeros exactly synapse_mask's complement
            bool ok = true;
            for (std::size_t i = 0; i < b[l].W.size(); ++i) ok = ok && (lib[l][i] ? b[l].W[i] == 0.f : b[l].W[i] == L0[l].W[i]);
            check(ok, "apply_slice does not zero exactly synapse_mask's complement");
            // the same ranking: the library's pruned set is ours, or ours less its last synapse
            // when 1 - (1 - r) rounds below r (floor gives one fewer)
            std::size_t extra = 0;
            bool subset = true;
            for (std::size_t i = 0; i < pm[l].size(); ++i) {
              subset = subset && (!lib[l][i] || pm[l][i]);
              extra += pm[l][i] && !lib[l][i];
            }
            check(subset && extra <= 1, "NNSlicer(T): synapse_mask ranks layer " + std::to_string(l) + " differently at r = " + std::to_string(r));
            if (extra) ++library_off_by_one;
          }
        }
        if (r == 0) {
          const auto a = parameter_spans(std::as_const(pruned));
          const auto b = parameter_spans(std::as_const(net));
          bool same = true;
          for (std::size_t k = 0; k < a.size(); ++k) same = same && std::equal(a[k].begin(), a[k].end(), b[k].begin());
          check(same, std::string(method_name[m]) + ": r = 0 changed the weights");
        }
        auto& res = acc[si][m][ri];
        res.plain = evaluate(pruned, test_T, T);
        if (r == 0) check(res.plain.target == base[si].target && res.plain.all == base[si].all, "r = 0 changed the accuracy");
        if (r == 1) {
          check(res.plain.target == 1.0 / double(T.size()),
                std::string(method_name[m]) + ": r = 1 gives " + pct(res.plain.target) + "%, expected chance 1/|T|");
          if (m != channel)
            for (const auto& w : weighted_layers(pruned))
              check(std::all_of(w.W.begin(), w.W.end(), [](float v) { return v == 0.f; }), "r = 1 left a weight");
        }
        if (finetune && r > 0 && r < 1) {
          train::sgd opt(pruned, {.lr = 0.01, .momentum = 0.9});
          train::fit_options fo;
          fo.epochs = 1;
          fo.batch_size = 64;
          fo.seed = 11;
          fo.mask = &pmask;
          train::fit(execution::par, pruned, opt, ft.x, ft.y, fo);
          const auto L = weighted_layers(pruned);
          std::size_t nonzero = 0;
          for (std::size_t l = 0; l < L.size(); ++l)
            for (std::size_t i = 0; i < L[l].W.size(); ++i) nonzero += pm[l][i] && L[l].W[i] != 0.f;
          check(nonzero == 0, std::string(method_name[m]) + ": " + std::to_string(nonzero) + " pruned weights moved while fine-tuning");
          res.tuned = evaluate(pruned, test_T, T);
        } else {
          res.tuned = res.plain;
        }
      }
    }
    // the table of this set
    std::printf("\n  r     | target-logit argmax, no fine-tuning       | ... after 1 epoch of fine-tuning          | all-10 argmax, no fine-tuning\n");
    std::printf("        |");
    for (int k = 0; k < 3; ++k) {
      for (int m = 0; m < n_methods; ++m) std::printf(" %9.9s", short_name[m]);
      std::printf(" |");
    }
    std::printf("\n");
    for (std::size_t ri = 0; ri < ratios.size(); ++ri) {
      std::printf("  %4.0f%% |", 100 * ratios[ri]);
      for (int m = 0; m < n_methods; ++m) std::printf("    %s%%", pct(acc[si][m][ri].plain.target).c_str());
      std::printf(" |");
      for (int m = 0; m < n_methods; ++m) std::printf("    %s%%", pct(acc[si][m][ri].tuned.target).c_str());
      std::printf(" |");
      for (int m = 0; m < n_methods; ++m) std::printf("    %s%%", pct(acc[si][m][ri].plain.all).c_str());
      std::printf("\n");
    }
    std::printf("  (%.1f s so far)\n\n", total.seconds());
    std::fflush(stdout);
  }

  // the mean over the sets (the paper averages over all 2^10 subsets of CIFAR-10's classes; we
  // take a few subsets of different sizes instead)
  auto mean_of = [&](int m, std::size_t ri, auto get) {
    double s = 0;
    for (std::size_t si = 0; si < sets.size(); ++si) s += get(acc[si][m][ri]);
    return s / double(sets.size());
  };
  std::printf("== mean over the %zu target sets\n", sets.size());
  std::printf("  r     | target argmax, no FT                      | target argmax, 1 epoch FT                 | all-10 argmax, no FT                      | all-10 argmax, 1 epoch FT\n        |");
  for (int k = 0; k < 4; ++k) {
    for (int m = 0; m < n_methods; ++m) std::printf(" %9.9s", short_name[m]);
    std::printf(" |");
  }
  std::printf("\n");
  for (std::size_t ri = 0; ri < ratios.size(); ++ri) {
    std::printf("  %4.0f%% |", 100 * ratios[ri]);
    for (int m = 0; m < n_methods; ++m) std::printf("    %s%%", pct(mean_of(m, ri, [](const result& x) { return x.plain.target; })).c_str());
    std::printf(" |");
    for (int m = 0; m < n_methods; ++m) std::printf("    %s%%", pct(mean_of(m, ri, [](const result& x) { return x.tuned.target; })).c_str());
    std::printf(" |");
    for (int m = 0; m < n_methods; ++m) std::printf("    %s%%", pct(mean_of(m, ri, [](const result& x) { return x.plain.all; })).c_str());
    std::printf(" |");
    for (int m = 0; m < n_methods; ++m) std::printf("    %s%%", pct(mean_of(m, ri, [](const result& x) { return x.tuned.all; })).c_str());
    std::printf("\n");
  }

  // headline: r = 0.55 without fine-tuning
  std::size_t r55 = ratios.size();
  for (std::size_t ri = 0; ri < ratios.size(); ++ri)
    if (std::abs(ratios[ri] - 0.55) < 1e-9) r55 = ri;
  if (r55 < ratios.size()) {
    std::printf("\n== headline: accuracy at r = 55%% without fine-tuning (mean over the sets; target-logit argmax / all-10 argmax)\n");
    for (int m = 0; m < n_methods; ++m)
      std::printf("  %-14s %5.1f%% / %5.1f%%   (paper, ResNet10/CIFAR-10: %s)\n", method_name[m],
                  100 * mean_of(m, r55, [](const result& x) { return x.plain.target; }),
                  100 * mean_of(m, r55, [](const result& x) { return x.plain.all; }),
                  m == nns_target ? "~80%" : m == channel ? "low throughout" : "high only below r = 45%");
  }

  // the charts: mean over the sets, target-logit argmax
  for (int ft = 0; ft < (finetune ? 2 : 1); ++ft) {
    std::vector<series> ss;
    for (int m = 0; m < n_methods; ++m) {
      series s{method_name[m], {}, {}};
      for (std::size_t ri = 0; ri < ratios.size(); ++ri) {
        s.x.push_back(ratios[ri]);
        s.y.push_back(mean_of(m, ri, [&](const result& x) { return ft ? x.tuned.target : x.plain.target; }));
      }
      ss.push_back(s);
    }
    const fs::path p = out / (ft ? "prune_finetuned.svg" : "prune.svg");
    write_svg(p, std::string("LeNet-5 / Fashion-MNIST: targeted pruning") + (ft ? ", 1 epoch fine-tuning" : ", no fine-tuning"),
              "prune ratio r (per layer)", "accuracy on the target classes", ss, 0, 1);
    std::printf("wrote %s\n", p.string().c_str());
  }
  if (library_off_by_one)
    std::printf("note: synapse_mask(net, table, 1 - r) pruned one synapse fewer than floor(r S) in %zu (layer, r, set) cases "
                "(1 - (1 - r) < r in floating point); this example ranks by the same order itself and prunes exactly floor(r S)\n",
                library_off_by_one);
  std::printf("total %.1f s; self-checks: %s\n", total.seconds(), failures ? "FAILED" : "passed");
  return failures ? 1 : 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "nnslicer_prune: %s\n", e.what());
  return 2;
}
