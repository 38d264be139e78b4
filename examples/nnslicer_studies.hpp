// examples/nnslicer_studies.hpp -- what the two NNSlicer application examples share: the
// project's Fashion-MNIST LeNet-5 (cached weights, or trained with the recipe and cached), class
// subsets of the data, per-layer synapse masks (prune / hide), accuracy with the argmax over all
// logits or only the target ones, a tiny command line and an SVG line chart.
//
// Used by examples/nnslicer_prune.cpp (spec §4.2) and examples/nnslicer_protect.cpp (spec §4.3).
// Not a library header: it is part of the examples and may change with them.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include <nnlens/io/idx.hpp>
#include <nnlens/io/weights.hpp>
#include <nnlens/nnlens.hpp>
#include <nnlens/nnslicer/nnslicer.hpp>
#include <nnlens/nnslicer/profile.hpp>
#include <nnlens/nnslicer/slice.hpp>
#include <nnlens/train/fit.hpp>
#include <nnlens/train/mask.hpp>
#include <nnlens/train/optimizer.hpp>

#include "../tools/nnlens/lenet5_recipe.hpp"  // the project's LeNet-5 recipe (nnlens demo)
#include "example_cli.hpp"

namespace slicing_studies {

namespace fs = std::filesystem;
using namespace nnlens;
using Net = demo::LeNet5;
using masks = std::vector<std::vector<std::uint8_t>>;  // per weighted layer, per synapse: 1 = selected

// ------------------------------------------------------------------------------------------------
// command line (--flag value / --switch) and a stopwatch

using nnlens_examples::cli;
using nnlens_examples::stopwatch;

/// "0,1" or "0-4" or "all" -> class list.
inline std::vector<std::size_t> parse_classes(const std::string& s) {
  std::vector<std::size_t> r;
  if (s == "all") {
    for (std::size_t c = 0; c < 10; ++c) r.push_back(c);
    return r;
  }
  std::stringstream ss(s);
  std::string tok;
  while (std::getline(ss, tok, ',')) {
    const auto dash = tok.find('-');
    if (dash != std::string::npos) {
      for (std::size_t c = std::stoul(tok.substr(0, dash)); c <= std::stoul(tok.substr(dash + 1)); ++c) r.push_back(c);
    } else {
      r.push_back(std::stoul(tok));
    }
  }
  for (std::size_t c : r)
    if (c > 9) throw value_error("class " + std::to_string(c) + " out of range 0..9");
  return r;
}

inline std::string set_name(const std::vector<std::size_t>& t) {
  std::string s = "{";
  for (std::size_t i = 0; i < t.size(); ++i) s += (i ? "," : "") + std::to_string(t[i]);
  return s + "}";
}

// ------------------------------------------------------------------------------------------------
// data and the model

struct dataset {
  xt::xarray<float> x;               // [n, 1, 28, 28]
  std::vector<std::uint8_t> y;
  std::size_t size() const { return y.size(); }
};

/// The samples of `data` whose label is in `classes`: at most per_class of each (0: all), in file
/// order, or at most `total` of them drawn in a seeded random order (total > 0).
inline dataset select(const io::labelled_images<float>& data, const std::vector<std::size_t>& classes,
                      std::size_t per_class = 0, std::size_t total = 0, std::uint64_t seed = 0) {
  std::vector<std::size_t> idx(data.size());
  std::iota(idx.begin(), idx.end(), std::size_t(0));
  if (total) {
    std::mt19937_64 rng(seed);
    std::shuffle(idx.begin(), idx.end(), rng);
  }
  std::vector<std::size_t> taken(10, 0), pick;
  for (std::size_t i : idx) {
    const std::size_t c = data.labels[i];
    if (std::find(classes.begin(), classes.end(), c) == classes.end()) continue;
    if (per_class && taken[c] >= per_class) continue;
    ++taken[c];
    pick.push_back(i);
    if (total && pick.size() == total) break;
  }
  dataset d;
  d.x = xt::xarray<float>::from_shape({pick.size(), 1, 28, 28});
  const std::size_t D = 28 * 28;
  for (std::size_t k = 0; k < pick.size(); ++k) {
    std::copy_n(data.images.data() + pick[k] * D, D, d.x.data() + k * D);
    d.y.push_back(data.labels[pick[k]]);
  }
  return d;
}

/// `net` from `path`, or trained with recipe `r` on `data` (tools/nnlens/lenet5_recipe.hpp) and
/// saved there; `what` names the recipe in the message.
inline void load_or_train(Net& net, const fs::path& path, const io::labelled_images<float>& data, const demo::lenet5_recipe& r,
                          const std::string& what) {
  initialize(net, 1);
  if (fs::exists(path)) {
    io::load_weights(path, net);
    std::printf("model: %s\n", path.string().c_str());
    return;
  }
  stopwatch sw;
  demo::train_lenet5(net, data, r, false);
  fs::create_directories(path.parent_path());
  io::save_weights(path, net, {{"epochs", std::to_string(r.epochs)}});
  std::printf("model: trained (%s, %.1f s) -> %s\n", what.c_str(), sw.seconds(), path.string().c_str());
}

/// The project's LeNet-5, cache/lenet5-fashion-mnist-e12-s1.nnlw (the file `nnlens demo` writes;
/// trained with the demo's recipe and saved there if missing); with `quick` and no such file, the
/// examples' quick LeNet-5 (demo::quick_lenet5_file: 2 epochs on the first 10,000 training images,
/// 1-2 s) from `scratch` instead (trained and saved there if missing).
inline void load_model(Net& net, const fs::path& cache, const fs::path& scratch, bool quick,
                       const io::labelled_images<float>& train) {
  const fs::path full = cache / "lenet5-fashion-mnist-e12-s1.nnlw";
  if (quick && !fs::exists(full))
    load_or_train(net, scratch / demo::quick_lenet5_file, demo::first_samples(train, demo::quick_lenet5_images),
                  demo::quick_lenet5_recipe(), "the quick recipe: 2 epochs on the first 10,000 images");
  else
    load_or_train(net, full, train, demo::lenet5_recipe{}, "the project's recipe, 12 epochs");
}

// ------------------------------------------------------------------------------------------------
// weighted layers: synapse i of a layer is W[i]; its neuron (output unit / channel)

template <class T>
struct weighted_layer {
  std::size_t index = 0;  // in for_each_layer
  std::span<T> W, b;
  std::size_t out = 0;    // neurons
  bool dense = false;     // Dense: W [in, out] (neuron = i % out); Conv2D: W [out, ...] (neuron = i / fan-in)
  std::size_t neuron(std::size_t i) const { return dense ? i % out : i / (W.size() / out); }
  std::size_t fan_in() const { return W.size() / out; }
};

template <class N>
auto weighted_layers(N& net) {
  using T = std::remove_const_t<network_scalar_t<std::remove_const_t<N>>>;
  std::vector<weighted_layer<T>> r;
  for_each_layer(net, [&](auto& l, auto idx, shape, shape) {
    if constexpr (requires { l.W; l.b; }) {
      weighted_layer<T> w;
      w.index = std::size_t(idx);
      w.W = std::span<T>(const_cast<T*>(l.W.data()), l.W.size());
      w.b = std::span<T>(const_cast<T*>(l.b.data()), l.b.size());
      w.out = l.b.size();
      w.dense = l.W.dimension() == 2;
      r.push_back(w);
    }
  });
  return r;
}

/// synapse_mask's per-node masks, keeping only the nodes with synapses (= the weighted layers).
inline masks per_layer(const std::vector<std::vector<std::uint8_t>>& node_masks) {
  masks r;
  for (const auto& m : node_masks)
    if (!m.empty()) r.push_back(m);
  return r;
}

/// Per layer, 1 for the floor(r S) synapses of smallest key (ties: the lower index first).
inline masks smallest(const std::vector<std::vector<double>>& key, double r) {
  masks m;
  for (const auto& k : key) {
    const std::size_t S = k.size(), n = std::size_t(std::floor(r * double(S)));
    std::vector<std::size_t> idx(S);
    std::iota(idx.begin(), idx.end(), std::size_t(0));
    std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) { return k[a] < k[b]; });
    auto& mm = m.emplace_back(S, 0);
    for (std::size_t j = 0; j < n; ++j) mm[idx[j]] = 1;
  }
  return m;
}

inline masks complement(masks m) {
  for (auto& v : m)
    for (auto& b : v) b = b ? 0 : 1;
  return m;
}

inline std::size_t count(const std::vector<std::uint8_t>& v) { return std::size_t(std::count(v.begin(), v.end(), 1)); }

/// Zeroes the synapses with prune[l][i] == 1, and the bias of every neuron whose synapses are all
/// pruned (spec §4.2: such a neuron is pruned too).  Returns the parameter mask that keeps all of
/// them at 0 while fine-tuning (trainable = not pruned).
inline train::parameter_mask prune(Net& net, const masks& pr) {
  auto L = weighted_layers(net);
  if (L.size() != pr.size()) throw data_error("prune: mask of another model");
  std::vector<std::vector<std::uint8_t>> wbits(L.size()), bbits(L.size());
  for (std::size_t l = 0; l < L.size(); ++l) {
    const auto& w = L[l];
    std::vector<std::size_t> alive(w.out, 0);
    wbits[l].assign(w.W.size(), 1);
    for (std::size_t i = 0; i < w.W.size(); ++i) {
      if (pr[l][i]) {
        w.W[i] = 0.f;
        wbits[l][i] = 0;
      } else {
        ++alive[w.neuron(i)];
      }
    }
    bbits[l].assign(w.out, 1);
    for (std::size_t o = 0; o < w.out; ++o)
      if (!alive[o]) w.b[o] = 0.f, bbits[l][o] = 0;
  }
  // the parameter tensors in parameter_spans order, matched by address
  std::vector<std::vector<std::uint8_t>> bits;
  for (auto s : parameter_spans(net)) {
    bool found = false;
    for (std::size_t l = 0; l < L.size() && !found; ++l) {
      if (s.data() == L[l].W.data()) bits.push_back(wbits[l]), found = true;
      else if (s.data() == L[l].b.data()) bits.push_back(bbits[l]), found = true;
    }
    if (!found) bits.emplace_back(s.size(), 1);
  }
  return train::parameter_mask(std::move(bits));
}

// ------------------------------------------------------------------------------------------------
// accuracy

struct accuracy {
  double target = 0;  // argmax over the target logits only
  double all = 0;     // argmax over all 10 logits
};

inline accuracy evaluate(const Net& net, const dataset& d, const std::vector<std::size_t>& targets) {
  const auto logits = forward(execution::par, net, d.x);
  std::size_t ok_t = 0, ok_a = 0;
  for (std::size_t i = 0; i < d.size(); ++i) {
    const float* o = logits.data() + i * 10;
    std::size_t bt = targets[0], ba = 0;
    for (std::size_t c : targets)
      if (o[c] > o[bt]) bt = c;
    for (std::size_t c = 1; c < 10; ++c)
      if (o[c] > o[ba]) ba = c;
    ok_t += bt == d.y[i];
    ok_a += ba == d.y[i];
  }
  return {double(ok_t) / double(d.size()), double(ok_a) / double(d.size())};
}

// ------------------------------------------------------------------------------------------------
// an SVG line chart (plain text): y in [0, 1] as %, one polyline per series

struct series {
  std::string name;
  std::vector<double> x, y;
};

inline void write_svg(const fs::path& path, const std::string& title, const std::string& xlabel, const std::string& ylabel,
                      const std::vector<series>& ss, double xmin, double xmax, bool xpercent = true,
                      const std::vector<std::string>& xticks = {}) {
  const double W = 640, H = 400, l = 60, r = 170, t = 36, b = 50, pw = W - l - r, ph = H - t - b;
  const char* colors[] = {"#d62728", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#7f7f7f"};
  auto X = [&](double x) { return l + (x - xmin) / (xmax - xmin) * pw; };
  auto Y = [&](double y) { return t + (1 - y) * ph; };
  std::ofstream f(path);
  if (!f) throw io_error(path.string() + ": cannot open for writing");
  char buf[256];
  f << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  f << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  f << "<text x=\"" << l + pw / 2 << "\" y=\"20\" text-anchor=\"middle\" font-size=\"14\">" << title << "</text>\n";
  for (int k = 0; k <= 10; k += 2) {  // y grid
    const double y = k / 10.0;
    std::snprintf(buf, sizeof buf, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", l, Y(y), l + pw, Y(y));
    f << buf;
    std::snprintf(buf, sizeof buf, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%d%%</text>\n", l - 6, Y(y) + 4, k * 10);
    f << buf;
  }
  if (xticks.empty()) {
    for (int k = 0; k <= 10; ++k) {
      const double x = xmin + (xmax - xmin) * k / 10.0;
      std::snprintf(buf, sizeof buf, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/>\n", X(x), t, X(x), t + ph);
      f << buf;
      if (xpercent)
        std::snprintf(buf, sizeof buf, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.0f%%</text>\n", X(x), t + ph + 16, 100 * x);
      else
        std::snprintf(buf, sizeof buf, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>\n", X(x), t + ph + 16, x);
      f << buf;
    }
  } else {  // categorical ticks at x = 0, 1, ...
    for (std::size_t k = 0; k < xticks.size(); ++k) {
      std::snprintf(buf, sizeof buf, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n", X(double(k)), t + ph + 16,
                    xticks[k].c_str());
      f << buf;
    }
  }
  f << "<rect x=\"" << l << "\" y=\"" << t << "\" width=\"" << pw << "\" height=\"" << ph << "\" fill=\"none\" stroke=\"black\"/>\n";
  f << "<text x=\"" << l + pw / 2 << "\" y=\"" << H - 12 << "\" text-anchor=\"middle\">" << xlabel << "</text>\n";
  f << "<text x=\"16\" y=\"" << t + ph / 2 << "\" text-anchor=\"middle\" transform=\"rotate(-90 16 " << t + ph / 2 << ")\">" << ylabel
    << "</text>\n";
  for (std::size_t s = 0; s < ss.size(); ++s) {
    const char* c = colors[s % 7];
    f << "<polyline fill=\"none\" stroke=\"" << c << "\" stroke-width=\"2\" points=\"";
    for (std::size_t i = 0; i < ss[s].x.size(); ++i) {
      std::snprintf(buf, sizeof buf, "%.1f,%.1f ", X(ss[s].x[i]), Y(ss[s].y[i]));
      f << buf;
    }
    f << "\"/>\n";
    for (std::size_t i = 0; i < ss[s].x.size(); ++i) {
      std::snprintf(buf, sizeof buf, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"%s\"/>\n", X(ss[s].x[i]), Y(ss[s].y[i]), c);
      f << buf;
    }
    const double ly = t + 14 + 20 * double(s);
    std::snprintf(buf, sizeof buf, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\"/>\n", l + pw + 10,
                  ly - 4, l + pw + 30, ly - 4, c);
    f << buf;
    f << "<text x=\"" << l + pw + 36 << "\" y=\"" << ly << "\">" << ss[s].name << "</text>\n";
  }
  f << "</svg>\n";
  if (!f) throw io_error(path.string() + ": write failed");
}

}  // namespace slicing_studies
