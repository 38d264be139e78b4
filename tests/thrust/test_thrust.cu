// The thrust tests built as CUDA (NNLENS_CUDA=ON, scripts/gpu-check): the same source, compiled by
// nvcc.  Without a usable CUDA device the executable stops before any test with "no CUDA device"
// and exit code 77 (ctest: SKIP_RETURN_CODE), instead of failing every case on a CUDA exception.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

namespace {
const bool nnlens_cuda_device_checked = [] {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    std::fprintf(stderr, "test_thrust_cuda: no CUDA device (%s); no test run\n",
                 e != cudaSuccess ? cudaGetErrorString(e) : "cudaGetDeviceCount found 0");
    std::exit(77);
  }
  return true;
}();
}  // namespace

#include "test_thrust.cpp"
