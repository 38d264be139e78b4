// nnlens::mpi (include/nnlens/mpi/): run under `mpirun -np 2` by ctest (and alone, as 1 rank).
// Shards cover [0, n) exactly once; the serialisers round-trip; reduce_merge / map_reduce over the
// ranks equal one process: NNSlicer profiles (bit for bit equal to merging the same blocks in one
// process; within 1e-12 relative of one profile_network over all samples -- the summation order
// differs), contribution tables (exactly), IDC coverage (exactly), DFlare with a query budget
// (exactly, but the wall-clock seconds), ExactLine's segments (bit for bit, with the errors one
// process reports); errors in one rank reach every rank.
// Its own main: MPI_Init before doctest, MPI_Finalize after; rank 0 prints
// "test_mpi: all N ranks passed" only when every rank passed (ctest matches it).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include <nnlens/exactline/line.hpp>
#include <nnlens/layers/all.hpp>
#include <nnlens/mpi/all.hpp>
#include <nnlens/network/forward.hpp>
#include <nnlens/network/parameters.hpp>
#include <nnlens/network/sequential.hpp>

using namespace nnlens;

namespace {

mpi::communicator* world = nullptr;
const mpi::communicator& comm() { return *world; }

template <class T>
xt::xarray<T> random_rows(std::vector<std::size_t> shape, std::uint64_t seed, double lo = -1, double hi = 1) {
  xt::xarray<T> x = xt::xarray<T>::from_shape(shape);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  for (auto& v : x) v = T(u(rng));
  return x;
}

/// The profile one process gets by merging rank blocks 0, 1, ... in order.
template <class Net, class X>
profile merged_blocks(const Net& net, const X& x, int ranks, const profile_options& o) {
  std::optional<profile> p;
  for (int r = 0; r < ranks; ++r) {
    const auto b = mpi::shard(x.shape()[0], r, ranks);
    if (b.empty()) continue;
    auto part = profile_network(execution::seq, net, mpi::rows(x, b), o);
    p = p ? merge(*p, part) : part;
  }
  return *p;
}

void check_close(const profile& a, const profile& b, double rel) {
  CHECK(a.samples == b.samples);
  CHECK(a.fingerprint == b.fingerprint);
  CHECK(a.grain == b.grain);
  CHECK(a.names == b.names);
  REQUIRE(a.sums.size() == b.sums.size());
  for (std::size_t t = 0; t < a.sums.size(); ++t) {
    REQUIRE(a.sums[t].size() == b.sums[t].size());
    for (std::size_t i = 0; i < a.sums[t].size(); ++i) {
      CAPTURE(t);
      CAPTURE(i);
      CHECK(std::abs(a.sums[t][i] - b.sums[t][i]) <= rel * std::max(1.0, std::abs(b.sums[t][i])));
    }
  }
}

using FloatNet = Sequential<Input<1, 8, 8>, Conv2D<3, 3>, ReLU, MaxPool2D<2>, Flatten, Dense<6>, ReLU, Dense<4>>;
using DoubleMlp = Sequential<Input<6>, Dense<10, double>, ReLU, Dense<8, double>, ReLU, Dense<3, double>>;

}  // namespace

TEST_CASE("shard: contiguous blocks cover [0, n) exactly once, sizes differ by at most one") {
  for (std::size_t n : {0u, 1u, 2u, 3u, 7u, 100u, 60000u})
    for (int P = 1; P <= 5; ++P) {
      CAPTURE(n);
      CAPTURE(P);
      std::size_t next = 0, lo = n, hi = 0;
      for (int r = 0; r < P; ++r) {
        const auto b = mpi::shard(n, r, P);
        CHECK(b.begin == next);
        CHECK(b.end >= b.begin);
        next = b.end;
        lo = std::min(lo, b.size()), hi = std::max(hi, b.size());
      }
      CHECK(next == n);
      CHECK(hi - lo <= 1);
    }
  // huge n: no overflow
  const std::size_t big = std::size_t(-1) / 2;
  CHECK(mpi::shard(big, 2, 3).end == big);
  CHECK_THROWS_AS(mpi::shard(10, 3, 3), value_error);
  // the ranks' own blocks, gathered: every index once
  const auto b = mpi::shard(11, comm());
  std::vector<std::uint64_t> mine;
  for (std::size_t i = b.begin; i < b.end; ++i) mine.push_back(i);
  const auto all = mpi::gather(comm(), mine, {.broadcast = true});
  REQUIRE(all);
  REQUIRE(all->size() == 11);
  for (std::size_t i = 0; i < 11; ++i) CHECK((*all)[i] == i);
}

TEST_CASE("serializers round-trip; short messages are io_error") {
  DoubleMlp net;
  initialize(net, 3);
  const auto X = random_rows<double>({9, 6}, 4);
  const profile p = profile_network(net, X, {.grain = granularity::element});
  const profile q = mpi::from_bytes<profile>(mpi::to_bytes(p));
  CHECK(q.sums == p.sums);
  CHECK(q.names == p.names);
  CHECK(q.samples == 9);
  CHECK(q.fingerprint == p.fingerprint);
  CHECK(q.grain == granularity::element);
  const contrib_table t = nnslicer(net, p, X, criterion::predicted());
  const contrib_table u = mpi::from_bytes<contrib_table>(mpi::to_bytes(t));
  CHECK(u.neurons == t.neurons);
  CHECK(u.synapses == t.synapses);
  CHECK(u.node_names == t.node_names);
  auto bytes = mpi::to_bytes(p);
  bytes.resize(bytes.size() / 2);
  CHECK_THROWS_AS(mpi::from_bytes<profile>(bytes), io_error);
  bytes = mpi::to_bytes(p);
  bytes.push_back(0);
  CHECK_THROWS_WITH_AS(mpi::from_bytes<profile>(bytes), doctest::Contains("left over"), io_error);
  static_assert(!mpi::Serializable<std::vector<double>*>);
}

TEST_CASE("reduce_merge: a profile over the ranks equals profile_network over all samples") {
  FloatNet net;
  initialize(net, 11);
  const auto X = random_rows<float>({37, 1, 8, 8}, 12, 0, 1);
  for (auto grain : {granularity::channel, granularity::element}) {
    CAPTURE(granularity_name(grain));
    const profile_options o{.grain = grain, .batch = 8};
    const profile single = profile_network(execution::seq, net, X, o);
    // explicit: shard, profile the local rows, reduce
    const auto local = profile_network(execution::seq, net, mpi::shard_rows(X, comm()), o);
    const auto root = mpi::reduce_merge(comm(), local);
    CHECK(root.has_value() == (comm().rank() == 0));
    // the driver, broadcast
    const auto m = mpi::profile_network(comm(), execution::seq, net, X, o, {.broadcast = true});
    REQUIRE(m);
    CHECK(m->samples == 37);
    // with the thread pool inside each rank (its tasks merge in another order: within rounding)
    const auto mp = mpi::profile_network(comm(), execution::par, net, X, o, {.broadcast = true});
    REQUIRE(mp);
    check_close(*mp, single, 1e-12);
    // bit for bit: one process merging the same blocks in rank order
    const profile blocks = merged_blocks(net, X, comm().size(), o);
    CHECK(m->sums == blocks.sums);
    if (root) CHECK(root->sums == blocks.sums);
    // one pass over all samples: the same sums up to the summation order
    check_close(*m, single, 1e-12);
  }
  // a double network: the same
  DoubleMlp dn;
  initialize(dn, 5);
  const auto Xd = random_rows<double>({23, 6}, 6);
  const auto md = mpi::profile_network(comm(), execution::seq, dn, Xd, {}, {.broadcast = true});
  REQUIRE(md);
  check_close(*md, profile_network(dn, Xd), 1e-12);
  CHECK(md->sums == merged_blocks(dn, Xd, comm().size(), {}).sums);
}

TEST_CASE("reduce_merge: a contribution table over the ranks equals one process exactly") {
  DoubleMlp net;
  initialize(net, 21);
  const auto Xtrain = random_rows<double>({40, 6}, 22);
  const auto X = random_rows<double>({13, 6}, 23);
  const profile p = profile_network(net, Xtrain);
  for (bool abs_sum : {false, true}) {
    slice_options so;
    so.abs_sum = abs_sum;
    const contrib_table single = nnslicer(net, p, X, criterion::predicted(), so);
    const auto m = mpi::nnslicer(comm(), execution::par, net, p, X, criterion::predicted(), so);
    CHECK(m.has_value() == (comm().rank() == 0));
    if (m) {
      CHECK(m->samples == 13);
      CHECK(m->neurons == single.neurons);
      CHECK(m->synapses == single.synapses);
    }
  }
}

TEST_CASE("IDC coverage over the ranks equals one process exactly; broadcast of a prepared state") {
  DoubleMlp net;
  initialize(net, 9);
  const auto Xtrain = random_rows<double>({200, 6}, 10, 0, 1);
  const auto z = forward(net, Xtrain);
  std::vector<std::size_t> y;
  for (std::size_t i = 0; i < 200; ++i)
    y.push_back(std::size_t(std::max_element(z.data() + i * 3, z.data() + i * 3 + 3) - (z.data() + i * 3)));
  // prepared on root only, sent to the others
  idc prepared;
  if (comm().rank() == 0) prepared = prepare_idc(net, Xtrain, y, {.m = 4});
  const idc c = mpi::broadcast(comm(), prepared);
  CHECK(c.neurons().size() == 4);
  const auto Xtest = random_rows<double>({61, 6}, 11, -0.5, 1.5);
  idc single = c;
  const auto rs = measure(net, Xtest, single);
  const auto m = mpi::measure(comm(), execution::seq, net, Xtest, c, {.broadcast = true});
  REQUIRE(m);
  CHECK(m->result().covered == rs.covered);
  CHECK(m->result().percent == rs.percent);
  CHECK(m->covered_combinations() == single.covered_combinations());
  CHECK(c.covered() == 0);  // the input state is not changed
  // relevance totals (the preparation's first step) reduce too; counts exactly
  const auto rt = neuron_relevance_of(net, mpi::shard_rows(Xtrain, comm()),
                                      std::vector<std::size_t>(y.begin() + std::ptrdiff_t(mpi::shard(200, comm()).begin),
                                                               y.begin() + std::ptrdiff_t(mpi::shard(200, comm()).end)));
  const auto all = mpi::reduce_merge(comm(), rt, {.broadcast = true});
  const auto one = neuron_relevance_of(net, Xtrain, y);
  REQUIRE(all);
  CHECK(all->samples == one.samples);
  CHECK(all->seen == 200);
  for (std::size_t i = 0; i < one.total.size(); ++i) CHECK(all->total[i] == doctest::Approx(one.total[i]).epsilon(1e-12));
}

namespace {
const difftest::image_shape img{1, 4, 4};
difftest::black_box brightness(double threshold, std::string name) {
  return difftest::wrap([threshold](std::span<const float> x, std::span<float> p) {
    double s = 0;
    for (float v : x) s += v;
    const double t = 1.0 / (1.0 + std::exp(-(s / double(x.size()) - threshold) / 10.0));
    p[0] = float(t);
    p[1] = float(1 - t);
  }, img.size(), 2, std::move(name));
}
}  // namespace

TEST_CASE("DFlare over the ranks (query budget) equals one process; first_index keeps each seed's stream") {
  const auto f = brightness(100, "f"), g = brightness(104, "g");
  std::vector<float> seeds;
  for (float v : {200.f, 180.f, 60.f, 230.f, 20.f, 150.f, 101.f}) seeds.insert(seeds.end(), img.size(), v);
  difftest::dflare_options o;
  o.image = img;
  o.max_queries = 300;
  o.max_seconds = 0;
  o.seed = 7;
  const auto single = difftest::dflare(f, g, seeds, 7, o);
  const auto m = mpi::dflare(comm(), execution::par, f, g, seeds, 7, o, {.broadcast = true});
  REQUIRE(m);
  REQUIRE(m->seeds.size() == 7);
  for (std::size_t i = 0; i < 7; ++i) {
    CAPTURE(i);
    const auto &a = m->seeds[i], &b = single.seeds[i];
    CHECK(a.index == i);
    CHECK(a.status == b.status);
    CHECK(a.queries == b.queries);
    CHECK(a.accepted == b.accepted);
    CHECK(a.corpus == b.corpus);
    CHECK(a.label_f == b.label_f);
    CHECK(a.label_g == b.label_g);
    CHECK(a.input == b.input);
    CHECK(a.probs_f == b.probs_f);
  }
  const auto s1 = m->summary(), s0 = single.summary();
  CHECK(s1.found == s0.found);
  CHECK(s1.not_found == s0.not_found);
  CHECK(s1.already_triggering == s0.already_triggering);
  CHECK(s1.success_rate == s0.success_rate);
  CHECK(s1.mean_queries == s0.mean_queries);
  CHECK(s1.total_queries == s0.total_queries);
}

TEST_CASE("ExactLine over the ranks: one process's segments bit for bit; its errors, typed") {
  using Net = Sequential<Input<5>, Dense<16, double>, ReLU, Dense<16, double>, ReLU, Dense<4, double>>;
  Net net;
  initialize(net, 61);
  std::mt19937_64 rng(6100);
  std::uniform_real_distribution<double> u(-3, 3);
  std::vector<std::vector<double>> A(7, std::vector<double>(5)), B(7, std::vector<double>(5));
  for (auto* v : {&A, &B})
    for (auto& row : *v)
      for (auto& e : row) e = u(rng);
  B[4] = A[4];  // degenerate
  line_options o;
  o.keep_going = true;
  o.validate = true;
  const auto one = exact_lines(execution::seq, net, A, B, o);
  const auto all = mpi::exact_lines(comm(), execution::seq, net, A, B, o);
  if (comm().rank() != 0) {
    CHECK(!all);
  } else {
    REQUIRE(all);
    REQUIRE(all->size() == one.size());
    for (std::size_t i = 0; i < one.size(); ++i) {
      CAPTURE(i);
      CHECK((*all)[i].t == one[i].t);
      CHECK((*all)[i].values == one[i].values);
      CHECK((*all)[i].from == one[i].from);
      CHECK((*all)[i].output_shape == one[i].output_shape);
      CHECK((*all)[i].stats.points == one[i].stats.points);
      CHECK((*all)[i].stats.validated_pieces == one[i].stats.validated_pieces);
      CHECK((*all)[i].stats.max_deviation == one[i].stats.max_deviation);
      CHECK((*all)[i].error == one[i].error);
    }
    CHECK(!(*all)[4].error.empty());
  }
  o.keep_going = false;
  if (comm().rank() == 0)
    CHECK_THROWS_WITH_AS(mpi::exact_lines(comm(), execution::seq, net, A, B, o),
                         doctest::Contains("exact_lines: segment 4: exact_line: the segment is degenerate"), value_error);
  else
    CHECK_NOTHROW(mpi::exact_lines(comm(), execution::seq, net, A, B, o));
  // the serialiser round-trips a line exactly
  const auto back = mpi::from_bytes<line_result<double>>(mpi::to_bytes(one[0]));
  CHECK(back.t == one[0].t);
  CHECK(back.values == one[0].values);
  CHECK(back.input_shape == one[0].input_shape);
}

TEST_CASE("errors: one rank's exception reaches every rank; empty blocks contribute nothing") {
  const int last = comm().size() - 1;
  auto f = [&](mpi::range r) -> profile {
    if (comm().rank() == last) throw value_error("bad block");
    profile p;
    p.samples = r.size();
    return p;
  };
  const std::string expect = "mpi rank " + std::to_string(last) + ": bad block";
  CHECK_THROWS_WITH_AS(mpi::map_reduce(comm(), 10, f), doctest::Contains(expect.c_str()), value_error);
  // n = 1: only rank 0 has work
  auto g = [](mpi::range r) {
    profile p;
    p.samples = r.size();
    return p;
  };
  const auto one = mpi::map_reduce(comm(), 1, g, {.broadcast = true});
  REQUIRE(one);
  CHECK(one->samples == 1);
  const auto none = mpi::map_reduce(comm(), 0, g, {.broadcast = true});
  CHECK(!none);
  // a merge that fails (profiles of different models) fails everywhere
  profile p;
  p.fingerprint = std::uint64_t(comm().rank());
  if (comm().size() > 1) CHECK_THROWS_AS(mpi::reduce_merge(comm(), p, {.broadcast = true}), data_error);
  // after all that, the ranks are still in step
  CHECK(mpi::reduce_merge(comm(), g(mpi::range{0, 2}), {.broadcast = true})->samples == std::size_t(2 * comm().size()));
}

// The tool test (tests/tool/CMakeLists.txt, tests/mpi/check_tool_profile.cmake) uses this
// executable, run alone, to compare `nnlens profile` with `mpirun -np 2 nnlens profile`.
TEST_CASE("tool: two profile files hold the same profile (NNLENS_MPI_COMPARE_PROFILES=A:B)") {
  const char* e = std::getenv("NNLENS_MPI_COMPARE_PROFILES");
  if (!e) return;
  const std::string ab = e;
  const auto colon = ab.find(':');
  REQUIRE(colon != std::string::npos);
  const profile a = load_profile(ab.substr(0, colon)), b = load_profile(ab.substr(colon + 1));
  check_close(a, b, 1e-12);
  std::cout << "profiles " << (a.sums == b.sums ? "identical" : "equal within 1e-12 (not bit for bit)") << "\n";
}

int main(int argc, char** argv) {
  mpi::communicator c(argc, argv);
  world = &c;
  doctest::Context ctx(argc, argv);
  if (c.rank() != 0) ctx.setOption("minimal", true), ctx.setOption("no-colors", true);  // failures only
  int res = ctx.run();
  if (ctx.shouldExit()) return res;
  int worst = 0;
  MPI_Allreduce(&res, &worst, 1, MPI_INT, MPI_MAX, c.get());
  if (c.rank() == 0 && worst == 0) std::cout << "test_mpi: all " << c.size() << " ranks passed\n";
  return worst;
}
