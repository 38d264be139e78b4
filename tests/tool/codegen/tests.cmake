# tests/tool/codegen/tests.cmake -- info / run / codegen and the build-time fixtures.
# Included by tests/tool/CMakeLists.txt, whose variables (tsrc, fx, lenet, _acas, _dxl5, _dt_seeds)
# and functions (nnlens_tool_fail, nnlens_tool_ok) it uses.

# Build-time fixtures (write_fixtures.cpp): a network with every layer type
# as a generated header, the demo's LeNet-5 as a seeded weights file, and CSV inputs for it.
add_executable(nnlens_write_fixtures ${tsrc}/codegen/write_fixtures.cpp)
target_link_libraries(nnlens_write_fixtures PRIVATE nnlens::idx nnlens_project_options nnlens_test_options)
add_custom_command(OUTPUT ${fx}/all_layers_generated.hpp ${fx}/lenet5.nnlw ${fx}/lenet5_input.csv ${fx}/bad_width.csv
                          ${fx}/bad_value.csv ${fx}/corrupt.nnlw
  COMMAND nnlens_write_fixtures ${fx} DEPENDS nnlens_write_fixtures
  COMMENT "Writing the codegen/tool test fixtures")
# The tool generates LeNet-5's header at build time (`nnlens codegen`).
add_custom_command(OUTPUT ${fx}/lenet5_generated.hpp
  COMMAND nnlens_tool codegen ${fx}/lenet5.nnlw -o ${fx}/lenet5_generated.hpp --name lenet5 --namespace lenet5_gen
  DEPENDS nnlens_tool ${fx}/lenet5.nnlw COMMENT "nnlens codegen lenet5.nnlw")
add_executable(test_codegen ${tsrc}/codegen/test_codegen.cpp ${fx}/all_layers_generated.hpp
               ${fx}/lenet5_generated.hpp $<TARGET_OBJECTS:nnlens_test_main>)
target_include_directories(test_codegen PRIVATE ${fx})
target_compile_definitions(test_codegen PRIVATE NNLENS_CODEGEN_DIR="${fx}")
target_link_libraries(test_codegen PRIVATE nnlens::idx doctest::doctest nnlens_project_options nnlens_test_options)
set_target_properties(test_codegen PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${NNLENS_BIN_DIR}/tests)
add_test(NAME test_codegen COMMAND test_codegen)

if(EXISTS ${_acas})
  add_custom_command(OUTPUT ${fx}/acas_generated.hpp
    COMMAND nnlens_tool codegen ${_acas} -o ${fx}/acas_generated.hpp --name acas_1_1 --namespace acas_gen
    DEPENDS nnlens_tool ${_acas} COMMENT "nnlens codegen ACASXU_run2a_1_1_batch_2000.nnet")
  target_sources(test_codegen PRIVATE ${fx}/acas_generated.hpp)
  target_compile_definitions(test_codegen PRIVATE NNLENS_CODEGEN_ACAS="${_acas}")
endif()
if(TARGET nnlens::onnx AND EXISTS ${_dxl5})
  add_custom_command(OUTPUT ${fx}/dx_lenet5_generated.hpp
    COMMAND nnlens_tool codegen ${_dxl5} -o ${fx}/dx_lenet5_generated.hpp --name lenet5 --namespace deepxplore
    DEPENDS nnlens_tool ${_dxl5} COMMENT "nnlens codegen deepxplore-mnist/lenet5.onnx")
  target_sources(test_codegen PRIVATE ${fx}/dx_lenet5_generated.hpp)
  target_compile_definitions(test_codegen PRIVATE NNLENS_CODEGEN_DX_LENET5="${_dxl5}")
  target_link_libraries(test_codegen PRIVATE nnlens::onnx)
endif()


foreach(cmd info run codegen exact-line ig profile slice)
  add_test(NAME tool_${cmd}_help COMMAND nnlens_tool ${cmd} --help)
  set_tests_properties(tool_${cmd}_help PROPERTIES PASS_REGULAR_EXPRESSION "MODEL")
endforeach()
add_test(NAME tool_info COMMAND nnlens_tool info ${lenet})
set_tests_properties(tool_info PROPERTIES PASS_REGULAR_EXPRESSION "Conv2D.*Dense.*output \\[10\\], 61706 parameters")
add_test(NAME tool_info_json COMMAND nnlens_tool info ${lenet} --json)
set_tests_properties(tool_info_json PROPERTIES PASS_REGULAR_EXPRESSION
  "^{\"input_shape\":\\[1,28,28\\],\"input\":\"\\[N,1,28,28\\]\",\"layout\":\"none\",\"network_input_shape\":\\[1,28,28\\],\"output_shape\":\\[10\\],\"layers\":\\[{\"type\":\"Conv2D\",\"output_shape\":\\[6,28,28\\],\"params\":156,\"cpp_type\":\"nnlens::Conv2D<6, 5, 1, 2>\",\"fields\":{\"W\":{\"shape\":\\[6,1,5,5\\]}.*{\"type\":\"Dense\",\"output_shape\":\\[10\\],\"params\":850,\"cpp_type\":\"nnlens::Dense<10>\".*\\],\"params\":61706}")
# how an int8 twin runs each layer: the convolutions' weights int8, ReLU on the codes
add_test(NAME tool_info_int8 COMMAND nnlens_tool info ${lenet} --json)
set_tests_properties(tool_info_int8 PROPERTIES PASS_REGULAR_EXPRESSION
  "\"type\":\"Conv2D\".*\"int8\":\"int8\"}.*\"type\":\"ReLU\".*\"int8\":\"codes\"}")
add_test(NAME tool_run COMMAND ${CMAKE_COMMAND} -DTOOL=$<TARGET_FILE:nnlens_tool> -DMODEL=${lenet}
         -DINPUT=${fx}/lenet5_input.csv -DOUTPUT=${CMAKE_CURRENT_BINARY_DIR}/run_out.csv -DROWS=5 -DOUT_COLS=10
         -P ${tsrc}/check_run.cmake)
# Real models: ACAS Xu 1_1 in raw units reproduces Marabou's expected outputs (oracles/expected_outputs.csv:
# 1000,0,-1.5,100,100 -> 177.87553729, 173.75796115, ...); `info` on an ONNX model.
if(EXISTS ${_acas})
  file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/acas_in.csv "1000,0,-1.5,100,100\n")
  add_test(NAME tool_run_acas COMMAND nnlens_tool run ${_acas} --input ${CMAKE_CURRENT_BINARY_DIR}/acas_in.csv)
  set_tests_properties(tool_run_acas PROPERTIES PASS_REGULAR_EXPRESSION "^177\\.8755[0-9]*,173\\.75[78][0-9]*,")
endif()
if(TARGET nnlens::onnx AND EXISTS ${_dxl5})
  add_test(NAME tool_info_onnx COMMAND nnlens_tool info ${_dxl5} --json)
  set_tests_properties(tool_info_onnx PROPERTIES PASS_REGULAR_EXPRESSION
    "^{\"input_shape\":\\[1,28,28\\],\"input\":\"\\[N,1,28,28\\] \\(nchw\\)\",\"layout\":\"nchw\",\"network_input_shape\":\\[1,28,28\\],\"output_shape\":\\[10\\],.*\"params\":107786}")
endif()
add_test(NAME tool_codegen COMMAND nnlens_tool codegen ${lenet} -o ${CMAKE_CURRENT_BINARY_DIR}/lenet5_cli.hpp)
nnlens_tool_fail(info_missing "no-such\\.onnx: no such file" info ${CMAKE_CURRENT_BINARY_DIR}/no-such.onnx)
nnlens_tool_fail(info_format "unsupported model format '\\.csv'" info ${fx}/lenet5_input.csv)
nnlens_tool_fail(info_corrupt "corrupt\\.nnlw: bad magic number" info ${fx}/corrupt.nnlw)
nnlens_tool_fail(run_no_input "--input is required" run ${lenet})
nnlens_tool_fail(run_wrong_width "bad_width\\.csv:3:4: expected 784 values per sample \\(sample shape \\[1,28,28\\]\\), found 3"
                 run ${lenet} --input ${fx}/bad_width.csv)
nnlens_tool_fail(run_bad_value "bad_value\\.csv:2:2: " run ${lenet} --input ${fx}/bad_value.csv)
nnlens_tool_fail(run_missing_input "nope\\.csv: cannot open" run ${lenet} --input ${fx}/nope.csv)
nnlens_tool_fail(run_bad_batch "batch" run ${lenet} --input ${fx}/lenet5_input.csv --batch 0)
nnlens_tool_fail(codegen_bad_name "is not a C\\+\\+ identifier" codegen ${lenet} -o ${CMAKE_CURRENT_BINARY_DIR}/x.hpp --name 9x)
nnlens_tool_fail(codegen_unwritable "cannot open for writing" codegen ${lenet} -o ${CMAKE_CURRENT_BINARY_DIR}/no-dir/x.hpp)
