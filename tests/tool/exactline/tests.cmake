# tests/tool/exactline/tests.cmake -- exact-line / ig and the CSV header rules.
# Included by tests/tool/CMakeLists.txt, whose variables (tsrc, fx, lenet, _acas, _dxl5, _dt_seeds)
# and functions (nnlens_tool_fail, nnlens_tool_ok) it uses.

# ---- exact-line / ig (ExactLine) on ACAS Xu 1_1, raw units: fixtures in tests/tool/exactline ----
set(el ${tsrc}/exactline)
if(EXISTS ${_acas})
  add_test(NAME tool_exactline_acas_json COMMAND ${CMAKE_COMMAND} -DTOOL=$<TARGET_FILE:nnlens_tool> -DMODEL=${_acas}
           -DFROM=${el}/acas_from.csv -DTO=${el}/acas_to.csv -DSVG=${CMAKE_CURRENT_BINARY_DIR}/exactline_acas.svg
           -DSEGMENTS=2 -DOUT_COLS=5 -P ${el}/check_exactline.cmake)
  add_test(NAME tool_exactline_acas_pieces COMMAND ${CMAKE_COMMAND} -DTOOL=$<TARGET_FILE:nnlens_tool> -DMODEL=${_acas}
           -DFROM=${el}/acas_from.csv -DTO=${el}/acas_to.csv -DDIR=${CMAKE_CURRENT_BINARY_DIR}/exactline_pieces
           -DSEGMENTS=2 -DOUT_COLS=5 -P ${el}/check_pieces.cmake)
  add_test(NAME tool_exactline_acas_text COMMAND nnlens_tool exact-line ${_acas} --from ${el}/acas_from.csv
           --to ${el}/acas_to.csv --classes argmin)
  set_tests_properties(tool_exactline_acas_text PROPERTIES PASS_REGULAR_EXPRESSION
    "segment 1 \\([^\n]*acas_from\\.csv:4 -> [^\n]*acas_to\\.csv:3\\): [0-9]+ pieces.*segment 2 \\([^\n]*acas_from\\.csv:5 -> [^\n]*acas_to\\.csv:4\\): [0-9]+ pieces, [0-9]+ class intervals\n  from t +to t +class\n  0 ")
  add_test(NAME tool_ig_acas_json COMMAND ${CMAKE_COMMAND} -DTOOL=$<TARGET_FILE:nnlens_tool> -DMODEL=${_acas}
           -DINPUT=${el}/ig_input.csv -DBASELINE=${el}/ig_baseline.csv -DINPUTS=2 -DM=50 -P ${el}/check_ig.cmake)
  add_test(NAME tool_ig_acas_single COMMAND ${CMAKE_COMMAND} -DTOOL=$<TARGET_FILE:nnlens_tool> -DMODEL=${_acas}
           -DINPUT=${el}/ig_single.csv -DBASELINE=${el}/ig_baseline.csv -DINPUTS=1 -DM=20 "-DARGS=--output-index;0"
           -P ${el}/check_ig.cmake)
  add_test(NAME tool_ig_acas_text COMMAND nnlens_tool ig ${_acas} --input ${el}/ig_single.csv --baseline ${el}/ig_baseline.csv)
  set_tests_properties(tool_ig_acas_text PROPERTIES PASS_REGULAR_EXPRESSION
    "ig_single\\.csv:2 \\(baseline [^\n]*ig_baseline\\.csv:3\\): output [0-4], [0-9]+ pieces.*rel_error.*samples for 5% error: left")
  # Failures: one line naming the CSV file and line.
  nnlens_tool_fail(exactline_degenerate "acas_from\\.csv:5 -> [^ ]*degenerate_to\\.csv:5: exact_line: the segment is degenerate"
                   exact-line ${_acas} --from ${el}/acas_from.csv --to ${el}/degenerate_to.csv)
  nnlens_tool_fail(exactline_rows "acas_from\\.csv has 2 samples but [^ ]*ig_baseline\\.csv has 1"
                   exact-line ${_acas} --from ${el}/acas_from.csv --to ${el}/ig_baseline.csv)
  nnlens_tool_fail(exactline_width "bad_width\\.csv:1:5: expected 5 values per sample \\(sample shape \\[5\\]\\), found 4"
                   exact-line ${_acas} --from ${el}/acas_from.csv --to ${el}/bad_width.csv)
  nnlens_tool_fail(exactline_nan "nan_value\\.csv:3:2: 'nan' is not a finite number"
                   exact-line ${_acas} --from ${el}/nan_value.csv --to ${el}/acas_to.csv)
  nnlens_tool_fail(exactline_classes "--classes: .*argmax" exact-line ${_acas} --from ${el}/acas_from.csv
                   --to ${el}/acas_to.csv --classes median)
  nnlens_tool_fail(ig_degenerate "ig_baseline\\.csv:3 \\(baseline [^ ]*ig_baseline\\.csv:3\\): exact_line: the segment is degenerate"
                   ig ${_acas} --input ${el}/ig_baseline.csv --baseline ${el}/ig_baseline.csv)
  nnlens_tool_fail(ig_width "bad_width\\.csv:1:5: expected 5 values per sample" ig ${_acas} --input ${el}/ig_input.csv
                   --baseline ${el}/bad_width.csv)
  nnlens_tool_fail(ig_baselines "acas_to\\.csv has 2 samples; expected 1 \\(one baseline for every input\\)"
                   ig ${_acas} --input ${el}/ig_single.csv --baseline ${el}/acas_to.csv)
  nnlens_tool_fail(ig_output_index "--output-index 7: the model has 5 outputs" ig ${_acas} --input ${el}/ig_input.csv
                   --baseline ${el}/ig_baseline.csv --output-index 7)

  # CSV header and separators through the tool (the rules are io::read_csv's): a first
  # line with a number and a non-number is data, so an error naming line 1 column 2 (it used to be
  # dropped as a header: 1 output for 2 samples, exit 0); another separator is named; --header takes
  # any first line as the header, --no-header none.  Exit codes checked (check_output / expect_fail).
  set(_hd ${CMAKE_CURRENT_BINARY_DIR}/csv_header)
  file(WRITE ${_hd}/mixed_first.csv "0.1,abc,-1.5,100,100\n1000,0,-1.5,100,100\n")
  file(WRITE ${_hd}/semicolon.csv "1000;0;-1.5;100;100\n500;0;-1.5;100;100\n")
  file(WRITE ${_hd}/spaces.csv "1000 0 -1.5 100 100\n")
  file(WRITE ${_hd}/forced.csv "a,1,b,2,c\n1000,0,-1.5,100,100\n")
  file(WRITE ${_hd}/named.csv "rho,theta,psi,v_own,v_int\n1000,0,-1.5,100,100\n")
  file(WRITE ${_hd}/from.csv "a,1,b,2,c\n\n500,0.5,-3.14159,150,150\n")
  file(WRITE ${_hd}/to.csv "x,2,y,3,z\n5000,0.5,-3.14159,150,150\n")
  file(WRITE ${_hd}/ig_in.csv "a,1,b,2,c\n2000,0.7,-3.14159,300,200\n")
  file(WRITE ${_hd}/ig_base.csv "a,1,b,2,c\n500,0,-3.14159,150,150\n")
  nnlens_tool_fail(run_mixed_first_row "mixed_first\\.csv:1:2: 'abc' is not a" run ${_acas} --input ${_hd}/mixed_first.csv)
  nnlens_tool_fail(run_semicolon "semicolon\\.csv:1:2: fields separated by ';' -- nnlens reads comma-separated values" run ${_acas} --input ${_hd}/semicolon.csv)
  nnlens_tool_fail(run_spaces "spaces\\.csv:1:2: fields separated by spaces -- nnlens reads comma-separated values" run ${_acas} --input ${_hd}/spaces.csv)
  nnlens_tool_fail(run_forced_detect "forced\\.csv:1:1: 'a' is not a" run ${_acas} --input ${_hd}/forced.csv)
  nnlens_tool_fail(run_no_header "named\\.csv:1:1: 'rho' is not a" run ${_acas} --input ${_hd}/named.csv --no-header)
  nnlens_tool_fail(run_header_both "--header excludes --no-header" run ${_acas} --input ${_hd}/named.csv --header --no-header)
  nnlens_tool_ok(run_header "^177\\.8755[0-9]*,173\\.75[78][0-9]*,[^\n]*\n$" run ${_acas} --input ${_hd}/forced.csv --header)
  nnlens_tool_ok(run_header_detect "^177\\.8755[0-9]*,173\\.75[78][0-9]*,[^\n]*\n$" run ${_acas} --input ${_hd}/named.csv)
  nnlens_tool_ok(exactline_header "\nsegment 1 \\([^\n]*from\\.csv:3 -> [^\n]*to\\.csv:2\\): [0-9]+ pieces"
                 exact-line ${_acas} --from ${_hd}/from.csv --to ${_hd}/to.csv --classes argmin --header)
  nnlens_tool_fail(exactline_header_detect "from\\.csv:1:1: 'a' is not a" exact-line ${_acas} --from ${_hd}/from.csv
                   --to ${_hd}/to.csv)
  nnlens_tool_ok(ig_header "ig_in\\.csv:2 \\(baseline [^\n]*ig_base\\.csv:2\\): output [0-4], [0-9]+ pieces"
                 ig ${_acas} --input ${_hd}/ig_in.csv --baseline ${_hd}/ig_base.csv --header)
endif()
