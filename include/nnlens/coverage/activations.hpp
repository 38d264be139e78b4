// nnlens/coverage/activations.hpp -- the neurons coverage criteria look at, streamed in batches.
//
//   auto ls = coverage_layers(net);         every top-level layer except Flatten: index, name,
//                                           output shape, neuron count (a rank-3 output has one
//                                           neuron per channel, its spatial mean; otherwise one
//                                           per element)
//   subject_layer(net)                      the default subject layer of IDC: the layer whose output
//                                           feeds the last weighted layer (Flatten/Dropout skipped)
//   layer_index(net, "7" | "Dense#2" | "-2")  a --layer argument to a layer index (error if none)
//   stream_neurons([policy,] net, X, layers, f[, batch])
//                                           runs X ([N, input shape...] or a flat [N * input size]
//                                           span) through net in chunks and calls f(block) in row
//                                           order, sequentially; block.row(r) holds the neurons of
//                                           `layers`, concatenated (block.offset(k) = where layer
//                                           layers[k] starts), as doubles.
//
// Layer indices are the network's top-level layers, 0-based (the Input is not a layer); the
// neurons of layer i are the values of its output.  Channel means (for conv layers) follow
// docs/specs/deepimportance.md#26-ambiguities-and-readings (5) and docs/specs/deepimportance.md#7-baselines ("a conv neuron is a channel with value = spatial
// mean").  Work is split over the rows of a chunk (execution::par); f always sees whole chunks,
// in order, so accumulators that f feeds are deterministic.
// Errors: shape_error for X of the wrong size, value_error for a layer index out of range.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "nnlens/core/error.hpp"
#include "nnlens/core/execution.hpp"
#include "nnlens/core/finite.hpp"
#include "nnlens/core/thread_pool.hpp"
#include "nnlens/core/properties.hpp"
#include "nnlens/core/traits.hpp"
#include "nnlens/network/forward.hpp"
#include "nnlens/network/trace.hpp"
#include "nnlens/network/visit.hpp"

namespace nnlens {

/// A layer as coverage criteria see it.
struct coverage_layer {
  std::size_t index = 0;   // top-level layer index (its output is trace activation index + 1)
  std::string name;        // "7 Dense"
  std::string_view type;   // "Dense"
  shape out;               // per-sample output shape
  std::size_t neurons = 0; // channels for a rank-3 output, elements otherwise
  bool weighted = false;   // the layer has parameters (Dense, Conv2D, BatchNorm, Residual...)
  bool reshape_only = false;  // its output is its input's elements (Flatten, Dropout, Identity, and
                              // a channel map: its input's channels permuted or sliced)
  bool reshapes = false;      // ... and its neurons are not its input's, one for one: its shape
                              // differs (Flatten of a rank-3 input) or it is a channel map
};

/// Neurons of an output of shape s: one per channel for rank 3, one per element otherwise.
constexpr std::size_t coverage_neurons(shape s) { return s.rank == 3 ? s[0] : s.size(); }

/// Every top-level layer, those that only reshape (Flatten) included: their indices are the
/// network's layer indices (what --layer and coverage_layer::index count).
template <class Net>
std::vector<coverage_layer> all_layers(const Net& net) {
  std::vector<coverage_layer> r;
  for_each_layer(net, [&](const auto& l, auto idx, shape in, shape out) {
    using L = std::decay_t<decltype(l)>;
    coverage_layer c;
    c.reshape_only = reshape_only_v<L> || ChannelMap<L>;
    c.reshapes = c.reshape_only && (in != out || ChannelMap<L>);
    c.index = std::size_t(idx);
    c.type = layer_traits<L>::name;
    c.name = std::to_string(c.index) + " " + std::string(c.type);
    c.out = out;
    c.neurons = coverage_neurons(out);
    if constexpr (HasParameters<L>) c.weighted = !layer_traits<L>::parameters(l).empty();
    r.push_back(std::move(c));
  });
  return r;
}
namespace detail {
using nnlens::all_layers;  // the name the library's own code used
}  // namespace detail

/// Every top-level layer except those that only reshape (Flatten): the criteria's "layers", pooling
/// and the output included (docs/specs/deepimportance.md: "all except input and flatten").  Layers that
/// are the identity at inference (Dropout, Identity) stay, as in the reference code.  A channel map
/// (a channel shuffle or slice: core/properties.hpp) is skipped like Flatten: its neurons are its
/// input's, permuted or a subset, not a new layer of neurons.
template <class Net>
std::vector<coverage_layer> coverage_layers(const Net& net) {
  auto all = detail::all_layers(net);
  std::vector<coverage_layer> r;
  for (auto& c : all)
    if (!c.reshapes) r.push_back(std::move(c));
  return r;
}

/// IDC's default subject layer (docs/specs/deepimportance.md#26-ambiguities-and-readings (7)): the layer whose output feeds the
/// last weighted layer, skipping the reshape-only layers (Flatten, Dropout, Identity; LeNet-5: the ReLU after Dense<84>; LeNet-1:
/// the last conv block's pooling).
template <class Net>
std::size_t subject_layer(const Net& net) {
  const auto all = detail::all_layers(net);
  std::size_t last = all.size();
  for (std::size_t i = all.size(); i-- > 0;)
    if (all[i].weighted) {
      last = i;
      break;
    }
  if (last == all.size() || last == 0)
    throw value_error("subject_layer: the network needs a weighted output layer preceded by another layer");
  std::size_t s = last - 1;
  while (s > 0 && all[s].reshape_only) --s;
  return s;
}

/// Parses a layer argument: a 0-based index, a negative index from the end (-1 = the output
/// layer), or "Type#k" (the k-th layer of that type, 1-based: "Dense#2").
template <class Net>
std::size_t layer_index(const Net& net, const std::string& arg) {
  const auto all = detail::all_layers(net);
  const std::size_t n = all.size();
  auto bad = [&](const std::string& why) {
    return value_error("layer '" + arg + "': " + why + " (the network has " + std::to_string(n) + " layers, 0.." +
                       std::to_string(n ? n - 1 : 0) + ")");
  };
  if (arg.empty()) throw bad("empty");
  const auto hash = arg.find('#');
  if (hash != std::string::npos) {
    const std::string type = arg.substr(0, hash);
    std::size_t k = 0;
    try {
      k = std::stoul(arg.substr(hash + 1));
    } catch (const std::exception&) {
      throw bad("expected Type#k with k >= 1");
    }
    std::size_t seen = 0;
    for (const auto& c : all)
      if (c.type == type && ++seen == k) return c.index;
    throw bad("no " + std::to_string(k) + "-th layer of type " + type);
  }
  long long v = 0;
  std::size_t used = 0;
  try {
    v = std::stoll(arg, &used);
  } catch (const std::exception&) {
    throw bad("not an index or Type#k");
  }
  if (used != arg.size()) throw bad("not an index or Type#k");
  if (v < 0) v += static_cast<long long>(n);
  if (v < 0 || v >= static_cast<long long>(n)) throw bad("index out of range");
  return std::size_t(v);
}

/// Checks a layer index; names the network's size.
template <class Net>
void check_layer_index(const Net& net, std::size_t layer, const char* who) {
  const std::size_t n = layer_count(net);
  if (layer >= n)
    throw value_error(std::string(who) + ": layer index " + std::to_string(layer) + " out of range (the network has " +
                      std::to_string(n) + " layers, 0.." + std::to_string(n ? n - 1 : 0) + ")");
}

/// A chunk of rows for stream_neurons' callback.
struct neuron_block {
  std::size_t first = 0;  // index of row 0 in the whole input
  std::size_t rows = 0;
  std::size_t width = 0;  // neurons per row, all requested layers together
  std::vector<std::size_t> offsets;  // per requested layer: first column; offsets.back() == width
  const double* data = nullptr;
  const double* row(std::size_t r) const { return data + r * width; }
  std::size_t offset(std::size_t k) const { return offsets[k]; }
  std::size_t neurons(std::size_t k) const { return offsets[k + 1] - offsets[k]; }
};

namespace detail {
/// stream_neurons' checks and block layout, shared by every backend: x must hold n samples, every
/// layer index must exist; returns the block's offsets and width, and the layers' output shapes.
template <class Net>
neuron_block neuron_block_layout(const Net& net, std::span<const network_scalar_t<Net>> x, std::size_t n,
                                 std::span<const std::size_t> layers, std::vector<shape>& shapes) {
  const shape in = input_shape_of(net);
  if (x.size() != n * in.size())
    throw shape_error("stream_neurons: " + std::to_string(x.size()) + " input values for " + std::to_string(n) +
                      " samples of shape " + in.str() + " (expected " + std::to_string(n * in.size()) + ")");
  for (std::size_t l : layers) check_layer_index(net, l, "stream_neurons");
  neuron_block blk;
  blk.offsets.push_back(0);
  shapes.clear();
  for (std::size_t l : layers) {
    shapes.push_back(shape_at(net, l + 1));
    blk.offsets.push_back(blk.offsets.back() + coverage_neurons(shapes.back()));
  }
  blk.width = blk.offsets.back();
  return blk;
}
}  // namespace detail

/// Streams the neurons of `layers` for the n samples at x (n * input size scalars).
template <class Policy, class Net, class F>
  requires execution::is_execution_policy_v<Policy>
void stream_neurons(const Policy&, const Net& net, std::span<const network_scalar_t<Net>> x, std::size_t n,
                    std::span<const std::size_t> layers, F&& f, std::size_t chunk = 1024) {
  using T = network_scalar_t<Net>;
  const shape in = input_shape_of(net);
  std::vector<shape> shapes;
  neuron_block blk = detail::neuron_block_layout(net, x, n, layers, shapes);
  if (chunk == 0) chunk = 1024;
  std::vector<double> buf;
  constexpr bool parallel = execution::is_host_parallel_policy_v<Policy>;
  auto& pool = detail::default_pool();
  const std::size_t tasks = parallel ? pool.size() : 1;
  std::vector<trace<T>> traces(tasks);
  for (std::size_t b0 = 0; b0 < n; b0 += chunk) {
    const std::size_t nb = std::min(chunk, n - b0);
    buf.resize(nb * blk.width);
    auto work = [&](std::size_t t) {
      const std::size_t r0 = nb * t / tasks, r1 = nb * (t + 1) / tasks;
      if (r0 == r1) return;
      auto& tr = traces[t];
      forward_trace(net, r1 - r0, x.data() + (b0 + r0) * in.size(), tr);
      for (std::size_t k = 0; k < layers.size(); ++k) {
        const auto a = tr.activation(layers[k] + 1);
        const std::size_t s = shapes[k].size();
        for (std::size_t r = r0; r < r1; ++r)
          neuron_values(shapes[k], false, a.data() + (r - r0) * s, buf.data() + r * blk.width + blk.offsets[k]);
      }
    };
    if (tasks > 1 && nb >= 2 * tasks)
      pool.parallel_for(tasks, work);
    else
      for (std::size_t t = 0; t < tasks; ++t) work(t);
    blk.first = b0;
    blk.rows = nb;
    blk.data = buf.data();
    f(std::as_const(blk));
  }
}

template <class Net, class F>
  requires(!execution::is_execution_policy_v<Net>)
void stream_neurons(const Net& net, std::span<const network_scalar_t<Net>> x, std::size_t n, std::span<const std::size_t> layers,
                    F&& f, std::size_t chunk = 1024) {
  execution::with_default_policy(net, [&](const auto& pol) { return stream_neurons(pol, net, x, n, layers, std::forward<F>(f), chunk); });
}

/// The number of samples in X ([N, ...]) after checking its per-sample shape against the network.
template <class Net, class A>
std::size_t sample_count(const Net& net, const A& X, const char* who) {
  const shape in = input_shape_of(net);
  if (X.dimension() == 0 || X.size() % in.size() != 0 || X.shape()[0] * in.size() != X.size())
    throw shape_error(std::string(who) + ": input of " + std::to_string(X.size()) + " values is not [N, " + in.str() +
                      "]");
  return X.shape()[0];
}

}  // namespace nnlens
