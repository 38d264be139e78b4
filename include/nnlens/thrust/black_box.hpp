// nnlens/thrust/black_box.hpp -- a network as a DFlare black box whose batches run on the thrust
// device system (opt-in component nnlens::thrust).
//
//   black_box f = difftest::wrap(execution::thrust, net, "lenet5", normalization::divide_by(255));
//   black_box g = difftest::wrap(thrust_policy{.batch = 1024}, std::move(twin), "twin", norm);
//   auto r = difftest::dflare(execution::thrust, f, g, seeds, n, opts);   // seeds in lockstep: one
//                                             // batch of queries per round (difftest/dflare.hpp)
//
// The thrust twin of difftest::wrap(net, name, normalization) (difftest/black_box.hpp):
// predict(x, n, probs) uploads the n raw inputs, normalises them on the device ((x - mean[c]) /
// stddev[c], one thrust::for_each), runs nnlens::device_network::forward in passes of
// policy.batch samples, downloads the logits and writes softmax(logits) row by row on the host
// (softmax_rows, as the host wrap; not applied when the last layer is Softmax).  The weights are
// uploaded once, when the black box is made.
//
// requires: every layer has thrust kernels (thrust/network.hpp; else a compile error for a
//           Sequential, logic_error for a DynamicNetwork).  An lvalue network outlives the black
//           box (an rvalue is moved in and owned).
// ensures:  the same checks as the host wrap (shape_error for a bad normalization, value_error for
//           a zero stddev or a non-finite output, naming the black box and the sample);
//           probabilities equal the host wrap's up to float rounding (the kernels sum in another
//           order than the host GEMM: tests/thrust/test_thrust_dflare.cpp, |diff| <= 1e-5);
//           predict is safe to call from several threads (calls are serialised by a mutex: the
//           device buffers are shared and reused between calls).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <thrust/copy.h>
#include <thrust/device_vector.h>
#include <thrust/execution_policy.h>
#include <thrust/for_each.h>
#include <thrust/iterator/counting_iterator.h>

#include "nnlens/config.hpp"
#include "nnlens/difftest/black_box.hpp"
#include "nnlens/network/validate.hpp"
#include "nnlens/thrust/network.hpp"
#include "nnlens/thrust/policy.hpp"

namespace nnlens::difftest {

namespace detail {

/// y[i] = (x[i] - mean[c]) / stddev[c], c = the channel of element i of its sample.
template <class T>
struct thrust_normalize_op {
  const float* x;
  T* y;
  const float* mean;
  const float* stddev;
  std::size_t input_size, per_channel;
  NNLENS_HD void operator()(std::size_t i) const {
    const std::size_t c = (i % input_size) / per_channel;
    y[i] = T((x[i] - mean[c]) / stddev[c]);
  }
};

/// What a thrust black box keeps: the network (owned or not), its device copy, the per-channel
/// normalisation on the device, and the buffers of one pass (reused, under the mutex).
template <class Net>
struct thrust_box_state {
  using T = network_scalar_t<Net>;
  thrust_box_state(std::shared_ptr<const Net> n, const execution::thrust_policy& p, const box_layout& l)
      : net(std::move(n)), dnet(*net), pass(std::max<std::size_t>(1, p.batch)), mean(l.mean.begin(), l.mean.end()),
        stddev(l.stddev.begin(), l.stddev.end()) {}

  std::shared_ptr<const Net> net;
  device_network<Net> dnet;
  std::size_t pass;
  ::thrust::device_vector<float> mean, stddev, raw;
  ::thrust::device_vector<T> x, y;
  std::vector<T> logits;
  std::mutex m;
};

template <class Net>
black_box wrap_thrust(const execution::thrust_policy& policy, std::shared_ptr<const Net> net, std::string name,
                      const normalization& norm) {
  using T = network_scalar_t<Net>;
  const box_layout L = box_layout_of(*net, name, norm);  // the host wrap's checks and layout
  const std::size_t isz = L.input_size, classes = L.classes, per_channel = L.per_channel;
  const bool softmaxed = L.softmaxed;
  auto st = std::make_shared<thrust_box_state<Net>>(std::move(net), policy, L);
  black_box b;
  b.input_size = isz;
  b.classes = classes;
  b.name = name;
  b.predict = [st, isz, classes, per_channel, softmaxed, name](std::span<const float> x, std::size_t n, std::span<float> probs) {
    std::lock_guard lk(st->m);
    const std::size_t pass = std::min(st->pass, std::max<std::size_t>(1, n));
    if (st->raw.size() < pass * isz) st->raw.resize(pass * isz), st->x.resize(pass * isz);
    if (st->y.size() < pass * classes) st->y.resize(pass * classes);
    st->logits.resize(pass * classes);
    for (std::size_t b0 = 0; b0 < n; b0 += pass) {
      const std::size_t nb = std::min(pass, n - b0);
      ::thrust::copy(x.data() + b0 * isz, x.data() + (b0 + nb) * isz, st->raw.begin());
      ::thrust::for_each(::thrust::device, ::thrust::counting_iterator<std::size_t>(0),
                         ::thrust::counting_iterator<std::size_t>(nb * isz),
                         thrust_normalize_op<T>{::thrust::raw_pointer_cast(st->raw.data()),
                                                ::thrust::raw_pointer_cast(st->x.data()),
                                                ::thrust::raw_pointer_cast(st->mean.data()),
                                                ::thrust::raw_pointer_cast(st->stddev.data()), isz, per_channel});
      st->dnet.forward(nb, ::thrust::raw_pointer_cast(st->x.data()), ::thrust::raw_pointer_cast(st->y.data()));
      ::thrust::copy(st->y.begin(), st->y.begin() + std::ptrdiff_t(nb * classes), st->logits.begin());
      const std::span<T> y(st->logits.data(), nb * classes);
      if (!softmaxed) softmax_rows(y, classes);
      for (std::size_t i = 0; i < nb * classes; ++i) {
        if (!std::isfinite(y[i]))
          throw value_error(nnlens::detail::concat("black box '", name, "': output of sample ", b0 + i / classes,
                                                   " is not finite"));
        probs[b0 * classes + i] = float(y[i]);
      }
    }
  };
  return b;
}

}  // namespace detail

/// A network (Sequential or DynamicNetwork with thrust kernels) as a black box running its batches
/// on the thrust device: softmax of its logits on the normalised input (header comment).  An
/// lvalue network is referenced (it must outlive the black box); an rvalue is moved in.
template <class Net>
  requires requires(const std::remove_cvref_t<Net>& n) { output_shape_of(n); }
black_box wrap(const execution::thrust_policy& policy, Net&& net, std::string name = {}, normalization norm = {}) {
  using N = std::remove_cvref_t<Net>;
  return detail::wrap_thrust<N>(policy, detail::hold_network(std::forward<Net>(net)), std::move(name), norm);
}

}  // namespace nnlens::difftest
