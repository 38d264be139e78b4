// tools/nnlens/cli.cpp -- the options several `nnlens` subcommands share (cli.hpp).
#include "cli.hpp"

#include <cstdlib>

namespace nnlens::tool {

const enum_names<precision>& precision_names() {
  static const enum_names<precision> names{{"f32", precision::f32}, {"f64", precision::f64}};
  return names;
}

CLI::Option* add_model_arg(CLI::App& cmd, std::string& path, const std::string& name) {
  return cmd.add_option(name, path, "Model file: " + supported_model_formats())->required();
}

void add_model_options(CLI::App& cmd, model_args& m, precision fallback) {
  m.precision = fallback;
  add_enum(cmd, "--precision", m.precision, precision_names(),
           "Scalar type of the model and the analysis: f32 (float) or f64 (double; .nnet files keep their float64 weights)");
  static const enum_names<io::data_layout> layouts{{"nchw", io::data_layout::nchw}, {"nhwc", io::data_layout::nhwc}};
  add_enum(cmd, "--layout", m.layout, layouts,
           "Layout of the data files' rows: nchw or nhwc (default: what the model file declares, see `nnlens info`; flat "
           "for .nnet and undeclared inputs)",
           false);
}

CLI::Option* add_threads(CLI::App& cmd, std::size_t* n, const std::string& help) {
  return cmd
      .add_option_function<std::size_t>(
          "--threads",
          [n](std::size_t v) {
            if (n) *n = v;
            ::setenv("NNLENS_NUM_THREADS", std::to_string(v).c_str(), 1);
          },
          help)
      ->check(CLI::Range(1, 1024));
}

CLI::Option* add_no_progress(CLI::App& cmd, bool& progress) {
  return cmd.add_flag_callback("--no-progress", [&progress] { progress = false; }, "No progress bar on standard error");
}

void add_header_options(CLI::App& cmd, io::csv_header& header) {
  auto* h = cmd.add_flag_callback(
      "--header", [&header] { header = io::csv_header::present; },
      "The CSV files' first non-blank line is a header, whatever it holds (default: only when every value on it is a "
      "non-number, e.g. x0,x1,label)");
  auto* nh = cmd.add_flag_callback(
      "--no-header", [&header] { header = io::csv_header::absent; },
      "Every line of the CSV files is a sample: a non-number on the first line is an error");
  h->excludes(nh);
}

}  // namespace nnlens::tool
