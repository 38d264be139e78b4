// ONNX conformance: the node tests of Debian's libonnx-testdata for every supported operator.
// Each test directory holds model.onnx and test_data_set_*/input_*.pb, output_*.pb.  The first
// run-time input is the network input (batch-leading); the others are bound as constants through
// onnx_options::extra_inputs (the weights of Gemm/Conv/MatMul tests are graph inputs there).  A test
// the loader rejects is listed as skipped with the loader's reason; every test that loads must
// reproduce output_0 with |y - e| <= 1e-5 (1 + |e|).  The node tests' folder is
// $NNLENS_ONNX_NODE_DIR when set and non-empty, else Debian's; when it is missing the case skips
// (NNLENS_SKIP, ctest Skipped), it does not pass.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "nnlens/io/onnx.hpp"
#include "nnlens/network/forward.hpp"
#include "test_skip.hpp"

namespace fs = std::filesystem;
using namespace nnlens;

namespace {

const fs::path node_dir = nnlens_test::env_or("NNLENS_ONNX_NODE_DIR", "/usr/share/libonnx-testdata/data/node");

// Name prefixes of the node tests of the supported operators.
const std::vector<std::string> prefixes = {
    "test_gemm",        "test_matmul_",      "test_add",       "test_sub",         "test_mul",
    "test_div",         "test_conv_",        "test_basic_conv", "test_relu",       "test_leakyrelu",
    "test_clip",        "test_maxpool",      "test_averagepool", "test_globalaveragepool",
    "test_batchnorm",   "test_flatten",      "test_reshape",   "test_transpose",   "test_constant_pad",
    "test_dropout",     "test_identity",     "test_softmax",   "test_constant"};

bool supported_test(const std::string& name) {
  if (name.find("_expanded") != std::string::npos) return false;  // function-expanded variants
  for (const auto& p : prefixes)
    if (name.rfind(p, 0) == 0) return true;
  return false;
}

struct outcome {
  std::string name;
  bool loaded = false, passed = false;
  std::string why;
};

outcome run_test(const fs::path& dir) {
  outcome r;
  r.name = dir.filename().string();
  std::vector<fs::path> sets;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) sets.push_back(e.path());
  std::sort(sets.begin(), sets.end());
  if (sets.empty()) {
    r.why = "no test data";
    return r;
  }
  for (const auto& set : sets) {
    std::vector<io::onnx_tensor> inputs;
    io::onnx_tensor expected;
    try {  // sequence / optional test data are not TensorProtos
      for (int i = 0; fs::exists(set / ("input_" + std::to_string(i) + ".pb")); ++i)
        inputs.push_back(io::read_onnx_tensor((set / ("input_" + std::to_string(i) + ".pb")).string()));
      if (inputs.empty() || !fs::exists(set / "output_0.pb")) {
        r.why = "no input_0 / output_0";
        return r;
      }
      expected = io::read_onnx_tensor((set / "output_0.pb").string());
    } catch (const io_error& e) {
      r.why = std::string("test data: ") + e.what();
      return r;
    }
    io::onnx_options opt;
    opt.extra_inputs.assign(inputs.begin() + 1, inputs.end());
    io::onnx_info info;
    DynamicNetwork net;
    try {
      net = io::import_onnx((dir / "model.onnx").string(), info, opt);
    } catch (const error& e) {
      r.why = e.what();
      return r;
    }
    r.loaded = true;
    const io::onnx_tensor& x = inputs[0];
    const shape in = net.input_shape();
    const std::size_t batch = info.batch_axis ? std::size_t(x.dims.empty() ? 0 : x.dims[0]) : 1;
    if (batch == 0 || batch * in.size() != x.size()) {
      r.loaded = false;
      r.why = "input_0 does not match the network's input shape " + in.str();
      return r;
    }
    xt::xarray<float> xa = xt::xarray<float>::from_shape(in.with_batch(batch));
    std::copy(x.values.begin(), x.values.end(), xa.begin());
    xt::xarray<float> y;
    try {
      y = forward(net, xa);
    } catch (const error& e) {
      r.why = std::string("forward failed: ") + e.what();
      return r;
    }
    if (y.size() != expected.size()) {
      r.why = detail::concat("output has ", y.size(), " values, expected ", expected.size());
      return r;
    }
    for (std::size_t i = 0; i < y.size(); ++i) {
      const double e = expected.values[i], g = double(y.data()[i]);
      if (!(std::abs(g - e) <= 1e-5 * (1.0 + std::abs(e)))) {
        r.why = detail::concat(set.filename().string(), ": output ", i, " is ", g, ", expected ", e);
        return r;
      }
    }
  }
  r.passed = true;
  return r;
}

}  // namespace

TEST_CASE("onnx conformance: libonnx-testdata node tests of the supported operators") {
  if (!fs::is_directory(node_dir)) NNLENS_SKIP("libonnx-testdata's node tests not found at ", node_dir.string());
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(node_dir))
    if (e.is_directory() && supported_test(e.path().filename().string())) dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  std::vector<outcome> res;
  for (const auto& d : dirs) res.push_back(run_test(d));

  std::ostringstream passed, skipped, failed;
  std::size_t np = 0, ns = 0, nf = 0;
  for (const auto& r : res) {
    if (r.passed) passed << " " << r.name, ++np;
    else if (!r.loaded) skipped << "\n  " << r.name << ": " << r.why, ++ns;
    else failed << "\n  " << r.name << ": " << r.why, ++nf;
  }
  MESSAGE("ONNX node tests passing (" << np << "):" << passed.str());
  MESSAGE("ONNX node tests skipped (" << ns << ", outside nnlens' model):" << skipped.str());
  if (nf) MESSAGE("ONNX node tests FAILING (" << nf << "):" << failed.str());
  CHECK(nf == 0);

  // The tests every supported operator must pass (a regression here is a bug, not a skip).
  const std::vector<std::string> must = {
      "test_gemm_default_no_bias", "test_gemm_alpha", "test_gemm_beta", "test_gemm_transposeB",
      "test_gemm_default_single_elem_vector_bias", "test_matmul_2d", "test_relu", "test_leakyrelu",
      "test_leakyrelu_default", "test_clip", "test_clip_default_min", "test_maxpool_2d_default",
      "test_maxpool_2d_pads", "test_maxpool_2d_strides", "test_maxpool_2d_ceil", "test_maxpool_2d_same_upper",
      "test_averagepool_2d_default", "test_averagepool_2d_pads", "test_averagepool_2d_pads_count_include_pad",
      "test_averagepool_2d_same_lower", "test_averagepool_2d_ceil", "test_globalaveragepool",
      "test_basic_conv_with_padding", "test_basic_conv_without_padding", "test_conv_with_strides_padding",
      "test_conv_with_strides_and_asymmetric_padding", "test_batchnorm_example", "test_batchnorm_epsilon",
      "test_flatten_axis1", "test_softmax_example", "test_dropout_default", "test_identity",
      "test_add_bcast", "test_sub_bcast", "test_mul_bcast", "test_div_bcast"};
  for (const auto& m : must) {
    auto it = std::find_if(res.begin(), res.end(), [&](const outcome& r) { return r.name == m; });
    if (it == res.end()) continue;  // not in this version of the test data
    INFO(m << ": " << it->why);
    CHECK(it->passed);
  }
  CHECK(np >= 40);
}
