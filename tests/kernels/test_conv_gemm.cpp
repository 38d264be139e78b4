// kernels::conv_gemm (a convolution as one GEMM with im2col in its packing) against a naive
// convolution in long double, on the shapes that take each of its paths: row copies and the gather
// table, the 1x1 planes, tiles that straddle two samples, several k blocks, several column blocks,
// more output channels than one block of rows, strides, dilations and asymmetric padding.
#include <doctest/doctest.h>

#include <nnlens/kernels/conv_gemm.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace {

struct shape_case {
  std::size_t ns, C, H, W, O;
  nnlens::conv_geometry g;
};

std::string describe(const shape_case& c) {
  return "ns=" + std::to_string(c.ns) + " C=" + std::to_string(c.C) + " " + std::to_string(c.H) + "x" +
         std::to_string(c.W) + " O=" + std::to_string(c.O) + " k=" + std::to_string(c.g.kh) + "x" +
         std::to_string(c.g.kw) + " s=" + std::to_string(c.g.stride_h) + "," + std::to_string(c.g.stride_w) +
         " pad=" + std::to_string(c.g.pad_top) + "," + std::to_string(c.g.pad_left) + "," +
         std::to_string(c.g.pad_bottom) + "," + std::to_string(c.g.pad_right) + " d=" + std::to_string(c.g.dilation_h);
}

template <class T>
void check_case(const shape_case& c, std::mt19937& r) {
  using nnlens::kernels::conv_gemm;
  using nnlens::kernels::conv_gemm_scratch;
  const auto& g = c.g;
  const std::size_t OH = g.out_h(c.H), OW = g.out_w(c.W), P = OH * OW, K = c.C * g.kh * g.kw;
  // the samples' inputs and outputs at a stride larger than one sample's, as a group's are
  const std::size_t in_n = c.C * c.H * c.W + 3, out_n = c.O * P + 5;
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<T> x(c.ns * in_n), w(c.O * K), b(c.O);
  for (auto& v : x) v = T(u(r));
  for (auto& v : w) v = T(u(r));
  for (auto& v : b) v = T(u(r));
  const T guard = std::numeric_limits<T>::quiet_NaN();
  std::vector<T> y(c.ns * out_n, guard);
  // scratch exactly as large as asked for, misaligned by one element
  std::vector<T> work(conv_gemm_scratch<T>(c.ns, P, c.O, K, g.kh * g.kw) + 1);
  conv_gemm(x.data(), in_n, c.ns, c.C, c.H, c.W, g, OH, OW, w.data(), c.O, b.data(), y.data(), out_n, work.data() + 1);
  double worst = 0;
  bool gaps_untouched = true;
  for (std::size_t s = 0; s < c.ns; ++s) {
    for (std::size_t e = c.O * P; e < out_n; ++e) gaps_untouched = gaps_untouched && std::isnan(y[s * out_n + e]);
    for (std::size_t o = 0; o < c.O; ++o)
      for (std::size_t oh = 0; oh < OH; ++oh)
        for (std::size_t ow = 0; ow < OW; ++ow) {
          long double ref = b[o], mag = std::fabs(static_cast<long double>(b[o]));
          for (std::size_t ch = 0; ch < c.C; ++ch)
            for (std::size_t i = 0; i < g.kh; ++i)
              for (std::size_t j = 0; j < g.kw; ++j) {
                const long ih = long(oh * g.stride_h + i * g.dilation_h) - long(g.pad_top);
                const long iw = long(ow * g.stride_w + j * g.dilation_w) - long(g.pad_left);
                if (ih < 0 || iw < 0 || ih >= long(c.H) || iw >= long(c.W)) continue;
                const long double p = static_cast<long double>(w[(o * c.C + ch) * g.kh * g.kw + i * g.kw + j]) *
                                      x[s * in_n + (ch * c.H + std::size_t(ih)) * c.W + std::size_t(iw)];
                ref += p;
                mag += std::fabs(p);
              }
          const T got = y[s * out_n + o * P + oh * OW + ow];
          worst = std::max(worst, double(std::fabs(static_cast<long double>(got) - ref) / mag));
        }
  }
  CHECK(gaps_untouched);
  // relative to the sum of |terms|: a few ulps per term's rounding at most
  const double tol = std::is_same_v<T, float> ? 1e-6 : 1e-15;
  CHECK(worst < tol * std::sqrt(double(K) + 1));
}

}  // namespace

TEST_CASE_TEMPLATE("conv_gemm matches the naive convolution on every path", T, float, double) {
  using nnlens::conv_geometry;
  std::mt19937 r(5);
  const std::vector<shape_case> cases{
      // wide rows (row copies), padding 1, one sample; two samples with planes a multiple of 16
      {1, 3, 40, 40, 8, conv_geometry{.kh = 3, .pad_top = 1}},
      {2, 5, 16, 16, 7, conv_geometry{.kh = 3, .pad_top = 1}},
      // short rows (the gather table), 16 samples of 2x2 and 4x4 planes: tiles straddle samples
      {16, 8, 4, 4, 9, conv_geometry{.kh = 3, .stride_h = 2, .pad_top = 1}},
      {16, 6, 2, 2, 5, conv_geometry{.kh = 3, .pad_top = 1}},
      {7, 4, 5, 7, 3, conv_geometry{.kh = 3, .kw = 2, .stride_h = 1, .stride_w = 2, .pad_top = 0, .pad_left = 1, .pad_bottom = 2, .pad_right = 0}},
      // several k blocks (K = 40*9 = 360 > 256) and more output channels than one row block (> 96)
      {3, 40, 6, 6, 100, conv_geometry{.kh = 3, .pad_top = 1}},
      // several column blocks (ns * P = 1600 > 1024 floats, 512 doubles), dilation 2
      {4, 3, 22, 22, 4, conv_geometry{.kh = 3, .pad_top = 2, .dilation_h = 2}},
      // 1x1 unpadded, stride 1: the planes copied; wide and narrow ([C, 1, 1]: squeeze-excitation)
      {3, 10, 20, 30, 12, conv_geometry{}},
      {40, 16, 1, 1, 4, conv_geometry{}},
      // 1x1 strided and 1x1 padded: not planes
      {5, 6, 9, 9, 4, conv_geometry{.kh = 1, .stride_h = 2}},
      {3, 4, 5, 6, 3, conv_geometry{.kh = 1, .pad_top = 1}},
      // a 7x7 stride-2 stem on 3 channels (K = 147 < one k block)
      {2, 3, 33, 33, 6, conv_geometry{.kh = 7, .stride_h = 2, .pad_top = 3}},
      // the kernel larger than the unpadded input: most taps in the padding
      {3, 2, 2, 3, 3, conv_geometry{.kh = 5, .pad_top = 2}},
  };
  for (const auto& c : cases) {
    CAPTURE(describe(c));
    check_case<T>(c, r);
  }
}

TEST_CASE("conv_gemm: every output written once per k block, the same bits for one or several samples") {
  using nnlens::conv_geometry;
  using nnlens::kernels::conv_gemm;
  using nnlens::kernels::conv_gemm_scratch;
  // a sample alone and the same sample among others: each column's sum runs over k in the same
  // blocks, so the bits agree (a network's output for one input does not depend on its batch)
  std::mt19937 r(9);
  std::uniform_real_distribution<float> u(-1, 1);
  const conv_geometry g{.kh = 3, .pad_top = 1};
  const std::size_t C = 33, H = 3, W = 3, O = 11, P = 9, K = C * 9, in_n = C * H * W, out_n = O * P, ns = 13;
  std::vector<float> x(ns * in_n), w(O * K), b(O);
  for (auto& v : x) v = u(r);
  for (auto& v : w) v = u(r);
  for (auto& v : b) v = u(r);
  std::vector<float> all(ns * out_n), one(out_n), work(conv_gemm_scratch<float>(ns, P, O, K, 9));
  conv_gemm(x.data(), in_n, ns, C, H, W, g, H, W, w.data(), O, b.data(), all.data(), out_n, work.data());
  for (std::size_t s = 0; s < ns; ++s) {
    conv_gemm(x.data() + s * in_n, in_n, 1, C, H, W, g, H, W, w.data(), O, b.data(), one.data(), out_n, work.data());
    for (std::size_t e = 0; e < out_n; ++e) REQUIRE(one[e] == all[s * out_n + e]);
  }
}

TEST_CASE_TEMPLATE("conv_gemm: column ranges of whole tiles give the whole call's bits and nothing outside them", T, float, double) {
  using nnlens::conv_geometry;
  using nnlens::kernels::conv_gemm;
  using nnlens::kernels::conv_gemm_scratch;
  // threads share one convolution by column ranges: ranges starting at multiples of the tile
  // width, over planes whose size is not one (tiles straddle samples) and several column blocks
  const std::size_t align = nnlens::kernels::conv_gemm_column_align<T>();
  std::mt19937 r(11);
  std::uniform_real_distribution<double> u(-1, 1);
  struct range_case {
    std::size_t ns, C, H, W, O;
    conv_geometry g;
  };
  for (const auto& c : {range_case{1, 7, 30, 30, 13, conv_geometry{.kh = 3, .pad_top = 1}},
                        range_case{6, 20, 5, 5, 9, conv_geometry{.kh = 3, .pad_top = 1}},
                        range_case{3, 16, 20, 21, 5, conv_geometry{}},
                        range_case{4, 3, 22, 22, 4, conv_geometry{.kh = 3, .pad_top = 2, .dilation_h = 2}}}) {
    const auto& g = c.g;
    const std::size_t OH = g.out_h(c.H), OW = g.out_w(c.W), P = OH * OW, K = c.C * g.kh * g.kw, N = c.ns * P;
    const std::size_t in_n = c.C * c.H * c.W, out_n = c.O * P;
    std::vector<T> x(c.ns * in_n), w(c.O * K), b(c.O);
    for (auto& v : x) v = T(u(r));
    for (auto& v : w) v = T(u(r));
    for (auto& v : b) v = T(u(r));
    std::vector<T> whole(c.ns * out_n), work(conv_gemm_scratch<T>(c.ns, P, c.O, K, g.kh * g.kw));
    conv_gemm(x.data(), in_n, c.ns, c.C, c.H, c.W, g, OH, OW, w.data(), c.O, b.data(), whole.data(), out_n, work.data());
    for (std::size_t parts : {2, 3, 5}) {
      CAPTURE(parts);
      const T guard = std::numeric_limits<T>::quiet_NaN();
      std::vector<T> split(c.ns * out_n, guard);
      for (std::size_t k = 0; k < parts; ++k) {
        const std::size_t lo = N * k / parts / align * align, hi = k + 1 == parts ? N : N * (k + 1) / parts / align * align;
        std::vector<T> before = split;
        conv_gemm(x.data(), in_n, c.ns, c.C, c.H, c.W, g, OH, OW, w.data(), c.O, b.data(), split.data(), out_n,
                  work.data(), lo, hi);
        // nothing outside [lo, hi) changed
        bool outside = true;
        for (std::size_t s = 0; s < c.ns; ++s)
          for (std::size_t o = 0; o < c.O; ++o)
            for (std::size_t q = 0; q < P; ++q) {
              const std::size_t col = s * P + q, e = s * out_n + o * P + q;
              if (col < lo || col >= hi) outside = outside && (std::isnan(before[e]) ? std::isnan(split[e]) : before[e] == split[e]);
            }
        CHECK(outside);
      }
      CHECK(std::memcmp(split.data(), whole.data(), whole.size() * sizeof(T)) == 0);
    }
  }
}
