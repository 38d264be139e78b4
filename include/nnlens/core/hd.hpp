// nnlens/core/hd.hpp -- NNLENS_HD: `__host__ __device__` under a CUDA compiler (code the thrust
// backend runs on the device too), nothing otherwise.  The one definition: config.hpp, core/ and
// kernels/ include it (kernels/ and core/ may not include the top level).  Freestanding.
#pragma once

#if defined(__CUDACC__)
#define NNLENS_HD __host__ __device__
#else
#define NNLENS_HD
#endif
