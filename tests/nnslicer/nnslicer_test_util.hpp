// Helpers shared by the NNSlicer tests (tests/nnslicer/*.cpp): networks from hand-written matrices,
// datasets from row lists, table comparisons.
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <initializer_list>
#include <random>
#include <string>
#include <vector>

#include <nnlens/nnlens.hpp>

#include <xtensor/xview.hpp>

namespace doctest {
template <>
struct StringMaker<std::vector<std::int64_t>> {
  static String convert(const std::vector<std::int64_t>& v) {
    std::string s = "{";
    for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
    return (s + "}").c_str();
  }
};
template <>
struct StringMaker<std::vector<std::vector<std::int64_t>>> {
  static String convert(const std::vector<std::vector<std::int64_t>>& v) {
    String s = "{";
    for (std::size_t i = 0; i < v.size(); ++i) s += String(i ? ", " : "") + StringMaker<std::vector<std::int64_t>>::convert(v[i]);
    return s + "}";
  }
};
}  // namespace doctest

namespace slicetest {

using namespace nnlens;
using I64 = std::vector<std::int64_t>;

/// Dense<Out, double> for y = A x + b in the spec's convention (A: out x in); nnlens stores W = A^T.
template <std::size_t Out>
Dense<Out, double> dense_A(const std::vector<std::vector<double>>& A, std::vector<double> b = {}) {
  Dense<Out, double> d;
  const std::size_t in = A.at(0).size();
  d.W = tensor<double, 2>::from_shape({in, Out});
  d.b = tensor<double, 1>::from_shape({Out});
  for (std::size_t o = 0; o < Out; ++o) {
    for (std::size_t i = 0; i < in; ++i) d.W(i, o) = A.at(o).at(i);
    d.b(o) = b.empty() ? 0.0 : b.at(o);
  }
  return d;
}

/// A batch [rows, ...] of per-sample shape s from rows of flat values.
inline xt::xarray<double> batch(const std::vector<std::vector<double>>& rows, shape s) {
  std::vector<std::size_t> sh{rows.size()};
  for (std::size_t i = 0; i < s.rank; ++i) sh.push_back(s[i]);
  xt::xarray<double> x = xt::xarray<double>::from_shape(sh);
  std::size_t k = 0;
  for (const auto& r : rows) {
    REQUIRE(r.size() == s.size());
    for (double v : r) x.data()[k++] = v;
  }
  return x;
}
inline xt::xarray<double> batch1(const std::vector<std::vector<double>>& rows) { return batch(rows, shape(rows.at(0).size())); }

inline xt::xarray<double> random_batch(std::size_t n, shape s, std::uint64_t seed, double lo = -1, double hi = 1) {
  std::vector<std::size_t> sh{n};
  for (std::size_t i = 0; i < s.rank; ++i) sh.push_back(s[i]);
  xt::xarray<double> x = xt::xarray<double>::from_shape(sh);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  for (auto& v : x) v = u(rng);
  return x;
}

inline xt::xarray<double> rows_of(const xt::xarray<double>& X, std::size_t b0, std::size_t b1) {
  return xt::view(X, xt::range(b0, b1));
}

inline bool tables_equal(const contrib_table& a, const contrib_table& b) {
  return a.neurons == b.neurons && a.synapses == b.synapses && a.samples == b.samples;
}

inline std::size_t nonzero(const I64& v) {
  std::size_t n = 0;
  for (auto x : v) n += x != 0;
  return n;
}

}  // namespace slicetest
