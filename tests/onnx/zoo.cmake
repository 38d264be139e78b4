# tests/onnx/zoo.cmake -- the torchvision model zoo check (scripts/zoo-check, docs/zoo.md) as ctests.
# Included from tests/CMakeLists.txt; needs the tool (NNLENS_BUILD_TOOLS, target nnlens_tool, defined
# later in tools/nnlens: only $<TARGET_FILE:nnlens_tool> is used) and the ONNX importer (nnlens::onnx).
# The exports (scripts/zoo/export.py: torch, torchvision, onnx from NNLENS_ZOO_PYTHON) are cached in
# the build tree (zoo/), never in the sources.  Every test exits 77 (skipped) when that Python cannot
# import torch, torchvision and onnx (Debian: python3-torch python3-torchvision python3-onnx, in
# scripts/deps' suite set).
#   zoo_resnet18, zoo_mobilenet_v3_small   everyday: opset 13, the import, f32 / f64 logits against
#                                          PyTorch's, and NNSlicer (profile + slice)
#   zoo_<family>                           LABELS slow: one model of the family, the import and the
#                                          logits, opset 13 (and 17 for four families)
if(NOT (NNLENS_BUILD_TOOLS AND TARGET nnlens::onnx))
  return()
endif()
set(NNLENS_ZOO_PYTHON /usr/bin/python3 CACHE FILEPATH "The Python with torch, torchvision and onnx for the zoo check")
set(_zoo_dir ${CMAKE_CURRENT_BINARY_DIR}/zoo)
set(_zoo_cmd ${NNLENS_ZOO_PYTHON} ${PROJECT_SOURCE_DIR}/scripts/zoo-check --python ${NNLENS_ZOO_PYTHON}
             --tool $<TARGET_FILE:nnlens_tool> --zoo-dir ${_zoo_dir} --quiet)

# Everyday: two small models, one process each (resnet18: 13 s on the 2-core build machine with the
# export cached, 30 s with it; an export alone is 10-20 s).
# Each holds its family's lock: the slow test of that family checks the same export directory.
foreach(_mf resnet18:resnet mobilenet_v3_small:mobilenet_v3)
  string(REPLACE ":" ";" _mf ${_mf})
  list(GET _mf 0 _m)
  list(GET _mf 1 _f)
  add_test(NAME zoo_${_m} COMMAND ${_zoo_cmd} ${_m} --opsets 13 --steps load,f32,f64,profile,slice --threads 2)
  set_tests_properties(zoo_${_m} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120 RESOURCE_LOCK nnlens_zoo_${_f})
endforeach()

# Slow: one model per family (the families of scripts/zoo/export.py's FAMILIES): the import and the
# f32 / f64 logits, at opset 13, and at 17 too for mobilenet_v3 and convnext (HardSwish and
# LayerNormalization nodes there) and for shufflenet and efficientnet (the same op types at 17).  The analyses of every model are scripts/zoo-check's
# (docs/zoo.md): run by hand, they take hours on two cores, more than CI's 90 minutes.
foreach(_fm alexnet:alexnet:13 vgg:vgg11_bn:13 resnet:resnet50:13 resnext:resnext50_32x4d:13
            wide_resnet:wide_resnet50_2:13 squeezenet:squeezenet1_1:13 densenet:densenet121:13
            googlenet:googlenet:13 inception:inception_v3:13 mobilenet_v2:mobilenet_v2:13
            mobilenet_v3:mobilenet_v3_large:13,17 mnasnet:mnasnet0_5:13 shufflenet:shufflenet_v2_x0_5:13,17
            regnet_x:regnet_x_400mf:13 regnet_y:regnet_y_400mf:13 efficientnet:efficientnet_b0:13,17
            efficientnet_v2:efficientnet_v2_s:13 convnext:convnext_tiny:13,17)
  string(REPLACE ":" ";" _fm ${_fm})
  list(GET _fm 0 _f)
  list(GET _fm 1 _m)
  list(GET _fm 2 _o)
  add_test(NAME zoo_${_f} COMMAND ${_zoo_cmd} ${_m} --opsets ${_o} --steps load,f32,f64 --threads 2
           --json ${_zoo_dir}/${_f}.json)
  set_tests_properties(zoo_${_f} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900 LABELS slow
                       RESOURCE_LOCK nnlens_zoo_${_f})
endforeach()
