// tests/tool/slice/precision_layout.cpp -- `nnlens profile` / `nnlens slice` with --precision and
// --layout.
//
//  * ACAS Xu 1_1 (.nnet: float64 weights) profiled and sliced at f32 and at f64: every profile sum
//    agrees within 1e-5 (relative), and the f64 profile is not the f32 one widened (some sum differs
//    in its bits: the weights were kept in double); the slices' CONTRIB tables agree; the JSON
//    states "precision"; a profile made at f32 is refused by slice --precision f64 with a message
//    naming the precision.
//  * The synthetic NHWC model: profile and slice on NHWC rows (the declared layout) and on the same
//    rows transposed by hand to NCHW with --layout nchw give the same profile and the same slice;
//    the CONTRIB of the input's elements comes back in each run's data layout (the NHWC run's is the
//    NCHW run's transposed).
#include <charconv>

#include "../tool_harness.hpp"

using namespace tool_test;

namespace {

/// The sums of a profile file ("nnlens-profile 1"), tensor by tensor; the fingerprint.
struct profile_text {
  std::uint64_t fingerprint = 0;
  std::vector<std::vector<double>> sums;
};
profile_text read_profile(const std::string& path) {
  std::ifstream f(path);
  REQUIRE(f.good());
  profile_text p;
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("fingerprint ", 0) == 0) p.fingerprint = std::stoull(line.substr(12));
    if (line.rfind("tensor ", 0) != 0) continue;
    const std::size_t n = std::stoul(line.substr(7));
    std::getline(f, line);
    std::vector<double> v;
    std::stringstream ss(line);
    std::string t;
    while (ss >> t) v.push_back(std::stod(t));
    REQUIRE(v.size() == n);
    p.sums.push_back(std::move(v));
  }
  return p;
}

}  // namespace

#ifdef NNLENS_TOOL_ACAS
TEST_CASE("profile and slice: ACAS Xu at f64 agree with f32 within 1e-5, and are computed in double") {
  const std::string d = work_dir("slice_precision"), acas = NNLENS_TOOL_ACAS, rows = tests_dir("slice/acas_samples.csv");
  for (const char* g : {"channel", "element"}) {
    CAPTURE(g);
    const std::string p32 = d + "/" + g + "32.profile", p64 = d + "/" + g + "64.profile";
    auto r = tool({"profile", acas, "--data", rows, "-o", p32, "--granularity", g});
    REQUIRE_MESSAGE(r.rc == 0, r.err);
    CHECK(r.out.find(std::string("(") + g + " granularity, f32)") != std::string::npos);
    r = tool({"profile", acas, "--data", rows, "-o", p64, "--granularity", g, "--precision", "f64"});
    REQUIRE_MESSAGE(r.rc == 0, r.err);
    CHECK(r.out.find(std::string("(") + g + " granularity, f64)") != std::string::npos);
    const auto a = read_profile(p32), b = read_profile(p64);
    REQUIRE(a.sums.size() == b.sums.size());
    CHECK(a.fingerprint != b.fingerprint);  // the weights hashed as float vs as double
    std::size_t differ = 0, total = 0;
    for (std::size_t t = 0; t < a.sums.size(); ++t) {
      REQUIRE(a.sums[t].size() == b.sums[t].size());
      for (std::size_t i = 0; i < a.sums[t].size(); ++i, ++total) {
        CHECK_MESSAGE(near(a.sums[t][i], b.sums[t][i], 1e-5), "tensor ", t, " neuron ", i, ": ", a.sums[t][i], " vs ", b.sums[t][i]);
        differ += a.sums[t][i] != b.sums[t][i];
      }
    }
    MESSAGE(std::string(g), ": ", differ, " of ", total, " profile sums differ in their bits between f32 and f64");
    CHECK(differ > total / 4);  // not float values widened: most sums carry double rounding

    const json s32 = tool_json({"slice", acas, "--profile", p32, "--samples", rows, "--json"});
    const json s64 = tool_json({"slice", acas, "--profile", p64, "--samples", rows, "--json", "--precision", "f64"});
    CHECK(s32.at("precision") == "f32");
    CHECK(s64.at("precision") == "f64");
    CHECK(s64.at("layout") == "none");
    CHECK(s32.at("layers") == s64.at("layers"));  // the slice sizes
    CHECK(s32.at("contrib") == s64.at("contrib"));

    // a profile of the other precision: refused, naming it
    r = tool({"slice", acas, "--profile", p32, "--samples", rows, "--precision", "f64"});
    CHECK(r.rc == 1);
    CHECK_MESSAGE(r.err.find("made with --precision f32; slice with --precision f32, or profile again with --precision f64") !=
                      std::string::npos,
                  r.err);
  }
}
#endif

#ifdef NNLENS_TOOL_NHWC
TEST_CASE("profile and slice: NHWC rows and the same rows as NCHW with --layout nchw") {
  const std::string d = work_dir("slice_layout"), model = NNLENS_TOOL_NHWC;
  const auto l = write_layout_rows(d, 12, 16);
  const std::size_t C = l.C, H = l.H, W = l.W;
  for (const char* prec : {"f32", "f64"}) {
    CAPTURE(prec);
    const std::string ph = d + "/h_" + prec + ".profile", pc = d + "/c_" + prec + ".profile";
    REQUIRE(tool({"profile", model, "--data", l.nhwc, "-o", ph, "--granularity", "element", "--precision", prec}).rc == 0);
    REQUIRE(tool({"profile", model, "--data", l.nchw, "-o", pc, "--granularity", "element", "--layout", "nchw",
                  "--precision", prec}).rc == 0);
    CHECK(slurp(ph) == slurp(pc));  // the same activations, bit for bit
    const json jh = tool_json({"slice", model, "--profile", ph, "--samples", l.nhwc, "--json", "--precision", prec});
    const json jc = tool_json({"slice", model, "--profile", ph, "--samples", l.nchw, "--json", "--precision", prec,
                               "--layout", "nchw"});
    CHECK(jh.at("layout") == "nhwc");
    CHECK(jc.at("layout") == "nchw");
    CHECK(jh.at("layers") == jc.at("layers"));
    json ch = jh.at("contrib"), cc = jc.at("contrib");
    const auto in_h = ch.at("input").get<std::vector<long long>>(), in_c = cc.at("input").get<std::vector<long long>>();
    REQUIRE(in_h.size() == C * H * W);
    CHECK(nhwc_to_nchw(in_h, C, H, W) == in_c);
    std::size_t marked = 0;
    for (auto v : in_c) marked += v != 0;
    CHECK(marked > 0);  // the input is in the slice: the transposition was checked on something
    bool asymmetric = false;  // a transposition that would not show (every value equal) checks nothing
    for (std::size_t i = 0; i < in_h.size(); ++i) asymmetric = asymmetric || in_h[i] != in_c[i];
    CHECK(asymmetric);
    ch.erase("input"), cc.erase("input");
    CHECK(ch == cc);
  }
}
#endif
