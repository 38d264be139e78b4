# A no-op build is a no-op (issue 19, item 1): with everything built, `cmake --build` must have no
# work to do and finish within LIMIT seconds.  Run by ctest after ./scripts/build (the suite's
# first step), so the build tree is complete; a second, real build then proves it stays so.
#   cmake -DBIN=<build dir> -DLIMIT=<seconds> -P noop_build.cmake
# Fails naming the first out-of-date outputs and why (ninja -d explain) when there is work.
execute_process(COMMAND ${CMAKE_COMMAND} --build ${BIN} -- -n -d explain
                OUTPUT_VARIABLE dry ERROR_VARIABLE why RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "noop_build: `ninja -n` in ${BIN} failed (${rc}):\n${why}")
endif()
if(NOT dry MATCHES "no work to do")
  string(SUBSTRING "${why}" 0 2000 why)
  string(SUBSTRING "${dry}" 0 2000 dry)
  message(FATAL_ERROR "noop_build: a build right after a full build still has work:\n${dry}\nwhy (ninja -d explain):\n${why}")
endif()
string(TIMESTAMP t0 "%s")
execute_process(COMMAND ${CMAKE_COMMAND} --build ${BIN} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
string(TIMESTAMP t1 "%s")
math(EXPR dt "${t1} - ${t0}")
if(NOT rc EQUAL 0 OR NOT out MATCHES "no work to do")
  message(FATAL_ERROR "noop_build: the second build did work or failed (${rc}):\n${out}\n${err}")
endif()
if(dt GREATER LIMIT)
  message(FATAL_ERROR "noop_build: a no-op build took ${dt} s (limit ${LIMIT} s)")
endif()
message(STATUS "noop_build: no work to do, ${dt} s (limit ${LIMIT} s)")
