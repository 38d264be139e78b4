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
// The per-layer rules are `codegen_rule<L>` specialisations below, one per run-time layer form
// (the alternatives of DynamicNetwork's variant); a static network is converted with to_dynamic.
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

#include "nnlens/core/error.hpp"
#include "nnlens/network/dynamic_network.hpp"

namespace nnlens::io {

struct codegen_options {
  std::string name = "model";  // the type alias; also make_<name>() and <name>_weights
  std::string ns;              // enclosing namespace ("" = global; "a::b" allowed)
  std::string source;          // mentioned in the header comment (e.g. the model file)
};

/// State of one generation: the weight arrays and fill statements emitted so far.
class codegen_context {
 public:
  explicit codegen_context(std::string scalar) : scalar_(std::move(scalar)) {}

  const std::string& scalar() const { return scalar_; }
  /// ", double" when the scalar is not float (appended to template argument lists), else "".
  std::string scalar_arg() const { return scalar_ == "float" ? "" : ", " + scalar_; }
  /// Where errors point ("layer 3 (Dense)").
  std::string where;

  /// Emits `static constexpr T <id>[] = {...}` and `<lvalue> = <tensor of that shape>`.
  template <class E>
  void tensor(const std::string& lvalue, const E& t, std::string_view what) {
    using V = std::decay_t<decltype(*t.data())>;
    const std::string id = "p" + std::to_string(arrays_++);
    std::ostringstream a;
    a << "  static constexpr " << scalar_ << " " << id << "[" << std::max<std::size_t>(t.size(), 1) << "] = {";
    for (std::size_t i = 0; i < t.size(); ++i) {
      const V v = t.data()[i];
      if (!std::isfinite(v)) throw value_error(where + ": " + std::string(what) + " element " + std::to_string(i) + " is not finite");
      a << (i % 8 == 0 ? "\n    " : " ") << literal(v) << ",";
    }
    a << "};  // " << what << "\n";
    arrays += a.str();
    std::string shape = "std::array<std::size_t, " + std::to_string(t.dimension()) + ">{";
    for (std::size_t d = 0; d < t.dimension(); ++d) shape += (d ? ", " : "") + std::to_string(t.shape()[d]);
    shape += "}";
    fills += "  fill_tensor(" + lvalue + ", " + shape + ", W::" + id + ");\n";
  }
  /// Emits `<lvalue> = <v>;` for a double hyper-parameter (infinities allowed).
  void value(const std::string& lvalue, double v) {
    std::string s;
    if (std::isnan(v)) throw value_error(where + ": NaN hyper-parameter " + lvalue);
    if (std::isinf(v))
      s = std::string(v < 0 ? "-" : "") + "std::numeric_limits<double>::infinity()";
    else
      s = literal(v);
    fills += "  " + lvalue + " = " + s + ";\n";
  }

  /// A hex-float literal of v (with an f suffix for float).
  template <class V>
  static std::string literal(V v) {
    char buf[64];
    auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::hex);
    std::string s(buf, r.ptr);
    const bool neg = !s.empty() && s[0] == '-';
    if (neg) s.erase(0, 1);
    s = (neg ? "-0x" : "0x") + s;
    if constexpr (std::is_same_v<V, float>) s += "f";
    return s;
  }

  std::string arrays;  // members of NAME_weights
  std::string fills;   // statements of make_NAME()

 private:
  std::string scalar_;
  std::size_t arrays_ = 0;
};

/// The per-layer emission rule (specialised below for every run-time layer form).
template <class L>
struct codegen_rule;

template <class L>
concept CodegenLayer = requires(const L& l, codegen_context& c, const std::string& s) {
  { codegen_rule<L>::type(l, c) } -> std::convertible_to<std::string>;
  codegen_rule<L>::fill(l, c, s);
};

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
inline std::string geometry_list(std::initializer_list<std::size_t> v) {
  std::string s;
  for (std::size_t x : v) s += (s.empty() ? "" : ", ") + std::to_string(x);
  return s;
}
/// Template arguments with trailing ones equal to their defaults dropped (defaults[i] belongs to v[i]).
inline std::string short_list(std::vector<std::size_t> v, const std::vector<std::size_t>& defaults) {
  while (!v.empty() && v.size() <= defaults.size() && v.back() == defaults[v.size() - 1]) v.pop_back();
  std::string s;
  for (std::size_t x : v) s += (s.empty() ? "" : ", ") + std::to_string(x);
  return s;
}
/// Parameter-free layers: the spelling is the name, nothing to fill.
template <class L>
struct codegen_plain {
  static std::string type(const L&, codegen_context&) { return "nnlens::" + std::string(layer_traits<L>::name); }
  static void fill(const L&, codegen_context&, const std::string&) {}
};
}  // namespace detail

template <class T>
struct codegen_rule<Dense<dyn, T>> {
  static std::string type(const Dense<dyn, T>& l, codegen_context& c) {
    return "nnlens::Dense<" + std::to_string(l.W.shape()[1]) + c.scalar_arg() + ">";
  }
  static void fill(const Dense<dyn, T>& l, codegen_context& c, const std::string& lv) {
    c.tensor(lv + ".W", l.W, "W");
    c.tensor(lv + ".b", l.b, "b");
  }
};

template <class T>
struct codegen_rule<Conv2DG<dyn, conv_geometry_dyn, T>> {
  static std::string type(const Conv2DG<dyn, conv_geometry_dyn, T>& l, codegen_context& c) {
    const conv_geometry& g = l.geometry;
    const std::string out = std::to_string(l.W.shape()[0]);
    const bool square = g.kh == g.kw && g.stride_h == g.stride_w && g.dilation_h == g.dilation_w &&
                        g.pad_top == g.pad_left && g.pad_top == g.pad_bottom && g.pad_top == g.pad_right;
    if (square)
      return "nnlens::Conv2D<" + out + ", " +
             (c.scalar() == "float"  // T follows Groups: keep every argument when T is spelled
                  ? detail::short_list({g.kh, g.stride_h, g.pad_top, g.dilation_h, g.groups}, {dyn, 1, 0, 1, 1})
                  : detail::geometry_list({g.kh, g.stride_h, g.pad_top, g.dilation_h, g.groups})) +
             c.scalar_arg() + ">";
    return "nnlens::Conv2DG<" + out + ", nnlens::conv_geometry{" +
           detail::geometry_list({g.kh, g.kw, g.stride_h, g.stride_w, g.pad_top, g.pad_left, g.pad_bottom, g.pad_right,
                                  g.dilation_h, g.dilation_w, g.groups}) +
           "}" + c.scalar_arg() + ">";
  }
  static void fill(const Conv2DG<dyn, conv_geometry_dyn, T>& l, codegen_context& c, const std::string& lv) {
    c.tensor(lv + ".W", l.W, "W");
    c.tensor(lv + ".b", l.b, "b");
  }
};

namespace detail {
/// "K, Stride, Pad" when the pool geometry has the square/symmetric form, else "".
inline std::string pool_square(const pool_geometry& g) {
  const bool square = g.kh == g.kw && g.stride_h == g.stride_w && g.pad_top == g.pad_left && g.pad_top == g.pad_bottom &&
                      g.pad_top == g.pad_right && !g.ceil_mode;
  return square ? short_list({g.kh, g.stride_h, g.pad_top}, {dyn, g.kh, 0}) : std::string{};
}
inline std::string pool_full(const pool_geometry& g) {
  return "nnlens::pool_geometry{" +
         geometry_list({g.kh, g.kw, g.stride_h, g.stride_w, g.pad_top, g.pad_left, g.pad_bottom, g.pad_right}) + ", " +
         (g.ceil_mode ? "true" : "false") + ", " + (g.count_include_pad ? "true" : "false") + "}";
}
}  // namespace detail

template <>
struct codegen_rule<MaxPool2D<dyn>> {
  static std::string type(const MaxPool2D<dyn>& l, codegen_context&) {
    const std::string sq = detail::pool_square(l.geometry);
    return sq.empty() ? "nnlens::MaxPool2DG<" + detail::pool_full(l.geometry) + ">" : "nnlens::MaxPool2D<" + sq + ">";
  }
  static void fill(const MaxPool2D<dyn>&, codegen_context&, const std::string&) {}
};

template <>
struct codegen_rule<AvgPool2D<dyn>> {
  static std::string type(const AvgPool2D<dyn>& l, codegen_context&) {
    const std::string sq = detail::pool_square(l.geometry);
    if (sq.empty()) return "nnlens::AvgPool2DG<" + detail::pool_full(l.geometry) + ">";
    if (l.geometry.count_include_pad) return "nnlens::AvgPool2D<" + sq + ">";
    const pool_geometry& g = l.geometry;
    return "nnlens::AvgPool2D<" + detail::geometry_list({g.kh, g.stride_h, g.pad_top}) + ", false>";
  }
  static void fill(const AvgPool2D<dyn>&, codegen_context&, const std::string&) {}
};

template <>
struct codegen_rule<ReLU> : detail::codegen_plain<ReLU> {};
template <>
struct codegen_rule<Flatten> : detail::codegen_plain<Flatten> {};
template <>
struct codegen_rule<GlobalAvgPool> : detail::codegen_plain<GlobalAvgPool> {};
template <>
struct codegen_rule<Softmax> : detail::codegen_plain<Softmax> {};
template <>
struct codegen_rule<Identity> : detail::codegen_plain<Identity> {};

template <>
struct codegen_rule<LeakyReLU> : detail::codegen_plain<LeakyReLU> {
  static void fill(const LeakyReLU& l, codegen_context& c, const std::string& lv) { c.value(lv + ".alpha", l.alpha); }
};
template <>
struct codegen_rule<Dropout> : detail::codegen_plain<Dropout> {
  static void fill(const Dropout& l, codegen_context& c, const std::string& lv) { c.value(lv + ".p", l.p); }
};
template <>
struct codegen_rule<HardTanh> : detail::codegen_plain<HardTanh> {
  static void fill(const HardTanh& l, codegen_context& c, const std::string& lv) {
    c.value(lv + ".lo", l.lo);
    c.value(lv + ".hi", l.hi);
  }
};
template <>
struct codegen_rule<Clamp> : detail::codegen_plain<Clamp> {
  static void fill(const Clamp& l, codegen_context& c, const std::string& lv) {
    c.value(lv + ".lo", l.lo);
    c.value(lv + ".hi", l.hi);
  }
};

template <class T>
struct codegen_rule<BatchNorm<dyn, T>> {
  static std::string type(const BatchNorm<dyn, T>& l, codegen_context& c) {
    return "nnlens::BatchNorm<" + std::to_string(l.gamma.size()) + c.scalar_arg() + ">";
  }
  static void fill(const BatchNorm<dyn, T>& l, codegen_context& c, const std::string& lv) {
    c.tensor(lv + ".gamma", l.gamma, "gamma");
    c.tensor(lv + ".beta", l.beta, "beta");
    c.tensor(lv + ".running_mean", l.running_mean, "running_mean");
    c.tensor(lv + ".running_var", l.running_var, "running_var");
    c.value(lv + ".eps", l.eps);
  }
};

template <class T>
struct codegen_rule<Affine<dyn, T>> {
  static std::string type(const Affine<dyn, T>& l, codegen_context& c) {
    return "nnlens::Affine<" + std::to_string(l.s.size()) + c.scalar_arg() + ">";
  }
  static void fill(const Affine<dyn, T>& l, codegen_context& c, const std::string& lv) {
    c.tensor(lv + ".s", l.s, "s");
    c.tensor(lv + ".t", l.t, "t");
  }
};

namespace detail {
template <class V>
std::string codegen_variant_type(const V& v, codegen_context& c) {
  return std::visit(
      [&](const auto& l) -> std::string {
        using L = std::decay_t<decltype(l)>;
        static_assert(CodegenLayer<L>, "codegen: every run-time layer form needs a codegen_rule specialisation");
        return codegen_rule<L>::type(l, c);
      },
      v);
}
template <class V>
void codegen_variant_fill(const V& v, codegen_context& c, const std::string& lv) {
  std::visit([&](const auto& l) { codegen_rule<std::decay_t<decltype(l)>>::fill(l, c, lv); }, v);
}
template <class T>
std::string codegen_block_type(const DynamicBlock<T>& b, codegen_context& c) {
  std::string s = "nnlens::Block<";
  for (std::size_t i = 0; i < b.layers.size(); ++i) s += (i ? ", " : "") + codegen_variant_type(b.layers[i], c);
  return s + ">";
}
}  // namespace detail

template <class T>
struct codegen_rule<DynamicResidual<T>> {
  static std::string type(const DynamicResidual<T>& l, codegen_context& c) {
    std::string s = "nnlens::Residual<" + detail::codegen_block_type(l.block, c);
    if (!l.shortcut.layers.empty()) s += ", " + detail::codegen_block_type(l.shortcut, c);
    return s + ">";
  }
  static void fill(const DynamicResidual<T>& l, codegen_context& c, const std::string& lv) {
    const std::string where = c.where;
    auto branch = [&](const DynamicBlock<T>& b, const char* name) {
      for (std::size_t i = 0; i < b.layers.size(); ++i) {
        c.where = where + " " + name + " layer " + std::to_string(i);
        detail::codegen_variant_fill(b.layers[i], c, "std::get<" + std::to_string(i) + ">(" + lv + "." + name + ".layers)");
      }
    };
    branch(l.block, "block");
    branch(l.shortcut, "shortcut");
    c.where = where;
  }
};

namespace detail {
inline bool is_identifier(std::string_view s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char ch : s)
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '_')) return false;
  return true;
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
  if (!detail::is_identifier(o.name)) throw value_error("codegen: the name '" + o.name + "' is not a C++ identifier");
  if (!o.ns.empty()) {
    std::string_view rest = o.ns;
    for (;;) {
      const auto p = rest.find("::");
      if (!detail::is_identifier(rest.substr(0, p)))
        throw value_error("codegen: the namespace '" + o.ns + "' is not a C++ namespace name");
      if (p == std::string_view::npos) break;
      rest.remove_prefix(p + 2);
    }
  }
  if (net.input_shape().rank == 0) throw value_error("codegen: the network has no input shape");
  {
    basic_dynamic_network<T> checked = net;  // the weights must fit the shapes (shape_error otherwise)
    checked.validate();
  }
  codegen_context c(detail::scalar_name<T>());
  std::string type = "nnlens::Sequential<nnlens::Input<" + detail::shape_args(net.input_shape()) + ">";
  for (std::size_t i = 0; i < net.size(); ++i) {
    c.where = "codegen: layer " + std::to_string(i) + " (" + std::string(net.layer_name(i)) + ")";
    type += ",\n    " + detail::codegen_variant_type(net.layer(i), c);
    detail::codegen_variant_fill(net.layer(i), c, "std::get<" + std::to_string(i) + ">(net.layers)");
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
  const std::string text = generate_header(net, o);
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw io_error(path.string() + ": cannot open for writing");
  f << text;
  f.close();
  if (!f) throw io_error(path.string() + ": write error");
}

}  // namespace nnlens::io
