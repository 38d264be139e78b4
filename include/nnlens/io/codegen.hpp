// nnlens/io/codegen.hpp -- code generation: a network as a self-contained C++ header.
//
//   std::string h = io::generate_header(net, {.name = "acas", .ns = "fw"});
//   io::write_header("acas.hpp", net, opts);
//
// The header holds
//   - `using NAME = nnlens::Sequential<nnlens::Input<...>, ...>;`  the exact static spelling of every
//     layer (Dense<5>, Conv2D<6,5,1,2> or Conv2DG<6, nnlens::conv_geometry{...}>, MaxPool2D<2>,
//     BatchNorm<16>, Residual<Block<...>, Block<...>>, ...),
//   - `struct NAME_weights` with every tensor as a `static constexpr float` (or double) array of
//     hex-float literals (the bits round-trip exactly),
//   - `inline NAME make_NAME()` returning the filled network (run-time hyper-parameters such as
//     LeakyReLU's alpha or BatchNorm's eps set too),
// so a firmware build needs no file I/O and no ONNX dependency: only <nnlens/nnlens.hpp>.
// The per-layer rules are `codegen_rule<L>` specialisations in each op's own header (the interface
// is core/codegen_form.hpp), one per run-time layer form (the alternatives of DynamicNetwork's
// variant); a static network is converted with to_dynamic.
//   codegen_rule<L>::type(const L&, codegen_context&)          -> the static spelling
//   codegen_rule<L>::fill(const L&, codegen_context&, lvalue)  emits the statements that fill it
// requires: name a C++ identifier, ns empty or identifiers joined by "::"; finite parameters.
// ensures:  make_NAME() gives a network whose forward is bitwise that of the source network.
// throws:   value_error (bad name, non-finite parameter, naming the layer); shape_error (weights
//           that do not fit the network, from validate()); io_error (write).
#pragma once

#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "nnlens/core/codegen_form.hpp"
#include "nnlens/core/error.hpp"
#include "nnlens/network/dynamic_network.hpp"

namespace nnlens::io {

struct codegen_options {
  std::string name = "model";  // the type alias; also make_<name>() and <name>_weights
  std::string ns;              // enclosing namespace ("" = global; "a::b" allowed)
  std::string source;          // mentioned in the header comment (e.g. the model file)
};

// The context and the rule's primary template are in core/codegen_form.hpp; every op's rule is in
// its own header.
using nnlens::codegen_context;
using nnlens::codegen_rule;
using nnlens::CodegenLayer;

namespace detail {
template <class T>
std::string scalar_name() {
  if constexpr (std::is_same_v<T, float>)
    return "float";
  else if constexpr (std::is_same_v<T, double>)
    return "double";
  else
    static_assert(std::is_same_v<T, float>, "codegen: the scalar type must be float or double");
}
}  // namespace detail

namespace detail {
inline bool is_identifier(std::string_view s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char ch : s)
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '_')) return false;
  return true;
}
/// Throws value_error unless o.name is an identifier and o.ns empty or identifiers joined by "::".
inline void check_codegen_names(const codegen_options& o) {
  if (!is_identifier(o.name)) throw value_error("codegen: the name '" + o.name + "' is not a C++ identifier");
  if (o.ns.empty()) return;
  std::string_view rest = o.ns;
  for (;;) {
    const auto p = rest.find("::");
    if (!is_identifier(rest.substr(0, p))) throw value_error("codegen: the namespace '" + o.ns + "' is not a C++ namespace name");
    if (p == std::string_view::npos) break;
    rest.remove_prefix(p + 2);
  }
}
/// The checks of both generators: the names (above), an input shape, weights that fit the shapes
/// (shape_error from validate() otherwise).  who: "codegen" or "codegen --freestanding".
template <class T>
void check_codegen_input(const basic_dynamic_network<T>& net, const codegen_options& o, const char* who) {
  check_codegen_names(o);
  if (net.input_shape().rank == 0) throw value_error(std::string(who) + ": the network has no input shape");
  basic_dynamic_network<T> checked = net;
  checked.validate();
}
/// Writes text to path (throws io_error if it cannot).
inline void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw io_error(path.string() + ": cannot open for writing");
  f << text;
  f.close();
  if (!f) throw io_error(path.string() + ": write error");
}
inline std::string shape_args(shape s) {
  std::string r;
  for (std::size_t i = 0; i < s.rank; ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r;
}
}  // namespace detail

/// The header text for `net` (see the file comment).
template <class T>
std::string generate_header(const basic_dynamic_network<T>& net, const codegen_options& o = {}) {
  detail::check_codegen_input(net, o, "codegen");
  codegen_context c(detail::scalar_name<T>());
  std::string type = "nnlens::Sequential<nnlens::Input<" + detail::shape_args(net.input_shape()) + ">";
  for (std::size_t i = 0; i < net.size(); ++i) {
    c.where = "codegen: layer " + std::to_string(i) + " (" + std::string(net.layer_name(i)) + ")";
    type += ",\n    " + nnlens::detail::codegen_variant_type(net.layer(i), c);
    nnlens::detail::codegen_variant_fill(net.layer(i), c, "std::get<" + std::to_string(i) + ">(net.layers)");
  }
  type += ">";
  const std::string& n = o.name;
  std::ostringstream h;
  h << "// " << n << ".hpp -- generated by nnlens codegen" << (o.source.empty() ? "" : " from " + o.source)
    << "; do not edit.\n"
    << "// Input " << net.input_shape().str() << ", output " << net.output_shape().str() << ", " << net.size()
    << " layers.  Needs only the nnlens headers (no file I/O, no ONNX).\n"
    << "#pragma once\n\n#include <array>\n#include <cstddef>\n#include <limits>\n#include <tuple>\n\n"
    << "#include <nnlens/nnlens.hpp>\n\n";
  if (!o.ns.empty()) h << "namespace " << o.ns << " {\n\n";
  h << "using " << n << " = " << type << ";\n\n";
  h << "/// Every tensor of " << n << ", in layer order (hex-float literals: exact).\n";
  h << "struct " << n << "_weights {\n" << c.arrays << "};\n\n";
  h << "namespace " << n << "_detail {\n"
    << "template <class Tensor, std::size_t R>\n"
    << "inline void fill_tensor(Tensor& t, const std::array<std::size_t, R>& shape, const " << c.scalar() << "* src) {\n"
    << "  t = Tensor::from_shape(shape);\n"
    << "  for (std::size_t i = 0; i < t.size(); ++i) t.data()[i] = src[i];\n"
    << "}\n}  // namespace " << n << "_detail\n\n";
  h << "/// The network with its weights.\n"
    << "inline " << n << " make_" << n << "() {\n"
    << "  using W = " << n << "_weights;\n"
    << "  using " << n << "_detail::fill_tensor;\n"
    << "  " << n << " net;\n"
    << c.fills << "  return net;\n}\n";
  if (!o.ns.empty()) h << "\n}  // namespace " << o.ns << "\n";
  return h.str();
}

/// A static network: generated from its run-time form.
template <class In, class... Ls>
std::string generate_header(const Sequential<In, Ls...>& net, const codegen_options& o = {}) {
  return generate_header(to_dynamic(net), o);
}

/// Writes generate_header(net, o) to path (throws io_error if it cannot).
template <class Net>
void write_header(const std::filesystem::path& path, const Net& net, const codegen_options& o = {}) {
  detail::write_text(path, generate_header(net, o));
}

}  // namespace nnlens::io
