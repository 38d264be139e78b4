# Writes one "unity" translation unit from several test sources (cmake -P; called by
# nnlens_unity_build() in cmake/nnlens_unity.cmake at build time, whenever a source changes).
#
#   cmake -DOUT=<file.cpp> -DSOURCES=<a.cpp|b.cpp|...> -P nnlens_unity_gen.cmake
#
# Each source is split into its preamble (the leading lines that are blank, comments or
# preprocessor directives: its #includes) and its body.  The unity file holds every preamble, in
# order, at global scope, then every body inside a namespace of its own:
#
#   #line 1 "a.cpp"            (a's preamble)
#   #line 1 "b.cpp"            (b's preamble)
#   namespace nnlens_unity_1 {
#   #line 12 "a.cpp"           (a's body)
#   }
#   namespace nnlens_unity_2 { ... }
#
# so the headers are parsed once, each template is instantiated once per unity file, and two test
# files may still use the same names for their helpers (anonymous namespaces, `using namespace`).
# #line keeps every diagnostic and doctest's file:line on the original file.  A body must not
# #include (its header would land inside the namespace): this script fails naming the file and
# line; move the include into the file's preamble.  A source that must stay at global scope (one
# that specialises a library template in namespace nnlens, say) is left out of the unity file with
# the source property SKIP_UNITY_BUILD_INCLUSION (cmake/nnlens_unity.cmake).
#
# -DPROGRAMS=1: the sources are whole programs (the examples in ./scripts/test's tree).  Each body
# goes into namespace nnlens_program_<file stem> (its main becomes an ordinary function there),
# and registers that main under the stem with nnlens_program_register(), which
# cmake/nnlens_programs_main.cpp defines with the one real main: `PROGRAM NAME ARGS...` runs NAME's
# main with argv[0] = NAME.  A main that falls off its end returns 0 in the global namespace only:
# -Wreturn-type (in -Wall) names such a body.
cmake_minimum_required(VERSION 3.21)
if(NOT OUT OR NOT SOURCES)
  message(FATAL_ERROR "nnlens_unity_gen.cmake: pass -DOUT=<file> -DSOURCES=<a.cpp|b.cpp|...>")
endif()
string(REPLACE "|" ";" _sources "${SOURCES}")

set(_preambles "")
set(_bodies "")
set(_i 0)
foreach(src IN LISTS _sources)
  math(EXPR _i "${_i} + 1")
  file(READ "${src}" _text)
  # the preamble: leading lines that are empty, // comments or preprocessor lines
  string(REGEX MATCH "^(([ \t]*(#|//)[^\n]*)?\n)*" _pre "${_text}")
  string(LENGTH "${_pre}" _n)
  string(SUBSTRING "${_text}" ${_n} -1 _body)
  # line number at which the body starts
  string(REGEX MATCHALL "\n" _nl "${_pre}")
  list(LENGTH _nl _lines)
  math(EXPR _first "${_lines} + 1")
  # no #include in the body: it would be included inside nnlens_unity_N
  string(REGEX MATCH "(^|\n)[ \t]*#[ \t]*include[^\n]*" _inc "${_body}")
  if(_inc)
    string(FIND "${_body}" "${_inc}" _at)
    string(SUBSTRING "${_body}" 0 ${_at} _before)
    string(REGEX MATCHALL "\n" _nl2 "${_before}")
    list(LENGTH _nl2 _l2)
    if(_at GREATER 0)  # the match starts with the newline that ends the line before it
      math(EXPR _l2 "${_l2} + 1")
    endif()
    string(STRIP "${_inc}" _inc)
    math(EXPR _line "${_first} + ${_l2}")
    # the indented line is preformatted: CMake does not wrap it, so file:line stays one token for editors
    message(FATAL_ERROR "unity file generator: an #include below a declaration\n"
                        "  ${src}:${_line}: `${_inc}` comes after the file's first declaration\n"
                        "the unity build (NNLENS_UNITY_BUILD) needs every #include in the leading block of the file: move it up")
  endif()
  # a conditional opened in the preamble must close there (the body goes inside a namespace)
  string(REGEX MATCHALL "(^|\n)[ \t]*#[ \t]*if" _ifs "${_pre}")
  string(REGEX MATCHALL "(^|\n)[ \t]*#[ \t]*endif" _endifs "${_pre}")
  list(LENGTH _ifs _nif)
  list(LENGTH _endifs _nendif)
  if(NOT _nif EQUAL _nendif)
    message(FATAL_ERROR "unity file generator: an unbalanced #if\n"
                        "  ${src}: an #if in the file's leading block of #includes closes after its first declaration\n"
                        "the unity build (NNLENS_UNITY_BUILD) needs that block balanced")
  endif()
  string(APPEND _preambles "#line 1 \"${src}\"\n${_pre}\n")
  if(PROGRAMS)
    get_filename_component(_stem "${src}" NAME_WE)
    string(MAKE_C_IDENTIFIER "${_stem}" _ns)
    set(_ns "nnlens_program_${_ns}")
    string(APPEND _bodies "namespace ${_ns} {\n#line ${_first} \"${src}\"\n${_body}\n"
                          "[[maybe_unused]] const int nnlens_program_registered = ::nnlens_program_register(\"${_stem}\", "
                          "[](int argc, char** argv) { return ::nnlens_program_call(main, argc, argv); });\n"
                          "}  // namespace ${_ns}\n")
  else()
    string(APPEND _bodies "namespace nnlens_unity_${_i} {\n#line ${_first} \"${src}\"\n${_body}\n}  // namespace nnlens_unity_${_i}\n")
  endif()
endforeach()

if(PROGRAMS)
  string(APPEND _preambles "#line 1 \"${CMAKE_CURRENT_LIST_FILE}\"\n"
    "#include <type_traits>\n"
    "int nnlens_program_register(const char* name, int (*run)(int, char**));  // cmake/nnlens_programs_main.cpp\n"
    "template <class F>\n"
    "int nnlens_program_call(F* f, int argc, char** argv) {\n"
    "  if constexpr (std::is_invocable_v<F*>) return (void)argc, (void)argv, f();\n"
    "  else return f(argc, argv);\n"
    "}\n")
endif()
set(_content "// Generated by cmake/nnlens_unity_gen.cmake (NNLENS_UNITY_BUILD): do not edit.\n${_preambles}${_bodies}")
set(_tmp "${OUT}.tmp")
file(WRITE "${_tmp}" "${_content}")
file(COPY_FILE "${_tmp}" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${_tmp}")
