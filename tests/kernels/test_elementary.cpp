// kernels/elementary.hpp: exp, expm1, tanh and erf against long double's libm, in ulps of the result,
// their special values, and the same bits from a vectorised loop and from one call per element.
#include <doctest/doctest.h>

#include <nnlens/kernels/elementary.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace {

/// |got - ref| in units of the last place of ref rounded to T (the smallest subnormal at 0).
template <class T>
double ulps(T got, long double ref) {
  const T r = static_cast<T>(ref);
  if (std::isinf(r) || std::isinf(got)) return r == got ? 0.0 : 1e30;
  const T a = std::fabs(r);
  T u = std::nextafter(a, std::numeric_limits<T>::infinity()) - a;
  if (u == T(0)) u = std::numeric_limits<T>::denorm_min();
  return static_cast<double>(std::fabs(static_cast<long double>(got) - ref) / static_cast<long double>(u));
}

/// The largest error over n uniform samples of [lo, hi].
template <class T, class F, class R>
double worst_ulps(F f, R ref, double lo, double hi, int n = 100000) {
  std::mt19937_64 g(7);
  std::uniform_real_distribution<double> d(lo, hi);
  double worst = 0;
  for (int i = 0; i < n; ++i) {
    const T x = static_cast<T>(d(g));
    worst = std::max(worst, ulps<T>(f(x), ref(static_cast<long double>(x))));
  }
  return worst;
}

// One call per element through a function the optimiser may not inline, against the loop below.
template <class T>
[[gnu::noinline]] T scalar_erf(T x) { return nnlens::kernels::erf(x); }
template <class T>
[[gnu::noinline]] T scalar_tanh(T x) { return nnlens::kernels::tanh(x); }
template <class T>
[[gnu::noinline]] T scalar_exp(T x) { return nnlens::kernels::exp(x); }

template <class T>
bool same_bits(T a, T b) { return std::memcmp(&a, &b, sizeof(T)) == 0; }

}  // namespace

TEST_CASE_TEMPLATE("elementary functions: within a few ulps of long double's libm", T, float, double) {
  namespace k = nnlens::kernels;
  auto e = [](T x) { return k::exp(x); };
  auto re = [](long double x) { return std::exp(x); };
  const double lo_exp = std::is_same_v<T, float> ? -103.0 : -744.0, hi_exp = std::is_same_v<T, float> ? 88.7 : 709.7;
  CHECK(worst_ulps<T>(e, re, -1, 1) <= 1.1);
  CHECK(worst_ulps<T>(e, re, lo_exp, hi_exp) <= 1.1);  // subnormal results included
  auto m = [](T x) { return k::expm1(x); };
  auto rm = [](long double x) { return std::expm1(x); };
  CHECK(worst_ulps<T>(m, rm, -1e-4, 1e-4) <= 1.0);
  CHECK(worst_ulps<T>(m, rm, -2, 2) <= 2.0);
  CHECK(worst_ulps<T>(m, rm, -80, 80) <= 2.0);
  auto t = [](T x) { return k::tanh(x); };
  auto rt = [](long double x) { return std::tanh(x); };
  CHECK(worst_ulps<T>(t, rt, -1e-4, 1e-4) <= 2.0);
  CHECK(worst_ulps<T>(t, rt, -3, 3) <= 3.0);
  CHECK(worst_ulps<T>(t, rt, -40, 40) <= 3.0);
  auto f = [](T x) { return k::erf(x); };
  auto rf = [](long double x) { return std::erf(x); };
  CHECK(worst_ulps<T>(f, rf, -1e-4, 1e-4) <= 3.0);
  CHECK(worst_ulps<T>(f, rf, -1, 1) <= 4.0);  // both sides of the switch at |x| = 0.75
  CHECK(worst_ulps<T>(f, rf, -8, 8) <= 4.0);
}

TEST_CASE_TEMPLATE("elementary functions: special values", T, float, double) {
  namespace k = nnlens::kernels;
  const T inf = std::numeric_limits<T>::infinity(), nan = std::numeric_limits<T>::quiet_NaN();
  const T tiny = std::numeric_limits<T>::denorm_min();
  CHECK(k::exp(T(0)) == T(1));
  CHECK(k::exp(inf) == inf);
  CHECK(k::exp(-inf) == T(0));
  CHECK(k::exp(T(1e4)) == inf);
  CHECK(k::exp(T(-1e4)) == T(0));
  CHECK(std::isnan(k::exp(nan)));
  CHECK(k::expm1(-inf) == T(-1));
  CHECK(k::expm1(inf) == inf);
  CHECK(k::expm1(tiny) == tiny);
  CHECK(std::signbit(k::expm1(-T(0))));
  for (T x : {T(0), -T(0), tiny, -tiny, T(1e-30)}) {  // odd functions keep x and its sign near 0
    CHECK(same_bits(k::tanh(x), x));
    CHECK(same_bits(k::erf(x), std::erf(x)));
  }
  CHECK(k::tanh(inf) == T(1));
  CHECK(k::tanh(-inf) == T(-1));
  CHECK(k::tanh(T(-1e4)) == T(-1));
  CHECK(k::erf(inf) == T(1));
  CHECK(k::erf(T(-1e4)) == T(-1));
  CHECK(std::isnan(k::tanh(nan)));
  CHECK(std::isnan(k::erf(nan)));
  // e^x rounds to 0 exactly where libm's does, through the subnormals
  for (T x = T(std::is_same_v<T, float> ? -102 : -743); x > T(std::is_same_v<T, float> ? -106 : -747); x -= T(0.125))
    CHECK(ulps<T>(k::exp(x), std::exp(static_cast<long double>(x))) <= 1.0);
}

TEST_CASE_TEMPLATE("elementary functions: a vectorised loop and one call per element give the same bits", T, float,
                   double) {
  std::vector<T> x(4099), y_erf(x.size()), y_tanh(x.size()), y_exp(x.size());
  std::mt19937_64 g(3);
  std::uniform_real_distribution<double> d(-9, 9);
  for (auto& v : x) v = static_cast<T>(d(g));
  x[5] = T(0.75);
  x[6] = T(-0.75);
  x[7] = std::nextafter(T(0.75), T(0));
  for (std::size_t i = 0; i < x.size(); ++i) y_erf[i] = nnlens::kernels::erf(x[i]);
  for (std::size_t i = 0; i < x.size(); ++i) y_tanh[i] = nnlens::kernels::tanh(x[i]);
  for (std::size_t i = 0; i < x.size(); ++i) y_exp[i] = nnlens::kernels::exp(x[i] * T(10));
  std::size_t differ = 0;
  for (std::size_t i = 0; i < x.size(); ++i)
    differ += !same_bits(y_erf[i], scalar_erf(x[i])) + !same_bits(y_tanh[i], scalar_tanh(x[i])) +
              !same_bits(y_exp[i], scalar_exp(T(x[i] * T(10))));
  CHECK(differ == 0);
}
