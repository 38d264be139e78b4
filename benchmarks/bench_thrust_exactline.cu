// bench_thrust_exactline built as CUDA (scripts/gpu-check, NNLENS_CUDA=ON): the same source,
// compiled by nvcc, so execution::thrust runs on the GPU; its rows are named .../cuda.
#include "bench_thrust_exactline.cpp"
