// nnlens/exactline/ig.hpp -- exact integrated gradients, and the Riemann sums they replace.
//
//   auto ig = exact_ig([execution::par,] net, x, baseline, k);   // IG of output k along baseline -> x
//   ig.attributions    IG_i = (x_i - x'_i) sum_r (t_{r+1} - t_r) dF_k/dx_i(piece r)   (exact)
//   ig.delta           F_k(x) - F_k(x'); sum(ig.attributions) equals it up to rounding
//   riemann_ig(net, x, baseline, k, m, rule)    left / right / trapezoid sums with m partitions
//                                               (or Gauss-Legendre with m nodes, Captum's default),
//                                               with the network's gradients at the samples
//   riemann_from_pieces(ig, m, rule)            the same sum from the exact pieces' gradients
//                                               (no network evaluation: the gradient at a
//                                               sample is its piece's; a sample exactly on a
//                                               break takes the piece to its right, t = 1 the last;
//                                               at t = 0 with a black baseline every max-pool window
//                                               ties, so riemann_ig's gradient there is the
//                                               tie-break's, which can differ from the first piece's)
//   ig_relative_error(approx, exact)            mean_i |a_i - e_i| / |e_i + 1e-11| (the paper's code)
//   samples_to_reach(ig, rule, 0.05)            the paper's Table 2 protocol: the smallest n such
//                                               that n, n+1, ..., n+4 partitions ALL stay below the
//                                               error; reported as samples (trapezoid: n + 1);
//                                               nullopt when n > max_partitions (an outlier)
//   samples_to_reach_with(exact, approx, rule, 0.05)   the same on approx(m), any source of sums
//   m_tilde(ig, 0.01)                           the prior-work heuristic: the smallest m in
//                                               [20, 1000] whose left sum has completeness error
//                                               |sum - delta| / |delta| < 1 %
// (docs/specs/exactline.md#3b-exact-integrated-gradients).  F is the raw output k (a logit), as in the paper's code.
#pragma once

#include <cmath>
#include <cstddef>
#include <optional>
#include <string_view>
#include <vector>

#include "nnlens/exactline/gradient.hpp"
#include "nnlens/exactline/line.hpp"

namespace nnlens {

/// The sums that approximate IG: left / right / trapezoid / middle Riemann sums with m partitions
/// (middle: the midpoints (q + 1/2) / m, Captum's "riemann_middle"), and Gauss-Legendre quadrature
/// with m nodes (Captum's default method, "gausslegendre": the nodes and weights of numpy's
/// leggauss(m) mapped from [-1, 1] to [0, 1]).
enum class riemann_rule { left, right, trapezoid, gauss_legendre, middle };

inline std::string_view rule_name(riemann_rule r) {
  switch (r) {
    case riemann_rule::left: return "left";
    case riemann_rule::right: return "right";
    case riemann_rule::gauss_legendre: return "gauss_legendre";
    case riemann_rule::middle: return "middle";
    default: return "trapezoid";
  }
}

template <class S = double, class R = double>
struct ig_result {
  std::vector<S> attributions;  // exact IG, one per input element
  S delta{};                    // F_k(x) - F_k(x')
  S sum{};                      // sum of attributions
  std::size_t output_index = 0;
  line_result<S, R> line;       // the partition of baseline -> x
  std::vector<S> gradients;     // [pieces x in]: dF_k/dx inside each piece
  std::size_t pieces() const { return line.pieces(); }
};

template <class S = double, class R = double, class Policy, class Net, class EX, class EB>
  requires execution::is_execution_policy_v<Policy>
ig_result<S, R> exact_ig(const Policy& pol, const Net& net_any, const EX& x, const EB& baseline, std::size_t k,
                         const line_options& opt = {}) {
  const auto& net = detail::as_scalar<S>(net_any);
  ig_result<S, R> r;
  r.line = exact_line<S, R>(pol, net, baseline, x, opt);
  const std::size_t dout = r.line.out_size(), di = r.line.from.size(), np = r.line.pieces();
  if (k >= dout) throw value_error(detail::concat("exact_ig: output index ", k, " >= output size ", dout));
  r.output_index = k;
  r.gradients = piece_gradients(pol, net, r.line, k);
  r.attributions.assign(di, S(0));
  for (std::size_t j = 0; j < np; ++j) {
    const S w = S(r.line.t[j + 1] - r.line.t[j]);
    const S* g = r.gradients.data() + j * di;
    for (std::size_t i = 0; i < di; ++i) r.attributions[i] += w * g[i];
  }
  r.sum = S(0);
  for (std::size_t i = 0; i < di; ++i) {
    r.attributions[i] *= r.line.to[i] - r.line.from[i];
    r.sum += r.attributions[i];
  }
  r.delta = r.line.output(np)[k] - r.line.output(0)[k];
  return r;
}

template <class S = double, class R = double, class Net, class EX, class EB>
  requires(!execution::is_execution_policy_v<Net>)
ig_result<S, R> exact_ig(const Net& net, const EX& x, const EB& baseline, std::size_t k, const line_options& opt = {}) {
  return execution::with_default_policy(net, [&](const auto& pol) { return exact_ig<S, R>(pol, net, x, baseline, k, opt); });
}

namespace detail {
/// The m Gauss-Legendre nodes on [0, 1], ascending, and their weights (sum 1): Newton's method on
/// the Legendre polynomial P_m in long double from the asymptotic guesses, as numpy's leggauss
/// polishes its nodes.
inline void gauss_legendre_nodes(std::size_t m, std::vector<long double>& x, std::vector<long double>& w) {
  x.assign(m, 0.0L);
  w.assign(m, 0.0L);
  const long double pi = 3.141592653589793238462643383279502884L;
  for (std::size_t i = 0; i < (m + 1) / 2; ++i) {
    long double z = std::cos(pi * (static_cast<long double>(i) + 0.75L) / (static_cast<long double>(m) + 0.5L)), dp = 1;
    for (int it = 0; it < 100; ++it) {
      long double p0 = 1, p1 = z;  // P_0, P_1, then the recurrence up to P_m
      for (std::size_t k = 2; k <= m; ++k) {
        const long double pk = ((2.0L * k - 1) * z * p1 - (k - 1.0L) * p0) / static_cast<long double>(k);
        p0 = p1;
        p1 = pk;
      }
      if (m == 1) p0 = 1, p1 = z;
      dp = static_cast<long double>(m) * (z * p1 - p0) / (z * z - 1);
      const long double dz = p1 / dp;
      z -= dz;
      if (std::abs(dz) < 1e-19L) break;
    }
    // node z in (-1, 1) (descending in i) and its weight 2 / ((1 - z^2) P_m'(z)^2), halved for [0, 1]
    const long double wi = 1.0L / ((1 - z * z) * dp * dp);
    x[m - 1 - i] = (1 + z) / 2, w[m - 1 - i] = wi;
    x[i] = (1 - z) / 2, w[i] = wi;
  }
}

/// Sample ratios and weights of a rule with m partitions (Gauss-Legendre: m nodes).
template <class R>
void riemann_samples(std::size_t m, riemann_rule rule, std::vector<R>& t, std::vector<R>& w) {
  t.clear();
  w.clear();
  const R M = R(m);
  if (rule == riemann_rule::gauss_legendre) {
    std::vector<long double> x, ww;
    gauss_legendre_nodes(m, x, ww);
    for (std::size_t q = 0; q < m; ++q) t.push_back(R(double(x[q]))), w.push_back(R(double(ww[q])));
  } else if (rule == riemann_rule::left)
    for (std::size_t q = 0; q < m; ++q) t.push_back(R(q) / M), w.push_back(R(1) / M);
  else if (rule == riemann_rule::right)
    for (std::size_t q = 1; q <= m; ++q) t.push_back(R(q) / M), w.push_back(R(1) / M);
  else if (rule == riemann_rule::middle)
    for (std::size_t q = 0; q < m; ++q) t.push_back((R(2 * q + 1)) / (R(2) * M)), w.push_back(R(1) / M);
  else
    for (std::size_t q = 0; q <= m; ++q)
      t.push_back(R(q) / M), w.push_back((q == 0 || q == m) ? R(1) / (R(2) * M) : R(1) / M);
}
}  // namespace detail

/// Riemann IG with the network's own gradients at the m (or m + 1) sample points.
template <class S = double, class Net, class EX, class EB>
std::vector<S> riemann_ig(const Net& net, const EX& x_in, const EB& b_in, std::size_t k, std::size_t m, riemann_rule rule) {
  if (m == 0) throw value_error("riemann_ig: m must be at least 1");
  const auto x = detail::to_values<S>(x_in), b = detail::to_values<S>(b_in);
  if (x.size() != b.size()) throw shape_error(detail::concat("riemann_ig: x has ", x.size(), " elements, the baseline ", b.size()));
  std::vector<double> t, w;
  detail::riemann_samples(m, rule, t, w);
  const std::size_t di = x.size(), n = t.size();
  std::vector<S> X(n * di);
  for (std::size_t q = 0; q < n; ++q)
    for (std::size_t i = 0; i < di; ++i) X[q * di + i] = b[i] + S(t[q]) * (x[i] - b[i]);
  const auto g = input_gradients<S>(net, X, n, k);
  std::vector<S> ig(di, S(0));
  for (std::size_t q = 0; q < n; ++q)
    for (std::size_t i = 0; i < di; ++i) ig[i] += S(w[q]) * g[q * di + i];
  for (std::size_t i = 0; i < di; ++i) ig[i] *= x[i] - b[i];
  return ig;
}

/// Riemann IG from the exact pieces' gradients (see the header comment).
template <class S, class R>
std::vector<S> riemann_from_pieces(const ig_result<S, R>& ig, std::size_t m, riemann_rule rule) {
  if (m == 0) throw value_error("riemann_from_pieces: m must be at least 1");
  std::vector<R> t, w;
  detail::riemann_samples(m, rule, t, w);
  const auto& L = ig.line;
  const std::size_t di = L.from.size();
  std::vector<S> acc(di, S(0));
  std::size_t j = 0;
  const std::size_t np = L.pieces();
  S wsum = S(0);
  std::size_t cur = 0;
  auto flush = [&](std::size_t piece) {
    if (wsum == S(0)) return;
    const S* g = ig.gradients.data() + piece * di;
    for (std::size_t i = 0; i < di; ++i) acc[i] += wsum * g[i];
    wsum = S(0);
  };
  for (std::size_t q = 0; q < t.size(); ++q) {
    while (j + 1 < np && !(t[q] < L.t[j + 1])) ++j;
    if (j != cur) flush(cur), cur = j;
    wsum += S(w[q]);
  }
  flush(cur);
  for (std::size_t i = 0; i < di; ++i) acc[i] *= L.to[i] - L.from[i];
  return acc;
}

/// Mean over features of |approx - exact| / |exact + 1e-11|.
template <class S>
double ig_relative_error(const std::vector<S>& approx, const std::vector<S>& exact) {
  NNLENS_EXPECTS(approx.size() == exact.size());
  if (exact.empty()) return 0;
  double s = 0;
  for (std::size_t i = 0; i < exact.size(); ++i) s += std::abs(double(approx[i]) - double(exact[i])) / std::abs(double(exact[i]) + 1e-11);
  return s / double(exact.size());
}

/// The samples-to-reach protocol on any source of approximations: approx(m) gives the attributions
/// with m partitions (riemann_from_pieces, or exact_ig_stream's sums).  Returns samples.
template <class S, class Approx>
std::optional<std::size_t> samples_to_reach_with(const std::vector<S>& exact, Approx&& approx, riemann_rule rule,
                                                 double tol = 0.05, std::size_t max_partitions = 1006,
                                                 std::size_t run = 5) {
  std::size_t streak = 0;
  for (std::size_t m = 1; m <= max_partitions + run - 1; ++m) {
    if (ig_relative_error(approx(m), exact) < tol) {
      if (++streak == run) {
        const std::size_t n = m - run + 1;
        if (n > max_partitions) return std::nullopt;
        return rule == riemann_rule::trapezoid ? n + 1 : n;
      }
    } else {
      streak = 0;
    }
  }
  return std::nullopt;
}

/// The paper's samples-to-reach protocol (see the header comment).  Returns samples, not partitions.
template <class S, class R>
std::optional<std::size_t> samples_to_reach(const ig_result<S, R>& ig, riemann_rule rule, double tol = 0.05,
                                            std::size_t max_partitions = 1006, std::size_t run = 5) {
  return samples_to_reach_with(
      ig.attributions, [&](std::size_t m) { return riemann_from_pieces(ig, m, rule); }, rule, tol, max_partitions, run);
}

/// The prior-work m~ (see the header comment); nullopt when no m in [lo, hi] reaches it.
template <class S, class R>
std::optional<std::size_t> m_tilde(const ig_result<S, R>& ig, double tol = 0.01, std::size_t lo = 20, std::size_t hi = 1000) {
  const double delta = double(ig.delta);
  for (std::size_t m = lo; m <= hi; ++m) {
    const auto a = riemann_from_pieces(ig, m, riemann_rule::left);
    double s = 0;
    for (const auto& v : a) s += double(v);
    if (std::abs(s - delta) < tol * std::abs(delta)) return m;
  }
  return std::nullopt;
}

}  // namespace nnlens
