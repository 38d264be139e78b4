// nnlens/train/attacks.hpp -- white-box L-inf gradient attacks on the cross-entropy loss of the
// true label: FGSM, BIM and PGD (the attacks of NNSlicer's detection study, docs/specs/nnslicer.md#41-adversarial-input-detection).
//
//   auto adv = fgsm([policy,] net, X, labels, eps);                       // one signed step of eps
//   auto adv = bim([policy,] net, X, labels, {.eps, .alpha, .steps});     // iterated FGSM, projected
//   auto adv = pgd([policy,] net, X, labels, {.eps, .alpha, .steps, .seed}); // BIM from a random start
//   auto adv = linf_attack([policy,] net, X, labels, options);            // the common form
//   loss_input_gradient(net, n, x, labels, g)                             // d CE(net(x), y) / d x
//
// One algorithm (projected iterated signed gradient ascent; Goodfellow et al. 2015, Kurakin et al.
// 2017, Madry et al. 2018):
//   x_0 = x                            (FGSM, BIM)
//   x_0 = clip(x + U[-eps, eps]^d)     (PGD: random_start; one std::mt19937_64 per sample, seeded
//                                       with seed and the sample's index, so the result does not
//                                       depend on the batch split or the thread count)
//   x_{t+1} = clip(proj_{|. - x|_inf <= eps}(x_t + alpha sign(d L(x_t, y) / d x)))   t < steps
// with L the softmax cross-entropy of the logits against the true label, and clip() to the pixel
// range [lo, hi] (default [0, 1]).  FGSM is steps = 1, alpha = eps, no random start.
//
// requires: X [n, input shape...] in the network's input shape; labels: n integers in
//           [0, classes) (data_error naming the sample otherwise); eps >= 0, alpha >= 0, lo <= hi
//           (value_error); the network's last layer outputs logits (no Softmax layer: its backward
//           would give the gradient of the probabilities, not of the loss).
// ensures:  the result has X's shape and the network's scalar type; every element lies in [lo, hi]
//           and within eps of X (after clipping X itself to [lo, hi]); deterministic for a given
//           seed; with execution::par the chunks of `chunk` samples run on the thread pool and give
//           the same bits as execution::seq.  The attacks are untargeted and run all steps (no
//           early stop): whether an example fools the model is for the caller to check.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "nnlens/core/error.hpp"
#include "nnlens/core/execution.hpp"
#include "nnlens/core/random.hpp"
#include "nnlens/core/thread_pool.hpp"
#include "nnlens/network/forward.hpp"
#include "nnlens/network/trace.hpp"
#include "nnlens/train/loss.hpp"

namespace nnlens {

struct linf_attack_options {
  double eps = 8.0 / 256;     // L-inf radius (in input units; pixels in [0, 1])
  double alpha = 0;           // step size; 0: eps (FGSM) or eps / 4 when steps > 1
  std::size_t steps = 1;      // gradient steps
  bool random_start = false;  // PGD: start uniformly in the eps-ball
  std::uint64_t seed = 1;     // the random start's seed
  double lo = 0, hi = 1;      // the valid input range
  std::size_t chunk = 128;    // samples per forward/backward pass
};

/// g = d CE(net(x), y) / d x for n samples (x, g: n x input size; labels: n class indices).
/// tr is the caller's reusable trace.
template <class Net, class T, class Label>
void loss_input_gradient(const Net& net, std::size_t n, const T* x, const Label* labels, T* g, trace<T>& tr) {
  const std::size_t dout = output_shape_of(net).size();
  forward_trace(net, n, x, tr);
  std::vector<T> dlogits(n * dout);
  const auto out = tr.output();
  train::softmax_cross_entropy<T, Label>(std::span<const T>(out.data(), n * dout), dout, std::span<const Label>(labels, n),
                                         std::span<T>(dlogits), 1);
  backward(net, tr, dlogits.data(), static_cast<std::remove_const_t<Net>*>(nullptr), g);
}

namespace detail {
template <class T>
T sign_of(T v) {
  return v > T(0) ? T(1) : (v < T(0) ? T(-1) : T(0));
}
/// SplitMix64 of the seed advanced i steps (the i-th output of the stream seeded with `seed`).
inline std::uint64_t attack_seed(std::uint64_t seed, std::size_t i) {
  return nnlens::detail::splitmix64(seed + 0x9e3779b97f4a7c15ull * std::uint64_t(i));
}
}  // namespace detail

/// The common form (see the header comment).
template <class Policy, class Net, class E, class Labels>
  requires execution::is_execution_policy_v<Policy>
xt::xarray<network_scalar_t<Net>> linf_attack(const Policy&, const Net& net, const E& X, const Labels& labels,
                                              const linf_attack_options& o) {
  using T = network_scalar_t<Net>;
  using Label = std::decay_t<decltype(*std::begin(labels))>;
  check_shapes(net);
  const shape in = input_shape_of(net);
  const std::size_t n = detail::check_batch_input(X, in, "linf_attack"), d = in.size();
  if (std::size_t(std::distance(std::begin(labels), std::end(labels))) != n)
    throw data_error(detail::concat("linf_attack: ", n, " samples but ",
                                    std::distance(std::begin(labels), std::end(labels)), " labels"));
  if (!(o.eps >= 0) || !(o.alpha >= 0) || !(o.lo <= o.hi) || !std::isfinite(o.eps) || !std::isfinite(o.alpha))
    throw value_error(detail::concat("linf_attack: eps = ", o.eps, ", alpha = ", o.alpha, ", range [", o.lo, ", ", o.hi,
                                     "]: expected eps >= 0, alpha >= 0, lo <= hi"));
  const std::vector<Label> y(std::begin(labels), std::end(labels));
  const std::size_t classes = output_shape_of(net).size();
  for (std::size_t i = 0; i < n; ++i) train::detail::checked_label(y[i], classes, i);
  const double alpha = o.alpha > 0 ? o.alpha : (o.steps > 1 ? o.eps / 4 : o.eps);
  xt::xarray<T> x0 = X;
  for (auto& v : x0) v = std::clamp(v, T(o.lo), T(o.hi));
  require_finite(std::span<const T>(x0.data(), x0.size()), d, "linf_attack: input");
  xt::xarray<T> adv = x0;
  const std::size_t chunk = std::max<std::size_t>(1, o.chunk), chunks = (n + chunk - 1) / chunk;
  auto run = [&](std::size_t c) {
    thread_local trace<T> tr;
    const std::size_t b0 = c * chunk, nb = std::min(chunk, n - b0);
    const T* xs = x0.data() + b0 * d;
    T* xa = adv.data() + b0 * d;
    auto project = [&](std::size_t k, double v) {
      const double lo = std::max(o.lo, double(xs[k]) - o.eps), hi = std::min(o.hi, double(xs[k]) + o.eps);
      return T(std::clamp(v, lo, hi));
    };
    if (o.random_start)
      for (std::size_t r = 0; r < nb; ++r) {
        std::mt19937_64 rng(detail::attack_seed(o.seed, b0 + r));
        std::uniform_real_distribution<double> u(-o.eps, o.eps);
        for (std::size_t k = r * d; k < (r + 1) * d; ++k) xa[k] = project(k, double(xs[k]) + u(rng));
      }
    std::vector<T> g(nb * d);
    for (std::size_t t = 0; t < o.steps; ++t) {
      loss_input_gradient(net, nb, xa, y.data() + b0, g.data(), tr);
      for (std::size_t k = 0; k < nb * d; ++k) xa[k] = project(k, double(xa[k]) + alpha * double(detail::sign_of(g[k])));
    }
  };
  if constexpr (execution::is_host_parallel_policy_v<Policy>)
    detail::default_pool().parallel_for(chunks, run);
  else
    for (std::size_t c = 0; c < chunks; ++c) run(c);
  return adv;
}
template <class Net, class E, class Labels>
  requires(!execution::is_execution_policy_v<Net>)
xt::xarray<network_scalar_t<Net>> linf_attack(const Net& net, const E& X, const Labels& labels, const linf_attack_options& o) {
  return linf_attack(execution::seq, net, X, labels, o);
}

/// FGSM: x + eps sign(grad), clipped to [lo, hi].
template <class Policy, class Net, class E, class Labels>
  requires execution::is_execution_policy_v<Policy>
auto fgsm(const Policy& p, const Net& net, const E& X, const Labels& labels, double eps, double lo = 0, double hi = 1) {
  return linf_attack(p, net, X, labels, {.eps = eps, .alpha = eps, .steps = 1, .random_start = false, .lo = lo, .hi = hi});
}
template <class Net, class E, class Labels>
  requires(!execution::is_execution_policy_v<Net>)
auto fgsm(const Net& net, const E& X, const Labels& labels, double eps, double lo = 0, double hi = 1) {
  return fgsm(execution::seq, net, X, labels, eps, lo, hi);
}

/// BIM (Kurakin et al.): `steps` FGSM steps of size alpha, projected to the eps-ball; no random start.
template <class Policy, class Net, class E, class Labels>
  requires execution::is_execution_policy_v<Policy>
auto bim(const Policy& p, const Net& net, const E& X, const Labels& labels, linf_attack_options o) {
  o.random_start = false;
  return linf_attack(p, net, X, labels, o);
}
template <class Net, class E, class Labels>
  requires(!execution::is_execution_policy_v<Net>)
auto bim(const Net& net, const E& X, const Labels& labels, const linf_attack_options& o) {
  return bim(execution::seq, net, X, labels, o);
}

/// PGD (Madry et al.): BIM from a uniform random start in the eps-ball (seeded).
template <class Policy, class Net, class E, class Labels>
  requires execution::is_execution_policy_v<Policy>
auto pgd(const Policy& p, const Net& net, const E& X, const Labels& labels, linf_attack_options o) {
  o.random_start = true;
  return linf_attack(p, net, X, labels, o);
}
template <class Net, class E, class Labels>
  requires(!execution::is_execution_policy_v<Net>)
auto pgd(const Net& net, const E& X, const Labels& labels, const linf_attack_options& o) {
  return pgd(execution::seq, net, X, labels, o);
}

}  // namespace nnlens
