# tests/tool/semslice/check_semslice.cmake -- `nnlens semslice` on a model and a CSV of samples with
# the labels LABELS (two categories, 0 and 1):
#  1. --json -o MASK: the JSON parses; one entry per Dense/Conv2D layer (LAYERS) with 1 <= critical
#     <= neurons and a k per category, the output layer keeps every neuron; parameters_kept <=
#     parameters, 0 <= compression <= 100; MASK is written;
#  2. Θ-monotonicity (spec §7 oracle 3): per layer, critical at theta 0.5 <= at 0.95 <= at 1;
#  3. --mask MASK --json: the same critical counts and parameters, and the accuracy of the model and
#     of the masked model on the samples;
#  4. the text table names every layer and the categories.
#   cmake -DTOOL=... -DMODEL=... -DSAMPLES=... -DLABELS=... -DWORK=dir -DLAYERS=5 -P check_semslice.cmake
cmake_minimum_required(VERSION 3.20)
file(MAKE_DIRECTORY ${WORK})
set(mask ${WORK}/semslice.mask)
file(REMOVE ${mask})

include(${CMAKE_CURRENT_LIST_DIR}/../tool_checks.cmake)
set(semslice semslice ${MODEL} --data ${SAMPLES} --labels ${LABELS})

function(critical_of j out)
  string(JSON n LENGTH "${j}" layers)
  if(NOT n EQUAL ${LAYERS})
    message(FATAL_ERROR "expected ${LAYERS} layers, got ${n}:\n${j}")
  endif()
  set(r "")
  math(EXPR last "${n} - 1")
  foreach(i RANGE ${last})
    string(JSON w GET "${j}" layers ${i} neurons)
    string(JSON c GET "${j}" layers ${i} critical)
    if(c LESS 1 OR c GREATER w)
      message(FATAL_ERROR "layer ${i}: critical ${c} not in [1, ${w}]:\n${j}")
    endif()
    if(i EQUAL last AND NOT c EQUAL w)
      message(FATAL_ERROR "the output layer must keep all ${w} neurons, kept ${c}")
    endif()
    list(APPEND r ${c})
  endforeach()
  set(${out} "${r}" PARENT_SCOPE)
endfunction()

# 1.
tool_output(j1 ${semslice} --json --categories 0,1 --samples 5 -o ${mask})
if(NOT EXISTS ${mask})
  message(FATAL_ERROR "-o ${mask} was not written")
endif()
critical_of("${j1}" c95)
string(JSON k0 LENGTH "${j1}" layers 0 k)
if(NOT k0 EQUAL 2)
  message(FATAL_ERROR "expected a k per category (2), got ${k0}:\n${j1}")
endif()
string(JSON p GET "${j1}" parameters)
string(JSON pk GET "${j1}" parameters_kept)
string(JSON cr GET "${j1}" compression)
if(NOT p MATCHES "^[0-9]+$" OR NOT pk MATCHES "^[0-9]+$" OR pk GREATER p)
  message(FATAL_ERROR "bad parameters ${pk} / ${p}")
endif()
if(cr LESS 0 OR cr GREATER 100)
  message(FATAL_ERROR "compression ${cr} outside [0, 100]")
endif()
expect_json_seconds("${j1}")

# 2.
tool_output(j2 ${semslice} --json --categories 0,1 --samples 5 --theta 0.5)
critical_of("${j2}" c50)
tool_output(j3 ${semslice} --json --categories 0,1 --samples 5 --theta 1)
critical_of("${j3}" c100)
foreach(a b IN ZIP_LISTS c50 c95)
  if(a GREATER b)
    message(FATAL_ERROR "theta 0.5 keeps more than theta 0.95: ${c50} vs ${c95}")
  endif()
endforeach()
foreach(a b IN ZIP_LISTS c95 c100)
  if(a GREATER b)
    message(FATAL_ERROR "theta 0.95 keeps more than theta 1: ${c95} vs ${c100}")
  endif()
endforeach()

# 3.
tool_output(jm ${semslice} --json --mask ${mask})
critical_of("${jm}" cm)
if(NOT cm STREQUAL c95)
  message(FATAL_ERROR "--mask: critical ${cm}, the slice had ${c95}")
endif()
string(JSON pkm GET "${jm}" parameters_kept)
if(NOT pkm EQUAL pk)
  message(FATAL_ERROR "--mask: parameters_kept ${pkm}, the slice had ${pk}")
endif()
foreach(f model masked)
  string(JSON a GET "${jm}" accuracy ${f})
  if(a LESS 0 OR a GREATER 100)
    message(FATAL_ERROR "accuracy.${f} = ${a}")
  endif()
endforeach()

# 4.
tool_output(o ${semslice} --categories 0,1 --samples 5 --metric avg --test ${SAMPLES} --test-labels ${LABELS})
if(NOT o MATCHES "2 categories, metric avg, theta 0.95, linear_cka.*k per category \\(0 1\\)\n  0 Conv2D .*output, never sliced\n  parameters: [0-9]+ / ${p} kept, compression [0-9.]+%\n  accuracy on [^\n]*: [0-9.]+% -> [0-9.]+% masked\n")
  message(FATAL_ERROR "unexpected text output:\n${o}")
endif()
message(STATUS "${o}")
