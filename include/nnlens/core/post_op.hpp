// nnlens/core/post_op.hpp -- an element-wise map run inside the layer before it (inference).
//
//   detail::in_place_map_v<L>       L is an element-wise map (elementwise_map_defaults) without
//                                   parameters: its forward may run in place on any run of values
//   detail::accepts_post_op_v<L>    layer_traits<L>::accepts_post_op: L's forward applies
//                                   forward_args::post to all of its output, part by part, while
//                                   each part is in cache (Conv2D)
//   detail::fusing_chain<T>         runs a chain of layers for inference: a producer that accepts a
//                                   post-op is held back one layer, and when an in-place map follows
//                                   it, the map runs inside it and is skipped
//
// ensures: the same bits as running every layer in order (the map computes the same function of
//          the same values), and the same output buffers for the layers after the pair.  The
//          analyses that read each layer's output (traces, ExactLine's walk, training) do not run
//          through here: only forward_into and the composites' inference chains do.
#pragma once

#include <cstddef>
#include <type_traits>

#include "nnlens/core/properties.hpp"
#include "nnlens/core/traits.hpp"

namespace nnlens::detail {

template <class L>
inline constexpr bool in_place_map_v =
    std::is_base_of_v<elementwise_map_defaults<L>, layer_traits<L>> && !ParametricMap<L>;

template <class L>
constexpr bool accepts_post_op() {
  if constexpr (requires { layer_traits<L>::accepts_post_op; })
    return bool(layer_traits<L>::accepts_post_op);
  else
    return false;
}
template <class L>
inline constexpr bool accepts_post_op_v = accepts_post_op<L>();

/// post_op's run for map L: its forward on n values in place.
template <class L, class T>
void run_map_in_place(const void* l, T* y, std::size_t n) {
  layer_traits<L>::forward(*static_cast<const L*>(l), forward_args<T>{shape(n), shape(n), 1, y, y, nullptr, nullptr});
}

/// A chain's inference walk with the fusion above, over two ping-pong buffers: for each layer in
/// order call step(l, in, out, batch, scratch, last), `last` the buffer the chain's last layer must
/// write (nullptr for the others, or to leave the output in a ping-pong buffer); then finish().
/// output() is where the chain's output is.
template <class T>
struct fusing_chain {
  const T* cur;
  T* pp[2];
  // the held-back producer: its forward and its arguments
  void (*held)(const void*, const forward_args<T>&) = nullptr;
  const void* held_layer = nullptr;
  forward_args<T> held_args{};

  fusing_chain(const T* x, T* p0, T* p1) : cur(x), pp{p0, p1} {}

  template <class L>
  static void run_layer(const void* l, const forward_args<T>& a) {
    layer_traits<L>::forward(*static_cast<const L*>(l), a);
  }
  void release() {
    if (!held) return;
    held(held_layer, held_args);
    cur = held_args.y;
    held = nullptr;
  }
  template <class L>
  void step(const L& l, shape in, shape out, std::size_t batch, T* scratch, T* last) {
    if constexpr (in_place_map_v<L>) {
      if (held) {  // the map runs inside the held producer, on the producer's output
        held_args.post = post_op<T>{&run_map_in_place<L, T>, &l};
        if (last) held_args.y = last;  // never the producer's input: that is a ping-pong buffer or x
        release();
        return;
      }
    }
    release();
    T* dst = last ? last : (cur == pp[0] ? pp[1] : pp[0]);
    const forward_args<T> a{in, out, batch, cur, dst, nullptr, scratch};
    if constexpr (accepts_post_op_v<L>) {
      held = &run_layer<L>;
      held_layer = &l;
      held_args = a;
    } else {
      layer_traits<L>::forward(l, a);
      cur = dst;
    }
  }
  const T* finish() {
    release();
    return cur;
  }
};

}  // namespace nnlens::detail
