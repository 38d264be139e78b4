# tests/tool/layout/tests.cmake -- data layouts and precision of run / info / exact-line / ig.
# Included by tests/tool/CMakeLists.txt, whose variables (tsrc, fx, lenet, _acas, _dxl5, _dt_seeds)
# and functions (nnlens_tool_fail, nnlens_tool_ok) it uses.

# ---- data layouts and precision: run / info / exact-line / ig against references computed without
# nnlens (tests/tool/layout: fixtures written by make_fixtures.py with NumPy; a long-double .nnet
# evaluator in the test); hostile input.
add_executable(test_layout ${tsrc}/layout/test_layout.cpp $<TARGET_OBJECTS:nnlens_test_main>)
target_link_libraries(test_layout PRIVATE nnlens::nnlens doctest::doctest nnlens_project_options nnlens_test_options)
set_target_properties(test_layout PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${NNLENS_BIN_DIR}/tests)
add_test(NAME test_layout COMMAND test_layout)
if(TARGET nnlens::onnx)
  set(lay ${tsrc}/layout)
  add_executable(test_tool_reference ${lay}/test_tool_reference.cpp $<TARGET_OBJECTS:nnlens_test_main>)
  target_include_directories(test_tool_reference PRIVATE ${PROJECT_SOURCE_DIR}/tests)
  target_compile_definitions(test_tool_reference PRIVATE NNLENS_TOOL="$<TARGET_FILE:nnlens_tool>"
                             NNLENS_LAYOUT_FIXTURES="${lay}" NNLENS_SHARED_DIR="${NNLENS_SHARED_DIR}")
  target_link_libraries(test_tool_reference PRIVATE doctest::doctest nlohmann_json::nlohmann_json nnlens_project_options nnlens_test_options)
  set_target_properties(test_tool_reference PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${NNLENS_BIN_DIR}/tests)
  add_dependencies(test_tool_reference nnlens_tool)
  add_test(NAME test_tool_reference COMMAND test_tool_reference)
  set_tests_properties(test_tool_reference PROPERTIES SKIP_RETURN_CODE 77)
endif()
