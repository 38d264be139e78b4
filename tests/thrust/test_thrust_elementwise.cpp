// Element-wise and reshape-only ops on the thrust device system, run from their traits
// (core/properties.hpp: ElementwiseMap's scalar_map functor, reshape_only_v; relevance_rule's
// pass-through form; pwl_rule's knots / max_floor): LeakyReLU, HardTanh, Clamp, Dropout, Identity
// (and ReLU, Flatten) in forward, NNSlicer's profile, LRP, IDC preparation and ExactLine, each
// against the host (execution::seq) and against values worked out by hand.
// Tolerances: networks of element-wise / reshape-only ops only: bit-identical (the device runs the
// host's functor); with Dense / Conv2D in float: |thrust - host| <= 1e-5 (1 + max |host|) (the
// kernels sum in another order than the host GEMM), profile sums relative 1e-5, relevance 1e-4
// relative to 1 + max |R|, IDC centroids 1e-5; in double: forward 1e-12, relevance 1e-10, and
// ExactLine as tests/thrust/test_thrust_exactline.cpp (same pieces and stats, ratios within 1e-9,
// values 1e-6 relative); hand-made ExactLine breakpoints exactly.
#include <nnlens/thrust/coverage.hpp>  // first: it overloads detail::importance_pass (see its header)

#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <type_traits>
#include <variant>
#include <vector>

#include <nnlens/coverage/idc.hpp>
#include <nnlens/coverage/lrp.hpp>
#include <nnlens/exactline/line.hpp>
#include <nnlens/layers/all.hpp>
#include <nnlens/network/dynamic_network.hpp>
#include <nnlens/network/forward.hpp>
#include <nnlens/network/parameters.hpp>
#include <nnlens/nnslicer/profile.hpp>
#include <nnlens/thrust/default.hpp>
#include <nnlens/thrust/exactline.hpp>
#include <nnlens/thrust/forward.hpp>
#include <nnlens/thrust/profile.hpp>
#include <nnlens/thrust/relevance.hpp>

#include "thrust_test_util.hpp"

using namespace nnlens;
using namespace nnlens_thrust_test;

namespace {

// every op of this round in one MLP and one CNN (Clamp{-0.1, inf} after the pool: a max(x, c)
// that ExactLine fuses with the pool; LeakyReLU before the pool: not fusable)
template <class T>
using Mlp = Sequential<Input<12>, Dense<16, T>, LeakyReLU, Dense<16, T>, HardTanh, Dropout, Dense<12, T>, Clamp, Identity,
                       Dense<5, T>>;
template <class T>
using Cnn = Sequential<Input<2, 10, 10>, Conv2D<6, 3, 1, 0, 1, 1, T>, LeakyReLU, MaxPool2D<2>, Clamp, Conv2D<8, 3, 1, 0, 1, 1, T>,
                       HardTanh, Dropout, Flatten, Identity, Dense<4, T>>;
// weightless: every op is the host's functor on the device, nothing else
using Maps = Sequential<Input<3, 4, 5>, LeakyReLU, HardTanh, Dropout, Clamp, Identity, ReLU, Flatten>;

template <class T>
Mlp<T> make_mlp(std::uint64_t seed) {
  Mlp<T> n;
  initialize(n, seed);
  n.template layer<1>().alpha = 0.1;
  n.template layer<3>() = HardTanh{-0.3, 0.4};
  n.template layer<6>() = Clamp{-0.2, 0.25};
  return n;
}
template <class T>
Cnn<T> make_cnn(std::uint64_t seed) {
  Cnn<T> n;
  initialize(n, seed);
  n.template layer<1>().alpha = 0.2;
  n.template layer<3>() = Clamp{-0.1, std::numeric_limits<double>::infinity()};
  n.template layer<5>() = HardTanh{-0.25, 0.2};
  return n;
}
Maps make_maps() {
  Maps n;
  n.layer<0>().alpha = 0.25;
  n.layer<1>() = HardTanh{-2.0, 1.5};
  n.layer<3>() = Clamp{-1.0, 1.25};
  return n;
}

}  // namespace

TEST_CASE("thrust element-wise: the properties the backend reads") {
  static_assert(ElementwiseMap<ReLU> && ElementwiseMap<LeakyReLU> && ElementwiseMap<HardTanh> && ElementwiseMap<Clamp>);
  static_assert(!ElementwiseMap<Dense<4>> && !ElementwiseMap<Flatten> && !ElementwiseMap<PReLU<>> &&
                !ElementwiseMap<MaxPool2D<2>>);
  static_assert(reshape_only_v<Flatten> && reshape_only_v<Dropout> && reshape_only_v<Identity> && !reshape_only_v<ReLU>);
  static_assert(ThrustLayer<LeakyReLU> && ThrustLayer<HardTanh> && ThrustLayer<Clamp> && ThrustLayer<Dropout> &&
                ThrustLayer<Identity> && ThrustLayer<ReLU> && ThrustLayer<Flatten> && ThrustLayer<GlobalAvgPool> &&
                ThrustLayer<Softmax>);
  static_assert(ThrustLrpLayer<LeakyReLU> && ThrustLrpLayer<HardTanh> && ThrustLrpLayer<Clamp> && ThrustLrpLayer<Dropout> &&
                ThrustLrpLayer<Identity>);
  // the functors by hand, at and around the kinks (HardTanh open, Clamp closed at the bounds)
  const auto lk = layer_traits<LeakyReLU>::scalar_map(LeakyReLU{0.25});
  CHECK(lk(-2.0f) == -0.5f);
  CHECK(lk(3.0) == 3.0);
  CHECK(lk.grad(0.0, 4.0) == 1.0);  // the kink takes the slope alpha
  CHECK(lk.grad(1.0, 4.0) == 4.0);
  const auto ht = layer_traits<HardTanh>::scalar_map(HardTanh{-1, 2});
  const auto cl = layer_traits<Clamp>::scalar_map(Clamp{-1, 2});
  CHECK(ht(-3.0) == -1.0);
  CHECK(ht(2.5f) == 2.0f);
  CHECK(ht(0.5) == 0.5);
  CHECK(ht.grad(2.0, 3.0) == 0.0);
  CHECK(cl.grad(2.0, 3.0) == 3.0);
  CHECK(ht.grad(-1.0, 3.0) == 0.0);
  CHECK(cl.grad(-1.0, 3.0) == 3.0);
  CHECK(cl.grad(-1.5, 3.0) == 0.0);
  const auto r = layer_traits<ReLU>::scalar_map(ReLU{});
  CHECK(r(-1.0f) == 0.0f);
  CHECK(r.grad(0.0, 5.0) == 0.0);
}

TEST_CASE("thrust element-wise: forward of the weightless ops is bit-identical to the host's") {
  const Maps net = make_maps();
  auto x = random_x<float>(37, Maps::input_shape, 11, -3.f, 3.f);
  // the kinks and the bounds themselves, both zeros
  const float special[] = {0.f, -0.f, -2.f, 1.5f, -1.f, 1.25f, 2.f, -0.25f, 1e-30f, -1e-30f};
  for (std::size_t i = 0; i < std::size(special); ++i) x.data()[i * 7] = special[i];
  const auto h = forward(execution::seq, net, x);
  const auto d = forward(execution::thrust, net, x);
  CHECK(bit_identical(h, d));
  // by hand: LeakyReLU 0.25, HardTanh [-2, 1.5], Clamp [-1, 1.25], ReLU
  auto by_hand = [](float v) {
    v = v > 0 ? v : 0.25f * v;
    v = std::min(std::max(v, -2.f), 1.5f);
    v = std::min(std::max(v, -1.f), 1.25f);
    return std::max(v, 0.f);
  };
  for (std::size_t i = 0; i < x.size(); ++i) CHECK(d.data()[i] == by_hand(x.data()[i]));
  // double, a DynamicNetwork, a pass of 5 samples
  const auto xd = random_x<double>(23, Maps::input_shape, 12, -3., 3.);
  CHECK(bit_identical(forward(execution::seq, net, xd), forward(thrust_policy{.batch = 5}, to_dynamic(net), xd)));
  // each op alone (a Sequential of one op), float and double
  auto one = [&](auto op) {
    using L = decltype(op);
    Sequential<Input<60>, L> s;
    s.template layer<0>() = op;
    const auto xs = random_x<float>(9, shape(60), 13, -2.f, 2.f);
    CHECK(bit_identical(forward(execution::seq, s, xs), forward(execution::thrust, s, xs)));
    const auto xs2 = random_x<double>(9, shape(60), 14, -2., 2.);
    CHECK(bit_identical(forward(execution::seq, s, xs2), forward(execution::thrust, to_dynamic(s), xs2)));
  };
  one(LeakyReLU{-0.5});
  one(HardTanh{});
  one(HardTanh{0.0, 6.0});
  one(Clamp{-0.5, std::numeric_limits<double>::infinity()});
  one(Clamp{0.25, 0.25});
  one(Dropout{});
  one(Identity{});
}

TEST_CASE("thrust element-wise: forward and NNSlicer profile with Dense / Conv2D around the ops") {
  const auto mlp = make_mlp<float>(3);
  const auto xm = random_x<float>(70, shape(12), 4);
  CHECK(rel_diff(forward(execution::seq, mlp, xm), forward(thrust_policy{.batch = 16}, mlp, xm)) <= 1e-5);
  CHECK(rel_diff(forward(execution::seq, mlp, xm), forward(execution::thrust, to_dynamic(mlp), xm)) <= 1e-5);
  const auto cnn = make_cnn<float>(5);
  const auto xc = random_x<float>(40, Cnn<float>::input_shape, 6);
  CHECK(rel_diff(forward(execution::seq, cnn, xc), forward(thrust_policy{.batch = 16}, cnn, xc)) <= 1e-5);
  const auto mlpd = make_mlp<double>(7);
  const auto xmd = random_x<double>(50, shape(12), 8);
  CHECK(rel_diff(forward(execution::seq, mlpd, xmd), forward(execution::thrust, mlpd, xmd)) <= 1e-12);
  const auto cnnd = make_cnn<double>(9);
  const auto xcd = random_x<double>(30, Cnn<double>::input_shape, 10);
  CHECK(rel_diff(forward(execution::seq, cnnd, xcd), forward(execution::thrust, cnnd, xcd)) <= 1e-12);

  for (auto g : {granularity::element, granularity::channel}) {
    CAPTURE(int(g));
    CHECK(profile_diff(profile_network(execution::seq, mlp, xm, {.grain = g}),
                       profile_network(thrust_policy{.batch = 32}, mlp, xm, {.grain = g})) <= 1e-5);
    CHECK(profile_diff(profile_network(execution::seq, cnn, xc, {.grain = g}),
                       profile_network(thrust_policy{.batch = 32}, to_dynamic(cnn), xc, {.grain = g})) <= 1e-5);
    CHECK(profile_diff(profile_network(execution::seq, cnnd, xcd, {.grain = g}),
                       profile_network(execution::thrust, cnnd, xcd, {.grain = g})) <= 1e-12);
  }
  // the weightless net: every tensor is the host's bit for bit, so are the sums
  const Maps maps = make_maps();
  const auto xw = random_x<float>(33, Maps::input_shape, 15, -3.f, 3.f);
  CHECK(profile_diff(profile_network(execution::seq, maps, xw, {.grain = granularity::element}),
                     profile_network(thrust_policy{.batch = 64}, maps, xw, {.grain = granularity::element})) == 0.0);
}

TEST_CASE("thrust element-wise: LRP and IDC preparation pass relevance through the ops") {
  const auto mlpd = make_mlp<double>(17);
  const auto xmd = random_x<double>(25, shape(12), 18);
  const double dd = relevance_diff(mlpd, xmd, {.batch = 8});
  MESSAGE("relevance, MLP in double: worst relative difference " << dd);
  CHECK(dd <= 1e-10);
  const auto cnnd = make_cnn<double>(19);
  const auto xcd = random_x<double>(12, Cnn<double>::input_shape, 20);
  const double dc = relevance_diff(cnnd, xcd);
  MESSAGE("relevance, CNN in double: worst relative difference " << dc);
  CHECK(dc <= 1e-10);
  const auto cnn = make_cnn<float>(21);
  const auto xc = random_x<float>(12, Cnn<float>::input_shape, 22);
  const double fc = relevance_diff(to_dynamic(cnn), xc);
  MESSAGE("relevance, CNN in float: worst relative difference " << fc);
  CHECK(fc <= 1e-4);
  // pass-through by hand: R at the input of the Identity (layer 7) is R at its output
  const auto r7 = relevance(execution::thrust, mlpd, xmd, 7);
  const auto r6 = relevance(execution::thrust, mlpd, xmd, 6);
  CHECK(bit_identical(r7, r6));

  // IDC: LRP to a layer after an element-wise op, k-means on the host
  const auto mlp = make_mlp<float>(23);
  const auto x = random_x<float>(120, shape(12), 24);
  const auto z = forward(execution::seq, mlp, x);
  std::vector<std::size_t> y(120);
  for (std::size_t i = 0; i < y.size(); ++i) {
    const float* zi = z.data() + i * 5;
    y[i] = std::size_t(std::max_element(zi, zi + 5) - zi);
  }
  for (std::size_t layer : {std::size_t(1), std::size_t(4), std::size_t(7)}) {
    CAPTURE(layer);
    const idc ih = prepare_idc(execution::seq, mlp, x, y, {.layer = layer, .m = 3});
    const idc it = prepare_idc(thrust_policy{.batch = 32}, mlp, x, y, {.layer = layer, .m = 3});
    CHECK(ih.layer() == it.layer());
    CHECK(ih.training_inputs() == it.training_inputs());
    REQUIRE(ih.neurons() == it.neurons());
    CHECK(centroid_diff(ih, it) <= 1e-5);
    idc ch = ih, ct = ih;
    const auto xt2 = random_x<float>(40, shape(12), 25);
    CHECK(measure(execution::seq, mlp, xt2, ch).covered == measure(execution::thrust, mlp, xt2, ct).covered);
  }
}

TEST_CASE("thrust element-wise: ExactLine splits at the host's knots (by hand)") {
  // y = v * op(x) with x on the segment -2 -> 2: t = (k + 2) / 4 at each knot k inside (-2, 2)
  auto line = [](auto op) {
    Sequential<Input<1>, Dense<1, double>, decltype(op), Dense<1, double>> n;
    n.template layer<0>().W = {{1.0}};
    n.template layer<0>().b = {0.0};
    n.template layer<1>() = op;
    n.template layer<2>().W = {{3.0}};
    n.template layer<2>().b = {0.5};
    const auto d = exact_lines(execution::thrust, n, rows{{-2.0}}, rows{{2.0}});
    const auto h = exact_lines(execution::seq, n, rows{{-2.0}}, rows{{2.0}});
    check_same_lines(h, d);
    REQUIRE(d.size() == 1);
    return d[0].t;
  };
  CHECK(line(LeakyReLU{0.1}) == std::vector<double>{0.0, 0.5, 1.0});
  CHECK(line(LeakyReLU{1.0}) == std::vector<double>{0.0, 1.0});  // the identity: no knot
  CHECK(line(HardTanh{}) == std::vector<double>{0.0, 0.25, 0.75, 1.0});
  CHECK(line(HardTanh{-1.0, 3.0}) == std::vector<double>{0.0, 0.25, 1.0});  // 3 is past the end
  CHECK(line(Clamp{-0.5, std::numeric_limits<double>::infinity()}) == std::vector<double>{0.0, 0.375, 1.0});
  CHECK(line(Clamp{1.0, 1.0}) == std::vector<double>{0.0, 1.0});  // a constant
  CHECK(line(Dropout{}) == std::vector<double>{0.0, 1.0});
  CHECK(line(Identity{}) == std::vector<double>{0.0, 1.0});
  // the values at the points: 3 * HardTanh(x) + 0.5
  Sequential<Input<1>, Dense<1, double>, HardTanh, Dense<1, double>> n;
  n.layer<0>().W = {{1.0}};
  n.layer<0>().b = {0.0};
  n.layer<2>().W = {{3.0}};
  n.layer<2>().b = {0.5};
  const auto d = exact_lines(execution::thrust, to_dynamic(n), rows{{-2.0}}, rows{{2.0}});
  CHECK(d[0].values == std::vector<double>{-2.5, -2.5, 3.5, 3.5});
}

TEST_CASE("thrust element-wise: ExactLine on MLPs and CNNs against the host") {
  const auto mlpd = make_mlp<double>(31);
  const rows A = random_rows(40, 12, 32), B = random_rows(40, 12, 33);
  const auto h = exact_lines(execution::seq, mlpd, A, B);
  std::size_t pieces = check_same_lines(h, exact_lines(thrust_policy{.batch = 64}, mlpd, A, B)).pieces;
  line_options re;
  re.reanchor = true;
  pieces += check_same_lines(exact_lines(execution::seq, mlpd, A, B, re),
                             exact_lines(execution::thrust, to_dynamic(mlpd), A, B, re)).pieces;
  // float network, double segments (as_scalar), as the host converts it
  const auto mlp = make_mlp<float>(34);
  pieces += check_same_lines(exact_lines(execution::seq, mlp, A, B), exact_lines(execution::thrust, mlp, A, B)).pieces;

  const auto cnn = make_cnn<float>(35);
  const rows C = random_rows(12, 200, 36), D = random_rows(12, 200, 37);
  for (bool fuse : {true, false}) {
    CAPTURE(fuse);
    line_options o;
    o.fuse_max_pool = fuse;  // Clamp{-0.1, inf} after the pool: fused, or split on its own
    pieces += check_same_lines(exact_lines(execution::seq, cnn, C, D, o), exact_lines(thrust_policy{.batch = 40}, cnn, C, D, o)).pieces;
  }
  MESSAGE("ExactLine: " << pieces << " pieces compared");
  CHECK(pieces > 200);  // the ops do split the segments
}

TEST_CASE("thrust: every op of the run-time variant list has device kernels; GlobalAvgPool and Softmax") {
  []<class... Ls>(std::type_identity<std::variant<Ls...>>) {
    static_assert((ThrustLayer<Ls> && ...), "an op of DynamicNetwork's variant has no thrust kernels");
  }(std::type_identity<detail::dynamic_layer_list<float>::type>{});
  static_assert(PoolingWindow<GlobalAvgPool> && pool_reduction_v<GlobalAvgPool> == pool_reduce::mean && SampleMap<Softmax> &&
                !SampleMap<ReLU> && !PoolingWindow<Dense<3>>);
  // GlobalAvgPool (one mean window per plane) and Softmax (one work item per sample): the host's
  // arithmetic, so bit for bit on nets of them alone, except Softmax's exp on a GPU: CUDA's expf
  // is not glibc's, so there within 1e-7 (measured on an H200: 3.7e-9, one float ulp at most)
  using Pool = Sequential<Input<3, 4, 5>, GlobalAvgPool, Flatten>;
  using Heads = Sequential<Input<3, 4, 5>, GlobalAvgPool, Flatten, Softmax>;
  const auto xh = random_x<double>(21, Heads::input_shape, 40, -30, 30);
  CHECK(bit_identical(forward(execution::seq, Pool{}, xh), forward(thrust_policy{.batch = 4}, Pool{}, xh)));
  CHECK(bit_identical(forward(execution::seq, Pool{}, xh), forward(execution::thrust, to_dynamic(Pool{}), xh)));
#if THRUST_DEVICE_SYSTEM == THRUST_DEVICE_SYSTEM_CUDA
  CHECK(rel_diff(forward(execution::seq, Heads{}, xh), forward(thrust_policy{.batch = 4}, Heads{}, xh)) < 1e-7);
  CHECK(rel_diff(forward(execution::seq, Heads{}, xh), forward(execution::thrust, to_dynamic(Heads{}), xh)) < 1e-7);
#else
  CHECK(bit_identical(forward(execution::seq, Heads{}, xh), forward(thrust_policy{.batch = 4}, Heads{}, xh)));
  CHECK(bit_identical(forward(execution::seq, Heads{}, xh), forward(execution::thrust, to_dynamic(Heads{}), xh)));
#endif
  using L = Sequential<Input<2, 5, 5>, Conv2D<3, 3, 1, 1, 1, 1, double>, LeakyReLU, GlobalAvgPool, Flatten, Dense<4, double>>;
  L s;
  initialize(s, 41);
  const auto x = random_x<double>(9, L::input_shape, 42);
  CHECK(thrust_supported(s));
  CHECK(thrust_supported(to_dynamic(s)));
  CHECK(rel_diff(forward(execution::seq, s, x), forward(execution::thrust, to_dynamic(s), x)) <= 1e-12);
  for (granularity g : {granularity::channel, granularity::element})
    CHECK(profile_diff(profile_network(execution::seq, s, x, {.grain = g}), profile_network(execution::thrust, s, x, {.grain = g})) <=
          1e-12);
  CHECK(relevance_diff(s, x) <= 1e-10);  // GlobalAvgPool: the average-pool LRP kernel, weights 1 / (H W)
  const rows A = random_rows(6, L::input_shape.size(), 43), B = random_rows(6, L::input_shape.size(), 44);
  CHECK(check_same_lines(exact_lines(execution::seq, s, A, B), exact_lines(execution::thrust, to_dynamic(s), A, B)).pieces > 6);
  // with a Softmax head: forward only (no analysis takes a Softmax, on the host either)
  using P = Sequential<Input<6>, Dense<8>, ReLU, Dense<5>, Softmax>;
  P p;
  initialize(p, 45);
  const auto xp = random_x<float>(33, P::input_shape, 46, -3, 3);
  const auto yp = forward(thrust_policy{.batch = 8}, to_dynamic(p), xp);
  CHECK(rel_diff(forward(execution::seq, p, xp), yp) <= 1e-5);
  for (std::size_t n = 0; n < 33; ++n) {
    double sum = 0;
    for (std::size_t i = 0; i < 5; ++i) sum += yp(n, i);
    CHECK(sum == doctest::Approx(1.0).epsilon(1e-6));
  }
}
