// nnlens/kernels/gemm.hpp -- single-threaded GEMM on raw row-major buffers.
//
//   C[M,N] = beta * C + op(A)[M,K] * op(B)[K,N]
//   op(A) = A (lda >= K) or A^T (A stored [K,M], lda >= M); likewise B.
//
// requires: buffers do not alias C.  beta == 0 means C is overwritten (never read, so NaN in an
//           uninitialised C does not propagate).
// ensures:  deterministic for a given build (summation order depends only on sizes).
// Method: Goto-style blocking (KC x NC panels of B packed into a thread-local buffer that grows
// once; MC x KC blocks of A, packed only when A is transposed: a row-major A is read in place),
// an MR x NR register-tiled micro-kernel on xsimd batches (kernels/simd.hpp), and a packing-free
// path for M <= 2 (batch-1 inference), so the batch-1 path makes no heap allocation at all.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "nnlens/kernels/simd.hpp"

namespace nnlens::kernels {
// The kernel itself lives in the SIMD target's namespace (kernels/simd.hpp's NNLENS_SIMD_NS), so
// that copies compiled for several targets in one program (src/dispatch/) never share a symbol.
// It calls nothing from std:: and allocates nothing: the scratch comes from gemm() below.
inline namespace NNLENS_SIMD_NS {
namespace gemm_impl {

inline std::size_t min_(std::size_t a, std::size_t b) { return a < b ? a : b; }

template <class T>
struct gemm_blocking {
  static constexpr std::size_t W = simd::width<T>;
  static constexpr std::size_t MR = 6;
  static constexpr std::size_t NR = 2 * W;
  static constexpr std::size_t KC = 256;
  static constexpr std::size_t MC = MR * 16;
  static constexpr std::size_t NC = NR * 16;  // KC x NC of packed B: 512 KiB of floats, in L2
};

// Pack rows [i0, i0+mc) x cols [k0, k0+kc) of op(A) into MR-row panels: Ap[panel][k][MR].
template <class T>
void pack_a(bool ta, const T* A, std::size_t lda, std::size_t i0, std::size_t mc, std::size_t k0,
            std::size_t kc, T* Ap) {
  constexpr std::size_t MR = gemm_blocking<T>::MR;
  for (std::size_t ip = 0; ip < mc; ip += MR) {
    const std::size_t mr = min_(MR, mc - ip);
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
    const std::size_t nr = min_(NR, nc - jp);
    T* panel = Bp + jp * kc;
    if (!tb && nr == NR && NR % simd::width<T> == 0) {  // whole panels: vector row copies
      constexpr std::size_t W = simd::width<T>;
      for (std::size_t k = 0; k < kc; ++k) {
        const T* src = B + (k0 + k) * ldb + j0 + jp;
        T* dst = panel + k * NR;
        for (std::size_t j = 0; j < NR; j += W) simd::store(dst + j, simd::load(src + j));
      }
    } else if (!tb) {
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

// C[0:mr, 0:nr] += a * Bp over kc steps, where a(i, k) = A[i * rs + k * cs]: a packed panel
// (rs 1, cs MR) or op(A) read in place (rs lda, cs 1: a row-major A needs no packing, as in BLIS'
// small-matrix kernels; its MR rows are MR sequential streams).  Rows i >= mr read row 0 and are
// not stored.  Each C element is summed over k in order, whichever form A has.  bias[j] (one per
// column) or row_bias[i] (one per row: a convolution's output channels, kernels/conv_gemm.hpp) is
// added after the sum.
template <class T>
inline void micro_kernel(std::size_t kc, const T* __restrict__ A, std::size_t rs, std::size_t cs,
                         const T* __restrict__ Bp, T* C, std::size_t ldc, std::size_t mr, std::size_t nr,
                         bool first, const T* bias, const T* row_bias = nullptr) {
  using V = simd::vec<T>;
  constexpr std::size_t W = simd::width<T>;
  const V z = simd::zero<T>();
  V c00 = z, c01 = z, c10 = z, c11 = z, c20 = z, c21 = z, c30 = z, c31 = z, c40 = z, c41 = z, c50 = z, c51 = z;
  const T* a0 = A;
  const T* a1 = A + (mr > 1 ? rs : 0);
  const T* a2 = A + (mr > 2 ? 2 * rs : 0);
  const T* a3 = A + (mr > 3 ? 3 * rs : 0);
  const T* a4 = A + (mr > 4 ? 4 * rs : 0);
  const T* a5 = A + (mr > 5 ? 5 * rs : 0);
  for (std::size_t k = 0, o = 0; k < kc; ++k, o += cs) {
    const V b0 = simd::load(Bp + k * 2 * W);
    const V b1 = simd::load(Bp + k * 2 * W + W);
    V av;
    av = simd::broadcast(a0[o]); c00 += av * b0; c01 += av * b1;
    av = simd::broadcast(a1[o]); c10 += av * b0; c11 += av * b1;
    av = simd::broadcast(a2[o]); c20 += av * b0; c21 += av * b1;
    av = simd::broadcast(a3[o]); c30 += av * b0; c31 += av * b1;
    av = simd::broadcast(a4[o]); c40 += av * b0; c41 += av * b1;
    av = simd::broadcast(a5[o]); c50 += av * b0; c51 += av * b1;
  }
  // C = (first ? +0 : C) + acc, then + bias[j] on the product's last k block: the arithmetic of
  // zero-filling C, accumulating, and adding the bias in a pass of its own, without those passes.
  const V rows[6][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
  if (nr == 2 * W) {
    for (std::size_t i = 0; i < mr; ++i) {
      T* c = C + i * ldc;
      V r0 = (first ? z : simd::load(c)) + rows[i][0];
      V r1 = (first ? z : simd::load(c + W)) + rows[i][1];
      if (bias) {
        r0 = r0 + simd::load(bias);
        r1 = r1 + simd::load(bias + W);
      }
      if (row_bias) {
        const V rb = simd::broadcast(row_bias[i]);
        r0 = r0 + rb;
        r1 = r1 + rb;
      }
      simd::store(c, r0);
      simd::store(c + W, r1);
    }
  } else {
    alignas(64) T tmp[2 * W];
    for (std::size_t i = 0; i < mr; ++i) {
      simd::store(tmp, rows[i][0]);
      simd::store(tmp + W, rows[i][1]);
      T* c = C + i * ldc;
      for (std::size_t j = 0; j < nr; ++j) {
        T v = (first ? T(0) : c[j]) + tmp[j];
        if (bias) v = v + bias[j];
        if (row_bias) v = v + row_bias[i];
        c[j] = v;
      }
    }
  }
}

/// The packing-free path for M <= 2 rows of a row-major A (batch-1 inference, per-sample
/// gradients), on C already scaled by beta.  It sums as the blocked path does, so a row of batch 1
/// rounds as that row of a batch, at any K (tests/kernels/test_gemm.cpp, "a row of batch 1"): per
/// block of KC k's, each C element's products from zero in k order, in vectors, then added to C.
/// Groups of 8 vectors of C stay in registers over a block (one simd::axpy per k reloaded a
/// register from the stack at every k: 0.83-0.87x the batch-1 MLP), then single vectors, then the
/// last columns (fewer than a vector) on a zero-padded copy of theirs, packed once per block.
template <class T>
void small_rows(bool tb, std::size_t M, std::size_t N, std::size_t K, const T* A, std::size_t lda, const T* B,
                std::size_t ldb, T* C, std::size_t ldc, const T* bias) {
  using V = simd::vec<T>;
  constexpr std::size_t W = simd::width<T>, NV = 8, KC = gemm_blocking<T>::KC;
  for (std::size_t i = 0; i < M; ++i) {
    const T* a = A + i * lda;
    T* c = C + i * ldc;
    if (!tb) {
      for (std::size_t k0 = 0; k0 < K; k0 += KC) {
        const std::size_t k1 = min_(K, k0 + KC);
        std::size_t j0 = 0;
        for (; j0 + NV * W <= N; j0 += NV * W) {
          V acc[NV];
          for (std::size_t v = 0; v < NV; ++v) acc[v] = simd::zero<T>();
          for (std::size_t k = k0; k < k1; ++k) {
            const V av = simd::broadcast(a[k]);
            const T* b = B + k * ldb + j0;
            for (std::size_t v = 0; v < NV; ++v) acc[v] = acc[v] + av * simd::load(b + v * W);
          }
          for (std::size_t v = 0; v < NV; ++v) simd::store(c + j0 + v * W, simd::load(c + j0 + v * W) + acc[v]);
        }
        for (; j0 + W <= N; j0 += W) {
          V acc = simd::zero<T>();
          for (std::size_t k = k0; k < k1; ++k) acc = acc + simd::broadcast(a[k]) * simd::load(B + k * ldb + j0);
          simd::store(c + j0, simd::load(c + j0) + acc);
        }
        if (j0 < N) {  // packed first: a vector load right after narrow stores to its place stalls
          alignas(64) T bp[KC * W], t[W];
          const std::size_t r = N - j0;
          for (std::size_t k = k0; k < k1; ++k)
            for (std::size_t j = 0; j < W; ++j) bp[(k - k0) * W + j] = j < r ? B[k * ldb + j0 + j] : T(0);
          V acc = simd::zero<T>();
          for (std::size_t k = k0; k < k1; ++k) acc = acc + simd::broadcast(a[k]) * simd::load(bp + (k - k0) * W);
          simd::store(t, acc);
          for (std::size_t j = 0; j < r; ++j) c[j0 + j] = c[j0 + j] + t[j];
        }
      }
    } else {
      for (std::size_t j = 0; j < N; ++j) c[j] += simd::dot(a, B + j * ldb, K);
    }
    if (bias)
      for (std::size_t j = 0; j < N; ++j) c[j] += bias[j];
  }
}

/// Elements of the packed B panel, rounded up to 16 (64 bytes for float): A's panel follows it.
template <class T>
std::size_t packed_b_elements(std::size_t N) {
  using blk = gemm_blocking<T>;
  return (blk::KC * ((min_(N, blk::NC) + blk::NR - 1) / blk::NR * blk::NR) + 15) / 16 * 16;
}

/// Scratch that gemm_on needs, in elements (64-byte aligned by the caller).
template <class T>
std::size_t gemm_workspace(bool ta, std::size_t M, std::size_t N, std::size_t K) {
  using blk = gemm_blocking<T>;
  if (M == 0 || N == 0 || K == 0 || (M <= 2 && !ta)) return 0;
  return packed_b_elements<T>(N) + (ta ? blk::MC * blk::KC : 0);
}

/// gemm() on the caller's scratch `work` (gemm_workspace elements, 64-byte aligned).
template <class T>
void gemm_on(bool ta, bool tb, std::size_t M, std::size_t N, std::size_t K, const T* A, std::size_t lda,
             const T* B, std::size_t ldb, T beta, T* C, std::size_t ldc, const T* bias, T* work) {
  using blk = gemm_blocking<T>;
  if (M == 0 || N == 0) return;
  const bool small = M <= 2 && !ta && K > 0;
  // C = beta * C (the blocked path's first k block writes C without reading it when beta is 0)
  for (std::size_t i = 0; i < M; ++i) {
    T* c = C + i * ldc;
    if (beta == T(0) && (small || K == 0))
      for (std::size_t j = 0; j < N; ++j) c[j] = T(0);
    else if (beta != T(0) && beta != T(1))
      for (std::size_t j = 0; j < N; ++j) c[j] *= beta;
  }
  if (K == 0) {
    if (bias)
      for (std::size_t i = 0; i < M; ++i)
        for (std::size_t j = 0; j < N; ++j) C[i * ldc + j] += bias[j];
    return;
  }

  if (small) return small_rows(tb, M, N, K, A, lda, B, ldb, C, ldc, bias);

  T* Bp = work;
  T* Ap = ta ? work + packed_b_elements<T>(N) : nullptr;
  for (std::size_t j0 = 0; j0 < N; j0 += blk::NC) {
    const std::size_t nc = min_(blk::NC, N - j0);
    for (std::size_t k0 = 0; k0 < K; k0 += blk::KC) {
      const std::size_t kc = min_(blk::KC, K - k0);
      pack_b(tb, B, ldb, k0, kc, j0, nc, Bp);
      const bool first = k0 == 0 && beta == T(0);
      const T* bj = bias && k0 + kc == K ? bias + j0 : nullptr;  // added on the last k block
      for (std::size_t i0 = 0; i0 < M; i0 += blk::MC) {
        const std::size_t mc = min_(blk::MC, M - i0);
        if (ta) pack_a(ta, A, lda, i0, mc, k0, kc, Ap);  // A^T: MR-row panels
        for (std::size_t jp = 0; jp < nc; jp += blk::NR) {
          const std::size_t nr = min_(blk::NR, nc - jp);
          for (std::size_t ip = 0; ip < mc; ip += blk::MR) {
            const std::size_t mr = min_(blk::MR, mc - ip);
            T* c = C + (i0 + ip) * ldc + j0 + jp;
            if (ta)
              micro_kernel(kc, Ap + ip * kc, 1, blk::MR, Bp + jp * kc, c, ldc, mr, nr, first, bj ? bj + jp : bj);
            else  // row-major A read in place
              micro_kernel(kc, A + (i0 + ip) * lda + k0, lda, 1, Bp + jp * kc, c, ldc, mr, nr, first, bj ? bj + jp : bj);
          }
        }
      }
    }
  }
}
}  // namespace gemm_impl
}  // inline namespace NNLENS_SIMD_NS

}  // namespace nnlens::kernels

// The GEMM's forms that nnlens::precompiled holds, spelled once: `extern template` here under
// NNLENS_EXTERN_TEMPLATES, `template` in src/precompiled/network.cpp.  The library is compiled for
// its SIMD target, which must be the program's: kernels/simd.hpp's precompiled_target check makes a
// mismatch a link error.
#define NNLENS_PRECOMPILED_GEMM(KW)                                                                        \
  KW void ::nnlens::kernels::gemm_impl::gemm_on<float>(bool, bool, std::size_t, std::size_t, std::size_t,   \
                                                       const float*, std::size_t, const float*, std::size_t, \
                                                       float, float*, std::size_t, const float*, float*);   \
  KW void ::nnlens::kernels::gemm_impl::gemm_on<double>(bool, bool, std::size_t, std::size_t, std::size_t,  \
                                                        const double*, std::size_t, const double*,          \
                                                        std::size_t, double, double*, std::size_t,          \
                                                        const double*, double*);
#if defined(NNLENS_EXTERN_TEMPLATES)
NNLENS_PRECOMPILED_GEMM(extern template)
#endif

namespace nnlens::kernels {
namespace dispatch {
/// One SIMD target's GEMM (src/dispatch/: nnlens::dispatch, the run-time choice of target).
template <class T>
struct gemm_form {
  std::size_t (*workspace)(bool, std::size_t, std::size_t, std::size_t);
  void (*run)(bool, bool, std::size_t, std::size_t, std::size_t, const T*, std::size_t, const T*, std::size_t, T, T*,
              std::size_t, const T*, T*);
};
/// Defined in nnlens::dispatch (src/dispatch/dispatch.cpp):
/// - the best target's GEMM for this CPU among those it holds (AVX-512, AVX2+FMA), capped by the
///   environment variable NNLENS_DISPATCH, or nullptr (then the program's own copy runs);
/// - that target's name: "avx512bw", "avx2" or "none";
/// - the named target's GEMM, or nullptr where this CPU lacks it (tests, comparisons).
const gemm_form<float>* gemm_f32() noexcept;
const gemm_form<double>* gemm_f64() noexcept;
const char* target() noexcept;
const gemm_form<float>* gemm_f32(const char* target) noexcept;
const gemm_form<double>* gemm_f64(const char* target) noexcept;
}  // namespace dispatch

namespace gemm_buffers {
template <class T>
T* aligned_buffer(std::vector<T>& v, std::size_t n) {
  const std::size_t extra = 64 / sizeof(T) + 1;
  if (v.size() < n + extra) v.resize(n + extra);
  auto p = reinterpret_cast<std::uintptr_t>(v.data());
  p = (p + 63) & ~std::uintptr_t(63);
  return reinterpret_cast<T*>(p);
}
}  // namespace gemm_buffers

/// C = beta*C + op(A) op(B), then C[i, j] += bias[j] for every row when bias is given (a separate
/// addition after the product, the same arithmetic as a pass of its own).  See the header comment.
/// With NNLENS_RUNTIME_DISPATCH (link nnlens::dispatch), float and double run the best target's
/// copy for this CPU.
template <class T>
void gemm(bool ta, bool tb, std::size_t M, std::size_t N, std::size_t K, const T* A, std::size_t lda,
          const T* B, std::size_t ldb, T beta, T* C, std::size_t ldc, const T* bias = nullptr) {
  if constexpr (!std::is_floating_point_v<T>) {  // e.g. exact rationals (tests): the plain triple loop
    for (std::size_t i = 0; i < M; ++i)
      for (std::size_t j = 0; j < N; ++j) {
        T acc = beta == T(0) ? T(0) : beta * C[i * ldc + j];
        for (std::size_t k = 0; k < K; ++k) acc += (ta ? A[k * lda + i] : A[i * lda + k]) * (tb ? B[j * ldb + k] : B[k * ldb + j]);
        C[i * ldc + j] = bias ? acc + bias[j] : acc;
      }
  } else {
    thread_local std::vector<T> scratch;
#if defined(NNLENS_RUNTIME_DISPATCH)
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      static const dispatch::gemm_form<T>* const form = [] {
        if constexpr (std::is_same_v<T, float>) return dispatch::gemm_f32();
        else return dispatch::gemm_f64();
      }();
      if (form) {
        const std::size_t need = form->workspace(ta, M, N, K);
        form->run(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc, bias, need ? gemm_buffers::aligned_buffer(scratch, need) : nullptr);
        return;
      }
    }
#endif
    const std::size_t need = gemm_impl::gemm_workspace<T>(ta, M, N, K);
    gemm_impl::gemm_on<T>(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc, bias,
                       need ? gemm_buffers::aligned_buffer(scratch, need) : nullptr);
  }
}

}  // namespace nnlens::kernels
