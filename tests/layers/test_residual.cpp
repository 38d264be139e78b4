// Residual<Block<...>, Shortcut> and its run-time form DynamicResidual<T>: hand-computed cases,
// compile-time shape inference (and the inference errors when the branches differ), cache and
// scratch sizes, backward (dx through both branches, every inner parameter gradient) against
// central finite differences (MLP blocks, projection shortcuts, a ResNet-style conv block, a
// max-pool inside a block, Softmax inside a block, nested residuals, random run-time shapes),
// static vs DynamicNetwork (bitwise), from_dynamic round trips, shape errors naming the layer.
#include <doctest/doctest.h>

#include <nnlens/nnlens.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gradient_check.hpp"

using namespace nnlens;

using namespace nnlens_test;

namespace {
using D = Dense<dyn, double>;

D make_dense(std::size_t in, std::size_t out, std::mt19937_64& r) {
  D l;
  l.W = tensor<double, 2>::from_shape({in, out});
  l.b = tensor<double, 1>::from_shape({out});
  const double s = 1.0 / std::sqrt(double(in));
  for (auto& v : l.W) v = randn(1, r, s)[0];
  for (auto& v : l.b) v = randn(1, r, 0.3)[0];
  return l;
}

/// Random BatchNorm statistics everywhere inside a (possibly nested) layer, so BN is not ~identity.
template <class L>
void randomise(L& l, std::mt19937_64& r);
template <class B>
void randomise_branch(B& b, std::mt19937_64& r) {
  if constexpr (requires { b.layers; }) std::apply([&](auto&... ls) { (randomise(ls, r), ...); }, b.layers);
}
template <class L>
void randomise(L& l, std::mt19937_64& r) {
  if constexpr (requires { l.running_var; }) {
    std::uniform_real_distribution<double> pos(0.3, 2.0);
    for (auto& v : l.gamma) v = 1 + 0.3 * randn(1, r)[0];
    for (auto& v : l.beta) v = randn(1, r)[0];
    for (auto& v : l.running_mean) v = 0.2 * randn(1, r)[0];
    for (auto& v : l.running_var) v = pos(r);
  } else if constexpr (requires { l.block; }) {
    randomise_branch(l.block, r);
    randomise_branch(l.shortcut, r);
  }
}

template <class Net>
xt::xarray<network_scalar_t<Net>> random_batch(std::size_t n, std::uint64_t seed) {
  using T = network_scalar_t<Net>;
  std::mt19937_64 r(seed);
  auto x = xt::xarray<T>::from_shape(Net::input_shape.with_batch(n));
  for (auto& v : x) v = T(randn(1, r)[0]);
  return x;
}

constexpr bool says(const shape_check& c, std::string_view what) { return !c.ok() && std::string_view(c.error).find(what) != std::string_view::npos; }

using ResMLP = Residual<Block<Dense<6>, ReLU, Dense<6>>>;
using ProjMLP = Residual<Block<Dense<8>, LeakyReLU, Dense<4>>, Block<Dense<4>>>;
using ResConv = Residual<Block<Conv2D<8, 3, 2, 1>, BatchNorm<>, ReLU, Conv2D<8, 3, 1, 1>, BatchNorm<>>,
                         Block<Conv2D<8, 1, 2>, BatchNorm<>>>;
}  // namespace

TEST_CASE("Residual: hand-computed forward and backward (identity and projection shortcuts)") {
  Residual<Block<Dense<2, double>>> r;
  r.block.layer<0>().W = {{1.0, 2.0}, {3.0, 4.0}};
  r.block.layer<0>().b = {0.5, -1.0};
  const std::vector<double> x{1.0, -1.0}, dy{1.0, 1.0};
  // x W + b = [1 - 3 + 0.5, 2 - 4 - 1] = [-1.5, -3]; + x
  auto f = run_forward(r, shape(2), 1, x, true);
  CHECK(f.y == std::vector<double>{-0.5, -4.0});
  CHECK(f.cache == std::vector<double>{-1.5, -3.0});  // the block's activation is kept for backward
  std::vector<double> dx(2), scratch(layer_traits<decltype(r)>::scratch_size(&r, shape(2), shape(2), 1));
  auto g = r;
  zero_parameters(g);
  using R1 = decltype(r);
  layer_traits<R1>::backward(r, backward_args<double>{shape(2), shape(2), 1, x.data(), f.y.data(), dy.data(), f.cache.data(), dx.data(), scratch.data()},
                             &g);
  CHECK(dx == std::vector<double>{3.0 + 1.0, 7.0 + 1.0});  // dy W^T = [1+2, 3+4], plus dy
  CHECK(g.block.layer<0>().W == tensor<double, 2>{{1.0, 1.0}, {-1.0, -1.0}});
  CHECK(g.block.layer<0>().b == tensor<double, 1>{1.0, 1.0});

  Residual<Block<Dense<2, double>>, Block<Dense<2, double>>> p;
  p.block = r.block;
  p.shortcut.layer<0>().W = {{0.0, 1.0}, {1.0, 0.0}};  // swaps the two features
  p.shortcut.layer<0>().b = {0.0, 0.25};
  auto fp = run_forward(p, shape(2), 1, x, false);
  CHECK(fp.y == std::vector<double>{-1.5 - 1.0, -3.0 + 1.0 + 0.25});
}

TEST_CASE("Residual: compile-time shape inference, sizes and traits") {
  using Tr = layer_traits<ResMLP>;
  static_assert(Tr::infer(shape(6)).out == shape(6));
  static_assert(says(Tr::infer(shape(5)), "different feature counts"));
  static_assert(says(Tr::infer(shape(6, 1, 1)), "flat (rank-1)"));  // the inner Dense's own reason
  static_assert(layer_traits<ProjMLP>::infer(shape(3)).out == shape(4));
  static_assert(layer_traits<ResConv>::infer(shape(4, 8, 8)).out == shape(8, 4, 4));
  static_assert(says(layer_traits<Residual<Block<Conv2D<8, 3, 2, 1>>>>::infer(shape(4, 8, 8)), "different channel counts"));
  static_assert(says(layer_traits<Residual<Block<Conv2D<4, 3, 2, 1>>>>::infer(shape(4, 8, 8)), "different spatial sizes"));
  static_assert(says(layer_traits<Residual<Block<Flatten>>>::infer(shape(2, 2, 2)), "different ranks"));
  static_assert(layer_traits<Residual<Block<>>>::infer(shape(3, 2, 1)).out == shape(3, 2, 1));

  // cache: every inner activation + inner caches; scratch: two ping-pong buffers + inner maxima
  static_assert(Tr::cache_size(nullptr, shape(6), shape(6)) == 6 + 6 + 6);
  static_assert(Tr::scratch_size(nullptr, shape(6), shape(6), 3) == 2 * 6 * 3);
  static_assert(layer_traits<ProjMLP>::cache_size(nullptr, shape(3), shape(4)) == 8 + 8 + 4 + 4);
  static_assert(layer_traits<ProjMLP>::scratch_size(nullptr, shape(3), shape(4), 2) == 2 * 8 * 2);
  using PoolRes = Residual<Block<MaxPool2D<3, 1, 1>, Conv2D<2, 1>>>;
  constexpr std::size_t pool_cache = layer_traits<MaxPool2D<3, 1, 1>>::cache_size(nullptr, shape(2, 4, 4), shape(2, 4, 4));
  static_assert(pool_cache > 0);
  static_assert(layer_traits<PoolRes>::cache_size(nullptr, shape(2, 4, 4), shape(2, 4, 4)) == 32 + 32 + pool_cache);
  using Net = Sequential<Input<4, 8, 8>, ResConv, ReLU, GlobalAvgPool, Flatten, Dense<3>>;
  static_assert(Net::shapes[1] == shape(8, 4, 4));
  static_assert(inference_workspace_v<Net> > 0);  // a compile-time constant through the residual

  static_assert(HasParameters<ResMLP>);
  static_assert(!HasParameters<Residual<Block<ReLU, Flatten>>>);
  static_assert(Tr::parameter_tensors == 4);
  static_assert(layer_traits<ResConv>::parameter_tensors == 2 * 4 + 2 * 2);
  static_assert(layer_traits<Residual<Block<Dropout, Dense<3>>>>::inference_only);
  static_assert(!Tr::inference_only);
  static_assert(std::is_same_v<ResMLP::scalar_type, float>);
  static_assert(std::is_void_v<Residual<Block<ReLU>>::scalar_type>);
  static_assert(std::is_same_v<rebind_scalar_t<ProjMLP, double>,
                               Residual<Block<Dense<8, double>, LeakyReLU, Dense<4, double>>, Block<Dense<4, double>>>>);
  static_assert(std::is_same_v<dynamic_form_t<rebind_scalar_t<ResConv, double>>, DynamicResidual<double>>);
  static_assert(std::is_same_v<dynamic_form_t<Residual<Block<ReLU>>>, DynamicResidual<float>>);
}

TEST_CASE("Residual: init, parameter order (block, then shortcut)") {
  auto r = initialised<ProjMLP>(shape(6), 3);
  CHECK(r.block.layer<0>().W.shape() == std::array<std::size_t, 2>{6, 8});
  CHECK(r.block.layer<2>().W.shape() == std::array<std::size_t, 2>{8, 4});
  CHECK(r.shortcut.layer<0>().W.shape() == std::array<std::size_t, 2>{6, 4});
  auto r2 = initialised<ProjMLP>(shape(6), 3);
  CHECK(r2.shortcut.layer<0>().W == r.shortcut.layer<0>().W);  // seeded
  auto ps = layer_traits<ProjMLP>::parameters(r);
  static_assert(ps.size() == 6);
  CHECK(ps[0].data() == r.block.layer<0>().W.data());
  CHECK(ps[1].data() == r.block.layer<0>().b.data());
  CHECK(ps[2].data() == r.block.layer<2>().W.data());
  CHECK(ps[4].data() == r.shortcut.layer<0>().W.data());
  CHECK(ps[5].size() == 4);
  const auto& cr = r;
  auto cps = layer_traits<ProjMLP>::parameters(cr);
  static_assert(std::is_same_v<decltype(cps)::value_type, std::span<const float>>);
  CHECK(cps[3].data() == r.block.layer<2>().b.data());
}

TEST_CASE("Residual backward matches finite differences (static blocks)") {
  std::mt19937_64 r(31);
  SUBCASE("MLP block, identity shortcut") {
    using R = rebind_scalar_t<ResMLP, double>;
    check_backward(initialised<R>(shape(6), 1), shape(6), 3, randn(18, r), r);
  }
  SUBCASE("MLP block, projection shortcut") {
    using R = rebind_scalar_t<ProjMLP, double>;
    check_backward(initialised<R>(shape(5), 2), shape(5), 2, randn(10, r), r);
  }
  SUBCASE("ResNet downsampling block: conv 3x3/2 + BN + ReLU + conv + BN, shortcut conv 1x1/2 + BN") {
    using R = rebind_scalar_t<ResConv, double>;
    auto l = initialised<R>(shape(3, 6, 6), 3);
    randomise(l, r);
    check_backward(l, shape(3, 6, 6), 2, randn(2 * 108, r), r);
  }
  SUBCASE("a max-pool inside the block (an inner cache)") {
    using R = Residual<Block<MaxPool2D<3, 1, 1>, Conv2D<2, 1, 1, 0, 1, 1, double>>>;
    auto l = initialised<R>(shape(2, 4, 3), 4);
    check_backward(l, shape(2, 4, 3), 2, randn(48, r), r);
  }
  SUBCASE("Softmax inside the block (its backward reads the inner output)") {
    using R = Residual<Block<Dense<5, double>, Softmax, Dense<4, double>>, Block<Affine<dyn, double>, Dense<4, double>>>;
    auto l = initialised<R>(shape(3), 5);
    l.shortcut.layer<0>().s = {0.5, -2.0, 1.5};
    l.shortcut.layer<0>().t = {0.1, 0.2, 0.3};
    check_backward(l, shape(3), 3, randn(9, r), r);
  }
  SUBCASE("nested residuals, empty block") {
    using Inner = Residual<Block<LeakyReLU, Dense<4, double>>, Block<Dense<4, double>>>;
    using R = Residual<Block<Dense<4, double>, Inner, BatchNorm<dyn, double>, Residual<Block<>>, Dense<4, double>>>;
    auto l = initialised<R>(shape(4), 6);
    randomise(l, r);
    l.block.layer<1>().block.layer<0>().alpha = 0.3;
    check_backward(l, shape(4), 2, randn(8, r), r);
    check_backward(Residual<Block<>>{}, shape(2, 1, 3), 2, randn(12, r), r);  // y = 2x
    auto f = run_forward(Residual<Block<>>{}, shape(3), 1, {1.0, -2.0, 0.5}, false);
    CHECK(f.y == std::vector<double>{2.0, -4.0, 1.0});
  }
}

TEST_CASE("DynamicResidual backward matches finite differences on random shapes") {
  std::mt19937_64 r(57);
  for (int t = 0; t < 8; ++t) {
    const std::size_t F = 2 + r() % 5, H = 1 + r() % 6, batch = 1 + r() % 3;
    CAPTURE(t);
    DynamicResidual<double> res;
    res.block.layers = {make_dense(F, H, r), LeakyReLU{0.2}, make_dense(H, F, r)};
    if (t % 2) res.shortcut.layers = {make_dense(F, H, r), Clamp{-0.7, 0.9}, make_dense(H, F, r)};
    if (t % 4 == 3) {  // a nested run-time residual in the block
      DynamicResidual<double> inner;
      inner.block.layers = {make_dense(F, F, r), Identity{}};
      res.block.layers.push_back(LeakyReLU{0.2});
      res.block.layers.push_back(inner);
    }
    check_backward(res, shape(F), batch, randn(F * batch, r), r);
    CHECK(layer_traits<DynamicResidual<double>>::parameters(res).size() == 4u + (t % 2 ? 4u : 0u) + (t % 4 == 3 ? 2u : 0u));
  }
}

TEST_CASE("residual networks: static and dynamic agree bitwise (gradients to 1e-12); from_dynamic round-trips") {
  SUBCASE("residual MLP") {
    using Net = Sequential<Input<5>, Dense<6>, ReLU, ResMLP, ReLU, ProjMLP, ReLU, Residual<Block<ReLU>>, Dense<3>>;
    Net net;
    initialize(net, 8);
    auto x = random_batch<Net>(9, 1);
    auto d = to_dynamic(net);
    CHECK(d.layer_name(2) == "Residual");
    CHECK(d.shape_at(5) == shape(4));
    CHECK(parameter_count(d) == parameter_count(net));
    const auto y = forward(net, x);
    check_bitwise(y, forward(d, x));
    check_bitwise(y, forward(execution::par, net, x));
    check_bitwise(y, forward(execution::par, d, x));
    auto back = from_dynamic<Net>(d);
    check_bitwise(y, forward(back, x));
    CHECK(back.layer<4>().shortcut.layer<0>().W == net.layer<4>().shortcut.layer<0>().W);
    auto d2 = d;  // a deep copy: the nested vectors are values
    std::get<DynamicResidual<float>>(d2.layer(2)).block.layers.clear();
    CHECK(std::get<DynamicResidual<float>>(d.layer(2)).block.layers.size() == 3);
  }
  SUBCASE("residual CNN (ResNet-style, projection shortcut with a 1x1 stride-2 conv)") {
    using Net = Sequential<Input<3, 8, 8>, Conv2D<4, 3, 1, 1>, BatchNorm<>, ReLU,
                           Residual<Block<Conv2D<4, 3, 1, 1>, BatchNorm<>, ReLU, Conv2D<4, 3, 1, 1>, BatchNorm<>>>, ReLU,
                           ResConv, ReLU, MaxPool2D<2>, Flatten, Dense<5>>;
    static_assert(Net::output_shape == shape(5));
    Net net;
    initialize(net, 2);
    std::mt19937_64 r(3);
    for_each_layer(net, [&](auto& l, auto, shape, shape) {
      if constexpr (requires { l.block; })
        randomise(l, r);
    });
    auto x = random_batch<Net>(5, 2);
    auto d = to_dynamic(net);
    const auto y = forward(net, x);
    check_bitwise(y, forward(d, x));
    check_bitwise(y, forward(execution::par, d, x));
    check_bitwise(y, forward(from_dynamic<Net>(d), x));
  }
  SUBCASE("gradients through trace/backward, static vs dynamic, and against finite differences") {
    using Net = rebind_scalar_t<Sequential<Input<4>, ProjMLP, ReLU, Residual<Block<Dense<4>, BatchNorm<>>>, Dense<2>>, double>;
    static_assert(std::is_same_v<std::tuple_element_t<2, Net::layer_types>,
                                 Residual<Block<Dense<4, double>, BatchNorm<dyn, double>>>>);
    Net net;
    initialize(net, 4);
    std::mt19937_64 r(4);
    randomise(net.layer<2>(), r);
    auto dn = to_dynamic(net);
    const std::size_t B = 3;
    auto x = random_batch<Net>(B, 6);
    trace<double> t1, t2;
    forward_trace(net, B, x.data(), t1);
    forward_trace(dn, B, x.data(), t2);
    const auto c = randn(B * 2, r);
    Net g1 = zeros_like(net);
    auto g2 = zeros_like(dn);
    std::vector<double> dx1(x.size()), dx2(x.size());
    backward(net, t1, c.data(), &g1, dx1.data());
    backward(dn, t2, c.data(), &g2, dx2.data());
    check_close(dx1, dx2);
    auto p1 = parameter_spans(g1);
    auto p2 = parameter_spans(g2);
    REQUIRE(p1.size() == p2.size());
    REQUIRE(p1.size() == 6 + 4 + 2);
    for (std::size_t k = 0; k < p1.size(); ++k) check_close(p1[k], p2[k]);
    auto loss = [&](const Net& n) {
      auto y = forward(n, x);
      double s = 0;
      for (std::size_t i = 0; i < y.size(); ++i) s += c[i] * y.data()[i];
      return s;
    };
    auto ps = parameter_spans(net);
    const double h = 1e-6;
    for (std::size_t k = 0; k < ps.size(); ++k)
      for (std::size_t i = 0; i < ps[k].size(); ++i) {
        const double w = ps[k][i];
        ps[k][i] = w + h;
        const double lp = loss(net);
        ps[k][i] = w - h;
        const double lm = loss(net);
        ps[k][i] = w;
        CHECK(p1[k][i] == doctest::Approx((lp - lm) / (2 * h)).epsilon(1e-6));
      }
  }
}

TEST_CASE("residual shape errors name the layer and both shapes") {
  std::mt19937_64 r(1);
  auto dense = [&](std::size_t i, std::size_t o) {
    Dense<dyn> l;
    l.W = xt::ones<float>({i, o});
    l.b = xt::zeros<float>({o});
    return l;
  };
  DynamicNetwork d(shape(4));
  d.add(ReLU{});
  DynamicResidual<float> bad;
  bad.block.layers = {dense(4, 3)};
  CHECK_THROWS_WITH_AS(d.add(bad),
                       doctest::Contains("layer 1 (Residual): Residual: the block outputs [3] but the identity shortcut outputs [4]"),
                       shape_error);
  bad.shortcut.layers = {dense(4, 2)};
  CHECK_THROWS_WITH_AS(d.add(bad), doctest::Contains("the block outputs [3] but the shortcut outputs [2]"), shape_error);
  DynamicResidual<float> inner_bad;
  inner_bad.block.layers = {dense(4, 5), ReLU{}, dense(6, 4)};
  CHECK_THROWS_WITH_AS(d.add(inner_bad),
                       doctest::Contains("layer 1 (Residual): Residual block layer 2 (Dense): Dense: W has shape [6,4], expected [5,4]"),
                       shape_error);
  DynamicResidual<float> nested;  // the error of a nested residual carries both prefixes
  nested.block.layers = {inner_bad};
  CHECK_THROWS_WITH_AS(d.add(nested), doctest::Contains("Residual block layer 0 (Residual): Residual block layer 2 (Dense)"),
                       shape_error);
  DynamicResidual<float> bad_dropout;
  bad_dropout.shortcut.layers = {Dropout{2.0}};
  CHECK_THROWS_WITH_AS(d.add(bad_dropout), doctest::Contains("Residual shortcut layer 0 (Dropout): Dropout: p is 2"),
                       value_error);
  CHECK(d.size() == 1);
  DynamicResidual<float> ok;
  ok.block.layers = {dense(4, 5), ReLU{}, dense(5, 4)};
  d.add(ok);
  CHECK(d.output_shape() == shape(4));

  // a static Residual whose hand-set inner weights do not fit: the checked forward names it
  using Net = Sequential<Input<5>, Dense<4>, ProjMLP>;
  Net net;
  initialize(net, 1);
  net.layer<1>().shortcut.layer<0>().W = xt::zeros<float>({3, 4});
  xt::xarray<float> x = xt::zeros<float>({1, 5});
  CHECK_THROWS_WITH_AS(forward(net, x),
                       doctest::Contains("layer 1 (Residual): Residual shortcut layer 0 (Dense): Dense: W has shape [3,4], expected [4,4]"),
                       shape_error);

  // from_dynamic: the structure inside the residual must match the static type
  using S = Sequential<Input<4>, ReLU, Residual<Block<Dense<6>, ReLU, Dense<4>>>>;  // the network has 4 -> 5 first
  using S2 = Sequential<Input<4>, ReLU, Residual<Block<Dense<5>, ReLU, Dense<4>>, Block<Dense<4>>>>;
  using S3 = Sequential<Input<4>, ReLU, Residual<Block<Dense<5>, LeakyReLU, Dense<4>>>>;
  using S4 = Sequential<Input<4>, ReLU, Residual<Block<Dense<5>, Dense<4>>>>;
  using S5 = Sequential<Input<4>, ReLU, Residual<Block<Dense<5>, ReLU, Dense<4>>>>;
  CHECK_THROWS_WITH_AS(from_dynamic<S>(d), doctest::Contains("layer 1 (Residual): block layer 0 (Dense): Dense expects 6 outputs"),
                       shape_error);
  CHECK_THROWS_WITH_AS(from_dynamic<S2>(d),
                       doctest::Contains("layer 1 (Residual): shortcut: the static type has 1 layers, the network has 0"),
                       shape_error);
  CHECK_THROWS_WITH_AS(from_dynamic<S3>(d),
                       doctest::Contains("layer 1 (Residual): block layer 1 (LeakyReLU): the network has a ReLU layer here"),
                       shape_error);
  CHECK_THROWS_WITH_AS(from_dynamic<S4>(d), doctest::Contains("block: the static type has 2 layers, the network has 3"),
                       shape_error);
  auto s5 = from_dynamic<S5>(d);
  CHECK(s5.layer<1>().block.layer<2>().W == xt::ones<float>({5, 4}));
  DynamicNetwork d2(shape(4));
  d2.add(ReLU{});
  DynamicResidual<float> proj = ok;
  proj.shortcut.layers = {dense(4, 4)};
  d2.add(proj);
  CHECK_THROWS_WITH_AS(from_dynamic<S5>(d2),
                       doctest::Contains("layer 1 (Residual): shortcut: the static type has an identity shortcut, the network has 1"),
                       shape_error);
  CHECK_NOTHROW(from_dynamic<S2>(d2));
}
