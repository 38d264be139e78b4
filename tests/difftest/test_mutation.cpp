// DFlare's mutation operators (difftest/mutation.hpp) on hand-made images.
#include <doctest/doctest.h>

#include <nnlens/difftest/mutation.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

using namespace nnlens;
using namespace nnlens::difftest;

namespace {
std::vector<float> random_image(image_shape s, std::uint64_t seed) {
  std::mt19937_64 r(seed);
  std::uniform_int_distribution<int> v(0, 255);
  std::vector<float> x(s.size());
  for (auto& e : x) e = float(v(r));
  return x;
}
bool all_pixels(const std::vector<float>& x) {
  for (float v : x)
    if (!(v >= 0.f && v <= 255.f && v == std::floor(v))) return false;
  return true;
}
std::size_t changed(const std::vector<float>& a, const std::vector<float>& b) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < a.size(); ++i) n += a[i] != b[i];
  return n;
}
}  // namespace

TEST_CASE("mutation: every operator keeps integer pixels in [0,255] and is deterministic for a seed") {
  for (image_shape s : {image_shape{1, 28, 28}, image_shape{3, 8, 5}, image_shape{1, 1, 1}, image_shape{3, 2, 2}}) {
    for (mutation op : reference_pool) {
      for (std::uint64_t seed = 0; seed < 12; ++seed) {
        auto x = random_image(s, seed), y = x;
        std::mt19937_64 r1(seed), r2(seed);
        mutate(op, x, s, r1);
        mutate(op, y, s, r2);
        CAPTURE(to_string(op));
        CHECK(x.size() == s.size());
        CHECK(all_pixels(x));
        CHECK(x == y);
      }
    }
  }
}

TEST_CASE("mutation: noise on extreme images is clipped") {
  const image_shape s{1, 10, 10};
  mutation_options o;
  o.gaussian_sigma = 50;  // large: about half the elements leave [0,255] before clipping
  for (float base : {0.f, 255.f}) {
    std::vector<float> x(s.size(), base);
    std::mt19937_64 r(3);
    gaussian_noise(x, s, r, o);
    CHECK(all_pixels(x));
    std::size_t at_base = 0;
    for (float v : x) at_base += v == base;
    CHECK(at_base > 20);  // clipped back onto the bound
  }
  std::vector<float> bright(s.size(), 250.f), black(s.size(), 0.f);
  std::mt19937_64 r(5);
  for (int i = 0; i < 20; ++i) {
    multiplicative_noise(bright, s, r);
    multiplicative_noise(black, s, r);
    CHECK(all_pixels(bright));
  }
  CHECK(black == std::vector<float>(s.size(), 0.f));  // x + x n = 0
}

TEST_CASE("mutation: gaussian noise (sigma sqrt(0.1)) truncates: about half the pixels drop by one") {
  const image_shape s{1, 50, 50};
  std::vector<float> x(s.size(), 100.f), y = x;
  std::mt19937_64 r(1), r2(1);
  gaussian_noise(x, s, r);
  std::size_t down = 0, same = 0;
  for (float v : x) down += v == 99.f, same += v == 100.f;
  CHECK(down + same >= s.size() - 20);  // |n| > 1 has probability 0.16%
  CHECK(double(down) / double(s.size()) == doctest::Approx(0.5).epsilon(0.1));
  mutation_options o;
  o.round_noise = true;
  gaussian_noise(y, s, r2, o);
  std::size_t kept = 0;
  for (float v : y) kept += v == 100.f;
  CHECK(double(kept) / double(s.size()) > 0.85);  // P(|n| < 0.5) = 0.886
}

TEST_CASE("mutation: pixel_change alters at most 9 elements, each to an integer in [0,255]") {
  const image_shape s{3, 6, 6};
  std::size_t ks[10] = {};
  for (std::uint64_t seed = 0; seed < 400; ++seed) {
    auto x = random_image(s, seed), y = x;
    std::mt19937_64 r(seed);
    const std::size_t k = pixel_change(y, s, r);
    CHECK(k <= 9);
    CHECK(changed(x, y) <= k);
    CHECK(all_pixels(y));
    ++ks[k];
  }
  for (std::size_t k = 0; k < 10; ++k) CHECK(ks[k] > 15);  // k ~ U{0..9}: every value occurs
}

TEST_CASE("mutation: salt and pepper sets at most 2 ceil(0.002 size) elements, only to 0 or 255") {
  for (image_shape s : {image_shape{1, 28, 28}, image_shape{3, 32, 32}}) {
    const std::size_t bound = 2 * std::size_t(std::ceil(0.002 * double(s.size())));
    for (std::uint64_t seed = 0; seed < 50; ++seed) {
      std::vector<float> x(s.size(), 128.f);
      std::mt19937_64 r(seed);
      salt_and_pepper(x, s, r);
      std::size_t n = 0;
      for (float v : x) {
        if (v != 128.f) {
          ++n;
          CHECK((v == 0.f || v == 255.f));
        }
      }
      CHECK(n <= bound);
      CHECK(n >= 1);
    }
  }
  // every coordinate is reachable, including the last row, column and channel (the reference's
  // randint(0, dim - 1) never is)
  const image_shape s{3, 4, 4};
  std::vector<int> hits(s.size(), 0);
  for (std::uint64_t seed = 0; seed < 3000; ++seed) {
    std::vector<float> x(s.size(), 128.f);
    std::mt19937_64 r(seed);
    salt_and_pepper(x, s, r);
    for (std::size_t i = 0; i < x.size(); ++i) hits[i] += x[i] != 128.f;
  }
  for (int h : hits) CHECK(h > 0);
}

TEST_CASE("mutation: blurs of size 1 are the identity; a constant image is unchanged by every blur") {
  const image_shape s{3, 7, 9};
  const auto x = random_image(s, 11);
  auto a = x, b = x, c = x;
  box_blur(a, s, 1);
  gaussian_blur(b, s, 1);
  median_blur(c, s, 1);
  CHECK(a == x);
  CHECK(b == x);
  CHECK(c == x);
  for (std::size_t k = 1; k <= 7; ++k) {
    std::vector<float> k1(s.size(), 77.f), k2 = k1, k3 = k1;
    box_blur(k1, s, k);
    CHECK(k1 == k2);
    if (k % 2) {
      gaussian_blur(k2, s, k);
      median_blur(k3, s, k);
      CHECK(k2 == k1);
      CHECK(k3 == k1);
    }
  }
  CHECK_THROWS_AS(gaussian_blur(a, s, 2), value_error);
  CHECK_THROWS_AS(median_blur(a, s, 4), value_error);
  CHECK_THROWS_AS(box_blur(a, image_shape{1, 2, 2}, 3), shape_error);
}

TEST_CASE("mutation: box blur by hand (REFLECT_101 border, anchor k/2 for even k)") {
  const image_shape s{1, 3, 3};
  std::vector<float> x = {0, 0, 0, 0, 9, 0, 0, 0, 0};
  box_blur(x, s, 3);
  CHECK(x == std::vector<float>{4, 2, 4, 2, 1, 2, 4, 2, 4});
  // k = 2 on a single row: window [i-1, i]; the only row reflects onto itself
  std::vector<float> r = {0, 4, 8, 12};
  box_blur(r, image_shape{1, 1, 4}, 2);
  CHECK(r == std::vector<float>{2, 2, 6, 10});
  // rounding: (0 + 3) / 2 = 1.5 -> 2 (half to even), (3 + 4) / 2 = 3.5 -> 4
  std::vector<float> h = {0, 3, 4};
  box_blur(h, image_shape{1, 1, 3}, 2);
  CHECK(h == std::vector<float>{2, 2, 4});
}

TEST_CASE("mutation: gaussian blur by hand (OpenCV's sigma = 0 tables)") {
  CHECK(gaussian_kernel(5) == std::vector<double>{0.0625, 0.25, 0.375, 0.25, 0.0625});
  std::vector<float> r = {0, 8, 0};
  gaussian_blur(r, image_shape{1, 1, 3}, 3);
  CHECK(r == std::vector<float>{4, 4, 4});
  std::vector<float> p = {0, 0, 16, 0, 0};
  gaussian_blur(p, image_shape{1, 1, 5}, 5);  // 16 * {1,4,6,4,1}/16, reflected at the ends
  CHECK(p == std::vector<float>{2, 4, 6, 4, 2});
  const auto g9 = gaussian_kernel(9);
  double sum = 0;
  for (double v : g9) sum += v;
  CHECK(sum == doctest::Approx(1.0));
  CHECK(g9[4] > g9[3]);
}

TEST_CASE("mutation: median blur by hand (REPLICATE border)") {
  std::vector<float> r = {0, 9, 9};
  median_blur(r, image_shape{1, 1, 3}, 3);  // reflection would give 9 at the left end
  CHECK(r == std::vector<float>{0, 9, 9});
  std::vector<float> spike = {0, 0, 0, 0, 255, 0, 0, 0, 0};
  median_blur(spike, image_shape{1, 3, 3}, 3);
  CHECK(spike == std::vector<float>(9, 0.f));
  // channels are filtered independently
  std::vector<float> rgb = {0, 9, 9, 9, 0, 0};
  median_blur(rgb, image_shape{2, 1, 3}, 3);
  CHECK(rgb == std::vector<float>{0, 9, 9, 9, 0, 0});
}

TEST_CASE("mutation: mutate draws blur sizes from the spec's sets") {
  // an impulse blurred by box k spreads over k x k (anchor k/2): the support size tells k
  const image_shape s{1, 15, 15};
  std::vector<int> seen(6, 0);
  for (std::uint64_t seed = 0; seed < 200; ++seed) {
    std::vector<float> x(s.size(), 0.f);
    x[7 * 15 + 7] = 250.f;
    std::mt19937_64 r(seed);
    mutate(mutation::average_blur, x, s, r);
    std::size_t nz = 0;
    for (float v : x) nz += v != 0.f;
    // 250 / k^2 rounds to a non-zero value for k <= 5, so the support is k^2 elements
    const auto k = std::size_t(std::lround(std::sqrt(double(nz))));
    REQUIRE(k * k == nz);
    REQUIRE(k >= 1);
    REQUIRE(k <= 5);
    ++seen[k];
  }
  for (std::size_t k = 1; k <= 5; ++k) CHECK(seen[k] > 10);
}

TEST_CASE("mutation: median blur equals a brute-force median with replicated borders") {
  for (image_shape s : {image_shape{1, 9, 7}, image_shape{3, 5, 6}, image_shape{1, 2, 3}}) {
    for (std::size_t k : {3u, 5u, 7u}) {
      const auto x = random_image(s, 100 + k);
      auto y = x;
      median_blur(y, s, k);
      const auto H = std::ptrdiff_t(s.height), W = std::ptrdiff_t(s.width), r = std::ptrdiff_t(k / 2);
      for (std::size_t c = 0; c < s.channels; ++c)
        for (std::ptrdiff_t i = 0; i < H; ++i)
          for (std::ptrdiff_t j = 0; j < W; ++j) {
            std::vector<float> w;
            for (std::ptrdiff_t di = -r; di <= r; ++di)
              for (std::ptrdiff_t dj = -r; dj <= r; ++dj)
                w.push_back(x[c * s.height * s.width + std::size_t(std::clamp<std::ptrdiff_t>(i + di, 0, H - 1) * W +
                                                                   std::clamp<std::ptrdiff_t>(j + dj, 0, W - 1))]);
            std::sort(w.begin(), w.end());
            CHECK(y[c * s.height * s.width + std::size_t(i * W + j)] == w[w.size() / 2]);
          }
    }
  }
}
