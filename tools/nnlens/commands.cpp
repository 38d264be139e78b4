// tools/nnlens/commands.cpp -- `nnlens info`, `nnlens run`, `nnlens codegen` (see commands.hpp).
#include "commands.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <variant>

#include <nlohmann/json.hpp>

#include <nnlens/core/progress.hpp>
#include <nnlens/core/reflect.hpp>
#include <nnlens/io/codegen.hpp>
#include <nnlens/io/codegen_freestanding.hpp>
#include <nnlens/io/csv.hpp>
#include <nnlens/network/forward.hpp>
#include <nnlens/network/parameters.hpp>

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
  return 0;
}

namespace {
template <class T>
int run_run_as(const run_options& o) {
  const model<T> m = load_model<T>(o.model, o.layout);
  const auto& net = m.net;
  const xt::xarray<T> x = read_samples<T>(o.input, m.in, nullptr, o.header);  // [rows, input shape...] (NCHW inside)
  const std::size_t rows = x.shape()[0];
  const std::size_t in = net.input_shape().size();
  std::ofstream file;
  if (!o.output.empty()) {
    file.open(o.output, std::ios::trunc);
    if (!file) throw io_error(o.output + ": cannot open for writing");
  }
  std::ostream& os = o.output.empty() ? std::cout : file;
  const std::size_t batch = std::max<std::size_t>(o.batch, 1);
  std::optional<progress_bar> bar;  // on stderr, for more than one batch
  if (o.progress && rows > batch) bar.emplace("run", rows);
  for (std::size_t r0 = 0; r0 < rows; r0 += batch) {
    const std::size_t b = std::min(batch, rows - r0);
    const auto xb = xt::adapt(x.data() + r0 * in, b * in, xt::no_ownership(), net.input_shape().with_batch(b));
    xt::xarray<T> y;
    try {
      y = forward(execution::par, net, xb);
    } catch (const value_error& e) {
      throw value_error(o.input + ": samples " + std::to_string(r0 + 1) + "-" + std::to_string(r0 + b) + ": " + e.what());
    }
    io::write_csv(os, y);
    if (bar) bar->update(r0 + b);
  }
  if (bar) bar->finish();
  os.flush();
  if (!os) throw io_error((o.output.empty() ? std::string("stdout") : o.output) + ": write error");
  return 0;
}
}  // namespace

int run_codegen(const codegen_cmd_options& o) {
  return with_precision(o.precision, [&]<class T>() {
    const model<T> m = load_model<T>(o.model);
    io::codegen_options c;
    c.name = o.name;
    c.ns = o.ns;
    c.source = std::filesystem::path(o.model).filename().string();
    if (m.in.declared == io::data_layout::nhwc)
      c.source += " (input declared " + m.in.describe() + "; the generated network takes NCHW: io::to_nchw)";
    if (o.freestanding)
      io::write_freestanding_header(o.output, m.net, c);
    else
      io::write_header(o.output, m.net, c);
    return 0;
  });
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
               "layers[{type, output_shape, params}], params");
}

/// `nnlens run MODEL --input FILE.csv [--output FILE.csv]`: the outputs, one CSV line per sample.
void register_run(CLI::App& app, command_list& cmds) {
  auto [cmd, o] = add_analysis<run_options>(
      app, cmds, "run", "Run a model on CSV samples; one CSV output line per sample",
      []<class T>(const run_options& opts) { return run_run_as<T>(opts); });
  cmd.add_option("--input,-i", o.input,
                 "CSV file: one sample per line, flattened row-major in the model's declared layout (NHWC for "
                 "an [N,H,W,C] input, see `nnlens info`; --layout overrides)")
      ->required();
  cmd.add_option("--output,-o", o.output, "CSV file for the outputs (default: standard output)");
  cmd.add_option("--batch", o.batch, "Samples per forward pass")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  add_no_progress(cmd, o.progress);
  add_model_options(cmd, o, precision::f32);
  add_header_options(cmd, o.header);
}

/// `nnlens codegen MODEL -o FILE.hpp [--freestanding]`: a C++ header with the static network.
void register_codegen(CLI::App& app, command_list& cmds) {
  auto [cmd, o] = add_command<codegen_cmd_options>(
      app, cmds, "codegen", "Write a C++ header with the static network type and its weights",
      run_codegen);
  add_model_arg(cmd, o.model);
  cmd.add_option("--output,-o", o.output, "The header to write")->required();
  cmd.add_option("--name", o.name, "Type alias (make_NAME() returns the network)")->capture_default_str();
  cmd.add_option("--namespace", o.ns, "Enclosing namespace, e.g. fw::models (default: none)");
  add_enum(cmd, "--precision", o.precision, precision_names(),
           "Scalar type of the generated network: f32 (float) or f64 (double)");
  cmd.add_flag("--freestanding", o.freestanding,
               "For a microcontroller: the weights as constant data (flash), a forward(x, y) that allocates nothing "
               "and throws nothing, returning a status; needs only <nnlens/kernels/freestanding.hpp> (docs/edge.md)");
}

}  // namespace nnlens::tool
