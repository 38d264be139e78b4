# precompiled_symbols (ctest): the object of tests/precompiled/test_precompiled.cpp, compiled with
# NNLENS_EXTERN_TEMPLATES, must call each precompiled form it uses (an undefined symbol: `nm` "U")
# and never define one ("T"/"W"): otherwise an `extern template` no longer matches the call, and
# the program instantiates the form again without a word.  Each pattern names the form itself, not
# its thin public wrapper (at -O0 the wrapper, e.g. prepare_idc over an xarray, is a definition of
# its own, which is fine: it calls the form).  LIB: the archives (libnnlens_precompiled.a
# and, with ONNX=ON, libnnlens_precompiled_onnx.a), which must define each of them.
#   cmake -DNM=<nm> -DOBJ=<object> "-DLIB=<archive>[;<archive>]" [-DONNX=ON] -P check_symbols.cmake
execute_process(COMMAND ${NM} -C ${OBJ} OUTPUT_VARIABLE obj RESULT_VARIABLE r1)
execute_process(COMMAND ${NM} -C --defined-only ${LIB} OUTPUT_VARIABLE lib RESULT_VARIABLE r2)
if(r1 OR r2)
  message(FATAL_ERROR "precompiled_symbols: ${NM} failed on ${OBJ} or ${LIB}")
endif()
set(forms
  "nnlens::detail::forward_rows<nnlens::execution::sequenced_policy, nnlens::basic_dynamic_network<float> >"
  "nnlens::detail::forward_rows<nnlens::execution::parallel_policy, nnlens::basic_dynamic_network<double> >"
  "nnlens::network_cast<double, nnlens::basic_dynamic_network<float> >"
  "nnlens::network_cast<float, nnlens::basic_dynamic_network<double> >"
  "nnlens::check_shapes<nnlens::basic_dynamic_network<float> >"
  "_ZN6nnlens21basic_dynamic_networkIfE4push"  # c++filt cannot spell its variant (class-type NTTPs)
  "nnlens::basic_dynamic_network<float>::~basic_dynamic_network()"
  "::gemm_impl::gemm_on<float>("
  "nnlens::detail::line_impl<double, double, nnlens::basic_dynamic_network<double> >"
  "nnlens::detail::line_impl<float, double, nnlens::basic_dynamic_network<float> >"
  "nnlens::detail::profile_rows<nnlens::execution::parallel_policy, nnlens::basic_dynamic_network<float> >"
  "nnlens::detail::profile_rows<nnlens::execution::sequenced_policy, nnlens::basic_dynamic_network<float> >"
  "nnlens::detail::nnslicer_rows<nnlens::execution::parallel_policy, nnlens::basic_dynamic_network<double> >"
  "nnlens::prepare_idc<nnlens::execution::parallel_policy, nnlens::basic_dynamic_network<float>, std::vector<unsigned long"
  "nnlens::measure<nnlens::execution::sequenced_policy, nnlens::basic_dynamic_network<float>, nnlens::nc_criterion>"
  "nnlens::measure<nnlens::execution::parallel_policy, nnlens::basic_dynamic_network<float>, nnlens::idc>")
if(ONNX)
  list(APPEND forms "nnlens::io::detail::onnx_reader<float>::read(")
endif()
string(REPLACE "\n" ";" obj_lines "${obj}")
set(bad "")
foreach(f ${forms})
  set(called FALSE)
  foreach(l ${obj_lines})
    string(FIND "${l}" "${f}" at)
    if(at GREATER -1)
      if(l MATCHES "^ +U ")
        set(called TRUE)
      elseif(l MATCHES "^[0-9a-f]+ [TtWw] ")
        string(APPEND bad "\n  defined in the test object (the extern declaration did not apply): ${f}")
      endif()
    endif()
  endforeach()
  if(NOT called)
    string(APPEND bad "\n  not called from the test object: ${f}")
  endif()
  string(FIND "${lib}" "${f}" at)
  if(at EQUAL -1)
    string(APPEND bad "\n  not defined in ${LIB}: ${f}")
  endif()
endforeach()
if(bad)
  message(FATAL_ERROR "precompiled_symbols:${bad}")
endif()
list(LENGTH forms n)
message(STATUS "precompiled_symbols: ${n} forms called from the test object and defined in the library")
