// tests/thrust/thrust_test_util.hpp -- helpers shared by the thrust test files (test_thrust.cpp,
// test_thrust_elementwise.cpp, test_thrust_exactline.cpp): seeded random inputs and the
// differences between a host (execution::seq) result and the device's.
//
//   random_x<T = float>(n, s, seed, lo, hi)   [n, s...] uniform in [lo, hi), std::mt19937_64(seed)
//   random_rows(n, d, seed, lo, hi)           n rows of d doubles, the same way (ExactLine segments)
//   rel_diff(a, b)                            max |a - b| / (1 + max |a|)
//   bit_identical(a, b)                       every element bit for bit (-0 and +0 differ)
//   profile_diff(h, d)                        CHECKs samples, grain, fingerprint, names; returns the
//                                             worst |h - d| / (1 + max |h| of the tensor) of the sums
//   relevance_diff(net, x, pol)               the worst rel_diff of relevance() over lrp_rules and
//                                             every layer stop (lrp_input included)
//   centroid_diff(h, d)                       REQUIREs the same number of neurons and clusters; returns
//                                             the worst |h - d| / (1 + |h|) of two IDCs' centroids
//   check_same_lines(h, d)                    CHECKs the same errors, pieces, stats, shapes and
//                                             endpoints, ratios within 1e-9, values within 1e-6 of
//                                             max(1, max |h|); returns {worst ratio difference, pieces}
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include <xtensor/xarray.hpp>

#include <nnlens/core/shape.hpp>
#include <nnlens/coverage/lrp.hpp>
#include <nnlens/exactline/line.hpp>
#include <nnlens/nnslicer/profile.hpp>
#include <nnlens/thrust/policy.hpp>
#include <nnlens/thrust/relevance.hpp>

namespace nnlens_thrust_test {

template <class T = float>
xt::xarray<T> random_x(std::size_t n, nnlens::shape s, std::uint64_t seed, T lo = -1, T hi = 1) {
  xt::xarray<T> x = xt::xarray<T>::from_shape(s.with_batch(n));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<T> u(lo, hi);
  for (auto& v : x) v = u(rng);
  return x;
}

using rows = std::vector<std::vector<double>>;

inline rows random_rows(std::size_t n, std::size_t d, std::uint64_t seed, double lo = -1, double hi = 1) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  rows r(n, std::vector<double>(d));
  for (auto& x : r)
    for (auto& v : x) v = u(rng);
  return r;
}

/// max |a - b| / (1 + max |a|)
template <class A, class B>
double rel_diff(const A& a, const B& b) {
  REQUIRE(a.shape() == b.shape());
  double scale = 0, err = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    scale = std::max(scale, std::abs(double(a.data()[i])));
    err = std::max(err, std::abs(double(a.data()[i]) - double(b.data()[i])));
  }
  return err / (1 + scale);
}

/// Every element bit for bit (so -0 and +0 differ).
template <class T>
bool bit_identical(const xt::xarray<T>& a, const xt::xarray<T>& b) {
  if (a.shape() != b.shape()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(a.data() + i, b.data() + i, sizeof(T)) != 0) return false;
  return true;
}

inline double profile_diff(const nnlens::profile& h, const nnlens::profile& d) {
  CHECK(h.samples == d.samples);
  CHECK(h.grain == d.grain);
  CHECK(h.fingerprint == d.fingerprint);
  CHECK(h.names == d.names);
  REQUIRE(h.sums.size() == d.sums.size());
  double worst = 0;
  for (std::size_t a = 0; a < h.sums.size(); ++a) {
    REQUIRE(h.sums[a].size() == d.sums[a].size());
    double scale = 0;
    for (double v : h.sums[a]) scale = std::max(scale, std::abs(v));
    for (std::size_t k = 0; k < h.sums[a].size(); ++k)
      worst = std::max(worst, std::abs(h.sums[a][k] - d.sums[a][k]) / (1 + scale));
  }
  return worst;
}

inline const nnlens::lrp_options lrp_rules[] = {
    {},
    {.rule = nnlens::lrp_rule::epsilon, .epsilon = 0.01, .bias_redistribution = true},
    {.rule = nnlens::lrp_rule::zplus},
    {.rule = nnlens::lrp_rule::alpha_beta},
};

/// Every rule of lrp_rules and every layer stop; the worst rel_diff.
template <class Net, class X>
double relevance_diff(const Net& net, const X& x, const nnlens::thrust_policy& pol = {}) {
  using nnlens::execution::seq, nnlens::lrp_input;
  double worst = 0;
  for (const auto& o : lrp_rules) {
    worst = std::max(worst, rel_diff(relevance(seq, net, x, lrp_input, o), relevance(pol, net, x, lrp_input, o)));
    for (std::size_t l = 0; l < nnlens::layer_count(net); ++l)
      worst = std::max(worst, rel_diff(relevance(seq, net, x, l, o), relevance(pol, net, x, l, o)));
  }
  return worst;
}

struct line_diff {
  double worst = 0;        // the largest |t_host - t_device|
  std::size_t pieces = 0;  // pieces of all segments
};

/// Host and device ExactLine: same errors, pieces, stats, shapes and endpoints; ratios within 1e-9,
/// values within 1e-6 relative.
template <class S>
line_diff check_same_lines(const std::vector<nnlens::line_result<S>>& h, const std::vector<nnlens::line_result<S>>& d) {
  REQUIRE(h.size() == d.size());
  line_diff r;
  for (std::size_t i = 0; i < h.size(); ++i) {
    CAPTURE(i);
    CHECK(h[i].error == d[i].error);
    REQUIRE(h[i].t.size() == d[i].t.size());
    CHECK(h[i].stats.points == d[i].stats.points);
    CHECK(h[i].stats.merged == d[i].stats.merged);
    CHECK(h[i].input_shape == d[i].input_shape);
    CHECK(h[i].output_shape == d[i].output_shape);
    CHECK(h[i].from == d[i].from);
    CHECK(h[i].to == d[i].to);
    for (std::size_t j = 0; j < h[i].t.size(); ++j) r.worst = std::max(r.worst, std::abs(double(h[i].t[j] - d[i].t[j])));
    REQUIRE(h[i].values.size() == d[i].values.size());
    double scale = 0, err = 0;
    for (std::size_t j = 0; j < h[i].values.size(); ++j) {
      scale = std::max(scale, std::abs(double(h[i].values[j])));
      err = std::max(err, std::abs(double(h[i].values[j] - d[i].values[j])));
    }
    CHECK(err <= 1e-6 * std::max(1.0, scale));
    if (!h[i].t.empty()) r.pieces += h[i].t.size() - 1;
  }
  CHECK(r.worst <= 1e-9);
  return r;
}

/// The worst relative difference of two IDC preparations' centroids (any type with centroids()).
template <class Idc>
double centroid_diff(const Idc& h, const Idc& d) {
  REQUIRE(h.centroids().size() == d.centroids().size());
  double worst = 0;
  for (std::size_t q = 0; q < h.centroids().size(); ++q) {
    REQUIRE(h.centroids()[q].size() == d.centroids()[q].size());
    for (std::size_t k = 0; k < h.centroids()[q].size(); ++k)
      worst = std::max(worst, std::abs(h.centroids()[q][k] - d.centroids()[q][k]) / (1 + std::abs(h.centroids()[q][k])));
  }
  return worst;
}

}  // namespace nnlens_thrust_test
