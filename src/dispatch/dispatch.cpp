// nnlens::dispatch -- run-time choice of the GEMM's SIMD target.
//
// For a program that must run on several x86-64 CPUs (a tool shipped as one binary, a cluster of
// mixed nodes): build it for a baseline (no -march=native) and link nnlens::dispatch.  Its GEMM
// (dense layers, convolutions' backward passes), the dense convolutions' forward
// (kernels/conv_gemm.hpp, kernels/conv_planes.hpp) and the int8 GEMM of the quantised twins (kernels/int8.hpp) then run the
// AVX-512 or the AVX2+FMA copy, whichever is the best this CPU and its OS support; with neither, the program's own copy.  The
// other kernels keep the program's compile-time target.  This file is compiled at the baseline.
//
// NNLENS_DISPATCH=avx512bw|avx2|off caps the choice (e.g. to compare targets); an unknown value is
// reported on stderr once and ignored.  The CPU test is the compiler's __builtin_cpu_supports (it
// checks that the OS saves the AVX/AVX-512 state; xsimd 8.1's available_architectures() does not,
// and reads the AVX bit from the wrong cpuid leaf).
#include "nnlens/kernels/conv_gemm.hpp"
#include "nnlens/kernels/conv_planes.hpp"
#include "nnlens/kernels/gemm.hpp"
#include "nnlens/kernels/int8.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace nnlens::kernels::dispatch {
namespace targets {
extern const gemm_form<float> avx512bw_f32, avx2_f32;
extern const gemm_form<double> avx512bw_f64, avx2_f64;
extern const gemm_s8_form avx512bw_s8, avx2_s8;
extern const conv_gemm_form<float> avx512bw_conv_f32, avx2_conv_f32;
extern const conv_gemm_form<double> avx512bw_conv_f64, avx2_conv_f64;
extern const conv_planes_form<float> avx512bw_planes_f32, avx2_planes_f32;
extern const conv_planes_form<double> avx512bw_planes_f64, avx2_planes_f64;
}  // namespace targets

namespace {
enum class target_id { none, avx2, avx512bw };

bool supported(target_id t) noexcept {
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  switch (t) {
    case target_id::none: return true;
    case target_id::avx2: return avx2;
    case target_id::avx512bw:
      return avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
             __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl");
  }
#endif
  return t == target_id::none;
}

target_id parse(const char* s, bool& ok) noexcept {
  ok = true;
  if (!std::strcmp(s, "avx512bw")) return target_id::avx512bw;
  if (!std::strcmp(s, "avx2")) return target_id::avx2;
  if (!std::strcmp(s, "off") || !std::strcmp(s, "none")) return target_id::none;
  ok = false;
  return target_id::avx512bw;
}

target_id best(target_id cap) noexcept {
  for (target_id t : {target_id::avx512bw, target_id::avx2})
    if (int(t) <= int(cap) && supported(t)) return t;
  return target_id::none;
}

target_id chosen() noexcept {
  static const target_id t = [] {
    target_id cap = target_id::avx512bw;
    if (const char* e = std::getenv("NNLENS_DISPATCH"); e && *e) {
      bool ok = false;
      cap = parse(e, ok);
      if (!ok)
        std::fprintf(stderr, "nnlens: NNLENS_DISPATCH=%s is not one of avx512bw, avx2, off; ignored\n", e);
    }
    return best(cap);
  }();
  return t;
}

/// Each target's kernels, in one place: none, avx2, avx512bw (target_id's order).
struct forms {
  const gemm_form<float>* f32;
  const gemm_form<double>* f64;
  const gemm_s8_form* s8;
  const conv_gemm_form<float>* conv_f32;
  const conv_gemm_form<double>* conv_f64;
  const conv_planes_form<float>* planes_f32;
  const conv_planes_form<double>* planes_f64;
};
const forms& forms_of(target_id t) noexcept {
  static const forms table[] = {
      {nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr},
      {&targets::avx2_f32, &targets::avx2_f64, &targets::avx2_s8, &targets::avx2_conv_f32, &targets::avx2_conv_f64,
       &targets::avx2_planes_f32, &targets::avx2_planes_f64},
      {&targets::avx512bw_f32, &targets::avx512bw_f64, &targets::avx512bw_s8, &targets::avx512bw_conv_f32,
       &targets::avx512bw_conv_f64, &targets::avx512bw_planes_f32, &targets::avx512bw_planes_f64}};
  return table[int(t)];
}
/// The named target's kernels where this CPU has it, else none's.
const forms& named(const char* name) noexcept {
  bool ok = false;
  const target_id t = parse(name, ok);
  return forms_of(ok && supported(t) ? t : target_id::none);
}
}  // namespace

const gemm_form<float>* gemm_f32() noexcept { return forms_of(chosen()).f32; }
const gemm_form<double>* gemm_f64() noexcept { return forms_of(chosen()).f64; }
const gemm_s8_form* gemm_s8() noexcept { return forms_of(chosen()).s8; }
const gemm_form<float>* gemm_f32(const char* name) noexcept { return named(name).f32; }
const gemm_form<double>* gemm_f64(const char* name) noexcept { return named(name).f64; }
const gemm_s8_form* gemm_s8(const char* name) noexcept { return named(name).s8; }
const conv_gemm_form<float>* conv_gemm_f32() noexcept { return forms_of(chosen()).conv_f32; }
const conv_gemm_form<double>* conv_gemm_f64() noexcept { return forms_of(chosen()).conv_f64; }
const conv_gemm_form<float>* conv_gemm_f32(const char* name) noexcept { return named(name).conv_f32; }
const conv_gemm_form<double>* conv_gemm_f64(const char* name) noexcept { return named(name).conv_f64; }
const conv_planes_form<float>* conv_planes_f32() noexcept { return forms_of(chosen()).planes_f32; }
const conv_planes_form<double>* conv_planes_f64() noexcept { return forms_of(chosen()).planes_f64; }

const char* target() noexcept {
  switch (chosen()) {
    case target_id::avx512bw: return "avx512bw";
    case target_id::avx2: return "avx2";
    default: return "none";
  }
}
}  // namespace nnlens::kernels::dispatch
