// nnlens/io/image.hpp -- PNG and JPEG images as [C, H, W] tensors in [0, 1] (Debian's libstb-dev).
//
//   load_image<T = float>(path, image_options)                 -> xt::xarray<T> [C, H, W]
//   decode_image<T = float>(bytes, size, name, image_options)  the same from memory
//   load_images<T = float>(paths, image_options)               -> [N, C, H, W] (all the same size)
//
// image_color::gray gives C = 1 (stb's luminance (77 R + 150 G + 29 B) >> 8 for colour files),
// image_color::rgb gives C = 3 (grey replicated), image_color::keep (the default) gives 1 for grey
// files and 3 for colour ones.  Alpha is dropped.  8-bit samples are v / 255, 16-bit PNG samples
// v / 65535.  Layout: channel-major (NCHW without the batch axis), rows top to bottom.
// requires: a PNG or JPEG file.  ensures: anything else (another format, a truncated or corrupt
// file, more than image_options::max_pixels pixels -- checked from the header before decoding) throws
// io_error naming the file and stb's reason.
//
// How stb_image is compiled, header-only.  stb_image is a single-file library: its code is compiled
// where STB_IMAGE_IMPLEMENTATION is defined, and defining it in every translation unit would give
// duplicate symbols at link time.  By default this header compiles a private copy with internal
// linkage: it defines STB_IMAGE_STATIC (every stb function `static`), STBI_NO_STDIO, STBI_ONLY_PNG
// and STBI_ONLY_JPEG, and includes <stb/stb_image.h> inside namespace nnlens::detail::stbi, after
// pre-including the C headers stb includes so that none of them lands inside the namespace.  Each
// translation unit that includes this header gets its own copy of the PNG/JPEG decoders (about
// 100 KB of code; the linker never sees a conflict), and the nnlens functions that call it are
// `static inline` too, so no inline function with external linkage refers to internal entities.
// The stb include guard and the configuration macros stb reads or sets (STBI_ASSERT, STBI_NO_*) are
// saved and restored around it (#pragma push_macro/pop_macro), so the user may include <stb/stb_image.h> themselves, before or after.
// Define NNLENS_STB_IMAGE_EXTERNAL to use a single external copy instead: then this header only
// declares stb's API and you link an implementation (Debian: `pkg-config --libs stb`, i.e. -lstb).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

#include "nnlens/core/error.hpp"
#include "nnlens/core/tensor.hpp"

#if defined(NNLENS_STB_IMAGE_EXTERNAL)
#include <stb/stb_image.h>
namespace nnlens::detail::stbi {
using ::stbi_failure_reason;
using ::stbi_image_free;
using ::stbi_info_from_memory;
using ::stbi_is_16_bit_from_memory;
using ::stbi_load_16_from_memory;
using ::stbi_load_from_memory;
using ::stbi_uc;
using ::stbi_us;
}  // namespace nnlens::detail::stbi
#else
// the C headers stb_image's implementation includes: included here, at global scope, first
#include <assert.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__ARM_NEON)
#include <arm_neon.h>
#endif
#pragma push_macro("STBI_INCLUDE_STB_IMAGE_H")
#pragma push_macro("STBI_ASSERT")
#pragma push_macro("STBI_NO_JPEG")
#pragma push_macro("STBI_NO_PNG")
#pragma push_macro("STBI_NO_BMP")
#pragma push_macro("STBI_NO_PSD")
#pragma push_macro("STBI_NO_TGA")
#pragma push_macro("STBI_NO_GIF")
#pragma push_macro("STBI_NO_HDR")
#pragma push_macro("STBI_NO_PIC")
#pragma push_macro("STBI_NO_PNM")
#undef STBI_INCLUDE_STB_IMAGE_H
#undef STBI_ASSERT
#undef STBI_NO_JPEG
#undef STBI_NO_PNG
#undef STBI_NO_BMP
#undef STBI_NO_PSD
#undef STBI_NO_TGA
#undef STBI_NO_GIF
#undef STBI_NO_HDR
#undef STBI_NO_PIC
#undef STBI_NO_PNM
#define STBI_ASSERT(x) assert(x)
#define STB_IMAGE_STATIC
#define STB_IMAGE_IMPLEMENTATION
#define STBI_NO_STDIO
#define STBI_ONLY_PNG
#define STBI_ONLY_JPEG
namespace nnlens::detail::stbi {
#include <stb/stb_image.h>
}  // namespace nnlens::detail::stbi
#undef STB_IMAGE_STATIC
#undef STB_IMAGE_IMPLEMENTATION
#undef STBI_NO_STDIO
#undef STBI_ONLY_PNG
#undef STBI_ONLY_JPEG
#undef STBIDEF
#pragma pop_macro("STBI_NO_PNM")
#pragma pop_macro("STBI_NO_PIC")
#pragma pop_macro("STBI_NO_HDR")
#pragma pop_macro("STBI_NO_GIF")
#pragma pop_macro("STBI_NO_TGA")
#pragma pop_macro("STBI_NO_PSD")
#pragma pop_macro("STBI_NO_BMP")
#pragma pop_macro("STBI_NO_PNG")
#pragma pop_macro("STBI_NO_JPEG")
#pragma pop_macro("STBI_ASSERT")
#pragma pop_macro("STBI_INCLUDE_STB_IMAGE_H")
#endif

namespace nnlens::io {

enum class image_color { keep, gray, rgb };

struct image_options {
  image_color color = image_color::keep;
  std::size_t max_pixels = std::size_t(1) << 26;  // width * height, checked before decoding
};

/// Decodes PNG or JPEG bytes to [C, H, W] in [0, 1]; `name` appears in error messages.
template <class T = float>
static inline xt::xarray<T> decode_image(const void* data, std::size_t size, const std::string& name = "<image>",
                                         const image_options& opt = {}) {
  namespace s = nnlens::detail::stbi;
  if (size == 0) throw io_error(name + ": empty file, not a PNG or JPEG image");
  if (size > std::size_t(INT32_MAX)) throw io_error(name + ": file too large");
  const auto* bytes = static_cast<const s::stbi_uc*>(data);
  const int len = int(size);
  int w = 0, h = 0, comp = 0;
  if (!s::stbi_info_from_memory(bytes, len, &w, &h, &comp))
    throw io_error(name + ": not a readable PNG or JPEG image (" + s::stbi_failure_reason() + ")");
  if (w <= 0 || h <= 0 || std::size_t(w) * std::size_t(h) > opt.max_pixels)
    throw io_error(nnlens::detail::concat(name, ": ", w, "x", h, " pixels exceeds image_options::max_pixels = ",
                                          opt.max_pixels));
  const bool colour_file = comp >= 3;
  const int C = opt.color == image_color::gray ? 1
                : opt.color == image_color::rgb ? 3
                                                 : (colour_file ? 3 : 1);
  const bool wide = s::stbi_is_16_bit_from_memory(bytes, len);
  void* px = wide ? static_cast<void*>(s::stbi_load_16_from_memory(bytes, len, &w, &h, &comp, C))
                  : static_cast<void*>(s::stbi_load_from_memory(bytes, len, &w, &h, &comp, C));
  if (!px) throw io_error(name + ": cannot decode the image (" + s::stbi_failure_reason() + ")");
  struct holder {
    void* p;
    ~holder() { s::stbi_image_free(p); }
  } hold{px};
  const std::size_t H = std::size_t(h), W = std::size_t(w), Cs = std::size_t(C);
  xt::xarray<T> out = xt::zeros<T>({Cs, H, W});
  T* o = out.data();
  for (std::size_t y = 0; y < H; ++y)
    for (std::size_t x = 0; x < W; ++x)
      for (std::size_t c = 0; c < Cs; ++c) {
        const std::size_t i = (y * W + x) * Cs + c;
        const T v = wide ? T(static_cast<const s::stbi_us*>(px)[i]) / T(65535)
                         : T(static_cast<const s::stbi_uc*>(px)[i]) / T(255);
        o[(c * H + y) * W + x] = v;
      }
  return out;
}

/// Reads a PNG or JPEG file to [C, H, W] in [0, 1].
template <class T = float>
static inline xt::xarray<T> load_image(const std::filesystem::path& path, const image_options& opt = {}) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw io_error(path.string() + ": is a directory, not an image");
  std::ifstream f(path, std::ios::binary);
  if (!f) throw io_error(path.string() + ": cannot open");
  const std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad()) throw io_error(path.string() + ": read error");
  return decode_image<T>(bytes.data(), bytes.size(), path.string(), opt);
}

/// Reads several images of one size into [N, C, H, W]; a different size throws io_error.
template <class T = float>
static inline xt::xarray<T> load_images(const std::vector<std::filesystem::path>& paths,
                                        const image_options& opt = {}) {
  if (paths.empty()) throw io_error("load_images: no files given");
  xt::xarray<T> out;
  std::vector<std::size_t> shp;
  for (std::size_t n = 0; n < paths.size(); ++n) {
    const xt::xarray<T> img = load_image<T>(paths[n], opt);
    if (n == 0) {
      shp.assign(img.shape().begin(), img.shape().end());
      std::vector<std::size_t> full{paths.size()};
      full.insert(full.end(), shp.begin(), shp.end());
      out = xt::zeros<T>(full);
    } else if (!std::equal(shp.begin(), shp.end(), img.shape().begin(), img.shape().end())) {
      throw io_error(nnlens::detail::concat(paths[n].string(), ": image ", n, " is ", img.shape()[0], "x",
                                            img.shape()[1], "x", img.shape()[2], " (C,H,W), the first is ", shp[0],
                                            "x", shp[1], "x", shp[2]));
    }
    std::copy(img.begin(), img.end(), out.data() + n * img.size());
  }
  return out;
}

}  // namespace nnlens::io
