// nnlens/exactline/walk.hpp -- the walk every ExactLine engine shares: a network's layers by
// their pwl_rule forms (core/traits.hpp).
//
//   line_walk(e, net, fuse, first)    the top-level layers in order (from `first` on); with fuse, a
//                                     ReLU / max(x, c) next to a max window is one rule: the breaks
//                                     of the composition (the window's envelope with c as a
//                                     candidate).  An engine with step_begin(i) / step_end() hears
//                                     where each top-level step (one layer, or a fused pair) starts
//                                     and ends (exactline/bounded.hpp's transactions).
//   line_step(e, l, in, out, at)      one layer: refine at its breaks, then its forward pass; a
//                                     composite by the engine; a layer that is not piecewise-linear
//                                     is logic_error naming it and its place (line_walk checks
//                                     every layer that way first, before any step does work)
//   line_branches(e, l, in, at, f)    a composite's branches: f(b, run) for each, run() steps
//                                     through the branch's layers (line_step)
//
// An engine E (exactline/line.hpp's line_engine, exactline/plane.hpp's plane_engine, the thrust
// engine of many segments) provides:
//   E::name                                  "exact_line", ...: the start of its error messages
//   e.refine_knots(l, in, at)                the breaks at L's knots (pwl_rule<L>::knots)
//   e.refine_window(l, in, out, floor, at)   the breaks of L's window rule; floor: the c of a
//                                            fused max(x, c) (std::optional<double>)
//   e.apply(l, in, out)                      L's forward pass on every point
//   e.composite(l, in, out, at)              a composite op (its branches: line_branches)
//   e.layer_done()                           after each top-level layer (line_walk)
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "nnlens/core/composite.hpp"
#include "nnlens/core/error.hpp"
#include "nnlens/core/properties.hpp"
#include "nnlens/core/traits.hpp"
#include "nnlens/network/visit.hpp"

namespace nnlens::detail {

template <class L>
concept pwl_is_affine = requires { requires pwl_rule<L>::affine; };
template <class L>
concept pwl_has_knots = requires(const L& l) { pwl_rule<L>::knots(l); };
template <class L>
concept pwl_has_floor = requires(const L& l) {
  { pwl_rule<L>::max_floor(l) } -> std::convertible_to<std::optional<double>>;
};
template <class L>
concept pwl_has_window = requires(const L& l, shape in, const double* a, std::vector<double>& out) {
  pwl_rule<L>::breaks(l, in, a, a, std::optional<double>{}, out);
};
/// (A named visitor, not a lambda: nvcc's front end makes a concept with a lambda in its
/// requires-expression false, and composites then had no ExactLine under CUDA.)
template <class L>
concept pwl_is_composite = requires(const L& l, shape in) {
  pwl_rule<L>::for_each_branch(l, in, detail::any_branch_visitor{});
};
template <class A, class B>
inline constexpr bool pwl_fusable_v = (pwl_has_floor<A> && pwl_has_window<B>) || (pwl_has_window<A> && pwl_has_floor<B>);

/// The diagnostic of ExactLine on a Sequential with a layer that is not piecewise-linear (the
/// compiler names the layer: error_exact_line_needs_a_piecewise_linear_layer<nnlens::Softmax>).
template <class L>
struct error_exact_line_needs_a_piecewise_linear_layer;
template <class Net>
constexpr bool require_pwl_network() {
  return every_static_layer<Net>([](auto l) {
    using L = typename decltype(l)::type;
    return named_check<error_exact_line_needs_a_piecewise_linear_layer, L, PiecewiseLinearLayer<L>>();
  });
}

/// Where a layer sits (formatted only for an error message): top-level index, or a branch's
/// layer inside a composite.
struct layer_site {
  std::size_t index = 0;
  const layer_site* parent = nullptr;  // the composite, for a layer inside a branch
  std::size_t branch = 0;
  std::string_view parent_name;
  std::string str() const {
    if (!parent) return concat("layer ", index);
    return concat(parent->str(), " (", parent_name, ") branch ", branch, " layer ", index);
  }
};

template <class E, class L>
void line_step(E& e, const L& l, shape in, shape out, const layer_site& at) {
  if constexpr (!PiecewiseLinearLayer<L>) {
    (void)e, (void)l, (void)in, (void)out;
    if constexpr (output_is_distribution_v<L>)
      throw logic_error(concat(E::name, ": ", at.str(), " (", layer_traits<L>::name,
                               ") is not piecewise-linear; ExactLine needs every layer piecewise-linear: run it on the "
                               "logits (drop the ",
                               layer_traits<L>::name, ")"));
    else
      throw logic_error(concat(E::name, ": ", at.str(), " (", layer_traits<L>::name,
                               ") is not piecewise-linear (it has no pwl_rule: a smooth or curved map has no finite "
                               "set of linear pieces); ExactLine needs every layer piecewise-linear"));
  } else if constexpr (pwl_is_composite<L>) {
    e.composite(l, in, out, at);
  } else {
    if constexpr (pwl_has_knots<L>)
      e.refine_knots(l, in, at);
    else if constexpr (pwl_has_window<L>)
      e.refine_window(l, in, out, std::optional<double>{}, at);
    else
      static_assert(pwl_is_affine<L>, "pwl_rule<L> must have one of the forms listed in core/traits.hpp");
    e.apply(l, in, out);
  }
}

template <class E, class L, class F>
void line_branches(E& e, const L& l, shape in, const layer_site& at, F&& f) {
  std::size_t b = 0;
  pwl_rule<L>::for_each_branch(l, in, [&](auto&& walk) {
    f(b, [&] {
      walk([&](const auto* lp, auto i, shape li, shape lo) {
        line_step(e, *lp, li, lo, layer_site{std::size_t(i), &at, b, layer_traits<L>::name});
      });
    });
    ++b;
  });
}

/// The engine of line_walk's check before any work: every step does nothing, so a layer that is
/// not piecewise-linear (anywhere, branches included) is refused before the first layer runs.
template <class E>
struct pwl_precheck {
  static constexpr auto name = E::name;
  void layer_done() {}
  template <class L>
  void apply(const L&, shape, shape) {}
  template <class L>
  void refine_knots(const L&, shape, const layer_site&) {}
  template <class L>
  void refine_window(const L&, shape, shape, std::optional<double>, const layer_site&) {}
  template <class L>
  void composite(const L& l, shape in, shape, const layer_site& at) {
    line_branches(*this, l, in, at, [&](std::size_t, auto&& run) { run(); });
  }
};
template <class E>
inline constexpr bool is_pwl_precheck_v = false;
template <class E>
inline constexpr bool is_pwl_precheck_v<pwl_precheck<E>> = true;

template <class E>
concept line_stepped = requires(E& e) {
  e.step_begin(std::size_t{});
  e.step_end();
};

template <class E, class Net>
void line_walk(E& e, const Net& net, bool fuse, std::size_t first = 0) {
  if constexpr (!is_pwl_precheck_v<E> && !is_sequential_v<std::remove_cvref_t<Net>>) {
    pwl_precheck<E> pre;  // a DynamicNetwork's non-piecewise-linear layer, before any work (a
                          // Sequential's is a compile error: require_pwl_network)
    line_walk(pre, net, false);
  }
  for_each_layer_ahead(net, [&](const auto& l, auto i, shape in, shape out, auto&& next) {
    using L = std::remove_cvref_t<decltype(l)>;
    if (std::size_t(i) < first) return false;  // a bounded run's sub-segment resumes at `first`
    const layer_site at{std::size_t(i), nullptr, 0, {}};
    if constexpr (line_stepped<E>) e.step_begin(std::size_t(i));
    bool fused = false;
    if constexpr (pwl_has_floor<L> || pwl_has_window<L>) {
      if (fuse)
        next([&](const auto& l2, shape out2) {
          using N = std::remove_cvref_t<decltype(l2)>;
          if constexpr (pwl_fusable_v<L, N>) {
            std::optional<double> c;
            if constexpr (pwl_has_floor<L>)
              c = pwl_rule<L>::max_floor(l);
            else
              c = pwl_rule<N>::max_floor(l2);
            if (!c) return;
            if constexpr (pwl_has_window<N>)
              e.refine_window(l2, out, out2, c, at);
            else
              e.refine_window(l, in, out, c, at);
            e.apply(l, in, out);
            e.layer_done();
            e.apply(l2, out, out2);
            fused = true;
          }
        });
    }
    if (!fused) line_step(e, l, in, out, at);
    e.layer_done();
    if constexpr (line_stepped<E>) e.step_end();
    return fused;
  });
}

}  // namespace nnlens::detail
