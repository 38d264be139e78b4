# tests/onnx/zoo.cmake -- the torchvision model zoo check (scripts/zoo-check, docs/zoo.md) as ctests.
# Included from tests/CMakeLists.txt; needs the tool (NNLENS_BUILD_TOOLS, target nnlens_tool, defined
# later in tools/nnlens: only $<TARGET_FILE:nnlens_tool> is used) and the ONNX importer (nnlens::onnx).
# The exports (scripts/zoo/export.py: torch, torchvision, onnx from NNLENS_ZOO_PYTHON) are cached in
# the build tree (zoo/), never in the sources.  Every test exits 77 (skipped) when that Python cannot
# import torch, torchvision and onnx (Debian: python3-torch python3-torchvision python3-onnx, in
# scripts/deps' suite set).
#   zoo_resnet18, zoo_mobilenet_v3_small   everyday: opset 13, the import, f32 / f64 logits against
#                                          PyTorch's, and NNSlicer (profile + slice)
#   zoo_<family>                           LABELS slow: the family's models of the default list, every
#                                          step, opsets 13 and 17
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

# Slow: one test per family (the names of scripts/zoo/export.py's FAMILIES), every step, both opsets.
foreach(_f alexnet vgg resnet resnext wide_resnet squeezenet densenet googlenet inception mobilenet_v2
           mobilenet_v3 mnasnet shufflenet regnet_x regnet_y efficientnet efficientnet_v2 convnext)
  add_test(NAME zoo_${_f} COMMAND ${_zoo_cmd} ${_f} --opsets 13,17 --threads 2
           --json ${_zoo_dir}/${_f}.json --markdown ${_zoo_dir}/${_f}.md)
  set_tests_properties(zoo_${_f} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 3600 LABELS slow
                       RESOURCE_LOCK nnlens_zoo_${_f})
endforeach()
