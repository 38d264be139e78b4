// test_thrust_composite.cpp built as CUDA (NNLENS_CUDA=ON, scripts/gpu-check): the same source,
// compiled by nvcc (the host analyses on DynamicNetworks included, which nvcc 13 accepts since the
// composite concepts lost their lambdas: docs/scale.md).
#include "test_thrust_composite.cpp"
