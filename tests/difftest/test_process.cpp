// process_model / process_black_box against real child processes: tests/difftest/children/child.py
// (run by /usr/bin/python3; each misbehaviour is a mode) and the C++ child linear_child.cpp (built
// by CMake as difftest_linear_child; its path arrives as NNLENS_DIFFTEST_LINEAR_CHILD).
#include <doctest/doctest.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include <nnlens/difftest/dflare.hpp>
#include <nnlens/difftest/process.hpp>

#include "test_skip.hpp"

#ifndef NNLENS_SOURCE_DIR
#define NNLENS_SOURCE_DIR "."
#endif

using namespace nnlens::difftest;
using namespace std::chrono_literals;

namespace {

const std::string python = "/usr/bin/python3";
const std::string child_py = std::string(NNLENS_SOURCE_DIR) + "/tests/difftest/children/child.py";

bool have_python() { return ::access(python.c_str(), X_OK) == 0 && ::access(child_py.c_str(), R_OK) == 0; }

std::string py_child(const std::string& mode, std::size_t in = 4, std::size_t cls = 3, int k = 0) {
  return python + " " + child_py + " " + std::to_string(in) + " " + std::to_string(cls) + " " + mode + " " +
         std::to_string(k);
}

/// The model both children serve: softmax of logit[c] = sum_i x[i] * (((7i + 3c) % 5) - 2) / 10.
std::vector<float> reference(const std::vector<float>& x, std::size_t n, std::size_t in, std::size_t cls) {
  std::vector<float> p(n * cls);
  for (std::size_t r = 0; r < n; ++r) {
    std::vector<double> l(cls);
    double m = -1e300, s = 0;
    for (std::size_t c = 0; c < cls; ++c) {
      for (std::size_t i = 0; i < in; ++i) l[c] += x[r * in + i] * (double(long((7 * i + 3 * c) % 5) - 2) / 10.0);
      m = std::max(m, l[c]);
    }
    for (auto& v : l) s += (v = std::exp(v - m));
    for (std::size_t c = 0; c < cls; ++c) p[r * cls + c] = float(l[c] / s);
  }
  return p;
}

std::vector<float> inputs(std::size_t n, std::size_t in) {
  std::vector<float> x(n * in);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(int(i * 37 % 11) - 5) * 0.7f;
  return x;
}

/// True when this process has no child left (neither running nor a zombie).
bool no_children() {
  errno = 0;
  return ::waitpid(-1, nullptr, WNOHANG) == -1 && errno == ECHILD;
}

template <class E, class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "(no exception)";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

void check_serves(process_model& m, std::size_t n) {
  const auto x = inputs(n, m.input_size());
  std::vector<float> p(n * m.classes());
  m.predict(x, n, p);
  const auto want = reference(x, n, m.input_size(), m.classes());
  for (std::size_t i = 0; i < p.size(); ++i) REQUIRE(p[i] == doctest::Approx(want[i]).epsilon(1e-5));
}

}  // namespace

TEST_CASE("process: a correct Python child serves batches; black_box interface; clean shutdown") {
  if (!have_python()) NNLENS_SKIP(python, " or ", child_py, " not available");
  {
    process_model m(py_child("ok", 5, 4));
    CHECK(m.input_size() == 5);
    CHECK(m.classes() == 4);
    CHECK(m.running());
    check_serves(m, 1);
    check_serves(m, 7);
    check_serves(m, 300);  // 6000 bytes each way
    CHECK(m.starts() == 1);
  }
  CHECK(no_children());
  black_box b = process_black_box(py_child("ok", 3, 2), {.max_batch = 2}, "py");
  CHECK(b.name == "py");
  CHECK(b.input_size == 3);
  const auto x = inputs(5, 3);
  std::vector<float> p(10);
  b(x, 5, p);  // 3 requests of 2, 2, 1
  const auto want = reference(x, 5, 3, 2);
  for (std::size_t i = 0; i < p.size(); ++i) CHECK(p[i] == doctest::Approx(want[i]).epsilon(1e-5));
  CHECK_THROWS_AS(b(x, 4, p), nnlens::shape_error);
  b = {};
  CHECK(no_children());
}

TEST_CASE("process: the C++ example child") {
#ifdef NNLENS_DIFFTEST_LINEAR_CHILD
  {
    process_model m(std::string(NNLENS_DIFFTEST_LINEAR_CHILD) + " 6 3", {.input_size = 6, .classes = 3});
    check_serves(m, 1);
    check_serves(m, 64);
  }
  CHECK(no_children());
  // Expected sizes that differ from the header: shape_error, the child is reaped.
  const auto e = error_of<nnlens::shape_error>(
      [] { process_model m(std::string(NNLENS_DIFFTEST_LINEAR_CHILD) + " 6 3", {.classes = 10}); });
  CHECK(contains(e, "expected 6 and 10"));
  CHECK(no_children());
#endif
}

TEST_CASE("process: logits mode applies softmax in the parent") {
  if (!have_python()) NNLENS_SKIP(python, " or ", child_py, " not available");
  process_model m(py_child("logits", 4, 3), {.logits = true});
  check_serves(m, 3);
}

TEST_CASE("process: a child that crashes mid-answer gives process_error naming its exit; restart") {
  if (!have_python()) NNLENS_SKIP(python, " or ", child_py, " not available");
  {
    process_model m(py_child("crash", 4, 3, 1));
    check_serves(m, 2);  // the one good answer
    const auto e = error_of<process_error>([&] { check_serves(m, 2); });
    CHECK(contains(e, "child.py"));
    CHECK(contains(e, "exited with status 3"));
    CHECK(contains(e, "end of output"));
    CHECK(!m.running());
    // restart (default): the next request gets a fresh child, whose first answer is good again
    check_serves(m, 2);
    CHECK(m.starts() == 2);
  }
  CHECK(no_children());
  {
    process_model m(py_child("abort", 4, 3, 0), {.restart = false});
    const auto e = error_of<process_error>([&] { check_serves(m, 1); });
    CHECK_MESSAGE(contains(e, "SIGABRT"), e);
    const auto again = error_of<process_error>([&] { check_serves(m, 1); });
    CHECK(contains(again, "not running (restart is off)"));
  }
  CHECK(no_children());
}

TEST_CASE("process: writing to a dead child is EPIPE, not SIGPIPE") {
  if (!have_python()) NNLENS_SKIP(python, " or ", child_py, " not available");
  process_model m(py_child("exitreq", 1000, 3, 0));
  // 200 x 1000 floats = 800 kB: far beyond the pipe buffer, the child exits after 4 bytes.
  const auto x = inputs(200, 1000);
  std::vector<float> p(600);
  const auto e = error_of<process_error>([&] { m.predict(x, 200, p); });
  CHECK((contains(e, "broken pipe") || contains(e, "end of output")));
  CHECK(contains(e, "exited with status 3"));
}

TEST_CASE("process: a hanging child times out, is killed, and the parent goes on") {
  if (!have_python()) NNLENS_SKIP(python, " or ", child_py, " not available");
  {
    process_model m(py_child("hang", 4, 3, 1), {.request_timeout = 1000ms});
    check_serves(m, 1);
    const auto t0 = std::chrono::steady_clock::now();
    const auto e = error_of<process_error>([&] { check_serves(m, 1); });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    CHECK(s >= 0.9);
    CHECK(s < 5);
    CHECK(contains(e, "request timeout of 1000 ms"));
    CHECK(contains(e, "child.py"));
    CHECK(!m.running());
  }
  CHECK(no_children());
  // a child that never reads stdin: the write side times out too (no blocking write)
  {
    process_model m(py_child("noread", 1000, 3), {.request_timeout = 300ms});
    const auto x = inputs(100, 1000);
    std::vector<float> p(300);
    const auto e = error_of<process_error>([&] { m.predict(x, 100, p); });
    CHECK(contains(e, "request timeout of 300 ms"));
  }
  // no header at all: the startup timeout
  const auto e = error_of<process_error>([] { process_model m(py_child("nohdr"), {.startup_timeout = 300ms}); });
  CHECK(contains(e, "startup timeout of 300 ms"));
  const auto e2 = error_of<process_error>([] { process_model m("sleep 30", {.startup_timeout = 200ms}); });
  CHECK(contains(e2, "'sleep 30'"));
  CHECK(no_children());
  // and the parent continues with another child
  process_model ok(py_child("ok"));
  check_serves(ok, 3);
}

TEST_CASE("process: garbage answers are data_errors naming what was wrong") {
  if (!have_python()) NNLENS_SKIP(python, " or ", child_py, " not available");
  struct row {
    const char* mode;
    const char* says;
    bool keeps_child;
  };
  for (const row& r : {row{"nan", "is NaN", true}, row{"sum", "sums to 0.5", true},
                       row{"negative", "not a probability", true}, row{"count", "wrong count", false},
                       row{"extra", "8 bytes more", false}}) {
    CAPTURE(r.mode);
    process_model m(py_child(r.mode));
    const auto e = error_of<nnlens::data_error>([&] { check_serves(m, 2); });
    CHECK_MESSAGE(contains(e, r.says), e);
    CHECK(m.running() == r.keeps_child);
  }
  CHECK(no_children());
}

TEST_CASE("process: a wrong header, a failing start, a missing program") {
  if (!have_python()) NNLENS_SKIP(python, " or ", child_py, " not available");
  auto e = error_of<nnlens::data_error>([] { process_model m(py_child("header")); });
  CHECK(contains(e, "wrong header"));
  CHECK(contains(e, "hello world"));
  e = error_of<nnlens::data_error>([] { process_model m(py_child("version")); });
  CHECK(contains(e, "unsupported protocol version 2"));
  e = error_of<nnlens::data_error>([] { process_model m("echo nnlens-bb 1 0 3"); });
  CHECK(contains(e, "positive sizes"));
  e = error_of<process_error>([] { process_model m(py_child("stderr")); });
  CHECK(contains(e, "exited with status 1"));
  CHECK(contains(e, "ZeroDivisionError"));
  e = error_of<process_error>([] { process_model m("/nonexistent/nnlens-child --serve"); });
  CHECK(contains(e, "exited with status 127"));
  CHECK(contains(e, "/nonexistent/nnlens-child"));
  CHECK(no_children());
}

TEST_CASE("process: concurrent callers share one child") {
  if (!have_python()) NNLENS_SKIP(python, " or ", child_py, " not available");
  auto m = std::make_shared<process_model>(py_child("ok", 4, 3));
  black_box b = as_black_box(m);
  std::vector<std::thread> ts;
  std::vector<int> ok(4, 0);
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&, t] {
      const auto x = inputs(3, 4);
      std::vector<float> p(9);
      for (int i = 0; i < 5; ++i) b(x, 3, p);
      ok[std::size_t(t)] = p == std::vector<float>(p) && std::abs(p[0] + p[1] + p[2] - 1) < 1e-5;
    });
  for (auto& t : ts) t.join();
  for (int v : ok) CHECK(v == 1);
  CHECK(m->starts() == 1);
}

TEST_CASE("process: a search survives a child that crashes mid-search (the seed fails, the next restarts it)") {
  if (!have_python()) NNLENS_SKIP(python, " or ", child_py, " not available");
  // f: the linear model in-process; g: the same model in a child that crashes at its 31st request.
  const black_box f = wrap([](std::span<const float> x, std::size_t n, std::span<float> p) {
    const auto want = reference(std::vector<float>(x.begin(), x.end()), n, 16, 3);
    std::copy(want.begin(), want.end(), p.begin());
  }, 16, 3, "f");
  auto model = std::make_shared<process_model>(py_child("crash", 16, 3, 30));
  const black_box g = as_black_box(model, "g");
  std::vector<float> seeds(3 * 16);
  for (std::size_t i = 0; i < seeds.size(); ++i) seeds[i] = float(i % 7);
  dflare_options o;
  o.image = {1, 4, 4};
  o.max_queries = 20;  // 21 requests per seed (the seed's own query included)
  o.max_seconds = 0;
  // the sequential driver's request order (a lockstep run sends one request per round instead)
  const auto r = dflare(nnlens::execution::seq, f, g, seeds, 3, o);
  CHECK(r.seeds[0].status == seed_status::not_found);  // g == f: no trigger
  CHECK(r.seeds[0].queries == 20);
  CHECK(r.seeds[1].status == seed_status::failed);     // request 31 = seed 1's 10th
  CHECK(contains(r.seeds[1].error, "exited with status 3"));
  CHECK(r.seeds[2].status == seed_status::not_found);  // a fresh child
  CHECK(r.seeds[2].queries == 20);
  CHECK(model->starts() == 2);
}

TEST_CASE("process: a child that ignores end of input is killed after shutdown_timeout") {
  const auto t0 = std::chrono::steady_clock::now();
  {
    process_model m("echo 'nnlens-bb 1 2 2'; exec sleep 30", {.shutdown_timeout = 100ms});
    CHECK(m.running());
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(s < 2);
  CHECK(no_children());
  process_model m("echo 'nnlens-bb 1 2 2'; sleep 30", {.shutdown_timeout = 100ms});
  m.stop();  // the shell and its sleep: the whole process group goes
  CHECK(!m.running());
  CHECK(no_children());
}
