// nnlens/io/onnx/proto.hpp -- reading ONNX protobuf messages: files, tensors, attributes.
//
// Part of the optional component nnlens::onnx (needs Debian's libonnx-dev + libprotobuf-dev; the
// ONNX headers must be compiled with ONNX_NAMESPACE=onnx and ONNX_ML=1, which the CMake target
// onnx_proto / nnlens::onnx sets).  Not included by nnlens.hpp.
//
//   onnx_tensor (io/onnx/types.hpp)  a constant as dims + values
//   detail::onnx_read_model(path), detail::onnx_parse_model(data, size, name)   a ModelProto
//   detail::tensor_from_proto(t, w)  TensorProto -> onnx_tensor (float, double, int32, int64, int8,
//                                    uint8, bool; raw_data or typed fields)
// requires: nothing of the file: truncated, corrupt or hostile files (sizes that do not match the
//           dims, negative dims, external data, unsupported element types) throw io_error naming the
//           file and the tensor; nothing is read out of bounds.
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "nnlens/core/error.hpp"
#include "nnlens/io/onnx/types.hpp"

#if !defined(ONNX_ML) || !defined(ONNX_NAMESPACE)
#error "nnlens/io/onnx: compile with ONNX_NAMESPACE=onnx and ONNX_ML=1 (link the CMake target nnlens::onnx)"
#endif

namespace nnlens::io {

namespace detail {

inline std::string onnx_read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw io_error("ONNX: cannot open " + path);
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad()) throw io_error("ONNX: error reading " + path);
  return s;
}

/// Number of elements of dims, or throws (negative, or more than 2^31 elements).
inline std::size_t onnx_count(const std::vector<std::int64_t>& dims, const std::string& where) {
  std::size_t n = 1;
  for (auto d : dims) {
    if (d < 0) throw io_error(nnlens::detail::concat(where, ": negative dimension ", d));
    if (d != 0 && n > (std::size_t(1) << 31) / std::size_t(d))
      throw io_error(nnlens::detail::concat(where, ": too many elements"));
    n *= std::size_t(d);
  }
  return n;
}

template <class S>
void onnx_raw(const std::string& raw, std::size_t n, std::vector<double>& out, const std::string& where) {
  if (raw.size() != n * sizeof(S))
    throw io_error(nnlens::detail::concat(where, ": raw_data has ", raw.size(), " bytes, expected ", n * sizeof(S)));
  out.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    S v;
    std::memcpy(&v, raw.data() + i * sizeof(S), sizeof(S));  // little-endian hosts (x86, arm64)
    out[i] = double(v);
  }
}

template <class F>
void onnx_typed(const F& field, std::size_t n, std::vector<double>& out, const std::string& where) {
  if (std::size_t(field.size()) != n)
    throw io_error(nnlens::detail::concat(where, ": has ", field.size(), " values, expected ", n));
  out.assign(field.begin(), field.end());
}

inline onnx_tensor tensor_from_proto(const onnx::TensorProto& t, const std::string& where) {
  onnx_tensor r;
  r.dims.assign(t.dims().begin(), t.dims().end());
  const std::size_t n = onnx_count(r.dims, where);
  if (t.data_location() == onnx::TensorProto::EXTERNAL || t.external_data_size() > 0)
    throw io_error(where + ": external tensor data is not supported");
  const bool raw = t.has_raw_data();
  const std::string& rd = t.raw_data();
  using TP = onnx::TensorProto;
  switch (t.data_type()) {
    case TP::FLOAT:
      if (raw) onnx_raw<float>(rd, n, r.values, where);
      else onnx_typed(t.float_data(), n, r.values, where);
      break;
    case TP::DOUBLE:
      if (raw) onnx_raw<double>(rd, n, r.values, where);
      else onnx_typed(t.double_data(), n, r.values, where);
      break;
    case TP::INT64:
      if (raw) onnx_raw<std::int64_t>(rd, n, r.values, where);
      else onnx_typed(t.int64_data(), n, r.values, where);
      break;
    case TP::INT32:
      if (raw) onnx_raw<std::int32_t>(rd, n, r.values, where);
      else onnx_typed(t.int32_data(), n, r.values, where);
      break;
    case TP::INT8:
      if (raw) onnx_raw<std::int8_t>(rd, n, r.values, where);
      else onnx_typed(t.int32_data(), n, r.values, where);
      break;
    case TP::UINT8:
    case TP::BOOL:
      if (raw) onnx_raw<std::uint8_t>(rd, n, r.values, where);
      else onnx_typed(t.int32_data(), n, r.values, where);
      break;
    default:
      throw io_error(nnlens::detail::concat(where, ": element type ", t.data_type(),
                                            " is not supported (float, double, int8/32/64, uint8, bool)"));
  }
  r.integral = t.data_type() != TP::FLOAT && t.data_type() != TP::DOUBLE;
  return r;
}

/// A ModelProto from bytes; `name` appears in messages.
inline onnx::ModelProto onnx_parse_model(const void* data, std::size_t size, const std::string& name) {
  onnx::ModelProto m;
  if (size > std::size_t(std::numeric_limits<int>::max()) || !m.ParseFromArray(data, int(size)))
    throw io_error("ONNX: " + name + " is not a valid ONNX model (truncated or corrupt protobuf)");
  if (!m.has_graph()) throw io_error("ONNX: " + name + " has no graph");
  return m;
}
inline onnx::ModelProto onnx_read_model(const std::string& path) {
  const std::string bytes = onnx_read_bytes(path);
  return onnx_parse_model(bytes.data(), bytes.size(), path);
}

// ---- attributes ----
inline const onnx::AttributeProto* onnx_attr(const onnx::NodeProto& n, const char* name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}
inline std::int64_t onnx_attr_i(const onnx::NodeProto& n, const char* name, std::int64_t def) {
  const auto* a = onnx_attr(n, name);
  return a ? a->i() : def;
}
inline double onnx_attr_f(const onnx::NodeProto& n, const char* name, double def) {
  const auto* a = onnx_attr(n, name);
  return a ? double(a->f()) : def;
}
inline std::string onnx_attr_s(const onnx::NodeProto& n, const char* name, const std::string& def) {
  const auto* a = onnx_attr(n, name);
  return a ? a->s() : def;
}
inline std::vector<std::int64_t> onnx_attr_ints(const onnx::NodeProto& n, const char* name,
                                                std::vector<std::int64_t> def = {}) {
  const auto* a = onnx_attr(n, name);
  if (!a) return def;
  return {a->ints().begin(), a->ints().end()};
}

}  // namespace detail

}  // namespace nnlens::io
