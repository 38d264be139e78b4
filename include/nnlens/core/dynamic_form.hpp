// nnlens/core/dynamic_form.hpp -- the run-time-extent form of a static layer type.
//
// dynamic_form<L>::type is the alternative a DynamicNetwork stores for L (Dense<120> -> Dense<dyn>);
// to_dynamic(l) converts, from_dynamic(d, where) converts back and throws shape_error (naming
// `where`) if d's hyper-parameters differ from those L fixes.  Weightless, shape-agnostic layers
// are their own dynamic form (the primary template).  A layer with static hyper-parameters
// specialises this in its own header.
#pragma once

#include <string>

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

}  // namespace nnlens
