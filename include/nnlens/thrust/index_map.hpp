// nnlens/thrust/index_map.hpp -- the thrust backend's kernels for ops whose output reads its input
// through an index map (core/properties.hpp), with nothing here naming an op:
//
//   ChannelMap    each output channel copies one input channel (a channel shuffle, a slice):
//     thrust_layer<L>       y[i] = x[channel_map_source(f, ...)], one work item per output element,
//                           f = the op's channel_map functor (nothing uploaded)
//     thrust_lrp_layer<L>   R_in[j] = the sum of R_out over the output elements that copy input
//                           element j, added in output order from 0 as the host's
//                           relevance_channel_map_rule adds them (bit for bit); one work item per
//                           input element, which scans the out[0] output channels
//   PositionMap   one functor over the channels at each position (a normalisation):
//     thrust_layer<L>       f(x, y, C, P, p) per sample and position, the op's position_map functor
//                           on its position_parameters<T> (uploaded once, as W): the host forward's
//                           functor on the same parameters, so the same bits on the OMP system
//                           (under nvcc the device's sqrt and division, both IEEE-rounded)
//     no device LRP step: device_lrp refuses the network (a Sequential at compile time, naming the
//     layer: error_thrust_lrp_has_no_step_for<L>); run relevance with execution::seq or par.
// ExactLine's thrust engine runs a channel map as an affine layer (its forward); NNSlicer's
// profile, coverage and the black boxes run both through device_network's forward.
// Included by thrust/network.hpp after its other includes; thrust_params, thrust_layer and
// thrust_lrp_layer are declared here and defined there (and in thrust/relevance.hpp).
#pragma once

#include <cstddef>
#include <vector>

#include "nnlens/core/hd.hpp"
#include "nnlens/core/properties.hpp"
#include "nnlens/core/shape.hpp"
#include "nnlens/core/traits.hpp"
#include "nnlens/thrust/kernels.hpp"

namespace nnlens {

template <class T>
struct thrust_params;
template <class L>
struct thrust_layer;
template <class L>
struct thrust_lrp_layer;

namespace thrust_kernels {

/// y[i] = x[its source] for i < N Cout P: a channel map f with Cin input and Cout output channels
/// of P elements per sample.
template <class T, class F>
struct gather_channels_op {
  const T* x;
  T* y;
  idx Cin, Cout, P;
  F f;
  NNLENS_HD void operator()(idx i) const { y[i] = x[channel_map_source(f, Cin, Cout, P, i)]; }
};

template <class T, class F>
void gather_channels(idx N, idx Cin, idx Cout, idx P, const T* x, T* y, const F& f) {
  launch(N * Cout * P, gather_channels_op<T, F>{x, y, Cin, Cout, P, f});
}

/// r[i] for input element i (N Cin P of them): the sum, over output channels k in order, of
/// R[n, k, p] where f(k) is i's channel (0 when no output copies it).
template <class F>
struct lrp_gather_sources_op {
  const double* R;
  double* r;
  idx Cin, Cout, P;
  F f;
  NNLENS_HD void operator()(idx i) const {
    const idx per = Cin * P, n = i / per, rem = i - n * per, j = rem / P, p = rem - j * P;
    double acc = 0.0;
    for (idx k = 0; k < Cout; ++k)
      if (idx(f(k)) == j) acc += R[(n * Cout + k) * P + p];
    r[i] = acc;
  }
};

template <class F>
void lrp_gather_sources(idx N, idx Cin, idx Cout, idx P, const double* R, double* r, const F& f) {
  launch(N * Cin * P, lrp_gather_sources_op<F>{R, r, Cin, Cout, P, f});
}

/// f(x + n C P + q, y + ..., C, P, p) for every sample n and position q < P.
template <class T, class F>
struct position_map_op {
  const T* x;
  T* y;
  const T* p;
  idx C, P;
  F f;
  NNLENS_HD void operator()(idx i) const {
    const idx n = i / P, q = i - n * P, o = n * C * P + q;
    f(x + o, y + o, C, P, p);
  }
};

template <class T, class F>
void position_map(idx N, idx C, idx P, const T* x, T* y, const T* p, const F& f) {
  launch(N * P, position_map_op<T, F>{x, y, p, C, P, f});
}

}  // namespace thrust_kernels

/// A channel map (ChannelMap): the op's functor gathers on the device, nothing to upload.
template <class L>
  requires ChannelMap<L>
struct thrust_layer<L> {
  static constexpr bool supported = true;
  template <class T>
  static void upload(const L&, thrust_params<T>&, shape) {}
  template <class T>
  static void forward(const L& l, const thrust_params<T>&, shape in, shape out, std::size_t batch, const T* x, T* y) {
    thrust_kernels::gather_channels<T>(batch, in[0], out[0], channel_elements(in), x, y, layer_traits<L>::channel_map(l, in));
  }
};

/// A position map (PositionMap): its parameters in T, the op's functor per sample and position.
template <class L>
  requires PositionMap<L>
struct thrust_layer<L> {
  static constexpr bool supported = true;
  template <class T>
  static void upload(const L& l, thrust_params<T>& p, shape in) {
    const std::vector<T> v = layer_traits<L>::template position_parameters<T>(l, in);
    p.W.assign(v.begin(), v.end());
  }
  template <class T>
  static void forward(const L& l, const thrust_params<T>& p, shape in, shape, std::size_t batch, const T* x, T* y) {
    thrust_kernels::position_map<T>(batch, in[0], channel_elements(in), x, y, detail::dptr(p.W), layer_traits<L>::position_map(l));
  }
};

/// A channel map's LRP step: each input element gathers the relevance of the outputs that copy it.
template <class L>
  requires ChannelMap<L>
struct thrust_lrp_layer<L> {
  static constexpr bool supported = true, passthrough = false;
  template <class T>
  static void upload(const L&, thrust_params<T>&, shape) {}
  template <class T, class Scratch, class Options>
  static void backward(const L& l, const thrust_params<T>&, shape in, shape out, std::size_t nb, const T*, const T*,
                       const double* r_out, double* r_in, const Scratch&, const Options&) {
    thrust_kernels::lrp_gather_sources(nb, in[0], out[0], channel_elements(in), r_out, r_in, layer_traits<L>::channel_map(l, in));
  }
};

}  // namespace nnlens
