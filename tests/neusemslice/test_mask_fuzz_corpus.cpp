// Replays fuzz/corpus/mask/ (the seeds and finds of fuzz/fuzz_mask.cpp) through load_neuron_mask.
// Every file of the corpus is listed below with what it must do: load (and then survive
// save -> load unchanged), fit the test MLP or not (and then apply and count parameters), or be
// rejected with a data_error whose message names the line it stopped at.  A file added to the
// corpus without an entry here, or an entry whose file is gone, fails the test: the counts of
// accepted and rejected files are the table's, not whatever the loader happened to do.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "nnlens/nnlens.hpp"
#include "nnlens/neusemslice/neuron_mask.hpp"

using namespace nnlens;
namespace fs = std::filesystem;

namespace {

struct expected {
  bool loads;            // load_neuron_mask(is) returns a mask
  bool fits;             // load_neuron_mask(is, mlp, false) accepts it too
  std::string message;   // when rejected (by either call): a substring of the data_error's message
};

// The corpus: two hand-written seeds and the fuzzer's finds (each rejected on its first line:
// none of them starts with the header "nnlens-neuron-mask 1").
const std::map<std::string, expected> corpus_table = {
    {"valid_mlp", {true, true, ""}},  // 3 units (5, 4, 3 neurons): the test MLP's shape
    {"other", {true, false, "load_neuron_mask: the mask has 2 layers, the model 3"}},
    {"fuzz-04f029feccd2c5c3d3ef87329eb85606bbdd2698", {false, false, "neuron mask, line 1: not an nnlens-neuron-mask 1 file"}},
    {"fuzz-08f6d034daba6126b3a19775c626072c4dfcdcca", {false, false, "neuron mask, line 1: not an nnlens-neuron-mask 1 file"}},
    {"fuzz-0938bd8906efd33eb8846038ee810c910d410281", {false, false, "neuron mask, line 1: not an nnlens-neuron-mask 1 file"}},
    {"fuzz-25aa7a75257c834877ae9abcc4107ce5d0a7f2b4", {false, false, "neuron mask, line 1: not an nnlens-neuron-mask 1 file"}},
    {"fuzz-5ba93c9db0cff93f52b521d7420e43f6eda2784f", {false, false, "neuron mask, line 1: not an nnlens-neuron-mask 1 file"}},
    {"fuzz-adc83b19e793491b1c6ea0fd8b46cd9f32e592fc", {false, false, "neuron mask, line 1: not an nnlens-neuron-mask 1 file"}},
    {"fuzz-b85bdcb677c263ab93263dc974eb1f567379fc9c", {false, false, "neuron mask, line 1: not an nnlens-neuron-mask 1 file"}},
    {"fuzz-e0f3c877f716725287289fa9521a5901730f2f6c", {false, false, "neuron mask, line 1: not an nnlens-neuron-mask 1 file"}},
};

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("fuzz corpus: neuron mask (every file's outcome as listed)") {
  using Mlp = Sequential<Input<6>, Dense<5>, ReLU, Dense<4>, ReLU, Dense<3>>;
  Mlp net;
  initialize(net, 1);
  const fs::path corpus = fs::path(NNLENS_SOURCE_DIR) / "fuzz" / "corpus" / "mask";
  REQUIRE(fs::is_directory(corpus));
  std::size_t seen = 0, ok = 0, rejected = 0, fits = 0;
  for (const auto& e : fs::directory_iterator(corpus)) {
    const std::string name = e.path().filename().string();
    INFO(e.path().string());
    const auto it = corpus_table.find(name);
    CHECK_MESSAGE(it != corpus_table.end(), "not in the test's table: add the file's expected outcome");
    if (it == corpus_table.end()) continue;
    ++seen;
    const expected& want = it->second;
    std::ifstream f(e.path(), std::ios::binary);
    std::stringstream buf;
    buf << f.rdbuf();
    std::string error;
    try {
      std::istringstream is(buf.str());
      const neuron_mask m = load_neuron_mask(is);
      std::ostringstream os;
      save_neuron_mask(os, m);
      std::istringstream again(os.str());
      const neuron_mask r = load_neuron_mask(again);
      CHECK(r.keep == m.keep);
      CHECK(r.fingerprint == m.fingerprint);
      std::ostringstream os2;  // and the saved text is a fixed point
      save_neuron_mask(os2, r);
      CHECK(os2.str() == os.str());
      ++ok;
    } catch (const data_error& err) {
      error = err.what();
      ++rejected;
    }
    CHECK(error.empty() == want.loads);
    if (!want.loads) CHECK_MESSAGE(contains(error, want.message), error);
    bool fitted = false;
    try {
      std::istringstream is(buf.str());
      const neuron_mask m = load_neuron_mask(is, net, false);
      const auto acc = parameter_accounting(net, m);
      CHECK(acc.kept + acc.removed == acc.total);
      CHECK(acc.total > 0);
      (void)apply_neuron_mask(net, m);
      fitted = true;
      ++fits;
    } catch (const data_error& err) {
      if (want.loads) CHECK_MESSAGE(contains(err.what(), want.message), err.what());
    }
    CHECK(fitted == want.fits);
  }
  CHECK(seen == corpus_table.size());  // every listed file is still in the corpus
  CHECK(ok == 2);
  CHECK(rejected == corpus_table.size() - 2);  // the eight fuzzer finds
  CHECK(fits == 1);                            // valid_mlp
}
