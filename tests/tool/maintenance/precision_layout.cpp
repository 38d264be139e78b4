// tests/tool/maintenance/precision_layout.cpp -- `nnlens restructure / readapt / increment` with
// --precision and --layout.
//
//  * The LeNet-5 fixture (labels 0/1; the new task 2/3): each command at f64 reports what it does
//    at f32 -- the same mask, the same pruning iterations and compressions, the same accuracies,
//    TPR, trained fractions, frozen_changed 0 -- and the models it writes compute the same outputs
//    within 1e-4 (relative; `nnlens run --precision f64`), the f64 one stored in double (.nnlw keeps
//    the scalar: a larger file); the JSON states "precision".
//  * The synthetic NHWC model: each command on NHWC rows and on the same rows transposed by hand to
//    NCHW with --layout nchw prints the same JSON (times and the output path aside) and writes the
//    same model; at f64 the .onnx output carries the note that ONNX holds float32 weights.
#include "../tool_harness.hpp"

using namespace tool_test;

namespace {

const std::vector<std::string> keys_that_differ{"output", "precision", "note"};

json comparable(json j) {
  j = without_times(j);
  for (const auto& k : keys_that_differ) j.erase(k);
  return j;
}

/// The outputs of `model` on `rows` (`nnlens run`), flattened.
std::vector<double> outputs(const std::string& model, const std::string& rows, const std::string& dir, const char* prec,
                            const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args{"run", model, "--input", rows, "--output", dir + "/run.csv", "--precision", prec};
  args.insert(args.end(), extra.begin(), extra.end());
  const auto r = tool(args);
  REQUIRE_MESSAGE(r.rc == 0, r.err);
  std::vector<double> v;
  for (const auto& row : read_rows(dir + "/run.csv")) v.insert(v.end(), row.begin(), row.end());
  return v;
}

}  // namespace

TEST_CASE("restructure, readapt, increment: the LeNet-5 fixture at f64 agrees with f32") {
  const std::string d = work_dir("maintenance_precision"), model = fixture("lenet5.nnlw"), rows = fixture("lenet5_input.csv");
  const std::string labels = tests_dir("semslice/labels5.txt"), new_labels = tests_dir("maintenance/new_labels5.txt");
  const std::vector<std::pair<std::string, std::vector<std::string>>> commands{
      {"restructure", {"restructure", model, "--data", rows, "--labels", labels, "--test", rows, "--test-labels", labels,
                       "--categories", "0,1", "--samples", "5", "--max-iterations", "3", "--max-drop", "100"}},
      {"readapt", {"readapt", model, "--data", rows, "--labels", labels, "--categories", "0,1", "--samples", "5",
                   "--adv-samples", "5", "--epochs", "2"}},
      {"increment", {"increment", model, "--data", rows, "--labels", new_labels, "--old-data", rows, "--old-labels", labels,
                     "--samples", "5", "--epochs", "2"}}};
  for (const auto& [name, base] : commands) {
    CAPTURE(name);
    auto a32 = base, a64 = base;
    a32.insert(a32.end(), {"--json", "-o", d + "/" + name + "32.nnlw"});
    a64.insert(a64.end(), {"--json", "-o", d + "/" + name + "64.nnlw", "--precision", "f64"});
    const json a = tool_json(a32), b = tool_json(a64);
    CHECK(a.at("precision") == "f32");
    CHECK(b.at("precision") == "f64");
    CHECK(a.at("mask") == b.at("mask"));
    if (name == "restructure") {
      CHECK(a.at("ni") == b.at("ni"));
      CHECK(a.at("reference_accuracy") == b.at("reference_accuracy"));
      REQUIRE(a.at("iterations").size() == b.at("iterations").size());
      for (std::size_t i = 0; i < a.at("iterations").size(); ++i) {
        const auto &x = a.at("iterations")[i], &y = b.at("iterations")[i];
        CHECK(near(x.at("compression").get<double>(), y.at("compression").get<double>(), 1e-9));
        CHECK(x.at("accuracy") == y.at("accuracy"));
        CHECK(x.at("accepted") == y.at("accepted"));
      }
    } else if (name == "readapt") {
      for (const char* k : {"trained_parameters", "tpr", "adv_before", "ra", "raa", "clean_before", "clean_after", "adversarial"})
        CHECK_MESSAGE(a.at(k) == b.at(k), k);
    } else {
      CHECK(b.at("frozen_changed") == 0);
      for (const char* k : {"trained_parameters", "trained_fraction", "samples", "before", "accuracy"})
        CHECK_MESSAGE(a.at(k) == b.at(k), k);
      CHECK(near(a.at("loss").get<double>(), b.at("loss").get<double>(), 1e-4));
    }
    // the models written: the same function within 1e-4, the f64 one stored in double
    const std::string m32 = d + "/" + name + "32.nnlw", m64 = d + "/" + name + "64.nnlw";
    const auto o32 = outputs(m32, rows, d, "f64"), o64 = outputs(m64, rows, d, "f64");
    REQUIRE(o32.size() == o64.size());
    for (std::size_t i = 0; i < o32.size(); ++i) CHECK(near(o32[i], o64[i], 1e-4));
    CHECK(std::filesystem::file_size(m64) > std::filesystem::file_size(m32) + 4 * 60000);  // 61,706 parameters
  }
}

#ifdef NNLENS_TOOL_NHWC
TEST_CASE("restructure, readapt, increment: NHWC rows and the same rows as NCHW with --layout nchw") {
  const std::string d = work_dir("maintenance_layout"), model = NNLENS_TOOL_NHWC;
  const auto l = write_layout_rows(d, 16, 5);
  std::vector<std::size_t> y, y2;
  for (std::size_t i = 0; i < 16; ++i) y.push_back(i % 2), y2.push_back(i % 2 + 2);
  write_labels(d + "/labels.txt", y);
  write_labels(d + "/new_labels.txt", y2);
  const std::string L = d + "/labels.txt", N = d + "/new_labels.txt";
  for (const char* prec : {"f32", "f64"})
    for (const std::string name : {"restructure", "readapt", "increment"}) {
      CAPTURE(prec);
      CAPTURE(name);
      auto run = [&](const std::string& rows, const std::string& out, std::vector<std::string> extra) {
        std::vector<std::string> args{name, model, "--data", rows, "--labels", name == "increment" ? N : L, "--samples", "8",
                                      "--metric", "avg", "--epochs", "1", "--json", "--precision", prec, "-o", out};
        if (name == "restructure") args.insert(args.end(), {"--test", rows, "--test-labels", L, "--max-iterations", "2", "--categories", "0,1"});
        if (name == "readapt") args.insert(args.end(), {"--adv-samples", "4", "--categories", "0,1"});
        if (name == "increment") args.insert(args.end(), {"--old-data", rows, "--old-labels", L});
        args.insert(args.end(), extra.begin(), extra.end());
        return tool_json(args);
      };
      const std::string oh = d + "/" + name + "_h.onnx", oc = d + "/" + name + "_c.onnx";
      const json h = run(l.nhwc, oh, {}), c = run(l.nchw, oc, {"--layout", "nchw"});
      CHECK(comparable(h) == comparable(c));
      CHECK(h.at("precision") == prec);
      CHECK(h.contains("note") == (std::string(prec) == "f64"));
      const auto fh = slurp(oh), fc = slurp(oc);
      CHECK(fh.size() > 0);
      CHECK(fh == fc);
    }
}
#endif
