# tests/tool/difftest/check_options.cmake -- DFlare's two options beyond the spec in `nnlens difftest`
# (--distance logit-margin, --skip-repeats), on a fixed query-budgeted run (deterministic: with a
# query budget alone the result does not depend on the thread count):
#  1. the default: the JSON summary echoes distance "paper", skip_repeats false;
#  2. --skip-repeats: echoed; every seed still found; the search differs from the default (another
#     per-seed query list);
#  3. --distance logit-margin: echoed; every seed found; the search differs from the default;
#  4. both: echoed; every seed found, in fewer queries in total than the default (docs/dflare.md:
#     75.8 against 145.1 queries per trigger on this pair); the text summary names both options.
#   cmake -DTOOL=... -DORIGINAL=... -DTWIN=q8 -DSEEDS=... -DLIMIT=5 -P check_options.cmake
cmake_minimum_required(VERSION 3.20)

function(run_dt out)
  execute_process(COMMAND ${TOOL} difftest ${ORIGINAL} ${TWIN} --seeds ${SEEDS} --limit ${LIMIT} --budget-queries 3000
                          --timeout 0 --no-progress ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE o ERROR_VARIABLE e)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "nnlens difftest ${ARGN}: exit ${rc} (some seed not found or an error): ${e}\n${o}")
  endif()
  set(${out} "${o}" PARENT_SCOPE)
endfunction()

# the per-seed queries as a list, and the echoed options
function(summary j distance skip)
  string(JSON d GET "${j}" summary distance)
  string(JSON s GET "${j}" summary skip_repeats)
  if(NOT d STREQUAL distance OR NOT s STREQUAL skip)
    message(FATAL_ERROR "summary: distance ${d}, skip_repeats ${s}; expected ${distance}, ${skip}:\n${j}")
  endif()
  string(JSON found GET "${j}" summary found)
  string(JSON searched GET "${j}" summary searched)
  if(NOT found EQUAL searched OR searched EQUAL 0)
    message(FATAL_ERROR "distance ${distance}, skip_repeats ${skip}: ${found} of ${searched} found:\n${j}")
  endif()
  string(JSON ns LENGTH "${j}" seeds)
  math(EXPR last "${ns} - 1")
  set(q "")
  foreach(i RANGE ${last})
    string(JSON qi GET "${j}" seeds ${i} queries)
    list(APPEND q ${qi})
  endforeach()
  string(JSON total GET "${j}" summary total_queries)
  set(queries "${q}" PARENT_SCOPE)
  set(total ${total} PARENT_SCOPE)
endfunction()

run_dt(j0 --json)
summary("${j0}" paper OFF)
set(q0 "${queries}")
set(t0 ${total})

run_dt(j1 --json --skip-repeats)
summary("${j1}" paper ON)
if(queries STREQUAL q0)
  message(FATAL_ERROR "--skip-repeats: the same per-seed queries as the default (${q0}): the option had no effect")
endif()
set(t1 ${total})

run_dt(j2 --json --distance logit-margin)
summary("${j2}" logit-margin OFF)
if(queries STREQUAL q0)
  message(FATAL_ERROR "--distance logit-margin: the same per-seed queries as the default (${q0}): the option had no effect")
endif()
set(t2 ${total})

run_dt(j3 --json --distance logit-margin --skip-repeats)
summary("${j3}" logit-margin ON)
if(NOT total LESS t0)
  message(FATAL_ERROR "both options: ${total} queries in total, the default ${t0} (expected fewer)")
endif()
set(t3 ${total})

run_dt(txt --distance logit-margin --skip-repeats)
if(NOT txt MATCHES "\ndflare --distance logit-margin --skip-repeats: [0-9]+ seeds")
  message(FATAL_ERROR "the text summary does not name the options:\n${txt}")
endif()
message(STATUS "ok: total queries: default ${t0} (${q0}), --skip-repeats ${t1}, --distance logit-margin ${t2}, both ${t3}")
