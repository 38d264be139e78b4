# tests/tool/onnx/tests.cmake -- ONNX export.
# Included by tests/tool/CMakeLists.txt, whose variables (tsrc, fx, lenet, _acas, _dxl5, _dt_seeds)
# and functions (nnlens_tool_fail, nnlens_tool_ok) it uses.

# ONNX export (io/onnx_export.hpp): ONNX's C++ checker (target `onnx`) and re-import.
if(TARGET nnlens::onnx AND TARGET onnx)
  add_executable(test_onnx_export ${tsrc}/onnx/test_onnx_export.cpp $<TARGET_OBJECTS:nnlens_test_main>)
  target_link_libraries(test_onnx_export PRIVATE nnlens::onnx onnx doctest::doctest nnlens_project_options nnlens_test_options)
  target_compile_definitions(test_onnx_export PRIVATE NNLENS_SHARED_DIR="${NNLENS_SHARED_DIR}")
  set_target_properties(test_onnx_export PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${NNLENS_BIN_DIR}/tests)
  add_test(NAME test_onnx_export COMMAND test_onnx_export)
  set_tests_properties(test_onnx_export PROPERTIES SKIP_RETURN_CODE 77)  # NNLENS_SKIP (tests/main.cpp)
endif()
