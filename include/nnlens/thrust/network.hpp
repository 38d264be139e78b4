// nnlens/thrust/network.hpp -- a network's weights on the thrust device system.
//
//   device_network<Net> d(net);          the op graph (network/graph.hpp) with every node's
//                                        parameters uploaded once (d.params(k))
//   d.forward(batch, x, y[, upto])       x, y: device pointers, [batch, in] -> [batch, out] (or
//                                        tensor `upto` of the graph: ExactLine's reanchor)
//   d.run(batch, x, acts)                keeps every tensor, numbered as the graph numbers them:
//                                        acts[0] = input, then one per node
//   thrust_layer<L>                      the per-layer kernels, one specialisation per trait form
//
// Layers with thrust kernels, by their properties (core/properties.hpp): an element-wise map (the
// op's scalar_map functor), a reshape-only op (a copy), a pooling window (max or mean, any
// geometry), an element-wise affine op, an element-wise map with parameters, a map over whole
// samples, a weight layer (Dense, Conv2D: tuned kernels, any geometry), and a composite: its
// branches' layers by their own kernels, then one place() kernel per operand of the join, in the
// host join's order (so a sum rounds as the host's), or one gate_multiply() for a product.  A Sequential with another layer is a compile
// error naming it (error_thrust_backend_has_no_kernel_for<L>); a DynamicNetwork holding one gets
// logic_error naming it and its place ("5.block.1") when the device_network is made.
// requires: check_shapes(net) passed; net outlives the device_network (its walks read the layers;
//           the parameters are copied when it is made: later changes to them are not seen).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <thrust/device_vector.h>

#include "nnlens/core/composite.hpp"
#include "nnlens/core/error.hpp"
#include "nnlens/core/properties.hpp"
#include "nnlens/kernels/conv.hpp"
#include "nnlens/network/dynamic_network.hpp"
#include "nnlens/network/graph.hpp"
#include "nnlens/network/visit.hpp"
#include "nnlens/thrust/kernels.hpp"
#include "nnlens/thrust/policy.hpp"
#include "nnlens/thrust/index_map.hpp"  // channel maps and position maps (core/properties.hpp)

namespace nnlens {

namespace detail {
inline std::atomic<std::size_t>& thrust_pass_counter() {
  static std::atomic<std::size_t> n{0};
  return n;
}
}  // namespace detail

/// How many device passes (device_network::forward / run calls) this process has made: lets a
/// program (and the *_thrust test suites) check that work really ran on the thrust backend.
inline std::size_t thrust_device_passes() { return detail::thrust_pass_counter().load(std::memory_order_relaxed); }

template <class T>
struct thrust_params {
  ::thrust::device_vector<T> W, b;
  ::thrust::device_vector<T> center;  // an element-wise affine op: W = scale, b = shift, center (or empty)
  ::thrust::device_vector<double> lrp_w, lrp_b;  // its LRP weights and biases (thrust/relevance.hpp)
  bool gemm = false;  // Conv2D: W transposed for conv2d_gemm<T, 16> (else <T, 4>)
};

/// Per-layer thrust kernels: upload(l, params, in) and forward(l, params, in, out, batch, x, y).
template <class L>
struct thrust_layer;

template <class L>
concept ThrustLayer = requires { thrust_layer<L>::supported; };

/// y = x W + b with W [in, out]: a weight layer (core/properties.hpp) whose W's axis 1 runs over
/// the outputs, without a window (Dense).
template <class L>
concept thrust_dense_like = WeightLayer<L> && output_channel_axis_v<L> == 1 && !has_window_geometry<L>;
/// A convolution: a weight layer with W [O, C/groups, kh, kw] and a window geometry (Conv2D).
template <class L>
concept thrust_conv_like = WeightLayer<L> && output_channel_axis_v<L> == 0 && has_window_geometry<L>;

template <class L>
  requires thrust_dense_like<L>
struct thrust_layer<L> {
  using T = typename L::scalar_type;
  static constexpr bool supported = true;
  /// Its window as the kernels read it: the 1 x 1 convolution of its inputs (LRP's kernels).
  static thrust_kernels::window_dims dims(const L&, shape in, shape out) {
    return kernels::window_of(conv_geometry{}, shape(in.size(), 1, 1), shape(out.size(), 1, 1));
  }
  static void upload(const L& l, thrust_params<T>& p, shape in) {  // padded: thrust_kernels::dense_pad_weights
    std::vector<T> w, b;
    thrust_kernels::dense_pad_weights(in.size(), l.b.size(), l.W.data(), l.b.data(), w, b);
    p.W.assign(w.begin(), w.end());
    p.b.assign(b.begin(), b.end());
  }
  static void forward(const L&, const thrust_params<T>& p, shape in, shape out, std::size_t batch, const T* x, T* y) {
    thrust_kernels::dense<T>(batch, in.size(), out.size(), x, detail::dptr(p.W), detail::dptr(p.b), y);
  }
};

/// A convolution runs as an implicit GEMM on transposed weights (thrust_kernels::conv2d_gemm):
/// 16 output channels per loaded input value, or 4 when a group has fewer than 16.
template <class L>
  requires thrust_conv_like<L>
struct thrust_layer<L> {
  using T = typename L::scalar_type;
  static constexpr bool supported = true;
  static constexpr std::size_t gemm_min_out = 16;
  static thrust_kernels::window_dims dims(const L& l, shape in, shape out) {
    return kernels::window_of(layer_traits<L>::geometry_of(&l), in, out);
  }
  static void upload(const L& l, thrust_params<T>& p, shape) {
    const conv_geometry g = layer_traits<L>::geometry_of(&l);
    thrust_kernels::window_dims d;
    d.O = l.W.shape(0), d.groups = g.groups, d.C = l.W.shape(1) * g.groups, d.kh = l.W.shape(2), d.kw = l.W.shape(3);
    p.gemm = d.O / g.groups >= gemm_min_out;
    std::vector<T> wt;
    if (p.gemm)
      thrust_kernels::conv_transpose_weights<16>(d, l.W.data(), wt);
    else
      thrust_kernels::conv_transpose_weights<4>(d, l.W.data(), wt);
    p.W.assign(wt.begin(), wt.end());
    p.b.assign(l.b.data(), l.b.data() + l.b.size());
  }
  static void forward(const L& l, const thrust_params<T>& p, shape in, shape out, std::size_t batch, const T* x, T* y) {
    const auto d = dims(l, in, out);
    const T* W = detail::dptr(p.W);
    const T* b = detail::dptr(p.b);
    if (p.gemm)
      thrust_kernels::conv2d_gemm<T, 16>(batch, d, x, W, b, y);
    else
      thrust_kernels::conv2d_gemm<T, 4>(batch, d, x, W, b, y);
  }
};

/// A pooling window (core/properties.hpp: PoolingWindow), any geometry: the kernel of its
/// reduction (max or mean), no parameters on the device; dims() is its window as the kernels read it.
template <class L>
  requires PoolingWindow<L>
struct thrust_layer<L> {
  static constexpr bool supported = true;
  static thrust_kernels::window_dims dims(const L& l, shape in, shape out) {
    return kernels::window_of(pool_geometry(pooling_windows(l, in)), in, out);
  }
  template <class T>
  static void upload(const L&, thrust_params<T>&, shape) {}
  template <class T>
  static void forward(const L& l, const thrust_params<T>&, shape in, shape out, std::size_t batch, const T* x, T* y) {
    if constexpr (pool_reduction_v<L> == pool_reduce::max)
      thrust_kernels::max_pool2d<T>(batch, dims(l, in, out), x, y);
    else
      thrust_kernels::avg_pool2d<T>(batch, dims(l, in, out), x, y);
  }
};

/// An element-wise affine op (ElementwiseAffine: BatchNorm, Affine): its coefficients in T from
/// the property, y = (x - center) * scale + shift per element, channel (feature) or one value.
template <class L>
  requires ElementwiseAffine<L>
struct thrust_layer<L> {
  static constexpr bool supported = true;
  template <class T>
  static void upload(const L& l, thrust_params<T>& p, shape in) {
    const affine_coefficients<T> c = layer_traits<L>::template elementwise_affine<T>(l, in);
    p.W.assign(c.scale.begin(), c.scale.end());
    p.b.assign(c.shift.begin(), c.shift.end());
    p.center.assign(c.center.begin(), c.center.end());
  }
  template <class T>
  static void forward(const L&, const thrust_params<T>& p, shape in, shape, std::size_t batch, const T* x, T* y) {
    const std::size_t E = in.size();
    thrust_kernels::scale_shift<T>(batch * E, E, E / p.W.size(), x, y, detail::dptr(p.W), detail::dptr(p.b),
                                   p.center.empty() ? nullptr : detail::dptr(p.center));
  }
};

/// An element-wise map with parameters (ParametricMap: PReLU): the parameters in T from the
/// property, the op's functor in one kernel.
template <class L>
  requires ParametricMap<L>
struct thrust_layer<L> {
  static constexpr bool supported = true;
  template <class T>
  static void upload(const L& l, thrust_params<T>& p, shape in) {
    const std::vector<T> v = layer_traits<L>::template map_parameters<T>(l, in);
    p.W.assign(v.begin(), v.end());
  }
  template <class T>
  static void forward(const L& l, const thrust_params<T>& p, shape in, shape, std::size_t batch, const T* x, T* y) {
    const std::size_t E = in.size();
    thrust_kernels::param_map<T>(batch * E, E, E / p.W.size(), x, y, detail::dptr(p.W), layer_traits<L>::param_map(l));
  }
};

/// A map over whole samples (SampleMap: Softmax): the op's functor, one work item per sample.
template <class L>
  requires SampleMap<L>
struct thrust_layer<L> {
  static constexpr bool supported = true;
  template <class T>
  static void upload(const L&, thrust_params<T>&, shape) {}
  template <class T>
  static void forward(const L& l, const thrust_params<T>&, shape in, shape, std::size_t batch, const T* x, T* y) {
    thrust_kernels::per_sample<T>(batch, in.size(), x, y, layer_traits<L>::sample_map(l));
  }
};

/// Any element-wise map (ElementwiseMap) and any reshape-only op: no parameters on the device; the
/// op's scalar_map functor in one thrust::transform, or a copy.
template <class L>
  requires(ElementwiseMap<L> || reshape_only_v<L>)
struct thrust_layer<L> {
  static constexpr bool supported = true;
  template <class T>
  static void upload(const L&, thrust_params<T>&, shape) {}
  template <class T>
  static void forward(const L& l, const thrust_params<T>&, shape in, shape, std::size_t batch, const T* x, T* y) {
    if constexpr (ElementwiseMap<L>)
      thrust_kernels::map<T>(batch * in.size(), x, y, layer_traits<L>::scalar_map(l));
    else
      thrust_kernels::copy<T>(batch * in.size(), x, y);
  }
};

/// A composite op (Residual, Concat): device_network runs its branches' layers by their own
/// kernels and joins them (thrust_kernels::place); it has nothing of its own to upload.
template <class L>
  requires Composite<L>
struct thrust_layer<L> {
  static constexpr bool supported = true;
};

/// The diagnostic type named when a Sequential holds a layer without thrust kernels.
template <class L>
struct error_thrust_backend_has_no_kernel_for;

namespace detail {
template <class Net>
constexpr bool require_thrust_network() {
  return every_static_layer<Net>([](auto l) {
    using L = typename decltype(l)::type;
    return named_check<error_thrust_backend_has_no_kernel_for, L, ThrustLayer<L>>();
  });
}
}  // namespace detail

/// What device_network keeps per node of the op graph (network/graph.hpp's run_graph with this
/// view): the parameters its kernels read (thrust_layer<L>::upload; none for a join).
template <class T>
struct thrust_view {
  thrust_params<T> params;

  template <class L>
  static constexpr bool has_rule = ThrustLayer<L>;
  static std::string missing(const std::string& where, std::string_view name) {
    return detail::concat("nnlens::thrust: layer ", where, " (", name,
                          ") has no thrust kernels; run it with execution::seq or execution::par");
  }
  template <class Net>
  static constexpr bool require() {
    return detail::require_thrust_network<Net>();
  }
  template <class L>
  void make(const L& l, shape in, shape) {
    thrust_layer<L>::upload(l, params, in);
  }
};

/// T: the scalar on the device (the network's; a network without weights runs in any).
template <class Net, class T_ = network_scalar_t<Net>>
class device_network {
 public:
  using T = T_;
  using graph_type = run_graph<T, thrust_view<T>>;
  static_assert(detail::require_thrust_network<Net>(),
                "nnlens::thrust: every layer needs thrust kernels (Dense, Conv2D, a pooling window, an element-wise map, "
                "an element-wise affine op, a reshape-only op, a composite of those); the "
                "incomplete type 'error_thrust_backend_has_no_kernel_for<L>' in this diagnostic names the layer");

  explicit device_network(const Net& net) : net_(&net), g_(net) {
    for (const auto& nd : g_.nodes()) has_join_ = has_join_ || nd.is_join();
  }

  const Net& network() const { return *net_; }
  /// The op graph (network/graph.hpp): tensors [0] the input, then one per node; nodes in graph
  /// order, each with its parameters on the device (params).
  const graph_type& graph() const { return g_; }
  const std::vector<shape>& acts() const { return g_.acts(); }
  /// The tensor top-level layer i writes (value_error when out of range).
  std::size_t layer_tensor(std::size_t i) const { return g_.layer_tensor(i); }
  /// Whether the network is a plain chain (no composite op): tensor i + 1 is layer i's output.
  bool is_chain() const { return !has_join_; }
  /// Node k's parameters on the device.
  const thrust_params<T>& params(std::size_t k) const { return g_.nodes()[k].params; }
  /// layer(l, k, in, out) for every layer node k, join(k) for every join, in graph order (no device
  /// work); a Sequential's walk unrolls at compile time.
  template <class FL, class FJ>
  void visit_nodes(FL&& layer, FJ&& join) const {
    std::size_t k = 0;
    for_each_layer(*net_, [&](const auto& l, auto, shape in, shape out) { visit(l, in, out, k, layer, join); });
  }

  /// y = net(x) for `batch` samples, or its tensor `upto` (graph order: the output of the node
  /// upto - 1; 0: x itself); x and y are device pointers.  A chain runs in two scratch buffers, a
  /// network with joins keeps every tensor.  forward and run use scratch buffers of this object:
  /// one thread at a time per device_network (black boxes lock).
  void forward(std::size_t batch, const T* x, T* y, std::size_t upto = std::size_t(-1)) const {
    const auto& acts = g_.acts();
    upto = std::min(upto, acts.size() - 1);
    if (upto == 0) {
      thrust_kernels::copy<T>(batch * acts[0].size(), x, y);
      return;
    }
    if (has_join_) {  // every tensor (a branch reads its composite's input after the others ran)
      run(batch, x, all_, upto);
      thrust_kernels::copy<T>(batch * acts[upto].size(), detail::dptr(all_[upto]), y);
      return;
    }
    std::size_t max_act = 0;
    for (const shape& s : acts) max_act = std::max(max_act, s.size());
    T* bufs[2] = {detail::dptr(ping_, 2 * max_act * batch), detail::dptr(ping_) + max_act * batch};
    const T* cur = x;
    walk([&](const auto& l, std::size_t k, shape in, shape out) {
      if (k >= upto) return;
      T* dst = k + 1 == upto ? y : bufs[k % 2];
      thrust_layer<std::decay_t<decltype(l)>>::forward(l, params(k), in, out, batch, cur, dst);
      cur = dst;
    }, [](std::size_t) {});
  }

  /// Every tensor (graph order, acts()) up to tensor `upto` (default: all), resized as needed:
  /// acts[0] = a copy of x.
  void run(std::size_t batch, const T* x, std::vector<::thrust::device_vector<T>>& acts, std::size_t upto = std::size_t(-1)) const {
    const auto& shapes = g_.acts();
    const auto& nodes = g_.nodes();
    acts.resize(shapes.size());
    auto ptr = [&](std::size_t a) { return detail::dptr(acts[a], batch * shapes[a].size()); };
    thrust_kernels::copy<T>(batch * shapes[0].size(), x, ptr(0));
    walk([&](const auto& l, std::size_t k, shape in, shape out) {
      if (nodes[k].out <= upto)
        thrust_layer<std::decay_t<decltype(l)>>::forward(l, params(k), in, out, batch, ptr(nodes[k].in), ptr(nodes[k].out));
    }, [&](std::size_t k) {
      if (nodes[k].out > upto) return;
      const join_operands& j = nodes[k].operands;
      T* y = ptr(nodes[k].out);
      if (j.is_product()) return thrust_kernels::gate_multiply<T>(batch, j.sizes[0], j.sizes[1], ptr(j.ins[0]), ptr(j.ins[1]), y);
      for (std::size_t o = 0; o < j.ins.size(); ++o)
        thrust_kernels::place<T>(batch, shapes[nodes[k].out].size(), j.offsets[o], j.sizes[o], ptr(j.ins[o]), y,
                                 j.join == branch_join::sum && o > 0);
    });
  }

 private:
  /// visit_nodes, counted as a device pass (thrust_device_passes).
  template <class FL, class FJ>
  void walk(FL&& layer, FJ&& join) const {
    detail::thrust_pass_counter().fetch_add(1, std::memory_order_relaxed);
    visit_nodes(layer, join);
  }
  template <class L, class FL, class FJ>
  void visit(const L& l, shape in, shape out, std::size_t& k, FL& layer, FJ& join) const {
    if constexpr (Composite<L>) {
      layer_traits<L>::for_each_branch(l, in, [&](auto&& branch) {
        branch([&](const auto* lp, auto, shape i, shape o) { visit(*lp, i, o, k, layer, join); });
      });
      join(k++);
    } else if constexpr (ThrustLayer<L>) {
      layer(l, k++, in, out);
    }
  }

  const Net* net_;
  graph_type g_;
  bool has_join_ = false;
  mutable ::thrust::device_vector<T> ping_;
  mutable std::vector<::thrust::device_vector<T>> all_;
};

}  // namespace nnlens
