// nnlens/thrust/forward.hpp -- batched inference on the thrust device system.
//
//   auto y = forward(nnlens::execution::thrust, net, X);   // X [batch, in...] -> [batch, out...]
//
// requires: every layer has thrust kernels (nnlens/thrust/network.hpp).
// ensures:  the same checks and exceptions as the host forward (shape_error, value_error for
//           NaN/Inf input or a non-finite output); the input goes to the device in passes of
//           policy.batch samples.  The result equals the host policy's up to float rounding: the
//           kernels sum in input-index order, the host GEMM in its own blocked order
//           (tests/thrust: |thrust - host| <= 1e-5 * (1 + max |host|) in float).
#pragma once

#include <algorithm>
#include <cmath>
#include <span>

#include <thrust/copy.h>
#include <thrust/device_vector.h>

#include "nnlens/core/finite.hpp"
#include "nnlens/network/forward.hpp"
#include "nnlens/network/validate.hpp"
#include "nnlens/thrust/network.hpp"
#include "nnlens/thrust/policy.hpp"

namespace nnlens {

template <class Net, class E>
auto forward(const execution::thrust_policy& policy, const Net& net, const E& xin) {
  using T = network_scalar_t<Net>;
  const shape in = input_shape_of(net), out = output_shape_of(net);
  const std::size_t batch = detail::check_batch_input(xin, in, "forward");
  check_shapes(net);
  const auto& x = detail::row_major_input<T>(xin);  // xin itself, or a row-major copy in T
  require_finite(std::span<const T>(x.data(), x.size()), in.size(), "forward: input");
  xt::xarray<T> y = xt::xarray<T>::from_shape(out.with_batch(batch));
  if (batch == 0) return y;
  const device_network<Net> dnet(net);
  const std::size_t pass = std::max<std::size_t>(1, std::min(policy.batch, batch));
  ::thrust::device_vector<T> dx(pass * in.size()), dy(pass * out.size());
  for (std::size_t b0 = 0; b0 < batch; b0 += pass) {
    const std::size_t nb = std::min(pass, batch - b0);
    ::thrust::copy(x.data() + b0 * in.size(), x.data() + (b0 + nb) * in.size(), dx.begin());
    dnet.forward(nb, detail::dptr(dx), detail::dptr(dy));
    ::thrust::copy(dy.begin(), dy.begin() + std::ptrdiff_t(nb * out.size()), y.data() + b0 * out.size());
  }
  detail::check_output(net, y, out);
  return y;
}

}  // namespace nnlens
