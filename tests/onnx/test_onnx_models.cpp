// ONNX import on real networks written by others (../shared/models, read in place), against
// external oracles: VNN-COMP 2022 counterexamples, DeepXplore's expected logits, resnet_2b's
// expected.txt, the sisl/Marabou oracle rows, and the VNN-COMP robustness boxes' labels.  Plus the
// static load (load_onnx<Net>), a synthetic NHWC graph against a naive NHWC evaluation, and bad
// files (missing, truncated, corrupted) that must throw nnlens::error.  A model case whose files are
// missing under nnlens_test::shared_dir() ($NNLENS_SHARED_DIR) skips (NNLENS_SKIP): ctest Skipped.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "nnlens/io/image.hpp"
#include "nnlens/io/nnet.hpp"
#include "nnlens/io/onnx.hpp"
#include "nnlens/network/forward.hpp"
#include "nnlens/network/sequential.hpp"
#include "onnx_builder.hpp"
#include "test_skip.hpp"

namespace fs = std::filesystem;
using namespace nnlens;
using namespace onnx_builder;

namespace {

const fs::path models = nnlens_test::shared_dir() / "models";

/// The first of `paths` (relative to models/) that does not exist, "" when all do: a case that
/// needs them calls NNLENS_SKIP with it.
std::string first_missing(std::initializer_list<fs::path> paths) {
  for (const auto& p : paths)
    if (!fs::exists(models / p)) return (models / p).string();
  return {};
}

std::vector<double> split_numbers(const std::string& s, char sep) {
  std::vector<double> v;
  std::stringstream ss(s);
  std::string tok;
  while (std::getline(ss, tok, sep))
    if (!tok.empty()) v.push_back(std::stod(tok));
  return v;
}
std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> v;
  std::stringstream ss(s);
  std::string tok;
  while (std::getline(ss, tok, sep)) v.push_back(tok);
  return v;
}

/// Runs net on one flat sample.
std::vector<double> run1(const DynamicNetwork& net, const std::vector<double>& x) {
  const shape in = net.input_shape();
  REQUIRE(x.size() == in.size());
  xt::xarray<float> xa = xt::xarray<float>::from_shape(in.with_batch(1));
  std::copy(x.begin(), x.end(), xa.begin());
  const auto y = forward(net, xa);
  return std::vector<double>(y.begin(), y.end());
}

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}
std::size_t argmax(const std::vector<double>& v) { return std::size_t(std::max_element(v.begin(), v.end()) - v.begin()); }

/// A VNN-COMP counterexample file: ((X_0 v) ... (Y_0 v) ...).
void read_counterexample(const fs::path& p, std::vector<double>& x, std::vector<double>& y) {
  std::ifstream f(p);
  std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  static const std::regex re(R"(\(\s*([XY])_(\d+)\s+([-+0-9.eE]+)\s*\))");
  for (auto it = std::sregex_iterator(all.begin(), all.end(), re); it != std::sregex_iterator(); ++it) {
    auto& v = (*it)[1] == "X" ? x : y;
    const std::size_t i = std::stoul((*it)[2]);
    if (v.size() <= i) v.resize(i + 1);
    v[i] = std::stod((*it)[3]);
  }
}

/// The centre of a vnnlib input box and the label its output constraint protects ((>= Y_j Y_label)).
void read_vnnlib_box(const fs::path& p, std::vector<double>& centre, std::size_t& label) {
  std::ifstream f(p);
  std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  static const std::regex bound(R"(\(assert\s*\((<=|>=)\s*X_(\d+)\s+([-+0-9.eE]+)\s*\)\s*\))");
  std::vector<double> lo, hi;
  for (auto it = std::sregex_iterator(all.begin(), all.end(), bound); it != std::sregex_iterator(); ++it) {
    const std::size_t i = std::stoul((*it)[2]);
    if (lo.size() <= i) lo.resize(i + 1), hi.resize(i + 1);
    ((*it)[1] == "<=" ? hi : lo)[i] = std::stod((*it)[3]);
  }
  centre.resize(lo.size());
  for (std::size_t i = 0; i < lo.size(); ++i) centre[i] = 0.5 * (lo[i] + hi[i]);
  static const std::regex out(R"(>=\s*Y_\d+\s+Y_(\d+))");
  std::smatch m;
  REQUIRE(std::regex_search(all, m, out));
  label = std::stoul(m[1]);
}

}  // namespace

TEST_CASE("onnx models: all 45 ACAS Xu networks load with the expected structure") {
  for (int a = 1; a <= 5; ++a)
    for (int b = 1; b <= 9; ++b) {
      const fs::path p = models / "vnncomp2021-acasxu" / ("ACASXU_run2a_" + std::to_string(a) + "_" + std::to_string(b) + "_batch_2000.onnx");
      if (!fs::exists(p)) NNLENS_SKIP(p.string(), " not found");
      io::onnx_info info;
      const auto net = io::import_onnx(p.string(), info);
      CHECK(net.input_shape() == shape(1, 1, 5));
      CHECK(net.output_shape() == shape(5));
      CHECK(net.size() == 14);  // Flatten, 6 x (Dense, ReLU), Dense: Sub(0) is dropped, Add folded
      CHECK(info.opset == 8);
      CHECK(info.output_name == "linear_7_Add");
    }
}

TEST_CASE("onnx models: VNN-COMP 2022 counterexamples reproduce (ACAS Xu, mnist_fc)") {
  if (const auto m = first_missing({"vnncomp2022-counterexamples/index.csv"}); !m.empty()) NNLENS_SKIP(m, " not found");
  std::ifstream idx(models / "vnncomp2022-counterexamples" / "index.csv");
  REQUIRE(idx);
  std::string line;
  std::size_t n = 0, nacas = 0, nmnist = 0;
  double worst = 0;
  std::map<std::string, DynamicNetwork> cache;
  while (std::getline(idx, line)) {
    if (line.empty() || line[0] == '#' || line.rfind("benchmark,", 0) == 0) continue;
    const auto f = split(line, ',');
    REQUIRE(f.size() >= 4);
    if (const auto m = first_missing({f[1], f[3]}); !m.empty()) NNLENS_SKIP(m, " not found (listed in index.csv)");
    auto it = cache.find(f[1]);
    if (it == cache.end()) it = cache.emplace(f[1], io::load_onnx((models / f[1]).string())).first;
    std::vector<double> x, y;
    read_counterexample(models / f[3], x, y);
    const auto got = run1(it->second, x);
    const double d = max_abs_diff(got, y);
    INFO(f[3] << ": max |dy| = " << d);
    CHECK(d <= 1e-4);
    worst = std::max(worst, d);
    ++n;
    (f[0] == "acasxu" ? nacas : nmnist)++;
  }
  MESSAGE("counterexamples: " << n << " (acasxu " << nacas << ", mnist_fc " << nmnist << "), max |dy| = " << worst);
  CHECK(nacas == 51);
  CHECK(nmnist == 18);
}

TEST_CASE("onnx models: DeepXplore LeNet-1/4/5 reproduce expected.csv (logits 1e-4, labels exact)") {
  if (const auto m = first_missing({"deepxplore-mnist/lenet1.onnx", "deepxplore-mnist/lenet4.onnx",
                                    "deepxplore-mnist/lenet5.onnx", "deepxplore-mnist/expected.csv"});
      !m.empty())
    NNLENS_SKIP(m, " not found");
  const fs::path dir = models / "deepxplore-mnist";
  std::map<std::string, DynamicNetwork> nets;
  for (const char* m : {"lenet1", "lenet4", "lenet5"}) nets[m] = io::load_onnx((dir / (std::string(m) + ".onnx")).string());
  std::ifstream f(dir / "expected.csv");
  REQUIRE(f);
  std::string line;
  std::getline(f, line);  // header
  std::size_t rows = 0, labels_ok = 0;
  double worst = 0;
  while (std::getline(f, line)) {
    if (line.empty()) continue;
    const auto c = split(line, ',');
    REQUIRE(c.size() == 13);
    if (!fs::exists(dir / c[0])) NNLENS_SKIP((dir / c[0]).string(), " not found (listed in expected.csv)");
    const auto img = io::load_image<float>(dir / c[0]);
    REQUIRE(img.size() == 784);
    const auto got = run1(nets.at(c[1]), std::vector<double>(img.begin(), img.end()));
    std::vector<double> want;
    for (std::size_t i = 3; i < 13; ++i) want.push_back(std::stod(c[i]));
    const double d = max_abs_diff(got, want);
    INFO(c[0] << " " << c[1] << ": max |dlogit| = " << d);
    CHECK(d <= 1e-4);
    CHECK(argmax(got) == std::stoul(c[2]));
    labels_ok += argmax(got) == std::stoul(c[2]);
    worst = std::max(worst, d);
    ++rows;
  }
  MESSAGE("deepxplore: " << rows << " rows, labels " << labels_ok << "/" << rows << ", max |dlogit| = " << worst);
  CHECK(rows == 288);
}

TEST_CASE("onnx models: resnet_2b (residual blocks) reproduces expected.txt") {
  if (const auto m = first_missing({"vnncomp2021-cifar10_resnet/resnet_2b.onnx", "vnncomp2021-cifar10_resnet/expected.txt"});
      !m.empty())
    NNLENS_SKIP(m, " not found");
  const fs::path dir = models / "vnncomp2021-cifar10_resnet";
  const auto net = io::load_onnx((dir / "resnet_2b.onnx").string());
  CHECK(net.input_shape() == shape(3, 32, 32));
  CHECK(net.output_shape() == shape(10));
  std::size_t residuals = 0;
  for (std::size_t i = 0; i < net.size(); ++i) residuals += net.layer_name(i) == "Residual";
  CHECK(residuals == 2);
  // the same file into the static type (identity shortcut = Residual's default)
  using ResNet2b = Sequential<Input<3, 32, 32>, Conv2D<8, 3, 2, 1>, ReLU,
                              Residual<Block<Conv2D<16, 3, 2, 1>, ReLU, Conv2D<16, 3, 1, 1>>, Block<Conv2D<16, 1, 2>>>, ReLU,
                              Residual<Block<Conv2D<16, 3, 1, 1>, ReLU, Conv2D<16, 3, 1, 1>>>, ReLU, Flatten, Dense<100>,
                              ReLU, Dense<10>>;
  const auto st = io::load_onnx<ResNet2b>((dir / "resnet_2b.onnx").string());
  std::ifstream f(dir / "expected.txt");
  std::string line;
  std::size_t cases = 0;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    const auto parts = split(line, ';');
    REQUIRE(parts.size() == 2);
    const auto xin = split_numbers(parts[0], ',');
    const auto got = run1(net, xin);
    const auto want = split_numbers(parts[1], ',');
    INFO("case " << cases);
    CHECK(max_abs_diff(got, want) <= 1e-4);
    xt::xarray<float> xs = xt::xarray<float>::from_shape({1, 3, 32, 32});
    std::copy(xin.begin(), xin.end(), xs.begin());
    const auto ys = forward(st, xs);
    CHECK(max_abs_diff(std::vector<double>(ys.begin(), ys.end()), got) == 0);
    ++cases;
  }
  CHECK(cases == 5);
}

TEST_CASE("onnx models: oracle rows (TestNetwork2 W@x form, the BatchNorm toy)") {
  if (const auto m = first_missing({"sisl-NNet/TestNetwork2.onnx", "vnncomp2021-test/test_small.onnx",
                                    "marabou/linear2-3_bn1-linear3-1.onnx"});
      !m.empty())
    NNLENS_SKIP(m, " not found");
  {  // sisl NNet's export: raw input [5] (no batch axis), normalisation folded, outputs rescaled
    io::onnx_info info;
    const auto net = io::import_onnx((models / "sisl-NNet" / "TestNetwork2.onnx").string(), info);
    CHECK_FALSE(info.batch_axis);
    CHECK(net.input_shape() == shape(5));
    const auto got = run1(net, {1.0, 1.0, 1.0, 100.0, 1.0});
    const std::vector<double> want = {270.94961805, 280.8974763, 274.55254776, 288.10071007, 256.18037737};
    // The source compares at rtol 1e-3; the issue asks logits within 1e-4 (measured: 4.6e-5, the
    // float32 output's last digit at ~270).
    for (std::size_t i = 0; i < 5; ++i) CHECK(std::abs(got[i] - want[i]) <= 1e-4);
  }
  {  // VNN-COMP's test_small (W @ x, opset 14): W0 = [1,1], b0 = 1.5, W1 = all 2, b1 = 2.5, W2 = [3,3], b2 = 3.5
    // by hand: h1 = relu(x + 1.5), h2 = relu(4 h1 + 2.5), y = 6 h2 + 3.5
    const auto net = io::load_onnx((models / "vnncomp2021-test" / "test_small.onnx").string());
    CHECK(run1(net, {0.0})[0] == doctest::Approx(54.5).epsilon(1e-6));
    CHECK(run1(net, {-2.0})[0] == doctest::Approx(18.5).epsilon(1e-6));
    CHECK(run1(net, {1.0})[0] == doctest::Approx(6 * (4 * 2.5 + 2.5) + 3.5).epsilon(1e-6));
  }
  {
    const auto net = io::load_onnx((models / "marabou" / "linear2-3_bn1-linear3-1.onnx").string());
    CHECK(net.layer_name(1) == "BatchNorm");
    const auto got = run1(net, {1.0, 1.0});
    CHECK(got.size() == 1);
    CHECK(std::abs(got[0] - 9.9999799728) <= 1e-5);
  }
}

TEST_CASE("onnx models: MNIST nets classify the centres of their VNN-COMP boxes as the spec's label") {
  struct item {
    const char* onnx;
    std::vector<const char*> specs;
  };
  const std::vector<item> items = {
      {"vnncomp2021-eran/mnist_relu_9_200.onnx",
       {"vnncomp2021-eran/mnist_spec_idx_8098_eps_0.01500.vnnlib", "vnncomp2021-eran/mnist_spec_idx_4424_eps_0.01500.vnnlib"}},
      {"vnncomp2021-verivital/Convnet_maxpool.onnx",
       {"vnncomp2021-verivital/prop_0_0.004.vnnlib", "vnncomp2021-verivital/prop_1_0.004.vnnlib",
        "vnncomp2021-verivital/prop_2_0.004.vnnlib"}},
      {"vnncomp2021-verivital/Convnet_avgpool.onnx",
       {"vnncomp2021-verivital/prop_0_0.004.vnnlib", "vnncomp2021-verivital/prop_1_0.004.vnnlib",
        "vnncomp2021-verivital/prop_2_0.004.vnnlib"}},
      {"vnncomp-mnistfc/mnist-net_256x2.onnx", {"vnncomp-mnistfc/prop_1_0.03.vnnlib", "vnncomp-mnistfc/prop_2_0.03.vnnlib"}},
      {"vnncomp-mnistfc/mnist-net_256x4.onnx", {"vnncomp-mnistfc/prop_1_0.03.vnnlib", "vnncomp-mnistfc/prop_2_0.03.vnnlib"}},
      {"vnncomp-mnistfc/mnist-net_256x6.onnx", {"vnncomp-mnistfc/prop_1_0.03.vnnlib", "vnncomp-mnistfc/prop_2_0.03.vnnlib"}},
  };
  // every model and spec, or the case skips (it never checks a subset and passes)
  for (const auto& it : items) {
    if (const auto m = first_missing({it.onnx}); !m.empty()) NNLENS_SKIP(m, " not found");
    for (const char* s : it.specs)
      if (const auto m = first_missing({s}); !m.empty()) NNLENS_SKIP(m, " not found");
  }
  if (const auto m = first_missing({"marabou/cnn_max_mninst2.onnx", "marabou/cnn_max_mninst3.onnx", "marabou/mnist2x10.onnx"});
      !m.empty())
    NNLENS_SKIP(m, " not found");
  for (const auto& it : items) {
    const auto net = io::load_onnx((models / it.onnx).string());
    for (const char* s : it.specs) {
      std::vector<double> c;
      std::size_t label = 0;
      read_vnnlib_box(models / s, c, label);
      INFO(it.onnx << " " << s);
      CHECK(argmax(run1(net, c)) == label);
    }
  }
  // The Marabou nets: load with the right input layout and shapes (no oracle in the snapshot).
  for (const char* m : {"marabou/cnn_max_mninst2.onnx", "marabou/cnn_max_mninst3.onnx"}) {
    io::onnx_info info;
    const auto net = io::import_onnx((models / m).string(), info);
    CHECK(info.input_nhwc);
    CHECK(net.input_shape() == shape(1, 28, 28));
    CHECK(net.output_shape() == shape(10));
  }
  const auto m2 = io::load_onnx((models / "marabou" / "mnist2x10.onnx").string());
  CHECK(m2.input_shape() == shape(1, 28, 28));
  CHECK(m2.output_shape() == shape(10));
}

TEST_CASE("onnx models: the MNIST nets agree with LeNet-5 on DeepXplore's 44 MNIST seed digits (NHWC layouts)") {
  // No oracle ships with the Marabou CNNs (NHWC, Transpose + MatMul rows in HWC order): a wrong
  // layout would leave them at chance level.  Threshold: at least 40/44 (38 for the tiny 2x10 MLP).
  const std::vector<std::pair<const char*, std::size_t>> nets = {
      {"marabou/cnn_max_mninst2.onnx", 40}, {"marabou/cnn_max_mninst3.onnx", 40}, {"marabou/mnist2x10.onnx", 38},
      {"vnncomp-mnistfc/mnist-net_256x2.onnx", 40}, {"vnncomp2021-eran/mnist_relu_9_200.onnx", 40},
      {"vnncomp2021-verivital/Convnet_avgpool.onnx", 40}, {"vnncomp2021-verivital/Convnet_maxpool.onnx", 40}};
  if (const auto m = first_missing({"deepxplore-mnist/lenet5.onnx", "deepxplore-mnist/images"}); !m.empty())
    NNLENS_SKIP(m, " not found");
  for (const auto& n : nets)
    if (const auto m = first_missing({n.first}); !m.empty()) NNLENS_SKIP(m, " not found");
  const fs::path dir = models / "deepxplore-mnist";
  const auto ref = io::load_onnx((dir / "lenet5.onnx").string());
  std::vector<fs::path> imgs;
  for (const auto& e : fs::directory_iterator(dir / "images"))
    if (e.path().filename().string().find("_orig") != std::string::npos) imgs.push_back(e.path());
  REQUIRE(imgs.size() == 44);
  std::vector<std::size_t> want;
  std::vector<std::vector<double>> xs;
  for (const auto& p : imgs) {
    const auto x = io::load_image<float>(p);
    xs.emplace_back(x.begin(), x.end());
    want.push_back(argmax(run1(ref, xs.back())));
  }
  for (const auto& [f, min_agree] : nets) {
    const auto net = io::load_onnx((models / f).string());
    std::size_t agree = 0;
    for (std::size_t i = 0; i < xs.size(); ++i) agree += argmax(run1(net, xs[i])) == want[i];
    MESSAGE(std::string(f) << ": agrees with LeNet-5 on " << agree << "/44");
    CHECK(agree >= min_agree);
  }
}

TEST_CASE("onnx models: load_onnx<Net> fills a static Sequential and checks its shapes") {
  using Acas = Sequential<Input<1, 1, 5>, Flatten, Dense<50>, ReLU, Dense<50>, ReLU, Dense<50>, ReLU, Dense<50>, ReLU,
                          Dense<50>, ReLU, Dense<50>, ReLU, Dense<5>>;
  if (const auto m = first_missing({"vnncomp2021-acasxu/ACASXU_run2a_2_9_batch_2000.onnx", "deepxplore-mnist/lenet1.onnx"});
      !m.empty())
    NNLENS_SKIP(m, " not found");
  const std::string p = (models / "vnncomp2021-acasxu" / "ACASXU_run2a_2_9_batch_2000.onnx").string();
  const auto s = io::load_onnx<Acas>(p);
  const auto d = io::load_onnx(p);
  xt::xarray<float> x = {{{{0.1f, -0.2f, 0.3f, -0.4f, 0.5f}}}};
  const auto ys = forward(s, x), yd = forward(d, x);
  CHECK(ys == yd);
  using Wrong = Sequential<Input<1, 1, 5>, Flatten, Dense<50>, ReLU, Dense<40>, ReLU, Dense<50>, ReLU, Dense<50>, ReLU,
                           Dense<50>, ReLU, Dense<50>, ReLU, Dense<5>>;
  CHECK_THROWS_AS(io::load_onnx<Wrong>(p), shape_error);
  try {
    (void)io::load_onnx<Wrong>(p);
  } catch (const shape_error& e) {
    CHECK(std::string(e.what()).find("layer 3 (Dense)") != std::string::npos);
  }
  using LeNet1 = Sequential<Input<1, 28, 28>, Conv2D<4, 5, 1, 2>, ReLU, MaxPool2D<2>, Conv2D<12, 5, 1, 2>, ReLU,
                            MaxPool2D<2>, Flatten, Dense<10>>;
  const auto l1 = io::load_onnx<LeNet1>((models / "deepxplore-mnist" / "lenet1.onnx").string());
  CHECK(l1.layer<0>().W.shape(0) == 4);
}

// ---- a synthetic keras-style NHWC graph against a naive NHWC evaluation ----

TEST_CASE("onnx: NHWC input + Transpose(0,3,1,2) ... Transpose(0,2,3,1) + Flatten + MatMul (keras2onnx pattern)") {
  const std::size_t H = 5, W = 4, C = 2, O = 3, K = 2, OH = H - K + 1, OW = W - K + 1, F = 4;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> cw(O * C * K * K), cb(O), dw(OH * OW * O * F), db(F), x(H * W * C);
  for (auto* v : {&cw, &cb, &dw, &db, &x})
    for (auto& e : *v) e = u(rng);
  onnx::ModelProto m = new_model(12);
  auto& g = *m.mutable_graph();
  set_value(g.add_input(), "x", {1, std::int64_t(H), std::int64_t(W), std::int64_t(C)});
  set_value(g.add_output(), "y", {1, std::int64_t(F)});
  add_init(g, "cw", {std::int64_t(O), std::int64_t(C), std::int64_t(K), std::int64_t(K)}, cw);
  add_init(g, "cb", {std::int64_t(O)}, cb);
  add_init(g, "dw", {std::int64_t(OH * OW * O), std::int64_t(F)}, dw);
  add_init(g, "db", {std::int64_t(F)}, db);
  add_ints(add_node(g, "Transpose", {"x"}, "t0"), "perm", {0, 3, 1, 2});
  add_node(g, "Conv", {"t0", "cw", "cb"}, "c");
  add_node(g, "Relu", {"c"}, "r");
  add_ints(add_node(g, "Transpose", {"r"}, "t1"), "perm", {0, 2, 3, 1});
  add_node(g, "Flatten", {"t1"}, "f");
  add_node(g, "MatMul", {"f", "dw"}, "mm");
  add_node(g, "Add", {"mm", "db"}, "y");
  const fs::path p = fs::temp_directory_path() / "nnlens_test_nhwc.onnx";
  {
    std::ofstream f(p, std::ios::binary);
    REQUIRE(m.SerializeToOstream(&f));
  }
  io::onnx_info info;
  const auto net = io::import_onnx(p.string(), info);
  CHECK(info.input_nhwc);
  CHECK(net.input_shape() == shape(C, H, W));
  // naive NHWC reference: conv on x[h][w][c], relu, flatten in (h, w, o) order, dense
  std::vector<double> act(OH * OW * O), want(F);
  for (std::size_t h = 0; h < OH; ++h)
    for (std::size_t w = 0; w < OW; ++w)
      for (std::size_t o = 0; o < O; ++o) {
        double s = cb[o];
        for (std::size_t c = 0; c < C; ++c)
          for (std::size_t i = 0; i < K; ++i)
            for (std::size_t j = 0; j < K; ++j) s += double(cw[((o * C + c) * K + i) * K + j]) * x[((h + i) * W + (w + j)) * C + c];
        act[(h * OW + w) * O + o] = std::max(0.0, s);
      }
  for (std::size_t k = 0; k < F; ++k) {
    double s = db[k];
    for (std::size_t i = 0; i < act.size(); ++i) s += act[i] * dw[i * F + k];
    want[k] = s;
  }
  // the network takes NCHW: permute the NHWC sample
  xt::xarray<float> xh = xt::xarray<float>::from_shape({1, H, W, C});
  std::copy(x.begin(), x.end(), xh.begin());
  const xt::xarray<float> xc = io::nhwc_to_nchw(xh);
  REQUIRE(xc.shape(1) == C);
  CHECK(max_abs_diff(run1(net, std::vector<double>(xc.begin(), xc.end())), want) <= 1e-5);
  fs::remove(p);
}

TEST_CASE("onnx: bad files throw nnlens::error, never crash") {
  CHECK_THROWS_AS(io::load_onnx("/nonexistent/model.onnx"), io_error);
  const fs::path p = fs::temp_directory_path() / "nnlens_test_bad.onnx";
  auto write = [&](const std::string& b) {
    std::ofstream o(p, std::ios::binary);
    o.write(b.data(), std::streamsize(b.size()));
  };
  // the rest mutates real models
  if (const auto m = first_missing({"vnncomp2021-test/test_small.onnx", "deepxplore-mnist/lenet1.onnx",
                                    "vnncomp2021-cifar10_resnet/resnet_2b.onnx", "marabou/cnn_max_mninst3.onnx"});
      !m.empty())
    NNLENS_SKIP(m, " not found");
  for (const char* model : {"vnncomp2021-test/test_small.onnx", "deepxplore-mnist/lenet1.onnx",
                            "vnncomp2021-cifar10_resnet/resnet_2b.onnx", "marabou/cnn_max_mninst3.onnx"}) {
    std::ifstream f(models / model, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    REQUIRE(!bytes.empty());
    CHECK(io::parse_onnx(bytes.data(), bytes.size(), model).output_shape() == io::load_onnx((models / model).string()).output_shape());
    CHECK_THROWS_AS(io::parse_onnx(bytes.data(), bytes.size() / 3, model), io_error);
    write(bytes.substr(0, bytes.size() / 2));  // truncated
    CHECK_THROWS_AS(io::load_onnx(p.string()), io_error);
    write("not an onnx file at all");
    CHECK_THROWS_AS(io::load_onnx(p.string()), io_error);
    // random byte mutations (in the graph structure: the weights come last in these files): a network
    // or an nnlens::error, never another exception or a crash
    std::mt19937 rng(42);
    std::size_t loaded = 0, rejected = 0;
    const std::size_t span = std::min<std::size_t>(bytes.size(), 4096);
    for (int k = 0; k < 150; ++k) {
      std::string b = bytes;
      const int flips = 1 + int(rng() % 4);
      for (int i = 0; i < flips; ++i) b[rng() % span] = char(rng() & 0xff);
      if (rng() % 4 == 0) b.resize(rng() % b.size());
      write(b);
      try {
        const auto net = io::load_onnx(p.string());
        std::vector<double> x(net.input_shape().size(), 0.5);
        (void)run1(net, x);
        ++loaded;
      } catch (const error&) {
        ++rejected;
      }
    }
    MESSAGE("mutated " << std::string(model) << ": " << loaded << " loaded, " << rejected << " rejected");
    CHECK(loaded + rejected == 150);
  }
  fs::remove(p);
}

TEST_CASE("onnx: unsupported operators are named with the supported set") {
  onnx::ModelProto m = new_model(13);
  auto& g = *m.mutable_graph();
  set_value(g.add_input(), "x", {1, 4});
  set_value(g.add_output(), "y", {1, 4});
  add_node(g, "Erf", {"x"}, "y");
  {  // a scalar input (found by libFuzzer) is an io_error
    onnx::ModelProto s0 = m;
    s0.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->clear_dim();
    const std::string b = s0.SerializeAsString();
    CHECK_THROWS_AS(io::parse_onnx(b.data(), b.size(), "scalar"), io_error);
  }
  const fs::path p = fs::temp_directory_path() / "nnlens_test_erf.onnx";
  {
    std::ofstream f(p, std::ios::binary);
    REQUIRE(m.SerializeToOstream(&f));
  }
  try {
    (void)io::load_onnx(p.string());
    FAIL("expected io_error");
  } catch (const io_error& e) {
    const std::string w = e.what();
    CHECK(w.find("Erf_y") != std::string::npos);
    CHECK(w.find("(Erf)") != std::string::npos);
    CHECK(w.find("Gemm, MatMul") != std::string::npos);
  }
  fs::remove(p);
}

TEST_CASE("onnx models: the 45 ACAS Xu networks agree in .nnet and ONNX (normalised in, raw out; 1e-5)") {
  io::nnet_options raw;
  raw.normalize_inputs = raw.clamp_inputs = raw.rescale_outputs = false;
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> u(-0.5, 0.5);
  double worst = 0;
  for (int a = 1; a <= 5; ++a)
    for (int b = 1; b <= 9; ++b) {
      const std::string stem = "ACASXU_run2a_" + std::to_string(a) + "_" + std::to_string(b) + "_batch_2000";
      if (const auto m = first_missing({"vnncomp2021-acasxu/" + stem + ".onnx", "acasxu-nnet/" + stem + ".nnet"}); !m.empty())
        NNLENS_SKIP(m, " not found");
      const auto onnx_net = io::load_onnx((models / "vnncomp2021-acasxu" / (stem + ".onnx")).string());
      const auto nnet = io::load_nnet<float>(models / "acasxu-nnet" / (stem + ".nnet"), raw);
      for (int k = 0; k < 20; ++k) {
        std::vector<double> x(5);
        for (auto& v : x) v = u(rng);
        const auto y1 = run1(onnx_net, x), y2 = run1(nnet.net, x);
        const double d = max_abs_diff(y1, y2);
        INFO(stem << " sample " << k);
        CHECK(d <= 1e-5);
        worst = std::max(worst, d);
      }
    }
  MESSAGE("ACAS Xu .nnet vs ONNX: max |dy| = " << worst);
}

namespace {
/// A one-input image model: optional Pad (pads as attribute before opset 11, as input from 11), then
/// `op` (Conv with a 3x3 kernel of 2 outputs, AveragePool or MaxPool 3x3 stride 2).
std::string write_pad_model(const std::string& name, int opset, const std::vector<std::int64_t>& pad,
                            const std::string& op, const std::vector<std::int64_t>& own_pads, bool cip) {
  const std::int64_t C = 2, H = 7, W = 6;
  onnx::ModelProto m = new_model(opset);
  auto& g = *m.mutable_graph();
  set_value(g.add_input(), "x", {1, C, H, W});
  set_value(g.add_output(), "y", {1, 2, 1, 1});
  std::string cur = "x";
  if (!pad.empty()) {
    onnx::NodeProto* p;
    if (opset < 11) {
      p = add_node(g, "Pad", {"x"}, "p");
      add_ints(p, "pads", pad);
    } else {
      auto* t = g.add_initializer();
      t->set_name("pads");
      t->set_data_type(onnx::TensorProto::INT64);
      t->add_dims(std::int64_t(pad.size()));
      for (auto v : pad) t->add_int64_data(v);
      p = add_node(g, "Pad", {"x", "pads"}, "p");
    }
    cur = "p";
  }
  onnx::NodeProto* n;
  if (op == "Conv") {
    std::vector<float> w(2 * C * 9), b = {0.25f, -0.5f};
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = float(std::sin(double(i) + 1.0));
    add_init(g, "w", {2, C, 3, 3}, w);
    add_init(g, "b", {2}, b);
    n = add_node(g, "Conv", {cur, "w", "b"}, "y");
  } else {
    n = add_node(g, op, {cur}, "y");
    add_ints(n, "kernel_shape", {3, 3});
    add_ints(n, "strides", {2, 2});
    if (op == "AveragePool") {
      auto* a = n->add_attribute();
      a->set_name("count_include_pad");
      a->set_type(onnx::AttributeProto::INT);
      a->set_i(cip ? 1 : 0);
    }
  }
  if (!own_pads.empty()) add_ints(n, "pads", own_pads);
  const fs::path p = fs::temp_directory_path() / name;
  std::ofstream f(p, std::ios::binary);
  REQUIRE(m.SerializeToOstream(&f));
  return p.string();
}
}  // namespace

TEST_CASE("onnx: Pad (constant zero) folds into the next Conv / AveragePool; before MaxPool it is rejected") {
  std::vector<double> x(2 * 7 * 6);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::cos(0.7 * double(i));
  // ONNX pads: [n_begin, c_begin, h_begin, w_begin, n_end, c_end, h_end, w_end]; Conv pads: [t, l, b, r]
  const std::vector<std::int64_t> pad = {0, 0, 1, 2, 0, 0, 0, 1}, own = {1, 2, 0, 1};
  for (int opset : {9, 13}) {
    const auto a = io::load_onnx(write_pad_model("nnlens_pad_a.onnx", opset, pad, "Conv", {}, false));
    const auto b = io::load_onnx(write_pad_model("nnlens_pad_b.onnx", opset, {}, "Conv", own, false));
    CHECK(a.output_shape() == b.output_shape());
    CHECK(a.size() == 1);  // the Pad became the Conv's padding
    CHECK(run1(a, x) == run1(b, x));
    // zero padding then an average over the padded tensor = count_include_pad with those pads
    const auto c = io::load_onnx(write_pad_model("nnlens_pad_a.onnx", opset, pad, "AveragePool", {}, false));
    const auto d = io::load_onnx(write_pad_model("nnlens_pad_b.onnx", opset, {}, "AveragePool", own, true));
    CHECK(c.output_shape() == d.output_shape());
    CHECK(run1(c, x) == run1(d, x));
    CHECK_THROWS_AS(io::load_onnx(write_pad_model("nnlens_pad_a.onnx", opset, pad, "MaxPool", {}, false)), io_error);
  }
  fs::remove(fs::temp_directory_path() / "nnlens_pad_a.onnx");
  fs::remove(fs::temp_directory_path() / "nnlens_pad_b.onnx");
}
