// nnlens/train/optimizer.hpp -- SGD (momentum, Nesterov, weight decay) and Adam, as PyTorch.
//
//   sgd  opt(net, {.lr = 0.01, .momentum = 0.9});     opt.step(net, grad [, &mask]);
//   adam opt(net, {.lr = 1e-3});                       opt.step(net, grad [, &mask]);
//
// `grad` is a gradient network of the same type (zeros_like(net), filled by backward()); the state
// (SGD's momentum buffer, Adam's first and second moments) is held as networks of the same type
// too, so it has the parameters' shapes.  The update formulas are torch.optim.SGD's and
// torch.optim.Adam's (PyTorch 2.x, single-tensor path, maximize = False, amsgrad = False):
//
//   SGD:   g = grad + wd * p
//          b = g (first step)  |  b = mu * b + (1 - dampening) * g
//          g = nesterov ? g + mu * b : b          (when mu != 0)
//          p = p - lr * g
//   Adam:  t = t + 1;  g = grad + wd * p                       (L2 decay, as Adam, not AdamW)
//          m = b1 * m + (1 - b1) * g;   v = b2 * v + (1 - b2) * g * g
//          p = p - (lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
//
// Scalars (lr, betas, bias corrections) are computed in double and rounded once to the network's
// scalar type, as PyTorch does with Python floats.
// With a parameter_mask, frozen parameters and their optimiser state are not touched at all.
// requires: grad (and the mask) have net's parameter tensors; throws shape_error otherwise, and
//           value_error for invalid hyper-parameters (negative lr, betas outside [0,1), ...).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "nnlens/core/error.hpp"
#include "nnlens/network/parameters.hpp"
#include "nnlens/train/mask.hpp"

namespace nnlens::train {

namespace detail {
template <class Net>
void check_same_parameters(const Net& net, const Net& other, const char* what) {
  const auto a = parameter_spans(net);
  const auto b = parameter_spans(other);
  if (a.size() != b.size())
    throw shape_error(nnlens::detail::concat(what, ": ", b.size(), " parameter tensors, the network has ", a.size()));
  for (std::size_t k = 0; k < a.size(); ++k)
    if (a[k].size() != b[k].size())
      throw shape_error(nnlens::detail::concat(what, ": parameter tensor ", k, " has ", b[k].size(),
                                               " elements, the network's has ", a[k].size()));
}
}  // namespace detail

struct sgd_options {
  double lr = 0.01;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
};

template <class Net>
class sgd {
 public:
  using scalar_type = network_scalar_t<Net>;

  explicit sgd(const Net& net, sgd_options o = {}) : opt_(o), buf_(zeros_like(net)) { validate(); }

  /// One update of net's parameters from `grad` (the gradient of the loss to minimise).
  void step(Net& net, const Net& grad, const parameter_mask* mask = nullptr) {
    validate();
    using T = scalar_type;
    detail::check_same_parameters(net, grad, "sgd: gradient");
    detail::check_same_parameters(net, buf_, "sgd: state");
    if (mask) mask->check(net);
    auto ps = parameter_spans(net);
    const auto gs = parameter_spans(grad);
    auto bs = parameter_spans(buf_);
    const T lr = T(opt_.lr), wd = T(opt_.weight_decay), mu = T(opt_.momentum), damp = T(T(1) - T(opt_.dampening));
    const bool first = steps_ == 0;
    for (std::size_t k = 0; k < ps.size(); ++k) {
      T* p = ps[k].data();
      const T* g0 = gs[k].data();
      T* b = bs[k].data();
      const std::uint8_t* m = mask ? mask->bits(k).data() : nullptr;
      for (std::size_t i = 0, n = ps[k].size(); i < n; ++i) {
        if (m && !m[i]) continue;
        T g = g0[i];
        if (opt_.weight_decay != 0) g = g + wd * p[i];
        if (opt_.momentum != 0) {
          b[i] = first ? g : mu * b[i] + damp * g;
          g = opt_.nesterov ? g + mu * b[i] : b[i];
        }
        p[i] = p[i] - lr * g;
      }
    }
    ++steps_;
  }

  sgd_options& options() { return opt_; }  // e.g. for a learning-rate schedule
  const sgd_options& options() const { return opt_; }
  std::uint64_t steps() const { return steps_; }
  const Net& momentum_buffer() const { return buf_; }

 private:
  void validate() const {
    if (!(opt_.lr >= 0)) throw value_error(nnlens::detail::concat("sgd: invalid learning rate ", opt_.lr));
    if (!(opt_.momentum >= 0)) throw value_error(nnlens::detail::concat("sgd: invalid momentum ", opt_.momentum));
    if (!(opt_.weight_decay >= 0))
      throw value_error(nnlens::detail::concat("sgd: invalid weight decay ", opt_.weight_decay));
    if (opt_.nesterov && (opt_.momentum <= 0 || opt_.dampening != 0))
      throw value_error("sgd: Nesterov momentum requires a momentum > 0 and zero dampening");
  }
  sgd_options opt_;
  Net buf_;
  std::uint64_t steps_ = 0;
};

struct adam_options {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
};

template <class Net>
class adam {
 public:
  using scalar_type = network_scalar_t<Net>;

  explicit adam(const Net& net, adam_options o = {}) : opt_(o), m_(zeros_like(net)), v_(zeros_like(net)) {
    validate();
  }

  void step(Net& net, const Net& grad, const parameter_mask* mask = nullptr) {
    validate();
    using T = scalar_type;
    detail::check_same_parameters(net, grad, "adam: gradient");
    detail::check_same_parameters(net, m_, "adam: state");
    if (mask) mask->check(net);
    ++steps_;
    const double t = double(steps_);
    const double bc1 = 1.0 - std::pow(opt_.beta1, t);
    const double bc2_sqrt = std::sqrt(1.0 - std::pow(opt_.beta2, t));
    const T step_size = T(opt_.lr / bc1), bc2s = T(bc2_sqrt), eps = T(opt_.eps);
    const T b1 = T(opt_.beta1), b2 = T(opt_.beta2), c1 = T(1 - opt_.beta1), c2 = T(1 - opt_.beta2);
    const T wd = T(opt_.weight_decay);
    auto ps = parameter_spans(net);
    const auto gs = parameter_spans(grad);
    auto ms = parameter_spans(m_);
    auto vs = parameter_spans(v_);
    for (std::size_t k = 0; k < ps.size(); ++k) {
      T* p = ps[k].data();
      const T* g0 = gs[k].data();
      T* m1 = ms[k].data();
      T* m2 = vs[k].data();
      const std::uint8_t* msk = mask ? mask->bits(k).data() : nullptr;
      for (std::size_t i = 0, n = ps[k].size(); i < n; ++i) {
        if (msk && !msk[i]) continue;
        T g = g0[i];
        if (opt_.weight_decay != 0) g = g + wd * p[i];
        m1[i] = b1 * m1[i] + c1 * g;
        m2[i] = b2 * m2[i] + c2 * g * g;
        const T denom = std::sqrt(m2[i]) / bc2s + eps;
        p[i] = p[i] - step_size * (m1[i] / denom);
      }
    }
  }

  adam_options& options() { return opt_; }
  const adam_options& options() const { return opt_; }
  std::uint64_t steps() const { return steps_; }
  const Net& first_moment() const { return m_; }
  const Net& second_moment() const { return v_; }

 private:
  void validate() const {
    if (!(opt_.lr >= 0)) throw value_error(nnlens::detail::concat("adam: invalid learning rate ", opt_.lr));
    if (!(opt_.eps >= 0)) throw value_error(nnlens::detail::concat("adam: invalid eps ", opt_.eps));
    if (!(opt_.beta1 >= 0 && opt_.beta1 < 1))
      throw value_error(nnlens::detail::concat("adam: invalid beta1 ", opt_.beta1, ", expected [0, 1)"));
    if (!(opt_.beta2 >= 0 && opt_.beta2 < 1))
      throw value_error(nnlens::detail::concat("adam: invalid beta2 ", opt_.beta2, ", expected [0, 1)"));
    if (!(opt_.weight_decay >= 0))
      throw value_error(nnlens::detail::concat("adam: invalid weight decay ", opt_.weight_decay));
  }
  adam_options opt_;
  Net m_, v_;
  std::uint64_t steps_ = 0;
};

}  // namespace nnlens::train
