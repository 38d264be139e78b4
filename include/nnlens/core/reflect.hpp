// nnlens/core/reflect.hpp -- an op's data as a Boost.Hana Struct: the fields generic code reads.
//
// An op declares its non-static data members once, in its own header, after declaring them:
//
//   template <std::size_t Out, class T>
//   struct Dense {
//     tensor<T, 2> W;
//     tensor<T, 1> b;
//     NNLENS_FIELDS(Dense, W, b)
//   };
//
// NNLENS_FIELDS(Type, m...) defines what BOOST_HANA_DEFINE_STRUCT defines (a nested
// hana_accessors_impl), without declaring the members itself, so members keep their default
// initialisers (LeakyReLU's alpha = 0.01) and the op stays an aggregate (Dense<4>{W, b}).  The
// op is then a hana::Struct: hana::keys, hana::accessors, hana::members all work on it.
// Generic code reads the fields instead of a per-op rule:
//   - codegen fills every tensor and scalar field (codegen_form.hpp, detail::codegen_fields);
//   - rebind_scalar converts the fields by name (convert_fields below: one rule for every op
//     spelled Op<N, T>, and Conv2D's); dynamic_form keeps its per-op checks;
//   - `nnlens info --json` prints every field (scalars by value, tensors by shape);
//   - the test suite checks that every tensor field is saved by the weights file (a parameter or
//     a buffer), so a new tensor cannot be silently left out of NNLW.
// A field is a tensor (xtensor container; the concept TensorField), an arithmetic hyper-parameter,
// or a structured value that the op's static spelling fixes (Conv2D's run-time geometry: copied,
// never filled by codegen).
// Up to 12 fields.  An op with data and no NNLENS_FIELDS is named by layers/all.hpp's check.
#pragma once

#include <boost/hana/accessors.hpp>
#include <boost/hana/concept/struct.hpp>
#include <boost/hana/equal.hpp>
#include <boost/hana/find_if.hpp>
#include <boost/hana/for_each.hpp>
#include <boost/hana/length.hpp>
#include <boost/hana/optional.hpp>
#include <boost/hana/pair.hpp>
#include <boost/hana/string.hpp>
#include <boost/hana/tuple.hpp>

#include <cstddef>
#include <string_view>
#include <type_traits>

#include "nnlens/core/tensor.hpp"
#include "nnlens/core/traits.hpp"

namespace nnlens {

namespace reflect_detail {
/// The accessor of one member: s.*M, keeping s's constness and value category.
template <auto M>
struct member {
  template <class S>
  constexpr decltype(auto) operator()(S&& s) const {
    return (static_cast<S&&>(s).*M);
  }
};
}  // namespace reflect_detail

#define NNLENS_REFLECT_FIELD_(T, m) \
  ::boost::hana::make_pair(BOOST_HANA_STRING(#m), ::nnlens::reflect_detail::member<&T::m>{})
#define NNLENS_REFLECT_1_(T, a) NNLENS_REFLECT_FIELD_(T, a)
#define NNLENS_REFLECT_2_(T, a, ...) NNLENS_REFLECT_FIELD_(T, a), NNLENS_REFLECT_1_(T, __VA_ARGS__)
#define NNLENS_REFLECT_3_(T, a, ...) NNLENS_REFLECT_FIELD_(T, a), NNLENS_REFLECT_2_(T, __VA_ARGS__)
#define NNLENS_REFLECT_4_(T, a, ...) NNLENS_REFLECT_FIELD_(T, a), NNLENS_REFLECT_3_(T, __VA_ARGS__)
#define NNLENS_REFLECT_5_(T, a, ...) NNLENS_REFLECT_FIELD_(T, a), NNLENS_REFLECT_4_(T, __VA_ARGS__)
#define NNLENS_REFLECT_6_(T, a, ...) NNLENS_REFLECT_FIELD_(T, a), NNLENS_REFLECT_5_(T, __VA_ARGS__)
#define NNLENS_REFLECT_7_(T, a, ...) NNLENS_REFLECT_FIELD_(T, a), NNLENS_REFLECT_6_(T, __VA_ARGS__)
#define NNLENS_REFLECT_8_(T, a, ...) NNLENS_REFLECT_FIELD_(T, a), NNLENS_REFLECT_7_(T, __VA_ARGS__)
#define NNLENS_REFLECT_9_(T, a, ...) NNLENS_REFLECT_FIELD_(T, a), NNLENS_REFLECT_8_(T, __VA_ARGS__)
#define NNLENS_REFLECT_10_(T, a, ...) NNLENS_REFLECT_FIELD_(T, a), NNLENS_REFLECT_9_(T, __VA_ARGS__)
#define NNLENS_REFLECT_11_(T, a, ...) NNLENS_REFLECT_FIELD_(T, a), NNLENS_REFLECT_10_(T, __VA_ARGS__)
#define NNLENS_REFLECT_12_(T, a, ...) NNLENS_REFLECT_FIELD_(T, a), NNLENS_REFLECT_11_(T, __VA_ARGS__)
#define NNLENS_REFLECT_N_(_1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, N, ...) NNLENS_REFLECT_##N##_
#define NNLENS_REFLECT_PICK_(...) NNLENS_REFLECT_N_(__VA_ARGS__, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0)

/// Inside the body of op Type, after its members: names them as the op's fields (file comment).
#define NNLENS_FIELDS(Type, ...)                                                                 \
  struct hana_accessors_impl {                                                                   \
    static constexpr auto apply() {                                                              \
      return ::boost::hana::make_tuple(NNLENS_REFLECT_PICK_(__VA_ARGS__)(Type, __VA_ARGS__));    \
    }                                                                                            \
  };

/// L declares its fields (NNLENS_FIELDS or BOOST_HANA_DEFINE_STRUCT / ADAPT_STRUCT).
template <class L>
concept Reflected = boost::hana::Struct<std::remove_cvref_t<L>>::value;

/// How many fields L declares (0 when it declares none).
template <class L>
constexpr std::size_t field_count() {
  if constexpr (Reflected<L>)
    return decltype(boost::hana::length(boost::hana::accessors<std::remove_cvref_t<L>>()))::value;
  else
    return 0;
}

/// f(std::string_view name, member&) for every field of l, in declaration order (member is const
/// when l is); nothing when L declares no fields.
template <class L, class F>
constexpr void for_each_field(L& l, F&& f) {
  using S = std::remove_cvref_t<L>;
  if constexpr (Reflected<S>)
    boost::hana::for_each(boost::hana::accessors<S>(), [&](auto p) {
      f(std::string_view(boost::hana::to<char const*>(boost::hana::first(p))), boost::hana::second(p)(l));
    });
}

namespace reflect_detail {
template <class M>
concept tensor_like = requires(const M& m) {
  m.data();
  m.shape();
  m.dimension();
};
/// d = s, converting a tensor's scalar type (fields are nnlens::tensor).
template <class D, class S>
void assign_field(D& d, const S& s) {
  if constexpr (tensor_like<D> && !std::is_same_v<D, S>) {
    d = detail::cast_tensor<typename D::value_type>(s);  // core/tensor.hpp
  } else {
    d = static_cast<D>(s);
  }
}
}  // namespace reflect_detail

/// A field that is a tensor (data(), shape(), dimension()): what for_each_field's f tells apart
/// from the arithmetic fields, e.g. to print a tensor by its shape and a scalar by its value.
template <class M>
concept TensorField = reflect_detail::tensor_like<M>;

/// Every field of d gets the value of src's field of the same name, converted (tensors element by
/// element, scalars by static_cast); a field of d that src lacks keeps its value, and a field of
/// src that d lacks (a geometry the static spelling fixes) is not read.
template <class Dst, class Src>
void copy_fields(Dst& d, const Src& src) {
  namespace hana = boost::hana;
  if constexpr (Reflected<Dst> && Reflected<Src>)
    hana::for_each(hana::accessors<Dst>(), [&](auto dp) {
      auto found = hana::find_if(hana::accessors<Src>(), [&](auto sp) { return hana::first(sp) == hana::first(dp); });
      if constexpr (!decltype(hana::is_nothing(found))::value)
        reflect_detail::assign_field(hana::second(dp)(d), hana::second(*found)(src));
    });
}

/// A Dst with src's fields (copy_fields; Dst's other members value-initialised).
template <class Dst, class Src>
Dst convert_fields(const Src& src) {
  Dst d{};
  copy_fields(d, src);
  return d;
}

/// Ops spelled Op<N, T> (a count, then the scalar: Dense, Affine, BatchNorm, PReLU) that declare
/// their fields rebind to Op<N, U> with every field converted; no per-op rule.
template <template <std::size_t, class> class Op, std::size_t N, class T, class U>
  requires Reflected<Op<N, T>>
struct rebind_scalar<Op<N, T>, U> {
  using type = Op<N, U>;
  static type convert(const Op<N, T>& l) { return convert_fields<type>(l); }
};

}  // namespace nnlens
