// tools/nnlens/compress_cmd.cpp -- `nnlens compress` (see compress_cmd.hpp).
#include "compress_cmd.hpp"

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include <nnlens/compress/magnitude.hpp>
#include <nnlens/compress/quantize.hpp>
#include <nnlens/core/error.hpp>
#include <nnlens/train/fit.hpp>

#include "format.hpp"
#include "maintenance_common.hpp"
#include "model.hpp"

namespace nnlens::tool {

namespace {
using json = nlohmann::ordered_json;
}  // namespace

template <class T>
int run_as(const compress_cmd_options& o) {
  const int asked = int(o.int8) + int(o.q8) + int(o.prune >= 0) + int(o.channel_prune >= 0);
  if (asked != 1) throw value_error("compress: give exactly one of --int8, --q8, --prune R, --channel-prune R");
  if (o.prune >= 0 && !(o.prune <= 1)) throw value_error(concat("--prune ", o.prune, ": expected a ratio in [0, 1]"));
  if (o.channel_prune >= 0 && !(o.channel_prune <= 1))
    throw value_error(concat("--channel-prune ", o.channel_prune, ": expected a ratio in [0, 1]"));
  if (o.int8 && o.calibration.empty()) throw value_error("--int8: --calibration FILE is required (the activation ranges)");

  const model<T> m = open_model<T>(o.model, o.layout);
  const basic_dynamic_network<T>& net = m.net;
  const std::size_t classes = net.output_shape().size();
  xt::xarray<T> cal;
  if (!o.calibration.empty()) {
    cal = read_samples<T>(o.calibration, m.in);
    if (cal.shape()[0] == 0) throw data_error(o.calibration + ": no samples");
  }

  basic_dynamic_network<T> twin = net;
  using Q = compress::quantized_network<basic_dynamic_network<T>>;
  std::shared_ptr<const Q> q;
  std::string what;
  json j;
  if (o.int8 || o.q8) {
    compress::quantize_options qo = o.q8 ? compress::quantize_options::dflare_reference() : compress::quantize_options{};
    if (o.per_tensor) qo.granularity = compress::quant_granularity::per_tensor;
    q = std::make_shared<const Q>(o.q8 ? compress::quantize_weights(net, qo) : compress::quantize(net, cal, qo));
    twin = q->dequantized();
    what = o.q8 ? "q8 (weight-only int8, tensors >= 1024 elements)" : "int8";
    j["quantized_layers"] = q->quantized_layers();
    if (o.int8) {  // the ops without an int8 rule: float between a dequantise and a requantise
      json f = json::array();
      for (std::size_t i : q->float_layers()) f.push_back({{"layer", i}, {"op", q->layer(i).name}});
      j["float_ops"] = f;
    }
  } else if (o.prune >= 0) {
    twin = compress::magnitude_prune(net, o.prune);
    what = concat("magnitude pruning ", o.prune);
  } else {
    twin = compress::channel_prune(net, o.channel_prune);
    what = concat("channel pruning ", o.channel_prune);
  }
  j["model"] = o.model;
  j["precision"] = precision_name(o.precision);
  j["twin"] = what;
  j["output"] = o.output;
  j["weight_sparsity"] = compress::weight_sparsity(twin);
  std::string note;
  if (o.int8)
    note = "the file holds the dequantised weights (weight-only twin); int8 activations exist only in memory "
           "(nnlens difftest MODEL int8 tests the full int8 twin)";
  if (const std::string n = maint::onnx_narrowing_note<T>(o.output); !n.empty()) note += (note.empty() ? "" : "; ") + n;
  if (!note.empty()) j["note"] = note;
  if (!o.calibration.empty()) {
    const std::string lp = o.labels.empty() ? companion_labels(o.calibration) : o.labels;
    if (!lp.empty()) {
      const auto y = read_labels(lp, cal.shape()[0], classes);
      auto accuracy = [&](auto&& classify) {
        std::size_t ok = 0;
        const auto l = classify(cal);
        for (std::size_t i = 0; i < y.size(); ++i) ok += l[i] == y[i];
        return 100.0 * double(ok) / double(y.size());
      };
      j["accuracy"] = 100.0 * train::evaluate(execution::par, net, cal, y).accuracy;
      j["twin_accuracy"] = q ? accuracy([&](const auto& x) { return q->classify(x); })
                             : 100.0 * train::evaluate(execution::par, twin, cal, y).accuracy;
    }
  }
  {
    const auto dir = std::filesystem::path(o.output).parent_path();
    std::error_code ec;
    if (!dir.empty()) std::filesystem::create_directories(dir, ec);
    if (ec) throw io_error(o.output + ": cannot create its directory (" + ec.message() + ")");
  }
  maint::write_model(o.output, o.model, twin, "nnlens compress: " + what);
  if (o.json) {
    std::cout << j.dump(2) << "\n";
  } else {
    std::printf("%s: %s (%s) -> %s; weight sparsity %.2f%%", o.model.c_str(), what.c_str(), precision_name(o.precision), o.output.c_str(),
                100 * double(j["weight_sparsity"]));
    if (j.contains("quantized_layers")) std::printf(", %zu int8 weight tensors", std::size_t(j["quantized_layers"]));
    if (j.contains("float_ops") && !j["float_ops"].empty()) {
      std::map<std::string, std::size_t> ops;  // how many layers of each op type run in float
      for (const auto& f : j["float_ops"]) ++ops[f["op"].get<std::string>()];
      std::printf("; %zu layers run in float between a dequantise and a requantise (%s)", j["float_ops"].size(),
                  counted_names(ops).c_str());
    }
    if (j.contains("accuracy"))
      std::printf("; accuracy %.2f%% -> %.2f%%", double(j["accuracy"]), double(j["twin_accuracy"]));
    std::printf("\n");
    if (!note.empty()) std::printf("note: %s\n", note.c_str());
  }
  return 0;
}

/// `nnlens compress MODEL (--int8 | --q8 | --prune R | --channel-prune R) -o OUT`: a twin.
void register_compress(CLI::App& app, command_list& cmds) {
  auto [cmd, o] = add_analysis<compress_cmd_options>(
      app, cmds, "compress", "A compressed twin of a model: int8 / q8 quantisation or magnitude / channel pruning");
  cmd.add_flag("--int8", o.int8,
               "Full int8 quantisation (per-channel weights, calibrated activations; needs --calibration)");
  cmd.add_flag("--q8", o.q8, "DFlare's reference rule: weight-only int8 of weight tensors with >= 1024 elements");
  cmd.add_option("--prune", o.prune, "Magnitude pruning: this fraction of each layer's weights becomes 0");
  cmd.add_option("--channel-prune", o.channel_prune,
                 "This fraction of each layer's channels (smallest L1 norm) becomes 0");
  cmd.add_flag("--per-tensor", o.per_tensor, "int8: one weight scale per tensor instead of per output channel");
  cmd.add_option("--calibration", o.calibration,
                 "Samples: int8's activation ranges; with labels, the accuracy of both models");
  cmd.add_option("--labels", o.labels, "Labels of --calibration (default: the IDX labels file beside it)");
  cmd.add_option("--output,-o", o.output, "The twin: .onnx, or .nnlw for the demo's LeNet-5")->required();
  add_model_options(cmd, o, precision::f32);
  cmd.get_option("--precision")
      ->description("Scalar type of MODEL and the twin: f32 or f64.  An int8 twin's quantised layers are int8 with "
                    "float32 scales at either precision; an .onnx twin is written with float32 weights (the report "
                    "says so at f64)");
  cmd.add_flag("--json", o.json,
               "One JSON object: model, twin, output, weight_sparsity, [quantized_layers, accuracy, twin_accuracy]");
}

}  // namespace nnlens::tool
