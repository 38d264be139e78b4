// nnlens/network/forward.hpp -- batched inference on any network form.
//
//   forward(net, x)                   x: [batch, in...] container -> [batch, out...] (checks shape,
//   forward(execution::par, net, x)      NaN/Inf; allocates the result; par splits the batch over
//                                      the pool's threads, or, at a batch smaller than the pool,
//                                      lets layers split their own work: detail::intra_op_pool())
//   forward_into(net, batch, x, y, ws) raw pointers + a caller-owned workspace: no allocation at
//                                      all, no checks (the embedded path)
//   inference_workspace_size(net, batch)   scalars forward_into needs; for a Sequential also a
//   inference_workspace_v<Net>             compile-time constant (batch 1)
//   static_workspace<Net>              a std::array of exactly that size (static storage, firmware)
//
// Layout of the workspace: two ping-pong activation buffers (largest intermediate activation times
// batch) followed by the largest scratch any layer asks for.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <span>
#include <type_traits>
#include <vector>

#include "nnlens/core/execution.hpp"
#include "nnlens/core/finite.hpp"
#include "nnlens/core/post_op.hpp"
#include "nnlens/core/tensor.hpp"
#include "nnlens/core/thread_pool.hpp"
#include "nnlens/network/dynamic_network.hpp"
#include "nnlens/network/validate.hpp"
#include "nnlens/network/visit.hpp"

namespace nnlens {

namespace detail {
struct inference_plan {
  std::size_t max_act = 0;      // largest intermediate per-sample activation
  std::size_t max_scratch = 0;  // largest scratch at the given batch
  constexpr std::size_t total(std::size_t batch) const { return 2 * max_act * batch + max_scratch; }
};

template <class Net>
constexpr inference_plan static_plan(std::size_t batch) {
  inference_plan p{};
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    auto one = [&]<std::size_t J>(std::integral_constant<std::size_t, J>) {
      using L = std::tuple_element_t<J, typename Net::layer_types>;
      if (J + 1 < Net::size) p.max_act = std::max(p.max_act, Net::shapes[J + 1].size());
      p.max_scratch = std::max(
          p.max_scratch, layer_traits<L>::scratch_size(static_cast<const L*>(nullptr), Net::shapes[J], Net::shapes[J + 1], batch));
    };
    (one(std::integral_constant<std::size_t, I>{}), ...);
  }(std::make_index_sequence<Net::size>{});
  return p;
}

template <class Net>
inference_plan runtime_plan(const Net& net, std::size_t batch) {
  inference_plan p{};
  const std::size_t n = layer_count(net);
  for_each_layer(net, [&](const auto& l, auto idx, shape in, shape out) {
    using L = std::decay_t<decltype(l)>;
    if (std::size_t(idx) + 1 < n) p.max_act = std::max(p.max_act, out.size());
    p.max_scratch = std::max(p.max_scratch, layer_traits<L>::scratch_size(&l, in, out, batch));
  });
  return p;
}
}  // namespace detail

/// Scalars of workspace forward_into needs at `batch` (compile-time for a Sequential).
template <class Net>
constexpr std::size_t inference_workspace_size(const Net& net, std::size_t batch) {
  if constexpr (is_sequential_v<Net>) {
    (void)net;
    return detail::static_plan<Net>(batch).total(batch);
  } else {
    return detail::runtime_plan(net, batch).total(batch);
  }
}
template <class Net>
inline constexpr std::size_t inference_workspace_v = detail::static_plan<Net>(1).total(1);

/// Workspace in static storage for batch-1 inference on a static network (no heap).
template <class Net>
struct static_workspace {
  static_assert(is_sequential_v<Net>, "static_workspace needs a Sequential (a static network type)");
  std::array<network_scalar_t<Net>, std::max<std::size_t>(1, inference_workspace_v<Net>)> data{};
  std::span<network_scalar_t<Net>> span() { return data; }
};

/// Raw batched inference: y[batch, out] = net(x[batch, in]).  No checks, no allocation.
template <class Net, class T>
void forward_into(const Net& net, std::size_t batch, const T* x, T* y, std::span<T> ws) {
  const std::size_t n = layer_count(net);
  if (n == 0) {
    std::copy_n(x, batch * input_shape_of(net).size(), y);
    return;
  }
  detail::inference_plan p;
  if constexpr (is_sequential_v<Net>)
    p = detail::static_plan<Net>(batch);
  else
    p = detail::runtime_plan(net, batch);
  NNLENS_EXPECTS(ws.size() >= p.total(batch));
  T* scratch = ws.data() + 2 * p.max_act * batch;
  // an element-wise map after a layer that accepts it runs inside that layer (core/post_op.hpp)
  detail::fusing_chain<T> run(x, ws.data(), ws.data() + p.max_act * batch);
  for_each_layer(net, [&](const auto& l, auto idx, shape in, shape out) {
    run.step(l, in, out, batch, scratch, std::size_t(idx) + 1 == n ? y : nullptr);
  });
  run.finish();
}

namespace detail {
template <class T>
std::vector<T>& thread_workspace() {
  thread_local std::vector<T> ws;
  return ws;
}

/// Whether E is a row-major xtensor container of T (xt::xarray<T>, xt::xtensor<T, N>).
template <class T, class E>
struct is_row_major_container : std::false_type {};
template <class T>
struct is_row_major_container<T, xt::xarray<T>> : std::true_type {};
template <class T, std::size_t N>
struct is_row_major_container<T, xt::xtensor<T, N>> : std::true_type {};

/// x as a contiguous row-major array of T: x itself when it already is one, else a copy.
/// forward() reads its input through this: a copy of a large batch is fresh memory on every call
/// (glibc mmaps blocks over 32 MB and unmaps them at free), and page-faulting it in cost LeNet-5
/// 1.6x its forward time at batch 16,384 (docs/scale.md, "The batch-4096 cliff").
template <class T, class E>
decltype(auto) row_major_input(const E& x) {
  if constexpr (is_row_major_container<T, E>::value)
    return static_cast<const E&>(x);
  else
    return xt::xarray<T>(x);
}

/// Checks that x is [batch, in...]; returns batch.
template <class E>
std::size_t check_batch_input(const E& x, shape in, const char* what) {
  const auto& s = x.shape();
  bool ok = x.dimension() == in.rank + 1;
  for (std::size_t i = 0; ok && i < in.rank; ++i) ok = s[i + 1] == in[i];
  if (!ok) {
    std::string got = "[";
    for (std::size_t i = 0; i < x.dimension(); ++i) got += (i ? "," : "") + std::to_string(s[i]);
    throw shape_error(concat(what, ": input has shape ", got, "], expected [batch,", in.str().substr(1)));
  }
  return x.dimension() ? s[0] : 0;
}

template <class Net, class T>
void forward_chunks(const execution::parallel_policy& pol, const Net& net, std::size_t batch, const T* x, T* y) {
  const std::size_t in = input_shape_of(net).size(), out = output_shape_of(net).size();
  auto& pool = default_pool();
  const std::size_t chunks = std::min<std::size_t>(pool.size(), (batch + pol.min_chunk - 1) / std::max<std::size_t>(1, pol.min_chunk));
  const std::size_t per = (batch + chunks - 1) / std::max<std::size_t>(1, chunks);
  pool.parallel_for(chunks, [&](std::size_t c) {
    const std::size_t b0 = c * per, b1 = std::min(batch, b0 + per);
    if (b0 >= b1) return;
    auto& ws = thread_workspace<T>();
    const std::size_t need = inference_workspace_size(net, b1 - b0);
    if (ws.size() < need) ws.resize(need);
    forward_into(net, b1 - b0, x + b0 * in, y + b0 * out, std::span<T>(ws));
  });
}
}  // namespace detail

namespace detail {
/// forward()'s output check (every policy): value_error naming a non-finite output's sample and
/// element: the layer of a NaN/Inf parameter, else overflow.
template <class Net, class T>
void check_output(const Net& net, const xt::xarray<T>& y, shape out) {
  for (std::size_t i = detail::all_finite(y.data(), y.size()) ? y.size() : 0; i < y.size(); ++i) {
    if (!std::isfinite(y.data()[i])) {  // error path only: find the cause
      require_finite_parameters(net);
      throw value_error(concat("forward: output sample ", i / out.size(), " element ", i % out.size(),
                               " is not finite although inputs and parameters are (overflow)"));
    }
  }
}

/// forward() after its input checks: x holds `batch` row-major samples in T.  One instantiation per
/// policy and network, whatever container the caller had: these are the forms nnlens::precompiled
/// holds (nnlens/precompiled/network.hpp).
template <class Policy, class Net>
xt::xarray<network_scalar_t<Net>> forward_rows(const Policy& policy, const Net& net,
                                               std::span<const network_scalar_t<Net>> x, std::size_t batch) {
  using T = network_scalar_t<Net>;
  const shape in = input_shape_of(net), out = output_shape_of(net);
  check_shapes(net);
  require_finite(x, in.size(), "forward: input");
  xt::xarray<T> y = xt::xarray<T>::from_shape(out.with_batch(batch));
  if (batch == 0) return y;
  if constexpr (execution::is_host_parallel_policy_v<Policy>) {
    if (batch < default_pool().size()) {  // too few samples to split: the layers may split instead
      intra_op_scope scope(&default_pool());
      auto& ws = thread_workspace<T>();
      const std::size_t need = inference_workspace_size(net, batch);
      if (ws.size() < need) ws.resize(need);
      forward_into(net, batch, x.data(), y.data(), std::span<T>(ws));
    } else {
      forward_chunks(policy, net, batch, x.data(), y.data());
    }
  } else {
    auto& ws = thread_workspace<T>();
    const std::size_t need = inference_workspace_size(net, batch);
    if (ws.size() < need) ws.resize(need);
    forward_into(net, batch, x.data(), y.data(), std::span<T>(ws));
  }
  check_output(net, y, out);
  return y;
}
}  // namespace detail

/// Batched inference with checks: x is [batch, in...]; returns [batch, out...].
/// Throws shape_error for a wrong input shape or weights that do not fit the network (naming the
/// layer), value_error for NaN/Inf in the input, and value_error naming the layer when the output
/// is not finite because of a NaN/Inf parameter (or "overflow" if the parameters are finite).
template <class Policy, class Net, class E>
  requires execution::is_execution_policy_v<Policy>
xt::xarray<network_scalar_t<Net>> forward(const Policy& policy, const Net& net, const E& xin) {
  using T = network_scalar_t<Net>;
  const std::size_t batch = detail::check_batch_input(xin, input_shape_of(net), "forward");
  const auto& x = detail::row_major_input<T>(xin);  // xin itself, or a row-major copy in T
  return detail::forward_rows(policy, net, std::span<const T>(x.data(), x.size()), batch);
}
template <class Net, class E>
  requires(!execution::is_execution_policy_v<Net>)
auto forward(const Net& net, const E& x) {
  return execution::with_default_policy(net, [&](const auto& pol) { return forward(pol, net, x); });
}

}  // namespace nnlens
