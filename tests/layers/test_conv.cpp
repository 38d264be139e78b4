// Conv2D: forward against a naive direct-loop reference over many geometries (strided, padded
// symmetric and asymmetric, dilated, grouped, depthwise, rectangular, 1x1, batch > 1, both GEMM
// chunkings); backward against central finite differences and a naive reference; hand-computed
// cases; static vs DynamicNetwork (bitwise); from_dynamic; shape errors; float vs double; init.
#include <doctest/doctest.h>

#include <nnlens/nnlens.hpp>

#include <cmath>
#include <random>
#include <string>
#include <vector>

using namespace nnlens;

namespace {

using DConv = Conv2DG<dyn, conv_geometry_dyn, double>;

struct conv_case {
  std::size_t N, C, H, W, O;
  conv_geometry g;
};

std::string describe(const conv_case& c) {
  const auto& g = c.g;
  return detail::concat("N", c.N, " C", c.C, " H", c.H, " W", c.W, " O", c.O, " k", g.kh, "x", g.kw, " s", g.stride_h,
                        ",", g.stride_w, " p", g.pad_top, ",", g.pad_left, ",", g.pad_bottom, ",", g.pad_right, " d",
                        g.dilation_h, ",", g.dilation_w, " g", g.groups);
}

std::vector<double> randn(std::size_t n, std::mt19937_64& r, double scale = 1.0) {
  std::normal_distribution<double> d(0, scale);
  std::vector<double> v(n);
  for (auto& x : v) x = d(r);
  return v;
}

DConv make_conv(const conv_case& c, std::mt19937_64& r) {
  DConv l;
  l.geometry = c.g;
  l.W = tensor<double, 4>::from_shape({c.O, c.C / c.g.groups, c.g.kh, c.g.kw});
  l.b = tensor<double, 1>::from_shape({c.O});
  auto w = randn(l.W.size(), r), b = randn(c.O, r);
  std::copy(w.begin(), w.end(), l.W.begin());
  std::copy(b.begin(), b.end(), l.b.begin());
  return l;
}

/// y[n][o][oh][ow] = b[o] + sum_{c in group, i, j} W[o][c'][i][j] x[n][c][oh*sh+i*dh-pt][ow*sw+j*dw-pl]
std::vector<double> naive_conv(const conv_case& c, const DConv& l, const std::vector<double>& x) {
  const auto& g = c.g;
  const std::size_t OH = g.out_h(c.H), OW = g.out_w(c.W), Cg = c.C / g.groups, Og = c.O / g.groups;
  std::vector<double> y(c.N * c.O * OH * OW);
  for (std::size_t n = 0; n < c.N; ++n)
    for (std::size_t o = 0; o < c.O; ++o)
      for (std::size_t oh = 0; oh < OH; ++oh)
        for (std::size_t ow = 0; ow < OW; ++ow) {
          double s = l.b(o);
          const std::size_t grp = o / Og;
          for (std::size_t cc = 0; cc < Cg; ++cc)
            for (std::size_t i = 0; i < g.kh; ++i)
              for (std::size_t j = 0; j < g.kw; ++j) {
                const long ih = long(oh * g.stride_h + i * g.dilation_h) - long(g.pad_top);
                const long iw = long(ow * g.stride_w + j * g.dilation_w) - long(g.pad_left);
                if (ih < 0 || iw < 0 || ih >= long(c.H) || iw >= long(c.W)) continue;
                s += l.W(o, cc, i, j) * x[((n * c.C + grp * Cg + cc) * c.H + std::size_t(ih)) * c.W + std::size_t(iw)];
              }
          y[((n * c.O + o) * OH + oh) * OW + ow] = s;
        }
  return y;
}

/// The adjoint of naive_conv: dx, dW, db for dL/dy = dy.
void naive_conv_backward(const conv_case& c, const DConv& l, const std::vector<double>& x, const std::vector<double>& dy,
                         std::vector<double>& dx, std::vector<double>& dW, std::vector<double>& db) {
  const auto& g = c.g;
  const std::size_t OH = g.out_h(c.H), OW = g.out_w(c.W), Cg = c.C / g.groups, Og = c.O / g.groups;
  dx.assign(x.size(), 0.0);
  dW.assign(l.W.size(), 0.0);
  db.assign(c.O, 0.0);
  for (std::size_t n = 0; n < c.N; ++n)
    for (std::size_t o = 0; o < c.O; ++o)
      for (std::size_t oh = 0; oh < OH; ++oh)
        for (std::size_t ow = 0; ow < OW; ++ow) {
          const double d = dy[((n * c.O + o) * OH + oh) * OW + ow];
          db[o] += d;
          const std::size_t grp = o / Og;
          for (std::size_t cc = 0; cc < Cg; ++cc)
            for (std::size_t i = 0; i < g.kh; ++i)
              for (std::size_t j = 0; j < g.kw; ++j) {
                const long ih = long(oh * g.stride_h + i * g.dilation_h) - long(g.pad_top);
                const long iw = long(ow * g.stride_w + j * g.dilation_w) - long(g.pad_left);
                if (ih < 0 || iw < 0 || ih >= long(c.H) || iw >= long(c.W)) continue;
                const std::size_t xi = ((n * c.C + grp * Cg + cc) * c.H + std::size_t(ih)) * c.W + std::size_t(iw);
                dx[xi] += d * l.W(o, cc, i, j);
                dW[((o * Cg + cc) * g.kh + i) * g.kw + j] += d * x[xi];
              }
        }
}

/// Runs the layer's own forward through its traits (any layer type, any scalar).
template <class L, class T>
std::vector<T> run_forward(const L& l, shape in, std::size_t batch, const std::vector<T>& x) {
  using Tr = layer_traits<L>;
  const shape out = Tr::output_shape(l, in);
  std::vector<T> y(batch * out.size(), T(-12345));
  std::vector<T> scratch(Tr::scratch_size(&l, in, out, batch) + 1, T(std::nan("")));  // undefined contents
  std::vector<T> cache(Tr::cache_size(&l, in, out) * batch + 1);
  Tr::forward(l, forward_args<T>{in, out, batch, x.data(), y.data(), cache.data(), scratch.data()});
  return y;
}

struct grads {
  std::vector<double> dx, dW, db;
};

template <class L>
grads run_backward(const L& l, shape in, std::size_t batch, const std::vector<double>& x, const std::vector<double>& dy) {
  using Tr = layer_traits<L>;
  const shape out = Tr::output_shape(l, in);
  std::vector<double> y(batch * out.size());
  std::vector<double> scratch(Tr::scratch_size(&l, in, out, batch) + 1, std::nan(""));
  std::vector<double> cache(Tr::cache_size(&l, in, out) * batch + 1);
  Tr::forward(l, forward_args<double>{in, out, batch, x.data(), y.data(), cache.data(), scratch.data()});
  L g = l;
  std::fill(g.W.begin(), g.W.end(), 0.0);
  std::fill(g.b.begin(), g.b.end(), 0.0);
  grads r;
  r.dx.assign(x.size(), std::nan(""));  // written, not added
  Tr::backward(l,
               backward_args<double>{in, out, batch, x.data(), y.data(), dy.data(), cache.data(), r.dx.data(),
                                     scratch.data()},
               &g);
  r.dW.assign(g.W.begin(), g.W.end());
  r.db.assign(g.b.begin(), g.b.end());
  return r;
}

bool close(double got, double want, double rel) {
  return std::abs(got - want) <= rel * std::max(1.0, std::abs(want));
}

conv_case random_case(std::mt19937_64& r) {
  auto U = [&](std::size_t lo, std::size_t hi) { return std::uniform_int_distribution<std::size_t>(lo, hi)(r); };
  conv_case c{};
  conv_geometry g;
  g.groups = U(1, 3);
  c.C = g.groups * U(1, 2);
  c.O = g.groups * U(1, 3);
  if (U(0, 4) == 0) {  // depthwise
    g.groups = c.C;
    c.O = c.C * U(1, 2);
  }
  g.kh = U(1, 4);
  g.kw = U(1, 4);
  g.stride_h = U(1, 3);
  g.stride_w = U(1, 3);
  g.dilation_h = U(1, 2);
  g.dilation_w = U(1, 2);
  g.pad_top = U(0, 2);
  g.pad_left = U(0, 2);
  g.pad_bottom = U(0, 2);
  g.pad_right = U(0, 2);
  const std::size_t mh = g.span_h() > g.pad_top + g.pad_bottom ? g.span_h() - g.pad_top - g.pad_bottom : 1;
  const std::size_t mw = g.span_w() > g.pad_left + g.pad_right ? g.span_w() - g.pad_left - g.pad_right : 1;
  c.H = std::max<std::size_t>(1, mh) + U(0, 5);
  c.W = std::max<std::size_t>(1, mw) + (U(0, 3) == 0 ? U(14, 40) : U(0, 5));  // sometimes wide rows
  c.N = U(1, 3);
  c.g = g;
  return c;
}

std::vector<conv_case> fixed_cases() {
  return {
      {2, 3, 7, 6, 4, conv_geometry{.kh = 3}},                                                     // plain
      {2, 3, 9, 8, 5, conv_geometry{.kh = 3, .stride_h = 2, .pad_top = 1}},                        // strided, padded
      {2, 2, 7, 9, 3, conv_geometry{.kh = 2, .kw = 4, .pad_top = 2, .pad_left = 0, .pad_bottom = 1, .pad_right = 3}},
      {1, 2, 11, 10, 3, conv_geometry{.kh = 3, .dilation_h = 2, .dilation_w = 3}},                 // dilated
      {2, 4, 6, 6, 6, conv_geometry{.kh = 3, .pad_top = 1, .groups = 2}},                          // grouped
      {2, 3, 6, 7, 6, conv_geometry{.kh = 3, .stride_h = 1, .stride_w = 2, .pad_top = 1, .groups = 3}},  // depthwise x2
      {3, 3, 5, 5, 3, conv_geometry{.kh = 3, .pad_top = 1, .groups = 3}},                          // depthwise
      {2, 5, 4, 6, 3, conv_geometry{}},                                                            // 1x1 direct
      {2, 4, 4, 6, 6, conv_geometry{.groups = 2}},                                                 // 1x1 direct grouped
      {2, 3, 7, 6, 2, conv_geometry{.kh = 1, .stride_h = 2}},                                      // 1x1 strided
      {2, 3, 4, 4, 2, conv_geometry{.kh = 1, .pad_top = 1}},                                       // 1x1 padded
      {2, 2, 5, 4, 3, conv_geometry{.kh = 5, .kw = 4}},                                            // kernel == input
      {1, 1, 3, 3, 2, conv_geometry{.kh = 5, .pad_top = 1}},                                       // kernel > input, padded
      {2, 2, 6, 5, 2, conv_geometry{.kh = 3, .kw = 2, .stride_h = 3, .stride_w = 2, .pad_top = 0, .pad_left = 1,
                                    .pad_bottom = 2, .pad_right = 0, .dilation_h = 2, .dilation_w = 1}},
      // the direct stride-1 kernel: output rows >= 16 wide, <= 16 output channels per group
      {2, 3, 7, 18, 5, conv_geometry{.kh = 3, .pad_top = 1}},                       // 18 = 16 + overlapping vector
      {1, 1, 5, 20, 16, conv_geometry{.kh = 5, .pad_top = 2}},                      // 16 channels: tiles 6, 6, 4
      {2, 2, 4, 37, 7, conv_geometry{.kh = 2, .kw = 3}},                            // 35 wide: a pair + one vector
      {1, 4, 9, 21, 6, conv_geometry{.kh = 3, .kw = 2, .pad_top = 2, .pad_left = 0, .pad_bottom = 1, .pad_right = 3,
                                     .dilation_h = 2, .dilation_w = 3, .groups = 2}},  // asymmetric, dilated, grouped
      {2, 3, 6, 40, 3, conv_geometry{.kh = 3, .pad_top = 1, .groups = 3}},          // depthwise, 40 wide
  };
}

}  // namespace

TEST_CASE("Conv2D: compile-time shapes and messages") {
  using L1 = Conv2D<6, 5, 1, 2>;
  static_assert(layer_traits<L1>::infer(shape(1, 28, 28)).out == shape(6, 28, 28));
  static_assert(layer_traits<Conv2D<16, 5>>::infer(shape(6, 14, 14)).out == shape(16, 10, 10));
  static_assert(layer_traits<Conv2D<4, 3, 2, 1>>::infer(shape(3, 7, 8)).out == shape(4, 4, 4));
  using R = Conv2DG<2, conv_geometry{.kh = 2, .kw = 4, .pad_top = 2, .pad_left = 0, .pad_bottom = 1, .pad_right = 3}>;
  static_assert(R::geometry.kw == 4 && R::geometry.pad_right == 3);
  static_assert(layer_traits<R>::infer(shape(2, 7, 9)).out == shape(2, 9, 9));  // (7+3-2)+1, (9+3-4)+1
  static_assert(!layer_traits<L1>::infer(shape(784)).ok());
  static_assert(!layer_traits<Conv2D<6, 5>>::infer(shape(1, 4, 28)).ok());       // kernel taller than the input
  static_assert(!layer_traits<Conv2D<6, 3, 1, 0, 1, 2>>::infer(shape(3, 8, 8)).ok());  // 3 channels, 2 groups
  static_assert(std::is_same_v<Conv2D<dyn>, Conv2DG<dyn, conv_geometry_dyn, float>>);
  static_assert(std::is_same_v<rebind_scalar_t<Conv2D<6, 5>, double>, Conv2D<6, 5, 1, 0, 1, 1, double>>);
  static_assert(std::is_same_v<dynamic_form_t<Conv2D<6, 5>>, Conv2D<dyn>>);
  // a static layer's scratch is a compile-time constant
  static_assert(layer_traits<L1>::scratch_size(nullptr, shape(1, 28, 28), shape(6, 28, 28), 1) == 25 * 784);
  // batch 8: three samples side by side backward (784 * 3 >= 2048): im2col and gathered dy
  static_assert(layer_traits<L1>::scratch_size(nullptr, shape(1, 28, 28), shape(6, 28, 28), 8) == (25 + 6) * 784 * 3);
  CHECK(std::string(layer_traits<L1>::infer(shape(784)).error).find("rank 3") != std::string::npos);
  CHECK(std::string(layer_traits<Conv2D<6, 5>>::infer(shape(1, 4, 28)).error).find("larger than the padded input") !=
        std::string::npos);
  CHECK(std::string(layer_traits<Conv2D<6, 3, 1, 0, 1, 2>>::infer(shape(3, 8, 8)).error).find("divisible by groups") !=
        std::string::npos);
}

TEST_CASE("Conv2D: hand-computed 1x1x3x3 input, 2x2 kernel") {
  Conv2D<1, 2, 1, 0, 1, 1, double> l;
  l.W = tensor<double, 4>::from_shape({1, 1, 2, 2});
  l.W(0, 0, 0, 0) = 1;
  l.W(0, 0, 0, 1) = 2;
  l.W(0, 0, 1, 0) = 3;
  l.W(0, 0, 1, 1) = 4;
  l.b = {0.5};
  const std::vector<double> x{1, 2, 3, 4, 5, 6, 7, 8, 9};
  auto y = run_forward(l, shape(1, 3, 3), 1, x);
  REQUIRE(y.size() == 4);
  CHECK(y[0] == 37.5);  // 1*1 + 2*2 + 4*3 + 5*4 + 0.5
  CHECK(y[1] == 47.5);
  CHECK(y[2] == 67.5);
  CHECK(y[3] == 77.5);

  // stride 2, padding 1: windows start at -1 and 1 on both axes
  Conv2D<1, 2, 2, 1, 1, 1, double> p;
  p.W = l.W;
  p.b = {0.0};
  auto z = run_forward(p, shape(1, 3, 3), 1, x);
  REQUIRE(z.size() == 4);
  CHECK(z[0] == 4);   // x00*k11
  CHECK(z[1] == 18);  // x01*k10 + x02*k11
  CHECK(z[2] == 36);  // x10*k01 + x20*k11
  CHECK(z[3] == 77);  // x11*k00 + x12*k01 + x21*k10 + x22*k11

  // backward by hand for the unpadded case, dy = 1: dx[i][j] = sum of the kernel taps covering (i, j)
  // dy = 1 (a longer buffer than the 4 outputs: GCC -O3 -Warray-bounds misreads the short one)
  auto g = run_backward(l, shape(1, 3, 3), 1, x, std::vector<double>(16, 1.0));
  const std::vector<double> dx{1, 3, 2, 4, 10, 6, 3, 7, 4};
  for (std::size_t i = 0; i < 9; ++i) CHECK(g.dx[i] == dx[i]);
  const std::vector<double> dW{12, 16, 24, 28};  // sums of the 2x2 sub-blocks of x
  for (std::size_t i = 0; i < 4; ++i) CHECK(g.dW[i] == dW[i]);
  CHECK(g.db[0] == 4);
}

TEST_CASE("Conv2D: forward matches the naive reference on many geometries") {
  std::mt19937_64 r(7);
  auto cases = fixed_cases();
  for (int i = 0; i < 60; ++i) cases.push_back(random_case(r));
  for (const auto& c : cases) {
    CAPTURE(describe(c));
    const DConv l = make_conv(c, r);
    const auto x = randn(c.N * c.C * c.H * c.W, r);
    const auto y = run_forward(l, shape(c.C, c.H, c.W), c.N, x);
    const auto ref = naive_conv(c, l, x);
    REQUIRE(y.size() == ref.size());
    for (std::size_t k = 0; k < y.size(); ++k) REQUIRE(close(y[k], ref[k], 1e-12));
  }
}

TEST_CASE("Conv2D: both batch chunkings, the chunk remainder, the direct and the depthwise paths") {
  std::mt19937_64 r(11);
  // P = 16: forward 32 samples side by side, backward 128; 129 = 4 * 32 + 1 = 128 + 1
  const conv_case small{129, 3, 6, 6, 4, conv_geometry{.kh = 3, .pad_top = 0}};
  const auto ps = detail::make_conv_plan(small.g, shape(3, 6, 6), shape(4, 4, 4), small.N);
  CHECK(ps.nb == 32);
  CHECK(ps.nb_back == 128);
  CHECK(!ps.pointwise);
  // P = 33*33 >= 512: one sample at a time forward, two backward (3 = 2 + 1)
  const conv_case big{3, 2, 35, 35, 3, conv_geometry{.kh = 3, .pad_top = 0}};
  const auto pb = detail::make_conv_plan(big.g, shape(2, 35, 35), shape(3, 33, 33), 3);
  CHECK(pb.nb == 1);
  CHECK(pb.nb_back == 2);
  // a padded 1x1 convolution is not direct; P = 42: 13 samples side by side forward, all 40 backward
  const conv_case pad1{40, 30, 4, 5, 2, conv_geometry{.kh = 1, .stride_h = 1, .pad_top = 1}};
  const auto pp = detail::make_conv_plan(pad1.g, shape(30, 4, 5), shape(2, 6, 7), 40);
  CHECK(pp.nb == 13);
  CHECK(pp.nb_back == 40);
  CHECK(!pp.pointwise);
  // P = 16 with a tall im2col (1170 rows): the buffer cap 2^20 / (1170*16) = 56 limits the backward chunk
  const conv_case wide{60, 130, 6, 6, 2, conv_geometry{.kh = 3}};
  const auto pw = detail::make_conv_plan(wide.g, shape(130, 6, 6), shape(2, 4, 4), 60);
  CHECK(pw.nb == 32);
  CHECK(pw.nb_back == 56);
  CHECK(detail::make_conv_plan(conv_geometry{}, shape(5, 4, 6), shape(3, 4, 6), 8).pointwise);
  // stride 1, 6 output channels, 28-wide rows: the direct kernel (LeNet's first layer)
  const auto pd = detail::make_conv_plan(conv_geometry{.kh = 5, .pad_top = 2}, shape(1, 28, 28), shape(6, 28, 28), 4);
  CHECK(pd.direct);
  CHECK(pd.direct_size() == 6 * 25 + 32 * 32);
  CHECK(!detail::make_conv_plan(conv_geometry{.kh = 5}, shape(6, 14, 14), shape(16, 10, 10), 4).direct);  // 10 wide
  const conv_case lenet1{5, 1, 28, 28, 6, conv_geometry{.kh = 5, .pad_top = 2}};
  // squeeze-excitation's 1x1 on [C, 1, 1]: all 40 samples in one GEMM's columns (a copy of x)
  const conv_case se{40, 16, 1, 1, 4, conv_geometry{}};
  const auto pse = detail::make_conv_plan(se.g, shape(16, 1, 1), shape(4, 1, 1), 40);
  CHECK(pse.pointwise);
  CHECK(pse.nb == 40);
  // forward needs no im2col buffer, only conv_gemm's panels (sized for float and for double)
  const auto gemm_scratch = [](std::size_t ns, std::size_t P, std::size_t O, std::size_t K, std::size_t taps) {
    return std::max(kernels::conv_gemm_scratch<float>(ns, P, O, K, taps),
                    kernels::conv_gemm_scratch<double>(ns, P, O, K, taps));
  };
  CHECK(pse.scratch() == gemm_scratch(40, 1, 4, 16, 1));
  // a wide 1x1 plane (P = 1024 >= 512): one sample per GEMM; pointwise backward needs nothing more
  const auto pwide = detail::make_conv_plan(conv_geometry{}, shape(8, 32, 32), shape(4, 32, 32), 8);
  CHECK(pwide.nb == 1);
  CHECK(pwide.scratch() == gemm_scratch(1, 1024, 4, 8, 1));
  // a 3x3: the larger of forward's panels and backward's im2col of nb_back samples and dy beside it
  CHECK(ps.scratch() == std::max(gemm_scratch(32, 16, 4, 27, 9), std::size_t(27 * 128 * 16 + 4 * 128 * 16)));
  // depthwise, stride 2 (and a channel multiplier of 2): kernels::depthwise_conv on the planes
  const conv_case dw{4, 8, 9, 9, 16, conv_geometry{.kh = 3, .stride_h = 2, .pad_top = 1, .groups = 8}};
  const auto pdw = detail::make_conv_plan(dw.g, shape(8, 9, 9), shape(16, 5, 5), 4);
  CHECK(pdw.depthwise);
  CHECK(!pdw.direct);
  CHECK(pdw.depthwise_size() == 0);  // m = 2: plane by plane, no copies
  // one output channel per input channel: channels-last copies of x, y and w
  const conv_case dw1{3, 8, 9, 9, 8, conv_geometry{.kh = 3, .stride_h = 2, .pad_top = 1, .groups = 8}};
  const auto pdw1 = detail::make_conv_plan(dw1.g, shape(8, 9, 9), shape(8, 5, 5), 3);
  CHECK(pdw1.depthwise);
  CHECK(pdw1.depthwise_size() == 8 * 9 + 8 * (81 + 25));  // packed weights, then x and y
  CHECK(!detail::make_conv_plan(conv_geometry{.kh = 3}, shape(1, 9, 9), shape(4, 7, 7), 4).depthwise);  // groups 1
  // grouped with at least 8 outputs per group and a kernel larger than 1x1 (RegNet's 16): one
  // kernels::conv_planes per group
  const std::size_t vw = kernels::simd::width<float>;
  const conv_case gr{5, 4 * 5, 5, 5, 5 * vw, conv_geometry{.kh = 3, .pad_top = 1, .groups = 5}};  // 4 + 1 groups
  const auto pgr = detail::make_conv_plan(gr.g, shape(20, 5, 5), shape(5 * vw, 5, 5), 5);
  CHECK((pgr.planes && !pgr.grouped));
  const conv_case gr2{3, 8, 9, 7, 8 * vw, conv_geometry{.kh = 3, .kw = 2, .stride_h = 2, .pad_top = 1, .pad_left = 0,
                                                        .pad_bottom = 0, .pad_right = 1, .groups = 4}};  // 2 vectors
  // ... but on a 4x4 output (48 virtual outputs for 16), kernels::grouped_conv
  CHECK(detail::make_conv_plan(gr2.g, shape(8, 9, 7), shape(8 * vw, 4, 4), 3).grouped);
  CHECK(!detail::make_conv_plan(gr2.g, shape(8, 9, 7), shape(12, 4, 4), 3).grouped);  // 3 outputs per group: im2col
  // ... one or two vectors of float outputs per group with a strided 1x1: kernels::grouped_conv
  const conv_case gr3{3, 4 * 6, 9, 8, 4 * vw, conv_geometry{.kh = 1, .stride_h = 2, .groups = 4}};
  const auto pgr3 = detail::make_conv_plan(gr3.g, shape(24, 9, 8), shape(4 * vw, 5, 4), 3);
  CHECK(pgr3.grouped);
  CHECK(pgr3.grouped_size() == 4 * vw * 6 + 24 * 72 + 4 * vw * 20);
  CHECK(!detail::make_conv_plan(conv_geometry{.kh = 3, .groups = 2}, shape(4, 9, 9), shape(2 * vw, 7, 7), 3)
             .grouped);  // fewer than 4 groups: im2col's GEMMs are wider
  for (const auto& c : {small, big, pad1, wide, lenet1, se, dw, dw1, gr, gr2, gr3, conv_case{9, 4, 3, 3, 6, conv_geometry{.groups = 2}}}) {
    CAPTURE(describe(c));
    const DConv l = make_conv(c, r);
    const auto x = randn(c.N * c.C * c.H * c.W, r);
    const shape in(c.C, c.H, c.W);
    const auto y = run_forward(l, in, c.N, x);
    const auto ref = naive_conv(c, l, x);
    for (std::size_t k = 0; k < y.size(); ++k) REQUIRE(close(y[k], ref[k], 1e-12));
    const auto dy = randn(y.size(), r);
    const auto g = run_backward(l, in, c.N, x, dy);
    std::vector<double> dx, dW, db;
    naive_conv_backward(c, l, x, dy, dx, dW, db);
    for (std::size_t k = 0; k < dx.size(); ++k) REQUIRE(close(g.dx[k], dx[k], 1e-11));
    for (std::size_t k = 0; k < dW.size(); ++k) REQUIRE(close(g.dW[k], dW[k], 1e-11));
    for (std::size_t k = 0; k < db.size(); ++k) REQUIRE(close(g.db[k], db[k], 1e-11));
  }
}

TEST_CASE("Conv2D: backward matches central finite differences (dx, dW, db)") {
  std::mt19937_64 r(3);
  auto cases = fixed_cases();
  for (int i = 0; i < 40; ++i) cases.push_back(random_case(r));
  const double h = 1e-6, tol = 1e-6;
  std::size_t checked = 0;
  double worst = 0;
  for (const auto& c : cases) {
    CAPTURE(describe(c));
    DConv l = make_conv(c, r);
    auto x = randn(c.N * c.C * c.H * c.W, r);
    const shape in(c.C, c.H, c.W);
    const std::size_t ny = run_forward(l, in, c.N, x).size();
    const auto cw = randn(ny, r);  // loss = sum(c * y)
    auto loss = [&]() {
      const auto y = run_forward(l, in, c.N, x);
      double s = 0;
      for (std::size_t k = 0; k < y.size(); ++k) s += cw[k] * y[k];
      return s;
    };
    const auto g = run_backward(l, in, c.N, x, cw);
    auto fd = [&](double& v) {
      const double v0 = v;
      v = v0 + h;
      const double lp = loss();
      v = v0 - h;
      const double lm = loss();
      v = v0;
      return (lp - lm) / (2 * h);
    };
    auto check = [&](double num, double an) {
      worst = std::max(worst, std::abs(num - an) / std::max(1.0, std::abs(an)));
      ++checked;
      return close(num, an, tol);
    };
    for (std::size_t k = 0; k < x.size(); ++k) REQUIRE(check(fd(x[k]), g.dx[k]));
    for (std::size_t k = 0; k < l.W.size(); ++k) REQUIRE(check(fd(l.W.data()[k]), g.dW[k]));
    for (std::size_t k = 0; k < l.b.size(); ++k) REQUIRE(check(fd(l.b.data()[k]), g.db[k]));
  }
  MESSAGE("Conv2D finite differences: " << checked << " derivatives, worst relative error " << worst);
  CHECK(worst < tol);
}

TEST_CASE("Conv2D: backward without dx, or without parameter gradients") {
  std::mt19937_64 r(5);
  const conv_case c{3, 2, 6, 5, 4, conv_geometry{.kh = 3, .pad_top = 1, .groups = 2}};
  const DConv l = make_conv(c, r);
  const auto x = randn(c.N * c.C * c.H * c.W, r);
  const shape in(2, 6, 5), out = layer_traits<DConv>::output_shape(l, in);
  const auto dy = randn(c.N * out.size(), r);
  const auto full = run_backward(l, in, c.N, x, dy);
  std::vector<double> scratch(layer_traits<DConv>::scratch_size(&l, in, out, c.N));
  // parameter gradients only; ADDED to what grad holds
  DConv g = l;
  std::fill(g.W.begin(), g.W.end(), 1.0);
  std::fill(g.b.begin(), g.b.end(), 1.0);
  layer_traits<DConv>::backward(l, backward_args<double>{in, out, c.N, x.data(), nullptr, dy.data(), nullptr, nullptr,
                                                         scratch.data()},
                                &g);
  for (std::size_t k = 0; k < g.W.size(); ++k) CHECK(g.W.data()[k] == doctest::Approx(full.dW[k] + 1.0).epsilon(1e-12));
  for (std::size_t k = 0; k < g.b.size(); ++k) CHECK(g.b.data()[k] == doctest::Approx(full.db[k] + 1.0).epsilon(1e-12));
  // dx only
  std::vector<double> dx(x.size(), 99.0);
  layer_traits<DConv>::backward(l, backward_args<double>{in, out, c.N, x.data(), nullptr, dy.data(), nullptr, dx.data(),
                                                         scratch.data()},
                                nullptr);
  for (std::size_t k = 0; k < dx.size(); ++k) CHECK(dx[k] == full.dx[k]);
}

TEST_CASE("Conv2D: output_shape names what is wrong") {
  DConv l;
  l.geometry = conv_geometry{.kh = 3, .groups = 2};
  l.W = tensor<double, 4>::from_shape({4, 2, 3, 3});
  l.b = tensor<double, 1>::from_shape({4});
  CHECK(layer_traits<DConv>::output_shape(l, shape(4, 5, 5)) == shape(4, 3, 3));
  auto message = [&](shape in) -> std::string {
    try {
      layer_traits<DConv>::output_shape(l, in);
    } catch (const shape_error& e) {
      return e.what();
    }
    return "";
  };
  CHECK(message(shape(3, 5, 5)).find("not divisible by groups") != std::string::npos);
  CHECK(message(shape(6, 5, 5)).find("W has shape [4,2,3,3], expected [4,3,3,3]") != std::string::npos);
  CHECK(message(shape(4, 2, 5)).find("larger than the padded input") != std::string::npos);
  CHECK(message(shape(20)).find("image input") != std::string::npos);
  l.b = tensor<double, 1>::from_shape({3});
  CHECK(message(shape(4, 5, 5)).find("b has 3 elements, expected 4") != std::string::npos);
  l.b = tensor<double, 1>::from_shape({4});
  l.geometry.stride_w = 0;
  CHECK(message(shape(4, 5, 5)).find("strides must be positive") != std::string::npos);
  l.geometry = conv_geometry_dyn;  // a run-time layer whose geometry was never set
  CHECK(message(shape(4, 5, 5)).find("dyn field") != std::string::npos);

  // through DynamicNetwork: the message names the layer index and type
  basic_dynamic_network<double> d(shape(3, 8, 8));
  DConv ok;
  ok.geometry = conv_geometry{.kh = 3};
  ok.W = tensor<double, 4>::from_shape({5, 3, 3, 3});
  ok.b = tensor<double, 1>::from_shape({5});
  d.add(ok).add(ReLU{});
  std::string what;
  try {
    d.add(ok);  // expects 5 input channels
  } catch (const shape_error& e) {
    what = e.what();
  }
  CHECK(what.find("layer 2 (Conv2D)") != std::string::npos);
  CHECK(what.find("expected [5,5,3,3]") != std::string::npos);
  CHECK(d.size() == 2);
}

namespace {
using SmallCNN = Sequential<
    Input<3, 12, 12>, Conv2D<8, 3, 1, 1>, ReLU, MaxPool2D<2>,
    Conv2DG<12, conv_geometry{.kh = 3, .kw = 2, .stride_h = 1, .stride_w = 2, .pad_top = 1, .pad_left = 0, .pad_bottom = 2,
                              .pad_right = 1, .groups = 4}>,
    ReLU, AvgPool2DG<pool_geometry{.kh = 2, .kw = 3, .stride_h = 1, .stride_w = 2, .pad_top = 1, .pad_left = 1,
                                   .ceil_mode = true, .count_include_pad = false}>,
    Conv2D<6, 1>, MaxPool2DG<pool_geometry{.kh = 3, .kw = 2, .stride_h = 2, .stride_w = 1, .pad_top = 1, .pad_left = 0,
                                           .pad_bottom = 1, .pad_right = 1, .ceil_mode = true}>,
    GlobalAvgPool, Flatten, Dense<5>>;

template <class T>
xt::xarray<T> random_images(std::vector<std::size_t> shp, std::uint64_t seed) {
  std::mt19937_64 r(seed);
  std::normal_distribution<double> n(0, 1);
  xt::xarray<T> x = xt::xarray<T>::from_shape(shp);
  for (auto& v : x) v = T(n(r));
  return x;
}
}  // namespace

TEST_CASE("Conv2D/pools: Sequential and DynamicNetwork give bitwise-identical outputs and gradients") {
  SmallCNN net;
  initialize(net, 9);
  auto dnet = to_dynamic(net);
  REQUIRE(dnet.size() == SmallCNN::size);
  for (std::size_t i = 0; i <= dnet.size(); ++i) CHECK(dnet.shape_at(i) == SmallCNN::shapes[i]);
  CHECK(dnet.layer_name(0) == "Conv2D");
  CHECK(dnet.layer_name(2) == "MaxPool2D");
  CHECK(dnet.layer_name(5) == "AvgPool2D");
  CHECK(dnet.layer_name(8) == "GlobalAvgPool");
  for (std::size_t batch : {1, 9}) {  // batch 9: forward chunks of 4, 4 and 1 samples in the first conv
    auto x = random_images<float>({batch, 3, 12, 12}, 4);
    auto y1 = forward(net, x);
    auto y2 = forward(dnet, x);
    auto y3 = forward(execution::par, dnet, x);
    REQUIRE(y1.shape() == y2.shape());
    for (std::size_t i = 0; i < y1.size(); ++i) {
      CHECK(y1.data()[i] == y2.data()[i]);
      CHECK(y1.data()[i] == y3.data()[i]);
    }
    trace<float> t1, t2;
    forward_trace(net, batch, x.data(), t1);
    forward_trace(dnet, batch, x.data(), t2);
    std::vector<float> dy(batch * 5);
    for (std::size_t i = 0; i < dy.size(); ++i) dy[i] = float(i % 7) - 3.0f;
    auto g1 = zeros_like(net);
    auto g2 = zeros_like(dnet);
    std::vector<float> dx1(x.size()), dx2(x.size());
    backward(net, t1, dy.data(), &g1, dx1.data());
    backward(dnet, t2, dy.data(), &g2, dx2.data());
    CHECK(dx1 == dx2);
    auto p1 = parameter_spans(g1);
    auto p2 = parameter_spans(g2);
    REQUIRE(p1.size() == p2.size());
    for (std::size_t k = 0; k < p1.size(); ++k)
      CHECK(std::equal(p1[k].begin(), p1[k].end(), p2[k].begin(), p2[k].end()));
  }
  // from_dynamic round trip
  auto back = from_dynamic<SmallCNN>(dnet);
  auto x = random_images<float>({2, 3, 12, 12}, 5);
  auto ya = forward(net, x);
  auto yb = forward(back, x);
  for (std::size_t i = 0; i < ya.size(); ++i) CHECK(ya.data()[i] == yb.data()[i]);
}

TEST_CASE("Conv2D: from_dynamic rejects another geometry or channel count, naming the layer") {
  using Net = Sequential<Input<1, 8, 8>, Conv2D<4, 3, 1, 1>, ReLU>;
  Net net;
  initialize(net, 1);
  auto d = to_dynamic(net);
  auto& conv = std::get<Conv2D<dyn>>(d.layer(0));
  auto message = [&] {
    try {
      from_dynamic<Net>(d);
    } catch (const shape_error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  conv.geometry.dilation_w = 2;
  CHECK(message().find("layer 0 (Conv2D): Conv2D geometry differs") != std::string::npos);
  conv.geometry.dilation_w = 1;
  CHECK(message().empty());
  conv.W = tensor<float, 4>::from_shape({3, 1, 3, 3});
  conv.b = tensor<float, 1>::from_shape({3});
  d.validate();
  CHECK(message().find("layer 0 (Conv2D): Conv2D expects 4 output channels, the source has 3") != std::string::npos);
}

TEST_CASE("Conv2D: float forward agrees with double forward") {
  SmallCNN net;
  initialize(net, 21);
  rebind_scalar_t<SmallCNN, double> dnet;
  initialize(dnet, 21);
  auto ps = parameter_spans(net);
  auto pd = parameter_spans(dnet);
  REQUIRE(ps.size() == pd.size());
  for (std::size_t k = 0; k < ps.size(); ++k)
    for (std::size_t i = 0; i < ps[k].size(); ++i) pd[k][i] = double(ps[k][i]);  // the same weights
  auto x = random_images<float>({16, 3, 12, 12}, 6);
  xt::xarray<double> xd = x;
  auto yf = forward(net, x);
  auto yd = forward(dnet, xd);
  double worst = 0;
  for (std::size_t i = 0; i < yf.size(); ++i)
    worst = std::max(worst, std::abs(double(yf.data()[i]) - yd.data()[i]) / std::max(1.0, std::abs(yd.data()[i])));
  MESSAGE("float vs double, worst relative difference " << worst);
  CHECK(worst < 1e-5);

  // gradients too (float kernels: other vector widths, the AVX-512 paths)
  trace<float> tf;
  trace<double> td;
  forward_trace(net, 16, x.data(), tf);
  forward_trace(dnet, 16, xd.data(), td);
  std::vector<float> dyf(16 * 5);
  std::vector<double> dyd(dyf.size());
  for (std::size_t i = 0; i < dyf.size(); ++i) dyd[i] = dyf[i] = float(int(i % 9) - 4) / 4.0f;
  auto gf = zeros_like(net);
  auto gd = zeros_like(dnet);
  std::vector<float> dxf(x.size());
  std::vector<double> dxd(x.size());
  backward(net, tf, dyf.data(), &gf, dxf.data());
  backward(dnet, td, dyd.data(), &gd, dxd.data());
  auto sf = parameter_spans(gf);
  auto sd = parameter_spans(gd);
  double gworst = 0, scale = 0;
  for (std::size_t k = 0; k < sf.size(); ++k)
    for (std::size_t i = 0; i < sf[k].size(); ++i) {
      gworst = std::max(gworst, std::abs(double(sf[k][i]) - sd[k][i]));
      scale = std::max(scale, std::abs(sd[k][i]));
    }
  for (std::size_t i = 0; i < dxf.size(); ++i) {
    gworst = std::max(gworst, std::abs(double(dxf[i]) - dxd[i]));
    scale = std::max(scale, std::abs(dxd[i]));
  }
  MESSAGE("float vs double gradients, worst difference " << gworst << " (largest gradient " << scale << ")");
  CHECK(gworst < 1e-4 * scale);

  // and LeNet's two convolutions alone (the direct kernel and im2col + GEMM, float vector widths)
  auto check_alone = [](auto net, std::vector<std::size_t> shp) {
    initialize(net, 3);
    rebind_scalar_t<decltype(net), double> nd;
    nd.template layer<0>().W = net.template layer<0>().W;
    nd.template layer<0>().b = net.template layer<0>().b;
    auto xf = random_images<float>(shp, 8);
    xt::xarray<double> xd2 = xf;
    auto a = forward(net, xf);
    auto b = forward(nd, xd2);
    double w = 0;
    for (std::size_t i = 0; i < a.size(); ++i) w = std::max(w, std::abs(double(a.data()[i]) - b.data()[i]));
    CHECK(w < 1e-5);
  };
  check_alone(Sequential<Input<6, 14, 14>, Conv2D<16, 5>>{}, {4, 6, 14, 14});
  check_alone(Sequential<Input<1, 28, 28>, Conv2D<6, 5, 1, 2>>{}, {3, 1, 28, 28});
  check_alone(Sequential<Input<3, 9, 35>, Conv2D<8, 3, 1, 1, 2>>{}, {2, 3, 9, 35});
}

TEST_CASE("Conv2D: PyTorch default initialisation") {
  Conv2D<6, 5> a;
  std::mt19937_64 r(1);
  layer_traits<Conv2D<6, 5>>::init(a, shape(3, 28, 28), r);
  REQUIRE(a.W.shape() == std::array<std::size_t, 4>{6, 3, 5, 5});
  REQUIRE(a.b.size() == 6);
  const double bound = 1.0 / std::sqrt(75.0);
  double mx = 0;
  for (float w : a.W) mx = std::max(mx, double(std::abs(w)));
  CHECK(mx <= bound);
  CHECK(mx > 0.9 * bound);
  for (float v : a.b) CHECK(std::abs(v) <= bound);

  using DW = Conv2D<6, 3, 1, 1, 1, 3>;  // depthwise, multiplier 2: fan_in = 1*3*3
  DW d;
  layer_traits<DW>::init(d, shape(3, 8, 8), r);
  REQUIRE(d.W.shape() == std::array<std::size_t, 4>{6, 1, 3, 3});
  double md = 0;
  for (float w : d.W) md = std::max(md, double(std::abs(w)));
  CHECK(md <= 1.0 / 3.0);
  CHECK(md > 0.5 / 3.0);
}

TEST_CASE_TEMPLATE("Conv2D: columns or output channels split over threads within one call give the serial bits", T, float, double) {
  // Within-layer threads (detail::intra_op_pool(), set by forward(execution::par) at a batch below
  // its threads): a GEMM-form convolution splits its columns, or its output channels, over the pool.
  using Net = Sequential<Input<16, 24, 24>, Conv2DG<60, conv_geometry{.kh = 3, .pad_top = 1}, T>, ReLU,
                         Conv2DG<100, conv_geometry{.kh = 3, .stride_h = 2, .pad_top = 1}, T>, ReLU,
                         Conv2DG<52, conv_geometry{}, T>>;
  Net net;
  initialize(net, 23);
  const std::size_t align = kernels::conv_gemm_column_align<T>();
  const detail::conv_plan p1 = detail::make_conv_plan(conv_geometry{.kh = 3, .pad_top = 1}, shape{16, 24, 24}, shape{60, 24, 24}, 1);
  const detail::conv_plan p2 =
      detail::make_conv_plan(conv_geometry{.kh = 3, .stride_h = 2, .pad_top = 1}, shape{60, 24, 24}, shape{100, 12, 12}, 1);
  const detail::conv_plan small =
      detail::make_conv_plan(conv_geometry{.kh = 3, .pad_top = 1}, shape{16, 8, 8}, shape{60, 8, 8}, 1);
  // 576 columns: by columns on 2 threads (>= 8 tiles); the second's 144: by columns on 3 threads
  // where that is 12 tiles, else by channels (100 of them: 3 slices of >= 24)
  CHECK(detail::conv_intra_parts(p1, 1, 2, align).parts == 2);
  CHECK(detail::conv_intra_parts(p1, 1, 2, align).by_columns);
  CHECK(detail::conv_intra_parts(p2, 1, 3, align).parts == 3);
  CHECK(detail::conv_intra_parts(p2, 1, 3, align).by_columns == (144 >= 12 * align));
  CHECK(detail::conv_intra_parts(p1, 1, 1, align).parts == 1);
  CHECK(detail::conv_intra_parts(small, 1, 2, align).parts == 1);  // below conv_intra_min_macs
  // parts: whole units (a start past the last whole unit is n: that part and those after it are
  // empty), covering [0, n) in order
  for (std::size_t n : {24, 48, 60, 100, 144, 512})
    for (std::size_t parts : {2, 3, 4})
      for (std::size_t unit : {std::size_t(6), align}) {
        CHECK(detail::conv_intra_start(n, 0, parts, unit) == 0);
        CHECK(detail::conv_intra_start(n, parts, parts, unit) == n);
        for (std::size_t c = 1; c < parts; ++c) {
          const std::size_t start = detail::conv_intra_start(n, c, parts, unit);
          CHECK((start % unit == 0 || start == n));
          CHECK(detail::conv_intra_start(n, c, parts, unit) >= detail::conv_intra_start(n, c - 1, parts, unit));
        }
      }
  auto dnet = to_dynamic(net);
  for (std::size_t batch : {1, 2}) {
    auto x = random_images<T>({batch, 16, 24, 24}, 31);
    const auto serial = forward(execution::seq, net, x);
    detail::thread_pool pool(3);
    xt::xarray<T> split = xt::zeros_like(serial), split_dyn = xt::zeros_like(serial);
    {
      detail::intra_op_scope scope(&pool);
      std::vector<T> ws(inference_workspace_size(net, batch));
      forward_into(net, batch, x.data(), split.data(), std::span<T>(ws));
      std::vector<T> wd(inference_workspace_size(dnet, batch));
      forward_into(dnet, batch, x.data(), split_dyn.data(), std::span<T>(wd));
    }
    CHECK(detail::intra_op_pool() == nullptr);  // the scope restored it
    bool same = true, same_dyn = true;
    for (std::size_t i = 0; i < serial.size(); ++i) {
      same = same && serial.data()[i] == split.data()[i];
      same_dyn = same_dyn && serial.data()[i] == split_dyn.data()[i];
    }
    CHECK_MESSAGE(same, "batch ", batch);
    CHECK_MESSAGE(same_dyn, "batch ", batch);
  }
  // forward(execution::par) at batch 1 takes that path (the default pool's threads)
  auto x1 = random_images<T>({1, 16, 24, 24}, 37);
  const auto a = forward(execution::seq, net, x1), b = forward(execution::par, net, x1);
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(a.data()[i] == b.data()[i]);
}
