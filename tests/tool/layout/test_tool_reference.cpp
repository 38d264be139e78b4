// tests/tool/layout/test_tool_reference.cpp -- the `nnlens` tool (run, info, exact-line, ig) against
// references computed without nnlens: data in the model's declared layout (NHWC), and ExactLine in
// f64 exact to 1e-9.
//
// The tool runs as a child process (NNLENS_TOOL); its JSON / CSV output is checked against
//   * outputs of the ONNX fixtures written by make_fixtures.py (a float64 NumPy interpreter of the
//     ONNX operators; nnlens plays no part): nhwc_cnn.onnx (synthetic [N,8,8,3] -> Transpose ->
//     Conv -> Relu -> MaxPool -> Flatten -> Gemm), cifar_nhwc.onnx (synthetic [N,32,32,3] in the
//     layout keras2onnx writes: Transpose in, two Conv, MaxPool, Transpose back to NHWC before
//     Flatten, MatMul+Add) and Marabou's keras2onnx CNNs [N,28,28,1];
//     the kinks of the CNNs' restriction to segments (brackets in t) and 129 samples on each;
//   * a long-double evaluator of .nnet files written here (clamp, normalise, Dense/ReLU, rescale),
//     evaluated at every break and piece midpoint that `exact-line --precision f64` reports on ACAS
//     Xu networks: outputs within 1e-9 of their scale, pieces affine (the midpoint is the mean of
//     the ends), a ReLU or input clamp that changes sign within |dt| <= 1e-9 of every break, and
//     one activation pattern on each piece.
// Data from ../shared/models that is missing is reported as a skip (NNLENS_SKIP), never a pass.
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "test_skip.hpp"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using ld = long double;

const std::string tool = NNLENS_TOOL;
const fs::path fx = NNLENS_LAYOUT_FIXTURES;  // tests/tool/layout
const fs::path shared = NNLENS_SHARED_DIR;

struct result {
  int rc = 0;
  std::string out, err;
};

/// Runs `nnlens ARGS` (stdout and stderr captured separately).
result nnlens(const std::string& args) {
  static int k = 0;
  const fs::path err = fs::temp_directory_path() / ("nnlens_ref_err_" + std::to_string(::getpid()) + "_" + std::to_string(k++));
  const std::string cmd = "'" + tool + "' " + args + " 2>'" + err.string() + "'";
  result r;
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p);
  std::array<char, 65536> buf;
  std::size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int st = ::pclose(p);
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  std::ifstream e(err);
  std::stringstream ss;
  ss << e.rdbuf();
  r.err = ss.str();
  fs::remove(err);
  return r;
}

std::string q(const fs::path& p) { return "'" + p.string() + "'"; }

/// Numeric rows of a CSV file ('#' comment lines skipped).
std::vector<std::vector<ld>> read_csv(const fs::path& p) {
  std::ifstream f(p);
  REQUIRE_MESSAGE(f, p.string());
  std::vector<std::vector<ld>> rows;
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<ld> r;
    std::stringstream s(line);
    std::string tok;
    while (std::getline(s, tok, ',')) r.push_back(std::strtold(tok.c_str(), nullptr));
    rows.push_back(std::move(r));
  }
  return rows;
}

std::vector<std::vector<ld>> parse_csv_text(const std::string& text) {
  std::vector<std::vector<ld>> rows;
  std::stringstream f(text);
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty()) continue;
    std::vector<ld> r;
    std::stringstream s(line);
    std::string tok;
    while (std::getline(s, tok, ',')) r.push_back(std::strtold(tok.c_str(), nullptr));
    rows.push_back(std::move(r));
  }
  return rows;
}

/// max over rows/columns of |a - e| / max(1, |e|).
ld max_rel(const std::vector<std::vector<ld>>& a, const std::vector<std::vector<ld>>& e) {
  REQUIRE(a.size() == e.size());
  ld m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    REQUIRE(a[i].size() == e[i].size());
    for (std::size_t j = 0; j < a[i].size(); ++j) m = std::max(m, std::fabs(a[i][j] - e[i][j]) / std::max<ld>(1, std::fabs(e[i][j])));
  }
  return m;
}

// ---- a long-double .nnet evaluator (the format of ../shared/models/README.md) ---------------------
struct nnet {
  std::vector<std::size_t> sizes;
  std::vector<ld> mn, mx, mean, range;
  std::vector<std::vector<ld>> W, b;  // W[k]: sizes[k+1] x sizes[k], row-major
  /// Outputs at x; z receives every hidden pre-activation and, first, the clamp margins
  /// (x_i - min_i, max_i - x_i) of every input: their signs are the activation pattern.
  std::vector<ld> eval(const std::vector<ld>& x, std::vector<ld>* z = nullptr) const {
    std::vector<ld> a(sizes[0]);
    if (z) z->clear();
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (z) z->push_back(x[i] - mn[i]), z->push_back(mx[i] - x[i]);
      a[i] = (std::clamp(x[i], mn[i], mx[i]) - mean[i]) / range[i];
    }
    for (std::size_t k = 0; k + 1 < sizes.size(); ++k) {
      std::vector<ld> y(sizes[k + 1]);
      for (std::size_t o = 0; o < y.size(); ++o) {
        ld s = b[k][o];
        for (std::size_t i = 0; i < a.size(); ++i) s += W[k][o * a.size() + i] * a[i];
        y[o] = s;
      }
      if (k + 2 < sizes.size()) {
        for (auto& v : y) {
          if (z) z->push_back(v);
          v = std::max<ld>(v, 0);
        }
      }
      a = std::move(y);
    }
    for (auto& v : a) v = v * range.back() + mean.back();
    return a;
  }
};

nnet read_nnet(const fs::path& p) {
  std::ifstream f(p);
  REQUIRE_MESSAGE(f, p.string());
  std::vector<std::vector<ld>> lines;
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("//", 0) == 0) continue;
    std::vector<ld> r;
    std::stringstream s(line);
    std::string tok;
    while (std::getline(s, tok, ',')) {
      if (tok.find_first_not_of(" \t\r") == std::string::npos) continue;
      r.push_back(std::strtold(tok.c_str(), nullptr));
    }
    if (!r.empty()) lines.push_back(std::move(r));
  }
  nnet n;
  std::size_t li = 0;
  const std::size_t layers = std::size_t(lines[li++][0]);
  for (ld v : lines[li++]) n.sizes.push_back(std::size_t(v));
  REQUIRE(n.sizes.size() == layers + 1);
  ++li;  // symmetric flag
  n.mn = lines[li++];
  n.mx = lines[li++];
  n.mean = lines[li++];
  n.range = lines[li++];
  for (std::size_t k = 0; k < layers; ++k) {
    std::vector<ld> w, bb;
    for (std::size_t o = 0; o < n.sizes[k + 1]; ++o) w.insert(w.end(), lines[li].begin(), lines[li].end()), ++li;
    for (std::size_t o = 0; o < n.sizes[k + 1]; ++o) bb.push_back(lines[li++][0]);
    REQUIRE(w.size() == n.sizes[k + 1] * n.sizes[k]);
    n.W.push_back(std::move(w));
    n.b.push_back(std::move(bb));
  }
  return n;
}

std::vector<ld> at(const std::vector<ld>& P, const std::vector<ld>& Q, ld t) {
  std::vector<ld> x(P.size());
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = P[i] + t * (Q[i] - P[i]);
  return x;
}

std::vector<int> pattern(const std::vector<ld>& z) {
  std::vector<int> s(z.size());
  for (std::size_t i = 0; i < z.size(); ++i) s[i] = z[i] > 0;
  return s;
}

fs::path acas(const char* id) {
  return shared / "models" / "acasxu-nnet" / (std::string("ACASXU_run2a_") + id + "_batch_2000.nnet");
}

}  // namespace

TEST_CASE("exact-line --precision f64 on ACAS Xu: breaks and pieces exact to 1e-9 (long-double reference)") {
  const auto P = read_csv(fx / "acas_from.csv"), Q = read_csv(fx / "acas_to.csv");
  REQUIRE(P.size() == Q.size());
  for (const char* id : {"1_1", "2_9", "5_9", "3_3"}) {
    const fs::path model = acas(id);
    if (!fs::exists(model)) {
      NNLENS_SKIP(model.string() + " is missing");
    }
    CAPTURE(id);
    const nnet ref = read_nnet(model);
    const result r = nnlens("exact-line " + q(model) + " --from " + q(fx / "acas_from.csv") + " --to " +
                            q(fx / "acas_to.csv") + " --json --classes argmin --precision f64");
    REQUIRE_MESSAGE(r.rc == 0, r.err);
    const json j = json::parse(r.out);
    CHECK(j["precision"] == "f64");
    REQUIRE(j["lines"].size() == P.size());
    std::size_t breaks = 0;
    for (std::size_t s = 0; s < P.size(); ++s) {
      CAPTURE(s);
      const auto& l = j["lines"][s];
      const auto t = l["t"].get<std::vector<double>>();
      const auto y = l["outputs"].get<std::vector<std::vector<double>>>();
      REQUIRE(t.size() >= 2);
      REQUIRE(y.size() == t.size());
      ld scale = 1;
      for (const auto& row : y)
        for (double v : row) scale = std::max<ld>(scale, std::fabs(v));
      ld worst_break = 0, worst_mid = 0, worst_dt = 0;
      std::size_t pattern_changes = 0;
      for (std::size_t k = 0; k < t.size(); ++k) {
        const auto f = ref.eval(at(P[s], Q[s], t[k]));
        for (std::size_t o = 0; o < f.size(); ++o) worst_break = std::max(worst_break, std::fabs(f[o] - y[k][o]) / scale);
        if (k + 1 < t.size()) {  // the piece [t_k, t_k+1]: affine, one activation pattern
          const ld tm = (ld(t[k]) + ld(t[k + 1])) / 2, w = ld(t[k + 1]) - ld(t[k]);
          std::vector<ld> z0, z1, zm;
          const auto fm = ref.eval(at(P[s], Q[s], tm), &zm);
          for (std::size_t o = 0; o < fm.size(); ++o)
            worst_mid = std::max(worst_mid, std::fabs(fm[o] - (ld(y[k][o]) + ld(y[k + 1][o])) / 2) / scale);
          ref.eval(at(P[s], Q[s], t[k] + w / 64), &z0);
          ref.eval(at(P[s], Q[s], t[k + 1] - w / 64), &z1);
          if (pattern(z0) != pattern(zm) || pattern(z1) != pattern(zm)) ++pattern_changes;
        }
        if (k > 0 && k + 1 < t.size()) {  // an interior break: some ReLU / clamp switches within 1e-9
          ++breaks;
          std::vector<ld> za, zb;
          ref.eval(at(P[s], Q[s], ld(t[k]) - 1e-9L), &za);
          ref.eval(at(P[s], Q[s], ld(t[k]) + 1e-9L), &zb);
          bool switches = false;
          for (std::size_t i = 0; i < za.size() && !switches; ++i) switches = (za[i] > 0) != (zb[i] > 0) || za[i] == 0 || zb[i] == 0;
          if (!switches) worst_dt = std::max<ld>(worst_dt, 1);  // no neuron changes sign within 1e-9
        }
      }
      CHECK(worst_break <= 1e-9L);
      CHECK(worst_mid <= 1e-9L);
      CHECK(worst_dt == 0);
      CHECK(pattern_changes == 0);
    }
    CHECK(breaks > 10);  // the segments do cross many ReLUs
  }
}

TEST_CASE("run on NHWC rows: the synthetic [N,8,8,3] CNN and Marabou's keras2onnx CNNs match the NumPy reference") {
  const auto expected = read_csv(fx / "nhwc_expected.csv");
  {
    const result r = nnlens("run " + q(fx / "nhwc_cnn.onnx") + " --input " + q(fx / "nhwc_input.csv"));
    REQUIRE_MESSAGE(r.rc == 0, r.err);
    CHECK(max_rel(parse_csv_text(r.out), expected) <= 1e-4L);
  }
  {
    const result r = nnlens("run " + q(fx / "nhwc_cnn.onnx") + " --input " + q(fx / "nhwc_input.csv") + " --precision f64");
    REQUIRE_MESSAGE(r.rc == 0, r.err);
    CHECK(max_rel(parse_csv_text(r.out), expected) <= 1e-12L);
  }
  {  // the same rows read as NCHW are other images: the outputs differ (the layout is really used)
    const result r = nnlens("run " + q(fx / "nhwc_cnn.onnx") + " --input " + q(fx / "nhwc_input.csv") + " --layout nchw");
    REQUIRE_MESSAGE(r.rc == 0, r.err);
    CHECK(max_rel(parse_csv_text(r.out), expected) > 1e-2L);
  }
  {  // the [N,32,32,3] CIFAR-shaped graph, f32 and f64
    const auto ec = read_csv(fx / "cifar_expected.csv");
    const result r = nnlens("run " + q(fx / "cifar_nhwc.onnx") + " --input " + q(fx / "cifar_input.csv"));
    REQUIRE_MESSAGE(r.rc == 0, r.err);
    CHECK(parse_csv_text(r.out).size() == 4);
    CHECK(max_rel(parse_csv_text(r.out), ec) <= 1e-4L);
    const result d = nnlens("run " + q(fx / "cifar_nhwc.onnx") + " --input " + q(fx / "cifar_input.csv") + " --precision f64");
    REQUIRE_MESSAGE(d.rc == 0, d.err);
    CHECK(max_rel(parse_csv_text(d.out), ec) <= 1e-12L);
    const result n = nnlens("run " + q(fx / "cifar_nhwc.onnx") + " --input " + q(fx / "cifar_input.csv") + " --layout nchw");
    REQUIRE_MESSAGE(n.rc == 0, n.err);
    CHECK(max_rel(parse_csv_text(n.out), ec) > 1e-2L);
  }
  for (int k : {2, 3}) {
    const fs::path model = shared / "models" / "marabou" / ("cnn_max_mninst" + std::to_string(k) + ".onnx");
    if (!fs::exists(model)) {
      NNLENS_SKIP(model.string() + " is missing");
    }
    const result r = nnlens("run " + q(model) + " --input " + q(fx / "mnist_input.csv"));
    REQUIRE_MESSAGE(r.rc == 0, r.err);
    CHECK(max_rel(parse_csv_text(r.out), read_csv(fx / ("cnn_max_mninst" + std::to_string(k) + "_expected.csv"))) <= 1e-4L);
    const result i = nnlens("info " + q(model) + " --json");
    REQUIRE_MESSAGE(i.rc == 0, i.err);
    const json j = json::parse(i.out);
    CHECK(j["input"] == "[N,28,28,1] (nhwc)");
    CHECK(j["layout"] == "nhwc");
  }
}

TEST_CASE("info shows the declared NHWC input") {
  const result r = nnlens("info " + q(fx / "nhwc_cnn.onnx") + " --json");
  REQUIRE_MESSAGE(r.rc == 0, r.err);
  const json j = json::parse(r.out);
  CHECK(j["input_shape"] == json::array({8, 8, 3}));
  CHECK(j["input"] == "[N,8,8,3] (nhwc)");
  CHECK(j["layout"] == "nhwc");
  CHECK(j["network_input_shape"] == json::array({3, 8, 8}));
  // Each layer's static spelling and its fields (core/reflect.hpp): Conv(3->4, 3x3, pad 1) ->
  // Relu -> MaxPool(2x2) -> Flatten -> Gemm(64->12) -> Relu -> Gemm(12->5).
  const json& ls = j["layers"];
  REQUIRE(ls.size() == 7);
  CHECK(ls[0]["cpp_type"] == "nnlens::Conv2D<4, 3, 1, 1>");
  CHECK(ls[0]["fields"]["W"]["shape"] == json::array({4, 3, 3, 3}));
  CHECK(ls[0]["fields"]["b"]["shape"] == json::array({4}));
  CHECK(ls[1]["cpp_type"] == "nnlens::ReLU");
  CHECK(ls[1]["fields"].empty());
  CHECK(ls[4]["cpp_type"] == "nnlens::Dense<12>");
  CHECK(ls[4]["fields"]["W"]["shape"] == json::array({64, 12}));
  for (const json& l : ls) {  // the tensor fields hold every parameter
    std::size_t n = 0;
    for (const auto& [k, f] : l["fields"].items()) {
      std::size_t e = 1;
      for (const json& d : f["shape"]) e *= d.get<std::size_t>();
      n += e;
    }
    CHECK(n == l["params"].get<std::size_t>());
  }
  const result t = nnlens("info " + q(fx / "nhwc_cnn.onnx"));
  REQUIRE_MESSAGE(t.rc == 0, t.err);
  CHECK(t.out.find("input [N,8,8,3] (nhwc)") != std::string::npos);
  const result c = nnlens("info " + q(fx / "cifar_nhwc.onnx") + " --json");
  REQUIRE_MESSAGE(c.rc == 0, c.err);
  const json jc = json::parse(c.out);
  CHECK(jc["input_shape"] == json::array({32, 32, 3}));
  CHECK(jc["input"] == "[N,32,32,3] (nhwc)");
  CHECK(jc["layout"] == "nhwc");
  CHECK(jc["network_input_shape"] == json::array({3, 32, 32}));
}

TEST_CASE("exact-line on NHWC endpoints: every kink of the reference is a break, outputs exact to 1e-9") {
  struct seg {
    fs::path model, from, to;
    std::size_t line;
    std::string name;
  };
  std::vector<seg> segs{{fx / "nhwc_cnn.onnx", fx / "nhwc_from.csv", fx / "nhwc_to.csv", 0, "nhwc_seg1"},
                        {fx / "nhwc_cnn.onnx", fx / "nhwc_from.csv", fx / "nhwc_to.csv", 1, "nhwc_seg2"},
                        {fx / "cifar_nhwc.onnx", fx / "cifar_from.csv", fx / "cifar_to.csv", 0, "cifar_seg1"},
                        {shared / "models" / "marabou" / "cnn_max_mninst3.onnx", fx / "mnist_from.csv", fx / "mnist_to.csv",
                         0, "mnist_seg1"}};
  for (const auto& s : segs) {
    CAPTURE(s.name);
    if (!fs::exists(s.model)) {
      NNLENS_SKIP(s.model.string() + " is missing");
    }
    const result r = nnlens("exact-line " + q(s.model) + " --from " + q(s.from) + " --to " + q(s.to) + " --json");
    REQUIRE_MESSAGE(r.rc == 0, r.err);
    const json j = json::parse(r.out);
    CHECK(j["precision"] == "f64");
    CHECK(j["layout"] == "nhwc");
    const auto& l = j["lines"][s.line];
    const auto t = l["t"].get<std::vector<double>>();
    const auto y = l["outputs"].get<std::vector<std::vector<double>>>();
    // every reference kink (a bracket [lo, hi] in t) holds a reported break within 1e-9
    const auto kinks = read_csv(fx / (s.name + "_kinks.csv"));
    REQUIRE(!kinks.empty());
    std::size_t missed = 0;
    for (const auto& k : kinks) {
      const auto it = std::lower_bound(t.begin(), t.end(), double(k[0] - 1e-9L));
      if (it == t.end() || ld(*it) > k[1] + 1e-9L) ++missed;
    }
    CHECK(missed == 0);
    CHECK(t.size() - 2 >= kinks.size());  // as many breaks as kinks, or more (breaks where the map does not change)
    // the reported pieces reproduce the reference at 129 points of the segment
    ld scale = 1;
    const auto samples = read_csv(fx / (s.name + "_samples.csv"));
    for (const auto& row : samples)
      for (std::size_t o = 1; o < row.size(); ++o) scale = std::max(scale, std::fabs(row[o]));
    ld worst = 0;
    for (const auto& row : samples) {
      const ld tt = row[0];
      std::size_t k = std::size_t(std::upper_bound(t.begin(), t.end(), double(tt)) - t.begin());
      k = std::min<std::size_t>(std::max<std::size_t>(k, 1), t.size() - 1) - 1;
      const ld a = (tt - t[k]) / (ld(t[k + 1]) - ld(t[k]));
      for (std::size_t o = 1; o < row.size(); ++o) {
        const ld v = ld(y[k][o - 1]) + a * (ld(y[k + 1][o - 1]) - ld(y[k][o - 1]));
        worst = std::max(worst, std::fabs(v - row[o]) / scale);
      }
    }
    CHECK(worst <= 1e-9L);
  }
}

TEST_CASE("ig on an NHWC model: attributions come back in the data layout") {
  // baseline 0, input 0 but one element (data index k, NHWC order): only attribution k is non-zero
  for (std::size_t k : {5u, 100u, 191u}) {
    CAPTURE(k);
    const fs::path dir = fs::temp_directory_path();
    const fs::path x = dir / ("nnlens_ig_x_" + std::to_string(::getpid()) + ".csv");
    const fs::path b = dir / ("nnlens_ig_b_" + std::to_string(::getpid()) + ".csv");
    {
      std::ofstream fx_(x), fb(b);
      for (std::size_t i = 0; i < 192; ++i) {
        fx_ << (i ? "," : "") << (i == k ? "0.9" : "0");
        fb << (i ? "," : "") << "0";
      }
      fx_ << "\n";
      fb << "\n";
    }
    const result r = nnlens("ig " + q(fx / "nhwc_cnn.onnx") + " --input " + q(x) + " --baseline " + q(b) + " --json --output-index 1");
    fs::remove(x);
    fs::remove(b);
    REQUIRE_MESSAGE(r.rc == 0, r.err);
    const json j = json::parse(r.out);
    CHECK(j["precision"] == "f64");
    CHECK(j["layout"] == "nhwc");
    const auto e = j["exact"].get<std::vector<double>>();
    REQUIRE(e.size() == 192);
    const double delta = j["delta"].get<double>();
    for (std::size_t i = 0; i < e.size(); ++i)
      if (i != k) CHECK(e[i] == 0);
    CHECK(std::fabs(e[k] - delta) <= 1e-12 * std::max(1.0, std::fabs(delta)));
  }
}

TEST_CASE("hostile input: out-of-range endpoints, validation failures, float range, --merge-tol inf") {
  const fs::path a11 = acas("1_1");
  if (!fs::exists(a11)) {
    NNLENS_SKIP(a11.string() + " is missing");
    return;
  }
  {  // endpoints 1e30 from ACAS Xu's declared input range: an error, never pieces presented as exact
    const result r = nnlens("exact-line " + q(a11) + " --from " + q(fx / "acas_huge_from.csv") + " --to " +
                            q(fx / "acas_huge_to.csv") + " --json --validate");
    CHECK(r.rc != 0);
    const json j = json::parse(r.out);
    CHECK(j["valid"] == false);
    CHECK(j["lines"][0].contains("error"));
    CHECK(j["lines"][0]["error"].get<std::string>().find("beyond") != std::string::npos);
    CHECK(r.err.find("declared range") != std::string::npos);
  }
  {  // f32 resolves less: the same 1e30 rows are refused as out of range too
    const result r = nnlens("exact-line " + q(a11) + " --from " + q(fx / "acas_huge_from.csv") + " --to " +
                            q(fx / "acas_huge_to.csv") + " --precision f32");
    CHECK(r.rc != 0);
    CHECK(r.err.find("use --precision f64") != std::string::npos);
  }
  {  // 1e308 is finite: f32 says it is out of float range; f64 reads it (the network clamps it)
    const result r = nnlens("run " + q(a11) + " --input " + q(fx / "acas_1e308.csv"));
    CHECK(r.rc != 0);
    CHECK(r.err.find("out of float range") != std::string::npos);
    CHECK(r.err.find("--precision f64") != std::string::npos);
    CHECK(r.err.find("acas_1e308.csv:1:1") != std::string::npos);
    CHECK(r.err.find("not a finite number") == std::string::npos);
    const result d = nnlens("run " + q(a11) + " --input " + q(fx / "acas_1e308.csv") + " --precision f64");
    CHECK_MESSAGE(d.rc == 0, d.err);
  }
  {  // a validation that finds violations fails: exit 1, "valid": false (here: a tolerance below rounding)
    const result r = nnlens("exact-line " + q(a11) + " --from " + q(fx / "acas_from.csv") + " --to " + q(fx / "acas_to.csv") +
                            " --json --validate --validate-tol 1e-17");
    CHECK(r.rc != 0);
    const json j = json::parse(r.out);
    CHECK(j["valid"] == false);
    CHECK(j["lines"][0]["validation"]["valid"] == false);
    CHECK(j["lines"][0]["validation"]["violations"].get<int>() > 0);
    CHECK(r.err.find("validation failed") != std::string::npos);
    const result ok = nnlens("exact-line " + q(a11) + " --from " + q(fx / "acas_from.csv") + " --to " + q(fx / "acas_to.csv") +
                             " --json --validate");
    CHECK_MESSAGE(ok.rc == 0, ok.err);
    CHECK(json::parse(ok.out)["valid"] == true);
  }
  {  // outside the declared range but resolvable (rho 150 half-widths out): a warning, validated, exact
    const result r = nnlens("exact-line " + q(a11) + " --from " + q(fx / "acas_far_from.csv") + " --to " +
                            q(fx / "acas_far_to.csv") + " --json");
    CHECK_MESSAGE(r.rc == 0, r.err);
    CHECK(r.err.find("warning") != std::string::npos);
    const json j = json::parse(r.out);
    CHECK(j["lines"][0].contains("warning"));
    CHECK(j["lines"][0]["validation"]["valid"] == true);
  }
  {  // --merge-tol inf: a short message, no 309-digit number
    const result r = nnlens("exact-line " + q(a11) + " --from " + q(fx / "acas_from.csv") + " --to " + q(fx / "acas_to.csv") +
                            " --merge-tol inf");
    CHECK(r.rc != 0);
    CHECK(r.err.find("--merge-tol") != std::string::npos);
    CHECK(r.err.size() < 200);
    std::size_t run = 0, longest = 0;
    for (char c : r.err) longest = std::max(longest, run = std::isdigit(static_cast<unsigned char>(c)) ? run + 1 : 0);
    CHECK(longest < 20);
  }
}
