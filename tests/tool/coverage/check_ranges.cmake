# tests/tool/coverage/check_ranges.cmake -- what `nnlens coverage` reports beside LSC and IDC's total:
#  1. LSC with the spec's range: JSON criteria.lsc.range has lower 0, upper 2000, source "spec", and
#     counts with inputs = the number of test samples = in_range + below + above + nan,
#     in_range_fraction = in_range / inputs; the text row of lsc states the share in range and the
#     below / above counts, the same numbers;
#  2. --lsc-range reference: lower = the smallest test LSA, so no input is below it (below 0,
#     lower <= the spec run's lower when some input was below 0), source "reference", and the
#     coverage is computed on that range (the text names it);
#  3. IDC with M important neurons: the text's total is the JSON's exact "incc" (a decimal string),
#     followed by "(capped)" exactly when "total_capped" is true; with CAPPED=1 it must be capped;
#  4. --lsc-range foo: one line naming the choices.
#   cmake -DTOOL=... -DMODEL=... -DSAMPLES=... -DWORK=dir -DM=84 -DCAPPED=1 -P check_ranges.cmake
cmake_minimum_required(VERSION 3.20)
file(MAKE_DIRECTORY ${WORK})
set(lab ${WORK}/labels.txt)
include(${CMAKE_CURRENT_LIST_DIR}/../predicted_labels.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/../tool_checks.cmake)
write_predicted_labels(${TOOL} ${MODEL} ${SAMPLES} ${lab})
file(STRINGS ${SAMPLES} rows REGEX "[0-9]")
list(LENGTH rows n)

set(coverage coverage ${MODEL} --train ${SAMPLES} --train-labels ${lab} --test ${SAMPLES} --m ${M} --criteria idc,lsc
             --no-progress)

function(check_range j source)
  string(JSON t ERROR_VARIABLE jerr TYPE "${j}" criteria lsc range)
  if(jerr OR NOT t STREQUAL "OBJECT")
    message(FATAL_ERROR "criteria.lsc.range missing (${jerr}):\n${j}")
  endif()
  foreach(k lower upper buckets inputs in_range below above nan in_range_fraction source)
    string(JSON v${k} GET "${j}" criteria lsc range ${k})
    set(${k} ${v${k}} PARENT_SCOPE)
  endforeach()
  math(EXPR sum "${vin_range} + ${vbelow} + ${vabove} + ${vnan}")
  if(NOT vinputs EQUAL n OR NOT sum EQUAL n)
    message(FATAL_ERROR "lsc range: inputs ${vinputs}, in+below+above+nan ${sum}, expected ${n}:\n${j}")
  endif()
  if(NOT vsource STREQUAL source OR NOT vupper EQUAL 2000 OR NOT vbuckets EQUAL 1000)
    message(FATAL_ERROR "lsc range: source ${vsource} (expected ${source}), upper ${vupper}, buckets ${vbuckets}:\n${j}")
  endif()
  # in_range_fraction = in_range / n, to 1e-6
  math(EXPR want "${vin_range} * 1000000 / ${n}")
  string(REGEX REPLACE "^([0-9]+)\\.?([0-9]*)$" "\\1;\\2" parts "${vin_range_fraction}")
  list(GET parts 0 ip)
  list(LENGTH parts np)
  set(fp "")
  if(np GREATER 1)
    list(GET parts 1 fp)
  endif()
  string(SUBSTRING "${fp}000000" 0 6 fp)
  math(EXPR got "${ip} * 1000000 + 1${fp} - 1000000")
  math(EXPR d "${got} - ${want}")
  if(d GREATER 1 OR d LESS -1)
    message(FATAL_ERROR "in_range_fraction ${vin_range_fraction}, in_range ${vin_range} of ${n}")
  endif()
endfunction()

# 1. the spec's range, JSON and text
tool_output(j ${coverage} --json)
check_range("${j}" spec)
if(NOT lower EQUAL 0)
  message(FATAL_ERROR "the spec's LSC range starts at ${lower}, not 0")
endif()
set(spec_below ${below})
tool_output(txt ${coverage})
if(NOT txt MATCHES "\n  lsc [^\n]*buckets on \\[0, 2000\\][^\n]*; [0-9.]+% of inputs in range \\(${in_range} in, ${below} below, ${above} above")
  message(FATAL_ERROR "the lsc row does not state the share in range (${in_range} in, ${below} below, ${above} above):\n${txt}")
endif()

# 2. the reference code's range
tool_output(jr ${coverage} --json --lsc-range reference)
check_range("${jr}" reference)
if(NOT below EQUAL 0 OR (spec_below GREATER 0 AND NOT lower LESS 0))
  message(FATAL_ERROR "--lsc-range reference: lower ${lower}, ${below} below (the spec's range had ${spec_below} below)")
endif()
tool_output(txtr ${coverage} --lsc-range reference)
if(NOT txtr MATCHES "\n  lsc [^\n]*\\(reference: lower = min test LSA\\)[^\n]*; 100\\.00% of inputs in range|\n  lsc [^\n]*\\(reference: lower = min test LSA\\)[^\n]* 0 below")
  message(FATAL_ERROR "--lsc-range reference: the text does not name the range:\n${txtr}")
endif()

# 3. IDC's total in the text: the exact |INCC|, marked when capped
string(JSON incc GET "${j}" criteria idc incc)
string(JSON capped GET "${j}" criteria idc total_capped)
if(NOT incc MATCHES "^[0-9]+$")
  message(FATAL_ERROR "criteria.idc.incc is not a decimal string: ${incc}")
endif()
if(CAPPED AND NOT capped)
  message(FATAL_ERROR "expected |INCC| capped with --m ${M}, got incc ${incc}, total_capped ${capped}")
endif()
if(capped)
  set(mark " \\(capped\\)")
else()
  set(mark "")
endif()
if(NOT txt MATCHES "\n  idc +[0-9.]+% +[0-9]+ / ${incc}${mark}  ")
  message(FATAL_ERROR "the idc row does not show |INCC| = ${incc}${mark}:\n${txt}")
endif()
if(NOT capped AND txt MATCHES "\\(capped\\)")
  message(FATAL_ERROR "(capped) printed for an uncapped |INCC| ${incc}:\n${txt}")
endif()

# 4. a bad --lsc-range
execute_process(COMMAND ${TOOL} coverage ${MODEL} --train ${SAMPLES} --train-labels ${lab} --test ${SAMPLES} --criteria lsc
                        --lsc-range foo --no-progress RESULT_VARIABLE rc OUTPUT_VARIABLE o ERROR_VARIABLE e)
if(rc EQUAL 0 OR NOT e MATCHES "^nnlens: --lsc-range: expected spec or reference, got 'foo'\n$")
  message(FATAL_ERROR "--lsc-range foo: exit ${rc}, stderr: ${e}")
endif()
message(STATUS "ok: lsc ${in_range}/${n} in range (spec: ${spec_below} below); idc |INCC| ${incc}, capped ${capped}")
