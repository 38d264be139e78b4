// Shared by the layer tests: random data, finite-difference checks of backward (dx and every
// parameter gradient, loss = sum(c * y), central differences), and exact / close comparisons of
// static and run-time networks.  A test header (not a test file: CMake globs *.cpp only).
#pragma once

#include <doctest/doctest.h>

#include <nnlens/nnlens.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

namespace nnlens_test {
using namespace nnlens;

inline std::vector<double> randn(std::size_t n, std::mt19937_64& r, double scale = 1.0) {
  std::normal_distribution<double> d(0, scale);
  std::vector<double> v(n);
  for (auto& x : v) x = d(r);
  return v;
}

/// n samples of per-sample shape s, standard normal: [n, s...].
inline xt::xarray<double> batch_of(std::size_t n, std::vector<std::size_t> s, std::mt19937_64& r) {
  s.insert(s.begin(), n);
  xt::xarray<double> X = xt::xarray<double>::from_shape(s);
  for (auto& v : X) v = randn(1, r)[0];
  return X;
}

/// A layer initialised by its traits' init for input `in` (seeded).
template <class L>
L initialised(shape in, std::uint64_t seed) {
  L l{};
  std::mt19937_64 r(seed);
  layer_traits<L>::init(l, in, r);
  return l;
}

/// A random per-sample shape: rank 1 {2..5} or rank 3 {1..4, 1..4, 1..4}.
[[maybe_unused]] inline shape random_shape(std::mt19937_64& r, bool rank3_allowed = true) {
  std::uniform_int_distribution<std::size_t> d(1, 4);
  if (rank3_allowed && r() % 2) return shape(d(r), d(r), d(r));
  return shape(d(r) + 1);
}

struct forward_result {
  shape out;
  std::vector<double> y, cache;
};

/// One batched forward pass through a layer's traits, with (training) or without (inference)
/// a cache.  Outputs, caches and scratch start as NaN so that unwritten or undefined reads show.
template <class L>
forward_result run_forward(const L& l, shape in, std::size_t batch, const std::vector<double>& x, bool keep_cache) {
  using Tr = layer_traits<L>;
  forward_result r;
  r.out = Tr::output_shape(l, in);
  r.y.assign(batch * r.out.size(), std::nan(""));
  r.cache.assign(batch * Tr::cache_size(&l, in, r.out), std::nan(""));
  std::vector<double> scratch(Tr::scratch_size(&l, in, r.out, batch), std::nan(""));
  Tr::forward(l, forward_args<double>{in, r.out, batch, x.data(), r.y.data(), keep_cache ? r.cache.data() : nullptr,
                                      scratch.data()});
  return r;
}

template <class L>
void zero_parameters(L& l) {
  if constexpr (HasParameters<L>)
    for (auto s : layer_traits<L>::parameters(l)) std::fill(s.begin(), s.end(), 0.0);
}

template <class L>
std::vector<std::vector<double>> parameter_values(L& l) {
  std::vector<std::vector<double>> v;
  if constexpr (HasParameters<L>)
    for (auto s : layer_traits<L>::parameters(l)) v.emplace_back(s.begin(), s.end());
  return v;
}

/// backward (dx and every parameter gradient) against central differences of loss = sum(c * y),
/// h = 1e-6, relative tolerance 1e-6.  Also: the inference forward (no cache) gives the same
/// output bitwise; dx == nullptr gives the same parameter gradients; grad == nullptr the same dx.
template <class L>
void check_backward(const L& l, shape in, std::size_t batch, const std::vector<double>& x, std::mt19937_64& rng) {
  using Tr = layer_traits<L>;
  const auto f = run_forward(l, in, batch, x, true);
  const auto inf = run_forward(l, in, batch, x, false);
  REQUIRE(inf.y.size() == f.y.size());
  for (std::size_t i = 0; i < f.y.size(); ++i) REQUIRE(inf.y[i] == f.y[i]);
  const auto c = randn(f.y.size(), rng);
  std::vector<double> dx(x.size(), std::nan("")), scratch(Tr::scratch_size(&l, in, f.out, batch), std::nan(""));
  L g = l;
  zero_parameters(g);
  Tr::backward(l, backward_args<double>{in, f.out, batch, x.data(), f.y.data(), c.data(), f.cache.data(), dx.data(), scratch.data()},
               &g);
  auto loss = [&](const L& ll, const std::vector<double>& xx) {
    const auto r = run_forward(ll, in, batch, xx, false);
    double s = 0;
    for (std::size_t i = 0; i < r.y.size(); ++i) s += c[i] * r.y[i];
    return s;
  };
  const double h = 1e-6;
  for (std::size_t i = 0; i < x.size(); ++i) {
    auto xp = x, xm = x;
    xp[i] += h;
    xm[i] -= h;
    const double fd = (loss(l, xp) - loss(l, xm)) / (2 * h);
    INFO("dx[", i, "] of ", Tr::name, " in ", in.str(), " batch ", batch);
    CHECK(dx[i] == doctest::Approx(fd).epsilon(1e-6));
  }
  if constexpr (HasParameters<L>) {
    L p = l;
    auto ps = Tr::parameters(p);
    const auto gs = parameter_values(g);
    REQUIRE(ps.size() == gs.size());
    for (std::size_t k = 0; k < ps.size(); ++k) {
      REQUIRE(ps[k].size() == gs[k].size());
      for (std::size_t i = 0; i < ps[k].size(); ++i) {
        const double w = ps[k][i];
        ps[k][i] = w + h;
        const double lp = loss(p, x);
        ps[k][i] = w - h;
        const double lm = loss(p, x);
        ps[k][i] = w;
        INFO("parameter ", k, " element ", i, " of ", Tr::name, " in ", in.str(), " batch ", batch);
        CHECK(gs[k][i] == doctest::Approx((lp - lm) / (2 * h)).epsilon(1e-6));
      }
    }
    L g2 = l;
    zero_parameters(g2);
    Tr::backward(l, backward_args<double>{in, f.out, batch, x.data(), f.y.data(), c.data(), f.cache.data(), nullptr, scratch.data()},
                 &g2);
    CHECK(parameter_values(g2) == gs);
  }
  std::vector<double> dx2(x.size(), std::nan(""));
  Tr::backward(l, backward_args<double>{in, f.out, batch, x.data(), f.y.data(), c.data(), f.cache.data(), dx2.data(), scratch.data()},
               nullptr);
  CHECK(dx2 == dx);
}

/// Exact comparison of two [batch, ...] outputs (static vs dynamic networks run the same code).
template <class A, class B>
void check_bitwise(const A& a, const B& b) {
  REQUIRE(a.size() == b.size());
  REQUIRE(a.shape() == b.shape());
  std::size_t diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) diff += !(a.data()[i] == b.data()[i]);
  CHECK(diff == 0);
}

/// Gradients of the static and the run-time form: the same code, but with compile-time shapes g++
/// -O3 may vectorise a reduction loop differently and contract a*b+c into an FMA in one form and
/// not the other (seen for BatchNorm's dgamma: 1 ulp), so gradients are compared to 1e-12.
template <class A, class B>
void check_close(const A& a, const B& b) {
  REQUIRE(a.size() == b.size());
  std::size_t bad = 0;
  for (std::size_t i = 0; i < a.size(); ++i) bad += !(a[i] == b[i] || std::abs(a[i] - b[i]) <= 1e-12 * std::max(std::abs(a[i]), std::abs(b[i])));
  CHECK(bad == 0);
}

}  // namespace nnlens_test
