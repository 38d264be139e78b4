// nnlens/io/onnx/fuse.hpp -- peephole folding of a chain of imported layers (part of nnlens::onnx).
//
// ONNX spells a bias as MatMul + Add, a conv bias as Conv + Add, a normalisation as Sub + Div.  The
// importer first emits one layer per node (Add/Sub/Mul/Div by a constant become Affine), then
// folds, within each chain (the network's, or a residual branch's):
//   Affine that is exactly the identity (s == 1, t == 0)            -> dropped
//   Dense  then Affine with one value or one per output             -> Dense (W columns, b scaled)
//   Conv2D then Affine with one value or one per output channel     -> Conv2D
//   Affine then Affine with the same count (or one of them 1)       -> one Affine
// ensures: the folded chain computes the same function: a fold happens only when every value it
//          makes (W s, b s + t) is exact in float, so the network gives the file's function in f32
//          and in f64 alike; bias folding (s == 1) is then bit-exact, because Dense/Conv2D add their
//          bias after the product exactly as ONNX's Add does.
#pragma once

#include <algorithm>
#include <variant>
#include <vector>

#include "nnlens/io/onnx/values.hpp"

namespace nnlens::io::detail {

inline bool onnx_affine_identity(const Affine<dyn, float>& a) {
  for (std::size_t i = 0; i < a.s.size(); ++i)
    if (a.s(i) != 1.0f || a.t(i) != 0.0f) return false;
  return true;
}

/// x * s + t is a float without rounding (so the folded layer computes what the two did, also when
/// the network then runs in double).
inline bool onnx_exact(float x, float s, float t = 0.0f) {
  const double v = double(x) * double(s) + double(t);
  return double(float(v)) == v;
}

/// Folds affine `a` (one value, or one per output `o`) into weights whose output index is the
/// last axis (Dense: W [in, out]) or the first (Conv: W [out, ...]), when every folded value is
/// exact in float; otherwise the Affine stays (ConvNeXt's layer scale after its 1x1 convolution:
/// folded in float it would move the double network 3e-8 from the file's).
inline bool onnx_fold_into(std::vector<onnx_layer>& chain, std::size_t i) {
  auto* a = std::get_if<Affine<dyn, float>>(&chain[i + 1]);
  if (!a) return false;
  const std::size_t n = a->s.size();
  auto sv = [&](std::size_t o) { return a->s(n == 1 ? 0 : o); };
  auto tv = [&](std::size_t o) { return a->t(n == 1 ? 0 : o); };
  if (auto* d = std::get_if<Dense<dyn, float>>(&chain[i])) {
    const std::size_t I = d->W.shape(0), O = d->W.shape(1);
    if (n != 1 && n != O) return false;
    for (std::size_t o = 0; o < O; ++o) {
      if (!onnx_exact(d->b(o), sv(o), tv(o))) return false;
      if (sv(o) != 1.0f)
        for (std::size_t k = 0; k < I; ++k)
          if (!onnx_exact(d->W(k, o), sv(o))) return false;
    }
    for (std::size_t o = 0; o < O; ++o) {
      if (sv(o) != 1.0f)
        for (std::size_t k = 0; k < I; ++k) d->W(k, o) *= sv(o);
      d->b(o) = d->b(o) * sv(o) + tv(o);
    }
  } else if (auto* c = std::get_if<Conv2DG<dyn, conv_geometry_dyn, float>>(&chain[i])) {
    const std::size_t O = c->W.shape(0), K = c->W.size() / std::max<std::size_t>(1, O);
    if (n != 1 && n != O) return false;
    for (std::size_t o = 0; o < O; ++o) {
      if (!onnx_exact(c->b(o), sv(o), tv(o))) return false;
      if (sv(o) != 1.0f)
        for (std::size_t k = 0; k < K; ++k)
          if (!onnx_exact(c->W.data()[o * K + k], sv(o))) return false;
    }
    for (std::size_t o = 0; o < O; ++o) {
      if (sv(o) != 1.0f)
        for (std::size_t k = 0; k < K; ++k) c->W.data()[o * K + k] *= sv(o);
      c->b(o) = c->b(o) * sv(o) + tv(o);
    }
  } else if (auto* p = std::get_if<Affine<dyn, float>>(&chain[i])) {
    const std::size_t m = p->s.size();
    if (m != n && m != 1 && n != 1) return false;
    const std::size_t r = std::max(m, n);
    for (std::size_t k = 0; k < r; ++k)
      if (!onnx_exact(p->s(m == 1 ? 0 : k), sv(k)) || !onnx_exact(p->t(m == 1 ? 0 : k), sv(k), tv(k))) return false;
    tensor<float, 1> s = tensor<float, 1>::from_shape({r}), t = tensor<float, 1>::from_shape({r});
    for (std::size_t k = 0; k < r; ++k) {
      const float s1 = p->s(m == 1 ? 0 : k), t1 = p->t(m == 1 ? 0 : k);
      s(k) = s1 * sv(k);
      t(k) = t1 * sv(k) + tv(k);
    }
    p->s = std::move(s);
    p->t = std::move(t);
  } else {
    return false;
  }
  chain.erase(chain.begin() + std::ptrdiff_t(i) + 1);
  return true;
}

inline void onnx_fuse(std::vector<onnx_layer>& chain) {
  for (std::size_t i = 0; i < chain.size();) {
    if (auto* a = std::get_if<Affine<dyn, float>>(&chain[i]); a && onnx_affine_identity(*a)) {
      chain.erase(chain.begin() + std::ptrdiff_t(i));
      if (i) --i;
      continue;
    }
    if (i + 1 < chain.size() && onnx_fold_into(chain, i)) continue;
    ++i;
  }
}

}  // namespace nnlens::io::detail
