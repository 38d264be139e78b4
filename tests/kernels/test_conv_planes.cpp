// kernels::conv_planes (a convolution as an implicit GEMM over zero-padded planes) gives
// kernels::conv_gemm's bits, and agrees with a naive convolution in long double: odd channel
// counts (not a multiple of the vectors or of the tile's rows), several k blocks, asymmetric
// padding, dilation, rectangular kernels, no padding, strides 2 and 3, batch 1 and several
// samples, column ranges (threads sharing one convolution), and when it takes the geometry.
#include <doctest/doctest.h>

#include <nnlens/kernels/conv_gemm.hpp>
#include <nnlens/kernels/conv_planes.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace {

using nnlens::conv_geometry;

struct planes_case {
  std::size_t ns, C, H, W, O;
  conv_geometry g;
};

template <class T>
struct planes_run {
  std::vector<T> x, w, b, gemm, planes;
  std::size_t in_n = 0, out_n = 0, P = 0, OH = 0, OW = 0;
};

/// Both kernels on seeded inputs; the samples at strides larger than one sample's (as a group's).
template <class T>
planes_run<T> run_both(const planes_case& c, std::mt19937& r) {
  using namespace nnlens::kernels;
  planes_run<T> o;
  const auto& g = c.g;
  o.OH = g.out_h(c.H);
  o.OW = g.out_w(c.W);
  o.P = o.OH * o.OW;
  const std::size_t K = c.C * g.kh * g.kw;
  o.in_n = c.C * c.H * c.W + 3;
  o.out_n = c.O * o.P + 5;
  std::uniform_real_distribution<double> u(-1, 1);
  o.x.resize(c.ns * o.in_n);
  o.w.resize(c.O * K);
  o.b.resize(c.O);
  for (auto& v : o.x) v = T(u(r));
  for (auto& v : o.w) v = T(u(r));
  for (auto& v : o.b) v = T(u(r));
  const T guard = std::numeric_limits<T>::quiet_NaN();
  o.gemm.assign(c.ns * o.out_n, guard);
  o.planes.assign(c.ns * o.out_n, guard);
  std::vector<T> wg(conv_gemm_scratch<T>(c.ns, o.P, c.O, K, g.kh * g.kw));
  conv_gemm(o.x.data(), o.in_n, c.ns, c.C, c.H, c.W, g, o.OH, o.OW, o.w.data(), c.O, o.b.data(), o.gemm.data(), o.out_n,
            wg.data());
  // scratch exactly as large as asked for, misaligned by one element
  std::vector<T> wp(conv_planes_scratch<T>(c.ns, c.C, c.H, c.W, g, o.OH, c.O) + 1);
  conv_planes(o.x.data(), o.in_n, c.ns, c.C, c.H, c.W, g, o.OH, o.OW, o.w.data(), c.O, o.b.data(), o.planes.data(),
              o.out_n, wp.data() + 1);
  return o;
}

bool same_bits_nan(const void* a, const void* b, std::size_t bytes) { return std::memcmp(a, b, bytes) == 0; }

const planes_case planes_cases[] = {
    {1, 3, 17, 17, 5, conv_geometry{.kh = 3, .pad_top = 1}},             // batch 1, few channels
    {2, 13, 20, 23, 21, conv_geometry{.kh = 3, .pad_top = 1}},           // odd C and O, rectangular
    {3, 37, 16, 16, 19, conv_geometry{.kh = 3, .pad_top = 1}},           // K = 333: two k blocks
    {1, 64, 28, 28, 24, conv_geometry{.kh = 3, .pad_top = 1}},           // K = 576: three k blocks
    {2, 5, 19, 21, 9, conv_geometry{.kh = 5, .pad_top = 2}},             // 5x5
    {2, 4, 24, 24, 7, conv_geometry{.kh = 3, .pad_top = 2, .dilation_h = 2}},  // dilated
    {1, 6, 18, 22, 10, conv_geometry{.kh = 3, .pad_top = 0}},            // no padding
    {2, 7, 20, 18, 11,
     conv_geometry{.kh = 3, .kw = 3, .pad_top = 0, .pad_left = 1, .pad_bottom = 2, .pad_right = 1}},  // asymmetric
    {2, 9, 17, 40, 12, conv_geometry{.kh = 1, .kw = 7, .pad_top = 0, .pad_left = 3}},  // 1x7, as inception's
    {3, 8, 33, 16, 16, conv_geometry{.kh = 7, .kw = 1, .pad_top = 3, .pad_left = 0}},  // 7x1
    {2, 6, 31, 29, 10, conv_geometry{.kh = 3, .stride_h = 2, .pad_top = 1}},            // stride 2, odd sizes
    {1, 3, 45, 44, 9, conv_geometry{.kh = 7, .stride_h = 2, .pad_top = 3}},             // a stem's 7x7/2
    {2, 12, 28, 28, 17, conv_geometry{.kh = 1, .stride_h = 2, .pad_top = 0}},           // a shortcut's 1x1/2
    {1, 5, 40, 37, 6, conv_geometry{.kh = 3, .stride_h = 3, .pad_top = 1}},             // stride 3
    {2, 4, 36, 34, 7, conv_geometry{.kh = 3, .stride_h = 2, .stride_w = 1, .pad_top = 2, .dilation_h = 2}},
    {1, 3, 60, 58, 64, conv_geometry{.kh = 7, .pad_top = 3}},  // one k block, several bands per plane
};

}  // namespace

TEST_CASE_TEMPLATE("conv_planes: conv_gemm's bits, and a naive convolution's values", T, float, double) {
  std::mt19937 r(5);
  for (const auto& c : planes_cases) {
    const auto& g = c.g;
    CAPTURE(c.ns);
    CAPTURE(c.C);
    CAPTURE(c.H);
    CAPTURE(c.W);
    CAPTURE(c.O);
    CAPTURE(g.kh);
    CAPTURE(g.kw);
    const planes_run<T> o = run_both<T>(c, r);
    CHECK(same_bits_nan(o.gemm.data(), o.planes.data(), o.gemm.size() * sizeof(T)));  // the gaps stay NaN too
    double worst = 0;
    for (std::size_t s = 0; s < c.ns; ++s)
      for (std::size_t oc = 0; oc < c.O; ++oc)
        for (std::size_t oh = 0; oh < o.OH; ++oh)
          for (std::size_t ow = 0; ow < o.OW; ++ow) {
            long double ref = o.b[oc], mag = std::fabs(static_cast<long double>(o.b[oc]));
            for (std::size_t ch = 0; ch < c.C; ++ch)
              for (std::size_t i = 0; i < g.kh; ++i)
                for (std::size_t j = 0; j < g.kw; ++j) {
                  const long ih = long(oh * g.stride_h + i * g.dilation_h) - long(g.pad_top);
                  const long iw = long(ow * g.stride_w + j * g.dilation_w) - long(g.pad_left);
                  if (ih < 0 || iw < 0 || ih >= long(c.H) || iw >= long(c.W)) continue;
                  const long double p = static_cast<long double>(o.w[((oc * c.C + ch) * g.kh + i) * g.kw + j]) *
                                        o.x[s * o.in_n + (ch * c.H + std::size_t(ih)) * c.W + std::size_t(iw)];
                  ref += p;
                  mag += std::fabs(p);
                }
            const long double got = o.planes[s * o.out_n + oc * o.P + oh * o.OW + ow];
            worst = std::max(worst, double(std::fabs(got - ref) / (mag + 1e-30L)));
          }
    // relative to the sum of magnitudes: a few units in the last place of T
    CHECK(worst < 8 * std::numeric_limits<T>::epsilon());
  }
}

TEST_CASE_TEMPLATE("conv_planes: any column range gives the whole call's bits and nothing outside it", T, float,
                   double) {
  using namespace nnlens::kernels;
  std::mt19937 r(7);
  for (const auto& c : {planes_case{3, 11, 18, 19, 13, conv_geometry{.kh = 3, .pad_top = 1}},
                        planes_case{1, 5, 30, 30, 9, conv_geometry{.kh = 5, .pad_top = 2}},
                        planes_case{2, 2, 50, 47, 200, conv_geometry{.kh = 3, .stride_h = 2, .pad_top = 1}}}) {  // bands
    const planes_run<T> o = run_both<T>(c, r);
    const std::size_t N = c.ns * o.P;
    std::vector<T> wp(conv_planes_scratch<T>(c.ns, c.C, c.H, c.W, c.g, o.OH, c.O));
    for (std::size_t parts : {2, 3, 7}) {
      CAPTURE(parts);
      std::vector<T> split(o.planes.size(), std::numeric_limits<T>::quiet_NaN());
      for (std::size_t k = 0; k < parts; ++k) {
        const std::size_t lo = N * k / parts, hi = N * (k + 1) / parts;  // any bounds, not whole tiles
        const std::vector<T> before = split;
        conv_planes(o.x.data(), o.in_n, c.ns, c.C, c.H, c.W, c.g, o.OH, o.OW, o.w.data(), c.O, o.b.data(),
                    split.data(), o.out_n, wp.data(), lo, hi);
        bool outside = true;
        for (std::size_t s = 0; s < c.ns; ++s)
          for (std::size_t oc = 0; oc < c.O; ++oc)
            for (std::size_t q = 0; q < o.P; ++q) {
              const std::size_t col = s * o.P + q, e = s * o.out_n + oc * o.P + q;
              if (col < lo || col >= hi) outside = outside && same_bits_nan(&before[e], &split[e], sizeof(T));
            }
        CHECK(outside);
      }
      CHECK(same_bits_nan(split.data(), o.planes.data(), split.size() * sizeof(T)));
    }
  }
}

TEST_CASE("conv_planes: takes kernels larger than 1x1 whose virtual outputs are few") {
  using nnlens::kernels::conv_planes_takes;
  const conv_geometry k3{.kh = 3, .pad_top = 1}, k3s2{.kh = 3, .stride_h = 2, .pad_top = 1};
  CHECK(conv_planes_takes(k3, 56, 56));
  CHECK(conv_planes_takes(k3, 14, 14));
  CHECK_FALSE(conv_planes_takes(k3, 7, 7));  // resnet18's last stage: 63 virtual outputs of 49 rounded to 96
  CHECK(conv_planes_takes(k3s2, 56, 56));
  CHECK_FALSE(conv_planes_takes(k3s2, 14, 14));
  CHECK(conv_planes_takes(conv_geometry{.kh = 7, .stride_h = 2, .pad_top = 3}, 224, 224));
  CHECK_FALSE(conv_planes_takes(conv_geometry{.kh = 3, .stride_h = 5, .pad_top = 1}, 56, 56));
  CHECK_FALSE(conv_planes_takes(conv_geometry{}, 56, 56));                    // 1x1: conv_gemm reads it in place
  CHECK_FALSE(conv_planes_takes(conv_geometry{.kh = 1, .stride_h = 2}, 56, 56));
  CHECK_FALSE(conv_planes_takes(conv_geometry{.kh = 1, .kw = 7, .pad_top = 0, .pad_left = 3}, 17, 17));
  CHECK(conv_planes_takes(conv_geometry{.kh = 1, .kw = 7, .pad_top = 0, .pad_left = 3}, 40, 40));
  // groups of at least 8 outputs (a tile's rows) up to 2x virtual outputs: regnet's 16-channel
  // groups at 7x7 (96 for 49), not at 4x4 (48 for 16)
  CHECK(conv_planes_takes(conv_geometry{.kh = 3, .pad_top = 1, .groups = 25}, 7, 7, 25, 16));
  CHECK_FALSE(conv_planes_takes(conv_geometry{.kh = 3, .pad_top = 1, .groups = 25}, 4, 4, 25, 16));
  CHECK_FALSE(conv_planes_takes(conv_geometry{.kh = 3, .pad_top = 1, .groups = 32}, 7, 7, 32, 4));
  CHECK_FALSE(conv_planes_takes(conv_geometry{.kh = 1, .groups = 25}, 7, 7, 25, 16));
}
