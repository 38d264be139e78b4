// nnlens/thrust/relevance.hpp -- layer-wise relevance propagation (LRP) on the thrust device
// system.
//
//   auto R = relevance(nnlens::execution::thrust, net, X, layer, {.rule = lrp_rule::zplus}, classes);
//   device_lrp<Net> d(net, options);      the device network plus one LRP step per node
//   const double* r = d.run(nb, x, stop, cls)   forward (every tensor kept) and relevance of nb
//                                         samples at device pointer x down to tensor `stop` of
//                                         the op graph (network/graph.hpp), from the logit of
//                                         cls[s] (device) or of the predicted class (cls null);
//                                         r: device [nb, size of tensor stop]
//
// requires: every layer has thrust kernels and a device LRP step, by its relevance_rule's form: a
//           weight layer, a pooling window, an element-wise affine op (a BatchNorm right after a
//           Conv2D or Dense folds into it as on the host), the pass-through form (nothing runs),
//           or a composite of those (at most 8 branches per join).  Otherwise a Sequential is a
//           compile error naming the layer; a DynamicNetwork gets logic_error naming it.
// ensures:  the host relevance() of coverage/lrp.hpp: every lrp_options rule, any `layer` stop, the
//           predicted or given classes, the same errors.  policy.batch samples per pass: the
//           forward pass in T, the relevance in double with the host's formulas in its order per
//           input, so equal activations give equal relevance bit for bit (MLPs, ACAS Xu, double
//           networks in the tests); elsewhere the forward pass's float rounding (LeNet-5 in float:
//           1.5e-8 relative to max |R|).  No atomics: independent of the thread count.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <thrust/copy.h>
#include <thrust/device_vector.h>
#include <thrust/fill.h>

#include "nnlens/core/error.hpp"
#include "nnlens/core/finite.hpp"
#include "nnlens/core/relevance.hpp"
#include "nnlens/coverage/lrp.hpp"
#include "nnlens/network/validate.hpp"
#include "nnlens/thrust/lrp_kernels.hpp"
#include "nnlens/thrust/network.hpp"
#include "nnlens/thrust/policy.hpp"

namespace nnlens {

/// The LRP step of a layer on the device (specialised below).  A weighted step has
/// upload(l, params) and backward(l, params, in, out, nb, x, z, r_out, r_in, scratch, rule); a
/// pass-through step has passthrough = true (R_in = R_out).
template <class L>
struct thrust_lrp_layer;

template <class L>
concept ThrustLrpLayer = requires { thrust_lrp_layer<L>::supported; };

/// Per-output value buffers of one pass (thrust/lrp_kernels.hpp), [nb, layer output size]; fn
/// null unless alpha_beta, bs null unless epsilon with bias redistribution.
struct thrust_lrp_scratch {
  double *fp = nullptr, *fn = nullptr, *bs = nullptr;
  const double *fold_scale = nullptr, *fold_shift = nullptr;  // a BatchNorm folded into this layer (per channel)
};

/// A weight layer (Dense, Conv2D): the affine rules with W as the host keeps a convolution's,
/// [O, C/groups, kh, kw]; a Dense is the 1 x 1 convolution of its inputs (W transposed: [O, I]).
template <class L>
  requires(thrust_dense_like<L> || thrust_conv_like<L>)
struct thrust_lrp_layer<L> {
  using T = typename L::scalar_type;
  static constexpr bool supported = true, passthrough = false;
  static void upload(const L& l, thrust_params<T>& p, shape) {
    if constexpr (thrust_conv_like<L>) {
      p.W.assign(l.W.data(), l.W.data() + l.W.size());
    } else {
      const std::size_t I = l.W.shape(0), O = l.W.shape(1);
      std::vector<T> wt(I * O);
      for (std::size_t j = 0; j < I; ++j)
        for (std::size_t k = 0; k < O; ++k) wt[k * I + j] = l.W.data()[j * O + k];
      p.W.assign(wt.begin(), wt.end());
    }
    p.b.assign(l.b.data(), l.b.data() + l.b.size());
  }
  static void backward(const L& l, const thrust_params<T>& p, shape in, shape out, std::size_t nb, const T* x, const T* z,
                       const double* r_out, double* r_in, const thrust_lrp_scratch& s, const lrp_options& rule) {
    const auto d = thrust_layer<L>::dims(l, in, out);  // a Dense: its 1 x 1 convolution
    const T* W = detail::dptr(p.W);
    const T* b = detail::dptr(p.b);
    thrust_kernels::lrp_conv_factors<T>(nb, d, x, W, b, z, r_out, s.fp, s.fn, s.bs, rule, s.fold_scale, s.fold_shift);
    thrust_kernels::lrp_conv_gather<T>(nb, d, x, W, r_out, s.fp, s.fn, s.bs, r_in, rule, s.fold_scale);
  }
};

/// A pooling window (PoolingWindow): max, winner-take-all with ties split; mean, the affine
/// rules with weights 1 / divisor and no bias (the host's relevance_rule of AvgPool2D).
template <class L>
  requires PoolingWindow<L>
struct thrust_lrp_layer<L> {
  static constexpr bool supported = true, passthrough = false;
  template <class T>
  static void upload(const L&, thrust_params<T>&, shape) {}
  template <class T>
  static void backward(const L& l, const thrust_params<T>&, shape in, shape out, std::size_t nb, const T* x, const T* z,
                       const double* r_out, double* r_in, const thrust_lrp_scratch&, const lrp_options& rule) {
    if constexpr (pool_reduction_v<L> == pool_reduce::max)
      thrust_kernels::lrp_max_pool<T>(nb, thrust_layer<L>::dims(l, in, out), x, r_out, r_in);
    else
      thrust_kernels::lrp_avg_pool<T>(nb, thrust_layer<L>::dims(l, in, out), x, z, r_out, r_in, rule);
  }
};

/// An element-wise affine op (ElementwiseAffine: BatchNorm, Affine) whose relevance_rule is the
/// affine rules with w = scale, b = shift - scale * center (the property's contract), computed in
/// double as the host's rule computes them; one input per output.  (A BatchNorm right after a
/// Conv2D or Dense is folded into that layer by device_lrp instead, as the host's lrp_engine does.)
template <class L>
  requires(ElementwiseAffine<L> && RelevanceLayer<L>)
struct thrust_lrp_layer<L> {
  static constexpr bool supported = true, passthrough = false;
  template <class T>
  static void upload(const L& l, thrust_params<T>& p, shape in) {
    const affine_coefficients<double> c = layer_traits<L>::template elementwise_affine<double>(l, in);
    std::vector<double> bias(c.shift.size());
    for (std::size_t k = 0; k < bias.size(); ++k)
      bias[k] = c.center.empty() ? c.shift[k] : c.shift[k] - c.scale[k] * c.center[k];
    p.lrp_w.assign(c.scale.begin(), c.scale.end());
    p.lrp_b.assign(bias.begin(), bias.end());
  }
  template <class T>
  static void backward(const L&, const thrust_params<T>& p, shape in, shape, std::size_t nb, const T* x, const T* z,
                       const double* r_out, double* r_in, const thrust_lrp_scratch&, const lrp_options& rule) {
    const std::size_t E = in.size();
    thrust_kernels::lrp_scale_shift<T>(nb, E, E / p.lrp_w.size(), x, z, r_out, r_in, detail::dptr(p.lrp_w), detail::dptr(p.lrp_b),
                                       rule);
  }
};

/// The pass-through form of relevance_rule (R_in = R_out, element n to element n), any op.
template <class L>
  requires requires { requires relevance_rule<L>::passthrough; }
struct thrust_lrp_layer<L> {
  static constexpr bool supported = true, passthrough = true;
};

/// A composite op (Residual, Concat): device_lrp runs its branches' inner layers by their own
/// steps and its join by thrust_kernels::lrp_join (an inner layer without a step is the thrust
/// logic_error naming it and its place when the device_lrp is made).
template <class L>
  requires Composite<L>
struct thrust_lrp_layer<L> {
  static constexpr bool supported = true, passthrough = false;
};

/// The diagnostic type named when a Sequential holds a thrust layer without a device LRP step.
template <class L>
struct error_thrust_lrp_has_no_step_for;

namespace detail {
/// (A layer without thrust kernels passes: device_network's static_assert names it.)
template <class Net>
constexpr bool require_thrust_lrp_network() {
  return every_static_layer<Net>([](auto l) {
    using L = typename decltype(l)::type;
    return named_check<error_thrust_lrp_has_no_step_for, L, !ThrustLayer<L> || ThrustLrpLayer<L>>();
  });
}
}  // namespace detail

template <class Net>
class device_lrp {
 public:
  using T = network_scalar_t<Net>;
  static_assert(detail::require_thrust_lrp_network<Net>(),
                "nnlens::thrust LRP: every layer needs a device LRP step (Dense, Conv2D, a pooling window, an element-wise "
                "affine op, a pass-through relevance rule); the "
                "incomplete type 'error_thrust_lrp_has_no_step_for<L>' in this diagnostic names the layer");

  /// Uploads the network (device_network: logic_error for a layer without thrust kernels) and
  /// the weights the LRP steps read, one step per node of the op graph (network/graph.hpp: a
  /// composite's inner layers and its join).  requires: check_shapes(net) passed.
  device_lrp(const Net& net, const lrp_options& o) : dnet_(net), rule_(o) {
    const auto& nodes = dnet_.graph().nodes();
    steps_.resize(nodes.size());
    dnet_.visit_nodes(
        [&](const auto& l, std::size_t k, shape in, shape out) {
          using L = std::decay_t<decltype(l)>;
          step& s = steps_[k];
          if constexpr (ThrustLrpLayer<L> && !Composite<L>) {
            relevance_view<T> v;  // the host's reading of the rule: folding, and a fold's coefficients
            v.make(l, in, out);
            s.passthrough = thrust_lrp_layer<L>::passthrough;
            s.accepts_fold = v.accepts_fold, s.folds = !v.fold_scale.empty();
            s.fold_scale.assign(v.fold_scale.begin(), v.fold_scale.end());
            s.fold_shift.assign(v.fold_shift.begin(), v.fold_shift.end());
            if constexpr (!thrust_lrp_layer<L>::passthrough) thrust_lrp_layer<L>::upload(l, s.params, in);
          } else {
            throw logic_error(detail::concat("nnlens::thrust: layer ", nodes[k].name,
                                             " has no device LRP step; run relevance with execution::seq or execution::par"));
          }
        },
        [&](std::size_t k) {
          const join_operands& j = nodes[k].operands;
          if (j.ins.size() > thrust_kernels::lrp_join_max)
            throw logic_error(detail::concat("nnlens::thrust LRP: a join of ", j.ins.size(), " branches (at most ",
                                             thrust_kernels::lrp_join_max, " on the device)"));
          for (std::size_t q = 0; q < j.ins.size(); ++q)
            if (std::count(j.ins.begin(), j.ins.end(), j.ins[q]) > 1)
              throw logic_error("nnlens::thrust LRP: two branches of a composite end in the same tensor (two empty branches)");
          steps_[k].join = true;
        });
    for (std::size_t a = 0; a < acts().size(); ++a) acc_.push_back(dnet_.graph().readers(a) > 1);
  }

  /// Tensor shapes, as the op graph numbers them (device_network::acts(): 0 the input).
  const std::vector<shape>& acts() const { return dnet_.acts(); }
  const device_network<Net>& network() const { return dnet_; }
  /// Device pointer to tensor a of the last run ([nb, acts()[a].size()]).
  const T* tensor(std::size_t a) const { return detail::dptr(bufs_[a]); }

  /// Forward pass of nb samples at device pointer x, then relevance from the logit of cls[s]
  /// (device; null: the predicted class) down to tensor `stop`, node by node backwards as the
  /// host's lrp_engine.  Returns a device pointer to R of that tensor, [nb, acts()[stop].size()],
  /// valid until the next run.
  const double* run(std::size_t nb, const T* x, std::size_t stop, const std::size_t* cls = nullptr) {
    dnet_.run(nb, x, bufs_);
    const auto& acts = this->acts();
    const std::size_t A = acts.size();
    const bool fn = rule_.rule == lrp_rule::alpha_beta, bs = rule_.rule == lrp_rule::epsilon && rule_.bias_redistribution;
    const auto& nodes = dnet_.graph().nodes();
    std::size_t need_f = 0, need_t = 0;  // scratch for the steps at or above `stop`
    for (std::size_t k = 0; k < steps_.size(); ++k)
      if (nodes[k].out > stop && !steps_[k].join && !steps_[k].passthrough) {
        need_f = std::max(need_f, acts[nodes[k].out].size());
        if (acc_[nodes[k].in]) need_t = std::max(need_t, acts[nodes[k].in].size());
      }
    detail::dptr(tmp_, nb * need_t);
    const thrust_lrp_scratch sc{detail::dptr(fp_, nb * need_f), fn ? detail::dptr(fn_, nb * need_f) : nullptr,
                                bs ? detail::dptr(bs_, nb * need_f) : nullptr};
    // R of tensor a: its own buffer (rbuf), or the buffer of the tensor it passed through from
    // (a pass-through or folded node whose input only it reads: no copy)
    r_.resize(A);
    std::vector<double*> rp(A, nullptr);
    auto rbuf = [&](std::size_t a) { return detail::dptr(r_[a], nb * acts[a].size()); };
    for (std::size_t a = stop; a < A; ++a)
      if (acc_[a]) {
        rp[a] = rbuf(a);
        ::thrust::fill(r_[a].begin(), r_[a].begin() + std::ptrdiff_t(nb * acts[a].size()), 0.0);
      }
    rp[A - 1] = rbuf(A - 1);
    thrust_kernels::lrp_start<T>(nb, acts[A - 1].size(), tensor(A - 1), cls, rp[A - 1]);
    std::size_t fold_from = std::size_t(-1);  // the node whose output a folding BatchNorm took over
    // the nodes last first: for a Sequential a compile-time fold (network/graph.hpp's
    // for_each_node_reverse) calling each layer's device step directly
    for_each_node_reverse(dnet_.network(), steps_.size(), [&](std::size_t k, const auto& l, shape lin, shape lout) {
      using L = std::remove_cvref_t<decltype(l)>;
      const std::size_t in = nodes[k].in, out = nodes[k].out;
      if (out <= stop) return false;  // topological order: all below `stop` is upstream
      const double* R = rp[out];
      const step& st = steps_[k];
      if constexpr (is_join_node_v<L>) {
        (void)l, (void)lin, (void)lout;
        const join_operands& j = nodes[k].operands;
        thrust_kernels::lrp_join_op<T> op;
        // the operands that receive relevance (a product: the signal alone, as a copy), the others none
        const std::size_t K = j.relevance_operands();
        op.R = R, op.out = acts[out].size(), op.K = K, op.eps = rule_.epsilon;
        for (std::size_t q = 0; q < j.ins.size(); ++q) {
          const std::size_t a = j.ins[q];
          if (!rp[a]) rp[a] = rbuf(a);
          if (q < K)
            op.x[q] = tensor(a), op.r[q] = rp[a], op.off[q] = j.offsets[q], op.size[q] = j.sizes[q], op.add[q] = acc_[a];
          else if (!acc_[a])
            ::thrust::fill(::thrust::device, rp[a], rp[a] + nb * acts[a].size(), 0.0);
        }
        thrust_kernels::lrp_join<T>(nb, op);
        return true;
      } else if constexpr (!ThrustLrpLayer<L>) {
        (void)l, (void)lin, (void)lout, (void)R, (void)st;
        return false;  // not reached: the constructor refuses a layer without a device step
      } else {
        const bool folds = st.folds && k > 0 && steps_[k - 1].accepts_fold && nodes[k - 1].out == in && !acc_[in] && in != stop;
        if (thrust_lrp_layer<L>::passthrough || folds) {  // R_in = R_out
          if (acc_[in])
            thrust_kernels::lrp_add(nb * acts[in].size(), R, rp[in]);
          else
            rp[in] = const_cast<double*>(R);
          if (folds) fold_from = k;
          return true;
        }
        if constexpr (!thrust_lrp_layer<L>::passthrough) {
          thrust_lrp_scratch si = sc;
          const T* z = tensor(out);
          if (fold_from == k + 1) {  // the folded pair: the BatchNorm's output and coefficients
            z = tensor(nodes[k + 1].out);
            si.fold_scale = detail::dptr(steps_[k + 1].fold_scale);
            si.fold_shift = detail::dptr(steps_[k + 1].fold_shift);
            fold_from = std::size_t(-1);
          }
          // R_in: its own buffer (tensors are numbered in creation order, so in < out and R_out's
          // buffer, r_[out] or one it passed through from, is another), or the scratch when R_in is a sum
          double* dst = acc_[in] ? detail::dptr(tmp_) : (rp[in] = rbuf(in));
          thrust_lrp_layer<L>::backward(l, st.params, lin, lout, nb, tensor(in), z, R, dst, si, rule_);
          if (acc_[in]) thrust_kernels::lrp_add(nb * acts[in].size(), dst, rp[in]);
        }
        return true;
      }
    });
    return rp[stop];
  }

 private:
  struct step {
    bool join = false, passthrough = false;
    bool folds = false, accepts_fold = false;  // relevance_rule: folds_into_previous, accepts_fold
    ::thrust::device_vector<double> fold_scale, fold_shift;  // a folding node's, per channel
    thrust_params<T> params;  // what the step's kernels read (thrust_lrp_layer<L>::upload)
  };
  device_network<Net> dnet_;
  lrp_options rule_;
  std::vector<step> steps_;
  std::vector<bool> acc_;  // tensor a is read by several nodes: its R is a sum (zeroed, then added)
  std::vector<::thrust::device_vector<T>> bufs_;
  std::vector<::thrust::device_vector<double>> r_;
  ::thrust::device_vector<double> fp_, fn_, bs_, tmp_;
};

/// Relevance of every element of the output of top-level layer `layer` (lrp_input: the input) for
/// each sample of X, on the device; the host relevance() of coverage/lrp.hpp otherwise.
template <class Net, class A>
xt::xarray<double> relevance(const execution::thrust_policy& policy, const Net& net, const A& X, std::size_t layer = lrp_input,
                             const lrp_options& o = {}, std::span<const std::size_t> classes = {}) {
  using T = network_scalar_t<Net>;
  check_shapes(net);
  device_lrp<Net> d(net, o);
  const auto& acts = d.acts();
  const shape in = acts[0];
  const std::size_t n = detail::relevance_rows<T>(in, acts.back().size(), X, classes);
  const std::size_t stop = d.network().layer_tensor(layer);
  const shape st = acts[stop];
  xt::xarray<double> R = xt::xarray<double>::from_shape(st.with_batch(n));
  if (n == 0) return R;
  const std::size_t pass = std::max<std::size_t>(1, std::min(policy.batch, n));
  ::thrust::device_vector<T> dx(pass * in.size());
  ::thrust::device_vector<std::size_t> dc(classes.empty() ? 0 : pass);
  for (std::size_t b0 = 0; b0 < n; b0 += pass) {
    const std::size_t nb = std::min(pass, n - b0);
    ::thrust::copy(X.data() + b0 * in.size(), X.data() + (b0 + nb) * in.size(), dx.begin());
    if (!classes.empty()) ::thrust::copy(classes.begin() + std::ptrdiff_t(b0), classes.begin() + std::ptrdiff_t(b0 + nb), dc.begin());
    const double* r = d.run(nb, detail::dptr(dx), stop, classes.empty() ? nullptr : detail::dptr(dc));
    ::thrust::copy(::thrust::device_pointer_cast(r), ::thrust::device_pointer_cast(r) + std::ptrdiff_t(nb * st.size()),
                   R.data() + b0 * st.size());
  }
  return R;
}

}  // namespace nnlens
