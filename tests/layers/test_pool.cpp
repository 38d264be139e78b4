// MaxPool2D, AvgPool2D, GlobalAvgPool: forward against naive references over many geometries
// (rectangular windows, strides, symmetric and asymmetric padding, ceil_mode, count_include_pad
// both ways, batch > 1); backward against central finite differences (max pooling on inputs
// without near-ties); arg-max cache vs recomputation; tie and NaN rules; hand-computed cases;
// shape errors; dynamic forms.
#include <doctest/doctest.h>

#include <nnlens/nnlens.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

using namespace nnlens;

namespace {

using DMax = MaxPool2D<dyn>;
using DAvg = AvgPool2D<dyn>;

struct pool_case {
  std::size_t N, C, H, W;
  pool_geometry g;
};

std::string describe_pool(const pool_case& c) {
  const auto& g = c.g;
  return detail::concat("N", c.N, " C", c.C, " H", c.H, " W", c.W, " k", g.kh, "x", g.kw, " s", g.stride_h, ",",
                        g.stride_w, " p", g.pad_top, ",", g.pad_left, ",", g.pad_bottom, ",", g.pad_right, " ceil",
                        g.ceil_mode, " cip", g.count_include_pad);
}

/// Values far apart (>= 0.01) in random order: no ties, nothing an FD step of 1e-6 can reorder.
std::vector<double> distinct_values(std::size_t n, std::mt19937_64& r) {
  std::vector<double> v(n);
  std::iota(v.begin(), v.end(), 0.0);
  std::shuffle(v.begin(), v.end(), r);
  std::uniform_real_distribution<double> u(0.0, 0.005);
  for (auto& x : v) x = (x - double(n) / 2) * 0.01 + u(r);
  return v;
}

struct window_ref {
  double value;
  std::size_t arg;  // flat index into x
};

/// Output extents by the textbook formula (PyTorch's pooling_output_shape, per side padding).
std::size_t ref_out(std::size_t in, std::size_t k, std::size_t s, std::size_t plo, std::size_t phi, bool ceil_mode) {
  const long num = long(in + plo + phi) - long(k);
  if (num < 0) return 0;
  long o = (ceil_mode ? (num + long(s) - 1) / long(s) : num / long(s)) + 1;
  if (ceil_mode && (o - 1) * long(s) >= long(in + plo)) --o;
  return std::size_t(o);
}

/// Naive max pooling: scan the unclipped window row-major, skip padding (-inf), keep the first max.
/// Returns false if some window has no input element.
bool naive_max(const pool_case& c, const std::vector<double>& x, std::vector<window_ref>& out) {
  const auto& g = c.g;
  const std::size_t OH = ref_out(c.H, g.kh, g.stride_h, g.pad_top, g.pad_bottom, g.ceil_mode);
  const std::size_t OW = ref_out(c.W, g.kw, g.stride_w, g.pad_left, g.pad_right, g.ceil_mode);
  out.clear();
  for (std::size_t pl = 0; pl < c.N * c.C; ++pl)
    for (std::size_t oh = 0; oh < OH; ++oh)
      for (std::size_t ow = 0; ow < OW; ++ow) {
        bool any = false;
        window_ref best{0, 0};
        for (std::size_t i = 0; i < g.kh; ++i)
          for (std::size_t j = 0; j < g.kw; ++j) {
            const long h = long(oh * g.stride_h + i) - long(g.pad_top), w = long(ow * g.stride_w + j) - long(g.pad_left);
            if (h < 0 || w < 0 || h >= long(c.H) || w >= long(c.W)) continue;
            const std::size_t k = (pl * c.H + std::size_t(h)) * c.W + std::size_t(w);
            if (!any || x[k] > best.value) best = {x[k], k};
            any = true;
          }
        if (!any) return false;
        out.push_back(best);
      }
  return true;
}

/// Naive average pooling: count window positions inside the padded input and inside the input.
bool naive_avg(const pool_case& c, const std::vector<double>& x, std::vector<double>& y) {
  const auto& g = c.g;
  const std::size_t OH = ref_out(c.H, g.kh, g.stride_h, g.pad_top, g.pad_bottom, g.ceil_mode);
  const std::size_t OW = ref_out(c.W, g.kw, g.stride_w, g.pad_left, g.pad_right, g.ceil_mode);
  y.clear();
  for (std::size_t pl = 0; pl < c.N * c.C; ++pl)
    for (std::size_t oh = 0; oh < OH; ++oh)
      for (std::size_t ow = 0; ow < OW; ++ow) {
        double s = 0;
        std::size_t in_input = 0, in_padded = 0;
        for (std::size_t i = 0; i < g.kh; ++i)
          for (std::size_t j = 0; j < g.kw; ++j) {
            const long h = long(oh * g.stride_h + i) - long(g.pad_top), w = long(ow * g.stride_w + j) - long(g.pad_left);
            if (h < long(c.H + g.pad_bottom) && w < long(c.W + g.pad_right)) ++in_padded;  // h, w >= -pad always
            if (h < 0 || w < 0 || h >= long(c.H) || w >= long(c.W)) continue;
            s += x[(pl * c.H + std::size_t(h)) * c.W + std::size_t(w)];
            ++in_input;
          }
        if (in_input == 0) return false;
        y.push_back(s / double(g.count_include_pad ? in_padded : in_input));
      }
  return true;
}

template <class L, class T>
std::vector<T> pool_forward(const L& l, shape in, std::size_t batch, const std::vector<T>& x, bool with_cache,
                            std::vector<T>* cache_out = nullptr) {
  using Tr = layer_traits<L>;
  const shape out = Tr::output_shape(l, in);
  std::vector<T> y(batch * out.size(), T(-777));
  std::vector<T> cache(Tr::cache_size(&l, in, out) * batch + 1, T(-1));
  std::vector<T> scratch(Tr::scratch_size(&l, in, out, batch) + 1, T(std::nan("")));  // undefined contents
  Tr::forward(l, forward_args<T>{in, out, batch, x.data(), y.data(), with_cache ? cache.data() : nullptr,
                                 scratch.data()});
  if (cache_out) *cache_out = cache;
  return y;
}

template <class L>
std::vector<double> pool_backward(const L& l, shape in, std::size_t batch, const std::vector<double>& x,
                                  const std::vector<double>& dy, bool with_cache) {
  using Tr = layer_traits<L>;
  const shape out = Tr::output_shape(l, in);
  std::vector<double> cache;
  const auto y = pool_forward(l, in, batch, x, with_cache, &cache);
  std::vector<double> dx(x.size(), std::nan(""));
  std::vector<double> scratch(Tr::scratch_size(&l, in, out, batch) + 1, std::nan(""));
  Tr::backward(l,
               backward_args<double>{in, out, batch, x.data(), y.data(), dy.data(), with_cache ? cache.data() : nullptr,
                                     dx.data(), scratch.data()},
               nullptr);
  return dx;
}

bool near(double got, double want, double rel) { return std::abs(got - want) <= rel * std::max(1.0, std::abs(want)); }

pool_case random_pool_case(std::mt19937_64& r) {
  auto U = [&](std::size_t lo, std::size_t hi) { return std::uniform_int_distribution<std::size_t>(lo, hi)(r); };
  pool_geometry g;
  g.kh = U(1, 4);
  g.kw = U(1, 4);
  g.stride_h = U(1, 3);
  g.stride_w = U(1, 3);
  g.pad_top = U(0, g.kh - 1);
  g.pad_left = U(0, g.kw - 1);
  const bool deep = U(0, 5) == 0;  // sometimes padding so deep that a window lies entirely in it
  g.pad_bottom = U(0, g.kh - 1 + (deep ? 2 : 0));
  g.pad_right = U(0, g.kw - 1 + (deep ? 2 : 0));
  g.ceil_mode = U(0, 1) == 1;
  g.count_include_pad = U(0, 1) == 1;
  pool_case c{};
  c.g = g;
  c.N = U(1, 3);
  c.C = U(1, 3);
  c.H = std::max<long>(1, long(g.kh) - long(g.pad_top + g.pad_bottom)) + U(0, 6);
  c.W = std::max<long>(1, long(g.kw) - long(g.pad_left + g.pad_right)) + U(0, 6);
  return c;
}

std::vector<pool_case> fixed_pool_cases() {
  return {
      {2, 3, 8, 8, pool_geometry{.kh = 2}},                                       // LeNet's
      {2, 2, 7, 7, pool_geometry{.kh = 2}},                                       // odd input, floor
      {2, 2, 7, 7, pool_geometry{.kh = 2, .ceil_mode = true}},                    // odd input, ceil
      {1, 2, 7, 9, pool_geometry{.kh = 3, .stride_h = 2, .pad_top = 1}},          // overlapping, padded
      {2, 1, 6, 7, pool_geometry{.kh = 3, .kw = 2, .stride_h = 1, .stride_w = 2}},  // rectangular
      {2, 2, 5, 6, pool_geometry{.kh = 3, .kw = 3, .stride_h = 2, .stride_w = 2, .pad_top = 2, .pad_left = 0,
                                 .pad_bottom = 1, .pad_right = 2, .ceil_mode = true}},  // asymmetric + ceil
      {1, 1, 6, 6, pool_geometry{.kh = 3, .stride_h = 2, .pad_top = 1, .ceil_mode = true, .count_include_pad = false}},
      {3, 2, 4, 4, pool_geometry{.kh = 4, .kw = 1}},
      {2, 2, 5, 5, pool_geometry{.kh = 5}},  // window == input
      {2, 2, 9, 37, pool_geometry{.kh = 3, .stride_h = 2, .pad_top = 1}},  // wide rows: vector path + overlap
      {1, 3, 6, 19, pool_geometry{.kh = 2, .kw = 3, .stride_h = 1, .stride_w = 1, .ceil_mode = true}},
      {2, 2, 12, 40, pool_geometry{.kh = 2}},                        // whole-plane strided runs (20 x 6 outputs)
      {1, 2, 9, 36, pool_geometry{.kh = 3, .kw = 2, .stride_h = 2}},  // rows tile, stride_h 2 gathers rows
  };
}

}  // namespace

TEST_CASE("pools: compile-time shapes and messages") {
  static_assert(layer_traits<MaxPool2D<2>>::infer(shape(6, 28, 28)).out == shape(6, 14, 14));
  static_assert(layer_traits<MaxPool2D<3, 2, 1>>::infer(shape(2, 7, 8)).out == shape(2, 4, 4));
  static_assert(layer_traits<AvgPool2D<2, 1>>::infer(shape(1, 5, 5)).out == shape(1, 4, 4));
  using Ceil = MaxPool2DG<pool_geometry{.kh = 2, .ceil_mode = true}>;
  static_assert(layer_traits<Ceil>::infer(shape(3, 7, 7)).out == shape(3, 4, 4));
  static_assert(layer_traits<MaxPool2D<2>>::infer(shape(3, 7, 7)).out == shape(3, 3, 3));
  static_assert(!layer_traits<MaxPool2D<2>>::infer(shape(12)).ok());
  static_assert(!layer_traits<MaxPool2D<4>>::infer(shape(1, 3, 8)).ok());
  static_assert(!layer_traits<MaxPool2D<2, 2, 2>>::infer(shape(1, 8, 8)).ok());  // pad >= window
  using Deep = AvgPool2DG<pool_geometry{.kh = 2, .stride_h = 1, .pad_top = 0, .pad_left = 0, .pad_bottom = 3}>;
  static_assert(!layer_traits<Deep>::infer(shape(1, 2, 4)).ok());  // the last windows lie in the bottom padding
  static_assert(layer_traits<GlobalAvgPool>::infer(shape(7, 5, 3)).out == shape(7, 1, 1));
  static_assert(!layer_traits<GlobalAvgPool>::infer(shape(7)).ok());
  static_assert(std::is_same_v<MaxPool2D<dyn>, MaxPool2DG<pool_geometry_dyn>>);
  static_assert(std::is_same_v<dynamic_form_t<AvgPool2D<3, 2, 1, false>>, AvgPool2D<dyn>>);
  static_assert(MaxPool2D<3>::geometry.stride_w == 3 && AvgPool2D<3, 2, 1, false>::geometry.count_include_pad == false);
  static_assert(pool_geometry{.kh = 3, .stride_h = 2}.stride_w == 2);  // an explicit stride_h carries over
  static_assert(pool_geometry{.kh = 2, .kw = 3}.stride_w == 3);        // otherwise the window's width
  static_assert(pool_geometry{.kh = 2, .kw = 3, .stride_h = 1}.stride_w == 1);
  static_assert(layer_traits<MaxPool2D<2>>::cache_size(nullptr, shape(6, 28, 28), shape(6, 14, 14)) == 6 * 14 * 14);
  CHECK(std::string(layer_traits<MaxPool2D<2, 2, 2>>::infer(shape(1, 8, 8)).error).find("entirely in the padding") !=
        std::string::npos);
  CHECK(std::string(layer_traits<MaxPool2D<4>>::infer(shape(1, 3, 8)).error).find("larger than the padded input") !=
        std::string::npos);
}

TEST_CASE("MaxPool2D: hand-computed cases, ties and NaN") {
  const std::vector<double> x{1, 5, 2, 0,   //
                              3, 4, 8, 7,   //
                              -1, 0, 6, 6,  //
                              9, 2, 6, 1};
  MaxPool2D<2> p;
  auto y = pool_forward(p, shape(1, 4, 4), 1, x, true);
  CHECK(y == std::vector<double>{5, 8, 9, 6});
  auto dx = pool_backward(p, shape(1, 4, 4), 1, x, {1, 2, 3, 4}, true);
  // the window {6, 6, 6, 1} ties: dy goes to its first 6 (row-major)
  CHECK(dx == std::vector<double>{0, 1, 0, 0, 0, 0, 2, 0, 0, 0, 4, 0, 3, 0, 0, 0});

  // padding is -infinity: an all-negative input pools to negatives, never 0
  MaxPool2D<2, 2, 1> q;
  const std::vector<double> neg{-1, -2, -3, -4, -5, -6, -7, -8, -9};
  CHECK(pool_forward(q, shape(1, 3, 3), 1, neg, false) == std::vector<double>{-1, -2, -4, -5});

  // overlapping windows with ties: 3x3 window, stride 1, pad 1 over [[1,3],[3,2]]: every window sees
  // the whole input; the first maximum is the 3 at (0, 1)
  MaxPool2D<3, 1, 1> o;
  const std::vector<double> t{1, 3, 3, 2};
  CHECK(pool_forward(o, shape(1, 2, 2), 1, t, false) == std::vector<double>{3, 3, 3, 3});
  CHECK(pool_backward(o, shape(1, 2, 2), 1, t, {1, 2, 4, 8}, false) == std::vector<double>{0, 15, 0, 0});
  CHECK(pool_backward(o, shape(1, 2, 2), 1, t, {1, 2, 4, 8}, true) == std::vector<double>{0, 15, 0, 0});

  // NaN wins, the first NaN in row-major order
  const double nan = std::numeric_limits<double>::quiet_NaN();
  MaxPool2D<2> n;
  const std::vector<double> xn{1, nan, nan, 2};
  auto yn = pool_forward(n, shape(1, 2, 2), 1, xn, false);
  CHECK(std::isnan(yn[0]));
  auto dn = pool_backward(n, shape(1, 2, 2), 1, xn, {5}, false);
  CHECK(dn == std::vector<double>{0, 5, 0, 0});

  // the cached arg-max is the index in the plane
  std::vector<double> cache;
  pool_forward(p, shape(1, 4, 4), 1, x, true, &cache);
  CHECK(cache[0] == 1);
  CHECK(cache[1] == 6);
  CHECK(cache[2] == 12);
  CHECK(cache[3] == 10);
  CHECK(detail::index_exact_in<float>(std::size_t(1) << 24));
  CHECK(!detail::index_exact_in<float>((std::size_t(1) << 24) + 1));
}

TEST_CASE("AvgPool2D: hand-computed cases (count_include_pad, ceil_mode)") {
  const std::vector<double> x{1, 2, 3, 4, 5, 6, 7, 8, 9};
  // k2 s2 p1: windows start at -1 and 1
  AvgPool2D<2, 2, 1, true> a;
  CHECK(pool_forward(a, shape(1, 3, 3), 1, x, false) == std::vector<double>{0.25, 1.25, 2.75, 7});
  AvgPool2D<2, 2, 1, false> b;
  CHECK(pool_forward(b, shape(1, 3, 3), 1, x, false) == std::vector<double>{1, 2.5, 5.5, 7});
  // ceil_mode: the last windows hang past the input; with no padding they count only the input
  // (PyTorch: avg_pool2d(arange(1,10).view(1,1,3,3), 2, ceil_mode=True) = [[3, 4.5], [7.5, 9]])
  using C = AvgPool2DG<pool_geometry{.kh = 2, .ceil_mode = true}>;
  CHECK(pool_forward(C{}, shape(1, 3, 3), 1, x, false) == std::vector<double>{3, 4.5, 7.5, 9});
  auto dx = pool_backward(C{}, shape(1, 3, 3), 1, x, {4, 2, 2, 1}, false);
  CHECK(dx == std::vector<double>{1, 1, 1, 1, 1, 1, 1, 1, 1});
  // padded + ceil: k3 s2 p1 over 4x4 gives 3x3 windows; the corner one covers rows/columns [3, 6):
  // input 3, padding 4, and 5 beyond the padding: divisor 2*2 (count_include_pad) or 1*1
  const std::vector<double> x4{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  using P = AvgPool2DG<pool_geometry{.kh = 3, .stride_h = 2, .pad_top = 1, .ceil_mode = true, .count_include_pad = true}>;
  using Q = AvgPool2DG<pool_geometry{.kh = 3, .stride_h = 2, .pad_top = 1, .ceil_mode = true, .count_include_pad = false}>;
  auto yp = pool_forward(P{}, shape(1, 4, 4), 1, x4, false);
  auto yq = pool_forward(Q{}, shape(1, 4, 4), 1, x4, false);
  REQUIRE(yp.size() == 9);
  CHECK(yp[8] == 4.0);   // 16 / 4
  CHECK(yq[8] == 16.0);  // 16 / 1
  CHECK(yp[4] == 99.0 / 9.0);  // rows/columns 1..3
  CHECK(yp[0] == 14.0 / 9.0);  // (1 + 2 + 5 + 6) / 9
  CHECK(yq[0] == 14.0 / 4.0);
}

TEST_CASE("GlobalAvgPool: hand-computed and backward") {
  GlobalAvgPool g;
  const std::vector<double> x{1, 2, 3, 4, 10, 20, 30, 40, -1, -1, -1, -1};  // batch 3, C 1, 2x2 ... as [3,1,2,2]
  CHECK(pool_forward(g, shape(1, 2, 2), 3, x, false) == std::vector<double>{2.5, 25, -1});
  CHECK(pool_forward(g, shape(3, 2, 2), 1, x, false) == std::vector<double>{2.5, 25, -1});
  CHECK(pool_backward(g, shape(2, 2, 3), 1, x, {6, 12}, false) ==
        std::vector<double>{1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2});
}

TEST_CASE_TEMPLATE("MaxPool2D: without a cache, the values kernel gives the arg-max kernels' bits on ties of +0 and -0, NaNs and -inf", T, float, double) {
  // windows full of equal values whose bits differ: the first in row-major order must win
  std::mt19937_64 r(23);
  const T nan1 = std::numeric_limits<T>::quiet_NaN(), inf = std::numeric_limits<T>::infinity();
  T nan2 = nan1;
  {  // a second NaN with another payload
    unsigned char b[sizeof(T)];
    std::memcpy(b, &nan2, sizeof(T));
    b[0] ^= 1;
    std::memcpy(&nan2, b, sizeof(T));
  }
  const T pool[] = {T(0), T(-0.0), nan1, nan2, -inf, T(1), T(-1)};
  for (const pool_geometry& g : {pool_geometry{.kh = 3, .stride_h = 2, .pad_top = 1}, pool_geometry{.kh = 2},
                                pool_geometry{.kh = 3, .stride_h = 1, .pad_top = 1},
                                pool_geometry{.kh = 3, .kw = 2, .stride_h = 3, .stride_w = 1, .pad_top = 1, .pad_left = 0},
                                pool_geometry{.kh = 3, .stride_h = 2, .pad_top = 0, .ceil_mode = true},
                                pool_geometry{.kh = 5, .stride_h = 3, .pad_top = 2}}) {
    for (const std::size_t hw : {std::size_t(7), std::size_t(40), std::size_t(70), std::size_t(113)}) {
      DMax mp;
      mp.geometry = g;
      const shape in(3, hw, hw + 1);
      std::vector<T> x(2 * in.size());
      std::uniform_int_distribution<int> pick(0, 6), sparse(0, 9);
      for (auto& v : x) v = sparse(r) < 2 ? pool[pick(r)] : (sparse(r) < 5 ? T(0) : T(-0.0));
      const auto with = pool_forward(mp, in, 2, x, true), without = pool_forward(mp, in, 2, x, false);
      CAPTURE(g.kh);
      CAPTURE(hw);
      REQUIRE(with.size() == without.size());
      CHECK(std::memcmp(with.data(), without.data(), with.size() * sizeof(T)) == 0);
    }
  }
}

TEST_CASE("MaxPool2D / AvgPool2D: forward matches the naive references on many geometries") {
  std::mt19937_64 r(17);
  auto cases = fixed_pool_cases();
  for (int i = 0; i < 150; ++i) cases.push_back(random_pool_case(r));
  std::size_t run = 0, rejected = 0;
  for (const auto& c : cases) {
    CAPTURE(describe_pool(c));
    const shape in(c.C, c.H, c.W);
    std::normal_distribution<double> nd(0, 1);
    std::vector<double> x(c.N * in.size());
    const bool ties = (run + rejected) % 2 == 1;  // every other case: small integers, many ties
    for (auto& v : x) v = ties ? std::floor(2 * nd(r)) : nd(r);
    DMax mp;
    mp.geometry = c.g;
    mp.geometry.count_include_pad = true;
    DAvg ap;
    ap.geometry = c.g;
    std::vector<window_ref> mref;
    std::vector<double> aref;
    const bool ok = naive_max(c, x, mref);
    REQUIRE(ok == naive_avg(c, x, aref));
    if (!ok) {  // a window entirely in the padding: both layers refuse the geometry
      CHECK_THROWS_AS(layer_traits<DMax>::output_shape(mp, in), shape_error);
      CHECK_THROWS_AS(layer_traits<DAvg>::output_shape(ap, in), shape_error);
      ++rejected;
      continue;
    }
    const shape out = layer_traits<DMax>::output_shape(mp, in);
    REQUIRE(out == shape(c.C, ref_out(c.H, c.g.kh, c.g.stride_h, c.g.pad_top, c.g.pad_bottom, c.g.ceil_mode),
                         ref_out(c.W, c.g.kw, c.g.stride_w, c.g.pad_left, c.g.pad_right, c.g.ceil_mode)));
    const auto ym = pool_forward(mp, in, c.N, x, true);
    const auto ya = pool_forward(ap, in, c.N, x, false);
    REQUIRE(ym.size() == mref.size());
    REQUIRE(ya.size() == aref.size());
    for (std::size_t k = 0; k < ym.size(); ++k) REQUIRE(ym[k] == mref[k].value);
    // without a cache, the values kernel (kernels/max_pool_values.hpp): the same bits
    const auto yv = pool_forward(mp, in, c.N, x, false);
    REQUIRE(std::memcmp(yv.data(), ym.data(), ym.size() * sizeof(double)) == 0);
    for (std::size_t k = 0; k < ya.size(); ++k) REQUIRE(near(ya[k], aref[k], 1e-14));
    // backward against the naive arg-max: the dy of each output lands on its reference arg-max
    std::vector<double> dy(ym.size());
    for (auto& v : dy) v = nd(r);
    std::vector<double> dref(x.size(), 0.0);
    for (std::size_t k = 0; k < dy.size(); ++k) dref[mref[k].arg] += dy[k];
    const auto d1 = pool_backward(mp, in, c.N, x, dy, true);
    const auto d2 = pool_backward(mp, in, c.N, x, dy, false);
    for (std::size_t k = 0; k < x.size(); ++k) {
      REQUIRE(near(d1[k], dref[k], 1e-14));
      REQUIRE(d1[k] == d2[k]);  // cached arg-max == recomputed arg-max
    }
    // float (twice the vector lanes): values and cached arg-max against the reference on the
    // float-rounded input
    std::vector<float> xf(x.begin(), x.end());
    std::vector<window_ref> fref;
    REQUIRE(naive_max(c, std::vector<double>(xf.begin(), xf.end()), fref));
    std::vector<float> fcache;
    const auto yf = pool_forward(mp, in, c.N, xf, true, &fcache);
    for (std::size_t k = 0; k < yf.size(); ++k) {
      REQUIRE(double(yf[k]) == fref[k].value);
      REQUIRE(std::size_t(fcache[k]) == fref[k].arg % (c.H * c.W));
    }
    {  // float backward, with and without the cache: dy lands on the reference arg-max
      using Tr = layer_traits<DMax>;
      std::vector<float> dyf(yf.size()), dxf(xf.size());
      for (std::size_t k = 0; k < dyf.size(); ++k) dyf[k] = float(k % 5) + 0.5f;
      std::vector<float> want(xf.size(), 0.0f);
      for (std::size_t k = 0; k < dyf.size(); ++k) want[fref[k].arg] += dyf[k];
      std::vector<float> scratch(Tr::scratch_size(&mp, in, out, c.N) + 1, std::nanf(""));
      for (float* cp : {fcache.data(), static_cast<float*>(nullptr)}) {
        Tr::backward(mp, backward_args<float>{in, out, c.N, xf.data(), yf.data(), dyf.data(), cp, dxf.data(), scratch.data()},
                     nullptr);
        REQUIRE(dxf == want);
      }
    }
    ++run;
  }
  MESSAGE("pool geometries checked: " << run << ", rejected (window in padding): " << rejected);
  CHECK(run > 100);
  CHECK(rejected > 0);
}

TEST_CASE("pools: backward matches central finite differences") {
  std::mt19937_64 r(23);
  auto cases = fixed_pool_cases();
  for (int i = 0; i < 40; ++i) cases.push_back(random_pool_case(r));
  const double h = 1e-6, tol = 1e-6;
  double worst = 0;
  std::size_t checked = 0;
  auto fd_check = [&](const auto& layer, shape in, std::size_t N, std::vector<double> x) {
    using L = std::decay_t<decltype(layer)>;
    const shape out = layer_traits<L>::output_shape(layer, in);
    std::normal_distribution<double> nd(0, 1);
    std::vector<double> cw(N * out.size());
    for (auto& v : cw) v = nd(r);
    auto loss = [&] {
      const auto y = pool_forward(layer, in, N, x, false);
      double s = 0;
      for (std::size_t k = 0; k < y.size(); ++k) s += cw[k] * y[k];
      return s;
    };
    const auto dx = pool_backward(layer, in, N, x, cw, true);
    for (std::size_t k = 0; k < x.size(); ++k) {
      const double v0 = x[k];
      x[k] = v0 + h;
      const double lp = loss();
      x[k] = v0 - h;
      const double lm = loss();
      x[k] = v0;
      const double fd = (lp - lm) / (2 * h);
      worst = std::max(worst, std::abs(fd - dx[k]) / std::max(1.0, std::abs(dx[k])));
      ++checked;
      REQUIRE(near(fd, dx[k], tol));
    }
  };
  for (const auto& c : cases) {
    CAPTURE(describe_pool(c));
    const shape in(c.C, c.H, c.W);
    DMax mp;
    mp.geometry = c.g;
    mp.geometry.count_include_pad = true;
    DAvg ap;
    ap.geometry = c.g;
    std::vector<window_ref> unused;
    if (!naive_max(c, std::vector<double>(c.N * in.size()), unused)) continue;
    fd_check(mp, in, c.N, distinct_values(c.N * in.size(), r));
    fd_check(ap, in, c.N, distinct_values(c.N * in.size(), r));
    fd_check(GlobalAvgPool{}, in, c.N, distinct_values(c.N * in.size(), r));
  }
  MESSAGE("pool finite differences: " << checked << " derivatives, worst relative error " << worst);
  CHECK(worst < tol);
}

TEST_CASE("pools: output_shape and DynamicNetwork name what is wrong") {
  DMax m;
  m.geometry = pool_geometry{.kh = 2, .stride_h = 1, .pad_top = 0, .pad_left = 0, .pad_bottom = 3};
  auto message = [](auto&& l, shape in) -> std::string {
    try {
      layer_traits<std::decay_t<decltype(l)>>::output_shape(l, in);
    } catch (const shape_error& e) {
      return e.what();
    }
    return "";
  };
  CHECK(message(m, shape(1, 2, 4)).find("MaxPool2D: a pooling window lies entirely in the padding") != std::string::npos);
  m.geometry.pad_bottom = 1;
  CHECK(message(m, shape(1, 2, 4)).empty());
  CHECK(message(m, shape(5)).find("MaxPool2D needs an image input") != std::string::npos);
  DAvg a;
  a.geometry = pool_geometry{.kh = 5};
  CHECK(message(a, shape(1, 4, 9)).find("AvgPool2D: the 5x5 window is larger than the padded input [1,4,9]") !=
        std::string::npos);
  a.geometry.stride_w = 0;
  CHECK(message(a, shape(1, 9, 9)).find("strides must be positive") != std::string::npos);
  a.geometry = pool_geometry_dyn;
  CHECK(message(a, shape(1, 9, 9)).find("dyn field") != std::string::npos);
  CHECK(message(GlobalAvgPool{}, shape(4)).find("GlobalAvgPool needs an image input") != std::string::npos);

  DynamicNetwork d(shape(2, 6, 6));
  d.add(MaxPool2D<2>{});  // -> [2,3,3]
  std::string what;
  try {
    d.add(AvgPool2D<4>{});
  } catch (const shape_error& e) {
    what = e.what();
  }
  CHECK(what.find("layer 1 (AvgPool2D)") != std::string::npos);
  CHECK(d.size() == 1);
  d.add(AvgPool2D<3, 1, 1, false>{}).add(GlobalAvgPool{}).add(Flatten{});
  CHECK(d.output_shape() == shape(2));
}

TEST_CASE("pools: dynamic forms round-trip and from_dynamic rejects another geometry") {
  using Net = Sequential<Input<2, 8, 8>, MaxPool2D<2>, AvgPool2D<3, 1, 1, false>, GlobalAvgPool, Flatten>;
  Net net;
  auto d = to_dynamic(net);
  CHECK(std::get<MaxPool2D<dyn>>(d.layer(0)).geometry == MaxPool2D<2>::geometry);
  CHECK(std::get<AvgPool2D<dyn>>(d.layer(1)).geometry.count_include_pad == false);
  xt::xarray<float> x = xt::xarray<float>::from_shape({3, 2, 8, 8});
  for (std::size_t i = 0; i < x.size(); ++i) x.data()[i] = float((i * 37) % 101) / 7.0f;
  auto y1 = forward(net, x);
  auto y2 = forward(d, x);
  auto y3 = forward(from_dynamic<Net>(d), x);
  for (std::size_t i = 0; i < y1.size(); ++i) {
    CHECK(y1.data()[i] == y2.data()[i]);
    CHECK(y1.data()[i] == y3.data()[i]);
  }
  auto message = [&] {
    try {
      from_dynamic<Net>(d);
    } catch (const shape_error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  std::get<MaxPool2D<dyn>>(d.layer(0)).geometry.ceil_mode = true;  // same shapes for an even input
  d.validate();
  CHECK(message().find("layer 0 (MaxPool2D): MaxPool2D geometry differs") != std::string::npos);
  std::get<MaxPool2D<dyn>>(d.layer(0)).geometry.ceil_mode = false;
  std::get<AvgPool2D<dyn>>(d.layer(1)).geometry.count_include_pad = true;
  CHECK(message().find("layer 1 (AvgPool2D): AvgPool2D geometry differs") != std::string::npos);
}
