# tests/tool/coverage/tests.cmake -- coverage (DeepImportance).
# Included by tests/tool/CMakeLists.txt, whose variables (tsrc, fx, lenet, _acas, _dxl5, _dt_seeds)
# and functions (nnlens_tool_fail, nnlens_tool_ok) it uses.

# ---- coverage (DeepImportance): the LeNet-5 fixture; fixtures in tests/tool/coverage ----
set(cvt ${PROJECT_SOURCE_DIR}/tests/tool/coverage)
set(cvw ${CMAKE_CURRENT_BINARY_DIR}/coverage)
add_test(NAME tool_coverage_help COMMAND nnlens_tool coverage --help)
set_tests_properties(tool_coverage_help PROPERTIES PASS_REGULAR_EXPRESSION "MODEL")
# The seeded (untrained) LeNet-5 predicts one class on these inputs, so DSC (which needs two) is
# left out here and tested as an error below.
add_test(NAME tool_coverage_lenet5 COMMAND ${CMAKE_COMMAND} -DTOOL=$<TARGET_FILE:nnlens_tool> -DMODEL=${lenet}
         -DSAMPLES=${fx}/lenet5_input.csv -DWORK=${cvw} -DM=3 "-DCRITERIA=idc,nc,kmnc,nbc,snac,tknc,lsc"
         -P ${cvt}/check_coverage.cmake)
# LSC's range and the share of inputs in it (spec / --lsc-range reference), IDC's exact |INCC|
add_test(NAME tool_coverage_ranges COMMAND ${CMAKE_COMMAND} -DTOOL=$<TARGET_FILE:nnlens_tool> -DMODEL=${lenet}
         -DSAMPLES=${fx}/lenet5_input.csv -DWORK=${cvw}/ranges -DM=84 -DCAPPED=0 -P ${cvt}/check_ranges.cmake)
nnlens_tool_fail(coverage_m_too_large "--m 100: larger than layer 10 ReLU, which has 84 neurons"
                 coverage ${lenet} --train ${fx}/lenet5_input.csv --test ${fx}/lenet5_input.csv --m 100 --no-progress)
nnlens_tool_fail(coverage_layer_range "layer '40': index out of range \\(the network has 12 layers"
                 coverage ${lenet} --train ${fx}/lenet5_input.csv --test ${fx}/lenet5_input.csv --layer 40 --no-progress)
nnlens_tool_fail(coverage_empty_train "empty\\.csv: no samples"
                 coverage ${lenet} --train ${sl}/empty.csv --test ${fx}/lenet5_input.csv --no-progress)
nnlens_tool_fail(coverage_no_labels "--train-labels FILE is required for idc: [^ ]*lenet5_input\\.csv has no IDX labels"
                 coverage ${lenet} --train ${fx}/lenet5_input.csv --test ${fx}/lenet5_input.csv --no-progress)
nnlens_tool_fail(coverage_no_train "--train FILE is required to prepare nc|--train FILE is required to prepare kmnc"
                 coverage ${lenet} --test ${fx}/lenet5_input.csv --criteria kmnc --no-progress)
nnlens_tool_fail(coverage_bad_criterion "--criteria: unknown criterion 'foo'"
                 coverage ${lenet} --train ${fx}/lenet5_input.csv --test ${fx}/lenet5_input.csv --criteria nc,foo)
# A criterion that fails (DSC on one class) is reported beside the others, which are kept (exit 1)
add_test(NAME tool_coverage_partial COMMAND ${CMAKE_COMMAND} -DTOOL=$<TARGET_FILE:nnlens_tool> -DMODEL=${lenet}
         -DSAMPLES=${fx}/lenet5_input.csv -P ${cvt}/check_partial.cmake)
nnlens_tool_fail(coverage_dsc_one_class "dsc on [^ ]*lenet5_input\\.csv: .*one class"
                 coverage ${lenet} --train ${fx}/lenet5_input.csv --test ${fx}/lenet5_input.csv --criteria dsc --no-progress)
nnlens_tool_fail(coverage_bad_state "lenet5_input\\.csv:1: not an nnlens coverage state"
                 coverage ${lenet} --test ${fx}/lenet5_input.csv --state ${fx}/lenet5_input.csv --criteria nc --no-progress)
