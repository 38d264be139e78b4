// nnlens/neusemslice/neuron_mask.hpp -- neurons as NeuSemSlice sees them, and masks over them
// (docs/specs/neusemslice.md#21-objects, docs/specs/neusemslice.md#27-masking-and-parameter-accounting).
//
//   auto us = neuron_units(net);     every Dense/Conv2D at the top level: its neurons (units, or
//                                    channels of a conv) and where their values are read (the
//                                    output of the per-neuron layers after it: BatchNorm, the
//                                    activation, Dropout); the last weighted layer is the output
//                                    unit (us.back().output == true), never sliced
//   neuron_mask m = full_mask(net);  keep[u][n] = 1: neuron n of unit u is critical
//   apply_neuron_mask(net, m)        a copy whose masked neurons output 0 (their incoming weights,
//                                    bias and BatchNorm gamma/beta are zeroed): a network that runs
//   neuron_parameter_mask(net, m)    train::parameter_mask with 1 on the parameters of the kept
//                                    neurons (train_only: re-adaptation) -- inverted() freezes
//                                    them (incremental development)
//   parameter_accounting(net, m)     parameters kept / removed and the compression rate CR (§2.7
//                                    A11: a masked neuron's own parameters and the next layer's
//                                    weights that read it)
//   save_neuron_mask / load_neuron_mask   text "nnlens-neuron-mask 1", checked against the model
//
// Masks record the model's fingerprint; load_neuron_mask(is, net) refuses a mask of another model,
// the other calls check the architecture only (a mask stays valid while the model is fine-tuned).
// Units are found through traits: a top-level layer with synapses (sign_rule<L>::synapses) and
// layer_traits<L>::for_each_neuron_parameter starts a unit; the shape-preserving, synapse-free
// layers after it (BatchNorm, activations, Dropout) belong to it and the last of them holds its
// neuron values.  Layers inside a Residual are not units (a Residual ends the run).
#pragma once

#include <cstdint>
#include <istream>
#include <limits>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "nnlens/core/composite.hpp"
#include "nnlens/core/error.hpp"
#include "nnlens/core/properties.hpp"
#include "nnlens/network/parameters.hpp"
#include "nnlens/network/fingerprint.hpp"
#include "nnlens/network/units.hpp"
#include "nnlens/train/mask.hpp"

namespace nnlens {

/// keep[u][n] != 0: neuron n of unit u is kept (critical).
struct neuron_mask {
  std::vector<std::vector<std::uint8_t>> keep;
  std::uint64_t fingerprint = 0;
  std::size_t kept(std::size_t u) const {
    std::size_t k = 0;
    for (auto v : keep.at(u)) k += v != 0;
    return k;
  }
};

/// Every neuron kept.
template <class Net>
neuron_mask full_mask(const Net& net) {
  neuron_mask m;
  for (const auto& u : neuron_units(net)) m.keep.emplace_back(u.neurons, std::uint8_t(1));
  m.fingerprint = detail::model_fingerprint(net);
  return m;
}

namespace detail {
template <class Net>
void check_mask(const Net& net, const neuron_mask& m, const std::vector<neuron_unit>& us, const char* who,
                bool weights = false) {
  if (weights && m.fingerprint != 0 && m.fingerprint != model_fingerprint(net))
    throw data_error(std::string(who) + ": the mask was made on another model (the model fingerprints differ)");
  if (m.keep.size() != us.size())
    throw data_error(concat(who, ": the mask has ", m.keep.size(), " layers, the model ", us.size(), " (a mask of another model?)"));
  for (std::size_t u = 0; u < us.size(); ++u)
    if (m.keep[u].size() != us[u].neurons)
      throw data_error(concat(who, ": layer ", us[u].name, " has ", us[u].neurons, " neurons, the mask ", m.keep[u].size()));
}

/// neuron_units(net), after check_mask(net, m, units, who).
template <class Net>
std::vector<neuron_unit> checked_mask_units(const Net& net, const neuron_mask& m, const char* who) {
  auto us = neuron_units(net);
  check_mask(net, m, us, who);
  return us;
}

/// f(tensor index into parameter_spans(net), element) for every parameter element of neuron n of
/// unit u (its layer's and its followers').
template <class Net, class F>
void for_each_unit_parameter(const Net& net, const neuron_unit& u, std::size_t n, F&& f) {
  std::size_t t0 = 0;
  for_each_layer(net, [&](const auto& l, auto idx, shape in, shape out) {
    using L = std::decay_t<decltype(l)>;
    const std::size_t i = idx;
    if constexpr (has_neuron_parameters<L>) {
      const bool mine = i == u.layer || std::find(u.followers.begin(), u.followers.end(), i) != u.followers.end();
      if (mine) layer_traits<L>::for_each_neuron_parameter(l, in, out, n, [&](std::size_t t, std::size_t e) { f(t0 + t, e); });
    }
    t0 += parameter_count_of_tensors<L>(l);
  });
}

/// f(tensor, element) for every parameter of the next unit's layer that reads neuron n of unit u.
/// Nothing when the next unit does not read u's neurons one to one: a composite (its branches read
/// them, ShuffleNet's and DenseNet's blocks), a channel map (ChannelShuffle moves them) or another
/// channel count lies between.
template <class Net, class F>
void for_each_reader_parameter(const Net& net, const neuron_unit& u, const neuron_unit& next, std::size_t n, F&& f) {
  bool direct = true;
  for_each_layer(net, [&](const auto& l, auto idx, shape, shape) {
    using L = std::decay_t<decltype(l)>;
    if (std::size_t(idx) > u.layer && std::size_t(idx) < next.layer) direct = direct && !Composite<L> && !ChannelMap<L>;
  });
  if (!direct) return;
  std::size_t t0 = 0;
  for_each_layer(net, [&](const auto& l, auto idx, shape in, shape out) {
    using L = std::decay_t<decltype(l)>;
    if constexpr (has_neuron_parameters<L>) {
      if (std::size_t(idx) == next.layer) {
        auto g = [&](std::size_t t, std::size_t e) { f(t0 + t, e); };
        if (in.rank == 3) {
          if (in[0] != u.neurons) return;  // the channels are not u's
          layer_traits<L>::for_each_input_parameter(l, in, out, n, g);
        } else {
          if (in.size() % u.neurons) return;  // not u's neurons
          const std::size_t per = in.size() / u.neurons;  // after a Flatten: one channel's elements
          for (std::size_t e = n * per; e < (n + 1) * per; ++e) layer_traits<L>::for_each_input_parameter(l, in, out, e, g);
        }
      }
    }
    t0 += parameter_count_of_tensors<L>(l);
  });
}

/// Per parameter tensor of net: 1 on the parameters of the kept neurons of units us[first..], 0
/// elsewhere.
template <class Net>
std::vector<std::vector<std::uint8_t>> kept_parameter_bits(const Net& net, const std::vector<neuron_unit>& us,
                                                           const neuron_mask& m, std::size_t first = 0) {
  std::vector<std::vector<std::uint8_t>> bits;
  for (const auto& s : parameter_spans(net)) bits.emplace_back(s.size(), std::uint8_t(0));
  for (std::size_t u = first; u < us.size(); ++u)
    for (std::size_t n = 0; n < us[u].neurons; ++n)
      if (m.keep[u][n]) for_each_unit_parameter(net, us[u], n, [&](std::size_t t, std::size_t e) { bits[t][e] = 1; });
  return bits;
}

}  // namespace detail

/// A copy of net whose masked neurons output 0 (before and after the activation).
template <class Net>
Net apply_neuron_mask(const Net& net, const neuron_mask& m) {
  const auto us = detail::checked_mask_units(net, m, "apply_neuron_mask");
  Net r = net;
  auto ps = parameter_spans(r);
  for (std::size_t u = 0; u < us.size(); ++u)
    for (std::size_t n = 0; n < us[u].neurons; ++n)
      if (!m.keep[u][n]) detail::for_each_unit_parameter(r, us[u], n, [&](std::size_t t, std::size_t e) { ps[t][e] = 0; });
  return r;
}

/// 1 on the parameters of kept neurons (the output unit: of its kept neurons), 0 elsewhere.
template <class Net>
train::parameter_mask neuron_parameter_mask(const Net& net, const neuron_mask& m) {
  const auto us = detail::checked_mask_units(net, m, "neuron_parameter_mask");
  return train::parameter_mask(detail::kept_parameter_bits(net, us, m));
}

struct parameter_count_report {
  std::size_t total = 0, kept = 0, removed = 0;
  double compression = 0;  // removed / total, percent
};

/// Parameters a mask removes (§2.7 A11): a masked neuron's own (weights, bias, BatchNorm) and the
/// next unit's weights that read it.
template <class Net>
parameter_count_report parameter_accounting(const Net& net, const neuron_mask& m) {
  const auto us = detail::checked_mask_units(net, m, "parameter_accounting");
  auto ps = parameter_spans(net);
  std::vector<std::vector<std::uint8_t>> gone;
  parameter_count_report r;
  for (const auto& s : ps) gone.emplace_back(s.size(), std::uint8_t(0)), r.total += s.size();
  for (std::size_t u = 0; u < us.size(); ++u)
    for (std::size_t n = 0; n < us[u].neurons; ++n)
      if (!m.keep[u][n]) {
        detail::for_each_unit_parameter(net, us[u], n, [&](std::size_t t, std::size_t e) { gone[t][e] = 1; });
        if (u + 1 < us.size()) detail::for_each_reader_parameter(net, us[u], us[u + 1], n, [&](std::size_t t, std::size_t e) { gone[t][e] = 1; });
      }
  for (const auto& g : gone)
    for (auto v : g) r.removed += v;
  r.kept = r.total - r.removed;
  r.compression = r.total ? 100.0 * double(r.removed) / double(r.total) : 0.0;
  return r;
}

inline void save_neuron_mask(std::ostream& os, const neuron_mask& m) {
  os << "nnlens-neuron-mask 1\nfingerprint " << m.fingerprint << "\nunits " << m.keep.size() << "\n";
  for (const auto& k : m.keep) {
    os << k.size() << " ";
    for (auto v : k) os << (v ? '1' : '0');
    os << "\n";
  }
  if (!os) throw io_error("save_neuron_mask: write failed");
}

inline neuron_mask load_neuron_mask(std::istream& is) {
  std::string line;
  std::size_t no = 0;
  auto next = [&]() -> std::istringstream {
    if (!std::getline(is, line)) throw data_error(detail::concat("neuron mask: truncated (line ", no + 1, ")"));
    ++no;
    return std::istringstream(line);
  };
  auto bad = [&](const char* what) { return data_error(detail::concat("neuron mask, line ", no, ": ", what)); };
  neuron_mask m;
  {
    auto ss = next();
    std::string a, b;
    ss >> a >> b;
    if (a != "nnlens-neuron-mask" || b != "1") throw bad("not an nnlens-neuron-mask 1 file");
  }
  {
    auto ss = next();
    std::string k;
    if (!(ss >> k >> m.fingerprint) || k != "fingerprint") throw bad("expected 'fingerprint N'");
  }
  std::size_t units = 0;
  {
    auto ss = next();
    std::string k;
    if (!(ss >> k >> units) || k != "units" || units > 100000) throw bad("expected 'units N'");
  }
  for (std::size_t u = 0; u < units; ++u) {
    auto ss = next();
    std::size_t n = 0;
    std::string bits;
    if (!(ss >> n) || n > (std::size_t(1) << 26)) throw bad("bad neuron count");
    ss >> bits;
    if (bits.size() != n || bits.find_first_not_of("01") != std::string::npos) throw bad("expected that many 0/1 digits");
    std::vector<std::uint8_t> k(n);
    for (std::size_t i = 0; i < n; ++i) k[i] = bits[i] == '1';
    m.keep.push_back(std::move(k));
  }
  return m;
}

/// Loads a mask and checks it against `net`: data_error for a mask of another architecture, or,
/// with `same_weights`, of the same architecture with other weights (the fingerprint).
template <class Net>
neuron_mask load_neuron_mask(std::istream& is, const Net& net, bool same_weights = true) {
  neuron_mask m = load_neuron_mask(is);
  detail::check_mask(net, m, neuron_units(net), "load_neuron_mask", same_weights);
  return m;
}

}  // namespace nnlens
