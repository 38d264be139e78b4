// .nnet reader/writer: the 45 ACAS Xu networks, the external oracles, Marabou's MNIST nets, round
// trips and malformed files.  A case whose models are missing under nnlens_test::shared_dir()
// ($NNLENS_SHARED_DIR) skips (NNLENS_SKIP, ctest Skipped); it does not fail.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "nnlens/io/nnet.hpp"
#include "nnlens/network/forward.hpp"
#include "test_skip.hpp"

using namespace nnlens;
namespace fs = std::filesystem;

namespace {
const fs::path models = nnlens_test::shared_dir() / "models";

std::vector<double> split_doubles(const std::string& s, char sep) {
  std::vector<double> v;
  std::stringstream ss(s);
  std::string t;
  while (std::getline(ss, t, sep)) v.push_back(std::stod(t));
  return v;
}

// A reference evaluator written from the format description (double, file order W[out][in]),
// independent of the loader's folding: clamp, normalise, ReLU chain, rescale.
struct ref_nnet {
  std::vector<std::size_t> sizes;
  std::vector<double> mn, mx, mean, range;
  std::vector<std::vector<double>> W, b;
  explicit ref_nnet(const fs::path& p) {
    std::ifstream f(p);
    std::string line;
    std::vector<std::vector<double>> rows;
    while (std::getline(f, line)) {
      if (line.rfind("//", 0) == 0 || line.empty()) continue;
      std::vector<double> r;
      std::stringstream ss(line);
      std::string t;
      while (std::getline(ss, t, ','))
        if (t.find_first_not_of(" \r\t") != std::string::npos) r.push_back(std::stod(t));
      rows.push_back(r);
    }
    const std::size_t L = std::size_t(rows[0][0]);
    for (std::size_t k = 0; k <= L; ++k) sizes.push_back(std::size_t(rows[1][k]));
    mn = rows[3], mx = rows[4], mean = rows[5], range = rows[6];
    std::size_t r = 7;
    for (std::size_t k = 1; k <= L; ++k) {
      std::vector<double> w, bb;
      for (std::size_t o = 0; o < sizes[k]; ++o) w.insert(w.end(), rows[r].begin(), rows[r].end()), ++r;
      for (std::size_t o = 0; o < sizes[k]; ++o) bb.push_back(rows[r++][0]);
      W.push_back(w), b.push_back(bb);
    }
  }
  std::vector<double> eval(std::vector<double> x, bool normalize, bool rescale) const {
    const std::size_t n = sizes[0];
    if (normalize)
      for (std::size_t i = 0; i < n; ++i) x[i] = (std::clamp(x[i], mn[i], mx[i]) - mean[i]) / range[i];
    for (std::size_t k = 0; k < W.size(); ++k) {
      const std::size_t I = sizes[k], O = sizes[k + 1];
      std::vector<double> y(O);
      for (std::size_t o = 0; o < O; ++o) {
        double a = b[k][o];
        for (std::size_t i = 0; i < I; ++i) a += W[k][o * I + i] * x[i];
        y[o] = (k + 1 < W.size()) ? std::max(a, 0.0) : a;
      }
      x = y;
    }
    if (rescale)
      for (auto& v : x) v = v * range[n] + mean[n];
    return x;
  }
};

template <class T>
std::vector<double> run(const io::basic_nnet_model<T>& m, const std::vector<double>& x) {
  xt::xarray<T> in = xt::zeros<T>({std::size_t(1), x.size()});
  for (std::size_t i = 0; i < x.size(); ++i) in(0, i) = T(x[i]);
  auto y = forward(m.net, in);
  return std::vector<double>(y.begin(), y.end());
}
}  // namespace

TEST_CASE("nnet: every oracle row of expected_outputs.csv reproduces (double and float)") {
  if (!fs::exists(models / "oracles/expected_outputs.csv"))
    NNLENS_SKIP((models / "oracles/expected_outputs.csv").string(), " not found");
  std::ifstream f(models / "oracles/expected_outputs.csv");
  REQUIRE(f);
  std::string line;
  int rows = 0;
  double worst_d = 0, worst_f = 0;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#' || line.rfind("network,", 0) == 0) continue;
    std::vector<std::string> c;
    std::stringstream ss(line);
    std::string t;
    while (std::getline(ss, t, ',')) c.push_back(t);
    REQUIRE(c.size() >= 9);
    if (c[0].size() < 5 || c[0].substr(c[0].size() - 5) != ".nnet") continue;
    const std::string in_mode = c[c.size() - 4], out_mode = c[c.size() - 3];
    const auto x = split_doubles(c[c.size() - 2], ';'), e = split_doubles(c[c.size() - 1], ';');
    io::nnet_options o;
    o.normalize_inputs = in_mode == "raw";
    o.rescale_outputs = out_mode == "denorm";
    REQUIRE((in_mode == "raw" || in_mode == "normalized"));
    REQUIRE((out_mode == "raw" || out_mode == "denorm"));
    if (!fs::exists(models / c[0])) NNLENS_SKIP((models / c[0]).string(), " not found (listed in expected_outputs.csv)");
    const auto md = io::load_nnet<double>(models / c[0], o);
    const auto mf = io::load_nnet<float>(models / c[0], o);
    const auto yd = run(md, x), yf = run(mf, x);
    REQUIRE(yd.size() == e.size());
    for (std::size_t i = 0; i < e.size(); ++i) {
      const double scale = std::max(1.0, std::abs(e[i]));
      worst_d = std::max(worst_d, std::abs(yd[i] - e[i]) / scale);
      worst_f = std::max(worst_f, std::abs(yf[i] - e[i]) / scale);
      CHECK(std::abs(yd[i] - e[i]) <= 1e-5 * scale);
      CHECK(std::abs(yf[i] - e[i]) <= 1e-5 * scale);
    }
    ++rows;
  }
  CHECK(rows == 13);
  MESSAGE("oracle rows: ", rows, ", worst error / max(1,|expected|): double ", worst_d, ", float ", worst_f);
}

TEST_CASE("nnet: all 45 ACAS Xu networks load and agree with an independent evaluator") {
  std::mt19937_64 rng(7);
  double worst = 0, worst_norm = 0;
  int n = 0;
  for (int a = 1; a <= 5; ++a)
    for (int b = 1; b <= 9; ++b) {
      const fs::path p = models / "acasxu-nnet" / ("ACASXU_run2a_" + std::to_string(a) + "_" + std::to_string(b) +
                                                   "_batch_2000.nnet");
      if (!fs::exists(p)) NNLENS_SKIP(p.string(), " not found");
      const auto m = io::load_nnet<double>(p);
      REQUIRE(m.net.input_shape() == shape(5));
      REQUIRE(m.net.output_shape() == shape(5));
      CHECK(m.net.size() == 2 + 13);  // Affine, Clamp, then 7 Dense with 6 ReLU
      io::nnet_options raw;
      raw.normalize_inputs = raw.rescale_outputs = false;
      const auto mr = io::load_nnet<double>(p, raw);
      CHECK(mr.net.size() == 13);
      CHECK(m.norm.output_range == doctest::Approx(373.94992));
      const ref_nnet ref(p);
      // raw inputs, some outside [min, max] so that clamping matters
      std::uniform_real_distribution<double> u(-0.2, 1.2);
      for (int s = 0; s < 20; ++s) {
        std::vector<double> x(5);
        for (int i = 0; i < 5; ++i) x[i] = m.norm.input_min[i] + u(rng) * (m.norm.input_max[i] - m.norm.input_min[i]);
        const auto y = run(m, x), e = ref.eval(x, true, true);
        for (int i = 0; i < 5; ++i) worst = std::max(worst, std::abs(y[i] - e[i]) / std::max(1.0, std::abs(e[i])));
        const auto yr = run(mr, x), er = ref.eval(x, false, false);
        for (int i = 0; i < 5; ++i) worst_norm = std::max(worst_norm, std::abs(yr[i] - er[i]) / std::max(1.0, std::abs(er[i])));
        // the helpers give the same as the folded network
        xt::xarray<double> xin = xt::zeros<double>({std::size_t(1), std::size_t(5)});
        for (int i = 0; i < 5; ++i) xin(0, i) = x[i];
        auto yh = m.norm.rescale_output(xt::xarray<double>(forward(mr.net, m.norm.normalize_input(xin))));
        for (int i = 0; i < 5; ++i) CHECK(yh(0, i) == doctest::Approx(y[i]).epsilon(1e-9));
      }
      ++n;
    }
  CHECK(n == 45);
  CHECK(worst < 1e-9);
  CHECK(worst_norm < 1e-10);  // summation order differs (gemm)
  MESSAGE("45 ACAS Xu nets x 20 raw inputs: worst relative deviation, folded ", worst, ", file units ", worst_norm);
}

TEST_CASE("nnet: Marabou's MNIST .nnet files and sisl's TestNetwork load") {
  for (const char* f : {"marabou/mnist10x10.nnet", "marabou/mnist10x20.nnet", "marabou/mnist20x20.nnet", "sisl-NNet/TestNetwork.nnet"})
    if (!fs::exists(models / f)) NNLENS_SKIP((models / f).string(), " not found");
  for (const char* name : {"mnist10x10.nnet", "mnist10x20.nnet", "mnist20x20.nnet"}) {
    const auto m = io::load_nnet(models / "marabou" / name);
    CHECK(m.net.input_shape() == shape(784));
    CHECK(m.net.output_shape() == shape(10));
    const ref_nnet ref(models / "marabou" / name);
    std::vector<double> x(784);
    for (std::size_t i = 0; i < 784; ++i) x[i] = double(i % 29) / 28.0;
    const auto y = run(m, x), e = ref.eval(x, true, true);
    for (int i = 0; i < 10; ++i) CHECK(y[i] == doctest::Approx(e[i]).epsilon(1e-4));
  }
  const auto t = io::load_nnet<double>(models / "sisl-NNet/TestNetwork.nnet");
  const auto y = run(t, {1, 1, 1, 100, 1});
  const double e[5] = {270.94961805, 280.8974763, 274.55254776, 288.10071007, 256.18037737};
  for (int i = 0; i < 5; ++i) CHECK(y[i] == doctest::Approx(e[i]).epsilon(1e-7));
}

TEST_CASE("nnet: write -> read is bit-exact (float and double)") {
  io::nnet_options raw;
  raw.normalize_inputs = raw.rescale_outputs = false;
  const fs::path src = models / "acasxu-nnet/ACASXU_run2a_2_9_batch_2000.nnet";
  if (!fs::exists(src)) NNLENS_SKIP(src.string(), " not found");
  const fs::path tmp = fs::temp_directory_path() / "nnlens_test_roundtrip.nnet";
  auto check_same = [](const auto& a, const auto& b) {
    REQUIRE(a.net.size() == b.net.size());
    CHECK(a.norm.input_min == b.norm.input_min);
    CHECK(a.norm.input_max == b.norm.input_max);
    CHECK(a.norm.input_mean == b.norm.input_mean);
    CHECK(a.norm.input_range == b.norm.input_range);
    CHECK(a.norm.output_mean == b.norm.output_mean);
    CHECK(a.norm.output_range == b.norm.output_range);
  };
  {
    const auto m = io::load_nnet<float>(src, raw);
    io::write_nnet(tmp, m);
    const auto m2 = io::load_nnet<float>(tmp, raw);
    check_same(m, m2);
    int dense = 0;
    for (std::size_t i = 0; i < m.net.size(); i += 2) {
      const auto& d1 = std::get<Dense<dyn, float>>(m.net.layer(i));
      const auto& d2 = std::get<Dense<dyn, float>>(m2.net.layer(i));
      CHECK(d1.W == d2.W);
      CHECK(d1.b == d2.b);
      ++dense;
    }
    CHECK(dense == 7);
    // and the text is stable: writing again gives the same bytes
    std::ostringstream a, b;
    io::write_nnet(a, m);
    io::write_nnet(b, m2);
    CHECK(a.str() == b.str());
  }
  {
    // double weights with full precision (not representable in 6 digits)
    auto m = io::load_nnet<double>(src, raw);
    auto& d0 = std::get<Dense<dyn, double>>(m.net.layer(0));
    d0.W(0, 0) = 1.0 / 3.0;
    d0.b(1) = -std::ldexp(1.0, -60);
    io::write_nnet(tmp, m);
    const auto m2 = io::load_nnet<double>(tmp, raw);
    check_same(m, m2);
    for (std::size_t i = 0; i < m.net.size(); i += 2) {
      CHECK(std::get<Dense<dyn, double>>(m.net.layer(i)).W == std::get<Dense<dyn, double>>(m2.net.layer(i)).W);
      CHECK(std::get<Dense<dyn, double>>(m.net.layer(i)).b == std::get<Dense<dyn, double>>(m2.net.layer(i)).b);
    }
  }
  fs::remove(tmp);
  // a folded model is refused, and so is a network that is not a Dense/ReLU chain
  const auto folded = io::load_nnet(src);
  std::ostringstream os;
  CHECK_THROWS_AS(io::write_nnet(os, folded), value_error);
  CHECK_THROWS_WITH_AS(io::write_nnet(os, folded.net, folded.norm), doctest::Contains("layer 0 is Affine"), value_error);
}

namespace {
// A tiny valid file: 2 inputs -> 2 hidden (ReLU) -> 1 output.
const std::string tiny =
    "// a comment\n"
    "2,2,1,2,\n"
    "2,2,1,\n"
    "0,\n"
    "-1,-2,\n"
    "1,2,\n"
    "0,0.5,10,\n"
    "2,4,3,\n"
    "1,-1,\n"
    "2e0,+0.5,\n"
    "0.25,\n"
    "-1.5E-1,\n"
    "1,1,\n"
    "0,\n";
}  // namespace

TEST_CASE("nnet: hand-computed tiny network, comments, CRLF, any float format") {
  // file units: h = relu(W1 x' + b1), y' = h0 + h1; with normalisation x' = (clamp(x) - mean)/range,
  // y = y' * 3 + 10
  std::string crlf;
  for (char ch : tiny) {
    if (ch == '\n') crlf += "\r\n// interleaved comment\r";
    crlf += ch;
  }
  for (const std::string& text : {tiny, crlf}) {
    const auto m = io::parse_nnet<double>(text, "tiny");
    xt::xarray<double> x = {{0.5, 1.0}, {5.0, -5.0}};  // second sample clamps to (1, -2)
    auto y = forward(m.net, x);
    // sample 0: x' = (0.5/2, (1-0.5)/4) = (0.25, 0.125); h0 = relu(0.25-0.125+0.25)=0.375,
    // h1 = relu(0.5+0.0625-0.15)=0.4125; y' = 0.7875; y = 12.3625
    CHECK(y(0, 0) == doctest::Approx(12.3625).epsilon(1e-12));
    // sample 1: x' = (0.5, -0.625); h0 = relu(0.5+0.625+0.25)=1.375, h1 = relu(1-0.3125-0.15)=0.5375
    // y' = 1.9125; y = 15.7375
    CHECK(y(1, 0) == doctest::Approx(15.7375).epsilon(1e-12));
  }
}

TEST_CASE("nnet: malformed files throw io_error naming the file and line") {
  auto err = [](std::string text) -> std::string {
    try {
      io::parse_nnet(text, "bad.nnet");
    } catch (const io_error& e) {
      return e.what();
    }
    return "no error";
  };
  auto replace = [](std::string s, const std::string& a, const std::string& b) {
    const auto p = s.find(a);
    REQUIRE(p != std::string::npos);
    return s.replace(p, a.size(), b);
  };
  CHECK(err(tiny) == "no error");
  CHECK(err("") .find("bad.nnet:0: truncated") != std::string::npos);
  CHECK(err(tiny.substr(0, tiny.size() - 3)).find("truncated: the file ends where layer 2 bias 1 of 1") !=
        std::string::npos);
  CHECK(err(replace(tiny, "1,-1,\n", "1,\n")).find("bad.nnet:9: layer 1 weights, row 1 of 2: expected 2 values, found 1") !=
        std::string::npos);
  CHECK(err(replace(tiny, "2e0,", "2x0,")).find("bad.nnet:10: layer 1 weights, row 2 of 2: value 1 '2x0' is not a finite number") !=
        std::string::npos);
  CHECK(err(replace(tiny, "2e0,", "nan,")).find("is not a finite number") != std::string::npos);
  CHECK(err(replace(tiny, "2e0,", "1e999,")).find("is not a finite number") != std::string::npos);
  CHECK(err(replace(tiny, "2e0,", "1e39,")).find("bad.nnet:12: layer 1: a weight or bias overflows") != std::string::npos);
  CHECK(err(replace(tiny, "2,2,1,\n", "2,2,1,7,\n")).find("bad.nnet:3: layer sizes (numLayers+1 values): expected 3 values, found 4") !=
        std::string::npos);
  CHECK(err(replace(tiny, "2,2,1,\n", "2,0,1,\n")).find("must be an integer") != std::string::npos);
  CHECK(err(replace(tiny, "2,2,1,\n", "2,2.5,1,\n")).find("must be an integer") != std::string::npos);
  CHECK(err(replace(tiny, "2,2,1,\n", "3,2,1,\n")).find("differs from inputSize") != std::string::npos);
  CHECK(err(replace(tiny, "2,4,3,\n", "2,0,3,\n")).find("input range 2 is 0") != std::string::npos);
  CHECK(err(replace(tiny, "\n1,2,\n", "\n-3,2,\n")).find("minimum -1 exceeds maximum -3") != std::string::npos);
  CHECK(err(replace(tiny, "1,-1,\n", "1,,-1,\n")).find("empty value in column 2") != std::string::npos);
  CHECK(err(tiny + "5,\n").find("bad.nnet:15: unexpected data after the last bias") != std::string::npos);
  // hostile sizes: refused before any allocation
  CHECK(err("3,2,1,2,\n2,16000000,16000000,1,\n").find("more than") != std::string::npos);
  CHECK(err("2,2,1,2,\n2,100000,1,\n0,\n").find("truncated: the layer sizes declare") != std::string::npos);
  CHECK(err("99999999,2,1,\n").find("numLayers") != std::string::npos);
  CHECK_THROWS_WITH_AS(io::load_nnet("/nonexistent/x.nnet"), doctest::Contains("/nonexistent/x.nnet: cannot open"),
                       io_error);
}
