// nnlens/io/onnx/values.hpp -- the importer's view of ONNX values (part of nnlens::onnx).
//
// An activation (a value computed from the network input) is tracked as
//   anchor + layers   the chain of nnlens layers from the anchor (the network input, or a value that
//                     several nodes consume: the start of residual branches) to this value
//   store             its nnlens per-sample shape (rank 1 or rank 3, NCHW), i.e. its memory layout
//   logical, perm     ONNX's per-sample dims, and the map from a row-major index in `logical` to
//                     the index in storage (empty = identity).  A Transpose only changes these;
//                     a Flatten keeps the map, so Transpose(0,2,3,1) + Flatten + MatMul becomes a
//                     Dense whose rows are permuted (detail::onnx_dense_rows).
//   pad               zero padding from a Pad node, pending for the next Conv / AveragePool.
// Constants (initializers, Constant nodes, shape arithmetic) are onnx_tensor values.
// requires / ensures: helpers throw io_error with the caller's `where` on shapes they cannot map.
#pragma once

#include <array>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "nnlens/core/shape.hpp"
#include "nnlens/io/onnx/proto.hpp"
#include "nnlens/network/dynamic_network.hpp"

namespace nnlens::io::detail {

using onnx_layer = DynamicNetwork::layer_type;

struct onnx_act {
  int anchor = 0;
  std::vector<onnx_layer> layers;
  shape store{};
  std::vector<std::int64_t> logical;
  std::vector<std::size_t> perm;  // logical row-major index -> storage index; empty = identity
  std::array<std::size_t, 4> pad{0, 0, 0, 0};  // top, left, bottom, right
  bool has_pad() const { return pad[0] || pad[1] || pad[2] || pad[3]; }
  /// True when the storage is the plain NCHW image `logical` describes.
  bool plain_image() const {
    return perm.empty() && store.rank == 3 && logical.size() == 3 && std::size_t(logical[0]) == store[0] &&
           std::size_t(logical[1]) == store[1] && std::size_t(logical[2]) == store[2];
  }
  std::size_t storage_index(std::size_t k) const { return perm.empty() ? k : perm[k]; }
};

inline std::size_t onnx_prod(const std::vector<std::int64_t>& d, std::size_t from = 0) {
  std::size_t n = 1;
  for (std::size_t i = from; i < d.size(); ++i) n *= std::size_t(d[i]);
  return n;
}

/// Row-major strides of dims.
inline std::vector<std::size_t> onnx_strides(const std::vector<std::int64_t>& d) {
  std::vector<std::size_t> s(d.size(), 1);
  for (std::size_t i = d.size(); i-- > 1;) s[i - 1] = s[i] * std::size_t(d[i]);
  return s;
}

/// Expands constant c (numpy broadcasting) to the per-sample logical shape of `a`, in STORAGE
/// order.  `batch`: whether the activation has a leading batch axis the constant may address
/// (with extent 1).  Throws io_error if c does not broadcast to the sample without enlarging it.
inline std::vector<double> onnx_expand(const onnx_tensor& c, const onnx_act& a, bool batch, const std::string& where) {
  const auto& L = a.logical;
  std::vector<std::int64_t> cd = c.dims;
  if (batch && cd.size() == L.size() + 1) {
    if (cd[0] != 1) throw io_error(where + ": the constant varies along the batch axis");
    cd.erase(cd.begin());
  }
  if (cd.size() > L.size())
    throw io_error(nnlens::detail::concat(where, ": a constant of rank ", c.dims.size(),
                                          " does not broadcast to the per-sample shape (rank ", L.size(), ")"));
  const std::size_t off = L.size() - cd.size();
  for (std::size_t i = 0; i < cd.size(); ++i)
    if (cd[i] != 1 && cd[i] != L[off + i])
      throw io_error(where + ": a constant does not broadcast to the activation's shape");
  const std::size_t n = onnx_prod(L);
  const auto ls = onnx_strides(L);
  const auto cs = onnx_strides(cd);
  std::vector<double> out(n);
  for (std::size_t k = 0; k < n; ++k) {
    std::size_t ci = 0;
    for (std::size_t i = 0; i < cd.size(); ++i) {
      const std::size_t idx = (k / ls[off + i]) % std::size_t(L[off + i]);
      if (cd[i] != 1) ci += idx * cs[i];
    }
    out[a.storage_index(k)] = c.values[ci];
  }
  return out;
}

/// The smallest Affine vector for element values v over storage shape s: one value, one per
/// channel (rank 3), or one per element.
inline std::vector<double> onnx_compress(const std::vector<double>& v, shape s) {
  bool all = true;
  for (double x : v) all = all && x == v[0];
  if (all) return {v[0]};
  if (s.rank == 3) {
    const std::size_t C = s[0], P = s[1] * s[2];
    bool per = true;
    for (std::size_t c = 0; c < C && per; ++c)
      for (std::size_t p = 0; p < P && per; ++p) per = v[c * P + p] == v[c * P];
    if (per) {
      std::vector<double> r(C);
      for (std::size_t c = 0; c < C; ++c) r[c] = v[c * P];
      return r;
    }
  }
  return v;
}

/// Transposes the per-sample logical dims of `a` by q (a permutation of 0..rank-1).
inline void onnx_transpose(onnx_act& a, const std::vector<std::size_t>& q) {
  const auto& d = a.logical;
  std::vector<std::int64_t> nd(d.size());
  for (std::size_t i = 0; i < d.size(); ++i) nd[i] = d[q[i]];
  const auto is = onnx_strides(d), os = onnx_strides(nd);
  const std::size_t n = onnx_prod(d);
  std::vector<std::size_t> np(n);
  for (std::size_t j = 0; j < n; ++j) {
    std::size_t src = 0;
    for (std::size_t k = 0; k < nd.size(); ++k) src += ((j / os[k]) % std::size_t(nd[k])) * is[q[k]];
    np[j] = a.storage_index(src);
  }
  bool ident = true;
  for (std::size_t j = 0; j < n && ident; ++j) ident = np[j] == j;
  a.logical = nd;
  if (ident) a.perm.clear();
  else a.perm = std::move(np);
}

}  // namespace nnlens::io::detail
