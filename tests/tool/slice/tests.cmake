# tests/tool/slice/tests.cmake -- profile / slice (NNSlicer).
# Included by tests/tool/CMakeLists.txt, whose variables (tsrc, fx, lenet, _acas, _dxl5, _dt_seeds)
# and functions (nnlens_tool_fail, nnlens_tool_ok) it uses.

# ---- profile / slice (NNSlicer): the LeNet-5 fixture and ACAS Xu 1_1; fixtures in tests/tool/slice ----
set(sl ${tsrc}/slice)
set(_lp ${CMAKE_CURRENT_BINARY_DIR}/lenet5.profile)
set(_lpe ${CMAKE_CURRENT_BINARY_DIR}/lenet5_element.profile)
add_test(NAME tool_profile_lenet5 COMMAND nnlens_tool profile ${lenet} --data ${fx}/lenet5_input.csv -o ${_lp}
         --batch 2 --threads 2 --no-progress)
set_tests_properties(tool_profile_lenet5 PROPERTIES FIXTURES_SETUP slice_lenet5_profile PASS_REGULAR_EXPRESSION
  "lenet5\\.profile: profile of lenet5\\.nnlw: 5 samples, 13 tensors, 885 neurons \\(channel granularity, f32\\), [0-9.e-]+ s\n$")
add_test(NAME tool_profile_lenet5_element COMMAND nnlens_tool profile ${lenet} --data ${fx}/lenet5_input.csv
         -o ${_lpe} --granularity element --no-progress)
set_tests_properties(tool_profile_lenet5_element PROPERTIES FIXTURES_SETUP slice_lenet5_profile_el
  PASS_REGULAR_EXPRESSION "5 samples, 13 tensors, [0-9]+ neurons \\(element granularity, f32\\)")
# 5 samples, their predicted classes; a target class with |CONTRIB| sums; element granularity.
add_test(NAME tool_slice_lenet5_json COMMAND ${CMAKE_COMMAND} -DTOOL=$<TARGET_FILE:nnlens_tool> -DMODEL=${lenet}
         -DPROFILE=${_lp} -DSAMPLES=${fx}/lenet5_input.csv -DSYN=${CMAKE_CURRENT_BINARY_DIR}/slice_syn.json
         -DLAYERS=13 -DN=5 -DINPUT_NEURONS=1 -P ${sl}/check_slice.cmake)
add_test(NAME tool_slice_lenet5_target COMMAND ${CMAKE_COMMAND} -DTOOL=$<TARGET_FILE:nnlens_tool> -DMODEL=${lenet}
         -DPROFILE=${_lp} -DSAMPLES=${fx}/lenet5_input.csv -DSYN=${CMAKE_CURRENT_BINARY_DIR}/slice_syn_t.json
         -DLAYERS=13 -DN=5 -DINPUT_NEURONS=1 -DTARGET=3 "-DARGS=--abs-sum;--theta;0.5;--threads;2" -P ${sl}/check_slice.cmake)
add_test(NAME tool_slice_lenet5_element COMMAND ${CMAKE_COMMAND} -DTOOL=$<TARGET_FILE:nnlens_tool> -DMODEL=${lenet}
         -DPROFILE=${_lpe} -DSAMPLES=${fx}/lenet5_input.csv -DSYN=${CMAKE_CURRENT_BINARY_DIR}/slice_syn_e.json
         -DLAYERS=13 -DN=5 -DINPUT_NEURONS=784 -P ${sl}/check_slice.cmake)
add_test(NAME tool_slice_lenet5_text COMMAND nnlens_tool slice ${lenet} --profile ${_lp} --samples ${fx}/lenet5_input.csv
         --target 7)
set_tests_properties(tool_slice_lenet5_text PROPERTIES PASS_REGULAR_EXPRESSION
  "slice of 5 samples from [^\n]*lenet5_input\\.csv \\(class 7\\), theta 0\\.3, channel granularity, [^\n]* s\n  layer +neurons in slice +synapses in slice *\n  input +[01] / 1 [^\n]*- *\n  0 Conv2D +[0-6] / 6 [^\n]* / 150 .*  11 Dense +1 / 10 +10\\.0% +[0-9]+ / 840 .*  total +[0-9]+ / 61470 ")
set_tests_properties(tool_slice_lenet5_json tool_slice_lenet5_target tool_slice_lenet5_text
                     PROPERTIES FIXTURES_REQUIRED slice_lenet5_profile)
set_tests_properties(tool_slice_lenet5_element PROPERTIES FIXTURES_REQUIRED slice_lenet5_profile_el)
# Failures.
nnlens_tool_fail(slice_target_range "--target 10: out of range, the model has 10 outputs \\(classes 0-9\\)"
                 slice ${lenet} --profile ${_lp} --samples ${fx}/lenet5_input.csv --target 10)
nnlens_tool_fail(slice_empty_samples "empty\\.csv: no samples" slice ${lenet} --profile ${_lp} --samples ${sl}/empty.csv)
nnlens_tool_fail(slice_bad_width "bad_width\\.csv:3:4: expected 784 values per sample" slice ${lenet} --profile ${_lp}
                 --samples ${fx}/bad_width.csv)
set_tests_properties(tool_fail_slice_target_range tool_fail_slice_empty_samples tool_fail_slice_bad_width
                     PROPERTIES FIXTURES_REQUIRED slice_lenet5_profile)
nnlens_tool_fail(slice_bad_profile "bad_granularity\\.profile:2: granularity must be channel or element, got 'per-pixel'"
                 slice ${lenet} --profile ${sl}/bad_granularity.profile --samples ${fx}/lenet5_input.csv)
nnlens_tool_fail(slice_bad_profile_value "bad_value\\.profile:7: a value is not a finite number"
                 slice ${lenet} --profile ${sl}/bad_value.profile --samples ${fx}/lenet5_input.csv)
nnlens_tool_fail(slice_not_a_profile "lenet5_input\\.csv:1: not an nnlens profile"
                 slice ${lenet} --profile ${fx}/lenet5_input.csv --samples ${fx}/lenet5_input.csv)
nnlens_tool_fail(slice_missing_profile "nope\\.profile: cannot open"
                 slice ${lenet} --profile ${sl}/nope.profile --samples ${fx}/lenet5_input.csv)
nnlens_tool_fail(slice_theta "--theta: Value -1 .*" slice ${lenet} --profile ${_lp} --samples ${fx}/lenet5_input.csv
                 --theta -1)
nnlens_tool_fail(slice_denominator "--denominator: .*sum" slice ${lenet} --profile ${_lp}
                 --samples ${fx}/lenet5_input.csv --denominator mean)
nnlens_tool_fail(profile_empty "empty\\.csv: no samples" profile ${lenet} --data ${sl}/empty.csv
                 -o ${CMAKE_CURRENT_BINARY_DIR}/empty.profile)
nnlens_tool_fail(profile_granularity "--granularity: .*channel" profile ${lenet} --data ${fx}/lenet5_input.csv
                 -o ${CMAKE_CURRENT_BINARY_DIR}/x.profile --granularity pixel)
nnlens_tool_fail(profile_unwritable "no-dir/x\\.profile: cannot open for writing" profile ${lenet}
                 --data ${fx}/lenet5_input.csv -o ${CMAKE_CURRENT_BINARY_DIR}/no-dir/x.profile --no-progress)
if(EXISTS ${_acas})
  set(_ap ${CMAKE_CURRENT_BINARY_DIR}/acas.profile)
  add_test(NAME tool_profile_acas COMMAND nnlens_tool profile ${_acas} --data ${sl}/acas_samples.csv -o ${_ap} --no-progress)
  set_tests_properties(tool_profile_acas PROPERTIES FIXTURES_SETUP slice_acas_profile PASS_REGULAR_EXPRESSION
    "acas\\.profile: profile of ACASXU_run2a_1_1_batch_2000\\.nnet: 8 samples, 16 tensors, 620 neurons")
  add_test(NAME tool_slice_acas_json COMMAND ${CMAKE_COMMAND} -DTOOL=$<TARGET_FILE:nnlens_tool> -DMODEL=${_acas}
           -DPROFILE=${_ap} -DSAMPLES=${sl}/acas_samples.csv -DSYN=${CMAKE_CURRENT_BINARY_DIR}/slice_syn_acas.json
           -DLAYERS=16 -DN=8 -DINPUT_NEURONS=5 "-DARGS=--denominator;activation;--cutoff;first" -P ${sl}/check_slice.cmake)
  # A profile of another model: ACAS Xu's profile (16 tensors: Affine, Clamp, 7 Dense, 6 ReLU) for LeNet-5.
  nnlens_tool_fail(slice_other_model
    "acas\\.profile: not a profile of [^ ]*lenet5\\.nnlw: made on a network with 16 tensors, this one has 13"
    slice ${lenet} --profile ${_ap} --samples ${fx}/lenet5_input.csv)
  set_tests_properties(tool_slice_acas_json tool_fail_slice_other_model PROPERTIES FIXTURES_REQUIRED slice_acas_profile)
endif()
# IDX images (bytes / 255) when the Fashion-MNIST package is installed.
set(_fmnist /usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz)
if(EXISTS ${_fmnist})
  add_test(NAME tool_profile_idx COMMAND nnlens_tool profile ${lenet} --data ${_fmnist}
           -o ${CMAKE_CURRENT_BINARY_DIR}/lenet5_t10k.profile --no-progress)
  set_tests_properties(tool_profile_idx PROPERTIES PASS_REGULAR_EXPRESSION "10000 samples, 13 tensors")
  if(EXISTS ${_acas})
    nnlens_tool_fail(profile_idx_shape "t10k-images-idx3-ubyte\\.gz: images of shape \\[1,28,28\\] \\(784 values\\), the model's input is \\[5\\]"
                     profile ${_acas} --data ${_fmnist} -o ${CMAKE_CURRENT_BINARY_DIR}/x.profile)
  endif()
endif()
