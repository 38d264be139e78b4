# tests/tool/difftest/tests.cmake -- difftest / compress (DFlare).
# Included by tests/tool/CMakeLists.txt, whose variables (tsrc, fx, lenet, _acas, _dxl5, _dt_seeds)
# and functions (nnlens_tool_fail, nnlens_tool_ok) it uses.

# ---- difftest / compress (DFlare) ----
# The fixture LeNet-5 is untrained (a seeded initialisation that answers class 0 almost everywhere,
# so no twin of it deviates); the searches run DeepXplore's trained MNIST LeNet-5 on the first
# Fashion-MNIST test images instead.  compress runs on the fixture.
set(_dtw ${CMAKE_CURRENT_BINARY_DIR}/difftest)
foreach(cmd difftest compress)
  add_test(NAME tool_${cmd}_help COMMAND nnlens_tool ${cmd} --help)
  set_tests_properties(tool_${cmd}_help PROPERTIES PASS_REGULAR_EXPRESSION "MODEL|ORIGINAL")
endforeach()
add_test(NAME tool_compress_prune COMMAND nnlens_tool compress ${lenet} --prune 0.5 -o ${_dtw}/prune50.nnlw --json)
set_tests_properties(tool_compress_prune PROPERTIES PASS_REGULAR_EXPRESSION "\"weight_sparsity\": 0\\.5")
add_test(NAME tool_compress_q8 COMMAND nnlens_tool compress ${lenet} --q8 -o ${_dtw}/q8.nnlw)
set_tests_properties(tool_compress_q8 PROPERTIES PASS_REGULAR_EXPRESSION "3 int8 weight tensors")
if(TARGET nnlens::onnx AND EXISTS ${_dxl5} AND EXISTS ${_dt_seeds})
  set(_dts --seeds ${_dt_seeds} --limit 5 --budget-queries 3000 --timeout 0 --no-progress)
  # a twin made on the fly: every seed found, the documented JSON fields, the inputs written
  add_test(NAME tool_difftest_q8 COMMAND nnlens_tool difftest ${_dxl5} q8 ${_dts} --json --out-dir ${_dtw}/q8)
  set_tests_properties(tool_difftest_q8 PROPERTIES PASS_REGULAR_EXPRESSION
    "\"seeds\": \\[.*\"found\": true,.*\"queries\": [0-9]+,.*\"labels\": \\[.*\"input\": \".*trigger-[0-9]+\\.csv\".*\"summary\": {.*\"success_rate\": 1\\.0,.*\"mean_queries\"")
  # compress writes an ONNX twin, difftest reads it back; DiffChaser on the same pair
  add_test(NAME tool_compress_onnx COMMAND nnlens_tool compress ${_dxl5} --prune 0.5 -o ${_dtw}/dx_prune50.onnx)
  set_tests_properties(tool_compress_onnx PROPERTIES PASS_REGULAR_EXPRESSION "weight sparsity 50\\.00%" FIXTURES_SETUP dt_prune)
  add_test(NAME tool_difftest_file COMMAND nnlens_tool difftest ${_dxl5} ${_dtw}/dx_prune50.onnx ${_dts})
  set_tests_properties(tool_difftest_file PROPERTIES FIXTURES_REQUIRED dt_prune
                       PASS_REGULAR_EXPRESSION "dflare: 5 seeds, [0-9]+ searched, [0-9]+ found \\(success 100\\.00%\\)")
  add_test(NAME tool_difftest_diffchaser COMMAND nnlens_tool difftest ${_dxl5} ${_dtw}/dx_prune50.onnx ${_dts} --method diffchaser --json)
  set_tests_properties(tool_difftest_diffchaser PROPERTIES FIXTURES_REQUIRED dt_prune
                       PASS_REGULAR_EXPRESSION "\"method\": \"diffchaser\".*\"success_rate\": 1\\.0")
  # a child that answers the header and then dies on every request: each seed is reported failed
  # with the reason (the adapter restarts it for the next seed), nothing hangs, exit status 1
  add_test(NAME tool_difftest_exec_crash COMMAND nnlens_tool difftest ${_dxl5} "exec:echo nnlens-bb 1 784 10" ${_dts} --json)
  set_tests_properties(tool_difftest_exec_crash PROPERTIES TIMEOUT 60 PASS_REGULAR_EXPRESSION
    "\"status\": \"failed\".*\"error\": \"process 'echo nnlens-bb 1 784 10': end of output.*\"failed\": 5")
  nnlens_tool_fail(dt_exec_header "the child closed its stdout before sending the header line" difftest ${_dxl5} "exec:exit 3" ${_dts})
  # IDC past 2^64 (DeepXplore's LeNet-5, --m 84: 26 digits): the text prints the exact |INCC|, marked
  add_test(NAME tool_coverage_idc_capped COMMAND nnlens_tool coverage ${_dxl5} --train ${_dt_seeds} --test ${_dt_seeds}
           --criteria idc --m 84 --no-progress)
  set_tests_properties(tool_coverage_idc_capped PROPERTIES PASS_REGULAR_EXPRESSION
                       "\n  idc +[0-9.]+% +[0-9]+ / [0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9]+ \\(capped\\)  layer [^\n]*\\(capped: ")
  # DFlare's options beyond the spec: echoed, each changes the search, both need fewer queries
  add_test(NAME tool_difftest_options COMMAND ${CMAKE_COMMAND} -DTOOL=$<TARGET_FILE:nnlens_tool> -DORIGINAL=${_dxl5} -DTWIN=q8
           -DSEEDS=${_dt_seeds} -DLIMIT=5 -P ${PROJECT_SOURCE_DIR}/tests/tool/difftest/check_options.cmake)
endif()
set(_dt difftest ${lenet} q8 --seeds ${fx}/lenet5_input.csv --no-progress)
nnlens_tool_fail(dt_method "--method: expected dflare or diffchaser, got 'ga'" ${_dt} --method ga)
nnlens_tool_fail(dt_accept "--acceptance: expected paper, reference or no-novelty" ${_dt} --acceptance greedy)
nnlens_tool_fail(dt_select "--selection: expected paper, reference, last-accepted or uniform" ${_dt} --selection random)
nnlens_tool_fail(dt_budget "a search needs a query or a time budget" ${_dt} --budget-queries 0 --timeout 0)
nnlens_tool_fail(dt_distance "--distance: expected paper or logit-margin, got 'l2'" ${_dt} --distance l2)
nnlens_tool_fail(dt_skip_diffchaser "--distance logit-margin and --skip-repeats are options of --method dflare, not of diffchaser"
                 ${_dt} --method diffchaser --skip-repeats)
nnlens_tool_fail(dt_scale "times --pixel-scale 1000 it leaves the pixel range" ${_dt} --pixel-scale 1000)
nnlens_tool_fail(dt_ratio "prune:R: expected a ratio in \\[0, 1\\], got '1.5'" difftest ${lenet} prune:1.5 --seeds ${fx}/lenet5_input.csv)
nnlens_tool_fail(dt_twin_missing "nope\\.onnx" difftest ${lenet} ${_dtw}/nope.onnx --seeds ${fx}/lenet5_input.csv)
nnlens_tool_fail(dt_seeds_missing "nope\\.csv: cannot open" difftest ${lenet} q8 --seeds ${fx}/nope.csv)
nnlens_tool_fail(cp_none "give exactly one of --int8, --q8, --prune R, --channel-prune R" compress ${lenet} -o ${_dtw}/x.nnlw)
nnlens_tool_fail(cp_int8_cal "--int8: --calibration FILE is required" compress ${lenet} --int8 -o ${_dtw}/x.nnlw)
nnlens_tool_fail(cp_ratio "--prune 2: expected a ratio in \\[0, 1\\]" compress ${lenet} --prune 2 -o ${_dtw}/x.nnlw)
