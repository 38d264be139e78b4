# A no-op build is a no-op: with everything built, `cmake --build` must have no
# work to do and finish within LIMIT seconds.  Run by ctest after ./scripts/build (the suite's
# first step), so this is the second build of the tree.  (`ninja -n` cannot be used: with
# CONFIGURE_DEPENDS globs a dry run always assumes the glob check changed something.)
#   cmake -DBIN=<build dir> -DLIMIT=<seconds> -P noop_build.cmake
# On failure it prints what ninja rebuilt and why (-d explain).
string(TIMESTAMP t0 "%s")
execute_process(COMMAND ${CMAKE_COMMAND} --build ${BIN} -- -d explain
                OUTPUT_VARIABLE out ERROR_VARIABLE why RESULT_VARIABLE rc)
string(TIMESTAMP t1 "%s")
math(EXPR dt "${t1} - ${t0}")
if(NOT rc EQUAL 0 OR NOT out MATCHES "no work to do")
  string(SUBSTRING "${out}" 0 3000 out)
  string(SUBSTRING "${why}" 0 3000 why)
  message(FATAL_ERROR "noop_build: a build right after a full build did work or failed (exit ${rc}, ${dt} s):\n"
                      "${out}\nwhy (ninja -d explain):\n${why}")
endif()
if(dt GREATER LIMIT)
  message(FATAL_ERROR "noop_build: a no-op build took ${dt} s (limit ${LIMIT} s)")
endif()
message(STATUS "noop_build: no work to do, ${dt} s (limit ${LIMIT} s)")
