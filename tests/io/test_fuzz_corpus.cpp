// Replays every file of the fuzz corpora (fuzz/corpus/<target>/) through its reader: each must
// either load or throw an nnlens::error -- never crash, never throw anything else.  Also checks
// the in-memory IDX reader against the file reader.
#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "nnlens/io/csv.hpp"
#include "nnlens/io/idx.hpp"
#include "nnlens/io/nnet.hpp"
#include "nnlens/network/forward.hpp"

using namespace nnlens;
namespace fs = std::filesystem;

namespace {
const fs::path corpus = fs::path(NNLENS_SOURCE_DIR) / "fuzz" / "corpus";

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// Runs f on every file of corpus/<target>; counts successes and nnlens::errors.
template <class F>
void replay(const std::string& target, F f) {
  int ok = 0, rejected = 0;
  REQUIRE(fs::is_directory(corpus / target));
  for (const auto& e : fs::directory_iterator(corpus / target)) {
    const std::string bytes = slurp(e.path());
    INFO(e.path().string());
    try {
      f(bytes);
      ++ok;
    } catch (const nnlens::error&) {
      ++rejected;
    }
  }
  CHECK(ok > 0);  // the corpora hold valid files too
  CHECK(rejected > 0);
  MESSAGE(target, ": ", ok, " files load, ", rejected, " rejected with nnlens::error");
}
}  // namespace

TEST_CASE("fuzz corpus: nnet") {
  replay("nnet", [](const std::string& b) {
    auto m = io::parse_nnet<float>(b, "corpus");
    xt::xarray<float> x = xt::zeros<float>({std::size_t(1), m.net.input_shape()[0]});
    (void)forward(m.net, x);
  });
}

TEST_CASE("fuzz corpus: csv (the first two bytes select shape and options, as in fuzz_csv.cpp)") {
  replay("csv", [](const std::string& b) {
    if (b.size() < 2) throw io_error("too short");
    const auto* d = reinterpret_cast<const std::uint8_t*>(b.data());
    shape s;
    const unsigned k = d[0] % 8;
    if (d[1] % 3 == 1) s = shape(k);
    if (d[1] % 3 == 2) s = shape(k % 3 + 1, k % 2 + 1, k / 4 + 1);
    io::csv_options o;
    o.header = io::csv_header(d[1] / 3 % 3);
    o.delimiter = (d[1] & 0x80) ? ';' : ',';
    (void)io::parse_csv<float>(std::string_view(b).substr(2), s, "corpus", o);
  });
}

TEST_CASE("fuzz corpus: idx") {
  replay("idx", [](const std::string& b) {
    io::idx_limits lim;
    lim.max_bytes = std::uint64_t(1) << 24;
#ifndef NNLENS_HAS_ZLIB
    if (b.size() >= 2 && std::uint8_t(b[0]) == 0x1f && std::uint8_t(b[1]) == 0x8b) {
      CHECK_THROWS_AS(io::parse_idx(b.data(), b.size(), "corpus", lim), io_error);
      return;
    }
#endif
    (void)io::parse_idx(b.data(), b.size(), "corpus", lim);
  });
}

TEST_CASE("parse_idx in memory equals read_idx on the file; errors name the buffer") {
  for (const char* f : {"u8_2x2x2.idx", "f32_2.idx", "i16_2.idx", "i32_1x1.idx", "f64_1.idx"}) {
    const fs::path p = corpus / "idx" / f;
    const std::string b = slurp(p);
    const auto a = io::read_idx(p), m = io::parse_idx(b.data(), b.size(), "mem");
    CHECK(a.type == m.type);
    CHECK(a.dims == m.dims);
    CHECK(a.bytes == m.bytes);
  }
  const std::string b = slurp(corpus / "idx" / "f32_2.idx");
  const auto a = io::parse_idx(b.data(), b.size());
  CHECK(a.at<float>(0) == 1.5f);
  CHECK(a.at<float>(1) == -2.0f);
  CHECK_THROWS_WITH_AS(io::parse_idx(b.data(), b.size() - 1, "buf"), doctest::Contains("buf: truncated"), io_error);
#ifdef NNLENS_HAS_ZLIB
  const std::string g = slurp(corpus / "idx" / "gz_u8.idx");
  const auto z = io::parse_idx(g.data(), g.size(), "gz");
  CHECK(z.dims == std::vector<std::size_t>{2, 2, 2});
  CHECK(z.bytes[7] == 7);
  const std::string t = slurp(corpus / "idx" / "gz_trunc.idx");
  CHECK_THROWS_WITH_AS(io::parse_idx(t.data(), t.size(), "gzt"), doctest::Contains("gzt: "), io_error);
#endif
}
