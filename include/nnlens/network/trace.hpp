// nnlens/network/trace.hpp -- forward passes that keep every activation, and backward passes.
//
//   trace<T> tr;                       reusable buffers (grow once, then no allocation)
//   forward_trace(net, batch, x, tr)   runs the net, keeping activation(i) for i = 0..layers
//                                      (activation(0) is the input) and each layer's cache
//   backward(net, tr, dy, grads, dx)   dy: dL/d(output) [batch, out]; ADDS parameter gradients
//                                      into `grads` (a zeros_like(net), or nullptr) and writes
//                                      dL/dx into dx (or nullptr)
//
// Analyses read intermediate activations through tr.activation(i) / tr.shape(i); both network
// forms give the same layout.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

#include "nnlens/network/parameters.hpp"

namespace nnlens {

template <class T>
class trace {
 public:
  std::size_t batch() const { return batch_; }
  std::size_t layers() const { return shapes_.empty() ? 0 : shapes_.size() - 1; }
  /// Per-sample shape of activation i (0 = input, layers() = output).
  shape shape_at(std::size_t i) const { return shapes_.at(i); }
  /// Activation i as a flat [batch * shape(i).size()] span.
  std::span<T> activation(std::size_t i) { return {buf_.data() + act_off_.at(i), batch_ * shapes_[i].size()}; }
  std::span<const T> activation(std::size_t i) const {
    return {buf_.data() + act_off_.at(i), batch_ * shapes_[i].size()};
  }
  std::span<const T> output() const { return activation(layers()); }
  /// Elements held (activations, caches, scratch and gradient buffers of the last prepare()).
  std::size_t elements() const { return buf_.size(); }
  /// Activation i as an xtensor container [batch, shape...] (a copy).
  xt::xarray<T> activation_array(std::size_t i) const {
    auto a = activation(i);
    xt::xarray<T> r = xt::xarray<T>::from_shape(shapes_[i].with_batch(batch_));
    std::copy(a.begin(), a.end(), r.begin());
    return r;
  }

  // -- used by forward_trace / backward --
  template <class Net>
  void prepare(const Net& net, std::size_t batch) {
    batch_ = batch;
    const std::size_t n = layer_count(net);
    shapes_.resize(n + 1);
    act_off_.resize(n + 1);
    cache_off_.resize(n + 1);
    std::size_t off = 0, scratch = 0, max_act = 0;
    shapes_[0] = input_shape_of(net);
    act_off_[0] = 0;
    off += batch * shapes_[0].size();
    for_each_layer(net, [&](const auto& l, auto idx, shape in, shape out) {
      using L = std::decay_t<decltype(l)>;
      const std::size_t i = idx;
      shapes_[i + 1] = out;
      act_off_[i + 1] = off;
      off += batch * out.size();
      cache_off_[i] = off;
      off += batch * layer_traits<L>::cache_size(&l, in, out);
      scratch = std::max(scratch, layer_traits<L>::scratch_size(&l, in, out, batch));
      max_act = std::max({max_act, in.size(), out.size()});
    });
    cache_off_[n] = off;
    scratch_off_ = off;
    off += scratch;
    grad_off_ = off;
    off += 2 * batch * max_act;
    if (buf_.size() < off) buf_.resize(off);
    max_act_ = max_act;
  }
  T* act_ptr(std::size_t i) { return buf_.data() + act_off_[i]; }
  T* cache_ptr(std::size_t i) { return buf_.data() + cache_off_[i]; }
  T* scratch_ptr() { return buf_.data() + scratch_off_; }
  T* grad_buf(std::size_t k) { return buf_.data() + grad_off_ + k * batch_ * max_act_; }

 private:
  std::size_t batch_ = 0, scratch_off_ = 0, grad_off_ = 0, max_act_ = 0;
  std::vector<shape> shapes_;
  std::vector<std::size_t> act_off_, cache_off_;
  std::vector<T> buf_;
};

/// Forward pass keeping every activation and cache (for backward and for analyses).
template <class Net, class T>
void forward_trace(const Net& net, std::size_t batch, const T* x, trace<T>& tr) {
  tr.prepare(net, batch);
  std::copy_n(x, batch * input_shape_of(net).size(), tr.act_ptr(0));
  for_each_layer(net, [&](const auto& l, auto idx, shape in, shape out) {
    using L = std::decay_t<decltype(l)>;
    const std::size_t i = idx;
    layer_traits<L>::forward(l, forward_args<T>{in, out, batch, tr.act_ptr(i), tr.act_ptr(i + 1), tr.cache_ptr(i),
                                                tr.scratch_ptr()});
  });
}

/// Backward pass after forward_trace.  See the header comment.
template <class Net, class T>
void backward(const Net& net, trace<T>& tr, const T* dy, Net* grads, T* dx) {
  const std::size_t batch = tr.batch();
  const std::size_t n = layer_count(net);
  if (n == 0) {
    if (dx) std::copy_n(dy, batch * input_shape_of(net).size(), dx);
    return;
  }
  const T* cur = dy;
  int flip = 0;
  for_each_layer_reverse(net, [&](const auto& l, auto idx, shape in, shape out) {
    using L = std::decay_t<decltype(l)>;
    const std::size_t i = idx;
    T* dxi = i == 0 ? dx : tr.grad_buf(flip);
    L* g = grads ? &detail::layer_like<L>(*grads, idx) : nullptr;
    layer_traits<L>::backward(l,
                              backward_args<T>{in, out, batch, tr.act_ptr(i), tr.act_ptr(i + 1), cur, tr.cache_ptr(i), dxi,
                                               tr.scratch_ptr()},
                              g);
    cur = dxi;
    flip ^= 1;
  });
}

}  // namespace nnlens
