// nnlens/thrust/profile.hpp -- NNSlicer's profile (per-neuron mean activations) on the thrust
// device system.
//
//   auto p = profile_network(nnlens::execution::thrust, net, X, {.grain = granularity::element});
//
// requires: every layer has thrust kernels (nnlens/thrust/network.hpp; composites included: the
//           device keeps every tensor of the op graph, network/graph.hpp, inner ones too).
// ensures:  the same profile as the host policy (grain, fingerprint, names, samples; sums equal up
//           to float rounding of the activations: tests/thrust, relative 1e-5), the same errors
//           (shape_error, value_error for NaN/Inf, data_error for an empty dataset).  The device
//           runs policy.batch samples per pass, keeping every tensor of the pass; per-neuron sums
//           accumulate on the device in 64 fixed sample blocks (double) over all passes and are
//           copied back once, then summed in block order: deterministic, independent of the
//           thread count.
#pragma once

#include <algorithm>
#include <memory>
#include <span>
#include <vector>

#include <thrust/copy.h>
#include <thrust/device_vector.h>

#include "nnlens/core/error.hpp"
#include "nnlens/core/finite.hpp"
#include "nnlens/core/progress.hpp"
#include "nnlens/nnslicer/profile.hpp"
#include "nnlens/thrust/network.hpp"
#include "nnlens/thrust/policy.hpp"

namespace nnlens {

template <class Net, class E>
profile profile_network(const execution::thrust_policy& policy, const Net& net, const E& X, const profile_options& o = {}) {
  using T = network_scalar_t<Net>;
  const shape in = input_shape_of(net);
  const std::size_t n = detail::profile_samples(net, X);
  const auto& x = detail::row_major_input<T>(X);  // X itself, or a row-major copy in T
  require_finite(std::span<const T>(x.data(), x.size()), in.size(), "profile_network: input");
  std::unique_ptr<progress_bar> bar;
  if (o.progress) bar = std::make_unique<progress_bar>("profile", n);

  profile_accumulator<T> acc(net, o.grain);  // names, fingerprint, zero sums
  profile& p = acc.result();
  const device_network<Net> dnet(net);
  const std::vector<shape>& acts = dnet.acts();  // the op graph's tensors, as the accumulator's
  NNLENS_EXPECTS(p.sums.size() == acts.size());
  const bool el = o.grain == granularity::element;

  const std::size_t pass = std::max<std::size_t>(1, std::min(policy.batch, n));
  constexpr std::size_t S = 64;  // sample blocks per neuron
  ::thrust::device_vector<T> dx(pass * in.size());
  std::vector<::thrust::device_vector<T>> bufs;
  std::vector<::thrust::device_vector<double>> part(acts.size());  // per tensor: [neuron][block], on the device
  for (std::size_t a = 0; a < acts.size(); ++a) {
    NNLENS_EXPECTS(neuron_count(acts[a], el) == p.sums[a].size());
    part[a].assign(p.sums[a].size() * S, 0.0);
  }
  for (std::size_t b0 = 0; b0 < n; b0 += pass) {
    const std::size_t nb = std::min(pass, n - b0);
    ::thrust::copy(x.data() + b0 * in.size(), x.data() + (b0 + nb) * in.size(), dx.begin());
    dnet.run(nb, detail::dptr(dx), bufs);
    for (std::size_t a = 0; a < acts.size(); ++a) {
      const std::size_t nn = p.sums[a].size(), hw = acts[a].size() / nn;
      thrust_kernels::neuron_partials<T>(nb, nn, hw, detail::dptr(bufs[a]), detail::dptr(part[a]), S);
    }
    p.samples += nb;
    if (bar) bar->update(b0 + nb);
  }
  std::vector<double> h;
  for (std::size_t a = 0; a < acts.size(); ++a) {  // one copy per tensor; blocks summed in order
    h.resize(part[a].size());
    ::thrust::copy(part[a].begin(), part[a].end(), h.begin());
    for (std::size_t k = 0; k < p.sums[a].size(); ++k)
      for (std::size_t b = 0; b < S; ++b) p.sums[a][k] += h[k * S + b];
  }
  if (bar) bar->finish();
  return p;
}

}  // namespace nnlens
