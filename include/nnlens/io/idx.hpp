// nnlens/io/idx.hpp -- the IDX format of MNIST / Fashion-MNIST, gzipped or not.
//
//   read_idx(path)                 any IDX file: type code, dims, elements (host byte order)
//   parse_idx(data, size, name)    the same from memory (plain, or one gzip member; data after
//                                  the member's end is ignored)
//   read_idx_images<T>(path)       [N, rows, cols] (or [N, C, rows, cols]) -> xt::xarray<T> [N, C, rows, cols];
//                                  unsigned bytes are scaled to [0, 1] (v / 255), other types kept
//   read_idx_labels(path)          [N] unsigned bytes -> std::vector<std::uint8_t>
//   load_mnist<T>(dir, "train" | "t10k" [, limit])   both files of a split, counts checked
//
// Format: 2 zero bytes, a type code (0x08 ubyte, 0x09 sbyte, 0x0B int16, 0x0C int32, 0x0D float32,
// 0x0E float64), the number of dimensions, each dimension as a big-endian uint32, then the
// elements, big-endian, row-major.  A file whose name ends in .gz -- in fact any gzip stream -- is
// decompressed with zlib when NNLENS_HAS_ZLIB is defined (link zlib; CMake: nnlens::idx);
// otherwise a gzip file gets an io_error saying so.
//
// ensures: never reads out of bounds and never allocates more than the data actually present
//          (plus a bounded read-ahead): a truncated file, a bad magic number, an unknown type,
//          wrong dimensions, extra bytes after the data, a header whose size overflows or
//          exceeds idx_limits::max_bytes, or corrupt gzip data all throw io_error naming the file
//          and what was wrong.  Inconsistent image/label counts throw data_error.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "nnlens/core/error.hpp"
#include "nnlens/core/tensor.hpp"

#if defined(NNLENS_HAS_ZLIB) && NNLENS_HAS_ZLIB
#include <zlib.h>
#define NNLENS_IDX_ZLIB 1
#endif

namespace nnlens::io {

enum class idx_type : std::uint8_t { u8 = 0x08, i8 = 0x09, i16 = 0x0B, i32 = 0x0C, f32 = 0x0D, f64 = 0x0E };

/// Bytes per element of an IDX type (0 for an unknown code).
constexpr std::size_t idx_element_size(std::uint8_t code) {
  switch (code) {
    case 0x08: case 0x09: return 1;
    case 0x0B: return 2;
    case 0x0C: case 0x0D: return 4;
    case 0x0E: return 8;
    default: return 0;
  }
}

struct idx_limits {
  std::uint64_t max_bytes = std::uint64_t(1) << 32;  // largest data section accepted (4 GiB)
};

/// A whole IDX file: elements in host byte order, row-major.
struct idx_array {
  idx_type type = idx_type::u8;
  std::vector<std::size_t> dims;
  std::vector<std::uint8_t> bytes;

  std::size_t element_size() const { return idx_element_size(std::uint8_t(type)); }
  std::size_t size() const { return element_size() ? bytes.size() / element_size() : 0; }
  /// Element i converted to U.
  template <class U>
  U at(std::size_t i) const {
    const std::uint8_t* p = bytes.data() + i * element_size();
    switch (type) {
      case idx_type::u8: return U(p[0]);
      case idx_type::i8: return U(std::int8_t(p[0]));
      case idx_type::i16: return U(load<std::int16_t>(p));
      case idx_type::i32: return U(load<std::int32_t>(p));
      case idx_type::f32: return U(load<float>(p));
      case idx_type::f64: return U(load<double>(p));
    }
    return U(0);
  }
  /// Every element converted to U.
  template <class U>
  std::vector<U> values() const {
    std::vector<U> v(size());
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = at<U>(i);
    return v;
  }

 private:
  template <class V>
  static V load(const std::uint8_t* p) {
    V v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
};

namespace detail {

inline std::string where(const std::filesystem::path& p) { return p.string() + ": "; }

/// Sequential bytes of a file, transparently gunzipped when zlib is available.
class idx_source {
 public:
  explicit idx_source(const std::filesystem::path& p) : path_(p) {
    std::error_code ec;
    if (std::filesystem::is_directory(p, ec)) throw io_error(where(p) + "is a directory, not an IDX file");
#ifdef NNLENS_IDX_ZLIB
    gz_ = gzopen(p.c_str(), "rb");
    if (!gz_) throw io_error(where(p) + "cannot open (" + std::strerror(errno) + ")");
    gzbuffer(gz_, 1 << 17);
#else
    f_ = std::fopen(p.c_str(), "rb");
    if (!f_) throw io_error(where(p) + "cannot open (" + std::strerror(errno) + ")");
#endif
  }
  /// In-memory bytes (plain, or gzip when zlib is available); `name` appears in messages.
  idx_source(const void* data, std::size_t size, std::string name)
      : path_(std::move(name)), mem_(static_cast<const unsigned char*>(data)), mem_size_(size), in_memory_(true) {
    if (size >= 2 && mem_[0] == 0x1f && mem_[1] == 0x8b) {
#ifdef NNLENS_IDX_ZLIB
      mem_gz_ = true;
      zs_ = z_stream{};
      if (inflateInit2(&zs_, 15 + 16) != Z_OK) throw io_error(where(path_) + "zlib initialisation failed");
      zs_.next_in = const_cast<Bytef*>(mem_);
      zs_.avail_in = uInt(std::min<std::size_t>(size, 1u << 30));
      mem_pos_ = zs_.avail_in;
#else
      throw io_error(where(path_) +
                     "is gzip-compressed, but nnlens was built without zlib (define NNLENS_HAS_ZLIB and link "
                     "zlib, e.g. the CMake target nnlens::idx)");
#endif
    }
  }
  idx_source(const idx_source&) = delete;
  idx_source& operator=(const idx_source&) = delete;
  ~idx_source() {
#ifdef NNLENS_IDX_ZLIB
    if (mem_gz_) inflateEnd(&zs_);
    if (gz_) gzclose(gz_);
#else
    if (f_) std::fclose(f_);
#endif
  }

  /// Reads up to n bytes; returns how many were read (fewer only at the end of the data).
  std::size_t read(void* buf, std::size_t n) {
    std::size_t got = 0;
    auto* out = static_cast<unsigned char*>(buf);
    if (in_memory_) return read_memory(out, n);
    while (got < n) {
#ifdef NNLENS_IDX_ZLIB
      const unsigned ask = unsigned(std::min<std::size_t>(n - got, 1u << 30));
      const int r = gzread(gz_, out + got, ask);
      if (r < 0) {
        int code = 0;
        const char* msg = gzerror(gz_, &code);
        throw io_error(where(path_) + "corrupt gzip data (" + (msg ? msg : "unknown zlib error") + ")");
      }
      if (r == 0) break;
      got += std::size_t(r);
#else
      const std::size_t r = std::fread(out + got, 1, n - got, f_);
      if (r == 0) {
        if (std::ferror(f_)) throw io_error(where(path_) + "read error");
        break;
      }
      if (first_ && got + r >= 2 && out[0] == 0x1f && out[1] == 0x8b)
        throw io_error(where(path_) +
                       "is gzip-compressed, but nnlens was built without zlib (define NNLENS_HAS_ZLIB and link "
                       "zlib, e.g. the CMake target nnlens::idx)");
      first_ = false;
      got += r;
#endif
    }
    return got;
  }
  /// True when the file is read as is (not decompressed).
  bool direct() {
    if (in_memory_) return !mem_gz_;
#ifdef NNLENS_IDX_ZLIB
    return gzdirect(gz_) == 1;
#else
    return true;
#endif
  }
  /// A message about a pending decompression problem ("" when none).
  std::string stream_error() {
    if (in_memory_) return "";
#ifdef NNLENS_IDX_ZLIB
    int code = 0;
    const char* msg = gzerror(gz_, &code);
    if (code != Z_OK && msg && *msg) return std::string(" (") + msg + ")";
#endif
    return "";
  }
  /// The size of the undecompressed source when it is known without reading it.
  bool known_size(std::uint64_t& size) {
    if (in_memory_) {
      size = mem_size_;
      return !mem_gz_;
    }
    std::error_code ec;
    size = std::filesystem::file_size(path_, ec);
    return !ec && direct();
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::size_t read_memory(unsigned char* out, std::size_t n) {
    if (!mem_gz_) {
      const std::size_t k = std::min(n, mem_size_ - mem_pos_);
      if (k) std::memcpy(out, mem_ + mem_pos_, k);
      mem_pos_ += k;
      return k;
    }
#ifdef NNLENS_IDX_ZLIB
    std::size_t got = 0;
    while (got < n && !mem_end_) {
      if (zs_.avail_in == 0 && mem_pos_ < mem_size_) {
        zs_.avail_in = uInt(std::min<std::size_t>(mem_size_ - mem_pos_, 1u << 30));
        mem_pos_ += zs_.avail_in;
      }
      zs_.next_out = out + got;
      zs_.avail_out = uInt(std::min<std::size_t>(n - got, 1u << 30));
      const uInt before = zs_.avail_out;
      const int r = inflate(&zs_, Z_NO_FLUSH);
      got += before - zs_.avail_out;
      if (r == Z_STREAM_END) {
        mem_end_ = true;
      } else if (r != Z_OK) {  // Z_BUF_ERROR: no progress possible, i.e. the input ended early
        if (zs_.avail_in == 0 && mem_pos_ >= mem_size_)
          throw io_error(where(path_) + "corrupt or truncated gzip stream (unexpected end of the gzip stream)");
        throw io_error(where(path_) + "corrupt gzip data (" + (zs_.msg ? zs_.msg : "unknown zlib error") + ")");
      }
    }
    return got;
#else
    return 0;
#endif
  }

  std::filesystem::path path_;
  const unsigned char* mem_ = nullptr;
  std::size_t mem_size_ = 0, mem_pos_ = 0;
  bool in_memory_ = false, mem_gz_ = false, mem_end_ = false;
#ifdef NNLENS_IDX_ZLIB
  z_stream zs_{};
#endif
#ifdef NNLENS_IDX_ZLIB
  gzFile gz_ = nullptr;
#else
  std::FILE* f_ = nullptr;
  bool first_ = true;
#endif
};

inline void byteswap_elements(std::vector<std::uint8_t>& b, std::size_t es) {
  if constexpr (std::endian::native == std::endian::little) {
    if (es <= 1) return;
    for (std::size_t i = 0; i + es <= b.size(); i += es) std::reverse(b.begin() + std::ptrdiff_t(i), b.begin() + std::ptrdiff_t(i + es));
  }
}

inline std::string dims_str(const std::vector<std::size_t>& d) {
  std::string s = "[";
  for (std::size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + std::to_string(d[i]);
  return s + "]";
}

}  // namespace detail

namespace detail {
inline idx_array read_idx_from(idx_source& src, const idx_limits& limits) {
  const std::string at = detail::where(src.path());
  std::uint8_t head[4];
  const std::size_t h = src.read(head, 4);
  if (h < 4)
    throw io_error(at + "truncated: " + std::to_string(h) + " bytes, too short for an IDX header" + src.stream_error());
  if (head[0] != 0 || head[1] != 0) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "bad magic number 0x%02x%02x%02x%02x (not an IDX file)", head[0], head[1], head[2],
                  head[3]);
    throw io_error(at + buf);
  }
  const std::size_t es = idx_element_size(head[2]);
  if (es == 0) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "unknown IDX data type 0x%02x", head[2]);
    throw io_error(at + buf);
  }
  const std::size_t rank = head[3];
  if (rank == 0) throw io_error(at + "the header declares zero dimensions");
  std::vector<std::uint8_t> raw(4 * rank);
  if (src.read(raw.data(), raw.size()) < raw.size())
    throw io_error(at + "truncated inside the header (" + std::to_string(rank) + " dimensions declared)" +
                   src.stream_error());
  idx_array a;
  a.type = idx_type(head[2]);
  std::uint64_t total = es;
  bool overflow = false;
  for (std::size_t i = 0; i < rank; ++i) {
    const std::uint32_t d = std::uint32_t(raw[4 * i]) << 24 | std::uint32_t(raw[4 * i + 1]) << 16 |
                            std::uint32_t(raw[4 * i + 2]) << 8 | std::uint32_t(raw[4 * i + 3]);
    a.dims.push_back(d);
    overflow = overflow || __builtin_mul_overflow(total, std::uint64_t(d), &total);
  }
  if (overflow || total > limits.max_bytes)
    throw io_error(at + "dimensions " + detail::dims_str(a.dims) + " describe " +
                   (overflow ? std::string("more than 2^64") : std::to_string(total)) +
                   " bytes of data, above the limit of " + std::to_string(limits.max_bytes) + " bytes");
  const std::uint64_t header = 4 + 4 * rank;
  if (std::uint64_t fs = 0; src.known_size(fs)) {  // plain data: its size must be exact, checked before allocating
    if (fs != header + total)
      throw io_error(at + (fs < header + total ? "truncated" : "size mismatch") + ": dimensions " +
                     detail::dims_str(a.dims) + " need " + std::to_string(total) + " bytes of data, the file has " +
                     std::to_string(fs - header));
  }
  // Read in bounded steps, so a hostile header on a short (compressed) stream cannot make us
  // allocate what it claims.
  constexpr std::size_t step = std::size_t(1) << 22;
  a.bytes.reserve(std::size_t(std::min<std::uint64_t>(total, 16 * step)));
  while (a.bytes.size() < total) {
    const std::size_t old = a.bytes.size();
    const std::size_t want = std::size_t(std::min<std::uint64_t>(total - old, step));
    a.bytes.resize(old + want);
    const std::size_t got = src.read(a.bytes.data() + old, want);
    a.bytes.resize(old + got);
    if (got < want) break;
  }
  if (a.bytes.size() < total)
    throw io_error(at + "truncated: dimensions " + detail::dims_str(a.dims) + " need " + std::to_string(total) +
                   " bytes of data, the file has " + std::to_string(a.bytes.size()) + src.stream_error());
  std::uint8_t extra;
  if (src.read(&extra, 1) != 0)
    throw io_error(at + "size mismatch: extra bytes after the " + std::to_string(total) + " bytes of data that dimensions " +
                   detail::dims_str(a.dims) + " describe");
  if (const std::string e = src.stream_error(); !e.empty())  // e.g. a missing or bad gzip trailer
    throw io_error(at + "corrupt or truncated gzip stream" + e);
  detail::byteswap_elements(a.bytes, es);
  return a;
}
}  // namespace detail

/// Reads any IDX file (see the header comment for what is checked).
inline idx_array read_idx(const std::filesystem::path& path, const idx_limits& limits = {}) {
  detail::idx_source src(path);
  return detail::read_idx_from(src, limits);
}
/// The same from memory (plain IDX bytes, or gzip when zlib is available); `name` appears in messages.
inline idx_array parse_idx(const void* data, std::size_t size, const std::string& name = "<idx>",
                           const idx_limits& limits = {}) {
  detail::idx_source src(data, size, name);
  return detail::read_idx_from(src, limits);
}

/// Images [N, rows, cols] or [N, C, rows, cols] as [N, C, rows, cols]; bytes scaled to [0, 1].
template <class T = float>
xt::xarray<T> read_idx_images(const std::filesystem::path& path, const idx_limits& limits = {}) {
  const idx_array a = read_idx(path, limits);
  if (a.dims.size() != 3 && a.dims.size() != 4)
    throw io_error(detail::where(path) + "expected images [N, rows, cols], got dimensions " + detail::dims_str(a.dims));
  for (std::size_t i = 1; i < a.dims.size(); ++i)
    if (a.dims[i] == 0) throw io_error(detail::where(path) + "image dimensions " + detail::dims_str(a.dims) + " contain a zero");
  std::vector<std::size_t> shp = a.dims;
  if (shp.size() == 3) shp.insert(shp.begin() + 1, std::size_t(1));
  xt::xarray<T> x = xt::xarray<T>::from_shape(shp);
  T* out = x.data();
  if (a.type == idx_type::u8) {
    std::array<T, 256> lut;
    for (int v = 0; v < 256; ++v) lut[std::size_t(v)] = T(v) / T(255);
    for (std::size_t i = 0; i < a.bytes.size(); ++i) out[i] = lut[a.bytes[i]];
  } else {
    for (std::size_t i = 0, n = a.size(); i < n; ++i) out[i] = a.at<T>(i);
  }
  return x;
}

/// Labels [N] of unsigned bytes.
inline std::vector<std::uint8_t> read_idx_labels(const std::filesystem::path& path, const idx_limits& limits = {}) {
  idx_array a = read_idx(path, limits);
  if (a.dims.size() != 1)
    throw io_error(detail::where(path) + "expected labels [N], got dimensions " + detail::dims_str(a.dims));
  if (a.type != idx_type::u8) {
    char buf[80];
    std::snprintf(buf, sizeof buf, "expected unsigned-byte labels (type 0x08), got type 0x%02x", unsigned(a.type));
    throw io_error(detail::where(path) + buf);
  }
  return std::move(a.bytes);
}

template <class T = float>
struct labelled_images {
  xt::xarray<T> images;              // [N, C, rows, cols]
  std::vector<std::uint8_t> labels;  // N
  std::size_t size() const { return labels.size(); }
};

/// The `split` ("train" or "t10k") of an MNIST-format directory: <split>-images-idx3-ubyte[.gz]
/// and <split>-labels-idx1-ubyte[.gz] (also the "images.idx3-ubyte" spelling).  Keeps the first
/// `limit` samples when limit > 0.  Throws io_error for a missing or bad file, data_error when the
/// two files disagree on the number of samples.
template <class T = float>
labelled_images<T> load_mnist(const std::filesystem::path& dir, const std::string& split, std::size_t limit = 0,
                              const idx_limits& limits = {}) {
  auto find = [&](const char* kind, const char* idx) {
    for (const std::string& base : {split + "-" + kind + "-" + idx + "-ubyte", split + "-" + kind + "." + idx + "-ubyte"})
      for (const char* ext : {"", ".gz"}) {
        std::error_code ec;
        const auto p = dir / (base + ext);
        if (std::filesystem::is_regular_file(p, ec)) return p;
      }
    throw io_error(dir.string() + ": no " + split + "-" + kind + "-" + idx + "-ubyte[.gz] file");
  };
  const auto ip = find("images", "idx3"), lp = find("labels", "idx1");
  labelled_images<T> d;
  d.images = read_idx_images<T>(ip, limits);
  d.labels = read_idx_labels(lp, limits);
  if (d.images.shape()[0] != d.labels.size())
    throw data_error(ip.string() + " has " + std::to_string(d.images.shape()[0]) + " images but " + lp.string() +
                     " has " + std::to_string(d.labels.size()) + " labels");
  if (limit && limit < d.labels.size()) {
    auto shp = d.images.shape();
    std::vector<std::size_t> s(shp.begin(), shp.end());
    const std::size_t per = d.images.size() / s[0];
    s[0] = limit;
    xt::xarray<T> head = xt::xarray<T>::from_shape(s);
    std::copy_n(d.images.data(), limit * per, head.data());
    d.images = std::move(head);
    d.labels.resize(limit);
  }
  return d;
}

}  // namespace nnlens::io
