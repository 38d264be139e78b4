// tests/tool/tool_harness.hpp -- running the `nnlens` tool from a doctest case (the precision and
// layout checks of profile, slice, coverage, semslice, the maintenance commands, difftest and
// compress: tests/tool/*/precision_layout.cpp, one executable test_tool_analyses).
//
//   auto r = tool({"slice", model, "--json", ...});   // {rc, out (stdout), err (stderr)}
//   json j = tool_json({...});                         // rc 0 required, stdout parsed as JSON
//   std::string d = work_dir("slice");                 // a fresh directory under the build tree
//   write_rows(path, rows, per) / read_rows(path)      // CSV rows of doubles (%.17g: exact)
//   nhwc_to_nchw(row, C, H, W)                         // one sample's values, permuted by hand
//   auto l = write_layout_rows(dir, n, seed);         // NHWC model: l.nhwc / l.nchw files, l.C/H/W
//   near(a, b, rel)                                    // |a - b| <= rel * max(1, |a|, |b|)
// The paths come from compile definitions: NNLENS_TOOL (the tool), NNLENS_TOOL_WORK (scratch),
// NNLENS_TOOL_FIXTURES (the build's LeNet-5 fixture), NNLENS_TOOL_TESTS (tests/tool) and, when the
// build found them, NNLENS_TOOL_ACAS, NNLENS_TOOL_NHWC (the synthetic NHWC ONNX model), NNLENS_TOOL_DX_LENET5,
// NNLENS_TOOL_FASHION.  CMake registers a case only when its data exist (the tool tests' rule),
// so a case never passes on missing data.
#pragma once

#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tool_test {

using json = nlohmann::json;

struct result {
  int rc = -1;
  std::string out, err;
};

inline std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

inline std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

/// Runs the tool with `args` (no shell interpretation of them; --no-progress added for the
/// subcommands that draw a progress bar); stdout and stderr captured.
inline result tool(const std::vector<std::string>& args) {
  static int serial = 0;
  const std::string err = std::string(NNLENS_TOOL_WORK) + "/stderr-" + std::to_string(::getpid()) + "-" + std::to_string(serial++);
  std::string cmd = quote(NNLENS_TOOL);
  for (const auto& a : args) cmd += " " + quote(a);
  static const std::vector<std::string> with_bar{"run", "profile", "slice", "coverage", "restructure", "readapt", "increment", "difftest"};
  if (!args.empty() && std::find(with_bar.begin(), with_bar.end(), args[0]) != with_bar.end()) cmd += " --no-progress";
  cmd += " 2>" + quote(err);
  result r;
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int st = ::pclose(p);
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  r.err = slurp(err);
  std::filesystem::remove(err);
  return r;
}

/// The JSON the tool prints; the run must succeed.
inline json tool_json(const std::vector<std::string>& args) {
  const result r = tool(args);
  std::string line;
  for (const auto& a : args) line += a + " ";
  INFO("nnlens " << line << "\nstderr: " << r.err);
  REQUIRE(r.rc == 0);
  return json::parse(r.out);
}

/// The same JSON with the wall-clock fields removed (seconds, total_seconds, train_seconds, ...).
inline json without_times(json j) {
  if (j.is_object()) {
    json r = json::object();
    for (auto& [k, v] : j.items())
      if (k.find("seconds") == std::string::npos) r[k] = without_times(v);
    return r;
  }
  if (j.is_array()) {
    json r = json::array();
    for (auto& v : j) r.push_back(without_times(v));
    return r;
  }
  return j;
}

inline std::string work_dir(const std::string& name) {
  const std::filesystem::path d = std::filesystem::path(NNLENS_TOOL_WORK) / name;
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d.string();
}

inline std::string fixture(const std::string& name) { return std::string(NNLENS_TOOL_FIXTURES) + "/" + name; }
inline std::string tests_dir(const std::string& name) { return std::string(NNLENS_TOOL_TESTS) + "/" + name; }

inline void write_rows(const std::string& path, const std::vector<std::vector<double>>& rows) {
  std::ofstream f(path);
  char b[40];
  for (const auto& r : rows) {
    for (std::size_t k = 0; k < r.size(); ++k) {
      std::snprintf(b, sizeof b, "%.17g", r[k]);
      f << (k ? "," : "") << b;
    }
    f << "\n";
  }
  REQUIRE(f.good());
}

inline std::vector<std::vector<double>> read_rows(const std::string& path) {
  std::ifstream f(path);
  REQUIRE(f.good());
  std::vector<std::vector<double>> rows;
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty()) continue;
    std::vector<double> r;
    std::stringstream ss(line);
    std::string v;
    while (std::getline(ss, v, ',')) r.push_back(std::stod(v));
    rows.push_back(std::move(r));
  }
  return rows;
}

inline void write_labels(const std::string& path, const std::vector<std::size_t>& y) {
  std::ofstream f(path);
  for (auto v : y) f << v << "\n";
  REQUIRE(f.good());
}

/// One sample stored h, w, c (NHWC) -> c, h, w (NCHW), by hand (not nnlens's io::to_nchw).
template <class V>
V nhwc_to_nchw(const V& x, std::size_t C, std::size_t H, std::size_t W) {
  REQUIRE(x.size() == C * H * W);
  V y(x.size());
  for (std::size_t h = 0; h < H; ++h)
    for (std::size_t w = 0; w < W; ++w)
      for (std::size_t c = 0; c < C; ++c) y[(c * H + h) * W + w] = x[(h * W + w) * C + c];
  return y;
}

/// n samples of C*H*W uniform values in [0, 1), stored NHWC; seeded.
inline std::vector<std::vector<double>> random_rows(std::size_t n, std::size_t per, unsigned seed) {
  std::mt19937 g(seed);
  std::uniform_int_distribution<int> px(0, 255);  // pixel-like values k / 255 (difftest seeds)
  std::vector<std::vector<double>> r(n, std::vector<double>(per));
  for (auto& row : r)
    for (auto& v : row) v = px(g) / 255.0;
  return r;
}

#ifdef NNLENS_TOOL_NHWC
/// The --layout checks' inputs for the synthetic NHWC model (NNLENS_TOOL_NHWC_C/H/W): n random
/// samples stored NHWC in <dir>/nhwc.csv and the same samples transposed by hand in <dir>/nchw.csv.
struct layout_rows {
  std::size_t C = NNLENS_TOOL_NHWC_C, H = NNLENS_TOOL_NHWC_H, W = NNLENS_TOOL_NHWC_W;
  std::string nhwc, nchw;  // the two files
};
inline layout_rows write_layout_rows(const std::string& dir, std::size_t n, unsigned seed) {
  layout_rows l;
  l.nhwc = dir + "/nhwc.csv";
  l.nchw = dir + "/nchw.csv";
  const auto nhwc = random_rows(n, l.C * l.H * l.W, seed);
  std::vector<std::vector<double>> nchw;
  for (const auto& r : nhwc) nchw.push_back(nhwc_to_nchw(r, l.C, l.H, l.W));
  write_rows(l.nhwc, nhwc);
  write_rows(l.nchw, nchw);
  return l;
}
#endif

inline bool near(double a, double b, double rel) {
  return std::fabs(a - b) <= rel * std::max({1.0, std::fabs(a), std::fabs(b)});
}

/// Index of the largest value (the lowest on ties).
inline std::size_t argmax(const std::vector<double>& v) {
  std::size_t k = 0;
  for (std::size_t i = 1; i < v.size(); ++i)
    if (v[i] > v[k]) k = i;
  return k;
}

}  // namespace tool_test
