// nnlens::dispatch -- the GEMM compiled for AVX-512 (F, CD, DQ, BW): flags in CMakeLists.txt.
// Its kernel lives in namespace nnlens::kernels::avx512bw (kernels/simd.hpp's NNLENS_SIMD_NS), so it
// shares no symbol with the program's own copy or with the other targets' copies.
#define NNLENS_SIMD_ARCH xsimd::avx512bw
#define NNLENS_SIMD_NS avx512bw
#include "nnlens/kernels/gemm.hpp"

namespace nnlens::kernels::dispatch::targets {
namespace impl = nnlens::kernels::avx512bw::gemm_impl;
extern const gemm_form<float> avx512bw_f32{&impl::gemm_workspace<float>, &impl::gemm_on<float>};
extern const gemm_form<double> avx512bw_f64{&impl::gemm_workspace<double>, &impl::gemm_on<double>};
}  // namespace nnlens::kernels::dispatch::targets
