// benchmarks/cuda_device.hpp -- whether a benchmark's device rows can run.
//
//   device_unavailable()   "" when execution::thrust can run: always in the g++ build (OMP device
//                          system); in the nvcc build (CUDA device system) when the CUDA runtime
//                          finds a usable device.  Otherwise why not ("no CUDA device: ..."), so a
//                          row can SkipWithError instead of the process dying on a CUDA exception
//                          (scripts/gpu-check runs the host rows of the CUDA build without a GPU).
#pragma once

#include <string>

#if defined(__CUDACC__)
#include <cuda_runtime.h>
#endif

namespace nnlens_bench {

inline const std::string& device_unavailable() {
  static const std::string why = [] {
#if defined(__CUDACC__)
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) return std::string("no CUDA device: ") + cudaGetErrorString(e);
    if (n == 0) return std::string("no CUDA device: cudaGetDeviceCount found 0");
#endif
    return std::string();
  }();
  return why;
}

}  // namespace nnlens_bench
