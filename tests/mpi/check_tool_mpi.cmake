# `mpirun -np 2 nnlens SUBCOMMAND ...` prints what one process prints (tests/tool/CMakeLists.txt):
# the same exit status and the same standard output once the timings are removed (JSON "seconds",
# "mean_seconds", "prepare", "measure").  Rank 0 alone prints, so the output is not doubled.
# -DTOOL= the nnlens tool, -DMPIRUN= the launcher up to the rank count flag (a list), -DARGS= the
# subcommand and its arguments (a list), -DWORK= a directory; -DLABELS= a labels file to write first
# with the predicted classes of -DSAMPLES on -DMODEL (`nnlens run`: every training input correct).
file(MAKE_DIRECTORY ${WORK})
include(${CMAKE_CURRENT_LIST_DIR}/../tool/predicted_labels.cmake)
if(LABELS)
  write_predicted_labels(${TOOL} ${MODEL} ${SAMPLES} ${LABELS})
endif()
function(run_tool out_var rc_var)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE o ERROR_VARIABLE e)
  string(REGEX REPLACE "\"(seconds|mean_seconds|prepare|measure)\": ?[0-9.e+-]+" "\"\\1\": T" o "${o}")
  set(${out_var} "${o}" PARENT_SCOPE)
  set(${rc_var} "${rc}" PARENT_SCOPE)
  if(NOT rc MATCHES "^[01]$")
    message(FATAL_ERROR "${ARGN}: exit status ${rc}\n${o}${e}")
  endif()
endfunction()
run_tool(one rc1 ${TOOL} ${ARGS})
run_tool(two rc2 ${MPIRUN} 2 ${TOOL} ${ARGS})
if(NOT rc1 EQUAL rc2)
  message(FATAL_ERROR "exit status: one process ${rc1}, mpirun -np 2 ${rc2}")
endif()
if(one STREQUAL "" OR NOT one STREQUAL two)
  message(FATAL_ERROR "the outputs differ:\n--- one process\n${one}\n--- mpirun -np 2\n${two}")
endif()
string(LENGTH "${one}" len)
message("the same output (${len} bytes), exit status ${rc1}")
