# tests/tool/tool_checks.cmake -- what the tool tests' `cmake -P` scripts share (include it; TOOL is
# the nnlens executable):
#   tool_output(OUT args...)            runs ${TOOL} args...; fails, naming the subcommand and its
#                                       arguments, the exit code and stderr, unless it exits 0; OUT
#                                       gets its stdout
#   expect_json_length(JSON N key...)   JSON parses and the array or object at key... has N entries
#   expect_json_seconds(JSON)           JSON's "seconds" is a number
# Included by coverage/check_ranges.cmake, semslice/check_semslice.cmake, slice/check_slice.cmake
# and exactline/check_exactline.cmake.

function(tool_output out)
  execute_process(COMMAND ${TOOL} ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE o ERROR_VARIABLE e)
  if(NOT rc EQUAL 0)
    list(JOIN ARGN " " args)
    message(FATAL_ERROR "nnlens ${args} failed (${rc}): ${e}")
  endif()
  set(${out} "${o}" PARENT_SCOPE)
endfunction()

function(expect_json_length j n)
  string(JSON got ERROR_VARIABLE jerr LENGTH "${j}" ${ARGN})
  if(jerr)
    message(FATAL_ERROR "not the expected JSON (${jerr}):\n${j}")
  endif()
  if(NOT got EQUAL n)
    list(JOIN ARGN "." key)
    message(FATAL_ERROR "expected ${n} entries in \"${key}\", got ${got}")
  endif()
endfunction()

function(expect_json_seconds j)
  string(JSON t ERROR_VARIABLE jerr TYPE "${j}" seconds)
  if(jerr OR NOT t STREQUAL "NUMBER")
    message(FATAL_ERROR "\"seconds\" is ${t}, not a number")
  endif()
endfunction()
