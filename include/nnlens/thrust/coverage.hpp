// nnlens/thrust/coverage.hpp -- coverage mapping and DeepImportance's relevance pass on the thrust
// device system.
//
//   measure(nnlens::execution::thrust, net, X, criterion)       any criterion (IDC, NC, KMNC, NBC,
//                                                                SNAC, TKNC, LSC, DSC)
//   prepare_neuron_bounds(execution::thrust, net, X) / prepare_surprise(execution::thrust, ...)
//   neuron_relevance_of(execution::thrust, net, X, labels, {.layer = L})
//   prepare_idc(execution::thrust, net, X, labels, {.m = 6})     LRP on the device, k-means on
//                                                                the host
//
// How: two overloads for thrust_policy of the functions those analyses call,
//   stream_neurons(thrust_policy, ...)        (coverage/activations.hpp; found by ADL wherever it
//                                             is called): the forward pass and the neuron mapping
//                                             (channel means of rank-3 tensors) on the device, in
//                                             passes of policy.batch samples; each chunk of rows
//                                             is copied back and handed to the callback in order
//   detail::importance_pass(thrust_policy, ...) (coverage/importance.hpp): LRP down to the
//                                             subject layer on the device (thrust/relevance.hpp),
//                                             per-neuron relevance and neuron values per sample
//                                             summed over space on the device; the aggregation
//                                             (sum, mean_abs, count) on the host, in the host's
//                                             chunk order
// requires: every layer has thrust kernels (thrust/network.hpp) and a device LRP step
//           (thrust/relevance.hpp).  Any include order: importance_pass is reached through
//           detail::importance_backend<Policy>, specialised below for thrust_policy.
// ensures:  the host policy's results up to the float rounding of the forward pass (same
//           important neurons, centroids and covered sets on the tests' data: see
//           tests/thrust/test_thrust_coverage.cpp), the same errors.  A DynamicNetwork with a layer
//           without thrust kernels gets the thrust logic_error naming it (no host fallback).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <thrust/copy.h>
#include <thrust/device_vector.h>

#include "nnlens/core/error.hpp"
#include "nnlens/core/traits.hpp"
#include "nnlens/thrust/lrp_kernels.hpp"
#include "nnlens/thrust/network.hpp"
#include "nnlens/thrust/policy.hpp"
#include "nnlens/thrust/relevance.hpp"

#include "nnlens/coverage/activations.hpp"
#include "nnlens/coverage/criterion.hpp"
#include "nnlens/coverage/idc.hpp"
#include "nnlens/coverage/importance.hpp"

namespace nnlens {

/// Streams the neurons of `layers` for the n samples at x: the host stream_neurons, with the
/// forward pass and the neuron mapping on the device.
template <class Net, class F>
void stream_neurons(const execution::thrust_policy& policy, const Net& net, std::span<const network_scalar_t<Net>> x,
                    std::size_t n, std::span<const std::size_t> layers, F&& f, std::size_t chunk = 1024) {
  using T = network_scalar_t<Net>;
  const shape in = input_shape_of(net);
  std::vector<shape> shapes;
  neuron_block blk = detail::neuron_block_layout(net, x, n, layers, shapes);
  if (chunk == 0) chunk = 1024;
  check_shapes(net);
  const device_network<Net> dnet(net);  // logic_error for a layer without thrust kernels
  if (n == 0) return;
  const std::size_t cap = std::min(chunk, n), pass = std::max<std::size_t>(1, std::min(policy.batch, cap));
  ::thrust::device_vector<T> dx(pass * in.size());
  ::thrust::device_vector<double> dv(cap * blk.width);
  std::vector<::thrust::device_vector<T>> bufs;
  std::vector<double> buf;
  for (std::size_t b0 = 0; b0 < n; b0 += chunk) {
    const std::size_t nb = std::min(chunk, n - b0);
    for (std::size_t p0 = 0; p0 < nb; p0 += pass) {
      const std::size_t np = std::min(pass, nb - p0);
      ::thrust::copy(x.data() + (b0 + p0) * in.size(), x.data() + (b0 + p0 + np) * in.size(), dx.begin());
      dnet.run(np, detail::dptr(dx), bufs);
      for (std::size_t k = 0; k < layers.size(); ++k) {
        const shape s = shapes[k];
        const std::size_t C = coverage_neurons(s), hw = s.size() / C;
        thrust_kernels::coverage_neuron_values<T>(np, C, hw, detail::dptr(bufs[dnet.layer_tensor(layers[k])]),
                                                  detail::dptr(dv) + p0 * blk.width, blk.width, blk.offsets[k]);
      }
    }
    buf.resize(nb * blk.width);
    ::thrust::copy(dv.begin(), dv.begin() + std::ptrdiff_t(nb * blk.width), buf.begin());
    blk.first = b0;
    blk.rows = nb;
    blk.data = buf.data();
    f(std::as_const(blk));
  }
}

namespace detail {

/// One pass over X on the device: relevance totals of `layer`'s neurons over T' and, when `acts`
/// is given, the neuron values of the T' rows (the host importance_pass's contract).
template <class Net, class Labels>
neuron_relevance importance_pass(const execution::thrust_policy& policy, const Net& net, std::span<const network_scalar_t<Net>> x,
                                 std::size_t n, const Labels& labels, const importance_options& o, std::vector<double>* acts) {
  using T = network_scalar_t<Net>;
  const std::size_t layer = importance_layer(net, n, labels, o);
  check_shapes(net);
  device_lrp<Net> d(net, o.lrp);
  const shape in = d.acts()[0];
  if (x.size() != n * in.size()) throw shape_error("neuron_relevance: input is not [N, " + in.str() + "]");
  require_finite(x, in.size(), "neuron_relevance: input");
  const std::size_t stop = d.network().layer_tensor(layer), nc = d.acts().back().size();
  const shape st = d.acts()[stop];
  const std::size_t width = coverage_neurons(st), per = st.size() / width;
  neuron_relevance res = empty_relevance(net, layer, o, width, n);
  constexpr std::size_t chunk = 256;  // the host's chunks: partial sums added in chunk order
  std::vector<double> part(width, 0.0), agg, vals;
  std::vector<std::size_t> order(width);
  std::vector<T> z;
  if (acts) acts->clear();
  const std::size_t pass = std::max<std::size_t>(1, std::min(policy.batch, n));
  ::thrust::device_vector<T> dx(pass * in.size());
  ::thrust::device_vector<double> dagg(pass * width), dval(acts ? pass * width : 0);
  agg.resize(pass * width);
  auto flush = [&] {
    for (std::size_t q = 0; q < width; ++q) res.total[q] += part[q];
    std::fill(part.begin(), part.end(), 0.0);
  };
  for (std::size_t b0 = 0; b0 < n; b0 += pass) {
    const std::size_t nb = std::min(pass, n - b0);
    ::thrust::copy(x.data() + b0 * in.size(), x.data() + (b0 + nb) * in.size(), dx.begin());
    const double* r = d.run(nb, detail::dptr(dx), stop);  // from the predicted logit
    thrust_kernels::lrp_channel_sums(nb, width, per, r, detail::dptr(dagg));
    ::thrust::copy(dagg.begin(), dagg.begin() + std::ptrdiff_t(nb * width), agg.begin());
    if (acts) {
      thrust_kernels::coverage_neuron_values<T>(nb, width, per, d.tensor(stop), detail::dptr(dval), width, 0);
      vals.resize(nb * width);
      ::thrust::copy(dval.begin(), dval.begin() + std::ptrdiff_t(nb * width), vals.begin());
    }
    z.resize(nb * nc);
    const T* dz = d.tensor(d.acts().size() - 1);
    ::thrust::copy(::thrust::device_pointer_cast(dz), ::thrust::device_pointer_cast(dz) + std::ptrdiff_t(nb * nc), z.begin());
    for (std::size_t r0 = 0; r0 < nb; ++r0) {
      const std::size_t i = b0 + r0;
      if (i > 0 && i % chunk == 0) flush();
      const T* zr = z.data() + r0 * nc;
      const std::size_t pred = std::size_t(std::max_element(zr, zr + nc) - zr);
      if (o.correct_only && pred != std::size_t(labels[i])) continue;
      ++res.samples;
      const double* a = agg.data() + r0 * width;
      if (acts) acts->insert(acts->end(), vals.begin() + std::ptrdiff_t(r0 * width), vals.begin() + std::ptrdiff_t((r0 + 1) * width));
      add_importance(o, a, width, order, part.data());
    }
  }
  flush();
  if (res.samples == 0)
    throw data_error("neuron_relevance: none of the " + std::to_string(n) +
                     " training inputs is classified correctly (labels of another dataset?)");
  return res;
}

template <>
struct importance_backend<execution::thrust_policy> {
  template <class Net, class Labels>
  static neuron_relevance run(const execution::thrust_policy& pol, const Net& net, std::span<const network_scalar_t<Net>> x,
                              std::size_t n, const Labels& labels, const importance_options& o, std::vector<double>* acts) {
    return importance_pass(pol, net, x, n, labels, o, acts);  // the overload above
  }
};

}  // namespace detail
}  // namespace nnlens
