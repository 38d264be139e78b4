// nnlens::dispatch: run-time choice of the SIMD target of the float/double GEMM and the int8 GEMM.
// This executable is built for the x86-64 baseline (no -march=native: its own
// kernels are SSE2) and links nnlens::dispatch.  ctest runs it twice: as it is, and with
// NNLENS_DISPATCH=avx2.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <nnlens/nnlens.hpp>
#include <nnlens/kernels/int8.hpp>

#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "../kernels/gemm_reference.hpp"

namespace {
namespace kd = nnlens::kernels::dispatch;

std::string expected_target() {
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
                      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl");
  const char* cap = std::getenv("NNLENS_DISPATCH");
  const std::string c = cap ? cap : "";
  if (c == "off") return "none";
  if (c == "avx2") return avx2 ? "avx2" : "none";
  return avx512 ? "avx512bw" : avx2 ? "avx2" : "none";
}


const std::array<std::array<std::size_t, 3>, 7> sizes{
    {{1, 7, 5}, {2, 33, 17}, {3, 1, 9}, {37, 71, 300}, {130, 257, 520}, {256, 256, 784}, {6, 32, 1}}};
}  // namespace

TEST_CASE("the dispatcher picks the best target this CPU has, capped by NNLENS_DISPATCH") {
  CHECK(std::string(kd::target()) == expected_target());
  if (std::string(kd::target()) == "none") {
    CHECK(kd::gemm_f32() == nullptr);
  } else {
    CHECK(kd::gemm_f32() == kd::gemm_f32(kd::target()));
    CHECK(kd::gemm_f64() == kd::gemm_f64(kd::target()));
  }
  CHECK(kd::gemm_f32("sse9") == nullptr);
}

TEST_CASE_TEMPLATE("kernels::gemm through the dispatcher matches the naive product", T, float, double) {
  std::mt19937 r(3);
  std::uniform_real_distribution<double> u(-1, 1);
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (auto [M, N, K] : sizes)
        for (T beta : {T(0), T(0.5)}) {
          std::vector<T> A(M * K), B(K * N), C(M * N), bias(N);
          for (auto& x : A) x = T(u(r));
          for (auto& x : B) x = T(u(r));
          for (auto& x : C) x = T(u(r));
          for (auto& x : bias) x = T(u(r));
          const auto C0 = C;
          nnlens::kernels::gemm<T>(ta, tb, M, N, K, A.data(), ta ? M : K, B.data(), tb ? K : N, beta, C.data(), N,
                                   bias.data());
          const double tol = std::is_same_v<T, float> ? 1e-4 * std::sqrt(double(K) + 1) : 1e-12 * double(K + 1);
          const double err =
              nnlens_test::gemm_max_error(ta, tb, M, N, K, A.data(), B.data(), C0.data(), beta, bias.data(), C.data());
          CHECK_MESSAGE(err < tol, "M ", M, " N ", N, " K ", K);
        }
}

TEST_CASE_TEMPLATE("the AVX2 and AVX-512 copies give the same bits (the same sums in the same order)", T, float, double) {
  const kd::gemm_form<T>* a2;
  const kd::gemm_form<T>* a5;
  if constexpr (std::is_same_v<T, float>) {
    a2 = kd::gemm_f32("avx2");
    a5 = kd::gemm_f32("avx512bw");
  } else {
    a2 = kd::gemm_f64("avx2");
    a5 = kd::gemm_f64("avx512bw");
  }
  if (!a2 || !a5) {
    MESSAGE("this CPU lacks AVX2 or AVX-512: nothing to compare");
    return;
  }
  std::mt19937 r(5);
  std::uniform_real_distribution<double> u(-1, 1);
  for (int ta = 0; ta < 2; ++ta)
    for (auto [M, N, K] : sizes) {
      std::vector<T> A(M * K), B(K * N), bias(N), C2(M * N), C5(M * N);
      for (auto& x : A) x = T(u(r));
      for (auto& x : B) x = T(u(r));
      for (auto& x : bias) x = T(u(r));
      std::vector<T> w2(a2->workspace(ta, M, N, K) + 64), w5(a5->workspace(ta, M, N, K) + 64);
      const auto aligned = [](std::vector<T>& w) {
        auto p = reinterpret_cast<std::uintptr_t>(w.data());
        return reinterpret_cast<T*>((p + 63) & ~std::uintptr_t(63));
      };
      a2->run(ta, false, M, N, K, A.data(), ta ? M : K, B.data(), N, T(0), C2.data(), N, bias.data(), aligned(w2));
      a5->run(ta, false, M, N, K, A.data(), ta ? M : K, B.data(), N, T(0), C5.data(), N, bias.data(), aligned(w5));
      CHECK_MESSAGE(std::memcmp(C2.data(), C5.data(), C2.size() * sizeof(T)) == 0, "M ", M, " N ", N, " K ", K);
    }
}

TEST_CASE("a network's forward pass runs on the dispatched GEMM and matches a plain computation") {
  using Net = nnlens::Sequential<nnlens::Input<20>, nnlens::Dense<16>, nnlens::ReLU, nnlens::Dense<3>>;
  Net net;
  nnlens::initialize(net, 11);
  std::mt19937 r(9);
  std::uniform_real_distribution<float> u(-1, 1);
  const std::size_t n = 64;
  xt::xarray<float> x = xt::xarray<float>::from_shape({n, 20});
  for (auto& v : x) v = u(r);
  const auto y = nnlens::forward(nnlens::execution::seq, net, x);
  const auto& d0 = std::get<0>(net.layers);
  const auto& d1 = std::get<2>(net.layers);
  double err = 0;
  for (std::size_t s = 0; s < n; ++s) {
    std::array<double, 16> h{};
    for (std::size_t o = 0; o < 16; ++o) {
      double a = d0.b(o);
      for (std::size_t i = 0; i < 20; ++i) a += double(x(s, i)) * d0.W(i, o);
      h[o] = std::max(a, 0.0);
    }
    for (std::size_t o = 0; o < 3; ++o) {
      double a = d1.b(o);
      for (std::size_t i = 0; i < 16; ++i) a += h[i] * d1.W(i, o);
      err = std::max(err, std::abs(a - double(y(s, o))));
    }
  }
  CHECK(err < 1e-5);
}

TEST_CASE("the int8 GEMM through the dispatcher, and each target's copy, equal the portable kernel exactly") {
  std::mt19937 r(13);
  std::uniform_int_distribution<int> u(-128, 127);
  const std::array<std::array<std::size_t, 3>, 6> s8sizes{{{1, 10, 784}, {4, 256, 256}, {7, 33, 9}, {13, 70, 3}, {256, 120, 400}, {5, 3, 17}}};
  for (auto [M, N, K] : s8sizes) {
    std::vector<std::int8_t> A(M * K), B(K * N);
    for (auto& x : A) x = std::int8_t(u(r));
    for (auto& x : B) x = std::int8_t(u(r));
    std::vector<std::int32_t> want(M * N), got(M * N), got_packed(M * N);
    nnlens::kernels::gemm_s8_portable(M, N, K, A.data(), K, B.data(), N, want.data(), N);
    nnlens::kernels::gemm_s8(M, N, K, A.data(), K, B.data(), N, got.data(), N);
    CHECK_MESSAGE(got == want, "M ", M, " N ", N, " K ", K);
    const auto packed = nnlens::kernels::pack_b_s8(K, N, B.data(), N);  // in the chosen target's form
    nnlens::kernels::gemm_s8(M, N, K, A.data(), K, B.data(), N, got_packed.data(), N, packed.empty() ? nullptr : packed.data());
    CHECK_MESSAGE(got_packed == want, "packed, M ", M, " N ", N, " K ", K);
    for (const char* t : {"avx2", "avx512bw"}) {
      const kd::gemm_s8_form* f = kd::gemm_s8(t);
      if (!f) continue;
      std::vector<std::int32_t> work(f->workspace(M, N, K, false) + 1), c(M * N);
      f->run(M, N, K, A.data(), K, B.data(), N, c.data(), N, nullptr, work.data());
      CHECK_MESSAGE(c == want, t, " M ", M, " N ", N, " K ", K);
    }
  }
}

TEST_CASE("the int8 quantisation loops of each target agree: AVX2 and AVX-512 exactly, the program's own within one code") {
  // Both dispatch copies fuse (acc + bias) * mult with the rounding constant's addition where the
  // compiler does (FMA); this baseline program has no FMA, so a product that lands within an ulp
  // of a rounding tie may round to the neighbouring code here.
  std::mt19937 r(17);
  std::uniform_real_distribution<float> u(-40, 40);
  std::uniform_int_distribution<int> ua(-200000, 200000);
  const std::size_t n = 1000;
  std::vector<float> x(n), mult(n);
  std::vector<std::int32_t> acc(n), bias(n);
  for (auto& v : x) v = u(r);
  for (auto& v : acc) v = ua(r);
  for (auto& v : bias) v = ua(r) / 100;
  for (auto& v : mult) v = std::abs(u(r)) * 1e-4f + 1e-5f;
  x[0] = 2.5f, x[1] = -2.5f, x[2] = 1e9f, x[3] = -1e9f;  // ties and saturation
  std::vector<std::int8_t> own_q(n), own_r(n), own_rr(n);
  nnlens::kernels::s8_impl::quantize(x.data(), n, 0.25f, 3, own_q.data());
  nnlens::kernels::s8_impl::requantize(acc.data(), n, 17, 3e-4f, -5, own_r.data());
  nnlens::kernels::s8_impl::requantize_row(acc.data(), n, bias.data(), mult.data(), 2, own_rr.data());
  std::vector<std::vector<std::int8_t>> per_target;
  for (const char* t : {"avx2", "avx512bw"}) {
    const kd::gemm_s8_form* f = kd::gemm_s8(t);
    if (!f) continue;
    std::vector<std::int8_t> q(n), rq(n), rr(n);
    f->quantize(x.data(), n, 0.25f, 3, q.data());
    f->requantize(acc.data(), n, 17, 3e-4f, -5, rq.data());
    f->requantize_row(acc.data(), n, bias.data(), mult.data(), 2, rr.data());
    CHECK(q == own_q);  // a division: no fused operation anywhere
    std::size_t far = 0;
    for (std::size_t i = 0; i < n; ++i) far += std::abs(rq[i] - own_r[i]) > 1 || std::abs(rr[i] - own_rr[i]) > 1;
    CHECK_MESSAGE(far == 0, t);
    q.insert(q.end(), rq.begin(), rq.end());
    q.insert(q.end(), rr.begin(), rr.end());
    per_target.push_back(q);
  }
  if (per_target.size() == 2) CHECK(per_target[0] == per_target[1]);
}

TEST_CASE_TEMPLATE("conv_gemm through the dispatcher, and each target's copy, match the naive convolution", T, float, double) {
  using nnlens::conv_geometry;
  struct conv_case {
    std::size_t ns, C, H, W, O;
    conv_geometry g;
  };
  // row copies, the gather table with tiles straddling samples, 1x1 planes, several k blocks
  const std::array<conv_case, 4> cases{{{2, 5, 16, 16, 7, conv_geometry{.kh = 3, .pad_top = 1}},
                                        {16, 8, 4, 4, 9, conv_geometry{.kh = 3, .stride_h = 2, .pad_top = 1}},
                                        {3, 10, 20, 30, 12, conv_geometry{}},
                                        {3, 40, 6, 6, 100, conv_geometry{.kh = 3, .pad_top = 1}}}};
  const kd::conv_gemm_form<T>* chosen;
  std::vector<std::pair<std::string, const kd::conv_gemm_form<T>*>> named;
  if constexpr (std::is_same_v<T, float>) {
    chosen = kd::conv_gemm_f32();
    for (const char* t : {"avx2", "avx512bw"}) named.emplace_back(t, kd::conv_gemm_f32(t));
  } else {
    chosen = kd::conv_gemm_f64();
    for (const char* t : {"avx2", "avx512bw"}) named.emplace_back(t, kd::conv_gemm_f64(t));
  }
  const std::string target = kd::target();
  CHECK(chosen == (target == "avx2" ? named[0].second : target == "avx512bw" ? named[1].second : nullptr));
  std::mt19937 r(21);
  std::uniform_real_distribution<double> u(-1, 1);
  for (const auto& c : cases) {
    const auto& g = c.g;
    const std::size_t OH = g.out_h(c.H), OW = g.out_w(c.W), P = OH * OW, K = c.C * g.kh * g.kw;
    const std::size_t in_n = c.C * c.H * c.W, out_n = c.O * P;
    std::vector<T> x(c.ns * in_n), w(c.O * K), b(c.O);
    for (auto& v : x) v = T(u(r));
    for (auto& v : w) v = T(u(r));
    for (auto& v : b) v = T(u(r));
    const auto worst_error = [&](const std::vector<T>& y) {
      double worst = 0;
      for (std::size_t s = 0; s < c.ns; ++s)
        for (std::size_t o = 0; o < c.O; ++o)
          for (std::size_t q = 0; q < P; ++q) {
            const std::size_t oh = q / OW, ow = q % OW;
            long double ref = b[o], mag = std::fabs(static_cast<long double>(b[o]));
            for (std::size_t ch = 0; ch < c.C; ++ch)
              for (std::size_t i = 0; i < g.kh; ++i)
                for (std::size_t j = 0; j < g.kw; ++j) {
                  const long ih = long(oh * g.stride_h + i) - long(g.pad_top), iw = long(ow * g.stride_w + j) - long(g.pad_left);
                  if (ih < 0 || iw < 0 || ih >= long(c.H) || iw >= long(c.W)) continue;
                  const long double p = static_cast<long double>(w[(o * c.C + ch) * g.kh * g.kw + i * g.kw + j]) *
                                        x[s * in_n + (ch * c.H + std::size_t(ih)) * c.W + std::size_t(iw)];
                  ref += p;
                  mag += std::fabs(p);
                }
            worst = std::max(worst, double(std::fabs(static_cast<long double>(y[s * out_n + o * P + q]) - ref) / mag));
          }
      return worst;
    };
    const double tol = (std::is_same_v<T, float> ? 1e-6 : 1e-15) * std::sqrt(double(K) + 1);
    // the dispatched entry point, on the scratch the plan would give it (sized for every target)
    std::vector<T> y(c.ns * out_n), work(nnlens::kernels::conv_gemm_scratch<T>(c.ns, P, c.O, K, g.kh * g.kw));
    nnlens::kernels::conv_gemm(x.data(), in_n, c.ns, c.C, c.H, c.W, g, OH, OW, w.data(), c.O, b.data(), y.data(), out_n,
                               work.data());
    CHECK_MESSAGE(worst_error(y) < tol, "dispatched, ns ", c.ns, " C ", c.C, " O ", c.O);
    std::vector<std::vector<T>> per_target;
    for (const auto& [name, f] : named) {
      if (!f) continue;
      std::vector<T> yt(c.ns * out_n), wt(f->scratch(c.ns, P, c.O, K, g.kh * g.kw));
      CHECK(wt.size() <= work.size());  // the plan's scratch fits every target
      f->run(x.data(), in_n, c.ns, c.C, c.H, c.W, g, OH, OW, w.data(), c.O, b.data(), yt.data(), out_n, wt.data(), 0, std::size_t(-1));
      CHECK_MESSAGE(worst_error(yt) < tol, name, ", ns ", c.ns, " C ", c.C, " O ", c.O);
      if (f == chosen) CHECK(std::memcmp(yt.data(), y.data(), y.size() * sizeof(T)) == 0);
      per_target.push_back(std::move(yt));
    }
    if (per_target.size() == 2)  // the same sums in the same order (k blocks of the same KC)
      CHECK(std::memcmp(per_target[0].data(), per_target[1].data(), y.size() * sizeof(T)) == 0);
  }
}
