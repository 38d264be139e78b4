// nnlens/kernels/gemm.hpp -- single-threaded GEMM on raw row-major buffers.
//
//   C[M,N] = beta * C + op(A)[M,K] * op(B)[K,N]
//   op(A) = A (lda >= K) or A^T (A stored [K,M], lda >= M); likewise B.
//
// requires: buffers do not alias C.  beta == 0 means C is overwritten (never read, so NaN in an
//           uninitialised C does not propagate).
// ensures:  deterministic for a given build (summation order depends only on sizes).
// Method: Goto-style blocking (KC x NC panels of B, MC x KC blocks of A, both packed into
// thread-local buffers that grow once), an MR x NR register-tiled micro-kernel on xsimd
// batches (kernels/simd.hpp), and a packing-free path for M == 1 (batch-1 inference), so the batch-1 path makes no
// heap allocation at all.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "nnlens/kernels/simd.hpp"

namespace nnlens::kernels {

namespace detail {

template <class T>
struct gemm_blocking {
  static constexpr std::size_t W = simd::width<T>;
  static constexpr std::size_t MR = 6;
  static constexpr std::size_t NR = 2 * W;
  static constexpr std::size_t KC = 256;
  static constexpr std::size_t MC = MR * 16;
  static constexpr std::size_t NC = NR * 64;
};

template <class T>
T* aligned_buffer(std::vector<T>& v, std::size_t n) {
  const std::size_t extra = 64 / sizeof(T) + 1;
  if (v.size() < n + extra) v.resize(n + extra);
  auto p = reinterpret_cast<std::uintptr_t>(v.data());
  p = (p + 63) & ~std::uintptr_t(63);
  return reinterpret_cast<T*>(p);
}

// Pack rows [i0, i0+mc) x cols [k0, k0+kc) of op(A) into MR-row panels: Ap[panel][k][MR].
template <class T>
void pack_a(bool ta, const T* A, std::size_t lda, std::size_t i0, std::size_t mc, std::size_t k0,
            std::size_t kc, T* Ap) {
  constexpr std::size_t MR = gemm_blocking<T>::MR;
  for (std::size_t ip = 0; ip < mc; ip += MR) {
    const std::size_t mr = std::min(MR, mc - ip);
    for (std::size_t k = 0; k < kc; ++k) {
      T* dst = Ap + ip * kc + k * MR;
      for (std::size_t i = 0; i < mr; ++i) {
        const std::size_t r = i0 + ip + i, c = k0 + k;
        dst[i] = ta ? A[c * lda + r] : A[r * lda + c];
      }
      for (std::size_t i = mr; i < MR; ++i) dst[i] = T(0);
    }
  }
}

// Pack rows [k0,k0+kc) x cols [j0,j0+nc) of op(B) into NR-column panels: Bp[panel][k][NR].
template <class T>
void pack_b(bool tb, const T* B, std::size_t ldb, std::size_t k0, std::size_t kc, std::size_t j0,
            std::size_t nc, T* Bp) {
  constexpr std::size_t NR = gemm_blocking<T>::NR;
  for (std::size_t jp = 0; jp < nc; jp += NR) {
    const std::size_t nr = std::min(NR, nc - jp);
    T* panel = Bp + jp * kc;
    if (!tb) {
      for (std::size_t k = 0; k < kc; ++k) {
        const T* src = B + (k0 + k) * ldb + j0 + jp;
        T* dst = panel + k * NR;
        std::size_t j = 0;
        for (; j < nr; ++j) dst[j] = src[j];
        for (; j < NR; ++j) dst[j] = T(0);
      }
    } else {
      for (std::size_t k = 0; k < kc; ++k) {
        T* dst = panel + k * NR;
        std::size_t j = 0;
        for (; j < nr; ++j) dst[j] = B[(j0 + jp + j) * ldb + k0 + k];
        for (; j < NR; ++j) dst[j] = T(0);
      }
    }
  }
}

template <class T>
inline void micro_kernel(std::size_t kc, const T* __restrict__ Ap, const T* __restrict__ Bp,
                         T* C, std::size_t ldc, std::size_t mr, std::size_t nr) {
  using V = simd::vec<T>;
  constexpr std::size_t W = simd::width<T>;
  constexpr std::size_t MR = gemm_blocking<T>::MR;
  const V z = simd::zero<T>();
  V c00 = z, c01 = z, c10 = z, c11 = z, c20 = z, c21 = z, c30 = z, c31 = z, c40 = z, c41 = z, c50 = z, c51 = z;
  for (std::size_t k = 0; k < kc; ++k) {
    const V b0 = simd::load(Bp + k * 2 * W);
    const V b1 = simd::load(Bp + k * 2 * W + W);
    const T* a = Ap + k * MR;
    V av;
    av = simd::broadcast(a[0]); c00 += av * b0; c01 += av * b1;
    av = simd::broadcast(a[1]); c10 += av * b0; c11 += av * b1;
    av = simd::broadcast(a[2]); c20 += av * b0; c21 += av * b1;
    av = simd::broadcast(a[3]); c30 += av * b0; c31 += av * b1;
    av = simd::broadcast(a[4]); c40 += av * b0; c41 += av * b1;
    av = simd::broadcast(a[5]); c50 += av * b0; c51 += av * b1;
  }
  const V rows[6][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
  if (nr == 2 * W) {
    for (std::size_t i = 0; i < mr; ++i) {
      T* c = C + i * ldc;
      simd::store(c, simd::load(c) + rows[i][0]);
      simd::store(c + W, simd::load(c + W) + rows[i][1]);
    }
  } else {
    alignas(64) T tmp[2 * W];
    for (std::size_t i = 0; i < mr; ++i) {
      simd::store(tmp, rows[i][0]);
      simd::store(tmp + W, rows[i][1]);
      T* c = C + i * ldc;
      for (std::size_t j = 0; j < nr; ++j) c[j] += tmp[j];
    }
  }
}

}  // namespace detail

/// C = beta*C + op(A) op(B).  See the header comment.
template <class T>
void gemm(bool ta, bool tb, std::size_t M, std::size_t N, std::size_t K, const T* A, std::size_t lda,
          const T* B, std::size_t ldb, T beta, T* C, std::size_t ldc) {
  if constexpr (!std::is_floating_point_v<T>) {  // e.g. exact rationals (tests): the plain triple loop
    for (std::size_t i = 0; i < M; ++i)
      for (std::size_t j = 0; j < N; ++j) {
        T acc = beta == T(0) ? T(0) : beta * C[i * ldc + j];
        for (std::size_t k = 0; k < K; ++k) acc += (ta ? A[k * lda + i] : A[i * lda + k]) * (tb ? B[j * ldb + k] : B[k * ldb + j]);
        C[i * ldc + j] = acc;
      }
    return;
  } else {
  using blk = detail::gemm_blocking<T>;
  if (M == 0 || N == 0) return;
  // C = beta * C
  for (std::size_t i = 0; i < M; ++i) {
    T* c = C + i * ldc;
    if (beta == T(0))
      std::fill(c, c + N, T(0));
    else if (beta != T(1))
      for (std::size_t j = 0; j < N; ++j) c[j] *= beta;
  }
  if (K == 0) return;

  // Packing-free small-M paths (batch-1 inference, per-sample gradients).
  if (M <= 2 && !ta) {
    for (std::size_t i = 0; i < M; ++i) {
      const T* a = A + i * lda;
      T* c = C + i * ldc;
      if (!tb) {
        for (std::size_t k = 0; k < K; ++k) simd::axpy(N, a[k], B + k * ldb, c);
      } else {
        for (std::size_t j = 0; j < N; ++j) c[j] += simd::dot(a, B + j * ldb, K);
      }
    }
    return;
  }

  thread_local std::vector<T> abuf, bbuf;
  T* Ap = detail::aligned_buffer(abuf, blk::MC * blk::KC);
  T* Bp = detail::aligned_buffer(bbuf, blk::KC * ((std::min(N, blk::NC) + blk::NR - 1) / blk::NR * blk::NR));

  for (std::size_t j0 = 0; j0 < N; j0 += blk::NC) {
    const std::size_t nc = std::min(blk::NC, N - j0);
    for (std::size_t k0 = 0; k0 < K; k0 += blk::KC) {
      const std::size_t kc = std::min(blk::KC, K - k0);
      detail::pack_b(tb, B, ldb, k0, kc, j0, nc, Bp);
      for (std::size_t i0 = 0; i0 < M; i0 += blk::MC) {
        const std::size_t mc = std::min(blk::MC, M - i0);
        detail::pack_a(ta, A, lda, i0, mc, k0, kc, Ap);
        for (std::size_t jp = 0; jp < nc; jp += blk::NR) {
          const std::size_t nr = std::min(blk::NR, nc - jp);
          for (std::size_t ip = 0; ip < mc; ip += blk::MR) {
            const std::size_t mr = std::min(blk::MR, mc - ip);
            detail::micro_kernel(kc, Ap + ip * kc, Bp + jp * kc, C + (i0 + ip) * ldc + j0 + jp, ldc, mr, nr);
          }
        }
      }
    }
  }
  }  // floating point
}

}  // namespace nnlens::kernels
