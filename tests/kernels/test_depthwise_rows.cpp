// kernels::depthwise_conv on wide planes runs row by row (kernels/depthwise_rows.hpp): the bits of
// the plane-by-plane path (a channel multiplier of 2 whose first output per channel has the same
// weights and bias), and a naive convolution's values, at strides 1 and 2, odd widths, asymmetric
// padding, dilation, 3x3, 5x5 and 1x7 kernels.
#include <doctest/doctest.h>

#include <nnlens/kernels/depthwise.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace {
using nnlens::conv_geometry;

template <class T>
void check_rows(std::size_t C, std::size_t H, std::size_t W, conv_geometry g, std::mt19937& r) {
  using namespace nnlens::kernels;
  g.groups = C;
  const std::size_t OH = g.out_h(H), OW = g.out_w(W), taps = g.kh * g.kw;
  REQUIRE(depthwise_by_rows(1, g, OW));
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<T> x(C * H * W), w1(C * taps), b1(C), w2(2 * C * taps), b2(2 * C);
  for (auto& v : x) v = T(u(r));
  for (std::size_t c = 0; c < C; ++c) {
    b1[c] = b2[2 * c] = T(u(r));
    b2[2 * c + 1] = T(u(r));
    for (std::size_t t = 0; t < taps; ++t) {
      w1[c * taps + t] = w2[2 * c * taps + t] = T(u(r));
      w2[(2 * c + 1) * taps + t] = T(u(r));
    }
  }
  std::vector<T> y1(C * OH * OW), y2(2 * C * OH * OW), wt(C * taps);
  std::vector<T> s1(depthwise_scratch(C, H, W, g, 1, OH, OW) + 1), s2(depthwise_scratch(C, H, W, g, 2, OH, OW) + 1);
  depthwise_pack(w1.data(), C, taps, wt.data());
  depthwise_conv(x.data(), C, H, W, g, 1, w1.data(), wt.data(), b1.data(), OH, OW, y1.data(), s1.data());
  depthwise_conv(x.data(), C, H, W, g, 2, w2.data(), wt.data(), b2.data(), OH, OW, y2.data(), s2.data());
  double worst = 0;
  bool same = true;
  const std::size_t P = OH * OW;
  for (std::size_t c = 0; c < C; ++c)
    for (std::size_t q = 0; q < P; ++q) {
      same = same && std::memcmp(&y1[c * P + q], &y2[2 * c * P + q], sizeof(T)) == 0;
      const std::size_t oh = q / OW, ow = q % OW;
      long double ref = b1[c], mag = std::fabs(static_cast<long double>(b1[c]));
      for (std::size_t i = 0; i < g.kh; ++i)
        for (std::size_t j = 0; j < g.kw; ++j) {
          const long ih = long(oh * g.stride_h + i * g.dilation_h) - long(g.pad_top);
          const long iw = long(ow * g.stride_w + j * g.dilation_w) - long(g.pad_left);
          if (ih < 0 || iw < 0 || ih >= long(H) || iw >= long(W)) continue;
          const long double p = static_cast<long double>(w1[c * taps + i * g.kw + j]) * x[(c * H + ih) * W + iw];
          ref += p;
          mag += std::fabs(p);
        }
      worst = std::max(worst, double(std::fabs(y1[c * P + q] - ref) / mag));
    }
  CHECK(same);
  CHECK(worst < 8 * std::numeric_limits<T>::epsilon());
}
}  // namespace

TEST_CASE_TEMPLATE("depthwise_conv by rows: the plane-by-plane path's bits and a naive convolution's values", T, float,
                   double) {
  std::mt19937 r(3);
  check_rows<T>(5, 40, 37, conv_geometry{.kh = 3, .pad_top = 1}, r);
  check_rows<T>(3, 70, 71, conv_geometry{.kh = 3, .stride_h = 2, .pad_top = 1}, r);  // odd width, stride 2
  check_rows<T>(2, 66, 66, conv_geometry{.kh = 5, .stride_h = 2, .pad_top = 2}, r);
  check_rows<T>(2, 33, 35, conv_geometry{.kh = 1, .kw = 7, .pad_top = 0, .pad_left = 3}, r);
  check_rows<T>(3, 36, 38, conv_geometry{.kh = 3, .pad_top = 2, .dilation_h = 2}, r);
  check_rows<T>(2, 34, 40, conv_geometry{.kh = 3, .pad_top = 0, .pad_left = 2, .pad_bottom = 1, .pad_right = 0}, r);
  check_rows<T>(1, 8, 200, conv_geometry{.kh = 3, .stride_h = 1, .stride_w = 2, .pad_top = 1}, r);
  check_rows<T>(2, 32, 34, conv_geometry{.kh = 3, .pad_top = 0}, r);  // no padding: every column interior
}

TEST_CASE("depthwise_conv by rows: wide rows only, stride 1 or 2 along them") {
  using nnlens::kernels::depthwise_by_rows;
  CHECK(depthwise_by_rows(1, conv_geometry{.kh = 3, .pad_top = 1, .groups = 96}, 56));
  CHECK_FALSE(depthwise_by_rows(1, conv_geometry{.kh = 3, .pad_top = 1, .groups = 96}, 28));
  CHECK_FALSE(depthwise_by_rows(2, conv_geometry{.kh = 3, .pad_top = 1, .groups = 96}, 56));
  CHECK_FALSE(depthwise_by_rows(1, conv_geometry{.kh = 3, .stride_h = 3, .pad_top = 1, .groups = 8}, 40));
  CHECK_FALSE(depthwise_by_rows(1, conv_geometry{.kh = 3, .stride_h = 2, .pad_top = 2, .dilation_h = 2}, 40));
}
