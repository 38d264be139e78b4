// src/precompiled/network.cpp -- part of nnlens::precompiled: one explicit instantiation of each form
// listed in nnlens/precompiled/network.hpp (which declares them `extern` first: this library is built with
// NNLENS_EXTERN_TEMPLATES, like its users, so each of its objects instantiates only its own list).
#include "nnlens/precompiled/network.hpp"

namespace nnlens {
NNLENS_PRECOMPILED_NETWORK(template)
// the members of the network itself that visit, copy, move or destroy its layers (declared
// `extern` in nnlens/network/dynamic_network.hpp)
template class basic_dynamic_network<float>;
template class basic_dynamic_network<double>;
// the GEMM of this library's SIMD target (declared `extern` in nnlens/kernels/gemm.hpp, beside
// kernels/simd.hpp's target check: a program built for another target does not link)
template void kernels::gemm_impl::gemm_on<float>(bool, bool, std::size_t, std::size_t, std::size_t, const float*,
                                                 std::size_t, const float*, std::size_t, float, float*, std::size_t,
                                                 const float*, float*);
template void kernels::gemm_impl::gemm_on<double>(bool, bool, std::size_t, std::size_t, std::size_t, const double*,
                                                  std::size_t, const double*, std::size_t, double, double*, std::size_t,
                                                  const double*, double*);

/// The SIMD target this library was compiled for (precompiled/forms.hpp): a program built for
/// another one refers to a `value` that is not here, and does not link.
template <>
const int detail::precompiled_target<kernels::simd::vec<float>, kernels::simd::vec<double>>::value = 1;
}  // namespace nnlens
