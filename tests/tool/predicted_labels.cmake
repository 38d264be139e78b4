# write_predicted_labels(TOOL MODEL SAMPLES FILE): FILE gets one line per row of SAMPLES, the class
# MODEL predicts for it (`nnlens run`, the first maximal output), so that every training input of a
# coverage test is classified correctly.  Included by tests/tool/coverage/check_coverage.cmake and
# tests/mpi/check_tool_mpi.cmake.
function(write_predicted_labels tool model samples file)
  execute_process(COMMAND ${tool} run ${model} --input ${samples} --no-progress RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "nnlens run failed (${rc}): ${err}")
  endif()
  string(REGEX REPLACE "\n$" "" out "${out}")
  string(REPLACE "\n" ";" rows "${out}")
  set(labels "")
  foreach(r IN LISTS rows)
    string(REPLACE "," ";" vs "${r}")
    set(best 0)
    set(i 0)
    list(GET vs 0 bv)
    foreach(v IN LISTS vs)
      if(v GREATER bv)
        set(bv ${v})
        set(best ${i})
      endif()
      math(EXPR i "${i} + 1")
    endforeach()
    string(APPEND labels "${best}\n")
  endforeach()
  file(WRITE ${file} "${labels}")
endfunction()
