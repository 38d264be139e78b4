// kernels::gemm against a naive triple loop, all transpose combinations and awkward sizes.
#include <doctest/doctest.h>

#include <nnlens/kernels/gemm.hpp>

#include "kernels/gemm_reference.hpp"  // tests/ is on the include path (unity files live elsewhere)

#include <array>
#include <cmath>
#include <random>
#include <vector>

TEST_CASE_TEMPLATE("gemm matches the naive product", T, float, double) {
  std::mt19937 r(1);
  std::uniform_real_distribution<double> u(-1, 1);
  const std::array<std::array<std::size_t, 3>, 7> sizes{
      {{1, 7, 5}, {2, 33, 17}, {3, 1, 9}, {37, 71, 300}, {130, 257, 520}, {6, 32, 1}, {1, 1000, 3}}};
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (auto [M, N, K] : sizes)
        for (T beta : {T(0), T(1), T(0.5)}) {
          std::vector<T> A(M * K), B(K * N), C(M * N), R(M * N);
          for (auto& x : A) x = T(u(r));
          for (auto& x : B) x = T(u(r));
          for (auto& x : C) x = T(u(r));
          R = C;
          nnlens::kernels::gemm<T>(ta, tb, M, N, K, A.data(), ta ? M : K, B.data(), tb ? K : N, beta, C.data(), N);
          const double err = nnlens_test::gemm_max_error(ta, tb, M, N, K, A.data(), B.data(), R.data(), beta,
                                                         static_cast<const T*>(nullptr), C.data());
          const double tol = std::is_same_v<T, float> ? 1e-4 * std::sqrt(double(K) + 1) : 1e-12 * double(K + 1);
          CHECK(err < tol);
        }
}

TEST_CASE("gemm with beta = 0 never reads C (NaN in C does not propagate)") {
  std::vector<float> A{1, 2, 3, 4}, B{1, 0, 0, 1}, C(4, std::nanf(""));
  nnlens::kernels::gemm<float>(false, false, 2, 2, 2, A.data(), 2, B.data(), 2, 0.0f, C.data(), 2);
  CHECK(C[0] == 1);
  CHECK(C[3] == 4);
  std::vector<float> C2(64 * 64, std::nanf("")), A2(64 * 8, 1.0f), B2(8 * 64, 1.0f);
  nnlens::kernels::gemm<float>(false, false, 64, 64, 8, A2.data(), 8, B2.data(), 64, 0.0f, C2.data(), 64);
  for (float v : C2) CHECK(v == 8.0f);
}

TEST_CASE_TEMPLATE("gemm's bias epilogue is the product followed by a bias pass, bit for bit", T, float, double) {
  // Sizes cross every path: the packing-free M <= 2 rows, K over one k block (256), partial
  // register tiles (M % 6, N % 32), K == 0, a transposed A (packed) and strided A and C.
  std::mt19937 r(7);
  std::uniform_real_distribution<double> u(-1, 1);
  const std::array<std::array<std::size_t, 3>, 8> sizes{
      {{1, 10, 784}, {2, 33, 17}, {256, 256, 784}, {13, 70, 300}, {7, 5, 0}, {6, 64, 256}, {97, 31, 257}, {3, 1, 9}}};
  for (int ta = 0; ta < 2; ++ta)
    for (const auto& mnk : sizes) {
      // not a structured binding: clang 14's lambdas (doctest's CHECK_MESSAGE) cannot capture one
      const std::size_t M = mnk[0], N = mnk[1], K = mnk[2];
      const std::size_t lda = (ta ? M : K) + 3, ldc = N + 5;
      std::vector<T> A((ta ? K : M) * lda + 1), B(K * N + 1), bias(N), C1(M * ldc, std::nan("")), C2(M * ldc, std::nan(""));
      for (auto& x : A) x = T(u(r));
      for (auto& x : B) x = T(u(r));
      for (auto& x : bias) x = T(u(r));
      nnlens::kernels::gemm<T>(ta, false, M, N, K, A.data(), lda, B.data(), N, T(0), C1.data(), ldc);
      for (std::size_t i = 0; i < M; ++i)
        for (std::size_t j = 0; j < N; ++j) C1[i * ldc + j] += bias[j];
      nnlens::kernels::gemm<T>(ta, false, M, N, K, A.data(), lda, B.data(), N, T(0), C2.data(), ldc, bias.data());
      std::size_t differ = 0;
      for (std::size_t i = 0; i < M; ++i)
        for (std::size_t j = 0; j < N; ++j) differ += C1[i * ldc + j] != C2[i * ldc + j];
      CHECK_MESSAGE(differ == 0, "M ", M, " N ", N, " K ", K, " ta ", ta);
      // the padding between rows of C is never written
      for (std::size_t i = 0; i < M; ++i)
        for (std::size_t j = N; j < ldc; ++j) CHECK(std::isnan(C2[i * ldc + j]));
    }
}

TEST_CASE_TEMPLATE("a row of batch 1 rounds as that row of batch N (the M <= 2 path sums as the blocked one)", T, float,
                   double) {
  // Batch composition must not change a sample's result (DFlare's lockstep driver asks a box for
  // many seeds at once, the sequential one for one): rows 1 and 2 at a time against a batch of 13,
  // bias on, every kind of column tail (groups of 8 vectors, single vectors, fewer columns than a
  // vector) and K over one k block (256).  g++'s tuning for AMD Zen 2+ / Alder Lake / Sapphire
  // Rapids leaves single-chain multiply-adds unfused: the project builds with
  // --param=avoid-fma-max-bits=0 (CMakeLists.txt, docs/dev/toolchain.md).
  std::mt19937 r(11);
  std::uniform_real_distribution<double> u(-1, 1);
  const std::array<std::array<std::size_t, 2>, 11> sizes{
      {{16, 36}, {3, 16}, {8, 16}, {10, 84}, {120, 400}, {5, 7}, {64, 36}, {128, 300}, {64, 600}, {300, 513}, {1, 1000}}};
  for (const auto& nk : sizes) {
    const std::size_t N = nk[0], K = nk[1];  // not a structured binding (clang 14, as above)
    const std::size_t M = 13;
    std::vector<T> A(M * K), B(K * N), bias(N), C(M * N), c1(2 * N);
    for (auto& x : A) x = T(u(r));
    for (auto& x : B) x = T(u(r));
    for (auto& x : bias) x = T(u(r));
    nnlens::kernels::gemm<T>(false, false, M, N, K, A.data(), K, B.data(), N, T(0), C.data(), N, bias.data());
    std::size_t differ = 0;
    for (std::size_t i = 0; i + 1 < M; ++i) {
      nnlens::kernels::gemm<T>(false, false, 1, N, K, A.data() + i * K, K, B.data(), N, T(0), c1.data(), N, bias.data());
      for (std::size_t j = 0; j < N; ++j) differ += c1[j] != C[i * N + j];
      nnlens::kernels::gemm<T>(false, false, 2, N, K, A.data() + i * K, K, B.data(), N, T(0), c1.data(), N, bias.data());
      for (std::size_t j = 0; j < 2 * N; ++j) differ += c1[j] != C[i * N + j];
    }
    CHECK_MESSAGE(differ == 0, "N ", N, " K ", K);
  }
}
