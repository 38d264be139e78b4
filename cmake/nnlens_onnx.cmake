# nnlens::onnx = nnlens + ONNX's protobuf classes, for nnlens/io/onnx.hpp (optional component).
# Uses Debian's libonnx-dev (CMake config "ONNX": targets onnx_proto, onnx; its targets carry the
# defines ONNX_NAMESPACE=onnx and ONNX_ML=1 the headers need) and libprotobuf-dev (FindProtobuf's
# protobuf::libprotobuf, which ONNX's targets link but its config does not look for).
# Sets NNLENS_WITH_ONNX.  Nothing else in nnlens depends on it.
find_package(Protobuf QUIET)
if(Protobuf_FOUND)
  find_package(ONNX CONFIG QUIET)
endif()
if(Protobuf_FOUND AND TARGET onnx_proto)
  set(NNLENS_WITH_ONNX ON)
  add_library(nnlens_onnx INTERFACE)
  add_library(nnlens::onnx ALIAS nnlens_onnx)
  set_target_properties(nnlens_onnx PROPERTIES EXPORT_NAME onnx)
  target_link_libraries(nnlens_onnx INTERFACE nnlens onnx_proto protobuf::libprotobuf)
  install(TARGETS nnlens_onnx EXPORT nnlensTargets)
  message(STATUS "nnlens: ONNX import (nnlens::onnx) enabled: ONNX ${ONNX_VERSION}, protobuf ${Protobuf_VERSION}")
else()
  set(NNLENS_WITH_ONNX OFF)
  message(STATUS "nnlens: ONNX import (nnlens::onnx) disabled: needs libonnx-dev and libprotobuf-dev")
endif()
