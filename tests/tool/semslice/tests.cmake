# tests/tool/semslice/tests.cmake -- semslice (NeuSemSlice).
# Included by tests/tool/CMakeLists.txt, whose variables (tsrc, fx, lenet, _acas, _dxl5, _dt_seeds)
# and functions (nnlens_tool_fail, nnlens_tool_ok) it uses.

# ---- semslice (NeuSemSlice): the LeNet-5 fixture, labels 0/1; fixtures in tests/tool/semslice ----
set(sst ${PROJECT_SOURCE_DIR}/tests/tool/semslice)
add_test(NAME tool_semslice_help COMMAND nnlens_tool semslice --help)
set_tests_properties(tool_semslice_help PROPERTIES PASS_REGULAR_EXPRESSION "--theta")
add_test(NAME tool_semslice_lenet5 COMMAND ${CMAKE_COMMAND} -DTOOL=$<TARGET_FILE:nnlens_tool> -DMODEL=${lenet}
         -DSAMPLES=${fx}/lenet5_input.csv -DLABELS=${sst}/labels5.txt -DWORK=${CMAKE_CURRENT_BINARY_DIR}/semslice
         -DLAYERS=5 -P ${sst}/check_semslice.cmake)
set(_ss semslice ${lenet} --data ${fx}/lenet5_input.csv --labels ${sst}/labels5.txt)
nnlens_tool_fail(semslice_theta_zero "--theta 0: expected 0 < theta <= 1" ${_ss} --theta 0)
nnlens_tool_fail(semslice_theta_big "--theta 1.5: expected 0 < theta <= 1" ${_ss} --theta 1.5)
nnlens_tool_fail(semslice_metric "--metric: expected avg, var, ens, taylor or deeplift, got 'lrp'" ${_ss} --metric lrp)
nnlens_tool_fail(semslice_similarity "--similarity: expected cka, uncentered or unbiased" ${_ss} --similarity cosine)
nnlens_tool_fail(semslice_empty_category "lenet5_input\\.csv: category 2 has no samples \\(pass --categories" ${_ss})
nnlens_tool_fail(semslice_listed_empty "lenet5_input\\.csv: category 7 has no samples" ${_ss} --categories 0,7)
nnlens_tool_fail(semslice_category_range "--categories: 12 is not an output class \\(the model has 10: 0-9\\)"
                 ${_ss} --categories 0,12)
nnlens_tool_fail(semslice_no_labels "--labels FILE is required: [^ ]*lenet5_input\\.csv has no IDX labels"
                 semslice ${lenet} --data ${fx}/lenet5_input.csv)
nnlens_tool_fail(semslice_label_count "labels2\\.txt" semslice ${lenet} --data ${fx}/lenet5_input.csv
                 --labels ${sst}/labels2.txt)
nnlens_tool_fail(semslice_empty_data "empty\\.csv: no samples" semslice ${lenet} --data ${sl}/empty.csv
                 --labels ${sst}/labels5.txt)
nnlens_tool_fail(semslice_missing_model "nope\\.nnlw: no such file" semslice ${CMAKE_CURRENT_BINARY_DIR}/nope.nnlw
                 --data ${fx}/lenet5_input.csv --labels ${sst}/labels5.txt)
nnlens_tool_fail(semslice_mask_weights "other_weights\\.mask: not a mask of [^ ]*lenet5\\.nnlw: .*another model"
                 ${_ss} --mask ${sst}/other_weights.mask)
nnlens_tool_fail(semslice_mask_arch "other_arch\\.mask: not a mask of [^ ]*lenet5\\.nnlw: .*the mask has 2 layers, the model 5"
                 ${_ss} --mask ${sst}/other_arch.mask)
nnlens_tool_fail(semslice_not_a_mask "lenet5_input\\.csv: not a mask of .*not an nnlens-neuron-mask 1 file"
                 ${_ss} --mask ${fx}/lenet5_input.csv)
nnlens_tool_fail(semslice_missing_mask "nope\\.mask: cannot open" ${_ss} --mask ${sst}/nope.mask)
nnlens_tool_fail(semslice_unwritable "no-dir/x\\.mask: cannot open for writing" ${_ss} --categories 0,1
                 -o ${CMAKE_CURRENT_BINARY_DIR}/no-dir/x.mask)
