// PNG/JPEG loading: pixel values and layout on images written with known pixels, colour modes,
// 16-bit PNG, errors.  Also checks that the private stb copy does not stop a user including
// <stb/stb_image.h> afterwards.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "nnlens/io/image.hpp"

#define STB_IMAGE_WRITE_STATIC
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb/stb_image_write.h>

#include <stb/stb_image.h>  // the user's own include still declares stb's global API
static_assert(sizeof(&::stbi_load_from_memory) > 0);
#ifdef STBI_NO_BMP
#error "image.hpp leaked STBI_NO_BMP"
#endif

using namespace nnlens;
namespace fs = std::filesystem;

namespace {
void sink(void* ctx, void* data, int size) {
  auto* v = static_cast<std::string*>(ctx);
  v->append(static_cast<const char*>(data), std::size_t(size));
}
// W=3, H=2 RGB image with distinct values, interleaved HWC as files store it
std::vector<unsigned char> rgb_pixels() {
  std::vector<unsigned char> p(2 * 3 * 3);
  for (std::size_t i = 0; i < p.size(); ++i) p[i] = static_cast<unsigned char>(i * 13 + 5);
  return p;
}
}  // namespace

TEST_CASE("image: PNG RGB -> [3,H,W] exactly, channel-major; gray and rgb modes") {
  const auto px = rgb_pixels();
  std::string png;
  REQUIRE(stbi_write_png_to_func(sink, &png, 3, 2, 3, px.data(), 3 * 3));
  auto img = io::decode_image<double>(png.data(), png.size(), "t.png");
  REQUIRE(img.shape() == std::vector<std::size_t>{3, 2, 3});
  for (std::size_t y = 0; y < 2; ++y)
    for (std::size_t x = 0; x < 3; ++x)
      for (std::size_t c = 0; c < 3; ++c) CHECK(img(c, y, x) == double(px[(y * 3 + x) * 3 + c]) / 255.0);
  io::image_options g;
  g.color = io::image_color::gray;
  auto gray = io::decode_image<double>(png.data(), png.size(), "t.png", g);
  REQUIRE(gray.shape() == std::vector<std::size_t>{1, 2, 3});
  // stb's luminance: (77 R + 150 G + 29 B) >> 8
  const std::size_t k = (1 * 3 + 2) * 3;
  CHECK(gray(0, 1, 2) == double((77 * px[k] + 150 * px[k + 1] + 29 * px[k + 2]) >> 8) / 255.0);
  // a grey file: keep -> 1 channel, rgb -> replicated
  std::vector<unsigned char> gp = {0, 128, 255, 7};
  std::string gpng;
  REQUIRE(stbi_write_png_to_func(sink, &gpng, 2, 2, 1, gp.data(), 2));
  auto g1 = io::decode_image<float>(gpng.data(), gpng.size());
  REQUIRE(g1.shape() == std::vector<std::size_t>{1, 2, 2});
  CHECK(g1(0, 0, 1) == 128.0f / 255.0f);
  CHECK(g1(0, 1, 1) == 7.0f / 255.0f);
  io::image_options rgb;
  rgb.color = io::image_color::rgb;
  auto g3 = io::decode_image<float>(gpng.data(), gpng.size(), "g", rgb);
  REQUIRE(g3.shape() == std::vector<std::size_t>{3, 2, 2});
  for (std::size_t c = 0; c < 3; ++c) CHECK(g3(c, 0, 2 - 1) == 128.0f / 255.0f);
}

TEST_CASE("image: JPEG and files on disk; load_images stacks [N,C,H,W]") {
  std::vector<unsigned char> flat(8 * 8 * 3, 200);  // a flat colour survives JPEG almost exactly
  for (std::size_t i = 0; i < flat.size(); i += 3) flat[i + 1] = 40;
  std::string jpg;
  REQUIRE(stbi_write_jpg_to_func(sink, &jpg, 8, 8, 3, flat.data(), 100));
  const fs::path dir = fs::temp_directory_path();
  const fs::path a = dir / "nnlens_test_a.jpg", b = dir / "nnlens_test_b.jpg";
  std::ofstream(a, std::ios::binary) << jpg;
  std::ofstream(b, std::ios::binary) << jpg;
  auto img = io::load_image(a);
  REQUIRE(img.shape() == std::vector<std::size_t>{3, 8, 8});
  CHECK(std::abs(img(0, 3, 4) - 200.0f / 255.0f) < 3.0f / 255.0f);
  CHECK(std::abs(img(1, 7, 7) - 40.0f / 255.0f) < 3.0f / 255.0f);
  auto both = io::load_images({a, b});
  CHECK(both.shape() == std::vector<std::size_t>{2, 3, 8, 8});
  CHECK(both(1, 2, 5, 5) == img(2, 5, 5));
  // a different size in the batch is refused
  std::string small;
  REQUIRE(stbi_write_png_to_func(sink, &small, 2, 2, 3, flat.data(), 6));
  const fs::path c = dir / "nnlens_test_c.png";
  std::ofstream(c, std::ios::binary) << small;
  CHECK_THROWS_WITH_AS(io::load_images({a, c}), doctest::Contains("the first is 3x8x8"), io_error);
  fs::remove(a), fs::remove(b), fs::remove(c);
}

TEST_CASE("image: 16-bit PNG is scaled by 65535") {
  // a hand-built 1x1 16-bit greyscale PNG holding 0x1234 (zlib stored block, CRCs computed here)
  auto crc = [](const std::string& s) {
    std::uint32_t c = 0xFFFFFFFFu;
    for (unsigned char ch : s) {
      c ^= ch;
      for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
    }
    return c ^ 0xFFFFFFFFu;
  };
  auto be32 = [](std::uint32_t v) {
    return std::string{char(v >> 24), char(v >> 16), char(v >> 8), char(v)};
  };
  auto chunk = [&](const std::string& type, const std::string& data) {
    return be32(std::uint32_t(data.size())) + type + data + be32(crc(type + data));
  };
  const std::string ihdr = be32(1) + be32(1) + std::string{16, 0, 0, 0, 0};
  const std::string raw = {0, 0x12, 0x34};  // filter 0, one 16-bit sample
  std::uint32_t s1 = 1, s2 = 0;
  for (unsigned char ch : raw) s1 = (s1 + ch) % 65521, s2 = (s2 + s1) % 65521;
  const std::string z = std::string{0x78, 0x01, 0x01, 3, 0, char(0xFC), char(0xFF)} + raw + be32((s2 << 16) | s1);
  const std::string png = std::string("\x89PNG\r\n\x1a\n", 8) + chunk("IHDR", ihdr) + chunk("IDAT", z) + chunk("IEND", "");
  auto img = io::decode_image<double>(png.data(), png.size(), "w.png");
  REQUIRE(img.shape() == std::vector<std::size_t>{1, 1, 1});
  CHECK(img(0, 0, 0) == double(0x1234) / 65535.0);
}

TEST_CASE("image: bad files throw io_error naming the file") {
  const std::string junk = "this is not an image";
  CHECK_THROWS_WITH_AS(io::decode_image(junk.data(), junk.size(), "j.png"), doctest::Contains("j.png: not a readable"),
                       io_error);
  CHECK_THROWS_WITH_AS(io::decode_image(junk.data(), 0, "e.png"), doctest::Contains("e.png: empty"), io_error);
  const auto px = rgb_pixels();
  std::string png;
  REQUIRE(stbi_write_png_to_func(sink, &png, 3, 2, 3, px.data(), 9));
  CHECK_THROWS_AS(io::decode_image(png.data(), png.size() / 2, "half.png"), io_error);
  io::image_options tiny;
  tiny.max_pixels = 5;
  CHECK_THROWS_WITH_AS(io::decode_image(png.data(), png.size(), "big.png", tiny),
                       doctest::Contains("3x2 pixels exceeds"), io_error);
  // a BMP is not accepted (PNG and JPEG only)
  std::string bmp;
  REQUIRE(stbi_write_bmp_to_func(sink, &bmp, 3, 2, 3, px.data()));
  CHECK_THROWS_AS(io::decode_image(bmp.data(), bmp.size(), "x.bmp"), io_error);
  CHECK_THROWS_WITH_AS(io::load_image("/nonexistent.png"), "/nonexistent.png: cannot open", io_error);
}
