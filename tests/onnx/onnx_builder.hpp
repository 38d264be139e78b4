// tests/onnx/onnx_builder.hpp -- building small ONNX ModelProtos in memory for the onnx suite's
// tests (test_onnx_models.cpp, test_onnx_nonfinite.cpp).
//
//   onnx::ModelProto m = new_model(13);          // ir_version 7, one opset import
//   auto& g = *m.mutable_graph();
//   set_value(g.add_input(), "x", {1, 3});        // a float tensor's name and dims
//   add_init(g, "w", {3, 3}, values);             // a float initializer (float_data)
//   auto* n = add_node(g, "Gemm", {"x", "w"}, "y");   // node named "<op>_<out>", one output
//   add_ints(n, "perm", {0, 3, 1, 2});            // an INTS attribute
//   auto net = parse_model(m);                    // read by nnlens from memory (REQUIREs it serializes)
//   std::string e = import_error(m);              // the importer's message ("" when it loads)
//   ops_of(m)                                     // the nodes' op types, in order
// requires: the ONNX headers of nnlens::onnx (onnx/onnx_pb.h, namespace onnx), doctest.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <onnx/onnx_pb.h>

#include "nnlens/io/onnx.hpp"

namespace onnx_builder {

/// An empty model: IR version 7 and the default domain at `opset`.
inline onnx::ModelProto new_model(std::int64_t opset) {
  onnx::ModelProto m;
  m.set_ir_version(7);
  m.add_opset_import()->set_version(opset);
  return m;
}

inline void add_init(onnx::GraphProto& g, const std::string& name, std::vector<std::int64_t> dims, const std::vector<float>& v) {
  auto* t = g.add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (auto d : dims) t->add_dims(d);
  for (float x : v) t->add_float_data(x);
}

inline onnx::NodeProto* add_node(onnx::GraphProto& g, const std::string& op, std::vector<std::string> in, std::string out) {
  auto* n = g.add_node();
  n->set_op_type(op);
  n->set_name(op + "_" + out);
  for (auto& s : in) n->add_input(s);
  n->add_output(out);
  return n;
}

inline void add_ints(onnx::NodeProto* n, const std::string& name, std::vector<std::int64_t> v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (auto x : v) a->add_ints(x);
}

inline void set_value(onnx::ValueInfoProto* v, const std::string& name, std::vector<std::int64_t> dims) {
  v->set_name(name);
  auto* tt = v->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  for (auto d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
}

/// m as nnlens reads it (io::parse_onnx; `name` in its messages).
inline nnlens::DynamicNetwork parse_model(const onnx::ModelProto& m, const std::string& name = "model.onnx") {
  std::string bytes;
  REQUIRE(m.SerializeToString(&bytes));
  return nnlens::io::parse_onnx(bytes.data(), bytes.size(), name);
}

/// The importer's message on m ("ONNX: <name>: ..."), "" when m loads.
inline std::string import_error(const onnx::ModelProto& m, const std::string& name = "model.onnx") {
  try {
    (void)parse_model(m, name);
  } catch (const nnlens::io_error& e) {
    return e.what();
  }
  return "";
}

/// The op types of m's nodes, in graph order.
inline std::vector<std::string> ops_of(const onnx::ModelProto& m) {
  std::vector<std::string> r;
  for (const auto& n : m.graph().node()) r.push_back(n.op_type());
  return r;
}

}  // namespace onnx_builder
