// Shared by the DFlare tests (test_dflare, test_lockstep, test_thrust_dflare): two DFlare results
// are the same search, every field but the wall-clock seconds.
#pragma once

#include <doctest/doctest.h>

#include <cstddef>

#include <nnlens/difftest/dflare.hpp>

namespace nnlens_test {

inline void check_identical(const nnlens::difftest::dflare_result& a, const nnlens::difftest::dflare_result& b) {
  REQUIRE(a.seeds.size() == b.seeds.size());
  for (std::size_t i = 0; i < a.seeds.size(); ++i) {
    CAPTURE(i);
    const auto &x = a.seeds[i], &y = b.seeds[i];
    CHECK(x.index == y.index);
    CHECK(x.status == y.status);
    CHECK(x.queries == y.queries);
    CHECK(x.seed_label == y.seed_label);
    CHECK(x.label_f == y.label_f);
    CHECK(x.label_g == y.label_g);
    CHECK(x.input == y.input);
    CHECK(x.probs_f == y.probs_f);
    CHECK(x.probs_g == y.probs_g);
    CHECK(x.accepted == y.accepted);
    CHECK(x.corpus == y.corpus);
    CHECK(x.error == y.error);
  }
  const auto s = a.summary(), t = b.summary();
  CHECK(s.found == t.found);
  CHECK(s.already_triggering == t.already_triggering);
  CHECK(s.failed == t.failed);
  CHECK(s.total_queries == t.total_queries);
  CHECK(s.mean_queries == t.mean_queries);
}

}  // namespace nnlens_test
