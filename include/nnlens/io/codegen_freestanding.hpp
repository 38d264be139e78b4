// nnlens/io/codegen_freestanding.hpp -- a network as a freestanding C++ header for a
// microcontroller: weights in flash, no heap, no exceptions (`nnlens codegen MODEL --freestanding`).
//
//   std::string h = io::generate_freestanding_header(net, {.name = "acas", .ns = "fw"});
//   io::write_freestanding_header("acas.hpp", net, opts);
//
// The header needs only <nnlens/kernels/freestanding.hpp> (no xtensor, no I/O) and holds
//   - `namespace NAME_weights { inline constexpr T pK[] = {...}; }`  every tensor, as hex-float
//     literals: constant data, so the linker puts it in .rodata (flash) and nothing copies it;
//   - `struct NAME` with input_size, output_size, the shapes, work_size (the elements of the
//     work area: two buffers of the largest activation), and
//       static nnlens::fw::status forward(const T* x, T* y, T* work);  the caller's work area
//       static nnlens::fw::status forward(const T* x, T* y);           a static one (.bss)
//     returning status::ok, null_argument or non_finite_input (the input is checked first).
// What each layer runs is derived from its properties (core/properties.hpp), never its name:
//   reshape_only                        nothing (the buffer is passed on)
//   WeightLayer with a window geometry  fw::conv2d (W [O, C/groups, kh, kw])
//   WeightLayer, W of rank 2            fw::dense (W [I, O])
//   PoolingWindow (max or mean)         fw::pool with pooling_windows(l, in)
//   ElementwiseAffine                   fw::affine with elementwise_affine<T>(l, in)
//   ChannelMap                          fw::gather_channels with the source channel of each output
//                                       channel (a table of channel_map(l, in))
//   ElementwiseMap / ParametricMap with pwl_rule knots
//                                       fw::pwl_map: the slope and intercept of each piece,
//                                       measured on the op's own scalar map (per parameter for a
//                                       ParametricMap) and checked against it at every knot, around
//                                       it and far out, so a map that is not piecewise linear on
//                                       its knots is refused
// Anything else (composites, a map over whole samples) is refused with a value_error that names
// the layer; a trailing distribution (output_is_distribution) is refused with a hint: drop it, the
// argmax of the logits is the same; a map over the channels at each position (PositionMap: a
// normalisation) because it needs sqrt, which firmware without libm does not have.
// requires: name a C++ identifier, ns empty or identifiers joined by "::"; finite parameters; a
//           float or double network.
// ensures:  forward(x, y) gives the host's forward within rounding (tests/firmware checks 1e-5 on
//           ACAS Xu and LeNet-5 under qemu-system-arm).
// throws:   value_error (bad name, unsupported layer, non-finite parameter: naming the layer);
//           shape_error (weights that do not fit); io_error (write).
#pragma once

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "nnlens/core/codegen_form.hpp"
#include "nnlens/core/error.hpp"
#include "nnlens/core/properties.hpp"
#include "nnlens/io/codegen.hpp"
#include "nnlens/kernels/conv.hpp"
#include "nnlens/network/dynamic_network.hpp"

namespace nnlens::io {

namespace detail {

/// The statements and arrays of one generation.
struct freestanding_context {
  std::string scalar;    // "float" or "double"
  std::string where;     // "layer 3 (Dense)", for errors
  std::string arrays;    // the weights namespace's members
  std::string body;      // forward()'s statements, indented as in the function
  std::size_t next = 0;  // array counter
  std::size_t buffer = 0;  // largest activation, elements
  std::string cur = "x";  // where the current activation is: "x" (the const input), "a" or "b"

  /// Emits a constant array of the values; returns its qualified name.
  template <class V>
  std::string array(const V* p, std::size_t n, const std::string& what) {
    const std::string id = "p" + std::to_string(next++);
    std::ostringstream a;
    a << "alignas(16) inline constexpr " << scalar << " " << id << "[" << std::max<std::size_t>(n, 1) << "] = {";
    for (std::size_t i = 0; i < n; ++i) {
      if (!std::isfinite(p[i])) throw value_error(where + ": " + what + " element " + std::to_string(i) + " is not finite");
      a << (i % 8 == 0 ? "\n    " : " ") << codegen_context::literal(p[i]) << ",";
    }
    if (n == 0) a << "0";
    a << "};  // " << what << "\n";
    arrays += a.str();
    return "W::" + id;
  }
  template <class V>
  std::string array(const std::vector<V>& v, const std::string& what) { return array(v.data(), v.size(), what); }

  /// The buffer an out-of-place op writes (not the current one).
  std::string other() const { return cur == "a" ? "b" : "a"; }
  /// Makes the current activation writable (an in-place op on the input copies it first).
  void writable(std::size_t n) {
    if (cur != "x") return;
    body += "    nnlens::fw::copy(x, " + std::to_string(n) + ", a);\n";
    cur = "a";
  }
};

/// The piece table of an element-wise piecewise-linear map with knots k: slope and intercept of
/// each of the k.size() + 1 pieces, measured on f (a double -> double callable), then checked.
template <class F>
void pwl_pieces(const std::vector<double>& k, F f, std::vector<double>& slope, std::vector<double>& icept,
                const std::string& where) {
  auto piece = [&](double p1, double p2) {
    const double s = (f(p2) - f(p1)) / (p2 - p1);
    slope.push_back(s);
    icept.push_back(f(p1) - s * p1);
  };
  const std::size_t nk = k.size();
  if (nk == 0) {
    piece(-1.0, 1.0);
  } else {
    piece(k.front() - 2.0, k.front() - 1.0);
    for (std::size_t j = 0; j + 1 < nk; ++j) piece(k[j] + (k[j + 1] - k[j]) / 3, k[j] + 2 * (k[j + 1] - k[j]) / 3);
    piece(k.back() + 1.0, k.back() + 2.0);
  }
  // the table must reproduce f: at each knot, around it, between knots and far out
  std::vector<double> probe{-1e4, -3.5, -1.0, -0.25, 0.0, 0.25, 1.0, 3.5, 1e4};
  for (double kn : k)
    for (double d : {-1.0, -1e-3, 0.0, 1e-3, 1.0}) probe.push_back(kn + d);
  const std::size_t base = slope.size() - (nk + 1);
  for (double v : probe) {
    std::size_t j = 0;
    while (j < nk && v > k[j]) ++j;
    const double t = slope[base + j] * v + icept[base + j], r = f(v);
    if (!(std::abs(t - r) <= 1e-9 * (1 + std::abs(r))))
      throw value_error(where + ": the element-wise map is not piecewise linear on its knots (at " + std::to_string(v) +
                        " it gives " + std::to_string(r) + ", its pieces " + std::to_string(t) +
                        "): it has no freestanding form");
  }
}

template <class T>
std::vector<T> narrow(const std::vector<double>& v) {
  return std::vector<T>(v.begin(), v.end());
}

/// One layer's statements, from its properties (see the header comment).
template <class T, class L>
void freestanding_layer(const L& l, shape in, shape out, freestanding_context& c) {
  const std::size_t n_in = in.size(), n_out = out.size();
  const std::string ni = std::to_string(n_in), no = std::to_string(n_out);
  if constexpr (reshape_only_v<L>) {
    c.body += "    // " + c.where + ": reshape only\n";
  } else if constexpr (WeightLayer<L> && has_window_geometry<L>) {
    const conv_geometry g = layer_traits<L>::geometry_of(&l);
    if (in.rank != 3 || out.rank != 3) throw value_error(c.where + ": a windowed weight layer needs [C,H,W] shapes");
    const std::string w = c.array(l.W.data(), l.W.size(), "W"), b = c.array(l.b.data(), l.b.size(), "b");
    const std::string dims = "nnlens::fw::conv_dims{" + nnlens::detail::codegen_list({in[0], in[1], in[2], out[0], out[1], out[2], g.kh, g.kw,
                                                                             g.stride_h, g.stride_w, g.pad_top, g.pad_left,
                                                                             g.dilation_h, g.dilation_w, g.groups}) + "}";
    const std::string dst = c.other();
    c.body += "    nnlens::fw::conv2d(" + c.cur + ", " + dims + ", " + w + ", " + b + ", " + dst + ");  // " + c.where + "\n";
    c.cur = dst;
  } else if constexpr (WeightLayer<L>) {
    if (l.W.dimension() != 2 || l.W.shape()[0] != n_in || l.W.shape()[1] != n_out)
      throw value_error(c.where + ": a weight layer without windows needs W [in, out]");
    const std::string w = c.array(l.W.data(), l.W.size(), "W"), b = c.array(l.b.data(), l.b.size(), "b");
    const std::string dst = c.other();
    c.body += "    nnlens::fw::dense(" + c.cur + ", " + ni + ", " + w + ", " + b + ", " + no + ", " + dst + ");  // " + c.where + "\n";
    c.cur = dst;
  } else if constexpr (PoolingWindow<L>) {
    const pool_geometry g = pooling_windows(l, in);
    const bool mean = pool_reduction_v<L> == pool_reduce::mean;
    std::string dims = "nnlens::fw::pool_dims{" + nnlens::detail::codegen_list({in[0], in[1], in[2], out[1], out[2], g.kh, g.kw, g.stride_h,
                                                                         g.stride_w, g.pad_top, g.pad_left, g.pad_bottom, g.pad_right});
    dims += std::string(mean ? ", true" : ", false") + (g.count_include_pad ? ", true}" : ", false}");
    const std::string dst = c.other();
    c.body += "    nnlens::fw::pool(" + c.cur + ", " + dims + ", " + dst + ");  // " + c.where + "\n";
    c.cur = dst;
  } else if constexpr (ChannelMap<L>) {
    const auto f = layer_traits<L>::channel_map(l, in);
    std::string table;
    for (std::size_t k = 0; k < out[0]; ++k) table += (k % 16 == 0 ? "\n    " : " ") + std::to_string(std::size_t(f(k))) + ",";
    const std::string id = "p" + std::to_string(c.next++);
    c.arrays += "alignas(16) inline constexpr nnlens::fw::size_t " + id + "[" + std::to_string(std::max<std::size_t>(out[0], 1)) +
                "] = {" + (out[0] ? table : std::string("0")) + "};  // source channels\n";
    const std::string dst = c.other();
    c.body += "    nnlens::fw::gather_channels(" + c.cur + ", " + std::to_string(out[0]) + ", " + std::to_string(channel_elements(in)) +
              ", W::" + id + ", " + dst + ");  // " + c.where + "\n";
    c.cur = dst;
  } else if constexpr (ElementwiseAffine<L>) {
    const affine_coefficients<T> k = layer_traits<L>::template elementwise_affine<T>(l, in);
    const std::string s = c.array(k.scale, "scale"), h = c.array(k.shift, "shift");
    const std::string ctr = k.center.empty() ? "nullptr" : c.array(k.center, "center");
    c.writable(n_in);
    c.body += "    nnlens::fw::affine(" + c.cur + ", " + ni + ", " + std::to_string(k.scale.size()) + ", " + ctr + ", " + s + ", " + h +
              ");  // " + c.where + "\n";
  } else if constexpr ((ElementwiseMap<L> || ParametricMap<L>) && requires { pwl_rule<L>::knots(l); }) {
    std::vector<double> knots;
    for (double v : pwl_rule<L>::knots(l)) knots.push_back(v);
    std::sort(knots.begin(), knots.end());
    knots.erase(std::unique(knots.begin(), knots.end()), knots.end());
    std::vector<double> slope, icept;
    std::size_t groups = 1;
    if constexpr (ElementwiseMap<L>) {
      const auto f = layer_traits<L>::scalar_map(l);
      pwl_pieces(knots, [&](double v) { return f(v); }, slope, icept, c.where);
    } else {
      const auto f = layer_traits<L>::param_map(l);
      const std::vector<double> p = layer_traits<L>::template map_parameters<double>(l, in);
      groups = p.size();
      for (double pk : p) pwl_pieces(knots, [&](double v) { return f(v, pk); }, slope, icept, c.where);
    }
    const std::string kn = c.array(narrow<T>(knots), "knots"), s = c.array(narrow<T>(slope), "slopes"),
                      ic = c.array(narrow<T>(icept), "intercepts");
    c.writable(n_in);
    c.body += "    nnlens::fw::pwl_map(" + c.cur + ", " + ni + ", " + std::to_string(groups) + ", " + kn + ", " +
              std::to_string(knots.size()) + ", " + s + ", " + ic + ");  // " + c.where + "\n";
  } else if constexpr (PositionMap<L>) {
    throw value_error(c.where + ": has no freestanding form (it normalises the channels at each position, which needs sqrt, "
                                "and firmware links no libm)");
  } else if constexpr (output_is_distribution_v<L>) {
    throw value_error(c.where + ": has no freestanding form (its output is a distribution); generate the network "
                                "without it: the argmax of the logits is the same");
  } else {
    throw value_error(c.where + ": has no freestanding form (supported: weight layers, pooling windows, element-wise "
                                "affine ops, element-wise piecewise-linear maps, channel maps, reshapes)");
  }
  c.buffer = std::max(c.buffer, n_out);
}

}  // namespace detail

/// The freestanding header text for `net` (see the file comment).
template <class T>
std::string generate_freestanding_header(const basic_dynamic_network<T>& net, const codegen_options& o = {}) {
  detail::check_codegen_input(net, o, "codegen --freestanding");
  detail::freestanding_context c;
  c.scalar = detail::scalar_name<T>();
  for (std::size_t i = 0; i < net.size(); ++i) {
    c.where = "codegen --freestanding: layer " + std::to_string(i) + " (" + std::string(net.layer_name(i)) + ")";
    std::visit([&](const auto& l) { detail::freestanding_layer<T>(l, net.shape_at(i), net.shape_at(i + 1), c); }, net.layer(i));
  }
  const std::size_t n_in = net.input_shape().size(), n_out = net.output_shape().size();
  const std::string& n = o.name;
  const std::string& s = c.scalar;
  const std::size_t buf = std::max<std::size_t>(c.buffer, 1);
  std::ostringstream h;
  h << "// " << n << ".hpp -- generated by nnlens codegen --freestanding" << (o.source.empty() ? "" : " from " + o.source)
    << "; do not edit.\n"
    << "// Input " << net.input_shape().str() << ", output " << net.output_shape().str() << ", " << net.size()
    << " layers.  Freestanding: no heap, no exceptions, no I/O; the weights are constant data (flash).\n"
    << "#pragma once\n\n#include <cstddef>\n\n#include <nnlens/kernels/freestanding.hpp>\n\n";
  if (!o.ns.empty()) h << "namespace " << o.ns << " {\n\n";
  h << "/// Every tensor of " << n << ", in layer order (hex-float literals: exact).\n"
    << "namespace " << n << "_weights {\n" << c.arrays << "}  // namespace " << n << "_weights\n\n";
  h << "struct " << n << " {\n"
    << "  using scalar = " << s << ";\n"
    << "  static constexpr std::size_t input_size = " << n_in << ", output_size = " << n_out << ";\n"
    << "  static constexpr std::size_t input_rank = " << net.input_shape().rank << ", input_shape[] = {"
    << detail::shape_args(net.input_shape()) << "};\n"
    << "  static constexpr std::size_t output_rank = " << net.output_shape().rank << ", output_shape[] = {"
    << detail::shape_args(net.output_shape()) << "};\n"
    << "  /// Elements of the work area forward(x, y, work) needs.\n"
    << "  static constexpr std::size_t work_size = " << 2 * buf << ";\n\n"
    << "  /// y[output_size] = the network at x[input_size]; work: work_size elements of scratch.\n"
    << "  static nnlens::fw::status forward(const " << s << "* x, " << s << "* y, " << s << "* work) {\n"
    << "    namespace W = " << n << "_weights;\n"
    << "    if (!x || !y || !work) return nnlens::fw::status::null_argument;\n"
    << "    if (!nnlens::fw::all_finite(x, input_size)) return nnlens::fw::status::non_finite_input;\n"
    << "    " << s << "* a = work;\n    " << s << "* b = work + " << buf << ";\n    (void)a, (void)b;\n";
  h << c.body;
  h << "    nnlens::fw::copy(" << c.cur << ", output_size, y);\n"
    << "    return nnlens::fw::status::ok;\n  }\n\n"
    << "  /// The same with a static work area (.bss; not reentrant).\n"
    << "  static nnlens::fw::status forward(const " << s << "* x, " << s << "* y) {\n"
    << "    static " << s << " work[work_size];\n"
    << "    return forward(x, y, work);\n  }\n};\n";
  if (!o.ns.empty()) h << "\n}  // namespace " << o.ns << "\n";
  return h.str();
}

/// A static network: generated from its run-time form.
template <class In, class... Ls>
std::string generate_freestanding_header(const Sequential<In, Ls...>& net, const codegen_options& o = {}) {
  return generate_freestanding_header(to_dynamic(net), o);
}

/// Writes generate_freestanding_header(net, o) to path (throws io_error if it cannot).
template <class Net>
void write_freestanding_header(const std::filesystem::path& path, const Net& net, const codegen_options& o = {}) {
  detail::write_text(path, generate_freestanding_header(net, o));
}

}  // namespace nnlens::io
