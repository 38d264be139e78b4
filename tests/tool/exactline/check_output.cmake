# tests/tool/exactline/check_output.cmake -- runs CMD (a ;-list) and passes when it exits 0 and its
# standard output matches the regex EXPECT (ctest's PASS_REGULAR_EXPRESSION would ignore the exit code).
#   cmake -DCMD="a;b;c" -DEXPECT=regex -P check_output.cmake
execute_process(COMMAND ${CMD} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "expected exit code 0, got ${rc}\nstdout: ${out}\nstderr: ${err}")
endif()
if(NOT out MATCHES "${EXPECT}")
  message(FATAL_ERROR "stdout does not match '${EXPECT}':\n${out}")
endif()
message(STATUS "exit 0: ${out}")
