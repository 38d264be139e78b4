// nnlens::precompiled: this file is compiled with NNLENS_EXTERN_TEMPLATES, so
// every DynamicNetwork call below that matches a precompiled form is a call into the library
// (the ctest precompiled_symbols checks this object: those forms are undefined here, defined
// there).  Each result is compared with the same analysis on the static network the dynamic one
// was made from, which this file instantiates itself from the headers: two instantiations of the
// same rules, one in the library and one here, must agree.
#include <doctest/doctest.h>

#include <nnlens/io/nnet.hpp>
#include <nnlens/nnlens.hpp>
#if defined(NNLENS_EXTERN_TEMPLATES_ONNX)
#include <nnlens/io/onnx.hpp>
#endif

#include <cmath>
#include <random>
#include <vector>

#if !defined(NNLENS_EXTERN_TEMPLATES)
#error "test_precompiled must be built with NNLENS_EXTERN_TEMPLATES (link nnlens::precompiled)"
#endif

#include "test_skip.hpp"

using namespace nnlens;

namespace {
using Net = Sequential<Input<1, 8, 8>, Conv2D<4, 3>, ReLU, MaxPool2D<2>, Flatten, Dense<6>, ReLU, Dense<3>>;

template <class T>
xt::xarray<T> inputs(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 r(seed);
  std::normal_distribution<double> g(0, 1);
  xt::xarray<T> x = xt::xarray<T>::from_shape({n, 1, 8, 8});
  for (auto& v : x) v = T(g(r));
  return x;
}

template <class A, class B>
void check_close(const A& a, const B& b, double tol) {
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double x = double(a.data()[i]), y = double(b.data()[i]);
    CHECK(std::abs(x - y) <= tol * (1 + std::abs(y)));
  }
}

struct fixture {
  Net net;
  DynamicNetwork dyn;
  basic_dynamic_network<double> dyn64;
  fixture() {
    initialize(net, 11);
    dyn = to_dynamic(net);
    dyn64 = network_cast<double>(dyn);  // precompiled: network_cast<double>(DynamicNetwork<float>)
  }
};

std::vector<std::size_t> argmax_rows(const xt::xarray<float>& y) {
  std::vector<std::size_t> l(y.shape()[0]);
  for (std::size_t i = 0; i < l.size(); ++i) {
    std::size_t best = 0;
    for (std::size_t j = 1; j < y.shape()[1]; ++j)
      if (y(i, j) > y(i, best)) best = j;
    l[i] = best;
  }
  return l;
}
}  // namespace

TEST_CASE("precompiled forward and casts agree with the static network") {
  fixture f;
  const xt::xarray<float> X = inputs<float>(9, 1);
  const xt::xarray<float> ys = forward(execution::seq, f.net, X);  // instantiated here
  check_close(forward(f.dyn, X), ys, 1e-5);                         // seq form, float
  check_close(forward(execution::par, f.dyn, X), ys, 1e-5);         // par form, float
  const xt::xarray<double> X64 = X;
  check_close(forward(execution::seq, f.dyn64, X64), ys, 1e-5);     // seq form, double
  check_close(forward(execution::par, f.dyn64, X64), ys, 1e-5);     // par form, double
  const basic_dynamic_network<float> back = network_cast<float>(f.dyn64);  // network_cast<float>(DynamicNetwork<double>)
  check_close(forward(back, X), ys, 0.0);
}

TEST_CASE("precompiled DynamicNetwork members: copies, layer names, validate, a refused add") {
  // to_dynamic's add, validate, layer_name, the copies and the destructor are the library's here
  // (precompiled_symbols checks push and the destructor)
  fixture f;
  REQUIRE(f.dyn.size() == Net::size);
  CHECK(f.dyn.layer_name(0) == "Conv2D");
  CHECK(f.dyn.layer_name(Net::size - 1) == "Dense");
  CHECK(f.dyn.output_shape() == shape(3));
  const xt::xarray<float> X = inputs<float>(4, 2);
  const xt::xarray<float> y = forward(f.dyn, X);

  DynamicNetwork copy = f.dyn, assigned, moved;
  assigned = copy;
  moved = std::move(copy);
  check_close(forward(assigned, X), y, 0.0);
  check_close(forward(moved, X), y, 0.0);

  // a layer that does not fit the output is refused with its index and name; nothing changes
  Dense<dyn> bad;
  bad.W = tensor<float, 2>::from_shape({5, 2});
  bad.b = tensor<float, 1>::from_shape({2});
  const std::string where = "layer " + std::to_string(Net::size) + " (Dense)";
  CHECK_THROWS_WITH_AS(moved.add(bad), doctest::Contains(where.c_str()), shape_error);
  CHECK(moved.size() == Net::size);
  CHECK(moved.shapes().size() == Net::size + 1);
  check_close(forward(moved, X), y, 0.0);

  // validate re-infers every shape: a bias resized by hand is found, naming its layer
  CHECK_NOTHROW(moved.validate());
  std::get<Dense<dyn>>(moved.layer(Net::size - 1)).b = tensor<float, 1>::from_shape({7});
  const std::string last = "layer " + std::to_string(Net::size - 1) + " (Dense)";
  CHECK_THROWS_WITH_AS(moved.validate(), doctest::Contains(last.c_str()), shape_error);
}

TEST_CASE("precompiled ExactLine agrees with the static network") {
  fixture f;
  std::vector<double> a(64), b(64);
  for (std::size_t i = 0; i < 64; ++i) {
    a[i] = std::sin(0.3 * double(i));
    b[i] = std::cos(0.17 * double(i)) - 0.2;
  }
  const auto s = exact_line(f.net, a, b);  // instantiated here (static network, cast to double)
  const auto d = exact_line(f.dyn, a, b);  // precompiled: network_cast + line_impl<double, double>
  REQUIRE(s.pieces() > 3);
  REQUIRE(d.pieces() == s.pieces());
  for (std::size_t j = 0; j <= s.pieces(); ++j) CHECK(d.t[j] == doctest::Approx(s.t[j]).epsilon(1e-12));
  CHECK(exact_line(f.dyn64, a, b).pieces() == s.pieces());
  const auto f32 = exact_line<float>(f.dyn, a, b);  // precompiled: line_impl<float, double>
  CHECK(f32.pieces() >= s.pieces() - 2);
  CHECK(f32.pieces() <= s.pieces() + 2);
}

TEST_CASE("precompiled NNSlicer agrees with the static network") {
  fixture f;
  const xt::xarray<float> X = inputs<float>(12, 2);
  const profile ps = profile_network(execution::seq, f.net, X);
  for (const profile& pd : {profile_network(execution::seq, f.dyn, X), profile_network(execution::par, f.dyn, X)}) {
    REQUIRE(pd.sums.size() == ps.sums.size());
    CHECK(pd.samples == ps.samples);
    for (std::size_t t = 0; t < ps.sums.size(); ++t) check_close(pd.sums[t], ps.sums[t], 1e-5);
  }
  const contrib_table ts = nnslicer(execution::seq, f.net, ps, X, criterion::predicted(), {.theta = 0.3});
  const profile pd = profile_network(f.dyn, X);
  for (const contrib_table& td : {nnslicer(execution::seq, f.dyn, pd, X, criterion::predicted(), {.theta = 0.3}),
                                  nnslicer(execution::par, f.dyn, pd, X, criterion::predicted(), {.theta = 0.3})}) {
    CHECK(td.samples == ts.samples);
    CHECK(td.neurons == ts.neurons);
    CHECK(td.synapses == ts.synapses);
  }
  const xt::xarray<double> X64 = X;
  const profile p64 = profile_network(execution::par, f.dyn64, X64);
  CHECK(nnslicer(execution::par, f.dyn64, p64, X64, criterion::predicted(), {.theta = 0.3}).neurons == ts.neurons);
}

TEST_CASE("precompiled coverage agrees with the static network") {
  fixture f;
  const xt::xarray<float> X = inputs<float>(40, 3), T = inputs<float>(25, 4);
  const std::vector<std::size_t> labels = argmax_rows(forward(f.net, X));
  const idc is = prepare_idc(execution::seq, f.net, X, labels, {.m = 2});
  for (const idc& id : {prepare_idc(execution::seq, f.dyn, X, labels, {.m = 2}),
                        prepare_idc(execution::par, f.dyn, X, labels, {.m = 2})}) {
    idc a = is, b = id;
    const coverage_result ra = measure(f.net, T, a), rb = measure(execution::par, f.dyn, T, b);
    CHECK(rb.total == ra.total);
    CHECK(rb.covered == ra.covered);
    CHECK(rb.total > 0);
  }
  nc_criterion ns(f.net), nd(f.dyn);
  const coverage_result a = measure(f.net, T, ns), b = measure(f.dyn, T, nd);
  CHECK(b.covered == a.covered);
  CHECK(b.total == a.total);
  CHECK(b.total > 0);
  const xt::xarray<double> T64 = T;
  nc_criterion n64(f.dyn64);
  CHECK(measure(execution::par, f.dyn64, T64, n64).covered == a.covered);
}

#if defined(NNLENS_EXTERN_TEMPLATES_ONNX)
TEST_CASE("precompiled ONNX import: ACAS Xu 1_1 read by the library agrees with its .nnet (1e-5)") {
  const auto models = nnlens_test::shared_dir() / "models";
  const auto onnx_path = models / "vnncomp2021-acasxu" / "ACASXU_run2a_1_1_batch_2000.onnx";
  const auto nnet_path = models / "acasxu-nnet" / "ACASXU_run2a_1_1_batch_2000.nnet";
  if (!std::filesystem::exists(onnx_path) || !std::filesystem::exists(nnet_path)) NNLENS_SKIP("no ", onnx_path.string());
  io::nnet_options raw;
  raw.normalize_inputs = raw.clamp_inputs = raw.rescale_outputs = false;
  const DynamicNetwork a = io::load_onnx(onnx_path.string());  // precompiled: onnx_reader<float>::read
  const DynamicNetwork b = io::load_nnet<float>(nnet_path, raw).net;  // the header's .nnet reader
  REQUIRE(a.input_shape().size() == 5);  // the file's input is [batch, 1, 1, 5]; the .nnet's [batch, 5]
  std::vector<std::size_t> dims{32};
  for (std::size_t d = 0; d < a.input_shape().rank; ++d) dims.push_back(a.input_shape()[d]);
  xt::xarray<float> Xa = xt::xarray<float>::from_shape(dims), Xb = xt::xarray<float>::from_shape({32, 5});
  std::mt19937_64 r(5);
  std::uniform_real_distribution<double> u(-0.5, 0.5);
  for (std::size_t i = 0; i < Xa.size(); ++i) Xa.data()[i] = Xb.data()[i] = float(u(r));
  check_close(forward(a, Xa), forward(b, Xb), 1e-5);
}
#endif
