// nnlens/io/onnx/layout_nodes.hpp -- the importer's layout nodes (part of nnlens::onnx).
//
//   Reshape    to flatten -> Flatten (or nothing when already flat); any other reshape of a value
//              stored in its logical order only changes its logical dims (ShuffleNet's
//              [C,H,W] -> [g, C/g, H, W]); a reshape back to the stored image of a value whose
//              channels a Transpose permuted -> ChannelShuffle (torchvision's channel_shuffle),
//              any other permutation refused, naming the node
//   Transpose  no layer: layout bookkeeping (onnx_act::perm)
//   Pad        constant zero padding of the spatial axes, folded into the next Conv or AveragePool
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "nnlens/io/onnx/state.hpp"
#include "nnlens/layers/channel_shuffle.hpp"
#include "nnlens/io/onnx/values.hpp"

namespace nnlens::io::detail {

class onnx_layout_nodes : protected onnx_graph_state {
 public:
  using onnx_graph_state::onnx_graph_state;

 protected:
  void to_flat(const onnx::NodeProto& n, onnx_act& a) {
    if (a.has_pad()) fail(n, "follows a Pad node");
    if (a.store.rank != 1) emit(n, a, Flatten{});
    a.logical = {std::int64_t(onnx_prod(a.logical))};
  }

  void reshape(const onnx::NodeProto& n) {
    onnx_act a = take(n, 0);
    std::vector<std::int64_t> t;
    if (n.input_size() > 1) {
      for (double v : cst(n, 1).values) t.push_back(int_of(n, v));
    } else {
      t = onnx_attr_ints(n, "shape");
    }
    if (onnx_attr_i(n, "allowzero", 0) != 0) fail(n, "allowzero = 1 is not supported");
    if (batch_) {
      // the first extent is the batch: 0 (copy), -1, or the batch size the exporter traced
      if (t.empty() || t[0] < -1) fail(n, "must keep the batch axis first");
      t.erase(t.begin());
    }
    const std::size_t total = onnx_prod(a.logical);
    std::int64_t known = 1, neg = -1;
    for (std::size_t i = 0; i < t.size(); ++i) {
      if (t[i] == 0) {
        if (i >= a.logical.size()) fail(n, "a 0 extent beyond the input's rank");
        t[i] = a.logical[i];
      }
      if (t[i] == -1) {
        if (neg >= 0) fail(n, "two -1 extents");
        neg = std::int64_t(i);
      } else if (t[i] < 0) {
        fail(n, "negative extent");
      } else {
        known *= t[i];
      }
    }
    if (neg >= 0 && known > 0) t[std::size_t(neg)] = std::int64_t(total) / known;
    if (onnx_count(t, where_n(n)) != total) fail(n, "the new shape has a different number of elements per sample");
    if (t == a.logical) return out(n, std::move(a));
    if (t.size() == 1) {
      to_flat(n, a);
      return out(n, std::move(a));
    }
    if (a.has_pad()) fail(n, "follows a Pad node");
    if (a.perm.empty()) {  // stored in logical order: the elements stay, only the logical dims change
      a.logical = t;       // ([784] <-> [784,1], or ShuffleNet's [C,H,W] -> [g, C/g, H, W])
      return out(n, std::move(a));
    }
    if (a.store.rank == 3 && t.size() == 3 && std::size_t(t[0]) == a.store[0] && std::size_t(t[1]) == a.store[1] &&
        std::size_t(t[2]) == a.store[2]) {
      channel_permutation(n, a);
      a.logical = t;
      return out(n, std::move(a));
    }
    fail(n, "only reshapes that flatten a sample, keep its element order, or restore a channel shuffle are supported (from " +
                dims_str(a.logical) + " to " + dims_str(t) + ")");
  }

  /// The transposed value a becomes its stored image again ([C,H,W], logical order = storage
  /// order): when its logical order permutes whole channels as torchvision's channel_shuffle does,
  /// a ChannelShuffle layer; any other permutation is refused.
  void channel_permutation(const onnx::NodeProto& n, onnx_act& a) {
    const std::size_t C = a.store[0], P = a.store[1] * a.store[2];
    std::vector<std::size_t> src(C);
    for (std::size_t c = 0; c < C; ++c) {
      src[c] = a.perm[c * P] / P;
      for (std::size_t p = 0; p < P; ++p)
        if (a.perm[c * P + p] != src[c] * P + p) fail(n, "the Transpose before it moves elements within channels");
    }
    for (std::size_t g = 2; g <= C; ++g) {
      if (C % g) continue;
      bool ok = true;
      for (std::size_t c = 0; c < C && ok; ++c) ok = src[c] == (c % g) * (C / g) + c / g;
      if (!ok) continue;
      emit(n, a, ChannelShuffle{g});
      a.perm.clear();
      return;
    }
    fail(n, "the channels are permuted, and not as a channel shuffle (Reshape [g, C/g, H, W], Transpose(0, 2, 1, 3, 4))");
  }

  void transpose(const onnx::NodeProto& n) {
    onnx_act a = take(n, 0);
    if (a.has_pad()) fail(n, "follows a Pad node");
    const std::size_t r = a.logical.size() + (batch_ ? 1 : 0);
    std::vector<std::int64_t> p = onnx_attr_ints(n, "perm");
    if (p.empty())
      for (std::size_t i = r; i-- > 0;) p.push_back(std::int64_t(i));
    if (p.size() != r) fail(n, "perm does not match the input's rank");
    std::vector<std::size_t> q;
    if (batch_) {
      if (p[0] != 0) fail(n, "moves the batch axis");
      for (std::size_t i = 1; i < r; ++i) q.push_back(std::size_t(p[i] - 1));
    } else {
      for (auto v : p) q.push_back(std::size_t(v));
    }
    std::vector<std::size_t> chk = q;
    std::sort(chk.begin(), chk.end());
    for (std::size_t i = 0; i < chk.size(); ++i)
      if (chk[i] != i) fail(n, "perm is not a permutation");
    onnx_transpose(a, q);
    out(n, std::move(a));
  }

  void pad(const onnx::NodeProto& n) {
    onnx_act a = take(n, 0);
    const std::string mode = onnx_attr_s(n, "mode", "constant");
    if (mode != "constant") fail(n, "only constant padding is supported");
    std::vector<std::int64_t> p;
    double value = 0;
    if (opset_ < 11) {
      p = onnx_attr_ints(n, opset_ < 2 ? "paddings" : "pads");
      value = onnx_attr_f(n, "value", 0.0);
    } else {
      for (double v : cst(n, 1).values) p.push_back(int_of(n, v));
      if (const auto* c = opt_cst(n, 2)) value = scalar_of(n, *c, 2);
      if (n.input_size() > 3 && !n.input(3).empty()) fail(n, "the axes input is not supported");
    }
    if (value != 0) fail(n, "only zero padding is supported");
    bool zero = true;
    for (auto v : p) zero = zero && v == 0;
    if (zero) return out(n, std::move(a));
    if (!a.plain_image() || p.size() != 8 || p[0] || p[1] || p[4] || p[5])
      fail(n, "only zero padding of the spatial axes of an NCHW image is supported");
    for (auto v : p)
      if (v < 0 || v > big) fail(n, "padding must be in [0, 2^20] (cropping is not supported)");
    a.pad[0] += std::size_t(p[2]), a.pad[1] += std::size_t(p[3]), a.pad[2] += std::size_t(p[6]), a.pad[3] += std::size_t(p[7]);
    out(n, std::move(a));
  }

};

}  // namespace nnlens::io::detail
