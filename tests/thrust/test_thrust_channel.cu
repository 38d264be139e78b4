// test_thrust_channel.cpp built as CUDA (NNLENS_CUDA=ON, scripts/gpu-check): the same source, compiled by nvcc.
#include "test_thrust_channel.cpp"
