// Streamed ExactLine (exactline/stream.hpp, ig_stream.hpp; classify.hpp's class_tracker,
// line_checks.hpp's line_validator): the rows handed over as they are completed are exact_line's,
// bit for bit, bounded or not, one segment or many in parallel; validation on the stream counts
// what validate_line counts; class intervals merged on the fly are classify_line's; streamed exact
// IG and its Riemann sums are exact_ig's and riemann_from_pieces', bit for bit, in small batches too.
#include "exactline_checks.hpp"

#include <nnlens/exactline/classify.hpp>
#include <nnlens/exactline/ig_stream.hpp>
#include <nnlens/exactline/stream.hpp>

#include <cstring>
#include <mutex>
#include <random>
#include <type_traits>
#include <vector>

using namespace nnlens;
using namespace el_test;

namespace {

template <class S>
using Cnn = PoolCnn<S>;
template <class S>
using ResCnn = ResidualCnn<S>;

template <class S>
struct rows {
  std::vector<double> t;
  std::vector<S> y;
};

template <class S>
std::vector<S> as(const std::vector<double>& v) {
  return std::vector<S>(v.begin(), v.end());
}

}  // namespace

TEST_CASE_TEMPLATE("streamed ExactLine: the rows are exact_line's, bit for bit, bounded or not", S, double, float) {
  ResCnn<S> net;
  initialize(net, 45);
  std::mt19937_64 rng(4500);
  const auto P = as<S>(random_point(72, rng, -2, 2)), Q = as<S>(random_point(72, rng, -2, 2));
  for (std::size_t budget : {std::size_t(0), std::size_t(1) << 30, std::size_t(64) * 4 * 36 * sizeof(S)}) {
    CAPTURE(budget);
    line_options o;
    o.max_memory = budget;
    o.validate = true;
    o.validate_tol = std::is_same_v<S, float> ? 1e-3 : 1e-9;
    const auto ref = exact_line<S>(net, P, Q, o);
    REQUIRE(ref.pieces() >= 8);
    rows<S> got;
    const auto s = exact_line_stream<S>(
        net, P, Q,
        [&](double t, std::span<const S> y) {
          got.t.push_back(t);
          got.y.insert(got.y.end(), y.begin(), y.end());
        },
        o);
    CHECK(s.pieces == ref.pieces());
    CHECK(s.output_shape == ref.output_shape);
    CHECK(same_bits(got.t, ref.t));
    CHECK(same_bits(got.y, ref.values));
    // validation on the stream: every piece, as validate_line counts them
    CHECK(s.stats.validated_pieces == ref.stats.validated_pieces);
    CHECK(s.stats.violations == ref.stats.violations);
    CHECK(s.stats.max_deviation == ref.stats.max_deviation);
    CHECK(s.stats.violations == 0);
    if (budget == std::size_t(64) * 4 * 36 * sizeof(S)) CHECK(s.stats.sub_segments > 0);
  }
}

TEST_CASE("streamed ExactLine: many segments in parallel, each in order of t, each with its own rows") {
  Cnn<double> net;
  initialize(net, 46);
  std::mt19937_64 rng(4501);
  std::vector<std::vector<double>> A, B;
  for (int i = 0; i < 6; ++i) A.push_back(random_point(128, rng)), B.push_back(random_point(128, rng));
  B[3] = A[3];  // a degenerate segment: its error is recorded, the others run
  line_options o;
  o.keep_going = true;
  o.max_memory = 64 * 4 * 64 * sizeof(double);
  std::vector<rows<double>> got(A.size());
  std::mutex m;
  const auto s = exact_lines_stream(
      execution::par, net, A, B,
      [&](std::size_t i, double t, std::span<const double> y) {
        std::lock_guard<std::mutex> lock(m);
        got[i].t.push_back(t);
        got[i].y.insert(got[i].y.end(), y.begin(), y.end());
      },
      o);
  REQUIRE(s.size() == A.size());
  for (std::size_t i = 0; i < A.size(); ++i) {
    CAPTURE(i);
    if (i == 3) {
      CHECK(s[i].error.find("degenerate") != std::string::npos);
      CHECK(got[i].t.empty());
      continue;
    }
    line_options lo = o;
    lo.max_memory = 0;
    const auto ref = exact_line(net, A[i], B[i], lo);
    CHECK(s[i].error.empty());
    CHECK(s[i].pieces == ref.pieces());
    CHECK(same_bits(got[i].t, ref.t));
    CHECK(same_bits(got[i].y, ref.values));
  }
  // one segment, fewer than the threads: it runs parallel over its points, with the same rows
  rows<double> single;
  const auto s1 = exact_lines_stream(
      execution::par, net, std::vector<std::vector<double>>{A[0]}, std::vector<std::vector<double>>{B[0]},
      [&](std::size_t, double t, std::span<const double> y) {
        single.t.push_back(t);
        single.y.insert(single.y.end(), y.begin(), y.end());
      },
      o);
  CHECK(same_bits(single.t, got[0].t));
  CHECK(same_bits(single.y, got[0].y));
  o.keep_going = false;
  CHECK_THROWS_WITH_AS(exact_lines_stream(net, A, B, [](std::size_t, double, std::span<const double>) {}, o),
                       doctest::Contains("exact_lines_stream: segment 3: exact_line: the segment is degenerate"), value_error);
}

TEST_CASE("streamed ExactLine: an error from the consumer stops the segment") {
  Cnn<double> net;
  initialize(net, 47);
  std::mt19937_64 rng(4502);
  const auto P = random_point(128, rng), Q = random_point(128, rng);
  std::size_t seen = 0;
  CHECK_THROWS_WITH_AS(exact_line_stream(net, P, Q,
                                         [&](double, std::span<const double>) {
                                           if (++seen == 3) throw io_error("out.jsonl: disk full");
                                         }),
                       "out.jsonl: disk full", io_error);
  CHECK(seen == 3);
}

TEST_CASE("class_tracker: the intervals merged on the fly are classify_line's") {
  Cnn<double> net;
  initialize(net, 48);
  std::mt19937_64 rng(4503);
  std::size_t multi = 0;
  for (int k = 0; k < 6; ++k) {
    const auto P = random_point(128, rng, -3, 3), Q = random_point(128, rng, -3, 3);
    const auto r = exact_line(net, P, Q);
    for (class_rule rule : {class_rule::argmax, class_rule::argmin}) {
      const auto ref = classify_line(r, rule);
      multi += ref.size() > 1;
      std::vector<class_interval<double>> closed;
      class_tracker<double> c(r.out_size(), rule, [&](const class_interval<double>& iv) { closed.push_back(iv); });
      class_tracker<double> kept(r.out_size(), rule);
      for (std::size_t j = 0; j < r.t.size(); ++j) c.row(r.t[j], r.output(j).data()), kept.row(r.t[j], r.output(j).data());
      CHECK(c.intervals().size() <= 1);  // only the open one is held
      c.finish();
      CHECK(c.count() == ref.size());
      REQUIRE(closed.size() == ref.size());
      const auto all = kept.intervals();
      REQUIRE(all.size() == ref.size());
      for (std::size_t i = 0; i < ref.size(); ++i) {
        CHECK(closed[i].from == ref[i].from);
        CHECK(closed[i].to == ref[i].to);
        CHECK(closed[i].label == ref[i].label);
        CHECK(all[i].label == ref[i].label);
      }
    }
  }
  CHECK(multi > 0);  // some segment changes class
}

TEST_CASE_TEMPLATE("streamed exact IG: exact_ig's attributions and riemann_from_pieces' sums, bit for bit", S, double,
                   float) {
  ResCnn<S> net;
  initialize(net, 49);
  std::mt19937_64 rng(4504);
  const auto x = as<S>(random_point(72, rng, -2, 2)), b = as<S>(random_point(72, rng, -2, 2));
  const std::vector<riemann_sum> sums{{riemann_rule::left, 1}, {riemann_rule::left, 7},   {riemann_rule::right, 16},
                                      {riemann_rule::trapezoid, 5}, {riemann_rule::trapezoid, 300}};
  for (std::size_t budget : {std::size_t(0), std::size_t(1) << 30, std::size_t(14000) * sizeof(S)}) {
    CAPTURE(budget);
    line_options o;
    o.max_memory = budget;
    const auto ref = exact_ig<S>(net, x, b, 1, o);
    REQUIRE(ref.pieces() >= 8);
    std::size_t rows_seen = 0;
    const auto ig = exact_ig_stream<S>(net, x, b, 1, o, sums, [&](double, std::span<const S>) { ++rows_seen; });
    CHECK(rows_seen == ref.pieces() + 1);
    CHECK(ig.pieces == ref.pieces());
    CHECK(same_bits(ig.attributions, ref.attributions));
    CHECK(ig.delta == ref.delta);
    CHECK(ig.sum == ref.sum);
    REQUIRE(ig.riemann.size() == sums.size());
    for (std::size_t q = 0; q < sums.size(); ++q) {
      CAPTURE(q);
      CHECK(same_bits(ig.riemann[q], riemann_from_pieces(ref, sums[q].m, sums[q].rule)));
    }
  }
  // execution::par: the line parallel over its points, the batches' points over the threads
  const auto seq = exact_ig_stream<S>(execution::seq, net, x, b, 1, {}, sums);
  const auto par = exact_ig_stream<S>(execution::par, net, x, b, 1, {}, sums);
  CHECK(same_bits(par.attributions, seq.attributions));
  CHECK(same_bits(par.riemann[4], seq.riemann[4]));
  CHECK(par.pieces == seq.pieces);
  CHECK_THROWS_AS(exact_ig_stream<S>(net, x, b, 3), value_error);  // 3 outputs: no index 3
  CHECK_THROWS_AS(exact_ig_stream<S>(net, x, b, 0, {}, {{riemann_rule::left, 0}}), value_error);
}
