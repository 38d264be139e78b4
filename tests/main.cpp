// tests/main.cpp -- doctest's main for every nnlens_add_test executable, with skips that ctest sees.
//
// Runs doctest as usual; then, when no test case failed but at least one called NNLENS_SKIP
// (tests/test_skip.hpp), lists the skips and exits with nnlens_test::skip_exit_code (77), which
// tests/CMakeLists.txt declares as the tests' SKIP_RETURN_CODE: ctest reports "Skipped", never
// "Passed", for a run that left something out.  A failure exits with doctest's code (1) as before.
// Options that only list or count (--help, --list-test-cases, ...) exit as doctest says.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <set>
#include <string>

#include "test_skip.hpp"

namespace {

/// Tells test_skip.hpp which test case is running (the skip records name it).
struct skip_listener : doctest::IReporter {
  explicit skip_listener(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats&) override {}
  void test_case_start(const doctest::TestCaseData& tc) override {
    auto& r = nnlens_test::skip_state();
    std::lock_guard<std::mutex> l(r.m);
    r.current = tc.m_name;
  }
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};

}  // namespace

DOCTEST_REGISTER_LISTENER("nnlens_skips", 1, skip_listener);

int main(int argc, char** argv) {
  doctest::Context ctx(argc, argv);
  const int rc = ctx.run();
  if (ctx.shouldExit()) return rc;
  const auto skips = nnlens_test::skips();
  if (!skips.empty()) {
    std::set<std::string> cases;
    for (const auto& s : skips) cases.insert(s.test_case);
    std::printf("[nnlens] %zu test case%s skipped (%zu skip%s):\n", cases.size(), cases.size() == 1 ? "" : "s", skips.size(),
                skips.size() == 1 ? "" : "s");
    for (const auto& s : skips) std::printf("[nnlens]   %s: %s\n", s.test_case.c_str(), s.reason.c_str());
    if (rc == 0) std::printf("[nnlens] nothing failed; exit code %d (ctest: Skipped)\n", nnlens_test::skip_exit_code);
    std::fflush(stdout);
  }
  return rc == 0 && !skips.empty() ? nnlens_test::skip_exit_code : rc;
}
