// tools/nnlens/info_cmd.cpp -- `nnlens info` (see info_cmd.hpp).
#include "info_cmd.hpp"

#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include <nnlens/compress/quantize.hpp>
#include <nnlens/core/reflect.hpp>
#include <nnlens/io/codegen.hpp>
#include <nnlens/network/parameters.hpp>

#include "format.hpp"
#include "model.hpp"

namespace nnlens::tool {

namespace {
std::vector<std::size_t> dims(shape s) {
  std::vector<std::size_t> d;
  for (std::size_t i = 0; i < s.rank; ++i) d.push_back(s[i]);
  return d;
}
std::size_t layer_params(const DynamicNetwork::layer_type& v) {
  return std::visit(
      [](const auto& l) -> std::size_t {
        using L = std::decay_t<decltype(l)>;
        std::size_t n = 0;
        if constexpr (HasParameters<L>)
          for (auto s : layer_traits<L>::parameters(l)) n += s.size();
        return n;
      },
      v);
}
/// The layer's fields (core/reflect.hpp): scalars by value ("inf"/"-inf" as strings, which JSON
/// lacks), tensors by shape; the static C++ spelling (codegen's) carries the rest (geometries).
nlohmann::ordered_json layer_fields(const DynamicNetwork::layer_type& v) {
  nlohmann::ordered_json f = nlohmann::ordered_json::object();
  std::visit(
      [&](const auto& l) {
        for_each_field(l, [&](std::string_view name, const auto& m) {
          using M = std::remove_cvref_t<decltype(m)>;
          if constexpr (TensorField<M>) {
            std::vector<std::size_t> d(m.shape().begin(), m.shape().end());
            f[std::string(name)] = {{"shape", d}};
          } else if constexpr (std::is_arithmetic_v<M>) {
            const double x = static_cast<double>(m);
            if (std::isfinite(x))
              f[std::string(name)] = x;
            else
              f[std::string(name)] = x > 0 ? "inf" : x < 0 ? "-inf" : "nan";
          }
        });
      },
      v);
  return f;
}
std::string_view int8_form(const DynamicNetwork::layer_type& v) {
  return std::visit([](const auto& l) { return compress::int8_form_v<std::decay_t<decltype(l)>>; }, v);
}
std::string layer_spelling(const DynamicNetwork::layer_type& v) {
  codegen_context c("float");
  return codegen_layer_type(v, c);
}
}  // namespace

int run_info(const info_options& o) {
  const model<float> m = load_model<float>(o.model);
  const DynamicNetwork& net = m.net;
  std::size_t total = 0;
  if (o.json) {
    nlohmann::ordered_json j;  // keys in the documented order
    j["input_shape"] = m.in.declared_shape;  // per sample, as the file declares it
    j["input"] = m.in.describe();
    j["layout"] = io::layout_name(m.in.declared);
    j["network_input_shape"] = dims(net.input_shape());  // NCHW, as the layers' shapes
    j["output_shape"] = dims(net.output_shape());
    j["layers"] = nlohmann::ordered_json::array();
    for (std::size_t i = 0; i < net.size(); ++i) {
      const std::size_t p = layer_params(net.layer(i));
      total += p;
      nlohmann::ordered_json l;
      l["type"] = std::string(net.layer_name(i));
      l["output_shape"] = dims(net.shape_at(i + 1));
      l["params"] = p;
      l["cpp_type"] = layer_spelling(net.layer(i));
      l["fields"] = layer_fields(net.layer(i));
      l["int8"] = std::string(int8_form(net.layer(i)));
      j["layers"].push_back(std::move(l));
    }
    j["params"] = total;
    std::cout << j.dump() << "\n";
    return 0;
  }
  std::cout << o.model << "\n";
  std::cout << "  input " << m.in.describe();
  if (m.in.declared == io::data_layout::nhwc)
    std::cout << ": data rows in NHWC order (h, w, c); the network computes in NCHW " << net.input_shape().str();
  std::cout << "\n";
  std::printf("  %-5s %-14s %-14s %10s\n", "#", "layer", "output", "params");
  for (std::size_t i = 0; i < net.size(); ++i) {
    const std::size_t p = layer_params(net.layer(i));
    total += p;
    std::printf("  %-5zu %-14s %-14s %10zu\n", i, std::string(net.layer_name(i)).c_str(), net.shape_at(i + 1).str().c_str(), p);
  }
  std::cout << "  output " << net.output_shape().str() << ", " << total << " parameters\n";
  std::map<std::string, std::size_t> fl;  // the op types an int8 twin runs in float, with counts
  std::size_t nf = 0;
  for (std::size_t i = 0; i < net.size(); ++i)
    if (int8_form(net.layer(i)) == "float") ++fl[std::string(net.layer_name(i))], ++nf;
  if (nf) {
    std::cout << "  int8 twin (compress --int8): " << nf << " layers run in float between a dequantise and a requantise ("
              << counted_names(fl) << ")\n";
  }
  return 0;
}

/// `nnlens info MODEL [--json]`: the declared input, the layers, their output shapes and parameters.
void register_info(CLI::App& app, command_list& cmds) {
  auto [cmd, o] = add_command<info_options>(
      app, cmds, "info", "Print the layers, their output shapes and parameter counts",
      run_info);
  add_model_arg(cmd, o.model);
  cmd.add_flag("--json", o.json,
               "One JSON object: input_shape (per sample, as the file declares it), input (\"[N,32,32,3] (nhwc)\"), "
               "layout (nchw, nhwc or none), network_input_shape (NCHW), output_shape, "
               "layers[{type, output_shape, params, cpp_type, fields, int8: how an int8 twin runs it (int8 weights, "
               "codes, or float between a dequantise and a requantise)}], params");
}

}  // namespace nnlens::tool
