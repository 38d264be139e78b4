// tests/tool/semslice/precision_layout.cpp -- `nnlens semslice` with --precision and --layout.
//
//  * The LeNet-5 fixture (labels 0/1): the slice at f64 keeps the same critical neurons per layer as
//    at f32, with the same k per category, parameters and accuracies; the JSON states "precision";
//    a mask written at f32 is read at f64 (a mask is which neurons are kept) and gives the same
//    counts; a mask of other weights is still refused.
//  * The synthetic NHWC model: the slice of NHWC rows equals the slice of the rows transposed by
//    hand to NCHW with --layout nchw (times aside), at both precisions.
#include "../tool_harness.hpp"

using namespace tool_test;

TEST_CASE("semslice: the LeNet-5 fixture at f64 agrees with f32; masks cross precisions") {
  const std::string d = work_dir("semslice_precision"), model = fixture("lenet5.nnlw");
  const std::vector<std::string> base{"semslice", model, "--data", fixture("lenet5_input.csv"), "--labels",
                                      tests_dir("semslice/labels5.txt"), "--categories", "0,1", "--samples", "5",
                                      "--test", fixture("lenet5_input.csv"), "--test-labels", tests_dir("semslice/labels5.txt"),
                                      "--json"};
  auto a32 = base, a64 = base;
  a32.insert(a32.end(), {"-o", d + "/f32.mask"});
  a64.insert(a64.end(), {"--precision", "f64"});
  const json a = tool_json(a32), b = tool_json(a64);
  CHECK(a.at("precision") == "f32");
  CHECK(b.at("precision") == "f64");
  CHECK(a.at("layers") == b.at("layers"));  // critical neurons and k per category, layer by layer
  CHECK(a.at("parameters_kept") == b.at("parameters_kept"));
  CHECK(near(a.at("compression").get<double>(), b.at("compression").get<double>(), 1e-12));
  CHECK(a.at("accuracy").at("model") == b.at("accuracy").at("model"));
  CHECK(a.at("accuracy").at("masked") == b.at("accuracy").at("masked"));

  const json m = tool_json({"semslice", model, "--data", fixture("lenet5_input.csv"), "--labels", tests_dir("semslice/labels5.txt"),
                            "--mask", d + "/f32.mask", "--json", "--precision", "f64"});
  CHECK(m.at("precision") == "f64");
  for (std::size_t u = 0; u < m.at("layers").size(); ++u)
    CHECK(m.at("layers")[u].at("critical") == a.at("layers")[u].at("critical"));
  const auto r = tool({"semslice", model, "--data", fixture("lenet5_input.csv"), "--labels", tests_dir("semslice/labels5.txt"),
                       "--mask", tests_dir("semslice/other_weights.mask"), "--precision", "f64"});
  CHECK(r.rc == 1);
  CHECK_MESSAGE(r.err.find("another model") != std::string::npos, r.err);
}

#ifdef NNLENS_TOOL_NHWC
TEST_CASE("semslice: NHWC rows and the same rows as NCHW with --layout nchw") {
  const std::string d = work_dir("semslice_layout"), model = NNLENS_TOOL_NHWC;
  const auto l = write_layout_rows(d, 20, 3);
  std::vector<std::size_t> y;
  for (std::size_t i = 0; i < 20; ++i) y.push_back(i % 2);
  write_labels(d + "/labels.txt", y);
  for (const char* prec : {"f32", "f64"}) {
    CAPTURE(prec);
    auto run = [&](const std::string& rows, std::vector<std::string> extra) {
      std::vector<std::string> args{"semslice", model, "--data", rows, "--labels", d + "/labels.txt", "--categories", "0,1",
                                    "--samples", "10", "--metric", "avg", "--json", "--precision", prec};
      args.insert(args.end(), extra.begin(), extra.end());
      return without_times(tool_json(args));
    };
    const json h = run(l.nhwc, {}), c = run(l.nchw, {"--layout", "nchw"});
    CHECK(h == c);
    CHECK(h.at("precision") == prec);
  }
}
#endif
