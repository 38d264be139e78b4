// nnlens/kernels/elementary.hpp -- exp, expm1, tanh and erf in float and double as plain arithmetic:
// no libm call, no branch, host and device alike.
//
//   kernels::exp(x)     e^x      float: <= 1 ulp, double: <= 1 ulp (tests/kernels/test_elementary.cpp)
//   kernels::expm1(x)   e^x - 1  accurate near 0 (no cancellation): <= 2 ulp
//   kernels::tanh(x)    -expm1(-2|x|) / (2 + expm1(-2|x|)), sign restored: <= 3 ulp
//   kernels::erf(x)     |x| < 0.75: Taylor series in x²; else 1 - e^{-x²} Q(x), Q = e^{x²} erfc(x)
//                       a polynomial in t = 1 / (1 + x/2): <= 4 ulp
//
// Why not std::exp: the element-wise loops of the smooth activations (Sigmoid, SiLU, Tanh, GELU) are
// one scalar libm call per element, 8-40 ns, some 2-6% of memory speed.  These functions are the
// same arithmetic for every element: the compiler vectorises the loops that call them, and the
// thrust backend's device code runs the very same operations, so the host and the device still
// round alike (the contraction of a multiply and an add into an FMA follows the build's
// -ffp-contract, as everywhere else in the kernels, kernels/simd.hpp).  Other element types (long
// double, user types) get the std:: function.
//
// Special values: exp(±inf) = inf / 0, exp(NaN) = NaN, exp overflows to inf above ln(max) and goes
// through the subnormals to 0 below ln(min) (the power of two is applied as two halves, so a
// subnormal result is rounded once); tanh(±inf) = ±1, erf(±inf) = ±1, NaN stays NaN.
//
// Method (every constant is written out below): x = n ln2 + r, |r| <= ln2/2, with n the nearest
// integer found by adding 1.5·2^p (p = 23 or 52) and ln2 split in two (Cody and Waite) so that n ln2
// has no rounding error; e^r - 1 = r + r²(1/2! + r/3! + ...), Taylor to degree 7 (float) or 13
// (double), whose remainder is below 2^-25 (float) and 2^-54 (double) on |r| <= ln2/2; 2^n is built
// in the exponent field.  Q's polynomials are truncated Chebyshev series of a 90-digit evaluation of
// erfc on 200 Chebyshev nodes (decimal arithmetic), of [0.75, 3.92] in float (degree 7, expanded in
// powers of t; erf(x) rounds to 1 beyond 3.92) and of [0.75, 6] in double (degree 16, expanded in
// powers of s, t's affine image onto [-1, 1]; beyond 5.93 erf rounds to 1).  Both regions are
// evaluated for every x and one is selected, as a vector does.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "nnlens/core/hd.hpp"

namespace nnlens::kernels {

namespace detail {
template <class T>
struct elementary_consts;

template <>
struct elementary_consts<float> {
  using bits = std::int32_t;
  static constexpr int mantissa = 23;
  static constexpr bits bias = 127;
  static constexpr float round = 12582912.0f;  // 1.5 · 2^23: (t + round) - round = t's nearest integer
  static constexpr float log2e = 1.44269504f;
  static constexpr float ln2_hi = 0.693145751953125f;  // 0x1.62e4p-1: n ln2_hi exact for |n| < 2^9
  static constexpr float ln2_lo = 1.42860677e-06f;
  static constexpr float lo = -104.0f;  // e^x rounds to 0 below -103.97
  static constexpr float hi = 89.0f;    // e^x overflows above ln FLT_MAX = 88.72
  static constexpr float erfc_x1 = 3.92f;        // erf(x) rounds to 1 beyond: the fit's upper end
};

template <>
struct elementary_consts<double> {
  using bits = std::int64_t;
  static constexpr int mantissa = 52;
  static constexpr bits bias = 1023;
  static constexpr double round = 6755399441055744.0;  // 1.5 · 2^52
  static constexpr double log2e = 1.4426950408889634;
  static constexpr double ln2_hi = 6.93147180369123816490e-01;  // 0x1.62e42feep-1: 32 bits
  static constexpr double ln2_lo = 1.9082149292705877e-10;
  static constexpr double lo = -746.0;  // e^x rounds to 0 below -745.13
  static constexpr double hi = 710.0;   // ln DBL_MAX = 709.78
  static constexpr double erfc_x1 = 6.0;                // erf(x) rounds to 1 beyond 5.93
  static constexpr double erfc_a = 0.25;                // t(6)
  static constexpr double erfc_b = 0.7272727272727273;  // t(0.75)
};

template <class T>
inline constexpr bool elementary_native = std::is_same_v<T, float> || std::is_same_v<T, double>;

/// c0 + x (c1 + x (c2 + ...)): Horner's scheme over literal coefficients (no array, so device code
/// reads them as immediates).
template <class T>
NNLENS_HD inline T horner(T, T c) { return c; }
template <class T, class... C>
NNLENS_HD inline T horner(T x, T c0, C... c) { return detail::horner(x, T(c)...) * x + c0; }

/// The integer held by k (integer-valued, |k| < 2^(p-1)), from its bits after adding 1.5·2^p.
template <class T>
NNLENS_HD inline typename elementary_consts<T>::bits integer_of(T k) {
  using C = elementary_consts<T>;
  return std::bit_cast<typename C::bits>(T(k + C::round)) - std::bit_cast<typename C::bits>(T(C::round));
}

/// 2^k for integer-valued k in [1 - bias, bias].
template <class T>
NNLENS_HD inline T pow2(T k) {
  using C = elementary_consts<T>;
  return std::bit_cast<T>(typename C::bits((integer_of(k) + C::bias) << C::mantissa));
}

/// x clamped to [lo, hi], NaN passing through.
template <class T>
NNLENS_HD inline T exp_clamp(T x) {
  using C = elementary_consts<T>;
  const T lo = C::lo, hi = C::hi;
  return x < lo ? lo : (x > hi ? hi : x);
}

/// x = n ln2 + r: n (integer-valued) and e^r - 1 = r + r² Σ r^k / (k + 2)!.
template <class T>
NNLENS_HD inline void exp_reduce(T x, T& n, T& p) {
  using C = elementary_consts<T>;
  n = T(x * C::log2e + C::round) - C::round;
  const T r = (x - n * C::ln2_hi) - n * C::ln2_lo;
  T q;
  if constexpr (std::is_same_v<T, float>)
    q = horner(r, 5.000000000e-01f, 1.666666667e-01f, 4.166666667e-02f, 8.333333333e-03f, 1.388888889e-03f,
               1.984126984e-04f);
  else
    q = horner(r, 0.5, 0.16666666666666666, 0.041666666666666664, 0.008333333333333333, 0.001388888888888889,
               0.0001984126984126984, 2.48015873015873e-05, 2.7557319223985893e-06, 2.755731922398589e-07,
               2.505210838544172e-08, 2.08767569878681e-09, 1.6059043836821613e-10);
  p = r + (r * r) * q;
}

/// n (integer-valued) split in two halves, each a power of two in range: 2^n = pow2(h) pow2(n - h).
template <class T>
NNLENS_HD inline T half_of(T n) {
  using C = elementary_consts<T>;
  return T(n * T(0.5) + C::round) - C::round;
}

/// x = n ln2 + r (x clamped first): n, e^r - 1 and the two halves of 2^n, s1 s2 = 2^n.
template <class T>
NNLENS_HD inline void exp_parts(T x, T& n, T& p, T& s1, T& s2) {
  exp_reduce(exp_clamp(x), n, p);
  const T h = half_of(n);
  s1 = pow2(h);
  s2 = pow2(T(n - h));
}
}  // namespace detail

/// e^x.
template <class T>
NNLENS_HD inline T exp(T x) {
  if constexpr (!detail::elementary_native<T>) {
    using std::exp;
    return exp(x);
  } else {
    T n, p, s1, s2;
    detail::exp_parts(x, n, p, s1, s2);
    return ((T(1) + p) * s1) * s2;
  }
}

/// e^x - 1, without the cancellation of exp(x) - 1 near 0; ±0 returns x.
template <class T>
NNLENS_HD inline T expm1(T x) {
  if constexpr (!detail::elementary_native<T>) {
    using std::expm1;
    return expm1(x);
  } else {
    T n, p, s1, s2;
    detail::exp_parts(x, n, p, s1, s2);
    const T big = ((T(1) + p) * s1) * s2 - T(1);  // n > p + 1: the -1 is below the result's rounding
    const T s = s1 * s2;                           // finite for n <= p + 1
    const T near = s * p + (s - T(1));             // 2^n (e^r - 1) + (2^n - 1)
    return n > T(detail::elementary_consts<T>::mantissa + 1) ? big : (x == T(0) ? x : near);
  }
}

/// tanh(x) = -m / (2 + m), m = expm1(-2|x|), with the sign of x; ±0 and NaN return x.
template <class T>
NNLENS_HD inline T tanh(T x) {
  if constexpr (!detail::elementary_native<T>) {
    using std::tanh;
    return tanh(x);
  } else {
    const T a = x < T(0) ? -x : x;
    const T m = kernels::expm1(T(-2) * a);
    const T t = -m / (T(2) + m);
    return x < T(0) ? -t : (x > T(0) ? t : x);
  }
}

/// erf(x); ±0 and NaN return x.
template <class T>
NNLENS_HD inline T erf(T x) {
  if constexpr (!detail::elementary_native<T>) {
    using std::erf;
    return erf(x);
  } else {
    using C = detail::elementary_consts<T>;
    const T a = x < T(0) ? -x : x;
    const T z = a * a;
    // |x| < 0.75: x Σ a_n x^{2n}, a_n = 2/√π (-1)^n / (n! (2n + 1))
    T small;
    if constexpr (std::is_same_v<T, float>)
      small = a * detail::horner(z, 1.128379167e+00f, -3.761263890e-01f, 1.128379167e-01f, -2.686617065e-02f,
                                 5.223977625e-03f, -8.548327023e-04f, 1.205533298e-04f, -1.492565036e-05f,
                                 1.646211437e-06f);
    else
      small = a * detail::horner(z, 1.1283791670955126, -0.37612638903183754, 0.11283791670955126,
                                 -0.026866170645131252, 0.005223977625442188, -0.0008548327023450853,
                                 0.00012055332981789664, -1.492565035840625e-05, 1.6462114365889248e-06,
                                 -1.6365844691234924e-07, 1.4807192815879218e-08, -1.2290555301717928e-09,
                                 9.422759064650411e-11, -6.7113668551641105e-12, 4.4632242632864775e-13);
    // otherwise 1 - e^{-x²} Q(min(|x|, x1)), Q = e^{x²} erfc(x) a polynomial in t = 1 / (1 + x/2)
    // (float) or in s in [-1, 1], the affine image of t (double)
    const T x1 = C::erfc_x1;
    const T aq = a < T(0.75) ? T(0.75) : (a > x1 ? x1 : a);
    const T t = T(1) / (T(1) + T(0.5) * aq);
    T q;
    if constexpr (std::is_same_v<T, float>) {
      q = detail::horner(t, -1.506977569e-04f, 2.848625183e-01f, 2.599923909e-01f, 3.467798829e-01f,
                         -1.015687585e-01f, 5.608414412e-01f, -4.696116745e-01f, 1.189073101e-01f);
    } else {
      const T s = t * T(2 / (C::erfc_b - C::erfc_a)) - T((C::erfc_a + C::erfc_b) / (C::erfc_b - C::erfc_a));
      q = detail::horner(s, 0.24581080438402747, 0.1986998921799298, 0.05382333879872732, 0.008545561146544218,
                         0.0002345901936253547, -0.0001701663138702614, -1.1849815194011628e-05,
                         5.476297968272092e-06, 2.148599054407896e-07, -2.3104638842141866e-07,
                         1.2371520483611677e-08, 9.180098459182774e-09, -1.87705609278055e-09,
                         -1.9026629161089653e-10, 1.376520231133327e-10, -7.712515071034432e-12,
                         -6.366462912410498e-12);
    }
    const T large = T(1) - kernels::exp(-z) * q;
    const T e = a < T(0.75) ? small : large;
    return x < T(0) ? -e : (x > T(0) ? e : x);
  }
}

}  // namespace nnlens::kernels
