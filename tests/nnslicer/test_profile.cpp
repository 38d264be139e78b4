// NNSlicer profiles (nnslicer/profile.hpp): hand-computed means at both granularities, merging,
// seq == par, batch independence, the text format's exact round trip and its errors (io_error
// naming file:line), and check_compatible (data_error for a profile of another model).
#include "nnslicer_test_util.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <unistd.h>

using namespace slicetest;
namespace fs = std::filesystem;

namespace {

fs::path temp_file(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("nnlens-test-profile-" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d / name;
}
void write_text(const fs::path& p, const std::string& s) {
  std::ofstream f(p, std::ios::binary);
  f << s;
}
std::string read_text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Integer weights and integer inputs, 4x4 maps (channel means divide by 16): every sum is exact.
using IntNet = Sequential<Input<2, 4, 4>, Conv2D<3, 3, 1, 1, 1, 1, double>, ReLU, Flatten, Dense<4, double>>;
IntNet int_net() {
  IntNet net;
  initialize(net, 3);
  for (auto s : parameter_spans(net))
    for (auto& v : s) v = std::round(v * 8);
  return net;
}
xt::xarray<double> int_data(std::size_t n, std::uint64_t seed) {
  auto x = random_batch(n, shape(2, 4, 4), seed, -4, 4);
  for (auto& v : x) v = std::round(v);
  return x;
}

}  // namespace

TEST_CASE("profile: the means of a hand dataset, channel and element") {
  Sequential<Input<2, 1, 2>, ReLU> net;
  const auto X = batch({{1, -3, 2, 4}, {3, 1, -2, 0}, {-1, 2, 6, 2}}, shape(2, 1, 2));
  const auto pc = profile_network(net, X);
  CHECK(pc.samples == 3);
  CHECK(pc.grain == granularity::channel);
  REQUIRE(pc.sums.size() == 2);
  // input channel means per sample: ch0 (-1, 2, 0.5), ch1 (3, -1, 4)
  CHECK(pc.mean(0) == std::vector<double>{0.5, 2});
  // ReLU: ch0 (0.5, 2, 1), ch1 (3, 0, 4)
  CHECK(pc.mean(1)[0] == doctest::Approx(3.5 / 3));
  CHECK(pc.mean(1)[1] == doctest::Approx(7.0 / 3));
  CHECK(pc.names == std::vector<std::string>{"input", "0 ReLU"});
  const auto pe = profile_network(net, X, {.grain = granularity::element});
  CHECK(pe.mean(0) == std::vector<double>{1, 0, 2, 2});
  CHECK(pe.mean(1) == std::vector<double>{4.0 / 3, 1, 8.0 / 3, 2});
}

TEST_CASE("profile: merge of two halves is the whole (bit-exact on integer data); seq == par; batch") {
  const auto net = int_net();
  const auto X = int_data(37, 5);
  for (auto g : {granularity::channel, granularity::element}) {
    const auto whole = profile_network(net, X, {.grain = g});
    const auto a = profile_network(net, rows_of(X, 0, 20), {.grain = g});
    const auto b = profile_network(net, rows_of(X, 20, 37), {.grain = g});
    const auto m = merge(a, b);
    CHECK(m.samples == 37);
    CHECK(m.sums == whole.sums);
    CHECK(m.fingerprint == whole.fingerprint);
    CHECK(profile_network(execution::par, net, X, {.grain = g, .batch = 4}).sums == whole.sums);
    for (std::size_t bs : {1u, 5u, 1000u}) CHECK(profile_network(net, X, {.grain = g, .batch = bs}).sums == whole.sums);
    // streamed accumulator
    profile_accumulator<double> acc(net, g);
    const xt::xarray<double> xc = X;
    acc.add(10, xc.data());
    acc.add(27, xc.data() + 10 * 32);
    CHECK(acc.result().sums == whole.sums);
  }
  // real-valued data: par == seq up to rounding
  Sequential<Input<5>, Dense<8, double>, ReLU, Dense<3, double>> mlp;
  initialize(mlp, 9);
  const auto R = random_batch(500, shape(5), 10);
  const auto ps = profile_network(execution::seq, mlp, R, {.batch = 16});
  const auto pp = profile_network(execution::par, mlp, R, {.batch = 16});
  REQUIRE(ps.sums.size() == pp.sums.size());
  for (std::size_t t = 0; t < ps.sums.size(); ++t)
    for (std::size_t i = 0; i < ps.sums[t].size(); ++i) CHECK(pp.sums[t][i] == doctest::Approx(ps.sums[t][i]).epsilon(1e-12));
  // merging profiles of different models or granularities
  CHECK_THROWS_AS(merge(ps, profile_network(net, X)), data_error);
  CHECK_THROWS_AS(merge(ps, profile_network(mlp, R, {.grain = granularity::element})), data_error);
}

TEST_CASE("save_profile / load_profile: an exact round trip") {
  Sequential<Input<2, 4, 4>, Conv2D<3, 3, 1, 1, 1, 1, double>, ReLU, Residual<Block<Conv2D<3, 3, 1, 1, 1, 1, double>>>, GlobalAvgPool,
             Flatten, Dense<2, double>>
      net;
  initialize(net, 4);
  const auto X = random_batch(13, shape(2, 4, 4), 6);
  for (auto g : {granularity::channel, granularity::element}) {
    const auto p = profile_network(net, X, {.grain = g});
    const auto path = temp_file(std::string("rt-") + std::string(granularity_name(g)) + ".txt");
    save_profile(path, p);
    const auto q = load_profile(path);
    CHECK(q.grain == p.grain);
    CHECK(q.fingerprint == p.fingerprint);
    CHECK(q.samples == p.samples);
    CHECK(q.names == p.names);
    CHECK(q.sums == p.sums);  // every double, bit for bit
    q.check_compatible(net);
    // saving the loaded profile gives the same bytes
    save_profile(path.string() + ".2", q);
    CHECK(read_text(path) == read_text(path.string() + ".2"));
    // tables from the loaded profile equal those from the original
    CHECK(tables_equal(nnslicer(net, p, rows_of(X, 0, 3), criterion::predicted()), nnslicer(net, q, rows_of(X, 0, 3), criterion::predicted())));
  }
  // extreme values survive
  profile e;
  e.samples = 3;
  e.fingerprint = 0xffffffffffffffffull;
  e.sums = {{0.1, -0.0, 5e-324, 1.7976931348623157e308, -2.2250738585072014e-308}, {}};
  e.names = {"input", "0 With Spaces In Name"};
  const auto path = temp_file("extreme.txt");
  save_profile(path, e);
  const auto f = load_profile(path);
  CHECK(f.sums == e.sums);
  CHECK(std::signbit(f.sums[0][1]));
  CHECK(f.names == e.names);
  CHECK(f.fingerprint == e.fingerprint);
}

TEST_CASE("load_profile: malformed files throw io_error naming file:line") {
  const std::string good =
      "nnlens-profile 1\ngranularity channel\nfingerprint 42\nsamples 2\ntensors 2\ntensor 2 input\n1 2\ntensor 1 0 Dense\n3\n";
  const auto path = temp_file("bad.txt");
  write_text(path, good);
  const auto ok = load_profile(path);
  CHECK(ok.sums == std::vector<std::vector<double>>{{1, 2}, {3}});
  CHECK(ok.names == std::vector<std::string>{"input", "0 Dense"});
  CHECK(ok.fingerprint == 42);

  struct bad_case {
    const char* what;
    std::string text;
    int line;
  };
  const std::vector<bad_case> cases{
      {"empty", "", 1},
      {"wrong header", "nnlens-profile 2\n" + good.substr(17), 1},
      {"not a profile", "hello\n", 1},
      {"bad granularity", "nnlens-profile 1\ngranularity pixel\n", 2},
      {"fingerprint not a number", "nnlens-profile 1\ngranularity channel\nfingerprint x42\n", 3},
      {"negative samples", "nnlens-profile 1\ngranularity element\nfingerprint 1\nsamples -2\n", 4},
      {"truncated after the counts", good.substr(0, good.find("tensor 2")), 6},
      {"truncated values", good.substr(0, good.size() - 2), 9},
      {"missing tensor line", "nnlens-profile 1\ngranularity channel\nfingerprint 42\nsamples 2\ntensors 3\ntensor 2 input\n1 2\n", 8},
      {"too many values", "nnlens-profile 1\ngranularity channel\nfingerprint 42\nsamples 2\ntensors 1\ntensor 2 input\n1 2 3\n", 7},
      {"too few values", "nnlens-profile 1\ngranularity channel\nfingerprint 42\nsamples 2\ntensors 1\ntensor 2 input\n1\n", 7},
      {"not a number", "nnlens-profile 1\ngranularity channel\nfingerprint 42\nsamples 2\ntensors 1\ntensor 2 input\n1 abc\n", 7},
      {"inf", "nnlens-profile 1\ngranularity channel\nfingerprint 42\nsamples 2\ntensors 1\ntensor 2 input\n1 inf\n", 7},
      {"nan", "nnlens-profile 1\ngranularity channel\nfingerprint 42\nsamples 2\ntensors 1\ntensor 2 input\nnan 1\n", 7},
      {"tensor size not a number", "nnlens-profile 1\ngranularity channel\nfingerprint 42\nsamples 2\ntensors 1\ntensor two input\n1 2\n", 6},
      {"tensor keyword missing", "nnlens-profile 1\ngranularity channel\nfingerprint 42\nsamples 2\ntensors 1\n2 input\n1 2\n", 6},
      {"huge tensor count", "nnlens-profile 1\ngranularity channel\nfingerprint 42\nsamples 2\ntensors 99999999999\n", 5},
      {"huge tensor", "nnlens-profile 1\ngranularity channel\nfingerprint 42\nsamples 2\ntensors 1\ntensor 99999999999 input\n1\n", 6},
  };
  for (const auto& c : cases) {
    CAPTURE(c.what);
    write_text(path, c.text);
    try {
      (void)load_profile(path);
      FAIL("accepted");
    } catch (const io_error& e) {
      const std::string m = e.what();
      CAPTURE(m);
      CHECK(m.find(path.string() + ":" + std::to_string(c.line) + ":") != std::string::npos);
    }
  }
  CHECK_THROWS_AS(load_profile(temp_file("does-not-exist.txt")), io_error);
}

TEST_CASE("check_compatible: a profile of another model is a data_error") {
  using Net = Sequential<Input<3>, Dense<4, double>, ReLU, Dense<2, double>>;
  Net net;
  initialize(net, 1);
  const auto X = random_batch(20, shape(3), 2);
  const auto p = profile_network(net, X);
  p.check_compatible(net);  // its own model: fine
  CHECK_NOTHROW(nnslicer(net, p, X, criterion::predicted()));
  SUBCASE("other shapes") {
    Sequential<Input<3>, Dense<5, double>, ReLU, Dense<2, double>> other;
    initialize(other, 1);
    CHECK_THROWS_AS(p.check_compatible(other), data_error);
    CHECK_THROWS_AS(nnslicer(other, p, X, criterion::predicted()), data_error);
    Sequential<Input<3>, Dense<4, double>, ReLU, Dense<2, double>, ReLU> longer;
    initialize(longer, 1);
    CHECK_THROWS_AS(p.check_compatible(longer), data_error);
    // the same model at the other granularity has the same neurons here (rank 1), but a conv net does not
    Sequential<Input<2, 2, 2>, ReLU> img;
    const auto pi = profile_network(img, random_batch(3, shape(2, 2, 2), 3), {.grain = granularity::element});
    auto pj = pi;
    pj.grain = granularity::channel;
    CHECK_THROWS_AS(pj.check_compatible(img), data_error);
  }
  SUBCASE("same shapes, other weights") {
    Net other = net;
    std::get<2>(other.layers).W(1, 0) += 0.25;
    CHECK_THROWS_AS(p.check_compatible(other), data_error);
    CHECK_THROWS_AS(nnslicer(other, p, X, criterion::predicted()), data_error);
    Net other2;
    initialize(other2, 2);
    CHECK_THROWS_AS(p.check_compatible(other2), data_error);
  }
  SUBCASE("a loaded profile whose counts were edited") {
    auto q = p;
    q.sums[1].pop_back();
    CHECK_THROWS_AS(q.check_compatible(net), data_error);
    q = p;
    q.sums.pop_back();
    CHECK_THROWS_AS(q.check_compatible(net), data_error);
  }
}

// The fingerprint covers every parameter and buffer (biases, BatchNorm statistics).
TEST_CASE("check_compatible: a model differing only in a bias") {
  Sequential<Input<2>, Dense<2, double>, ReLU, Dense<1, double>> a;
  initialize(a, 1);
  auto b = a;
  std::get<0>(b.layers).b(0) += 1.0;
  const auto X = random_batch(10, shape(2), 3);
  const auto pa = profile_network(a, X);
  CHECK(pa.mean(1) != profile_network(b, X).mean(1));  // the profiles do differ
  CHECK_THROWS_AS(pa.check_compatible(b), data_error);
}

TEST_CASE("check_compatible: a model differing only in BN running statistics") {
  const auto X = random_batch(10, shape(2), 3);
  Sequential<Input<2>, BatchNorm<2, double>, Dense<1, double>> c;
  initialize(c, 2);
  auto d = c;
  std::get<0>(d.layers).running_mean(0) = 3;
  CHECK_THROWS_AS(profile_network(c, X).check_compatible(d), data_error);
}
