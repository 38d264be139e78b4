// ChannelShuffle, ChannelSlice and LayerNorm: the shuffle's permutation and LayerNorm's outputs and
// gradients against values recorded from torch 1.13 / torchvision 0.14 (float64 and float32; the
// suite needs no torch), backward against central finite differences in double, the shape and value
// errors, static Sequential vs DynamicNetwork bit for bit, codegen (host spelling; freestanding:
// the channel maps' gather, LayerNorm refused), ExactLine (a channel map adds no breaks; LayerNorm
// refused), NNSlicer's and LRP's rules on tiny nets against hand-computed values, the int8 twin
// (the channel maps keep their input's scale) and coverage's layer list (the channel maps skipped).
#include <doctest/doctest.h>

#include <nnlens/io/codegen.hpp>
#include <nnlens/io/codegen_freestanding.hpp>
#include <nnlens/kernels/freestanding.hpp>
#include <nnlens/nnlens.hpp>

#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "gradient_check.hpp"

using namespace nnlens;
using namespace nnlens_test;

namespace {
/// The recorded tests' inputs: ((i a) mod m - off) / d, exact binary fractions.
std::vector<double> pattern(std::size_t n, std::size_t a, std::size_t m, double off, double d) {
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = (double((i * a) % m) - off) / d;
  return v;
}
template <class T>
tensor<T, 1> vec(std::initializer_list<double> v) {
  tensor<T, 1> t = tensor<T, 1>::from_shape({v.size()});
  std::size_t i = 0;
  for (double x : v) t(i++) = T(x);
  return t;
}
template <std::size_t C = dyn, class T = double>
LayerNorm<C, T> layer_norm(std::initializer_list<double> g, std::initializer_list<double> b, double eps) {
  return LayerNorm<C, T>{vec<T>(g), vec<T>(b), eps};
}
/// dx and the parameter gradients of one backward pass with dy = c.
template <class L>
std::vector<double> backward_dx(const L& l, shape in, std::size_t batch, const std::vector<double>& x, const std::vector<double>& c, L* grad) {
  using Tr = layer_traits<L>;
  const auto f = run_forward(l, in, batch, x, true);
  std::vector<double> dx(x.size(), std::nan("")), scratch(Tr::scratch_size(&l, in, f.out, batch));
  Tr::backward(l, backward_args<double>{in, f.out, batch, x.data(), f.y.data(), c.data(), f.cache.data(), dx.data(), scratch.data()},
               grad);
  return dx;
}
template <class E>
void check_values(const E& got, const std::vector<double>& want, double eps) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    CAPTURE(i);
    CHECK(double(got[i]) == doctest::Approx(want[i]).epsilon(eps));
  }
}

// torch 1.13, float64: F.layer_norm(x.permute(0, 2, 3, 1), (4,), gamma, beta, 1e-6).permute(0, 3, 1, 2)
// (torchvision's LayerNorm2d) on x [2, 4, 2, 3] = pattern(48, 37, 23, 11, 8), gamma = 1 + c / 4,
// beta = c / 8 - 1 / 4; loss sum(y * pattern(48, 29, 17, 8, 4)).backward().
const std::vector<double> ln2d_y{
    -0x1.943dcca75d743p+0, -0x1.3f573089da85ap-3, -0x1.116b47d093564p+0, 0x1.729de7f09bc13p-1, -0x1.3f573089da85ap-3,
    -0x1.116b47d093564p+0, 0x1.ea9ee8761e479p-2,  -0x1.e38ba63ce7d6ap+0, 0x1.c626c22431760p+0, -0x1.dd08225ba03a8p-2,
    -0x1.e38ba63ce7d6ap+0, 0x1.c626c2243175fp+0,  -0x1.732c2513abc49p-1, 0x1.0eed63be24b40p+1, 0x1.a2d68fa126ac9p-2,
    -0x1.23b0dae284139p+1, 0x1.0eed63be24b40p+1,  0x1.a2d68fa126ac9p-2,  0x1.39b6131271c5bp+1, -0x1.449dac3b0657cp-5,
    -0x1.944a2af288491p+0, 0x1.8e7bbdad01d6fp+0,  -0x1.449dac3b0657cp-5, -0x1.944a2af288491p+0, -0x1.3f573089da85ap-3,
    -0x1.116b47d093564p+0, 0x1.729de7f09bc13p-1,  -0x1.3f573089da85ap-3, -0x1.116b47d093564p+0, -0x1.3f573089da85cp-3,
    -0x1.e38ba63ce7d6ap+0, 0x1.c626c22431760p+0,  -0x1.dd08225ba03a8p-2, -0x1.e38ba63ce7d6ap+0, 0x1.c626c2243175fp+0,
    -0x1.e38ba63ce7d6cp+0, 0x1.0eed63be24b40p+1,  0x1.a2d68fa126ac9p-2,  -0x1.23b0dae284139p+1, 0x1.0eed63be24b40p+1,
    0x1.a2d68fa126ac9p-2,  0x1.0eed63be24b40p+1,  -0x1.449dac3b0657cp-5, -0x1.944a2af288491p+0, 0x1.8e7bbdad01d6fp+0,
    -0x1.449dac3b0657cp-5, -0x1.944a2af288491p+0, -0x1.449dac3b0658ap-5};
const std::vector<double> ln2d_dx{
    -0x1.4ff452e40e8aap-3, 0x1.45a53b5aea2d4p+0,  0x1.72717ca7ffac5p-1,  -0x1.163a0853bfa48p+1, 0x1.5bf8431b8f93ap+1,
    0x1.00c4c2705faf4p+1,  -0x1.5b774f030a1ccp+0, 0x1.c222ff1030890p-4,  -0x1.5dae7a0f637d0p+0, -0x1.31505b0d01164p+0,
    -0x1.ed0d070784804p+0, 0x1.6aa2f13483dc8p+0,  0x1.bf7bdaa3a1b66p-1,  -0x1.017a2f9a0b100p-4, 0x1.521b2e0c28314p+1,
    0x1.a5882cb19d178p-2,  -0x1.03349d126020fp+1, -0x1.8abb61aeb03fep+1, 0x1.4b6fd81b7625cp-1,  -0x1.51afc8524c84ep+0,
    -0x1.ffc0a05cecbbcp+0, 0x1.7a3130440c8cap+1,  0x1.3b85baf5259b0p+0,  -0x1.5ad6cadf8aed1p-2, 0x1.3734ef70262dfp+1,
    0x1.beb64238de58fp+0,  0x1.969479fd078e7p+0,  -0x1.51d8baaa494c0p+1, 0x1.14fc807ba6cb7p+0,  -0x1.bdd82efd2baabp-1,
    -0x1.f1f3e1d882185p+0, 0x1.63acee32e5696p+0,  0x1.bc88b7ac90d90p-2,  -0x1.2798c29af2f22p-1, 0x1.bb8e8a8f4faa0p-3,
    0x1.434d03fa5d680p+1,  -0x1.00c12fa9e154fp+1, -0x1.7f982be80abefp+1, -0x1.8c16d87d4f8b0p-4, -0x1.66e37145600a4p-3,
    -0x1.23077611b5f88p-1, 0x1.28d257c9eb39cp+1,  0x1.850c624bf8664p+0,  -0x1.1996c4dd7223ap-3, -0x1.ecf53a6056cc1p+0,
    0x1.b22d22655c091p+1,  -0x1.75d52d896b890p-1, -0x1.fca95004fdb6fp+1};
const std::vector<double> ln2d_dgamma{-0x1.557dade4d5466p-1, 0x1.9de855b965259p+1, -0x1.e4e7a4c2f3a1dp+1, 0x1.fce00194875e6p+1};
const std::vector<double> ln2d_dbeta{0x1.8p-1, 0.0, -0x1.8p-1, -0x1.8p+0};
// the same in float32 (the outputs only)
const std::vector<float> ln2d_y32{
    -0x1.943dcep+0f, -0x1.3f5732p-3f, -0x1.116b48p+0f, 0x1.729de8p-1f,  -0x1.3f5732p-3f, -0x1.116b48p+0f, 0x1.ea9eecp-2f,
    -0x1.e38ba4p+0f, 0x1.c626c4p+0f,  -0x1.dd0824p-2f, -0x1.e38ba4p+0f, 0x1.c626c4p+0f,  -0x1.732c28p-1f, 0x1.0eed64p+1f,
    0x1.a2d68ep-2f,  -0x1.23b0dcp+1f, 0x1.0eed64p+1f,  0x1.a2d68ep-2f,  0x1.39b614p+1f,  -0x1.449db0p-5f, -0x1.944a2cp+0f,
    0x1.8e7bbep+0f,  -0x1.449db0p-5f, -0x1.944a2cp+0f, -0x1.3f5732p-3f, -0x1.116b48p+0f, 0x1.729de8p-1f,  -0x1.3f5732p-3f,
    -0x1.116b48p+0f, -0x1.3f5730p-3f, -0x1.e38ba4p+0f, 0x1.c626c4p+0f,  -0x1.dd0824p-2f, -0x1.e38ba4p+0f, 0x1.c626c4p+0f,
    -0x1.e38ba4p+0f, 0x1.0eed64p+1f,  0x1.a2d68ep-2f,  -0x1.23b0dcp+1f, 0x1.0eed64p+1f,  0x1.a2d68ep-2f,  0x1.0eed64p+1f,
    -0x1.449db0p-5f, -0x1.944a2cp+0f, 0x1.8e7bbep+0f,  -0x1.449db0p-5f, -0x1.944a2cp+0f, -0x1.449da2p-5f};
// torch 1.13, float64: F.layer_norm(x, (5,), gamma, beta, 1e-5) (nn.LayerNorm's default eps) on
// x [3, 5] = pattern(15, 41, 19, 9, 4), gamma = 1/2 + f/2, beta = 1/4 - f/8; loss sum(y *
// pattern(15, 29, 17, 8, 4)).backward().
const std::vector<double> ln1d_y{-0x1.d412f9e924e64p-2, -0x1.2a097cf492732p-1, 0x0.0p+0,             0x1.4a097cf492732p+0,
                                 0x1.a48bdc31b70fep+1,  0x1.65a2a3cc772a9p-1,  0x1.8535e25a807b1p+0,  -0x1.e4c920e889cb8p+0,
                                 -0x1.a73b0419fa6e5p+0, -0x1.d433517ac3814p-1, 0x1.881486fde7cd6p-2,  0x1.c73b0419fa6e6p-1,
                                 0x1.e4c920e889cb8p+0,  -0x1.7535e25a807b1p+1, -0x1.3f0b4cbf94f53p+1};
const std::vector<double> ln1d_dx{0x1.820596c76e5a0p-6,  0x1.64007e9c040cfp+0,  -0x1.b271c9257c8a2p-2, -0x1.b575fafd48d90p+1,
                                  0x1.36bfe9a667870p+1,  0x1.e029f37bff4e6p-2,  0x1.c715371c4c408p-4,  0x1.6188687b232b1p-1,
                                  0x1.5616b8951ddc0p-4,  -0x1.5aa17017a80aep+0, -0x1.c7f28c204122ep-1, 0x1.014338b521e41p-1,
                                  -0x1.63686ae79dd36p-2, -0x1.e8317fbf65615p+0, 0x1.5231a2176e3acp+1};
const std::vector<double> ln1d_dgamma{0x1.4b34d65f0bee9p+1, -0x1.25b5be448d2fap+0, -0x1.4330c09b0687bp+1, 0x1.c461baff4da14p-4,
                                      0x1.5e6d7d110a2b6p-1};
const std::vector<double> ln1d_dbeta{-0x1.cp+1, 0x1.4p+0, 0x1.cp+0, -0x1.0p+1, 0x1.6p+1};

LayerNorm<dyn, double> ln2d() { return layer_norm({1.0, 1.25, 1.5, 1.75}, {-0.25, -0.125, 0.0, 0.125}, 1e-6); }
LayerNorm<dyn, double> ln1d() { return layer_norm({0.5, 1.0, 1.5, 2.0, 2.5}, {0.25, 0.125, 0.0, -0.125, -0.25}, 1e-5); }
}  // namespace

TEST_CASE("ChannelShuffle: torchvision's channel_shuffle permutation (recorded from torch), forward and errors") {
  // torchvision 0.14's channel_shuffle on x[c] = c, [1, C, 1, 1]: the output's channel order
  const struct {
    std::size_t C, g;
    std::vector<std::size_t> order;
  } torch_order[] = {{6, 2, {0, 3, 1, 4, 2, 5}}, {6, 3, {0, 2, 4, 1, 3, 5}}, {8, 4, {0, 2, 4, 6, 1, 3, 5, 7}}, {4, 1, {0, 1, 2, 3}}};
  for (const auto& t : torch_order) {
    CAPTURE(t.C);
    CAPTURE(t.g);
    const ChannelShuffle s{t.g};
    const auto f = layer_traits<ChannelShuffle>::channel_map(s, shape(t.C, 1, 1));
    for (std::size_t c = 0; c < t.C; ++c) CHECK(f(c) == t.order[c]);
    // forward on planes of 2 x 2 (two samples): channel c of the output is plane order[c] of the input
    const shape in(t.C, 2, 2);
    std::vector<double> x(2 * in.size());
    std::iota(x.begin(), x.end(), 0.0);
    const auto r = run_forward(s, in, 2, x, false);
    CHECK(r.out == in);
    for (std::size_t n = 0; n < 2; ++n)
      for (std::size_t c = 0; c < t.C; ++c)
        for (std::size_t p = 0; p < 4; ++p) CHECK(r.y[(n * t.C + c) * 4 + p] == x[(n * t.C + t.order[c]) * 4 + p]);
  }
  static_assert(ChannelMap<ChannelShuffle> && ChannelMap<ChannelSlice<>> && ChannelMap<ChannelSlice<1, 3>>);
  static_assert(Int8Op<ChannelShuffle> && !reshape_only_v<ChannelShuffle> && !ChannelMap<Flatten>);
  static_assert(PositionMap<LayerNorm<>> && PositionMap<LayerNorm<4, double>> && !ChannelMap<LayerNorm<>>);
  CHECK_THROWS_WITH_AS(layer_traits<ChannelShuffle>::output_shape(ChannelShuffle{4}, shape(6, 2, 2)),
                       doctest::Contains("ChannelShuffle"), shape_error);
  CHECK_THROWS_WITH_AS(layer_traits<ChannelShuffle>::output_shape(ChannelShuffle{0}, shape(6, 2, 2)),
                       doctest::Contains("groups is 0"), value_error);
  CHECK_THROWS_WITH_AS(layer_traits<ChannelShuffle>::output_shape(ChannelShuffle{2}, shape(6)), doctest::Contains("ChannelShuffle"),
                       shape_error);
  CHECK(!layer_traits<ChannelShuffle>::infer(shape(6)).ok());
}

TEST_CASE("ChannelSlice: channels of an image, features of a vector; the range errors name the op") {
  const shape in(5, 1, 2);
  std::vector<double> x(in.size() * 2);
  std::iota(x.begin(), x.end(), 0.0);
  const auto r = run_forward(ChannelSlice<>{1, 4}, in, 2, x, false);
  CHECK(r.out == shape(3, 1, 2));
  CHECK(r.y == std::vector<double>{2, 3, 4, 5, 6, 7, 12, 13, 14, 15, 16, 17});
  const auto f = run_forward(ChannelSlice<>{3, 5}, shape(5), 2, std::vector<double>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, false);
  CHECK(f.out == shape(2));
  CHECK(f.y == std::vector<double>{3, 4, 8, 9});
  // torch.chunk(x, 2, dim=1) of 6 channels: [0, 3) and [3, 6)
  CHECK(layer_traits<ChannelSlice<0, 3>>::infer(shape(6, 4, 4)).out == shape(3, 4, 4));
  CHECK(layer_traits<ChannelSlice<3, 6>>::infer(shape(6)).out == shape(3));
  CHECK(!layer_traits<ChannelSlice<3, 7>>::infer(shape(6, 4, 4)).ok());
  auto refuses = [](auto l, shape s, const char* what) {
    CAPTURE(what);
    CHECK_THROWS_WITH_AS(layer_traits<decltype(l)>::output_shape(l, s), doctest::Contains(what), shape_error);
  };
  refuses(ChannelSlice<>{2, 2}, shape(4, 2, 2), "ChannelSlice: the range [2, 2)");
  refuses(ChannelSlice<>{3, 1}, shape(4), "ChannelSlice: the range [3, 1)");
  refuses(ChannelSlice<>{1, 5}, shape(4, 2, 2), "of the 4 channels of input [4,2,2]");
  refuses(ChannelSlice<>{0, 2}, shape(), "ChannelSlice needs a rank-1 or rank-3 input");
  refuses(ChannelSlice<>{}, shape(4), "ChannelSlice: the range [0, 0)");
  refuses(ChannelSlice<1, 3>{2, 3}, shape(4), "ChannelSlice<1, 3>: its fields hold the range [2, 3)");
  CHECK_THROWS_AS((dynamic_form<ChannelSlice<1, 3>>::from_dynamic(ChannelSlice<>{0, 2}, "layer 4")), shape_error);
  CHECK(dynamic_form<ChannelSlice<1, 3>>::from_dynamic(ChannelSlice<>{1, 3}, "layer 4").end == 3);
}

TEST_CASE("LayerNorm against torch (float64 and float32; LayerNorm2d and nn.LayerNorm), defaults, errors") {
  {
    const auto ln = ln2d();
    const shape in(4, 2, 3);
    const auto x = pattern(48, 37, 23, 11, 8);
    check_values(run_forward(ln, in, 2, x, false).y, ln2d_y, 1e-14);
    auto g = ln;
    zero_parameters(g);
    check_values(backward_dx(ln, in, 2, x, pattern(48, 29, 17, 8, 4), &g), ln2d_dx, 1e-13);
    check_values(g.gamma, ln2d_dgamma, 1e-13);
    check_values(g.beta, ln2d_dbeta, 1e-15);
    // float: the network's scalar, within a few float ulps of torch's float32 kernel
    const auto lnf = layer_norm<dyn, float>({1.0, 1.25, 1.5, 1.75}, {-0.25, -0.125, 0.0, 0.125}, 1e-6);
    std::vector<float> xf(x.begin(), x.end()), yf(48), scratch(8);
    layer_traits<LayerNorm<dyn, float>>::forward(lnf, forward_args<float>{in, in, 2, xf.data(), yf.data(), nullptr, scratch.data()});
    for (std::size_t i = 0; i < 48; ++i) CHECK(yf[i] == doctest::Approx(ln2d_y32[i]).epsilon(1e-6));
  }
  {
    const auto ln = ln1d();
    const auto x = pattern(15, 41, 19, 9, 4);
    check_values(run_forward(ln, shape(5), 3, x, false).y, ln1d_y, 1e-14);
    auto g = ln;
    zero_parameters(g);
    check_values(backward_dx(ln, shape(5), 3, x, pattern(15, 29, 17, 8, 4), &g), ln1d_dx, 1e-13);
    check_values(g.gamma, ln1d_dgamma, 1e-13);
    check_values(g.beta, ln1d_dbeta, 1e-15);
  }
  CHECK(LayerNorm<>{}.eps == 1e-6);  // ConvNeXt's
  LayerNorm<> d;
  std::mt19937_64 rng(1);
  layer_traits<LayerNorm<>>::init(d, shape(3, 2, 2), rng);
  CHECK(d.gamma == vec<float>({1, 1, 1}));
  CHECK(d.beta == vec<float>({0, 0, 0}));
  CHECK(layer_traits<LayerNorm<>>::parameters(d).size() == 2);
  using Tr = layer_traits<LayerNorm<dyn, double>>;
  CHECK_THROWS_WITH_AS(Tr::output_shape(layer_norm({1, 1}, {0, 0, 0}, 1e-6), shape(2)), doctest::Contains("LayerNorm: beta has 3"),
                       shape_error);
  CHECK_THROWS_WITH_AS(Tr::output_shape(layer_norm({1, 1}, {0, 0}, 1e-6), shape(3, 2, 2)),
                       doctest::Contains("LayerNorm: gamma has 2 elements, expected 3"), shape_error);
  CHECK_THROWS_WITH_AS(Tr::output_shape(layer_norm({1, 1}, {0, 0}, 0.0), shape(2)), doctest::Contains("eps"), value_error);
  CHECK_THROWS_WITH_AS(Tr::output_shape(layer_norm({1, 1}, {0, 0}, std::nan("")), shape(2)), doctest::Contains("eps"), value_error);
  using Tr3 = layer_traits<LayerNorm<3, double>>;
  CHECK_THROWS_WITH_AS(Tr3::output_shape(layer_norm<3>({1, 1}, {0, 0}, 1e-6), shape(2)), doctest::Contains("LayerNorm<3>"),
                       shape_error);
  CHECK(!Tr::infer(shape()).ok());
  // a constant position: x - mu = 0 everywhere, y = beta (eps keeps it finite)
  const auto y = run_forward(layer_norm({2, 3}, {0.5, -1}, 1e-6), shape(2), 1, {7.0, 7.0}, false).y;
  CHECK(y == std::vector<double>{0.5, -1.0});
}

TEST_CASE("backward of the three ops matches central finite differences in double") {
  std::mt19937_64 r(91);
  for (int t = 0; t < 6; ++t) {
    CAPTURE(t);
    const std::size_t g = 1 + r() % 3, C = g * (1 + r() % 3), H = 1 + r() % 3, W = 1 + r() % 3, batch = 1 + r() % 3;
    const shape img(C, H, W);
    check_backward(ChannelShuffle{g}, img, batch, randn(batch * img.size(), r), r);
    const std::size_t b = r() % C, e = b + 1 + r() % (C - b);
    check_backward(ChannelSlice<>{b, e}, img, batch, randn(batch * img.size(), r), r);
    check_backward(ChannelSlice<>{b, e}, shape(C), batch, randn(batch * C, r), r);
    LayerNorm<dyn, double> ln;
    ln.gamma = tensor<double, 1>::from_shape({C + 1});
    ln.beta = tensor<double, 1>::from_shape({C + 1});
    for (std::size_t c = 0; c <= C; ++c) ln.gamma(c) = randn(1, r)[0], ln.beta(c) = randn(1, r)[0];
    ln.eps = 1e-5;
    check_backward(ln, shape(C + 1, H, W), batch, randn(batch * (C + 1) * H * W, r, 2.0), r);
    check_backward(ln, shape(C + 1), batch, randn(batch * (C + 1), r, 2.0), r);
  }
}

namespace {
using ChannelNet = Sequential<Input<4, 3, 3>, Conv2D<8, 3, 1, 1>, ReLU, ChannelShuffle, ChannelSlice<2, 6>, LayerNorm<4>,
                              Conv2D<6, 1>, ReLU, ChannelShuffle, Flatten, Dense<10>, LayerNorm<10>, Dense<3>>;
ChannelNet channel_net(std::uint64_t seed) {
  ChannelNet n;
  initialize(n, seed);
  n.layer<2>().groups = 2;
  n.layer<7>().groups = 3;
  std::mt19937_64 r(seed);
  for (auto& v : n.layer<4>().gamma) v = float(1 + 0.3 * randn(1, r)[0]);
  for (auto& v : n.layer<4>().beta) v = float(0.2 * randn(1, r)[0]);
  n.layer<10>().eps = 1e-5;
  return n;
}
template <class T = float>
xt::xarray<T> channel_input(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 r(seed);
  xt::xarray<T> x = xt::xarray<T>::from_shape({n, 4, 3, 3});
  for (auto& v : x) v = T(randn(1, r)[0]);
  return x;
}
}  // namespace

TEST_CASE("static and dynamic networks with the three ops agree bitwise; from_dynamic and network_cast round-trip") {
  const auto net = channel_net(3);
  const auto x = channel_input(5, 4);
  auto d = to_dynamic(net);
  CHECK(d.layer_name(2) == "ChannelShuffle");
  CHECK(d.layer_name(3) == "ChannelSlice");
  CHECK(d.layer_name(4) == "LayerNorm");
  CHECK(d.shape_at(4) == shape(4, 3, 3));
  CHECK(std::get<ChannelSlice<>>(d.layer(3)).begin == 2);
  const auto y = forward(net, x);
  check_bitwise(y, forward(d, x));
  check_bitwise(y, forward(execution::par, d, x));
  const auto back = from_dynamic<ChannelNet>(d);
  CHECK(back.layer<7>().groups == 3);
  check_bitwise(y, forward(back, x));
  const auto nd = network_cast<double>(d);
  CHECK(std::get<LayerNorm<dyn, double>>(nd.layer(10)).eps == 1e-5);
  const auto yd = forward(nd, channel_input<double>(5, 4));
  double worst = 0;
  for (std::size_t i = 0; i < y.size(); ++i) worst = std::max(worst, std::abs(double(y.data()[i]) - yd.data()[i]));
  CHECK(worst < 1e-4);
  // a DynamicNetwork built directly refuses a slice past its input, naming the op
  DynamicNetwork bad(shape(3, 2, 2));
  CHECK_THROWS_WITH_AS(bad.add(ChannelSlice<>{1, 4}), doctest::Contains("ChannelSlice"), shape_error);
}

TEST_CASE("codegen: the three ops' spellings and fields; freestanding gathers the channel maps, refuses LayerNorm") {
  const auto net = channel_net(5);
  const std::string h = io::generate_header(net, {.name = "chan", .ns = "", .source = ""});
  for (const char* t : {"nnlens::ChannelShuffle", "nnlens::ChannelSlice<2, 6>", "nnlens::LayerNorm<4>", "nnlens::LayerNorm<10>",
                        ".groups = 0x1p+1;", ".groups = 0x1.8p+1;", ".eps = "})
    CHECK_MESSAGE(h.find(t) != std::string::npos, t);
  codegen_context c("double");
  CHECK(codegen_rule<LayerNorm<dyn, double>>::type(ln1d(), c) == "nnlens::LayerNorm<5, double>");
  // freestanding: the channel maps by their source tables; against the host forward
  Sequential<Input<6, 2, 2>, ChannelShuffle, ChannelSlice<1, 5>, Flatten, Dense<3>> fw_net;
  initialize(fw_net, 6);
  fw_net.layer<0>().groups = 3;
  const std::string f = io::generate_freestanding_header(to_dynamic(fw_net), {.name = "chan", .ns = "", .source = ""});
  CHECK(f.find("nnlens::fw::gather_channels(x, 6, 4,") != std::string::npos);
  CHECK(f.find("nnlens::fw::gather_channels(a, 4, 4,") != std::string::npos);
  CHECK(f.find("0, 2, 4, 1, 3, 5,") != std::string::npos);  // the shuffle's sources
  CHECK(f.find("1, 2, 3, 4,") != std::string::npos);        // the slice's
  const auto x = channel_input(1, 7);
  std::vector<float> xs(24), a(24), b(16);
  for (std::size_t i = 0; i < 24; ++i) xs[i] = x.data()[i] * (i % 2 ? 1.f : -1.f);
  const std::size_t shuffle_src[] = {0, 2, 4, 1, 3, 5}, slice_src[] = {1, 2, 3, 4};
  fw::gather_channels(xs.data(), 6, 4, shuffle_src, a.data());
  fw::gather_channels(a.data(), 4, 4, slice_src, b.data());
  Sequential<Input<6, 2, 2>, ChannelShuffle, ChannelSlice<1, 5>> host;
  host.layer<0>().groups = 3;
  xt::xarray<float> X = xt::xarray<float>::from_shape({1, 6, 2, 2});
  std::copy(xs.begin(), xs.end(), X.begin());
  const auto want = forward(host, X);
  REQUIRE(want.size() == 16);
  for (std::size_t i = 0; i < 16; ++i) CHECK(b[i] == want.data()[i]);
  Sequential<Input<4>, Dense<3>, LayerNorm<3>, Dense<2>> with_ln;
  initialize(with_ln, 2);
  try {
    (void)io::generate_freestanding_header(to_dynamic(with_ln), {.name = "x", .ns = "", .source = ""});
    FAIL("no error");
  } catch (const value_error& e) {
    const std::string w = e.what();
    CAPTURE(w);
    CHECK(w.find("layer 1 (LayerNorm)") != std::string::npos);
    CHECK(w.find("no freestanding form") != std::string::npos);
    CHECK(w.find("sqrt") != std::string::npos);
  }
}

TEST_CASE("ExactLine: a channel shuffle or slice adds no breaks (the same as the net with its Dense rows permuted); "
          "LayerNorm is refused") {
  // A: conv -> ReLU -> shuffle(2) -> slice [1, 4) -> Flatten -> Dense;  B: conv -> ReLU -> Flatten ->
  // Dense whose rows read the same conv channels (shuffle of 4 by 2: 0 2 1 3; slice: 2 1 3)
  using A = Sequential<Input<2, 2, 2>, Conv2D<4, 1, 1, 0, 1, 1, double>, ReLU, ChannelShuffle, ChannelSlice<1, 4>, Flatten, Dense<2, double>>;
  using B = Sequential<Input<2, 2, 2>, Conv2D<4, 1, 1, 0, 1, 1, double>, ReLU, Flatten, Dense<2, double>>;
  A a;
  initialize(a, 11);
  a.layer<2>().groups = 2;
  B b;
  b.layer<0>() = a.layer<0>();
  const std::size_t src[] = {2, 1, 3};  // output channel k of the slice is conv channel src[k]
  b.layer<3>().W = tensor<double, 2>::from_shape({16, 2});
  b.layer<3>().W.fill(0.0);
  b.layer<3>().b = a.layer<5>().b;
  for (std::size_t k = 0; k < 3; ++k)
    for (std::size_t p = 0; p < 4; ++p)
      for (std::size_t o = 0; o < 2; ++o) b.layer<3>().W(src[k] * 4 + p, o) = a.layer<5>().W(k * 4 + p, o);
  std::mt19937_64 r(12);
  const auto P = randn(8, r, 2.0), Q = randn(8, r, 2.0);
  const auto ra = exact_line(a, P, Q), rb = exact_line(b, P, Q), rd = exact_line(to_dynamic(a), P, Q);
  CHECK(ra.t.size() > 2);  // the ReLUs split the segment
  CHECK(ra.t == rb.t);
  CHECK(rd.t == ra.t);
  for (std::size_t j = 0; j < ra.t.size(); ++j) {
    xt::xarray<double> x = xt::xarray<double>::from_shape({1, 2, 2, 2});
    for (std::size_t i = 0; i < 8; ++i) x.data()[i] = P[i] + ra.t[j] * (Q[i] - P[i]);
    const auto y = forward(a, x);
    for (std::size_t o = 0; o < 2; ++o) CHECK(ra.output(j)[o] == doctest::Approx(y.data()[o]).epsilon(1e-12));
  }
  Sequential<Input<3>, Dense<4, double>, ReLU, LayerNorm<4, double>, Dense<2, double>> ln;
  initialize(ln, 8);
  try {
    (void)exact_line(to_dynamic(ln), std::vector<double>{0, 0, 0}, std::vector<double>{1, 2, 3});
    FAIL("no error");
  } catch (const logic_error& e) {
    const std::string w = e.what();
    CAPTURE(w);
    CHECK(w.find("layer 2 (LayerNorm)") != std::string::npos);
    CHECK(w.find("not piecewise-linear") != std::string::npos);
  }
  static_assert(PiecewiseLinearLayer<ChannelShuffle> && PiecewiseLinearLayer<ChannelSlice<>> && !PiecewiseLinearLayer<LayerNorm<>>);
}

namespace {
Dense<1, double> dense_row(std::vector<double> w) {
  Dense<1, double> d;
  d.W = tensor<double, 2>::from_shape({w.size(), 1});
  for (std::size_t i = 0; i < w.size(); ++i) d.W(i, 0) = w[i];
  d.b = tensor<double, 1>::from_shape({1});
  d.b(0) = 0;
  return d;
}
}  // namespace

TEST_CASE("NNSlicer: a channel map votes into its source neuron; LayerNorm by its local slope gamma / s") {
  SUBCASE("shuffle(2) of 4 channels then slice [1, 3) then y = 2 f0 + f1: hand-computed votes") {
    // sources: shuffle 0 2 1 3, slice 1 2 -> f0 = x2, f1 = x1.  Profile {0, 2} per input: every
    // mean is 1, y's is 3.  Sample x = (5, 3, -1, 7): Δx = (4, 2, -2, 6), y = 1, Δy = -2 (head -1);
    // Dense items 2 Δf0 = -4 (vote +1) and Δf1 = 2 (vote -1); each passes to its source with the
    // head of its own Δ: x2 (Δ -2) gets +1, x1 (Δ 2) gets -1, x0 and x3 nothing.
    Sequential<Input<4, 1, 1>, ChannelShuffle, ChannelSlice<1, 3>, Flatten, Dense<1, double>> net;
    net.layer<0>().groups = 2;
    net.layer<3>() = dense_row({2, 1});
    xt::xarray<double> prof = xt::zeros<double>({2, 4, 1, 1});
    for (std::size_t i = 4; i < 8; ++i) prof.data()[i] = 2.0;
    xt::xarray<double> X = xt::xarray<double>::from_shape({1, 4, 1, 1});
    X.data()[0] = 5.0, X.data()[1] = 3.0, X.data()[2] = -1.0, X.data()[3] = 7.0;
    for (auto g : {granularity::channel, granularity::element}) {
      const auto p = profile_network(net, prof, {.grain = g});
      const auto t = nnslicer(net, p, X, criterion::target(0), {.theta = 0});
      CHECK(t.neurons[0] == std::vector<std::int64_t>{0, -1, 1, 0});  // the input
      CHECK(t.neurons[1] == std::vector<std::int64_t>{0, 1, -1, 0});  // the shuffle's output
      CHECK(t.neurons[2] == std::vector<std::int64_t>{1, -1});        // the slice's
      const auto d = nnslicer(to_dynamic(net), profile_network(to_dynamic(net), prof, {.grain = g}), X, criterion::target(0),
                              {.theta = 0});
      CHECK(d.neurons == t.neurons);
    }
  }
  SUBCASE("the channel map rule per element of an image: element c P + p votes into f(c) P + p") {
    const std::vector<double> dx{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    sign_ctx c;
    c.in = shape(3, 2, 2), c.out = shape(3, 2, 2), c.element = true, c.dx = dx.data();
    std::vector<sign_item> it;
    sign_rule<ChannelShuffle>::items(ChannelShuffle{3}, c, 5, it);  // output channel 1 = input channel 1 (C 3, g 3)
    sign_rule<ChannelSlice<>>::items(ChannelSlice<>{1, 3}, c, 2, it);  // output channel 0 = input channel 1, position 2
    REQUIRE(it.size() == 2);
    CHECK(it[0].pred == 5);
    CHECK(it[0].c == 6.0);
    CHECK(it[1].pred == 6);
    CHECK(it[1].c == 7.0);
    CHECK(it[1].synapse == sign_item::none);
  }
  SUBCASE("LayerNorm's item: gamma[c] / s Δx per element; the mean over the positions at channel granularity") {
    const auto ln = layer_norm({2.0, -1.0}, {0.0, 0.0}, 1e-6);
    // [2, 1, 2]: positions p0 = (1, 3), p1 = (0, 4): s0 = sqrt(1 + eps), s1 = sqrt(4 + eps)
    const std::vector<double> x{1, 0, 3, 4}, dx{0.5, -0.25, 2.0, 1.0};
    const double s0 = std::sqrt(1 + 1e-6), s1 = std::sqrt(4 + 1e-6);
    sign_ctx c;
    c.in = c.out = shape(2, 1, 2);
    c.x = x.data(), c.dx = dx.data(), c.element = true;
    std::vector<sign_item> it;
    for (std::size_t n = 0; n < 4; ++n) sign_rule<LayerNorm<dyn, double>>::items(ln, c, n, it);
    REQUIRE(it.size() == 4);
    CHECK(it[0].c == doctest::Approx(2.0 / s0 * 0.5));
    CHECK(it[1].c == doctest::Approx(2.0 / s1 * -0.25));
    CHECK(it[2].c == doctest::Approx(-1.0 / s0 * 2.0));  // a negative gamma reverses the vote
    CHECK(it[3].c == doctest::Approx(-1.0 / s1 * 1.0));
    c.element = false;  // channel neurons: Δx per channel
    const std::vector<double> dxc{0.5, 2.0};
    c.dx = dxc.data();
    it.clear();
    sign_rule<LayerNorm<dyn, double>>::items(ln, c, 0, it);
    sign_rule<LayerNorm<dyn, double>>::items(ln, c, 1, it);
    CHECK(it[0].c == doctest::Approx(2.0 * (1 / s0 + 1 / s1) / 2 * 0.5));
    CHECK(it[1].c == doctest::Approx(-1.0 * (1 / s0 + 1 / s1) / 2 * 2.0));
    CHECK(it[1].pred == 1);
  }
}

TEST_CASE("LRP: a channel map hands each element's relevance to its source; LayerNorm by the LN-rule") {
  SUBCASE("shuffle(2) then slice [1, 3) then z = a f0 + b f1: R = (0, b x1, a x2, 0)") {
    Sequential<Input<4, 1, 1>, ChannelShuffle, ChannelSlice<1, 3>, Flatten, Dense<1, double>> net;
    net.layer<0>().groups = 2;
    net.layer<3>() = dense_row({1.5, -0.5});
    xt::xarray<double> X = xt::xarray<double>::from_shape({1, 4, 1, 1});
    X.data()[0] = 0.3, X.data()[1] = -1.2, X.data()[2] = 0.8, X.data()[3] = 2.0;
    const auto R = relevance(net, X);
    REQUIRE(R.size() == 4);
    CHECK(R.data()[0] == 0.0);
    CHECK(R.data()[1] == doctest::Approx(-0.5 * -1.2).epsilon(1e-12));
    CHECK(R.data()[2] == doctest::Approx(1.5 * 0.8).epsilon(1e-12));
    CHECK(R.data()[3] == 0.0);
    const auto Rd = relevance(to_dynamic(net), X);
    check_bitwise(R, Rd);
    // at the shuffle's output (layer 0): its channels 1 and 2 (the slice's) carry it
    const auto R1 = relevance(net, X, 0);
    CHECK(R1.data()[1] == doctest::Approx(1.5 * 0.8).epsilon(1e-12));
    CHECK(R1.data()[2] == doctest::Approx(-0.5 * -1.2).epsilon(1e-12));
  }
  SUBCASE("LayerNorm of 3 features then z = w . y: R_j = x_j / s (gamma_j w_j - mean_k gamma_k w_k)") {
    // y_k = gamma_k (x_k - mu) / s + beta_k; with s constant the map is linear, w_jk = gamma_k (δ_jk -
    // 1/3) / s, and R_k = w_k y_k at its output, so R_j = sum_k x_j w_jk / y_k R_k = sum_k x_j w_jk w_k
    // whatever beta is (beta absorbs its share: sum_j R_j = z - w . beta)
    Sequential<Input<3>, LayerNorm<3, double>, Dense<1, double>> net;
    net.layer<0>() = layer_norm<3>({1.0, -2.0, 0.5}, {0.25, -0.5, 0.125}, 1e-5);
    const std::vector<double> w{0.75, 1.25, -1.5}, g{1.0, -2.0, 0.5}, beta{0.25, -0.5, 0.125};
    net.layer<1>() = dense_row(w);
    const double x[3] = {0.4, -1.1, 2.3};
    xt::xarray<double> X = {{x[0], x[1], x[2]}};
    const double mu = (x[0] + x[1] + x[2]) / 3;
    const double var = ((x[0] - mu) * (x[0] - mu) + (x[1] - mu) * (x[1] - mu) + (x[2] - mu) * (x[2] - mu)) / 3;
    const double s = std::sqrt(var + 1e-5);
    const double m = (g[0] * w[0] + g[1] * w[1] + g[2] * w[2]) / 3;
    const auto R = relevance(net, X);
    double sum = 0, z = 0, wb = 0;
    for (std::size_t j = 0; j < 3; ++j) {
      CHECK(R.data()[j] == doctest::Approx(x[j] / s * (g[j] * w[j] - m)).epsilon(1e-10));
      sum += R.data()[j];
      const double y = g[j] * (x[j] - mu) / s + beta[j];
      z += w[j] * y, wb += w[j] * beta[j];
    }
    CHECK(sum == doctest::Approx(z - wb).epsilon(1e-10));
    // bias_redistribution: exactly conservative
    const auto Rb = relevance(net, X, lrp_input, {.bias_redistribution = true});
    CHECK(Rb.data()[0] + Rb.data()[1] + Rb.data()[2] == doctest::Approx(z).epsilon(1e-10));
    // an image LayerNorm: the same per position, every rule finite
    Sequential<Input<3, 2, 2>, LayerNorm<3, double>, Flatten, Dense<2, double>> img;
    initialize(img, 4);
    xt::xarray<double> Xi = xt::xarray<double>::from_shape({2, 3, 2, 2});
    std::mt19937_64 r(5);
    for (auto& v : Xi) v = randn(1, r)[0];
    for (const lrp_options& o : {lrp_options{}, lrp_options{.rule = lrp_rule::zplus}, lrp_options{.rule = lrp_rule::alpha_beta}}) {
      const auto Ri = relevance(img, Xi, lrp_input, o);
      for (double v : Ri) CHECK(std::isfinite(v));
      check_bitwise(Ri, relevance(to_dynamic(img), Xi, lrp_input, o));
    }
  }
}

TEST_CASE("int8 quantisation: the channel maps move the codes (their input's scale), LayerNorm runs in float") {
  const auto net = channel_net(12);
  const auto cal = channel_input(64, 13);
  const auto q = compress::quantize(net, cal);
  const auto qd = compress::quantize(to_dynamic(net), cal);
  // layers 2 (shuffle), 3 (slice) and 8 (shuffle) keep the scale of the tensor entering them
  for (std::size_t i : {2u, 3u, 8u}) {
    CAPTURE(i);
    CHECK(q.activation(i + 1).scale == q.activation(i).scale);
    CHECK(q.activation(i + 1).zero_point == q.activation(i).zero_point);
  }
  CHECK(q.activation(5).scale != q.activation(4).scale);  // LayerNorm: its own calibrated range
  const auto y = forward(net, cal), yq = q.forward(cal), yqd = qd.forward(cal);
  REQUIRE(y.size() == yq.size());
  double worst = 0, scale = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    worst = std::max(worst, std::abs(double(y.data()[i]) - double(yq.data()[i])));
    scale = std::max(scale, std::abs(double(y.data()[i])));
  }
  MESSAGE("int8 twin of a conv / shuffle / slice / LayerNorm net: worst |float - int8| " << worst << " of max |y| " << scale);
  CHECK(worst <= 0.1 * (1 + scale));
  check_bitwise(yq, yqd);
  // the int8 copy is the float copy of the codes
  std::vector<std::int8_t> codes(2 * 36), moved(2 * 36);
  for (std::size_t i = 0; i < codes.size(); ++i) codes[i] = std::int8_t(int(i) - 40);
  layer_traits<ChannelShuffle>::int8_forward(ChannelShuffle{2}, shape(4, 3, 3), shape(4, 3, 3), 2, codes.data(), moved.data(), 0);
  CHECK(moved[9] == codes[18]);  // output channel 1 = input channel 2
  CHECK(moved[36 + 27] == codes[36 + 27]);
}

TEST_CASE("coverage: the channel maps are not layers of neurons; LayerNorm is") {
  const auto net = channel_net(2);
  std::vector<std::string> names;
  for (const auto& c : coverage_layers(net)) names.push_back(c.name);
  CHECK(names == std::vector<std::string>{"0 Conv2D", "1 ReLU", "4 LayerNorm", "5 Conv2D", "6 ReLU", "9 Dense", "10 LayerNorm",
                                          "11 Dense"});
  CHECK(all_layers(net).size() == 12);
  // IDC's subject layer skips a channel map before the last weighted layer
  Sequential<Input<4, 2, 2>, Conv2D<4, 1>, ReLU, ChannelShuffle, Flatten, Dense<3>> n2;
  initialize(n2, 1);
  n2.layer<2>().groups = 2;
  CHECK(subject_layer(n2) == 1);
}
