// nnlens/difftest/black_box.hpp -- a classifier seen only through its output probabilities.
//
// Differential testers (DFlare, DiffChaser) compare two classifiers that they may only query: a
// `black_box` is the pair (shape, predict) they need, whatever is behind it (a static Sequential,
// a DynamicNetwork read from a file, a quantised twin, an external process).
//
//   black_box f = wrap(net, "lenet5");                       // softmax of net's logits
//   black_box g = wrap(net, "lenet5", normalization::divide_by(255));  // inputs in [0,255]
//   black_box h = wrap([](std::span<const float> x, std::size_t n, std::span<float> p) {...},
//                      /*input_size*/ 784, /*classes*/ 10, "mine");
//   f.predict(x, n, probs);        // x: n * input_size floats, probs: n * classes floats
//   f(x, n, probs)                 // the same, with the sizes checked (shape_error)
//
// requires: predict is safe to call from several threads at once (wrap(net) is: the workspace is
//           thread-local); a wrapped network outlives the black box when passed as an lvalue (an
//           rvalue network is moved into the black box and owned by it).
// ensures:  wrap(net) writes softmax(net(preprocess(x))) row by row (a network whose last layer is
//           Softmax is not softmaxed twice); a non-finite output throws value_error.
//           predict may throw nnlens::error (e.g. a crashed external process): callers record it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "nnlens/core/error.hpp"
#include "nnlens/core/hd.hpp"
#include "nnlens/core/properties.hpp"
#include "nnlens/network/forward.hpp"
#include "nnlens/network/validate.hpp"
#include "nnlens/network/visit.hpp"

namespace nnlens::difftest {

/// A classifier seen as a black box: predict(x, n, probs) reads n inputs of input_size floats
/// (row-major, contiguous) and writes n * classes probabilities.  May throw nnlens::error.
struct black_box {
  std::size_t input_size = 0, classes = 0;
  std::function<void(std::span<const float> x, std::size_t n, std::span<float> probs)> predict;
  std::string name;

  /// predict with the sizes checked (shape_error naming the black box otherwise).
  void operator()(std::span<const float> x, std::size_t n, std::span<float> probs) const {
    if (!predict) throw logic_error(nnlens::detail::concat("black box '", name, "': no predict function"));
    if (x.size() != n * input_size || probs.size() != n * classes)
      throw shape_error(nnlens::detail::concat("black box '", name, "': ", n, " inputs need ", n * input_size, " input and ",
                                       n * classes, " output floats, got ", x.size(), " and ", probs.size()));
    predict(x, n, probs);
  }
};

/// Input preprocessing applied by wrap(net) before each query: x' = (x - mean[c]) / stddev[c], c
/// the channel (the first dimension of the network's input shape).  mean / stddev hold one value
/// (all channels) or one per channel; empty means 0 / 1.  DFlare mutates raw pixels in [0,255]:
/// a network trained on [0,1] takes divide_by(255); CIFAR-10 takes per-channel mean and std.
struct normalization {
  std::vector<float> mean, stddev;
  static normalization identity() { return {}; }
  static normalization divide_by(float d) { return {{}, {d}}; }
  bool is_identity() const {
    return std::all_of(mean.begin(), mean.end(), [](float m) { return m == 0.f; }) &&
           std::all_of(stddev.begin(), stddev.end(), [](float s) { return s == 1.f; });
  }
};

/// In-place numerically stable softmax of each row of `v` (rows of `classes` values).
template <class T>
void softmax_rows(std::span<T> v, std::size_t classes) {
  if (classes == 0) return;
  for (std::size_t r = 0; r + classes <= v.size(); r += classes) {
    T* p = v.data() + r;
    const T m = *std::max_element(p, p + classes);
    T s = T(0);
    for (std::size_t c = 0; c < classes; ++c) s += (p[c] = std::exp(p[c] - m));
    for (std::size_t c = 0; c < classes; ++c) p[c] /= s;
  }
}

namespace detail {

template <class Net>
bool ends_with_softmax(const Net& net) {
  const std::size_t n = layer_count(net);
  bool yes = false;
  for_each_layer(net, [&](const auto& l, auto idx, shape, shape) {
    if (std::size_t(idx) + 1 == n) yes = output_is_distribution_v<std::decay_t<decltype(l)>>;
  });
  return yes;
}

/// What wrap() checks and keeps of a network as a box (every backend's wrap): its sizes, and the
/// normalization per input channel.
struct box_layout {
  std::size_t input_size = 0, classes = 0, per_channel = 1;  // per_channel: inputs per channel
  std::vector<float> mean, stddev;                            // one per channel
  bool plain = true, softmaxed = false;                       // identity normalization; ends in a distribution
};

template <class Net>
box_layout box_layout_of(const Net& net, const std::string& name, const normalization& norm) {
  using nnlens::detail::concat;
  check_shapes(net);
  const shape in = input_shape_of(net);
  box_layout b;
  b.input_size = in.size(), b.classes = output_shape_of(net).size();
  const std::size_t channels = in.rank ? in[0] : 1, ch = std::max<std::size_t>(1, channels);
  if (b.input_size == 0 || b.classes == 0) throw shape_error(concat("wrap '", name, "': the network has an empty input or output"));
  for (const auto* v : {&norm.mean, &norm.stddev})
    if (v->size() > 1 && v->size() != channels)
      throw shape_error(concat("wrap '", name, "': normalization has ", v->size(), " values for ", channels, " channels"));
  for (float s : norm.stddev)
    if (!(s != 0.f) || !std::isfinite(s)) throw value_error(concat("wrap '", name, "': normalization stddev ", s));
  b.per_channel = std::max<std::size_t>(1, b.input_size / ch);
  b.mean.assign(ch, 0.f), b.stddev.assign(ch, 1.f);
  for (std::size_t c = 0; c < ch; ++c) {
    if (!norm.mean.empty()) b.mean[c] = norm.mean[norm.mean.size() == 1 ? 0 : c];
    if (!norm.stddev.empty()) b.stddev[c] = norm.stddev[norm.stddev.size() == 1 ? 0 : c];
  }
  b.plain = norm.is_identity(), b.softmaxed = ends_with_softmax(net);
  return b;
}

/// y[i] = (x[i] - mean[c]) / stddev[c], c the channel of element i of its sample (every backend).
template <class T>
struct normalize_op {
  const float* x;
  T* y;
  const float* mean;
  const float* stddev;
  std::size_t input_size, per_channel;
  NNLENS_HD void operator()(std::size_t i) const {
    const std::size_t c = (i % input_size) / per_channel;
    y[i] = T((x[i] - mean[c]) / stddev[c]);
  }
};

/// The probabilities of logits y (softmax unless the network ends in one) into probs, samples
/// first, first + 1, ... (every backend): value_error naming the black box and a sample whose
/// output is not finite.
template <class T>
void box_outputs(std::span<T> y, const box_layout& L, const std::string& name, std::size_t first, std::span<float> probs) {
  if (!L.softmaxed) softmax_rows(y, L.classes);
  for (std::size_t i = 0; i < y.size(); ++i) {
    if (!std::isfinite(y[i]))
      throw value_error(nnlens::detail::concat("black box '", name, "': output of sample ", first + i / L.classes, " is not finite"));
    probs[first * L.classes + i] = float(y[i]);
  }
}

template <class Net>
black_box wrap_shared(std::shared_ptr<const Net> net, std::string name, const normalization& norm) {
  using T = network_scalar_t<Net>;
  const box_layout L = box_layout_of(*net, name, norm);
  black_box b;
  b.input_size = L.input_size;
  b.classes = L.classes;
  b.name = name;
  b.predict = [net = std::move(net), L, name](std::span<const float> x, std::size_t n, std::span<float> probs) {
    thread_local std::vector<T> xin, y, ws;
    const std::size_t isz = L.input_size, classes = L.classes;
    xin.resize(n * isz);
    y.resize(n * classes);
    const normalize_op<T> norm{x.data(), xin.data(), L.mean.data(), L.stddev.data(), isz, L.per_channel};
    if (L.plain)
      std::copy_n(x.data(), n * isz, xin.data());
    else
      for (std::size_t i = 0; i < n * isz; ++i) norm(i);
    const std::size_t need = inference_workspace_size(*net, n);
    if (ws.size() < need) ws.resize(need);
    forward_into(*net, n, xin.data(), y.data(), std::span<T>(ws));
    box_outputs(std::span<T>(y), L, name, 0, probs);
  };
  return b;
}

/// The network a wrap() keeps: an lvalue is referenced (non-owning), an rvalue moved in.
template <class Net>
std::shared_ptr<const std::remove_cvref_t<Net>> hold_network(Net&& net) {
  using N = std::remove_cvref_t<Net>;
  if constexpr (std::is_lvalue_reference_v<Net>)
    return std::shared_ptr<const N>(std::shared_ptr<const N>{}, &net);  // non-owning
  else
    return std::make_shared<const N>(std::move(net));
}

}  // namespace detail

/// A network (Sequential or DynamicNetwork) as a black box: softmax of its logits on the
/// normalised input.  An lvalue network is referenced (it must outlive the black box); an rvalue
/// is moved in.  Throws shape_error if the weights do not fit the network.
template <class Net>
  requires requires(const std::remove_cvref_t<Net>& n) { output_shape_of(n); }
black_box wrap(Net&& net, std::string name = {}, normalization norm = {}) {
  using N = std::remove_cvref_t<Net>;
  return detail::wrap_shared<N>(detail::hold_network(std::forward<Net>(net)), std::move(name), std::move(norm));
}

/// Any callable as a black box.  `f` is either batched, f(span<const float> x, size_t n,
/// span<float> probs), or per sample, f(span<const float> x, span<float> probs); it must write
/// probabilities (apply softmax_rows to logits first).
template <class F>
  requires std::is_invocable_v<F&, std::span<const float>, std::size_t, std::span<float>> ||
           std::is_invocable_v<F&, std::span<const float>, std::span<float>>
black_box wrap(F f, std::size_t input_size, std::size_t classes, std::string name = {}) {
  if (input_size == 0 || classes == 0)
    throw shape_error(nnlens::detail::concat("wrap '", name, "': input_size and classes must be positive"));
  black_box b;
  b.input_size = input_size;
  b.classes = classes;
  b.name = std::move(name);
  if constexpr (std::is_invocable_v<F&, std::span<const float>, std::size_t, std::span<float>>) {
    b.predict = std::move(f);
  } else {
    b.predict = [f = std::move(f), input_size, classes](std::span<const float> x, std::size_t n, std::span<float> probs) mutable {
      for (std::size_t i = 0; i < n; ++i) f(x.subspan(i * input_size, input_size), probs.subspan(i * classes, classes));
    };
  }
  return b;
}

}  // namespace nnlens::difftest
