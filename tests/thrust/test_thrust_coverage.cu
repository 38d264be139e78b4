// test_thrust_coverage.cpp built as CUDA (NNLENS_CUDA=ON, scripts/gpu-check): the same source, compiled by
// nvcc; its data (ACAS Xu .nnet files, Fashion-MNIST t10k) travel in the GPU bundle.
#include "test_thrust_coverage.cpp"
