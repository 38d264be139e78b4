// The thrust tests built as CUDA (NNLENS_CUDA=ON): the same source, compiled by nvcc.
#include "test_thrust.cpp"
