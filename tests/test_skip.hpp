// tests/test_skip.hpp -- skipped test cases that ctest reports as skipped, never as passed.
//
//   if (!fs::exists(path)) NNLENS_SKIP("no ", path.string());   // records the skip, returns
//   const fs::path models = nnlens_test::shared_dir() / "models";  // $NNLENS_SHARED_DIR or the build's
//   const fs::path fashion = nnlens_test::fashion_dir();           // $NNLENS_FASHION_DIR or the build's
//
// A test case that cannot run because something outside the repository is missing (the shared
// models, Fashion-MNIST, /usr/bin/python3, libonnx-testdata, a library the build lacks) calls
// NNLENS_SKIP(reason...) and returns.  The skip is recorded with the test case's name and printed
// at once and again at the end of the run.  tests/main.cpp then exits with
// nnlens_test::skip_exit_code (77) when at least one test case skipped and none failed, and
// tests/CMakeLists.txt sets SKIP_RETURN_CODE 77 on every nnlens_add_test executable, so ctest shows
// the executable as "Skipped" (a failure still exits 1 and shows as "Failed").  What that means
// for an executable whose other cases passed: docs/dev/testing.md.
//
// requires: NNLENS_SKIP is used in the body of a TEST_CASE (or a SUBCASE) -- it expands to a
//           `return;` -- and the executable's main is tests/main.cpp.
// ensures:  nnlens_test::skips() lists each (test case, reason) once, in the order of first skip.
// The directories: the environment variables NNLENS_SHARED_DIR / NNLENS_FASHION_DIR, when set and
// non-empty, override the paths compiled in (CMake's cache variables of the same names), so one
// built executable can be run against an empty folder to see its skips.
#pragma once

#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace nnlens_test {

/// The exit code of a run in which some test case skipped and none failed (the automake / ctest
/// convention).
inline constexpr int skip_exit_code = 77;

struct skip_record {
  std::string test_case, reason;
};

/// Every skip of this run, and the name of the test case running now (set by tests/main.cpp's
/// listener).
struct skip_registry {
  std::mutex m;
  std::string current;
  std::vector<skip_record> skips;
};
inline skip_registry& skip_state() {
  static skip_registry r;
  return r;
}

/// A copy of the skips recorded so far.
inline std::vector<skip_record> skips() {
  auto& r = skip_state();
  std::lock_guard<std::mutex> l(r.m);
  return r.skips;
}

/// Records that the running test case skipped, for `reason`, and prints it to stdout.
inline void record_skip(std::string reason) {
  auto& r = skip_state();
  std::lock_guard<std::mutex> l(r.m);
  for (const auto& s : r.skips)
    if (s.test_case == r.current && s.reason == reason) return;  // a test case re-entered for its subcases
  std::printf("SKIPPED: %s: %s\n", r.current.c_str(), reason.c_str());
  std::fflush(stdout);
  r.skips.push_back({r.current, std::move(reason)});
}

template <class... A>
std::string skip_reason(const A&... a) {
  std::ostringstream os;
  (os << ... << a);
  return os.str();
}

/// $name when set and non-empty, else `compiled`.
inline std::filesystem::path env_or(const char* name, const char* compiled) {
  const char* e = std::getenv(name);
  return (e && *e) ? std::filesystem::path(e) : std::filesystem::path(compiled);
}

#ifdef NNLENS_SHARED_DIR
/// The shared folder (models/, ...): $NNLENS_SHARED_DIR or the build's NNLENS_SHARED_DIR.
inline std::filesystem::path shared_dir() { return env_or("NNLENS_SHARED_DIR", NNLENS_SHARED_DIR); }
#endif
#ifdef NNLENS_FASHION_DIR
/// Fashion-MNIST's IDX files: $NNLENS_FASHION_DIR or the build's NNLENS_FASHION_DIR.
inline std::filesystem::path fashion_dir() { return env_or("NNLENS_FASHION_DIR", NNLENS_FASHION_DIR); }
#endif

}  // namespace nnlens_test

/// Skips the rest of the running test case: records the reason (its arguments, streamed) and
/// returns from the enclosing function, which must return void (a TEST_CASE body).
#define NNLENS_SKIP(...)                                                        \
  do {                                                                          \
    ::nnlens_test::record_skip(::nnlens_test::skip_reason(__VA_ARGS__));        \
    return;                                                                     \
  } while (0)
