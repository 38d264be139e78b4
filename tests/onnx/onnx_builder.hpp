// tests/onnx/onnx_builder.hpp -- building small ONNX ModelProtos in memory for the onnx suite's
// tests (test_onnx_models.cpp, test_onnx_nonfinite.cpp).
//
//   onnx::ModelProto m = new_model(13);          // ir_version 7, one opset import
//   auto& g = *m.mutable_graph();
//   set_value(g.add_input(), "x", {1, 3});        // a float tensor's name and dims
//   add_init(g, "w", {3, 3}, values);             // a float initializer (float_data)
//   auto* n = add_node(g, "Gemm", {"x", "w"}, "y");   // node named "<op>_<out>", one output
//   add_ints(n, "perm", {0, 3, 1, 2});            // an INTS attribute
// requires: the ONNX headers of nnlens::onnx (onnx/onnx_pb.h, namespace onnx).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

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

}  // namespace onnx_builder
