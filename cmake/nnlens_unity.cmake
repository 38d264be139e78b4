# nnlens_unity_build(target [BATCH n] [PROGRAMS]): compiles a test executable's sources as "unity"
# translation units of up to n sources each (default 12), generated at build time by
# cmake/nnlens_unity_gen.cmake.  PROGRAMS: the sources are whole programs, each with its main
# (examples/CMakeLists.txt, NNLENS_EXAMPLES_ONE_PROGRAM; see nnlens_unity_gen.cmake).
#
# Why: a test object's time is mostly parsing nnlens and xtensor and instantiating the
# same templates (the dynamic network's visits, the analyses, doctest) that its neighbours
# instantiate too.  Measured on test_layers (7 sources, -O1, g++ 12): 185 s of compiler time as 7
# objects, 92 s as one unity file (docs/dev/testing.md, "How the test executables compile: unity files").  And on
# the slicing suites (9 sources then, -O0): 94.1 s as 3 unity files, 63.2 s as one (1.9 GB).  So
# the default batch (12) makes one file of each test executable today; the build has about 40
# objects beside them, so two jobs still find work.
#
# Each source's body goes into a namespace of its own (see nnlens_unity_gen.cmake), so test files
# need not give their helpers distinct names; they must keep every #include in their leading block.
# A source with the property SKIP_UNITY_BUILD_INCLUSION stays a separate object.  The generated
# files depend on their sources: editing one test file regenerates and recompiles its batch.
#
# NNLENS_UNITY_BUILD=OFF builds every source as its own object, as before (quicker to recompile
# one edited file; the suite's clean build takes about twice as long).
option(NNLENS_UNITY_BUILD "Compile the test executables and the tool as unity translation units (faster clean builds)" ON)

set(_nnlens_unity_gen ${CMAKE_CURRENT_LIST_DIR}/nnlens_unity_gen.cmake)

function(nnlens_unity_build target)
  if(NOT NNLENS_UNITY_BUILD)
    return()
  endif()
  cmake_parse_arguments(PARSE_ARGV 1 _u "PROGRAMS" "BATCH" "")
  if(NOT _u_BATCH)
    set(_u_BATCH 12)
  endif()
  get_target_property(_all ${target} SOURCES)
  set(_unity)
  set(_keep)
  set(_dirs)
  foreach(s IN LISTS _all)
    if(s MATCHES "^\\$<" OR NOT s MATCHES "\\.cpp$")
      list(APPEND _keep ${s})
      continue()
    endif()
    get_filename_component(_abs ${s} ABSOLUTE BASE_DIR ${CMAKE_CURRENT_SOURCE_DIR})
    get_source_file_property(_skip ${_abs} SKIP_UNITY_BUILD_INCLUSION)
    if(_skip)
      list(APPEND _keep ${s})
      continue()
    endif()
    list(APPEND _unity ${_abs})
    get_filename_component(_d ${_abs} DIRECTORY)
    list(APPEND _dirs ${_d})
  endforeach()
  list(LENGTH _unity _n)
  if(_n LESS 2)
    return()
  endif()
  # n sources in ceil(n / BATCH) files of near-equal size
  math(EXPR _files "(${_n} + ${_u_BATCH} - 1) / ${_u_BATCH}")
  set(_generated)
  foreach(k RANGE 1 ${_files})
    set(_batch)
    set(_i 0)
    foreach(s IN LISTS _unity)
      math(EXPR _slot "${_i} % ${_files} + 1")
      if(_slot EQUAL k)
        list(APPEND _batch ${s})
      endif()
      math(EXPR _i "${_i} + 1")
    endforeach()
    set(_out ${CMAKE_CURRENT_BINARY_DIR}/unity/${target}_${k}.cpp)
    string(REPLACE ";" "|" _arg "${_batch}")
    set(_programs)
    if(_u_PROGRAMS)
      set(_programs -DPROGRAMS=1)
    endif()
    add_custom_command(OUTPUT ${_out}
      COMMAND ${CMAKE_COMMAND} -DOUT=${_out} "-DSOURCES=${_arg}" ${_programs} -P ${_nnlens_unity_gen}
      DEPENDS ${_batch} ${_nnlens_unity_gen}
      COMMENT "Unity source ${target}_${k}.cpp (${_batch})" VERBATIM)
    list(APPEND _generated ${_out})
  endforeach()
  list(REMOVE_DUPLICATES _dirs)
  # quoted #includes ("gradient_check.hpp") resolve from the generated file's folder: add the sources'
  target_include_directories(${target} PRIVATE ${_dirs})
  set_property(TARGET ${target} PROPERTY SOURCES ${_keep} ${_generated})
endfunction()
