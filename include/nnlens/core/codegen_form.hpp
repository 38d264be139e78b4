// nnlens/core/codegen_form.hpp -- what an op's code-generation rule is written against.
//
// io/codegen.hpp writes a network as a C++ header (the exact static spelling of every layer, its
// weights as hex-float arrays, the statements that fill them).  What is per op lives in the op's
// own header, as a specialisation of codegen_rule<L> for its run-time (dynamic) form:
//   static std::string type(const L&, codegen_context&)                 the static spelling
//   static void fill(const L&, codegen_context&, const std::string& lv)  emits the fill statements
// The fill is derived from the op's fields (detail::codegen_fields, core/reflect.hpp): a rule
// writes only the spelling.
// codegen_context collects the weight arrays (tensor()) and hyper-parameter assignments (value());
// it needs only strings and numbers (no io/, no file I/O).  detail::codegen_plain<L> is the rule of
// a non-template op ("nnlens::" + layer_traits<L>::name, its fields filled).
// requires: finite parameters (value() allows infinities).  throws: value_error naming c.where.
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "nnlens/core/error.hpp"
#include "nnlens/core/reflect.hpp"
#include "nnlens/core/traits.hpp"

namespace nnlens {

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
  /// E: any tensor with data(), size(), dimension(), shape().
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

/// The per-op emission rule: specialised in each op's header for its run-time form.
template <class L>
struct codegen_rule;

template <class L>
concept CodegenLayer = requires(const L& l, codegen_context& c, const std::string& s) {
  { codegen_rule<L>::type(l, c) } -> std::convertible_to<std::string>;
  codegen_rule<L>::fill(l, c, s);
};

namespace detail {
/// "a, b, c" of the values.
inline std::string codegen_list(std::initializer_list<std::size_t> v) {
  std::string s;
  for (std::size_t x : v) s += (s.empty() ? "" : ", ") + std::to_string(x);
  return s;
}
/// Template arguments with trailing ones equal to their defaults dropped (defaults[i] belongs to v[i]).
inline std::string codegen_short_list(std::vector<std::size_t> v, const std::vector<std::size_t>& defaults) {
  while (!v.empty() && v.size() <= defaults.size() && v.back() == defaults[v.size() - 1]) v.pop_back();
  std::string s;
  for (std::size_t x : v) s += (s.empty() ? "" : ", ") + std::to_string(x);
  return s;
}
/// The fill of any op, from its fields (core/reflect.hpp): every tensor field becomes a weight
/// array, every arithmetic field an assignment; a structured field (Conv2D's run-time geometry) is
/// spelled in the static type, so it is not filled.  An op without fields fills nothing.
template <class L>
struct codegen_fields {
  static void fill(const L& l, codegen_context& c, const std::string& lv) {
    for_each_field(l, [&](std::string_view name, const auto& m) {
      using M = std::remove_cvref_t<decltype(m)>;
      const std::string field = lv + "." + std::string(name);
      if constexpr (reflect_detail::tensor_like<M>)
        c.tensor(field, m, name);
      else if constexpr (std::is_arithmetic_v<M>)
        c.value(field, static_cast<double>(m));
    });
  }
};
/// A non-template op: the spelling is its name; the fill is its fields'.
template <class L>
struct codegen_plain : codegen_fields<L> {
  static std::string type(const L&, codegen_context&) { return "nnlens::" + std::string(layer_traits<L>::name); }
};
/// The rule of whichever alternative a layer variant holds (composite ops: their inner layers).
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
}  // namespace detail

/// The static C++ spelling io/codegen.hpp writes for the layer a run-time layer variant holds
/// (DynamicNetwork::layer_type), e.g. "nnlens::Conv2D<6, 5, 1, 2>".
template <class V>
std::string codegen_layer_type(const V& v, codegen_context& c) {
  return detail::codegen_variant_type(v, c);
}

}  // namespace nnlens
