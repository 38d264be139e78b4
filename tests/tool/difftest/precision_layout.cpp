// tests/tool/difftest/precision_layout.cpp -- `nnlens difftest` and `nnlens compress` with
// --precision and --layout.
//
//  * compress: ACAS Xu 1_1 pruned by magnitude at f32 and at f64 gives the same sparsity and twins
//    that compute the same outputs within 1e-5 (relative) on the ACAS samples; at f64 the .onnx
//    twin is reported as float32 (a "note"); the LeNet-5 fixture's int8 twin calibrated at f64
//    classifies its calibration samples as the f32 one does; the JSON states "precision".
//  * difftest: DeepXplore's LeNet-5 against its q8 twin written by `compress --q8` (exact: the
//    weight-only twin) on 4 Fashion-MNIST seeds: f64 finds a triggering input for every seed f32
//    does, and at each one `nnlens run --precision f64` on the two models gives the reported labels,
//    which differ.
//  * The synthetic NHWC model: compress --int8 calibrated on NHWC rows and on the rows transposed by
//    hand with --layout nchw writes the same twin; difftest against a pruned twin on NHWC seeds and
//    on the transposed seeds with --layout nchw gives the same search (statuses, queries, labels),
//    and the triggering inputs it writes are in each run's data layout (the NHWC file is the NCHW
//    file transposed), so `nnlens run` reproduces the deviation from them.
#include "../tool_harness.hpp"

using namespace tool_test;

namespace {

std::vector<std::vector<double>> run_outputs(const std::string& model, const std::string& rows, const std::string& dir,
                                             const std::vector<std::string>& extra) {
  std::vector<std::string> args{"run", model, "--input", rows, "--output", dir + "/run.csv"};
  args.insert(args.end(), extra.begin(), extra.end());
  const auto r = tool(args);
  REQUIRE_MESSAGE(r.rc == 0, r.err);
  return read_rows(dir + "/run.csv");
}

}  // namespace

#ifdef NNLENS_TOOL_ACAS
TEST_CASE("compress: ACAS Xu pruned at f64 agrees with f32; the int8 twin at f64") {
  const std::string d = work_dir("compress_precision"), acas = NNLENS_TOOL_ACAS, rows = tests_dir("slice/acas_samples.csv");
  const json a = tool_json({"compress", acas, "--prune", "0.3", "-o", d + "/p32.onnx", "--json"});
  const json b = tool_json({"compress", acas, "--prune", "0.3", "-o", d + "/p64.onnx", "--json", "--precision", "f64"});
  CHECK(a.at("precision") == "f32");
  CHECK(b.at("precision") == "f64");
  CHECK(a.at("weight_sparsity") == b.at("weight_sparsity"));
  CHECK(!a.contains("note"));
  CHECK(b.at("note").get<std::string>().find("float32") != std::string::npos);
  const auto o32 = run_outputs(d + "/p32.onnx", rows, d, {}), o64 = run_outputs(d + "/p64.onnx", rows, d, {});
  REQUIRE(o32.size() == o64.size());
  for (std::size_t i = 0; i < o32.size(); ++i)
    for (std::size_t k = 0; k < o32[i].size(); ++k) CHECK(near(o32[i][k], o64[i][k], 1e-5));

  const std::string lenet = fixture("lenet5.nnlw"), cal = fixture("lenet5_input.csv"), labels = tests_dir("semslice/labels5.txt");
  const json q32 = tool_json({"compress", lenet, "--int8", "--calibration", cal, "--labels", labels, "-o", d + "/q32.nnlw", "--json"});
  const json q64 = tool_json({"compress", lenet, "--int8", "--calibration", cal, "--labels", labels, "-o", d + "/q64.nnlw", "--json",
                              "--precision", "f64"});
  CHECK(q64.at("precision") == "f64");
  for (const char* k : {"quantized_layers", "accuracy", "twin_accuracy", "weight_sparsity"}) CHECK_MESSAGE(q32.at(k) == q64.at(k), k);
}
#endif

#if defined(NNLENS_TOOL_DX_LENET5) && defined(NNLENS_TOOL_FASHION)
TEST_CASE("difftest: DeepXplore's LeNet-5 against its q8 twin at f64; the triggers reproduce at f64") {
  const std::string d = work_dir("difftest_precision"), model = NNLENS_TOOL_DX_LENET5;
  REQUIRE(tool({"compress", model, "--q8", "-o", d + "/q8.onnx", "--precision", "f64"}).rc == 0);
  const std::vector<std::string> base{"difftest", model, d + "/q8.onnx", "--seeds", NNLENS_TOOL_FASHION, "--limit", "4",
                                      "--budget-queries", "3000", "--timeout", "0", "--json"};
  auto a32 = base, a64 = base;
  a32.insert(a32.end(), {"--out-dir", d + "/t32"});
  a64.insert(a64.end(), {"--out-dir", d + "/t64", "--precision", "f64"});
  const json a = tool_json(a32), b = tool_json(a64);
  CHECK(a.at("precision") == "f32");
  CHECK(b.at("precision") == "f64");
  CHECK(b.at("summary").at("found") == a.at("summary").at("found"));
  CHECK(b.at("summary").at("success_rate") == 1.0);
  for (const auto& s : b.at("seeds")) {
    REQUIRE(s.at("found") == true);
    const std::string in = s.at("input");
    const auto f = run_outputs(model, in, d, {"--precision", "f64"}), g = run_outputs(d + "/q8.onnx", in, d, {"--precision", "f64"});
    REQUIRE(f.size() == 1);
    REQUIRE(g.size() == 1);
    CHECK(argmax(f[0]) == s.at("labels")[0].get<std::size_t>());
    CHECK(argmax(g[0]) == s.at("labels")[1].get<std::size_t>());
    CHECK(argmax(f[0]) != argmax(g[0]));
  }
}
#endif

#ifdef NNLENS_TOOL_NHWC
TEST_CASE("compress and difftest: NHWC rows and the same rows as NCHW with --layout nchw") {
  const std::string d = work_dir("difftest_layout"), model = NNLENS_TOOL_NHWC;
  const auto l = write_layout_rows(d, 6, 11);
  for (const char* prec : {"f32", "f64"}) {
    CAPTURE(prec);
    const std::string p = prec;
    const json ch = tool_json({"compress", model, "--int8", "--calibration", l.nhwc, "-o", d + "/h" + p + ".onnx", "--json",
                               "--precision", prec});
    const json cc = tool_json({"compress", model, "--int8", "--calibration", l.nchw, "-o", d + "/c" + p + ".onnx", "--json",
                               "--precision", prec, "--layout", "nchw"});
    CHECK(ch.at("weight_sparsity") == cc.at("weight_sparsity"));
    CHECK(slurp(d + "/h" + p + ".onnx") == slurp(d + "/c" + p + ".onnx"));

    const std::vector<std::string> base{"difftest", model, "prune:0.5", "--budget-queries", "2000", "--timeout", "0", "--json",
                                        "--precision", prec};
    auto ah = base, ac = base;
    ah.insert(ah.end(), {"--seeds", l.nhwc, "--out-dir", d + "/th" + p});
    ac.insert(ac.end(), {"--seeds", l.nchw, "--out-dir", d + "/tc" + p, "--layout", "nchw"});
    const auto rh = tool(ah), rc = tool(ac);
    REQUIRE_MESSAGE(rh.rc <= 1, rh.err);  // 1: some seed found nothing within the budget
    REQUIRE(rh.rc == rc.rc);
    const json h = json::parse(rh.out), c = json::parse(rc.out);
    CHECK(h.at("layout") == "nhwc");
    CHECK(c.at("layout") == "nchw");
    REQUIRE(h.at("seeds").size() == c.at("seeds").size());
    std::size_t found = 0;
    for (std::size_t i = 0; i < h.at("seeds").size(); ++i) {
      const json &x = h.at("seeds")[i], &y = c.at("seeds")[i];
      CHECK(x.at("status") == y.at("status"));
      CHECK(x.at("queries") == y.at("queries"));
      CHECK(x.at("labels") == y.at("labels"));
      if (!x.contains("input")) continue;
      ++found;
      const auto th = read_rows(x.at("input")), tc = read_rows(y.at("input"));
      REQUIRE(th.size() == 1);
      REQUIRE(tc.size() == 1);
      CHECK(nhwc_to_nchw(th[0], l.C, l.H, l.W) == tc[0]);
      CHECK(th[0] != tc[0]);
      // the NHWC trigger, read in the model's declared layout, gives the original's label
      const auto f = run_outputs(model, x.at("input"), d, {"--precision", prec});
      CHECK(argmax(f[0]) == x.at("labels")[0].get<std::size_t>());
    }
    MESSAGE(std::string(prec), ": ", found, " of ", h.at("seeds").size(), " seeds found a triggering input");
    CHECK(found > 0);
  }
}
#endif
