// src/precompiled/network.cpp -- part of nnlens::precompiled: one explicit instantiation of each form
// listed in nnlens/precompiled/network.hpp (which declares them `extern` first: this library is built with
// NNLENS_EXTERN_TEMPLATES, like its users, so each of its objects instantiates only its own list).
#include "nnlens/precompiled/network.hpp"

namespace nnlens {
NNLENS_PRECOMPILED_NETWORK(template)
// the members of the network itself that visit, copy, move or destroy its layers
// (nnlens/network/dynamic_network.hpp), and the GEMM of this library's SIMD target
// (nnlens/kernels/gemm.hpp)
NNLENS_PRECOMPILED_DYNAMIC_NETWORK(template)
NNLENS_PRECOMPILED_GEMM(template)

/// The SIMD target this library was compiled for (kernels/simd.hpp): a program built for
/// another one refers to a `value` that is not here, and does not link.
template <>
const int detail::precompiled_target<kernels::simd::vec<float>, kernels::simd::vec<double>>::value = 1;
}  // namespace nnlens
