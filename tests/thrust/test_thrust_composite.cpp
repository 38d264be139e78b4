// Composite ops (Residual, Concat; core/composite.hpp) on the thrust device system: the device runs
// each branch's layers by their own kernels and joins the branch outputs (thrust_kernels::place),
// with every tensor numbered as the analyses' op graph numbers it (network/graph.hpp).
//   forward      static and DynamicNetwork, float and double, identity and projection shortcuts,
//                channel and feature concatenation, a Concat nested in a Residual, in passes
//                smaller than the batch: against the host (execution::seq)
//   bit for bit  composites of element-wise ops only: the device evaluates the host's expressions
//                and joins in the host's order (0 + b_0 + b_1 ...)
//   profile      NNSlicer's profile with the inner tensors (both grains) against the host
//   LRP          every rule and layer stop through sums and concatenations, static and dynamic,
//                against the host's lrp_engine; element-wise composites bit for bit
//   ExactLine    the union of the branches' breaks and the join of their values, on the device:
//                every net above, static and dynamic, float and double, merge_tol, reanchor, fusion
//                off, nested composites; the same pieces, stats and errors (a cap hit inside a
//                branch names it) as the host; element-wise composites bit for bit
//   errors       what the device cannot run is a logic_error naming the layer and its place; the
//                default policy runs composite networks on the device
// Tolerances as tests/thrust/test_thrust_affine.cpp: with Conv2D / Dense, float 1e-5 and double
// 1e-12 relative to 1 + max |host| (the kernels' summation order); element-wise only: bit-identical.
#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <string>
#include <type_traits>

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

// identity and projection (stride 2) shortcuts, BatchNorm inside a block
template <class T>
using ResNet = Sequential<Input<2, 6, 6>, Conv2D<4, 3, 1, 1, 1, 1, T>, ReLU,
                          Residual<Block<Conv2D<4, 3, 1, 1, 1, 1, T>, BatchNorm<4, T>, ReLU, Conv2D<4, 3, 1, 1, 1, 1, T>>>, ReLU,
                          Residual<Block<Conv2D<6, 3, 2, 1, 1, 1, T>, ReLU>, Block<Conv2D<6, 1, 2, 0, 1, 1, T>>>, MaxPool2D<2>,
                          Flatten, Dense<5, T>>;
// channel concatenation (2 + 4 + 3 channels, an empty branch) and feature concatenation
template <class T>
using CatNet = Sequential<Input<3, 6, 6>, Conv2D<4, 3, 1, 1, 1, 1, T>, ReLU,
                          Concat<Block<Conv2D<2, 1, 1, 0, 1, 1, T>, ReLU>, Block<>, Block<MaxPool2D<3, 1, 1>, Conv2D<3, 3, 1, 1, 1, 1, T>>>,
                          AvgPool2D<2>, Flatten, Dense<4, T>, Concat<Block<Dense<3, T>, LeakyReLU>, Block<>>, Dense<2, T>>;
// a Concat inside a Residual inside a Residual's block
template <class T>
using Inner = Concat<Block<Conv2D<1, 1, 1, 0, 1, 1, T>>, Block<Residual<Block<Conv2D<3, 3, 1, 1, 1, 1, T>, ReLU>>>>;
template <class T>
using Nested = Sequential<Input<2, 5, 5>, Conv2D<3, 3, 1, 1, 1, 1, T>, ReLU,
                          Residual<Block<Conv2D<3, 3, 1, 1, 1, 1, T>, ReLU, Inner<T>>, Block<Conv2D<4, 1, 1, 0, 1, 1, T>>>,
                          Flatten, Dense<3, T>>;
// element-wise ops only
template <class T>
using Elem = Sequential<Input<2, 3, 3>, Residual<Block<ReLU, Affine<2, T>>>, Concat<Block<LeakyReLU>, Block<>, Block<BatchNorm<2, T>>>,
                        Residual<Block<Affine<1, T>, HardTanh>, Block<BatchNorm<6, T>>>, Flatten>;

/// Random BatchNorm statistics and Affine coefficients, inside composites too (for_each_inner).
template <class L>
void randomize(L& l, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(-1.5, 1.5), v(0.3, 2.0);
  if constexpr (Composite<L>) {
    layer_traits<L>::for_each_inner(l, [&](auto& inner) { randomize(inner, rng); });
  } else if constexpr (requires { l.running_var; }) {
    for (auto& g : l.gamma) g = std::remove_cvref_t<decltype(g)>(u(rng));
    for (auto& b : l.beta) b = std::remove_cvref_t<decltype(b)>(u(rng));
    for (auto& m : l.running_mean) m = std::remove_cvref_t<decltype(m)>(u(rng) * 0.5);
    for (auto& s : l.running_var) s = std::remove_cvref_t<decltype(s)>(v(rng));
  } else if constexpr (requires { l.s; l.t; }) {
    for (auto& s : l.s) s = std::remove_cvref_t<decltype(s)>(u(rng));
    for (auto& t : l.t) t = std::remove_cvref_t<decltype(t)>(u(rng));
  }
}

template <class Net>
Net make(std::uint64_t seed) {
  Net n;
  initialize(n, seed);
  std::mt19937_64 rng(seed + 1000);
  for_each_layer(n, [&](auto& l, auto, shape, shape) { randomize(l, rng); });
  return n;
}

template <class Net>
void check_forward(std::uint64_t seed, double tol) {
  using T = network_scalar_t<Net>;
  const Net net = make<Net>(seed);
  const auto x = random_x<T>(37, Net::input_shape, seed + 1);
  const auto host = forward(execution::seq, net, x);
  const std::size_t passes = thrust_device_passes();
  const auto dev = forward(thrust_policy{.batch = 16}, net, x);  // 3 passes, the last one short
  CHECK(thrust_device_passes() >= passes + 3);
  CHECK(rel_diff(host, dev) <= tol);
  const auto dyn = to_dynamic(net);
  CHECK(rel_diff(host, forward(thrust_policy{.batch = 64}, dyn, x)) <= tol);
  // and the device's tensors are the op graph's: its output tensor is the forward's output
  const device_network<Net> d(net);
  CHECK(d.acts() == op_graph<T>(net).acts());
  CHECK(!d.is_chain());
}

}  // namespace

TEST_CASE("thrust composites: forward of Residual and Concat, static and dynamic, against the host") {
  static_assert(ThrustLayer<Residual<Block<Dense<3>>>> && ThrustLayer<Concat<Block<>, Block<ReLU>>> &&
                ThrustLayer<DynamicConcat<double>>);
  check_forward<ResNet<float>>(1, 1e-5);
  check_forward<ResNet<double>>(2, 1e-12);
  check_forward<CatNet<float>>(3, 1e-5);
  check_forward<CatNet<double>>(4, 1e-12);
  check_forward<Nested<float>>(5, 1e-5);
  check_forward<Nested<double>>(6, 1e-12);
}

TEST_CASE("thrust composites: element-wise branches are the host's bit for bit") {
  for (std::uint64_t seed : {7u, 8u, 9u}) {
    CAPTURE(seed);
    const auto net = make<Elem<double>>(seed);
    const auto netf = make<Elem<float>>(seed);
    const auto x = random_x<double>(19, Elem<double>::input_shape, seed + 50, -2, 2);
    const auto xf = random_x<float>(19, Elem<float>::input_shape, seed + 50, -2, 2);
    CHECK(bit_identical(forward(execution::seq, net, x), forward(thrust_policy{.batch = 5}, net, x)));
    CHECK(bit_identical(forward(execution::seq, netf, xf), forward(execution::thrust, to_dynamic(netf), xf)));
    // one pass (the default batch): each sample is its own block of the device's sums, which then
    // add up in the host's order (in passes of 4, blocks mix samples of several passes: 1e-16)
    CHECK(profile_diff(profile_network(execution::seq, net, x, {.grain = granularity::element}),
                       profile_network(execution::thrust, net, x, {.grain = granularity::element})) == 0.0);
  }
}

TEST_CASE("thrust composites: NNSlicer's profile keeps the inner tensors") {
  const auto res = make<ResNet<double>>(11);
  const auto cat = make<CatNet<float>>(12);
  const auto nest = make<Nested<double>>(13);
  const auto xr = random_x<double>(29, ResNet<double>::input_shape, 14);
  const auto xc = random_x<float>(29, CatNet<float>::input_shape, 15);
  const auto xn = random_x<double>(29, Nested<double>::input_shape, 16);
  for (granularity g : {granularity::channel, granularity::element}) {
    CAPTURE(int(g));
    const profile hr = profile_network(execution::seq, res, xr, {.grain = g});
    CHECK(profile_diff(hr, profile_network(thrust_policy{.batch = 8}, res, xr, {.grain = g})) <= 1e-12);
    CHECK(profile_diff(hr, profile_network(execution::thrust, to_dynamic(res), xr, {.grain = g})) <= 1e-12);
    // inner tensors: a residual block's 4 layers and the shortcut's, and 2 joins, are profiled
    CHECK(hr.sums.size() == op_graph<double>(res).acts().size());
    CHECK(hr.sums.size() > layer_count(res) + 1 + 6);
    CHECK(profile_diff(profile_network(execution::seq, cat, xc, {.grain = g}),
                       profile_network(thrust_policy{.batch = 7}, cat, xc, {.grain = g})) <= 1e-5);
    CHECK(profile_diff(profile_network(execution::seq, nest, xn, {.grain = g}),
                       profile_network(execution::thrust, to_dynamic(nest), xn, {.grain = g})) <= 1e-12);
  }
}

TEST_CASE("thrust composites: LRP through the joins, as the host's lrp_engine") {
  // every rule, every layer stop (inner tensors are not stops: the top-level layers' outputs are)
  CHECK(relevance_diff(make<ResNet<double>>(31), random_x<double>(9, ResNet<double>::input_shape, 32)) <= 1e-10);
  CHECK(relevance_diff(make<CatNet<double>>(33), random_x<double>(9, CatNet<double>::input_shape, 34), {.batch = 4}) <= 1e-10);
  CHECK(relevance_diff(to_dynamic(make<Nested<double>>(35)), random_x<double>(9, Nested<double>::input_shape, 36)) <= 1e-10);
  CHECK(relevance_diff(make<ResNet<float>>(37), random_x<float>(9, ResNet<float>::input_shape, 38)) <= 1e-4);
  CHECK(relevance_diff(to_dynamic(make<CatNet<float>>(39)), random_x<float>(9, CatNet<float>::input_shape, 40)) <= 1e-4);
  // element-wise composites: the device's relevance is the host's bit for bit (the sum's split,
  // the concat's pass-through, the shortcut's accumulation into the fork in the host's order)
  const auto e = make<Elem<double>>(41);
  const auto xe = random_x<double>(13, Elem<double>::input_shape, 42, -2, 2);
  for (const auto& o : lrp_rules) {
    CHECK(bit_identical(relevance(execution::seq, e, xe, lrp_input, o), relevance(thrust_policy{.batch = 5}, e, xe, lrp_input, o)));
    CHECK(bit_identical(relevance(execution::seq, e, xe, 0, o), relevance(execution::thrust, to_dynamic(e), xe, 0, o)));
  }
}

TEST_CASE("thrust composites: what the device does not run is an error, never a wrong answer") {
  // an inner layer without a device LRP step is named with its place (Softmax: no LRP anywhere)
  using SoftRes = Sequential<Input<4>, Dense<4, double>, Residual<Block<Dense<4, double>, Softmax>>, Dense<2, double>>;
  try {
    (void)relevance(execution::thrust, to_dynamic(make<SoftRes>(22)), random_x<double>(2, SoftRes::input_shape, 22));
    FAIL("no error for a Softmax inside a Residual");
  } catch (const logic_error& e) {
    const std::string m = e.what();
    CHECK(m.find("Softmax") != std::string::npos);
    CHECK(m.find("1.block.1") != std::string::npos);
  }
  // composite networks run on the device under the default policy (nnlens/thrust/default.hpp)
  CHECK(thrust_supported(to_dynamic(make<ResNet<double>>(23))));
  CHECK(thrust_supported(make<CatNet<float>>(27)));
  CHECK(thrust_supported(to_dynamic(make<Sequential<Input<3>, Dense<2>, ReLU>>(28))));
}

namespace {

/// Returns the points the host merged (stats.merged, all segments).
template <class Net>
std::size_t check_lines(std::uint64_t seed, std::size_t n, const line_options& o = {}) {
  const Net net = make<Net>(seed);
  const std::size_t d = Net::input_shape.size();
  const rows A = random_rows(n, d, seed + 1, -2, 2), B = random_rows(n, d, seed + 2, -2, 2);
  const auto h = exact_lines(execution::seq, net, A, B, o);
  const std::size_t passes = thrust_device_passes();
  const auto dev = exact_lines(thrust_policy{.batch = 40}, net, A, B, o);  // passes of 5 segments
  CHECK(thrust_device_passes() > passes);
  const line_diff r = check_same_lines(h, dev);
  CHECK(r.pieces > n);  // the composites' branches split the segments
  check_same_lines(h, exact_lines(execution::thrust, to_dynamic(net), A, B, o));
  std::size_t merged = 0;
  for (const auto& l : h) merged += l.stats.merged;
  return merged;
}

}  // namespace

TEST_CASE("thrust composites: ExactLine through the joins, as the host") {
  check_lines<ResNet<double>>(51, 11);
  check_lines<CatNet<double>>(52, 11);
  check_lines<Nested<double>>(53, 11);
  check_lines<ResNet<float>>(54, 7);
  line_options tol;
  tol.merge_tol = 1e-3;  // points of different branches within the tolerance merge (counted)
  CHECK(check_lines<ResNet<double>>(55, 11, tol) + check_lines<Nested<double>>(56, 11, tol) > 0);
  line_options re;
  re.reanchor = true;  // new points recomputed from the input through the composites before them
  re.fuse_max_pool = false;
  check_lines<ResNet<double>>(57, 7, re);
  check_lines<CatNet<double>>(58, 7, re);
  // element-wise composites: the device's ratios and values are the host's bit for bit
  const auto e = make<Elem<double>>(59);
  const rows A = random_rows(9, 18, 60, -2, 2), B = random_rows(9, 18, 61, -2, 2);
  const auto h = exact_lines(execution::seq, e, A, B), dv = exact_lines(thrust_policy{.batch = 16}, e, A, B);
  for (std::size_t i = 0; i < A.size(); ++i) {
    CHECK(h[i].t == dv[i].t);
    CHECK(h[i].values == dv[i].values);
  }
  // a cap hit inside a branch: the same error, naming the branch's layer, for that segment only
  const auto res = make<ResNet<double>>(62);
  const rows Ar = random_rows(6, 72, 63, -2, 2), Br = random_rows(6, 72, 64, -2, 2);
  line_options cap;
  cap.keep_going = true;
  const auto all = exact_lines(execution::seq, res, Ar, Br);
  std::size_t most = 0;
  for (const auto& r : all) most = std::max(most, r.t.size() - 1);
  cap.max_pieces = most - 1;
  const auto hc = exact_lines(execution::seq, res, Ar, Br, cap), dc = exact_lines(thrust_policy{.batch = 24}, res, Ar, Br, cap);
  check_same_lines(hc, dc);
  std::size_t failed = 0;
  for (const auto& r : dc) failed += r.error.empty() ? 0 : 1;
  CHECK(failed >= 1);
  CHECK(failed < Ar.size());
  cap.keep_going = false;
  try {
    (void)exact_lines(execution::thrust, to_dynamic(res), Ar, Br, cap);
    FAIL("no error");
  } catch (const limit_error& x) {
    CHECK(std::string(x.what()).find("max_pieces") != std::string::npos);
  }
}
