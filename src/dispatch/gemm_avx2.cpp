// nnlens::dispatch -- the float/double GEMM, conv_gemm, conv_planes and the int8 GEMM compiled for AVX2 with FMA: flags in CMakeLists.txt.  Namespace
// nnlens::kernels::avx2_fma (see gemm_avx512bw.cpp).
#define NNLENS_SIMD_ARCH xsimd::fma3<xsimd::avx2>
#define NNLENS_SIMD_NS avx2_fma
#include "nnlens/kernels/conv_gemm.hpp"
#include "nnlens/kernels/conv_planes.hpp"
#include "nnlens/kernels/gemm.hpp"
#include "nnlens/kernels/int8.hpp"

namespace nnlens::kernels::dispatch::targets {
namespace impl = nnlens::kernels::avx2_fma::gemm_impl;
extern const gemm_form<float> avx2_f32{&impl::gemm_workspace<float>, &impl::gemm_on<float>};
extern const gemm_form<double> avx2_f64{&impl::gemm_workspace<double>, &impl::gemm_on<double>};
namespace s8 = nnlens::kernels::avx2_fma::s8_impl;
extern const gemm_s8_form avx2_s8{&s8::packed_size, &s8::pack_b, &s8::workspace, &s8::gemm_on,
                                    &s8::quantize<float>, &s8::requantize, &s8::requantize_row};
namespace cg = nnlens::kernels::avx2_fma::conv_gemm_impl;
extern const conv_gemm_form<float> avx2_conv_f32{&cg::scratch<float>, &cg::conv_gemm_on<float>};
extern const conv_gemm_form<double> avx2_conv_f64{&cg::scratch<double>, &cg::conv_gemm_on<double>};
namespace cp = nnlens::kernels::avx2_fma::conv_planes_impl;
extern const conv_planes_form<float> avx2_planes_f32{&cp::scratch<float>, &cp::conv_planes_on<float>};
extern const conv_planes_form<double> avx2_planes_f64{&cp::scratch<double>, &cp::conv_planes_on<double>};
}  // namespace nnlens::kernels::dispatch::targets
