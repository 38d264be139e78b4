// nnlens/core/dynamic_form.hpp -- the run-time-extent form of a static layer type.
//
// dynamic_form<L>::type is the alternative a DynamicNetwork stores for L (Dense<120> -> Dense<dyn>);
// to_dynamic(l) converts, from_dynamic(d, where) converts back and throws shape_error (naming
// `where`) if d's hyper-parameters differ from those L fixes.  Weightless, shape-agnostic layers
// are their own dynamic form (the primary template).  A layer with static hyper-parameters
// specialises this in its own header.
#pragma once

#include <string>
#include <utility>

#include "nnlens/core/traits.hpp"

namespace nnlens {

template <class L>
struct dynamic_form {
  using type = L;
  static const L& to_dynamic(const L& l) { return l; }
  static L from_dynamic(const L& d, const std::string&) { return d; }
};
template <class L>
using dynamic_form_t = typename dynamic_form<L>::type;

/// L's form can take the scalar T of the run-time network it goes into: its dynamic_form has
/// to_dynamic<T> (a composite without weights of its own, whose default form is float, goes into a
/// double network as its double form).
template <class L, class T>
concept dynamic_form_takes = requires(const L& l) { dynamic_form<L>::template to_dynamic<T>(l); };

/// The form a run-time network of scalar T stores for L: dynamic_form_t<L>, or the T form.
template <class L, class T>
struct dynamic_form_in {
  using type = dynamic_form_t<L>;
};
template <class L, class T>
  requires dynamic_form_takes<L, T>
struct dynamic_form_in<L, T> {
  using type = decltype(dynamic_form<L>::template to_dynamic<T>(std::declval<const L&>()));
};
template <class L, class T>
using dynamic_form_in_t = typename dynamic_form_in<L, T>::type;

/// L converted for a run-time network (or block) of scalar T: dynamic_form_in_t<L, T>.
template <class T, class L>
dynamic_form_in_t<L, T> to_dynamic_in(const L& l) {
  if constexpr (dynamic_form_takes<L, T>)
    return dynamic_form<L>::template to_dynamic<T>(l);
  else
    return dynamic_form<L>::to_dynamic(l);
}

}  // namespace nnlens
