// examples/deepimportance_study.cpp -- DeepImportance's study (Gerasimou et al., ICSE 2020;
// docs/specs/deepimportance.md#4-evaluation-setup-and-headline-numbers, Tables 2-5) on the project's Fashion-MNIST LeNet-1, LeNet-4 and
// LeNet-5, and (with nnlens::onnx) IDC on DeepXplore's MNIST LeNets with their 96 images.
// docs/deepimportance-study.md has the measured tables beside the paper's.
//
//   deepimportance_study [--fashion DIR] [--cache DIR] [--weights FILE (LeNet-5)] [--models DIR]
//                        [--train N] [--test N] [--sa-train N] [--rq5-train N] [--rq1 N]
//                        [--copies 5] [--epochs 6] [--seed S] [--quick] [--dump-clusters DIR]
//
// LSC is measured twice: on [0, 2000] (the spec's proposal, the library's default) and on
// [L, 2000] with L = the minimum LSA of U_O (the SA reference code's reading: lower = the minimum
// SA of the target set), the same range for every U_O+X; beside each, the share of the inputs fed
// whose LSA fell inside the range (lsc_criterion::range()).
// --dump-clusters DIR: after the IDC preparation, write for each of the m_max important neurons
// its activations over T' (DIR/<model>-neuron<j>.f64: raw little-endian doubles, zeros included,
// in training order) and DIR/<model>-nnlens.csv (per neuron: values left after dropping zeros, the
// silhouette of k = 2, 3, 4 and the k chosen, by cluster_neuron on all values and on the
// deterministic subsample used by examples/deepimportance_kmeans_sklearn.py: every ceil(n / 5000)-th non-zero
// value); then skip the RQs (the k-means comparison of docs/deepimportance-study.md).
//
// Per model (subject layer: subject_layer(net), the penultimate representation):
//  - preparation: IDC (relevance of the subject layer over the correctly classified training
//    images, the m_max most relevant neurons, k-means + silhouette per neuron; IDC for a smaller m
//    is the prefix of that ranking, which is exactly what prepare_idc(m) computes), neuron bounds
//    (KMNC/NBC/SNAC) and the surprise model (LSC/DSC, on a training subset: DSA is brute force);
//  - RQ1 (Table 2): per test input, the top-10% pixels by |αβ-LRP relevance| get Gaussian noise
//    (σ 0.75, clipped to [0,1]); L2 distance between the original and perturbed activations of the
//    m = 6 important neurons vs m random neurons of the same layer (fresh seeded draw per input);
//  - RQ2 (Table 3): IDC m in {6,8,10,12} and NC 0.75, KMNC 1000, NBC, SNAC, TKNC 3, LSC, DSC on
//    U_O (the test subset), U_O+S (5 copies: 15 random pixels each get noise σ 0.75) and U_O+DI
//    (5 copies: the top-2% = 15 most relevant pixels by |αβ relevance| get noise σ 0.75);
//  - RQ3/4 (Table 4): U_O plus U_S' (white noise σ 0.3 on all pixels, one copy), FGSM, BIM, PGD
//    (eps 0.1; BIM/PGD 10 steps of 0.02) from the test subset, labels = the true labels;
//  - RQ5 (Table 5): IDC per block output (each conv/dense block's last layer), m = 4 (LeNet-1/4)
//    or 6 (LeNet-5), U_O and U_O+DI;
//  - timings of each stage.
// The covered sets are incremental: U_O+X = a copy of U_O's state fed X.
// Exit status: 0 when the self-checks pass (every coverage in [0, 100]; U_O+X >= U_O for every
// criterion and set; preparing IDC twice gives the same neurons and centroids; the attacks lower
// the accuracy), 1 otherwise, 2 on an error.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <nnlens/coverage.hpp>
#include <nnlens/coverage/neuron_coverage.hpp>
#include <nnlens/coverage/surprise.hpp>
#include <nnlens/io/idx.hpp>
#include <nnlens/io/weights.hpp>
#include <nnlens/nnlens.hpp>
#include <nnlens/train/attacks.hpp>
#include <nnlens/train/fit.hpp>
#if defined(NNLENS_EXAMPLE_WITH_ONNX)
#include <nnlens/io/image.hpp>
#include <nnlens/io/onnx.hpp>
#endif

#include "../tools/nnlens/lenet5_recipe.hpp"
#include "example_cli.hpp"

namespace fs = std::filesystem;
using namespace nnlens;

/// LeNet-1 and LeNet-4 as in DeepXplore/DeepImportance ('same' padding), trained here on
/// Fashion-MNIST with the LeNet-5 recipe.
using LeNet1 = Sequential<Input<1, 28, 28>, Conv2D<4, 5, 1, 2>, ReLU, MaxPool2D<2>, Conv2D<12, 5, 1, 2>, ReLU, MaxPool2D<2>,
                          Flatten, Dense<10>>;
using LeNet4 = Sequential<Input<1, 28, 28>, Conv2D<6, 5, 1, 2>, ReLU, MaxPool2D<2>, Conv2D<16, 5, 1, 2>, ReLU, MaxPool2D<2>,
                          Flatten, Dense<84>, ReLU, Dense<10>>;
/// DeepXplore's LeNet-5 ('same' padding everywhere; the project's demo::LeNet5 has a valid conv2).
using DxLeNet5 = Sequential<Input<1, 28, 28>, Conv2D<6, 5, 1, 2>, ReLU, MaxPool2D<2>, Conv2D<16, 5, 1, 2>, ReLU, MaxPool2D<2>,
                            Flatten, Dense<120>, ReLU, Dense<84>, ReLU, Dense<10>>;

namespace {

using nnlens_examples::cli;
using nnlens_examples::stopwatch;

constexpr std::size_t D_IN = 28 * 28;
bool g_ok = true;

void check(bool c, const std::string& what) {
  if (!c) {
    g_ok = false;
    std::printf("CHECK FAILED: %s\n", what.c_str());
  }
}

xt::xarray<float> first_rows(const xt::xarray<float>& images, std::size_t n) {
  xt::xarray<float> r = xt::xarray<float>::from_shape({n, 1, 28, 28});
  std::copy_n(images.data(), n * D_IN, r.data());
  return r;
}

template <class Net, class A>
std::vector<std::size_t> predictions(const Net& net, const A& X) {
  const auto y = forward(execution::par, net, X);
  const std::size_t n = X.shape()[0], c = y.size() / n;
  std::vector<std::size_t> p(n);
  for (std::size_t i = 0; i < n; ++i) p[i] = std::size_t(std::max_element(y.data() + i * c, y.data() + (i + 1) * c) - (y.data() + i * c));
  return p;
}

template <class Labels>
double accuracy(const std::vector<std::size_t>& p, const Labels& y) {
  std::size_t ok = 0;
  for (std::size_t i = 0; i < p.size(); ++i) ok += p[i] == std::size_t(y[i]);
  return p.empty() ? 0 : double(ok) / double(p.size());
}

/// Per input, the k pixels with the largest |relevance| (ties: the lower index).
std::vector<std::vector<std::size_t>> top_pixels(const xt::xarray<double>& R, std::size_t k) {
  const std::size_t n = R.shape()[0];
  std::vector<std::vector<std::size_t>> r(n);
  std::vector<std::size_t> idx(D_IN);
  for (std::size_t i = 0; i < n; ++i) {
    const double* row = R.data() + i * D_IN;
    std::iota(idx.begin(), idx.end(), std::size_t(0));
    std::partial_sort(idx.begin(), idx.begin() + std::ptrdiff_t(k), idx.end(), [&](std::size_t a, std::size_t b) {
      const double fa = std::abs(row[a]), fb = std::abs(row[b]);
      return fa > fb || (fa == fb && a < b);
    });
    r[i].assign(idx.begin(), idx.begin() + std::ptrdiff_t(k));
  }
  return r;
}

/// X with Gaussian noise (σ) on the given pixels of each input (pixels = null: k random ones,
/// drawn per input), clipped to [0, 1].
xt::xarray<float> perturb(const xt::xarray<float>& X, const std::vector<std::vector<std::size_t>>* pixels, std::size_t k, double sigma,
                          std::uint64_t seed) {
  xt::xarray<float> P = X;
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> noise(0, sigma);
  std::vector<std::size_t> all(D_IN);
  std::iota(all.begin(), all.end(), std::size_t(0));
  const std::size_t n = X.shape()[0];
  for (std::size_t i = 0; i < n; ++i) {
    float* row = P.data() + i * D_IN;
    auto hit = [&](std::size_t p) { row[p] = float(std::clamp(double(row[p]) + noise(rng), 0.0, 1.0)); };
    if (pixels) {
      for (std::size_t p : (*pixels)[i]) hit(p);
    } else if (k >= D_IN) {
      for (std::size_t p = 0; p < D_IN; ++p) hit(p);
    } else {
      for (std::size_t j = 0; j < k; ++j) {  // partial Fisher-Yates
        std::uniform_int_distribution<std::size_t> u(j, D_IN - 1);
        std::swap(all[j], all[u(rng)]);
        hit(all[j]);
      }
    }
  }
  return P;
}

// ------------------------------------------------------------------------------------------------
// the criteria, fed from one stream of all coverage layers

/// Columns of `want` (layer indices, each in `all`) cut from a block of the layers `all`.
struct sub_block {
  std::vector<std::size_t> src_off, src_len;
  std::vector<double> buf;
  neuron_block b;
  sub_block(const std::vector<std::size_t>& all, const std::vector<std::size_t>& all_neurons, const std::vector<std::size_t>& want) {
    std::vector<std::size_t> off(all.size() + 1, 0);
    for (std::size_t k = 0; k < all.size(); ++k) off[k + 1] = off[k] + all_neurons[k];
    b.offsets.push_back(0);
    for (std::size_t l : want) {
      const auto it = std::find(all.begin(), all.end(), l);
      if (it == all.end()) throw value_error("sub_block: layer not streamed");
      const std::size_t k = std::size_t(it - all.begin());
      src_off.push_back(off[k]);
      src_len.push_back(all_neurons[k]);
      b.offsets.push_back(b.offsets.back() + all_neurons[k]);
    }
    b.width = b.offsets.back();
  }
  const neuron_block& cut(const neuron_block& in) {
    buf.resize(in.rows * b.width);
    for (std::size_t r = 0; r < in.rows; ++r) {
      double* o = buf.data() + r * b.width;
      for (std::size_t q = 0; q < src_off.size(); ++q) o = std::copy_n(in.row(r) + src_off[q], src_len[q], o);
    }
    b.first = in.first, b.rows = in.rows, b.data = buf.data();
    return b;
  }
};

struct suite {
  std::vector<std::size_t> all, all_neurons;  // the streamed layers (coverage_layers) and their widths
  std::vector<idc> idcs;
  std::optional<nc_criterion> nc;
  std::optional<kmnc_criterion> km;
  std::optional<nbc_criterion> nb;
  std::optional<snac_criterion> sn;
  std::optional<tknc_criterion> tk;
  std::optional<lsc_criterion> lsc;
  std::optional<lsc_criterion> lsc_ref;  // [min LSA of U_O, 2000]: the SA reference code's range
  std::optional<dsc_criterion> dsc;

  template <class Net>
  explicit suite(const Net& net) {
    for (const auto& c : coverage_layers(net)) all.push_back(c.index), all_neurons.push_back(c.neurons);
  }
  void add(const neuron_block& b) {
    std::map<std::vector<std::size_t>, sub_block> subs;  // per layer list
    auto cut = [&](const std::vector<std::size_t>& ls) -> const neuron_block& {
      auto it = subs.find(ls);
      if (it == subs.end()) it = subs.emplace(ls, sub_block(all, all_neurons, ls)).first;
      return it->second.cut(b);
    };
    for (auto& c : idcs) c.add(cut(c.layers()));
    if (nc) nc->add(b);
    if (km) km->add(b);
    if (nb) nb->add(b);
    if (sn) sn->add(b);
    if (tk) tk->add(b);
    if (lsc) lsc->add(cut(lsc->layers()));
    if (lsc_ref) lsc_ref->add(cut(lsc_ref->layers()));
    if (dsc) dsc->add(cut(dsc->layers()));
  }
  std::vector<coverage_result> results() const {
    std::vector<coverage_result> r;
    for (const auto& c : idcs) r.push_back(c.result());
    if (nc) r.push_back(nc->result());
    if (km) r.push_back(km->result());
    if (nb) r.push_back(nb->result());
    if (sn) r.push_back(sn->result());
    if (tk) r.push_back(tk->result());
    if (lsc) r.push_back(lsc->result());
    if (lsc_ref) r.push_back(lsc_ref->result());
    if (dsc) r.push_back(dsc->result());
    return r;
  }
  std::vector<std::string> columns() const {
    std::vector<std::string> r;
    for (const auto& c : idcs) r.push_back("IDC" + std::to_string(c.neurons().size()));
    if (nc) r.push_back("NC");
    if (km) r.push_back("KMNC");
    if (nb) r.push_back("NBC");
    if (sn) r.push_back("SNAC");
    if (tk) r.push_back("TKNC");
    if (lsc) r.push_back("LSC");
    if (lsc_ref) r.push_back("LSC(min)");
    if (dsc) r.push_back("DSC");
    return r;
  }
  /// The share of the inputs fed whose LSA fell inside each LSC's range (never a silent 0).
  std::string lsc_range_note() const {
    std::string r;
    char b[160];
    for (const auto* c : {&lsc, &lsc_ref}) {
      if (!*c) continue;
      const auto& g = (*c)->range();
      std::snprintf(b, sizeof b, "%s[%.1f, %.0f]: %.1f%% of %zu inputs in range (%zu below)", r.empty() ? "" : "; ",
                    (*c)->options().lower, (*c)->options().upper, 100 * g.in_range_fraction(), g.inputs, g.below);
      r += b;
    }
    return r;
  }
};

template <class Net>
void feed(const Net& net, const xt::xarray<float>& X, suite& s) {
  stream_neurons(execution::par, net, std::span<const float>(X.data(), X.size()), X.shape()[0], s.all,
                 [&](const neuron_block& b) { s.add(b); });
}

/// One table: rows of sets, columns of criteria; the U_O+X >= U_O checks.
struct table {
  std::vector<std::string> cols;
  std::vector<std::pair<std::string, std::vector<coverage_result>>> rows;
  std::vector<std::string> notes;  // per row: the LSC ranges' in-range shares
  void add(const std::string& name, const suite& s) {
    rows.push_back({name, s.results()});
    notes.push_back(s.lsc_range_note());
  }
  void print(const std::string& title) const {
    std::printf("\n%s\n| set |", title.c_str());
    for (const auto& c : cols) std::printf(" %s |", c.c_str());
    std::printf("\n|---|");
    for (std::size_t i = 0; i < cols.size(); ++i) std::printf("---|");
    std::printf("\n");
    for (const auto& [name, r] : rows) {
      std::printf("| %s |", name.c_str());
      for (const auto& v : r) std::printf(" %.1f |", v.percent);
      std::printf("\n");
    }
    for (std::size_t i = 0; i < notes.size(); ++i)
      if (!notes[i].empty()) std::printf("LSC inputs in range, %s: %s\n", rows[i].first.c_str(), notes[i].c_str());
  }
  void check_monotone(const std::string& model) const {
    for (const auto& [name, r] : rows)
      for (std::size_t c = 0; c < r.size(); ++c) {
        check(r[c].percent >= 0 && r[c].percent <= 100, model + " " + name + " " + cols[c] + " in [0, 100]");
        check(r[c].covered >= rows[0].second[c].covered, model + " " + name + " " + cols[c] + " >= U_O");
      }
  }
};

struct study_args {
  bool quick = false;
  std::size_t n_train = 60000, n_test = 10000, n_sa = 5000, n_rq5 = 60000, n_rq1 = 1000, copies = 5;
  std::vector<std::size_t> ms = {6, 8, 10, 12};
  std::uint64_t seed = 1;
  std::string dump;  // --dump-clusters DIR
};

/// --dump-clusters: the important neurons' activations over T' and cluster_neuron's silhouettes.
template <class Net>
void dump_clusters(const std::string& model, const Net& net, const xt::xarray<float>& Xtr, const std::vector<std::uint8_t>& ytr,
                   const idc& full, const fs::path& dir) {
  fs::create_directories(dir);
  const auto pred = predictions(net, Xtr);
  const std::size_t w = full.width();
  std::vector<double> acts;  // T' rows x w
  const std::vector<std::size_t> ls = {full.layer()};
  stream_neurons(execution::par, net, std::span<const float>(Xtr.data(), Xtr.size()), Xtr.shape()[0], ls, [&](const neuron_block& b) {
    for (std::size_t r = 0; r < b.rows; ++r)
      if (pred[b.first + r] == ytr[b.first + r]) acts.insert(acts.end(), b.data + r * b.width, b.data + (r + 1) * b.width);
  });
  const std::size_t rows = acts.size() / w;
  check(rows == full.training_inputs(), model + ": the dump's T' has the preparation's size");
  std::string name = model;
  name.erase(std::remove(name.begin(), name.end(), '-'), name.end());
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char ch) { return char(std::tolower(ch)); });
  FILE* csv = std::fopen((dir / (name + "-nnlens.csv")).string().c_str(), "w");
  if (!csv) throw io_error((dir / (name + "-nnlens.csv")).string() + ": cannot write");
  std::fprintf(csv, "model,rank,neuron,n,nonzero,s2,s3,s4,k,k_idc,sub_n,sub_s2,sub_s3,sub_s4,sub_k\n");
  for (std::size_t q = 0; q < full.neurons().size(); ++q) {
    const std::size_t j = full.neurons()[q];
    std::vector<double> col(rows);
    for (std::size_t r = 0; r < rows; ++r) col[r] = acts[r * w + j];
    const fs::path f = dir / (name + "-neuron" + std::to_string(j) + ".f64");
    FILE* bf = std::fopen(f.string().c_str(), "wb");
    if (!bf || std::fwrite(col.data(), sizeof(double), col.size(), bf) != col.size()) throw io_error(f.string() + ": cannot write");
    std::fclose(bf);
    std::vector<double> nz;
    for (double v : col)
      if (v != 0.0) nz.push_back(v);
    const std::size_t step = std::max<std::size_t>(1, (nz.size() + 4999) / 5000);
    std::vector<double> sub;
    for (std::size_t i = 0; i < nz.size(); i += step) sub.push_back(nz[i]);
    const auto a = cluster_neuron(col), s = cluster_neuron(sub);
    auto sil = [](const neuron_clusters& c, std::size_t i) { return i < c.silhouettes.size() ? c.silhouettes[i] : NAN; };
    std::fprintf(csv, "%s,%zu,%zu,%zu,%zu,%.6f,%.6f,%.6f,%zu,%zu,%zu,%.6f,%.6f,%.6f,%zu\n", model.c_str(), q, j, rows, a.n_used, sil(a, 0),
                 sil(a, 1), sil(a, 2), a.k, full.centroids()[q].size(), sub.size(), sil(s, 0), sil(s, 1), sil(s, 2), s.k);
    std::printf("  neuron %zu: %zu of %zu T' values non-zero; silhouette k=2 %.4f, k=3 %.4f, k=4 %.4f -> k = %zu (IDC kept %zu centroids)\n",
                j, a.n_used, rows, sil(a, 0), sil(a, 1), sil(a, 2), a.k, full.centroids()[q].size());
  }
  std::fclose(csv);
}

/// The IDC of the first m neurons of a prepared IDC (prepare_idc ranks neurons by relevance and
/// clusters each on its own, so this is prepare_idc with that m).
idc prefix(const idc& c, std::size_t m) {
  std::vector<std::size_t> n(c.neurons().begin(), c.neurons().begin() + std::ptrdiff_t(m));
  std::vector<std::vector<double>> cs(c.centroids().begin(), c.centroids().begin() + std::ptrdiff_t(m));
  return idc(c.layer(), c.width(), std::move(n), std::move(cs), c.fingerprint());
}

/// The layers RQ5 looks at: the last layer of each conv/dense block (the layer before the next
/// weighted layer, Flatten skipped), the output layer's block excluded.
template <class Net>
std::vector<std::size_t> block_outputs(const Net& net) {
  const auto ls = coverage_layers(net);
  std::vector<std::size_t> w;
  for (std::size_t i = 0; i < ls.size(); ++i)
    if (ls[i].weighted) w.push_back(i);
  std::vector<std::size_t> r;
  for (std::size_t j = 1; j < w.size(); ++j) r.push_back(ls[w[j] - 1].index);
  return r;
}

template <class Net>
bool study(const std::string& model, const Net& net, const io::labelled_images<float>& trn, const io::labelled_images<float>& tst,
           const study_args& a) {
  stopwatch sw;
  const std::size_t n_tr = std::min(a.n_train, trn.size()), n_te = std::min(a.n_test, tst.size());
  const auto Xtr = first_rows(trn.images, n_tr);
  const std::vector<std::uint8_t> ytr(trn.labels.begin(), trn.labels.begin() + std::ptrdiff_t(n_tr));
  const auto Xte = first_rows(tst.images, n_te);
  const std::vector<std::uint8_t> yte(tst.labels.begin(), tst.labels.begin() + std::ptrdiff_t(n_te));
  const std::size_t subj = subject_layer(net);
  const auto layers = coverage_layers(net);
  std::string subj_name;
  for (const auto& c : layers)
    if (c.index == subj) subj_name = c.name + " (" + std::to_string(c.neurons) + " neurons)";
  std::printf("\n==== %s: %zu training / %zu test images; test accuracy %.2f%%; subject layer %s\n", model.c_str(), n_tr, n_te,
              100 * accuracy(predictions(net, Xte), yte), subj_name.c_str());

  // ---- preparation
  const std::size_t mmax = *std::max_element(a.ms.begin(), a.ms.end());
  stopwatch sp;
  const idc full = prepare_idc(execution::par, net, Xtr, ytr, idc_options{.m = mmax});
  const double t_idc = sp.seconds();
  if (a.quick) {
    const idc again = prepare_idc(execution::par, net, Xtr, ytr, idc_options{.m = mmax});
    check(again.neurons() == full.neurons() && again.centroids() == full.centroids(), model + ": IDC preparation deterministic");
  }
  std::printf("IDC preparation: %zu of %zu training images correctly classified (T'), %.1f s; neurons by relevance:",
              full.training_inputs(), n_tr, t_idc);
  for (std::size_t q = 0; q < full.neurons().size(); ++q) std::printf(" %zu(k=%zu)", full.neurons()[q], full.centroids()[q].size());
  std::printf("\n");
  if (!a.dump.empty()) {
    dump_clusters(model, net, Xtr, ytr, full, a.dump);
    return g_ok;
  }
  sp = stopwatch{};
  const auto bounds = std::make_shared<const neuron_bounds>(prepare_neuron_bounds(execution::par, net, Xtr));
  const double t_bounds = sp.seconds();
  sp = stopwatch{};
  const std::size_t n_sa = std::min(a.n_sa, n_tr);
  const auto sam = std::make_shared<const surprise_model>(prepare_surprise(execution::par, net, first_rows(trn.images, n_sa), subj));
  const double t_sa = sp.seconds();
  std::printf("baseline preparation: neuron bounds %.1f s; surprise model (%zu training images) %.1f s\n", t_bounds, n_sa, t_sa);
  // LSC's reference range: lower = the minimum LSA of the target set U_O
  std::vector<double> lsa_uo = lsa_values(execution::par, net, *sam, Xte);
  std::vector<double> sorted = lsa_uo;
  std::sort(sorted.begin(), sorted.end());
  const auto ref_range = reference_surprise_range(lsa_uo, surprise_kind::lsa);
  std::printf("LSA of U_O: min %.2f, median %.2f, max %.2f; %.1f%% of U_O below 0 (LSC's default range [0, 2000] ignores them)\n",
              sorted.front(), sorted[sorted.size() / 2], sorted.back(),
              100.0 * double(std::lower_bound(sorted.begin(), sorted.end(), 0.0) - sorted.begin()) / double(sorted.size()));

  suite base(net);
  for (std::size_t m : a.ms) base.idcs.push_back(prefix(full, m));
  base.nc.emplace(net, nc_options{.threshold = 0.75});
  base.km.emplace(bounds, 1000);
  base.nb.emplace(bounds);
  base.sn.emplace(bounds);
  base.tk.emplace(net, tknc_options{.k = 3});
  base.lsc.emplace(sam);
  base.lsc_ref.emplace(sam, ref_range);
  base.dsc.emplace(sam);

  // ---- U_O
  sp = stopwatch{};
  suite uo = base;
  feed(net, Xte, uo);
  const double t_uo = sp.seconds();
  {
    suite only_idc(net);
    only_idc.idcs = base.idcs;
    sp = stopwatch{};
    feed(net, Xte, only_idc);
    std::printf("measuring U_O (%zu inputs): all criteria %.2f s, the %zu IDCs alone %.3f s\n", n_te, t_uo, a.ms.size(), sp.seconds());
  }

  // ---- pixel relevance (αβ) of the test inputs: U_DI and RQ1
  sp = stopwatch{};
  lrp_options ab;
  ab.rule = lrp_rule::alpha_beta;
  const xt::xarray<double> Rpix = relevance(execution::par, net, Xte, lrp_input, ab);
  const double t_rpix = sp.seconds();
  std::printf("pixel relevance (alpha-beta LRP) of %zu test inputs: %.1f s\n", n_te, t_rpix);

  // ---- RQ1
  {
    const std::size_t n1 = std::min(a.n_rq1, n_te), m = 6;
    xt::xarray<double> R1 = xt::xarray<double>::from_shape({n1, 1, 28, 28});
    std::copy_n(Rpix.data(), n1 * D_IN, R1.data());
    const auto top10 = top_pixels(R1, D_IN / 10);
    const auto X1 = first_rows(Xte, n1);
    const auto P1 = perturb(X1, &top10, 0, 0.75, a.seed + 11);
    auto acts = [&](const xt::xarray<float>& X) {
      std::vector<double> v;
      const std::vector<std::size_t> ls = {subj};
      stream_neurons(execution::par, net, std::span<const float>(X.data(), X.size()), X.shape()[0], ls,
                     [&](const neuron_block& b) { v.insert(v.end(), b.data, b.data + b.rows * b.width); });
      return v;
    };
    const auto A0 = acts(X1), A1 = acts(P1);
    const std::size_t w = full.width();
    std::mt19937_64 rng(a.seed + 12);
    std::vector<std::size_t> pool(w);
    std::iota(pool.begin(), pool.end(), std::size_t(0));
    double si = 0, si2 = 0, sr = 0, sr2 = 0;
    for (std::size_t i = 0; i < n1; ++i) {
      auto dist = [&](auto pick) {
        double s = 0;
        for (std::size_t q = 0; q < m; ++q) {
          const std::size_t j = pick(q);
          const double d = A1[i * w + j] - A0[i * w + j];
          s += d * d;
        }
        return std::sqrt(s);
      };
      const double di = dist([&](std::size_t q) { return full.neurons()[q]; });
      for (std::size_t q = 0; q < m; ++q) std::swap(pool[q], pool[std::uniform_int_distribution<std::size_t>(q, w - 1)(rng)]);
      const double dr = dist([&](std::size_t q) { return pool[q]; });
      si += di, si2 += di * di, sr += dr, sr2 += dr * dr;
    }
    const double N = double(n1);
    auto sd = [&](double s, double s2) { return std::sqrt(std::max(0.0, s2 / N - (s / N) * (s / N))); };
    std::printf("\nRQ1 (Table 2), %zu test inputs, top-10%% pixels (%zu) + N(0, 0.75), m = %zu: random %.2f +- %.2f, "
                "DeepImportance %.2f +- %.2f\n",
                n1, D_IN / 10, m, sr / N, sd(sr, sr2), si / N, sd(si, si2));
  }

  // ---- RQ2
  sp = stopwatch{};
  const auto top2 = top_pixels(Rpix, D_IN * 2 / 100);
  std::vector<xt::xarray<float>> us, udi;
  for (std::size_t c = 0; c < a.copies; ++c) {
    us.push_back(perturb(Xte, nullptr, D_IN * 2 / 100, 0.75, a.seed * 1000 + 100 + c));
    udi.push_back(perturb(Xte, &top2, 0, 0.75, a.seed * 1000 + 200 + c));
  }
  const double t_sets = sp.seconds();
  table t2;
  t2.cols = uo.columns();
  t2.add("U_O", uo);
  double t_s = 0, t_di = 0;
  {
    sp = stopwatch{};
    suite s = uo;
    for (const auto& X : us) feed(net, X, s);
    t2.add("U_O+S", s);
    t_s = sp.seconds();
    sp = stopwatch{};
    suite d = uo;
    for (const auto& X : udi) feed(net, X, d);
    t2.add("U_O+DI", d);
    t_di = sp.seconds();
  }
  {
    double acc_s = 0, acc_di = 0;
    for (const auto& X : us) acc_s += accuracy(predictions(net, X), yte);
    for (const auto& X : udi) acc_di += accuracy(predictions(net, X), yte);
    std::printf("\nRQ2 sets: U_S / U_DI = %zu copies of the test subset, %zu pixels each with N(0, 0.75), clipped; "
                "accuracy U_S %.2f%%, U_DI %.2f%% (built in %.1f s, measured in %.1f / %.1f s)\n",
                a.copies, D_IN * 2 / 100, 100 * acc_s / double(a.copies), 100 * acc_di / double(a.copies), t_sets, t_s, t_di);
  }
  t2.print("RQ2 (Table 3), " + model + ": coverage % (IDC: m = 6, 8, ...)");
  for (std::size_t q = 0; q < a.ms.size(); ++q)
    std::printf("IDC%zu: |INCC| = %.0f\n", a.ms[q], uo.idcs[q].incc_size());
  t2.check_monotone(model + " RQ2");

  // ---- RQ3/4
  sp = stopwatch{};
  struct aset {
    std::string name;
    xt::xarray<float> X;
  };
  std::vector<aset> sets;
  sets.push_back({"U_O+S(0.3)", perturb(Xte, nullptr, D_IN, 0.3, a.seed * 1000 + 300)});
  sets.push_back({"U_O+FGSM", linf_attack(execution::par, net, Xte, yte, {.eps = 0.1, .alpha = 0.1, .steps = 1})});
  sets.push_back({"U_O+BIM", linf_attack(execution::par, net, Xte, yte, {.eps = 0.1, .alpha = 0.02, .steps = 10})});
  sets.push_back(
      {"U_O+PGD", linf_attack(execution::par, net, Xte, yte, {.eps = 0.1, .alpha = 0.02, .steps = 10, .random_start = true, .seed = a.seed})});
  const double t_att = sp.seconds();
  const double acc0 = accuracy(predictions(net, Xte), yte);
  std::printf("\nRQ3/4 sets (from the %zu test inputs, %.1f s): accuracy", n_te, t_att);
  for (const auto& s : sets) {
    const double acc = accuracy(predictions(net, s.X), yte);
    std::printf(" %s %.1f%%", s.name.c_str() + 4, 100 * acc);
    if (s.name != "U_O+S(0.3)") check(acc < acc0, model + " " + s.name + " lowers the accuracy");
  }
  std::printf(" (U_O %.1f%%)\n", 100 * acc0);
  table t3;
  {
    suite b4(net);  // IDC6, IDC8 and the baselines
    for (std::size_t q = 0; q < a.ms.size(); ++q)
      if (a.ms[q] == 6 || a.ms[q] == 8) b4.idcs.push_back(uo.idcs[q]);
    b4.nc = uo.nc, b4.km = uo.km, b4.nb = uo.nb, b4.sn = uo.sn, b4.tk = uo.tk, b4.lsc = uo.lsc, b4.lsc_ref = uo.lsc_ref, b4.dsc = uo.dsc;
    t3.cols = b4.columns();
    t3.add("U_O", b4);
    for (const auto& s : sets) {
      suite x = b4;
      feed(net, s.X, x);
      t3.add(s.name, x);
    }
  }
  t3.print("RQ3/4 (Table 4), " + model + ": coverage %");
  t3.check_monotone(model + " RQ3/4");

  // ---- RQ5
  {
    const std::size_t m5 = model == "LeNet-5" ? 6 : 4;
    const std::size_t n5 = std::min(a.n_rq5, n_tr);
    const auto X5 = first_rows(trn.images, n5);
    const std::vector<std::uint8_t> y5(trn.labels.begin(), trn.labels.begin() + std::ptrdiff_t(n5));
    std::printf("\nRQ5 (Table 5), %s: IDC%zu per subject layer (prepared on %zu training images), U_O / U_O+DI\n", model.c_str(), m5, n5);
    std::printf("| layer | neurons | |INCC| | U_O | U_O+DI | delta | prep s |\n|---|---|---|---|---|---|---|\n");
    for (std::size_t l : block_outputs(net)) {
      std::size_t w = 0;
      std::string name;
      for (const auto& c : layers)
        if (c.index == l) w = c.neurons, name = c.name;
      if (w < m5) continue;
      stopwatch s5;
      const idc c5 = prepare_idc(execution::par, net, X5, y5, idc_options{.layer = l, .m = m5});
      const double tp = s5.seconds();
      suite s(net);
      s.idcs.push_back(c5);
      feed(net, Xte, s);
      const auto r0 = s.idcs[0].result();
      for (const auto& X : udi) feed(net, X, s);
      const auto r1 = s.idcs[0].result();
      check(r1.covered >= r0.covered && r1.percent <= 100, model + " RQ5 " + name);
      std::printf("| %s | %zu | %.0f | %.1f | %.1f | %+.1f | %.1f |\n", name.c_str(), w, c5.incc_size(), r0.percent, r1.percent,
                  r1.percent - r0.percent, tp);
    }
  }
  std::printf("\n%s timings: IDC preparation %.1f s (relevance over %zu training images + clustering %zu neurons); "
              "measuring U_O: %.2f s (all criteria); pixel relevance %.1f s; attacks %.1f s; model total %.1f s\n",
              model.c_str(), t_idc, n_tr, mmax, t_uo, t_rpix, t_att, sw.seconds());
  return g_ok;
}

/// Loads the cached weights of `net`, or trains it with the recipe and caches them.
template <class Net>
void load_or_train(Net& net, const char* name, const fs::path& wpath, const io::labelled_images<float>& trn, std::size_t epochs,
                   std::size_t fine) {
  initialize(net, 1);
  if (fs::exists(wpath)) {
    io::load_weights(wpath, net);
    std::printf("model: %s loaded from %s\n", name, wpath.string().c_str());
    return;
  }
  demo::lenet5_recipe r;
  r.epochs = epochs, r.fine_epochs = fine;
  std::printf("model: training %s (%zu epochs, the last %zu at lr/10, on %zu images) ...\n", name, r.epochs, r.fine_epochs, trn.size());
  std::fflush(stdout);
  stopwatch s;
  (void)demo::train_with_recipe(net, trn, r, false);
  fs::create_directories(wpath.parent_path().empty() ? fs::path(".") : wpath.parent_path());
  io::save_weights(wpath, net);
  std::printf("model: trained in %.1f s and cached in %s\n", s.seconds(), wpath.string().c_str());
}

#if defined(NNLENS_EXAMPLE_WITH_ONNX)
/// DeepXplore's MNIST LeNets with their 96 images (the only MNIST data on this machine): IDC
/// prepared on the 52 non-generated images (44 *_orig + 8 already_differ; labels = the model's own
/// predictions), then measured on them and on the 44 generated ones.
template <class Net>
void deepxplore(const std::string& name, const fs::path& dir, std::size_t m_max) {
  const Net net = io::load_onnx<Net>((dir / (name + ".onnx")).string());
  std::vector<fs::path> seeds, gen;
  for (const auto& e : fs::directory_iterator(dir / "images")) {
    const std::string f = e.path().filename().string();
    if (f.find("_orig") != std::string::npos || f.rfind("already_differ", 0) == 0)
      seeds.push_back(e.path());
    else
      gen.push_back(e.path());
  }
  std::sort(seeds.begin(), seeds.end());
  std::sort(gen.begin(), gen.end());
  const auto Xs = io::load_images<float>(seeds), Xg = io::load_images<float>(gen);
  const auto ps = predictions(net, Xs);
  const auto c = prepare_idc(execution::par, net, Xs, ps, idc_options{.m = m_max});
  std::printf("| %s | %zu / %zu |", name.c_str(), seeds.size(), gen.size());
  for (std::size_t m : {std::size_t(4), std::size_t(6), m_max}) {
    if (m > m_max) continue;
    idc a = prefix(c, m);
    measure(execution::par, net, Xs, a);
    const auto r0 = a.result();
    idc g = prefix(c, m);
    measure(execution::par, net, Xg, g);
    measure(execution::par, net, Xg, a);
    const auto r1 = a.result();
    check(r1.covered >= r0.covered, "deepxplore " + name + " monotone");
    std::printf(" %.0f | %.1f / %.1f / %.1f |", a.incc_size(), r0.percent, g.result().percent, r1.percent);
  }
  std::printf("\n");
}
#endif

}  // namespace

int main(int argc, char** argv) try {
  const cli c(argc, argv);
  study_args a;
  a.quick = c.has("quick");
  if (a.quick) a.n_train = 2000, a.n_test = 500, a.n_sa = 1000, a.n_rq5 = 2000, a.n_rq1 = 200, a.ms = {6, 8};
  a.n_train = c.num("train", a.n_train);
  a.n_test = c.num("test", a.n_test);
  a.n_sa = c.num("sa-train", a.n_sa);
  a.n_rq5 = c.num("rq5-train", a.n_rq5);
  a.n_rq1 = c.num("rq1", a.n_rq1);
  a.copies = c.num("copies", a.copies);
  a.seed = c.num("seed", 1);
  a.dump = c.str("dump-clusters", "");
  const std::size_t epochs = c.num("epochs", 6);
  const fs::path fashion = c.str("fashion", "/usr/share/datasets/fashion-mnist");
  const fs::path cache = c.str("cache", "models-cache");
  const std::string only = c.str("model", a.quick ? "lenet5" : "all");
  std::printf("DeepImportance study (docs/specs/deepimportance.md#4-evaluation-setup-and-headline-numbers)%s; %zu threads\n", a.quick ? " --quick" : "",
              detail::default_pool().size());
  stopwatch sw;
  const auto trn = io::load_mnist<float>(fashion, "train", a.quick ? std::max<std::size_t>(a.n_train, 2000) : 0);
  const auto tst = io::load_mnist<float>(fashion, "t10k");
  if (only == "all" || only == "lenet1") {
    LeNet1 net;
    load_or_train(net, "LeNet-1", cache / ("lenet1-fashion-mnist-e" + std::to_string(epochs) + "-s1.nnlw"), trn, epochs, 2);
    study("LeNet-1", net, trn, tst, a);
  }
  if (only == "all" || only == "lenet4") {
    LeNet4 net;
    load_or_train(net, "LeNet-4", cache / ("lenet4-fashion-mnist-e" + std::to_string(epochs) + "-s1.nnlw"), trn, epochs, 2);
    study("LeNet-4", net, trn, tst, a);
  }
  if (only == "all" || only == "lenet5") {
    demo::LeNet5 net;
    fs::path w = c.str("weights", (cache / "lenet5-fashion-mnist-e12-s1.nnlw").string());
    if (!fs::exists(w) && a.quick) w = cache / "lenet5-fashion-mnist-quick-e2-n2000.nnlw";
    load_or_train(net, "LeNet-5", w, trn, a.quick ? 2 : 12, a.quick ? 0 : 3);
    study("LeNet-5", net, trn, tst, a);
  }
#if defined(NNLENS_EXAMPLE_WITH_ONNX)
  const fs::path models = c.str("models", "../shared/models");
  if (fs::exists(models / "deepxplore-mnist" / "lenet1.onnx")) {
    std::printf("\nDeepXplore MNIST LeNets (96 images; no MNIST on this machine): IDC prepared on the 52 non-generated images "
                "(labels = predictions), U_seed / U_gen alone / U_seed+gen\n");
    std::printf("| model | seeds / generated | |INCC| | IDC4 | |INCC| | IDC6 | |INCC| | IDC_max |\n|---|---|---|---|---|---|---|---|\n");
    deepxplore<LeNet1>("lenet1", models / "deepxplore-mnist", 8);
    deepxplore<LeNet4>("lenet4", models / "deepxplore-mnist", 8);
    deepxplore<DxLeNet5>("lenet5", models / "deepxplore-mnist", 8);
  }
#endif
  std::printf("\ntotal %.1f s\n%s\n", sw.seconds(), g_ok ? "all checks passed" : "SOME CHECKS FAILED");
  return g_ok ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "deepimportance_study: %s\n", e.what());
  return 2;
}
