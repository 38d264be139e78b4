// tools/nnlens/run_cmd.cpp -- `nnlens run` (see run_cmd.hpp).
#include "run_cmd.hpp"

#include <algorithm>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>

#include <nnlens/core/progress.hpp>
#include <nnlens/io/csv.hpp>
#include <nnlens/network/forward.hpp>

#include "model.hpp"

namespace nnlens::tool {

template <class T>
int run_as(const run_options& o) {
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

/// `nnlens run MODEL --input FILE.csv [--output FILE.csv]`: the outputs, one CSV line per sample.
void register_run(CLI::App& app, command_list& cmds) {
  auto [cmd, o] = add_analysis<run_options>(
      app, cmds, "run", "Run a model on CSV samples; one CSV output line per sample");
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

}  // namespace nnlens::tool
