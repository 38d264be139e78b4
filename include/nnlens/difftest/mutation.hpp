// nnlens/difftest/mutation.hpp -- DFlare's image mutation operators (spec dflare.md §2.6).
//
//   mutate(op, img, shape, rng, options)     one application, parameters drawn from rng
//   pixel_change / gaussian_noise / multiplicative_noise / salt_and_pepper (random, rng)
//   box_blur(img, s, k) / gaussian_blur(img, s, k) / median_blur(img, s, k)   (deterministic)
//
// Images are raw pixels in [0,255] stored as floats, C x H x W (planar: channel-major, as the
// networks read them), grayscale (C = 1) or RGB (C = 3).  The operators and the ranges their
// parameters are drawn from follow the reference code (img_mutations.py):
//
//   pixel_change          k ~ U{0..9} flat indices (with replacement) set to U{0..255}
//   gaussian_noise        x + N(0, sigma^2), sigma = sqrt(0.1) on the 0-255 scale (configurable)
//   multiplicative_noise  mu ~ U[-0.5,0.5), var ~ U[0,0.05); x + x * N(mu, var) per element
//   salt_and_pepper       ceil(0.004 * size * 0.5) salt (255) and as many pepper (0) elements,
//                         each coordinate (channel, row, column) drawn independently; the reference
//                         draws randint(0, dim - 1), which never hits the last row/column/channel:
//                         that bug is not copied (coordinates are uniform in [0, dim))
//   average_blur          k x k box filter, k ~ U{1..5} (OpenCV blur: anchor k/2, so an even k
//                         covers [i - k/2, i + k/2 - 1]; border REFLECT_101)
//   gaussian_blur         k ~ {1,3,5,7}, sigma = 0 as in the reference: OpenCV then uses its fixed
//                         small-kernel tables for k <= 7 ({1/4,1/2,1/4}, {1,4,6,4,1}/16,
//                         {1,3.5,7,9,7,3.5,1}/32), separable, border REFLECT_101
//   median_blur           k ~ {1,3,5,7}, per channel (OpenCV medianBlur: border REPLICATE)
//
// ensures: every output element is an integer in [0,255] (clipped, then truncated toward zero as
//          the reference's astype(uint8) does for the noise operators -- or rounded to nearest with
//          options.round_noise; the blurs round to nearest as OpenCV's uint8 filters do); shape is
//          unchanged; k = 1 blurs are the identity; a constant image is unchanged by every blur;
//          the same rng state gives the same output.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <span>
#include <string_view>
#include <vector>

#include "nnlens/core/error.hpp"

namespace nnlens::difftest {

/// C x H x W of an image.
struct image_shape {
  std::size_t channels = 1, height = 0, width = 0;
  constexpr std::size_t size() const { return channels * height * width; }
  constexpr bool operator==(const image_shape&) const = default;
};

enum class mutation : std::uint8_t {
  pixel_change,
  gaussian_noise,
  multiplicative_noise,
  salt_and_pepper,
  average_blur,
  gaussian_blur,
  median_blur,
};

/// The reference code's pool (7 operators, the default) and the paper's Table 3 (no salt & pepper).
inline constexpr std::array<mutation, 7> reference_pool = {
    mutation::pixel_change, mutation::gaussian_noise, mutation::multiplicative_noise, mutation::salt_and_pepper,
    mutation::average_blur, mutation::gaussian_blur,  mutation::median_blur};
inline constexpr std::array<mutation, 6> paper_pool = {mutation::pixel_change,        mutation::gaussian_noise,
                                                       mutation::multiplicative_noise, mutation::average_blur,
                                                       mutation::gaussian_blur,        mutation::median_blur};

constexpr std::string_view to_string(mutation m) {
  switch (m) {
    case mutation::pixel_change: return "pixel_change";
    case mutation::gaussian_noise: return "gaussian_noise";
    case mutation::multiplicative_noise: return "multiplicative_noise";
    case mutation::salt_and_pepper: return "salt_and_pepper";
    case mutation::average_blur: return "average_blur";
    case mutation::gaussian_blur: return "gaussian_blur";
    case mutation::median_blur: return "median_blur";
  }
  return "?";
}

struct mutation_options {
  std::size_t max_pixel_changes = 9;          // pixel_change: k ~ U{0..max}
  double gaussian_sigma = 0.31622776601683794;  // sqrt(0.1), on the 0-255 scale
  double mult_mean_range = 0.5;               // mu ~ U[-r, r)
  double mult_var_max = 0.05;                 // var ~ U[0, v)
  double salt_pepper_amount = 0.004;
  double salt_vs_pepper = 0.5;
  std::size_t max_box = 5;                    // average_blur: k ~ U{1..max_box}
  bool round_noise = false;                   // noise operators: round to nearest instead of truncating
};

namespace detail {

inline void check_image(std::span<const float> img, image_shape s, const char* what) {
  if (s.size() == 0 || img.size() != s.size())
    throw shape_error(nnlens::detail::concat(what, ": image has ", img.size(), " values, shape ", s.channels, "x", s.height,
                                             "x", s.width, " needs ", s.size()));
}

/// Clip to [0,255], then truncate (uint8 cast) or round.
inline float to_pixel(double v, bool round) {
  if (!(v > 0)) return 0.f;  // also NaN
  if (v >= 255) return 255.f;
  return float(round ? std::nearbyint(v) : std::trunc(v));
}

/// OpenCV borderInterpolate for BORDER_REFLECT_101 (gfedcb|abcdefgh|gfedcba).
inline std::ptrdiff_t reflect101(std::ptrdiff_t p, std::ptrdiff_t n) {
  if (n == 1) return 0;
  while (p < 0 || p >= n) p = p < 0 ? -p : 2 * n - 2 - p;
  return p;
}
inline std::ptrdiff_t replicate(std::ptrdiff_t p, std::ptrdiff_t n) { return std::clamp<std::ptrdiff_t>(p, 0, n - 1); }

/// Separable correlation of every channel with kernel kx along rows and ky along columns;
/// window for output i starts at i - anchor; the result is divided by `divisor`.  REFLECT_101
/// border, rounded to nearest (half to even, as cvRound).  Exact for integer images with dyadic or
/// unit weights, so the rounding of exact halves does not depend on summation order.
inline void separable_filter(std::span<float> img, image_shape s, std::span<const double> k, std::ptrdiff_t anchor,
                             double divisor = 1) {
  const auto H = std::ptrdiff_t(s.height), W = std::ptrdiff_t(s.width), K = std::ptrdiff_t(k.size());
  std::vector<double> tmp(std::size_t(H * W));
  for (std::size_t c = 0; c < s.channels; ++c) {
    float* p = img.data() + c * s.height * s.width;
    for (std::ptrdiff_t y = 0; y < H; ++y)
      for (std::ptrdiff_t x = 0; x < W; ++x) {
        double a = 0;
        for (std::ptrdiff_t j = 0; j < K; ++j) a += k[std::size_t(j)] * double(p[y * W + reflect101(x - anchor + j, W)]);
        tmp[std::size_t(y * W + x)] = a;
      }
    for (std::ptrdiff_t y = 0; y < H; ++y)
      for (std::ptrdiff_t x = 0; x < W; ++x) {
        double a = 0;
        for (std::ptrdiff_t j = 0; j < K; ++j) a += k[std::size_t(j)] * tmp[std::size_t(reflect101(y - anchor + j, H) * W + x)];
        p[y * W + x] = to_pixel(a / divisor, true);
      }
  }
}

}  // namespace detail

/// Clips every element to [0,255] and makes it an integer (truncated, or rounded when `round`).
inline void clip_pixels(std::span<float> img, bool round = false) {
  for (float& v : img) v = detail::to_pixel(double(v), round);
}

/// k x k box filter (OpenCV blur, normalised, anchor k/2, REFLECT_101); k = 1 is the identity.
inline void box_blur(std::span<float> img, image_shape s, std::size_t k) {
  detail::check_image(img, s, "box_blur");
  if (k == 0) throw value_error("box_blur: kernel size 0");
  if (k == 1) return clip_pixels(img, true);
  const std::vector<double> ones(k, 1.0);
  detail::separable_filter(img, s, ones, std::ptrdiff_t(k / 2), double(k * k));
}

/// The 1-D kernel OpenCV's GaussianBlur uses for an odd size k with sigma = 0: its fixed tables
/// for k <= 7, otherwise sampled with sigma = 0.3 ((k - 1) / 2 - 1) + 0.8 and normalised.
inline std::vector<double> gaussian_kernel(std::size_t k) {
  if (k % 2 == 0) throw value_error(nnlens::detail::concat("gaussian_kernel: size ", k, " is even"));
  switch (k) {
    case 1: return {1.0};
    case 3: return {0.25, 0.5, 0.25};
    case 5: return {0.0625, 0.25, 0.375, 0.25, 0.0625};
    case 7: return {0.03125, 0.109375, 0.21875, 0.28125, 0.21875, 0.109375, 0.03125};
    default: break;
  }
  const double sigma = 0.3 * ((double(k) - 1) * 0.5 - 1) + 0.8;
  std::vector<double> g(k);
  double sum = 0;
  for (std::size_t i = 0; i < k; ++i) {
    const double x = double(i) - double(k - 1) / 2;
    sum += g[i] = std::exp(-x * x / (2 * sigma * sigma));
  }
  for (double& v : g) v /= sum;
  return g;
}

/// Gaussian blur with OpenCV's sigma = 0 kernel of odd size k (REFLECT_101); k = 1 is the identity.
inline void gaussian_blur(std::span<float> img, image_shape s, std::size_t k) {
  detail::check_image(img, s, "gaussian_blur");
  const auto ker = gaussian_kernel(k);
  if (k == 1) return clip_pixels(img, true);
  detail::separable_filter(img, s, ker, std::ptrdiff_t(k / 2));
}

/// k x k median per channel (odd k; OpenCV medianBlur, border REPLICATE); k = 1 is the identity.
inline void median_blur(std::span<float> img, image_shape s, std::size_t k) {
  detail::check_image(img, s, "median_blur");
  if (k % 2 == 0) throw value_error(nnlens::detail::concat("median_blur: size ", k, " is even"));
  clip_pixels(img, true);
  if (k == 1) return;
  // Huang's sliding histogram (as OpenCV for 8-bit images): the pixels are integers in [0,255]
  // after clip_pixels, so a window's median is found from 16 coarse + 16 fine bin counts.
  const auto H = std::ptrdiff_t(s.height), W = std::ptrdiff_t(s.width), r = std::ptrdiff_t(k / 2);
  const std::size_t half = k * k / 2;  // the median is the element of rank k*k/2 (k odd)
  std::vector<std::uint8_t> src(std::size_t(H * W));
  std::array<std::uint16_t, 256> fine{};
  std::array<std::uint16_t, 16> coarse{};
  auto add = [&](std::uint8_t v, int d) {
    fine[v] = std::uint16_t(fine[v] + d);
    coarse[v >> 4] = std::uint16_t(coarse[v >> 4] + d);
  };
  for (std::size_t c = 0; c < s.channels; ++c) {
    float* p = img.data() + c * s.height * s.width;
    for (std::size_t i = 0; i < src.size(); ++i) src[i] = std::uint8_t(p[i]);
    for (std::ptrdiff_t y = 0; y < H; ++y) {
      fine.fill(0);
      coarse.fill(0);
      auto column = [&](std::ptrdiff_t x, int d) {
        const std::ptrdiff_t xc = detail::replicate(x, W);
        for (std::ptrdiff_t dy = -r; dy <= r; ++dy) add(src[std::size_t(detail::replicate(y + dy, H) * W + xc)], d);
      };
      for (std::ptrdiff_t x = -r; x <= r; ++x) column(x, 1);
      for (std::ptrdiff_t x = 0; x < W; ++x) {
        std::size_t seen = 0, b = 0;
        while (seen + coarse[b] <= half) seen += coarse[b++];
        std::size_t v = b * 16;
        while (seen + fine[v] <= half) seen += fine[v++];
        p[y * W + x] = float(v);
        if (x + 1 < W) {
          column(x - r, -1);
          column(x + r + 1, 1);
        }
      }
    }
  }
}

/// k ~ U{0..max_pixel_changes} elements (with replacement) set to U{0..255}.  Returns k.
inline std::size_t pixel_change(std::span<float> img, image_shape s, std::mt19937_64& rng, const mutation_options& o = {}) {
  detail::check_image(img, s, "pixel_change");
  const std::size_t k = std::uniform_int_distribution<std::size_t>(0, o.max_pixel_changes)(rng);
  std::uniform_int_distribution<std::size_t> at(0, img.size() - 1);
  std::uniform_int_distribution<int> value(0, 255);
  for (std::size_t i = 0; i < k; ++i) {
    const std::size_t j = at(rng);
    img[j] = float(value(rng));
  }
  clip_pixels(img, true);
  return k;
}

/// x + N(0, sigma^2) per element, clipped, then truncated (or rounded with round_noise).
inline void gaussian_noise(std::span<float> img, image_shape s, std::mt19937_64& rng, const mutation_options& o = {}) {
  detail::check_image(img, s, "gaussian_noise");
  std::normal_distribution<double> n(0.0, o.gaussian_sigma);
  for (float& v : img) v = detail::to_pixel(double(v) + n(rng), o.round_noise);
}

/// mu ~ U[-0.5,0.5), var ~ U[0,0.05); x + x * N(mu, var) per element; clipped, truncated.
inline void multiplicative_noise(std::span<float> img, image_shape s, std::mt19937_64& rng, const mutation_options& o = {}) {
  detail::check_image(img, s, "multiplicative_noise");
  const double mu = std::uniform_real_distribution<double>(-o.mult_mean_range, o.mult_mean_range)(rng);
  const double var = std::uniform_real_distribution<double>(0.0, o.mult_var_max)(rng);
  std::normal_distribution<double> n(mu, std::sqrt(var));
  for (float& v : img) {
    const double x = double(v);
    v = detail::to_pixel(x + x * n(rng), o.round_noise);
  }
}

/// ceil(amount * size * ratio) salt (255) and ceil(amount * size * (1 - ratio)) pepper (0)
/// elements; each coordinate drawn uniformly and independently per axis.
inline void salt_and_pepper(std::span<float> img, image_shape s, std::mt19937_64& rng, const mutation_options& o = {}) {
  detail::check_image(img, s, "salt_and_pepper");
  clip_pixels(img, true);
  std::uniform_int_distribution<std::size_t> ch(0, s.channels - 1), row(0, s.height - 1), col(0, s.width - 1);
  auto hit = [&](double count, float value) {
    const auto n = std::size_t(std::ceil(count - 1e-9));
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t c = ch(rng), y = row(rng), x = col(rng);
      img[(c * s.height + y) * s.width + x] = value;
    }
  };
  const double size = double(img.size());
  hit(o.salt_pepper_amount * size * o.salt_vs_pepper, 255.f);
  hit(o.salt_pepper_amount * size * (1 - o.salt_vs_pepper), 0.f);
}

/// One application of `op` with parameters drawn from rng (ranges in the header comment).
inline void mutate(mutation op, std::span<float> img, image_shape s, std::mt19937_64& rng, const mutation_options& o = {}) {
  static constexpr std::size_t odd[4] = {1, 3, 5, 7};
  switch (op) {
    case mutation::pixel_change: pixel_change(img, s, rng, o); return;
    case mutation::gaussian_noise: gaussian_noise(img, s, rng, o); return;
    case mutation::multiplicative_noise: multiplicative_noise(img, s, rng, o); return;
    case mutation::salt_and_pepper: salt_and_pepper(img, s, rng, o); return;
    case mutation::average_blur:
      box_blur(img, s, std::uniform_int_distribution<std::size_t>(1, std::max<std::size_t>(1, o.max_box))(rng));
      return;
    case mutation::gaussian_blur: gaussian_blur(img, s, odd[std::uniform_int_distribution<int>(0, 3)(rng)]); return;
    case mutation::median_blur: median_blur(img, s, odd[std::uniform_int_distribution<int>(0, 3)(rng)]); return;
  }
  throw value_error("mutate: unknown mutation operator");
}

}  // namespace nnlens::difftest
