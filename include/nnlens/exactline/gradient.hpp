// nnlens/exactline/gradient.hpp -- what is constant on each piece of a line: gradients and maps.
//
//   piece_gradients(net, line, k)   [pieces x in]: d output_k / d input inside each piece (at its
//                                   midpoint; the gradient is the same anywhere inside, Thm 4)
//   piece_maps(net, line)           the affine map of each piece: f(x) = J x + c on the piece,
//                                   J [out x in], c [out] (one backward pass per output)
//   input_gradients(net, X, n, k)   d output_k / d input at n arbitrary points (rows of X)
//   (each takes an optional execution policy first: execution::par runs chunks on the pool)
//
// net may have any scalar; it is converted to the line's scalar S.  Work runs in chunks of 256
// points (forward_trace + backward; with execution::par at least one chunk per thread), so memory
// stays bounded for lines with many pieces.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#include "nnlens/exactline/line.hpp"
#include "nnlens/network/trace.hpp"

namespace nnlens {

/// d out[k] / d x at the n points X (n x in, row-major); returns n x in.  With execution::par the
/// chunks of 256 points run on the thread pool.
template <class S, class Policy, class Net>
  requires execution::is_execution_policy_v<Policy>
std::vector<S> input_gradients(const Policy&, const Net& net_any, const std::vector<S>& X, std::size_t n, std::size_t k) {
  const auto& net = detail::as_scalar<S>(net_any);
  const std::size_t di = input_shape_of(net).size(), dout = output_shape_of(net).size();
  if (k >= dout) throw value_error(detail::concat("input_gradients: output index ", k, " >= output size ", dout));
  NNLENS_EXPECTS(X.size() == n * di);
  std::vector<S> g(n * di);
  // chunks of 256 points; with execution::par at least one per thread (each point's gradient is
  // its own, whatever the chunk: the same bits)
  std::size_t chunk = 256;
  if constexpr (execution::is_host_parallel_policy_v<Policy>)
    chunk = std::clamp<std::size_t>((n + detail::default_pool().size() - 1) / detail::default_pool().size(), 1, 256);
  const std::size_t chunks = (n + chunk - 1) / chunk;
  auto run = [&](std::size_t c) {
    thread_local trace<S> tr;
    std::vector<S> dy;
    const std::size_t b0 = c * chunk, nb = std::min(chunk, n - b0);
    forward_trace(net, nb, X.data() + b0 * di, tr);
    dy.assign(nb * dout, S(0));
    for (std::size_t r = 0; r < nb; ++r) dy[r * dout + k] = S(1);
    backward(net, tr, dy.data(), static_cast<std::decay_t<decltype(net)>*>(nullptr), g.data() + b0 * di);
  };
  if constexpr (execution::is_host_parallel_policy_v<Policy>)
    detail::default_pool().parallel_for(chunks, run);
  else
    for (std::size_t c = 0; c < chunks; ++c) run(c);
  return g;
}
template <class S, class Net>
  requires(!execution::is_execution_policy_v<Net>)
std::vector<S> input_gradients(const Net& net, const std::vector<S>& X, std::size_t n, std::size_t k) {
  return input_gradients<S>(execution::seq, net, X, n, k);
}

namespace detail {
template <class S, class R>
std::vector<S> piece_midpoints(const line_result<S, R>& line) {
  const std::size_t k = line.pieces(), di = line.from.size();
  std::vector<S> X(k * di);
  for (std::size_t j = 0; j < k; ++j) {
    const auto p = line.point((line.t[j] + line.t[j + 1]) / R(2));
    std::copy(p.begin(), p.end(), X.begin() + std::ptrdiff_t(j * di));
  }
  return X;
}
}  // namespace detail

/// The gradient of output k inside every piece: [pieces x in].
template <class S, class R, class Policy, class Net>
  requires execution::is_execution_policy_v<Policy>
std::vector<S> piece_gradients(const Policy& pol, const Net& net, const line_result<S, R>& line, std::size_t k) {
  return input_gradients<S>(pol, net, detail::piece_midpoints(line), line.pieces(), k);
}
template <class S, class R, class Net>
  requires(!execution::is_execution_policy_v<Net>)
std::vector<S> piece_gradients(const Net& net, const line_result<S, R>& line, std::size_t k) {
  return input_gradients<S>(execution::seq, net, detail::piece_midpoints(line), line.pieces(), k);
}

template <class S>
struct affine_map {
  std::vector<S> J;  // out x in
  std::vector<S> c;  // out
};

/// The affine map of every piece (f = J x + c on the piece).
template <class S, class R, class Net>
std::vector<affine_map<S>> piece_maps(const Net& net, const line_result<S, R>& line) {
  const std::size_t k = line.pieces(), di = line.from.size(), dout = line.out_size();
  const auto X = detail::piece_midpoints(line);
  std::vector<affine_map<S>> maps(k);
  for (auto& m : maps) {
    m.J.assign(dout * di, S(0));
    m.c.assign(dout, S(0));
  }
  for (std::size_t o = 0; o < dout; ++o) {
    const auto g = input_gradients<S>(net, X, k, o);
    for (std::size_t j = 0; j < k; ++j) std::copy_n(g.data() + j * di, di, maps[j].J.data() + o * di);
  }
  for (std::size_t j = 0; j < k; ++j) {
    const S h = S(1) / S(2);
    auto y0 = line.output(j), y1 = line.output(j + 1);
    for (std::size_t o = 0; o < dout; ++o) {
      S v = y0[o] + h * (y1[o] - y0[o]);  // f at the midpoint
      for (std::size_t i = 0; i < di; ++i) v -= maps[j].J[o * di + i] * X[j * di + i];
      maps[j].c[o] = v;
    }
  }
  return maps;
}

}  // namespace nnlens
