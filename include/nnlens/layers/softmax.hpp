// nnlens/layers/softmax.hpp -- Softmax over the features of a rank-1 input: y_i = e^{x_i} / sum_j e^{x_j}.
//
// An output layer only: it is not piecewise-linear, so it has no pwl_rule / sign_rule and the
// analyses that need them reject it at compile time (apply them to the logits before it).
// requires: a rank-1 input (infer rejects images; insert Flatten before it).
// ensures:  numerically stable (the row maximum is subtracted before exp, so logits of 1e4 or
//           -1e4 give finite results; each row sums to 1 up to rounding).
//           backward is the Jacobian-vector product dx_i = y_i (dy_i - sum_j y_j dy_j), computed
//           from the forward output y (no cache, no scratch).
#pragma once

#include <algorithm>
#include <cmath>

#include "nnlens/core/error.hpp"
#include "nnlens/core/codegen_form.hpp"
#include "nnlens/core/traits.hpp"
#include "nnlens/core/onnx_form.hpp"
#include "nnlens/core/properties.hpp"
#include "nnlens/layers/flatten.hpp"

namespace nnlens {

struct Softmax {};

template <>
struct layer_traits<Softmax> : layer_defaults {
  static constexpr std::string_view name = "Softmax";
  static constexpr bool output_is_distribution = true;  // core/properties.hpp
  static constexpr shape_check infer(shape in) {
    if (in.rank != 1) return {{}, "Softmax works on the features of a flat (rank-1) input; insert Flatten before it"};
    return {in, nullptr};
  }
  static shape output_shape(const Softmax&, shape in) {
    if (in.rank != 1)
      throw shape_error(detail::concat("Softmax needs a flat (rank-1) input, got ", in.str(), "; insert Flatten"));
    return in;
  }

  /// One sample's softmax (core/properties.hpp, SampleMap): the forward below and the thrust
  /// backend's kernel (one work item per sample).
  struct normalise {
    template <class T>
    NNLENS_HD void operator()(const T* x, T* y, std::size_t F) const {
      using std::exp;
      if (F == 0) return;
      T m = x[0];
      for (std::size_t i = 1; i < F; ++i) m = x[i] > m ? x[i] : m;
      T s = T(0);
      for (std::size_t i = 0; i < F; ++i) {
        y[i] = exp(x[i] - m);
        s += y[i];
      }
      for (std::size_t i = 0; i < F; ++i) y[i] /= s;  // s >= 1: the maximum contributes exp(0)
    }
  };
  static constexpr normalise sample_map(const Softmax&) { return {}; }

  template <class T>
  static void forward(const Softmax&, const forward_args<T>& a) {
    const std::size_t F = a.in[0];
    for (std::size_t n = 0; n < a.batch; ++n) normalise{}(a.x + n * F, a.y + n * F, F);
  }
  /// dx = J^T dy with J = diag(y) - y y^T.
  template <class T>
  static void backward(const Softmax&, const backward_args<T>& a, Softmax*) {
    if (!a.dx) return;
    const std::size_t F = a.in[0];
    for (std::size_t n = 0; n < a.batch; ++n) {
      const T* y = a.y + n * F;
      const T* dy = a.dy + n * F;
      T* dx = a.dx + n * F;
      T dot = T(0);
      for (std::size_t i = 0; i < F; ++i) dot += y[i] * dy[i];
      for (std::size_t i = 0; i < F; ++i) dx[i] = y[i] * (dy[i] - dot);
    }
  }
};


// ---- io forms: codegen spelling, ONNX Softmax (over all features of a sample) both ways
template <>
struct codegen_rule<Softmax> : detail::codegen_plain<Softmax> {};
template <>
struct onnx_export_rule<Softmax> {
  static std::string emit(const Softmax&, onnx_sink& s, const std::string& x, shape, shape) {
    return s.node("Softmax", {x}, {{"axis", std::int64_t(-1)}});
  }
};
template <>
struct onnx_import_rule<Softmax> {
  static constexpr std::string_view ops[] = {"Softmax"};
  template <class Emit>
  static void build(onnx_node_view& n, Emit&& emit) {
    const std::vector<std::int64_t> d = n.input_dims();
    const bool batch = n.batch_axis();
    const std::int64_t r = std::int64_t(d.size()) + (batch ? 1 : 0);
    std::int64_t axis = n.attr_i("axis", n.opset() >= 13 ? -1 : 1);
    if (axis < 0) axis += r;
    const bool ok = batch ? (axis == 1 && (n.opset() < 13 || d.size() == 1)) : (axis == 0 && d.size() == 1);
    if (!ok || n.padded()) n.fail("only a softmax over all features of a sample is supported");
    if (n.input_shape().rank != 1) emit(Flatten{});
    emit(Softmax{});
    n.set_output_dims(d);
  }
};

}  // namespace nnlens
