// tools/nnlens/codegen_cmd.cpp -- `nnlens codegen` (see codegen_cmd.hpp).
#include "codegen_cmd.hpp"

#include <filesystem>

#include <nnlens/io/codegen.hpp>
#include <nnlens/io/codegen_freestanding.hpp>

#include "model.hpp"

namespace nnlens::tool {

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
