// One CUDA translation unit of the thrust backend's kernels (nnlens/thrust/kernels.hpp), compiled by
// the ctest thrust_cuda_compile with nvcc -arch=sm_80 and -arch=sm_90 (no GPU needed): it checks
// that every functor is a valid __host__ __device__ function for both architectures.
#include <thrust/device_vector.h>

#include "nnlens/layers/gelu.hpp"
#include "nnlens/layers/hard_sigmoid.hpp"
#include "nnlens/layers/hard_swish.hpp"
#include "nnlens/layers/hard_tanh.hpp"
#include "nnlens/layers/leaky_relu.hpp"
#include "nnlens/layers/relu.hpp"
#include "nnlens/layers/sigmoid.hpp"
#include "nnlens/layers/silu.hpp"
#include "nnlens/layers/tanh.hpp"
#include "nnlens/thrust/kernels.hpp"

namespace tk = nnlens::thrust_kernels;

template <class T>
void instantiate_all() {
  thrust::device_vector<T> x(64), w(64), b(8), y(64);
  thrust::device_vector<double> part(16);
  const T* xp = thrust::raw_pointer_cast(x.data());
  const T* wp = thrust::raw_pointer_cast(w.data());
  const T* bp = thrust::raw_pointer_cast(b.data());
  T* yp = thrust::raw_pointer_cast(y.data());
  tk::window_dims d;
  tk::dense<T>(2, 4, 8, xp, wp, bp, yp);
  tk::conv2d_gemm<T, 4>(1, d, xp, wp, bp, yp);
  tk::conv2d_gemm<T, 16>(1, d, xp, wp, bp, yp);
  tk::max_pool2d<T>(1, d, xp, yp);
  tk::avg_pool2d<T>(1, d, xp, yp);
  // the element-wise ops' scalar_map functors (core/properties.hpp): NNLENS_HD on the device
  tk::map<T>(64, xp, yp, nnlens::layer_traits<nnlens::ReLU>::scalar_map({}));
  tk::map<T>(64, xp, yp, nnlens::layer_traits<nnlens::LeakyReLU>::scalar_map({0.1}));
  tk::map<T>(64, xp, yp, nnlens::layer_traits<nnlens::HardTanh>::scalar_map({}));
  tk::map<T>(64, xp, yp, nnlens::layer_traits<nnlens::Clamp>::scalar_map({-1.0, 2.0}));
  // the smooth ones: exp, tanh, erf of the device
  tk::map<T>(64, xp, yp, nnlens::layer_traits<nnlens::Sigmoid>::scalar_map({}));
  tk::map<T>(64, xp, yp, nnlens::layer_traits<nnlens::Tanh>::scalar_map({}));
  tk::map<T>(64, xp, yp, nnlens::layer_traits<nnlens::HardSigmoid>::scalar_map({}));
  tk::map<T>(64, xp, yp, nnlens::layer_traits<nnlens::HardSwish>::scalar_map({}));
  tk::map<T>(64, xp, yp, nnlens::layer_traits<nnlens::SiLU>::scalar_map({}));
  tk::map<T>(64, xp, yp, nnlens::layer_traits<nnlens::GELU>::scalar_map({}));
  tk::map<T>(64, xp, yp, nnlens::layer_traits<nnlens::GELU>::scalar_map(nnlens::GELU{true}));
  // an element-wise affine op (core/properties.hpp, ElementwiseAffine), centred and not
  tk::scale_shift<T>(64, 16, 4, xp, yp, wp, bp, bp);
  tk::scale_shift<T>(64, 16, 2, xp, yp, wp, bp, static_cast<const T*>(nullptr));
  tk::copy<T>(64, xp, yp);
  tk::gate_multiply<T>(2, 32, 4, xp, wp, yp);  // a product join (layers/product.hpp)
  tk::neuron_partials<T>(2, 4, 8, xp, thrust::raw_pointer_cast(part.data()), 2);
}

template void instantiate_all<float>();
template void instantiate_all<double>();
