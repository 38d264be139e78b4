// The GEMM tests' reference: the naive product in double.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace nnlens_test {

/// max |beta C0 + op(A) op(B) (+ bias per column) - C| over C [M, N], op(A) and op(B) summed in
/// double (row-major A and B as gemm reads them: lda = ta ? M : K, ldb = tb ? K : N; bias may be null).
template <class T>
double gemm_max_error(bool ta, bool tb, std::size_t M, std::size_t N, std::size_t K, const T* A, const T* B, const T* C0,
                      T beta, const T* bias, const T* C) {
  const std::size_t lda = ta ? M : K, ldb = tb ? K : N;
  double err = 0;
  for (std::size_t i = 0; i < M; ++i)
    for (std::size_t j = 0; j < N; ++j) {
      double s = double(beta) * double(C0[i * N + j]);
      for (std::size_t k = 0; k < K; ++k)
        s += double(ta ? A[k * lda + i] : A[i * lda + k]) * double(tb ? B[j * ldb + k] : B[k * ldb + j]);
      if (bias) s += double(bias[j]);
      err = std::max(err, std::abs(s - double(C[i * N + j])));
    }
  return err;
}

}  // namespace nnlens_test
