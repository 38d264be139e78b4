# tests/tool/expect_fail.cmake -- runs CMD (a ;-list) and passes when it exits non-zero with exactly
# one line on stderr that starts with "nnlens: " and matches the regex EXPECT.
#   cmake -DCMD="a;b;c" -DEXPECT=regex -P expect_fail.cmake
execute_process(COMMAND ${CMD} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0)
  message(FATAL_ERROR "expected a failure, got exit code 0\nstdout: ${out}\nstderr: ${err}")
endif()
string(REGEX MATCHALL "\n" _nl "${err}")
list(LENGTH _nl n)
if(NOT n EQUAL 1 OR NOT err MATCHES "^nnlens: ")
  message(FATAL_ERROR "expected one line 'nnlens: ...' on stderr, got ${n} lines:\n${err}")
endif()
if(NOT err MATCHES "${EXPECT}")
  message(FATAL_ERROR "stderr does not match '${EXPECT}':\n${err}")
endif()
message(STATUS "exit ${rc}: ${err}")
