# tests/tool/coverage/check_coverage.cmake -- `nnlens coverage` on a model and a CSV of samples:
#  1. labels = the model's predicted classes (`nnlens run`), so that every training input is correct;
#  2. --json --state STATE (a fresh STATE): the JSON parses; every criterion of CRITERIA has numeric
#     coverage, integer covered <= total; idc has layer, M neurons and M cluster lists; seconds has
#     prepare and measure;
#  3. --json --state STATE again, without --train: the same coverage numbers, idc neurons and clusters;
#  4. the text table names every criterion;
#  5. STATE with another model's fingerprint: a non-zero exit and one line "... another model".
#   cmake -DTOOL=... -DMODEL=... -DSAMPLES=... -DWORK=dir -DM=3 -DCRITERIA="idc,nc" -P check_coverage.cmake
cmake_minimum_required(VERSION 3.20)
file(MAKE_DIRECTORY ${WORK})
set(lab ${WORK}/labels.txt)
set(state ${WORK}/coverage.state)
include(${CMAKE_CURRENT_LIST_DIR}/../predicted_labels.cmake)
write_predicted_labels(${TOOL} ${MODEL} ${SAMPLES} ${lab})
file(REMOVE ${state})
string(REPLACE "," ";" crit "${CRITERIA}")

function(run_json out)
  execute_process(COMMAND ${TOOL} coverage ${MODEL} --test ${SAMPLES} --m ${M} --criteria ${CRITERIA} --json
                          --state ${state} --no-progress ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE o ERROR_VARIABLE e)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "nnlens coverage failed (${rc}): ${e}")
  endif()
  set(${out} "${o}" PARENT_SCOPE)
endfunction()

run_json(j1 --train ${SAMPLES} --train-labels ${lab})
if(NOT EXISTS ${state})
  message(FATAL_ERROR "--state ${state} was not written")
endif()
foreach(c IN LISTS crit)
  string(JSON t ERROR_VARIABLE jerr TYPE "${j1}" criteria ${c} coverage)
  if(jerr OR NOT t STREQUAL "NUMBER")
    message(FATAL_ERROR "criteria.${c}.coverage missing or not a number (${jerr}):\n${j1}")
  endif()
  string(JSON cov GET "${j1}" criteria ${c} covered)
  string(JSON tot GET "${j1}" criteria ${c} total)
  if(NOT cov MATCHES "^[0-9]+$" OR NOT tot MATCHES "^[0-9]+$" OR cov GREATER tot)
    message(FATAL_ERROR "criteria.${c}: covered ${cov}, total ${tot}")
  endif()
endforeach()
if("idc" IN_LIST crit)
  string(JSON layer GET "${j1}" criteria idc layer)
  string(JSON nn LENGTH "${j1}" criteria idc neurons)
  string(JSON nk LENGTH "${j1}" criteria idc clusters)
  if(NOT layer MATCHES "^[0-9]+$" OR NOT nn EQUAL ${M} OR NOT nk EQUAL ${M})
    message(FATAL_ERROR "idc: layer ${layer}, ${nn} neurons, ${nk} cluster lists; expected ${M}:\n${j1}")
  endif()
endif()
foreach(k prepare measure)
  string(JSON t ERROR_VARIABLE jerr TYPE "${j1}" seconds ${k})
  if(jerr OR NOT t STREQUAL "NUMBER")
    message(FATAL_ERROR "seconds.${k} missing or not a number:\n${j1}")
  endif()
endforeach()

# The state round trip: no training set needed, the same numbers.
run_json(j2)
string(JSON c1 GET "${j1}" criteria)
string(JSON c2 GET "${j2}" criteria)
if(NOT c1 STREQUAL c2)
  message(FATAL_ERROR "--state round trip changed the results:\n${c1}\n${c2}")
endif()

execute_process(COMMAND ${TOOL} coverage ${MODEL} --test ${SAMPLES} --m ${M} --criteria ${CRITERIA} --state ${state}
                        --no-progress RESULT_VARIABLE rc OUTPUT_VARIABLE txt ERROR_VARIABLE e)
if(NOT rc EQUAL 0 OR NOT txt MATCHES "criterion +coverage +covered / total")
  message(FATAL_ERROR "text output (${rc}): ${txt}${e}")
endif()
foreach(c IN LISTS crit)
  if(NOT txt MATCHES "\n  ${c} +[0-9.]+% +[0-9]+ / [0-9]+")
    message(FATAL_ERROR "no row for ${c} in:\n${txt}")
  endif()
endforeach()

# A state of another model: its fingerprint changed.
file(READ ${state} s)
string(REGEX REPLACE "\nfingerprint [0-9]+\n" "\nfingerprint 12345\n" s "${s}")
file(WRITE ${WORK}/other.state "${s}")
execute_process(COMMAND ${TOOL} coverage ${MODEL} --test ${SAMPLES} --m ${M} --criteria ${CRITERIA}
                        --state ${WORK}/other.state --no-progress RESULT_VARIABLE rc OUTPUT_VARIABLE o ERROR_VARIABLE e)
if(rc EQUAL 0 OR NOT e MATCHES "^nnlens: [^\n]*other\\.state: a state of another model[^\n]*\n$")
  message(FATAL_ERROR "a state of another model: exit ${rc}, stderr: ${e}")
endif()
message(STATUS "ok: ${c1}")
