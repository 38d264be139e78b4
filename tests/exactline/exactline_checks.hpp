// Shared checks of the ExactLine suites (spec §5 properties P1-P8), for any network form in double.
#pragma once

#include <doctest/doctest.h>

#include <nnlens/exactline.hpp>
#include <nnlens/nnlens.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <random>
#include <vector>

namespace el_test {

using namespace nnlens;

/// The small convolutional test networks several suites share: a CNN with a max pool (a fused
/// ReLU + MaxPool2D), and a residual CNN (an identity and a strided 1x1 shortcut).
template <class S>
using PoolCnn = Sequential<Input<2, 8, 8>, Conv2D<4, 3, 1, 1, 1, 1, S>, ReLU, MaxPool2D<2>, Conv2D<6, 3, 1, 1, 1, 1, S>, ReLU,
                           AvgPool2D<2>, Flatten, Dense<5, S>>;
template <class S>
using ResidualCnn = Sequential<Input<2, 6, 6>, Conv2D<4, 3, 1, 1, 1, 1, S>, ReLU,
                               Residual<Block<Conv2D<4, 3, 1, 1, 1, 1, S>, ReLU, Conv2D<4, 3, 1, 1, 1, 1, S>>>, ReLU,
                               Residual<Block<Conv2D<6, 3, 2, 1, 1, 1, S>, ReLU, Conv2D<6, 3, 1, 1, 1, 1, S>>,
                                        Block<Conv2D<6, 1, 2, 0, 1, 1, S>>>,
                               ReLU, Flatten, Dense<3, S>>;

/// The same bytes (the same values bit for bit, NaNs and signed zeros included).
template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}
template <class S, class R>
bool same_bits(const line_result<S, R>& a, const line_result<S, R>& b) {
  return same_bits(a.t, b.t) && same_bits(a.values, b.values);
}

/// f at n points (rows of X), with nnlens::forward.
template <class Net>
std::vector<double> eval(const Net& net, const std::vector<double>& X, std::size_t n) {
  const shape in = input_shape_of(net);
  auto x = xt::xarray<double>::from_shape(in.with_batch(n));
  std::copy(X.begin(), X.end(), x.begin());
  const auto y = forward(net, x);
  return std::vector<double>(y.begin(), y.end());
}

inline std::vector<double> random_point(std::size_t n, std::mt19937_64& rng, double lo = -1, double hi = 1) {
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> x(n);
  for (auto& v : x) v = u(rng);
  return x;
}

/// P1: 0 = t0 < ... < tk = 1, values (k+1) x out.
template <class S, class R>
void check_structure(const line_result<S, R>& r) {
  REQUIRE(r.t.size() >= 2);
  CHECK(r.t.front() == R(0));
  CHECK(r.t.back() == R(1));
  bool inc = true;
  for (std::size_t j = 0; j + 1 < r.t.size(); ++j) inc = inc && r.t[j] < r.t[j + 1];
  CHECK(inc);
  CHECK(r.values.size() == r.t.size() * r.out_size());
  CHECK(r.error.empty());
}

/// max |y| over a line's values (the scale of relative tolerances)
template <class S, class R>
double value_scale(const line_result<S, R>& r) {
  double m = 1;
  for (const auto& v : r.values) m = std::max(m, std::abs(double(v)));
  return m;
}

/// P2: f at P(t_j + alpha dt) equals the interpolation, for `per_piece` alphas per piece (random,
/// or the midpoint when per_piece == 0), and f at every t_j equals the reported value.
template <class Net>
void check_affinity(const Net& net, const line_result<double, double>& r, std::mt19937_64& rng, double rel,
                    int per_piece = 1) {
  const std::size_t k = r.pieces(), di = r.from.size(), dout = r.out_size();
  std::uniform_real_distribution<double> ua(0.05, 0.95);
  std::vector<double> ts, X;
  const int m = std::max(per_piece, 1);
  for (std::size_t j = 0; j < k; ++j)
    for (int q = 0; q < m; ++q) {
      const double a = per_piece == 0 ? 0.5 : ua(rng);
      ts.push_back(r.t[j] + a * (r.t[j + 1] - r.t[j]));
    }
  for (double tt : r.t) ts.push_back(tt);
  for (double tt : ts) {
    const auto p = r.point(tt);
    X.insert(X.end(), p.begin(), p.end());
  }
  const auto Y = eval(net, X, ts.size());
  const double tol = rel * value_scale(r);
  double worst = 0;
  for (std::size_t i = 0; i < ts.size(); ++i) {
    const auto want = i < k * m ? r.eval(ts[i]) : std::vector<double>(r.output(i - k * m).begin(), r.output(i - k * m).end());
    for (std::size_t o = 0; o < dout; ++o) worst = std::max(worst, std::abs(Y[i * dout + o] - want[o]));
  }
  CHECK(worst <= tol);
  (void)di;
}

/// P3: the gradient of output o is the same at two interior points of every piece (for pieces not
/// too short for the two points to be distinct in double).
template <class Net>
void check_gradient_constancy(const Net& net, const line_result<double, double>& r, std::size_t o, double rel) {
  const std::size_t k = r.pieces(), di = r.from.size();
  std::vector<double> X;
  for (std::size_t j = 0; j < k; ++j)
    for (double a : {0.2, 0.8}) {
      const auto p = r.point(r.t[j] + a * (r.t[j + 1] - r.t[j]));
      X.insert(X.end(), p.begin(), p.end());
    }
  const auto g = input_gradients<double>(net, X, 2 * k, o);
  double scale = 1e-300, worst = 0;
  for (double v : g) scale = std::max(scale, std::abs(v));
  for (std::size_t j = 0; j < k; ++j)
    for (std::size_t i = 0; i < di; ++i) worst = std::max(worst, std::abs(g[(2 * j) * di + i] - g[(2 * j + 1) * di + i]));
  CHECK(worst <= rel * scale);
}

/// P5: sum of exact IG = F(x) - F(x').
template <class Net>
void check_completeness(const Net& net, const std::vector<double>& x, const std::vector<double>& b, std::size_t o,
                        double rel) {
  const auto ig = exact_ig(net, x, b, o);
  double s = 0;
  for (double v : ig.attributions) s += v;
  const auto y = eval(net, x, 1), y0 = eval(net, b, 1);
  const double delta = y[o] - y0[o];
  CHECK(std::abs(ig.delta - delta) <= rel * (1 + std::abs(delta)));
  CHECK(std::abs(s - delta) <= rel * (1 + std::abs(delta)));
  CHECK(std::abs(ig.sum - s) <= 1e-12 * (1 + std::abs(s)));
}

/// Every break of `a` is within tol of a break of `b` and vice versa.
inline bool same_breaks(const std::vector<double>& a, const std::vector<double>& b, double tol) {
  auto covered = [&](const std::vector<double>& x, const std::vector<double>& y) {
    for (double v : x) {
      auto it = std::lower_bound(y.begin(), y.end(), v - tol);
      if (it == y.end() || *it > v + tol) return false;
    }
    return true;
  };
  return covered(a, b) && covered(b, a);
}

/// P6: split at tau; the concatenation of the two rescaled partitions is the whole one (+ tau).
template <class Net>
void check_refinement(const Net& net, const line_result<double, double>& r, double tau, double tol) {
  const auto X = r.point(tau);
  const auto a = exact_line(net, r.from, X), b = exact_line(net, X, r.to);
  std::vector<double> joined;
  for (double t : a.t) joined.push_back(tau * t);
  for (std::size_t i = 1; i < b.t.size(); ++i) joined.push_back(tau + (1 - tau) * b.t[i]);
  std::vector<double> whole = r.t;
  whole.insert(std::upper_bound(whole.begin(), whole.end(), tau), tau);
  CHECK(same_breaks(joined, whole, tol));
  CHECK(joined.size() == whole.size());
}

/// P7: ExactLine(Q, P) has breaks 1 - t.
template <class Net>
void check_reversal(const Net& net, const line_result<double, double>& r, double tol) {
  const auto b = exact_line(net, r.to, r.from);
  std::vector<double> flipped;
  for (auto it = b.t.rbegin(); it != b.t.rend(); ++it) flipped.push_back(1 - *it);
  CHECK(flipped.size() == r.t.size());
  CHECK(same_breaks(flipped, r.t, tol));
}

/// P8: N + 1 samples along the segment; the pattern of every knot layer (which side of each knot
/// each unit's input lies on, read with forward_trace) changes between two consecutive samples only
/// if a reported break lies between them; f at the samples equals r.eval.  `knots(i)` gives the
/// knots of top-level layer i (empty: not a knot layer).
template <class Net, class Knots>
void check_dense_sampling(const Net& net, const line_result<double, double>& r, std::size_t N, Knots&& knots,
                          double rel) {
  const std::size_t di = r.from.size(), dout = r.out_size();
  trace<double> tr;
  std::vector<unsigned char> prev, cur;
  std::size_t changes = 0, missed = 0;
  double worst = 0;
  const double scale = value_scale(r);
  constexpr std::size_t chunk = 512;
  double t_prev = 0;
  for (std::size_t s0 = 0; s0 <= N; s0 += chunk) {
    const std::size_t nb = std::min(chunk, N + 1 - s0);
    std::vector<double> X(nb * di);
    for (std::size_t q = 0; q < nb; ++q) {
      const auto p = r.point(double(s0 + q) / double(N));
      std::copy(p.begin(), p.end(), X.begin() + std::ptrdiff_t(q * di));
    }
    forward_trace(net, nb, X.data(), tr);
    const std::size_t L = tr.layers();
    for (std::size_t q = 0; q < nb; ++q) {
      const double tq = double(s0 + q) / double(N);
      cur.clear();
      for (std::size_t i = 0; i < L; ++i) {
        const std::vector<double> ks = knots(i);
        if (ks.empty()) continue;
        const std::size_t d = tr.shape_at(i).size();
        auto act = tr.activation(i);
        for (std::size_t e = 0; e < d; ++e) {
          unsigned char side = 0;
          for (double kn : ks) side = (unsigned char)(side * 2 + (act[q * d + e] > kn ? 1 : 0));
          cur.push_back(side);
        }
      }
      auto y = tr.output();
      const auto want = r.eval(tq);
      for (std::size_t o = 0; o < dout; ++o) worst = std::max(worst, std::abs(y[q * dout + o] - want[o]));
      if (!prev.empty() && prev != cur) {
        ++changes;
        auto it = std::lower_bound(r.t.begin(), r.t.end(), t_prev - 1e-12);
        if (it == r.t.end() || *it > tq + 1e-12) ++missed;
      }
      prev.swap(cur);
      t_prev = tq;
    }
  }
  CHECK(missed == 0);
  CHECK(worst <= rel * scale);
  MESSAGE("P8: ", changes, " pattern changes between samples, ", r.pieces(), " pieces");
}

}  // namespace el_test

namespace el_test {

/// The knots of every top-level layer (empty for layers that are not element-wise knot layers).
template <class Net>
std::vector<std::vector<double>> knot_table(const Net& net) {
  std::vector<std::vector<double>> t;
  for_each_layer(net, [&](const auto& l, auto, shape, shape) {
    using L = std::decay_t<decltype(l)>;
    std::vector<double> k;
    if constexpr (std::is_same_v<L, ReLU>) k = {0.0};
    if constexpr (std::is_same_v<L, LeakyReLU>) k = {0.0};
    if constexpr (std::is_same_v<L, HardTanh> || std::is_same_v<L, Clamp>) {
      if (std::isfinite(l.lo)) k.push_back(l.lo);
      if (std::isfinite(l.hi)) k.push_back(l.hi);
    }
    t.push_back(k);
  });
  return t;
}

template <class Net>
void check_dense_sampling(const Net& net, const line_result<double, double>& r, std::size_t N, double rel) {
  const auto kt = knot_table(net);
  check_dense_sampling(net, r, N, [&](std::size_t i) { return i < kt.size() ? kt[i] : std::vector<double>{}; }, rel);
}

}  // namespace el_test

namespace el_test {

/// P4 (knot networks without exact coincidences): the patterns at the midpoints of two adjacent
/// pieces differ, i.e. every interior break is a real change of some unit's branch.
template <class Net>
void check_minimality(const Net& net, const line_result<double, double>& r) {
  const auto kt = knot_table(net);
  const std::size_t k = r.pieces(), di = r.from.size();
  std::vector<double> X;
  for (std::size_t j = 0; j < k; ++j) {
    const auto p = r.point((r.t[j] + r.t[j + 1]) / 2);
    X.insert(X.end(), p.begin(), p.end());
  }
  trace<double> tr;
  forward_trace(net, k, X.data(), tr);
  std::vector<std::vector<unsigned char>> pat(k);
  for (std::size_t i = 0; i < tr.layers() && i < kt.size(); ++i) {
    if (kt[i].empty()) continue;
    const std::size_t d = tr.shape_at(i).size();
    auto act = tr.activation(i);
    for (std::size_t j = 0; j < k; ++j)
      for (std::size_t e = 0; e < d; ++e) {
        unsigned char side = 0;
        for (double kn : kt[i]) side = (unsigned char)(side * 2 + (act[j * d + e] > kn ? 1 : 0));
        pat[j].push_back(side);
      }
  }
  std::size_t same = 0;
  for (std::size_t j = 0; j + 1 < k; ++j) same += pat[j] == pat[j + 1];
  CHECK(same == 0);
  (void)di;
}

}  // namespace el_test
