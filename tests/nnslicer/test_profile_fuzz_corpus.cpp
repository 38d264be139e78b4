// Replays fuzz/corpus/profile/ (the seeds of fuzz/fuzz_profile.cpp) through load_profile: each
// file must either load -- and then survive save_profile -> load_profile unchanged -- or throw an
// nnlens::error (io_error); never crash, never throw anything else.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include <unistd.h>

#include "nnlens/nnslicer/profile.hpp"

using namespace nnlens;
namespace fs = std::filesystem;

TEST_CASE("fuzz corpus: profile") {
  const fs::path corpus = fs::path(NNLENS_SOURCE_DIR) / "fuzz" / "corpus" / "profile";
  REQUIRE(fs::is_directory(corpus));
  const fs::path out = fs::temp_directory_path() / ("nnlens-profile-replay-" + std::to_string(::getpid()));
  int ok = 0, rejected = 0;
  for (const auto& e : fs::directory_iterator(corpus)) {
    INFO(e.path().string());
    try {
      const profile p = load_profile(e.path());
      save_profile(out, p);
      const profile q = load_profile(out);
      CHECK(q.sums == p.sums);
      CHECK(q.samples == p.samples);
      CHECK(q.fingerprint == p.fingerprint);
      CHECK(q.grain == p.grain);
      CHECK(q.names == p.names);
      CHECK(merge(p, q).samples == 2 * p.samples);
      ++ok;
    } catch (const io_error& err) {
      // the message names the file and a line
      CHECK(std::string(err.what()).rfind(e.path().string() + ":", 0) == 0);
      ++rejected;
    }
  }
  fs::remove(out);
  CHECK(ok >= 5);  // the valid seeds written with save_profile
  CHECK(rejected >= 5);
  MESSAGE("profile: ", ok, " files load, ", rejected, " rejected with io_error");
}
