# tests/tool/maintenance/tests.cmake -- restructure / readapt / increment.
# Included by tests/tool/CMakeLists.txt, whose variables (tsrc, fx, lenet, _acas, _dxl5, _dt_seeds)
# and functions (nnlens_tool_fail, nnlens_tool_ok) it uses.

# ---- restructure / readapt / increment (NeuSemSlice's maintenance tasks): the LeNet-5 fixture,
# labels 0/1 (the new task of increment: 2/3); fixtures in tests/tool/maintenance ----
set(mnt ${PROJECT_SOURCE_DIR}/tests/tool/maintenance)
set(_mwork ${CMAKE_CURRENT_BINARY_DIR}/maintenance)
file(MAKE_DIRECTORY ${_mwork})  # -o x.nnlw of the failure tests: the directory exists
set(_monnx 0)
if(TARGET nnlens::onnx)
  set(_monnx 1)
endif()
foreach(cmd restructure readapt increment)
  add_test(NAME tool_${cmd}_help COMMAND nnlens_tool ${cmd} --help)
  set_tests_properties(tool_${cmd}_help PROPERTIES PASS_REGULAR_EXPRESSION "MODEL.*--theta")
  add_test(NAME tool_${cmd}_lenet5 COMMAND ${CMAKE_COMMAND} -DMODE=${cmd} -DTOOL=$<TARGET_FILE:nnlens_tool>
           -DMODEL=${lenet} -DSAMPLES=${fx}/lenet5_input.csv -DLABELS=${sst}/labels5.txt
           -DNEW_LABELS=${mnt}/new_labels5.txt -DWORK=${_mwork}/${cmd} -DONNX=${_monnx} -P ${mnt}/check_maintenance.cmake)
endforeach()
set(_d --data ${fx}/lenet5_input.csv --labels ${sst}/labels5.txt)
# without -o (_rs0 ...), and with it (_rs ...)
set(_rs0 restructure ${lenet} ${_d} --test ${fx}/lenet5_input.csv --test-labels ${sst}/labels5.txt --samples 5)
set(_ra0 readapt ${lenet} ${_d} --samples 5)
set(_in0 increment ${lenet} --data ${fx}/lenet5_input.csv --labels ${mnt}/new_labels5.txt
         --old-data ${fx}/lenet5_input.csv --old-labels ${sst}/labels5.txt --samples 5)
set(_rs ${_rs0} --categories 0,1 -o ${_mwork}/x.nnlw)
set(_ra ${_ra0} --categories 0,1 -o ${_mwork}/x.nnlw)
set(_in ${_in0} -o ${_mwork}/x.nnlw)
foreach(c rs ra in)
  # the same messages as `nnlens semslice` for the slice's options and the mask
  nnlens_tool_fail(${c}_theta_zero "--theta 0: expected 0 < theta <= 1" ${_${c}} --theta 0)
  nnlens_tool_fail(${c}_theta_big "--theta 1.5: expected 0 < theta <= 1" ${_${c}} --theta 1.5)
  nnlens_tool_fail(${c}_mask_weights "other_weights\\.mask: not a mask of [^ ]*lenet5\\.nnlw: .*another model"
                   ${_${c}} --mask ${sst}/other_weights.mask)
  nnlens_tool_fail(${c}_mask_arch "other_arch\\.mask: not a mask of [^ ]*lenet5\\.nnlw: .*the mask has 2 layers, the model 5"
                   ${_${c}} --mask ${sst}/other_arch.mask)
  nnlens_tool_fail(${c}_missing_mask "nope\\.mask: cannot open" ${_${c}} --mask ${sst}/nope.mask)
  nnlens_tool_fail(${c}_output_format "x\\.txt: unsupported output format '\\.txt' \\(write \\.nnlw or \\.onnx\\)"
                   ${_${c}0} -o ${_mwork}/x.txt)
  nnlens_tool_fail(${c}_unwritable "no-dir/x\\.nnlw: cannot open for writing" ${_${c}0} -o ${_mwork}/no-dir/x.nnlw)
  nnlens_tool_fail(${c}_metric "--metric: expected avg, var, ens, taylor or deeplift, got 'lrp'" ${_${c}} --metric lrp)
endforeach()
# a category with no samples; missing files
nnlens_tool_fail(rs_empty_category "lenet5_input\\.csv: category 2 has no samples \\(pass --categories"
                 restructure ${lenet} ${_d} --test ${fx}/lenet5_input.csv --test-labels ${sst}/labels5.txt -o ${_mwork}/x.nnlw)
nnlens_tool_fail(rs_listed_empty "lenet5_input\\.csv: category 7 has no samples\n" ${_rs0} --categories 0,7 -o ${_mwork}/x.nnlw)
nnlens_tool_fail(rs_missing_model "nope\\.nnlw: no such file" restructure ${CMAKE_CURRENT_BINARY_DIR}/nope.nnlw ${_d}
                 --test ${fx}/lenet5_input.csv -o ${_mwork}/x.nnlw)
nnlens_tool_fail(rs_missing_test "nope\\.csv: cannot open" restructure ${lenet} ${_d} --test ${fx}/nope.csv
                 --test-labels ${sst}/labels5.txt -o ${_mwork}/x.nnlw)
nnlens_tool_fail(rs_no_test "--test is required" restructure ${lenet} ${_d} -o ${_mwork}/x.nnlw)
nnlens_tool_fail(rs_pruner "--pruner: expected lamp, global, uniform or erk, got 'random'" ${_rs} --pruner random)
nnlens_tool_fail(rs_prune_step "--prune-step 1: expected 0 < p < 1" ${_rs} --prune-step 1)
nnlens_tool_fail(rs_max_drop "--max-drop -1: expected >= 0 accuracy points" ${_rs} --max-drop -1)
nnlens_tool_fail(ra_empty_category "lenet5_input\\.csv: category 2 has no samples \\(pass --categories"
                 readapt ${lenet} ${_d} -o ${_mwork}/x.nnlw)
nnlens_tool_fail(ra_missing_data "nope\\.csv: cannot open" readapt ${lenet} --data ${fx}/nope.csv
                 --labels ${sst}/labels5.txt -o ${_mwork}/x.nnlw)
nnlens_tool_fail(ra_full_and_mask "--mask excludes --full|--full excludes --mask" ${_ra} --full --mask ${sst}/other_arch.mask)
nnlens_tool_fail(ra_attack "--attack: expected fgsm or pgd, got 'cw'" ${_ra} --attack cw)
nnlens_tool_fail(ra_eps "--eps 2: expected 0 <= eps <= 1" ${_ra} --eps 2)
nnlens_tool_fail(ra_label_count "labels2\\.txt: 2 labels for 5 samples" readapt ${lenet} --data ${fx}/lenet5_input.csv
                 --labels ${sst}/labels2.txt -o ${_mwork}/x.nnlw)
nnlens_tool_fail(in_empty_category "lenet5_input\\.csv: category 7 has no samples" ${_in} --old-classes 0,7)
nnlens_tool_fail(in_class_range "--old-classes: 12 is not an output class \\(the model has 10: 0-9\\)" ${_in} --old-classes 0,12)
nnlens_tool_fail(in_missing_old "nope\\.csv: cannot open" increment ${lenet} ${_d} --old-data ${fx}/nope.csv
                 --old-labels ${sst}/labels5.txt -o ${_mwork}/x.nnlw)
nnlens_tool_fail(in_new_classes "lenet5_input\\.csv: no samples of class\\(es\\) 5,6" ${_in} --new-classes 5,6)
nnlens_tool_fail(in_replay "--replay 1.5: expected 0 <= fraction <= 1" ${_in} --replay 1.5)
nnlens_tool_fail(in_no_old_labels "--old-labels FILE is required: [^ ]*lenet5_input\\.csv has no IDX labels"
                 increment ${lenet} ${_d} --old-data ${fx}/lenet5_input.csv -o ${_mwork}/x.nnlw)
if(TARGET nnlens::onnx AND EXISTS ${_dxl5})
  # a DynamicNetwork from ONNX (DeepXplore's LeNet-5), written back as ONNX
  add_test(NAME tool_restructure_onnx COMMAND nnlens_tool restructure ${_dxl5} ${_d} --test ${fx}/lenet5_input.csv
           --test-labels ${sst}/labels5.txt --categories 0,1 --samples 5 --max-iterations 2 --no-progress
           -o ${_mwork}/dx_restructure.onnx)
  add_test(NAME tool_readapt_onnx COMMAND nnlens_tool readapt ${_dxl5} ${_d} --categories 0,1 --samples 5
           --adv-samples 5 --epochs 1 --attack pgd --pgd-steps 2 --no-progress -o ${_mwork}/dx_readapt.onnx)
  add_test(NAME tool_increment_onnx COMMAND nnlens_tool increment ${_dxl5} --data ${fx}/lenet5_input.csv
           --labels ${mnt}/new_labels5.txt --old-data ${fx}/lenet5_input.csv --old-labels ${sst}/labels5.txt
           --samples 5 --epochs 1 --no-progress -o ${_mwork}/dx_increment.onnx)
  set_tests_properties(tool_restructure_onnx tool_readapt_onnx tool_increment_onnx PROPERTIES
                       PASS_REGULAR_EXPRESSION "lenet5\\.onnx: [a-z]+ .*model written to [^\n]*dx_[a-z]+\\.onnx\n$")
  nnlens_tool_fail(rs_nnlw_of_onnx "x\\.nnlw: the tool reads \\.nnlw files back only for the demo's LeNet-5; [^ ]*lenet5\\.onnx is a \\.onnx model: write \\.onnx"
                   restructure ${_dxl5} ${_d} --test ${fx}/lenet5_input.csv -o ${_mwork}/x.nnlw)
endif()
