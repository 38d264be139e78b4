// tests/tool/coverage/precision_layout.cpp -- `nnlens coverage` with --precision and --layout.
//
//  * The LeNet-5 fixture, trained on its 5 inputs labelled with its own predictions: IDC, NC,
//    NBC, SNAC, TKNC and LSC at f64 agree with f32 (each coverage within 1e-9 points: the same
//    neurons are covered; IDC's cluster centroids within 1e-5 relative), KMNC within 3 of its
//    1000 sections per neuron (a value on a section boundary may round to either side); the JSON states "precision";
//    a state file prepared at f32 is refused at f64 with a message naming the precision.
//  * The synthetic NHWC model: the same criteria on NHWC rows and on the rows transposed by hand to
//    NCHW with --layout nchw give the same JSON (times aside).
#include "../tool_harness.hpp"

using namespace tool_test;

namespace {

/// Each row's argmax under `nnlens run` (the model's own labels: IDC keeps the correctly classified).
std::vector<std::size_t> predicted(const std::string& model, const std::string& rows, const std::string& dir,
                                   const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args{"run", model, "--input", rows, "--output", dir + "/outputs.csv"};
  args.insert(args.end(), extra.begin(), extra.end());
  const auto r = tool(args);
  REQUIRE_MESSAGE(r.rc == 0, r.err);
  std::vector<std::size_t> y;
  for (const auto& o : read_rows(dir + "/outputs.csv")) y.push_back(argmax(o));
  return y;
}

const std::vector<std::string> criteria{"idc", "nc", "kmnc", "nbc", "snac", "tknc", "lsc"};

}  // namespace

TEST_CASE("coverage: the LeNet-5 fixture at f64 agrees with f32") {
  const std::string d = work_dir("coverage_precision"), model = fixture("lenet5.nnlw"), rows = fixture("lenet5_input.csv");
  write_labels(d + "/labels.txt", predicted(model, rows, d));
  std::vector<std::string> args{"coverage", model, "--train", rows, "--train-labels", d + "/labels.txt", "--test", rows,
                                "--m", "3", "--criteria", "idc,nc,kmnc,nbc,snac,tknc,lsc", "--json"};
  const json a = tool_json(args);
  auto a64 = args;
  a64.insert(a64.end(), {"--precision", "f64", "--state", d + "/f64.state"});
  const json b = tool_json(a64);
  CHECK(a.at("precision") == "f32");
  CHECK(b.at("precision") == "f64");
  for (const auto& c : criteria) {
    CAPTURE(c);
    const json& x = a.at("criteria").at(c);
    const json& y = b.at("criteria").at(c);
    CHECK(x.at("total") == y.at("total"));
    if (c == "kmnc") {
      // KMNC cuts each neuron's range into k = 1000 sections: a value whose f32 and f64 forms
      // (about 1e-6 apart, relative) fall on two sides of a boundary covers another section.
      // Roughly one such value is to be expected (an estimate, not counted): the -O1 tool covered
      // 1958 sections at f64 against 1959 at f32, the -O3 build the same number at both.
      const auto cx = x.at("covered").get<long>(), cy = y.at("covered").get<long>();
      CHECK(std::abs(cx - cy) <= 3);
      CHECK(std::abs(x.at("coverage").get<double>() - y.at("coverage").get<double>()) <=
            3.0 / x.at("total").get<double>() * 100.0 + 1e-9);
      continue;
    }
    CHECK(near(x.at("coverage").get<double>(), y.at("coverage").get<double>(), 1e-9));
    CHECK(x.at("covered") == y.at("covered"));
  }
  const json& ia = a.at("criteria").at("idc");
  const json& ib = b.at("criteria").at("idc");
  CHECK(ia.at("neurons") == ib.at("neurons"));
  const auto ca = ia.at("clusters"), cb = ib.at("clusters");
  REQUIRE(ca.size() == cb.size());
  for (std::size_t k = 0; k < ca.size(); ++k) {
    REQUIRE(ca[k].size() == cb[k].size());
    for (std::size_t i = 0; i < ca[k].size(); ++i) CHECK(near(ca[k][i].get<double>(), cb[k][i].get<double>(), 1e-5));
  }
  // the f64 state, used at f32: refused, naming the precision it was prepared with
  auto a32 = args;
  a32.insert(a32.end(), {"--state", d + "/f64.state"});
  const auto r = tool(a32);
  CHECK(r.rc == 1);
  CHECK_MESSAGE(r.err.find("f64.state: a state of " + model + " prepared with --precision f64") != std::string::npos, r.err);
  // and at f64 it is used as it is
  auto again = a64;
  const json c = tool_json(again);
  CHECK(without_times(c) == without_times(b));
}

#ifdef NNLENS_TOOL_NHWC
TEST_CASE("coverage: NHWC rows and the same rows as NCHW with --layout nchw") {
  const std::string d = work_dir("coverage_layout"), model = NNLENS_TOOL_NHWC;
  const auto l = write_layout_rows(d, 24, 7);
  write_labels(d + "/labels.txt", predicted(model, l.nhwc, d));
  for (const char* prec : {"f32", "f64"}) {
    CAPTURE(prec);
    auto run = [&](const std::string& rows, std::vector<std::string> extra) {
      std::vector<std::string> args{"coverage", model, "--train", rows, "--train-labels", d + "/labels.txt", "--test", rows,
                                    "--m", "2", "--criteria", "idc,nc,kmnc,nbc,snac,tknc,lsc", "--json", "--precision", prec};
      args.insert(args.end(), extra.begin(), extra.end());
      return without_times(tool_json(args));
    };
    const json h = run(l.nhwc, {}), c = run(l.nchw, {"--layout", "nchw"});
    CHECK(h == c);
    // read as NCHW, the NHWC rows are other inputs: the criteria see it (the check can fail)
    const json wrong = run(l.nhwc, {"--layout", "nchw"});
    CHECK(wrong.at("criteria") != h.at("criteria"));
  }
}
#endif
