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

#include "nnlens/difftest/black_box.hpp"
#include "nnlens/network/validate.hpp"
#include "nnlens/thrust/network.hpp"
#include "nnlens/thrust/policy.hpp"

namespace nnlens::difftest {

namespace detail {

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
  auto st = std::make_shared<thrust_box_state<Net>>(std::move(net), policy, L);
  black_box b;
  b.input_size = L.input_size;
  b.classes = L.classes;
  b.name = name;
  b.predict = [st, L, name](std::span<const float> x, std::size_t n, std::span<float> probs) {
    std::lock_guard lk(st->m);
    const std::size_t isz = L.input_size, classes = L.classes, pass = std::min(st->pass, std::max<std::size_t>(1, n));
    st->logits.resize(pass * classes);
    using nnlens::detail::dptr;
    const normalize_op<T> norm{dptr(st->raw, pass * isz), dptr(st->x, pass * isz), dptr(st->mean), dptr(st->stddev), isz, L.per_channel};
    T* y = dptr(st->y, pass * classes);
    for (std::size_t b0 = 0; b0 < n; b0 += pass) {
      const std::size_t nb = std::min(pass, n - b0);
      ::thrust::copy(x.data() + b0 * isz, x.data() + (b0 + nb) * isz, st->raw.begin());
      thrust_kernels::launch(nb * isz, norm);
      st->dnet.forward(nb, norm.y, y);
      ::thrust::copy(st->y.begin(), st->y.begin() + std::ptrdiff_t(nb * classes), st->logits.begin());
      box_outputs(std::span<T>(st->logits.data(), nb * classes), L, name, b0, probs);
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
