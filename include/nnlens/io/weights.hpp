// nnlens/io/weights.hpp -- save / load every parameter of a network (static or dynamic form).
//
//   save_weights(path, net [, metadata])      writes path atomically (path.tmp, then rename)
//   auto meta = load_weights(path, net)       fills an existing network of the same architecture
//   auto net  = load_weights<Net>(path)       a static network: initialised, then filled
//   read_weights_metadata(path)               the key/value metadata only
//
// Format "NNLW" version 2, little-endian:
//   "NNLW" u32 version u32 scalar_bytes(4|8) u32 metadata_count {u32 len, key, u32 len, value}*
//   u32 input_rank u64 dims[rank]   u32 layer_count
//   per layer: u32 name_len name  u32 out_rank u64 out_dims[rank]  u32 tensor_count
//              per tensor: u64 elements, then the elements (scalar_bytes each)
//              u32 buffer_count, then the buffers the same way (layer_traits<L>::buffers:
//              BatchNorm's running mean and variance, also inside a Residual)
//   u64 FNV-1a checksum of every byte before it
// Version 1 (nnlens before 0.3) has no buffer section: its files still load, and then leave the
// network's buffers as they are (a BatchNorm keeps its running statistics from initialise(): 0 and
// 1), which is why version 2 saves them.
// Layers without parameters are recorded too (name and output shape), so the whole architecture
// is compared.  Parameters are converted between float and double when the file's scalar differs.
//
// ensures: the network is left untouched unless the whole file is valid and matches it.
// throws:  io_error for an unreadable, truncated, corrupt (bad magic, version, checksum, counts
//          larger than the file) file, naming the file; shape_error naming the first layer whose
//          type, output shape or parameter sizes differ from the network's; value_error for a
//          NaN/Inf parameter, or one beyond the network's scalar (a double file's 1e300 loaded as
//          float), naming the file, the layer (index and type), the parameter tensor and the element.
#pragma once

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "nnlens/core/error.hpp"
#include "nnlens/network/parameters.hpp"

namespace nnlens::io {

using weights_metadata = std::map<std::string, std::string>;

namespace detail {

inline constexpr char weights_magic[4] = {'N', 'N', 'L', 'W'};
inline constexpr std::uint32_t weights_version = 2;
inline constexpr std::uint32_t weights_min_version = 1;  // read: version 1 has no buffer section

inline std::uint64_t fnv1a(const std::uint8_t* p, std::size_t n) {
  std::uint64_t h = 1469598103934665603ull;
  for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

class weights_writer {
 public:
  template <class U>
  void put(U v) {
    static_assert(std::is_arithmetic_v<U>);
    std::uint8_t b[sizeof(U)];
    std::memcpy(b, &v, sizeof(U));
    if constexpr (std::endian::native == std::endian::big) std::reverse(b, b + sizeof(U));
    buf.insert(buf.end(), b, b + sizeof(U));
  }
  void str(std::string_view s) {
    put(std::uint32_t(s.size()));
    buf.insert(buf.end(), s.begin(), s.end());
  }
  void shp(const shape& s) {
    put(std::uint32_t(s.rank));
    for (std::size_t i = 0; i < s.rank; ++i) put(std::uint64_t(s[i]));
  }
  std::vector<std::uint8_t> buf;
};

class weights_reader {
 public:
  weights_reader(const std::uint8_t* p, std::size_t n, std::string file) : p_(p), n_(n), file_(std::move(file)) {}
  template <class U>
  U get(const char* what) {
    need(sizeof(U), what);
    std::uint8_t b[sizeof(U)];
    std::memcpy(b, p_ + pos_, sizeof(U));
    if constexpr (std::endian::native == std::endian::big) std::reverse(b, b + sizeof(U));
    pos_ += sizeof(U);
    U v;
    std::memcpy(&v, b, sizeof(U));
    return v;
  }
  std::string str(const char* what) {
    const std::uint32_t len = get<std::uint32_t>(what);
    need(len, what);
    std::string s(reinterpret_cast<const char*>(p_ + pos_), len);
    pos_ += len;
    return s;
  }
  shape shp(const char* what) {
    const std::uint32_t rank = get<std::uint32_t>(what);
    if (rank != 1 && rank != 3) fail(concat_("invalid rank ", rank, " in ", what));
    std::size_t d[3] = {1, 1, 1};
    for (std::uint32_t i = 0; i < rank; ++i) {
      const std::uint64_t v = get<std::uint64_t>(what);
      if (v == 0 || v > (std::uint64_t(1) << 40)) fail(concat_("invalid extent ", v, " in ", what));
      d[i] = std::size_t(v);
    }
    return rank == 1 ? shape(d[0]) : shape(d[0], d[1], d[2]);
  }
  const std::uint8_t* take(std::uint64_t bytes, const char* what) {
    need(bytes, what);
    const std::uint8_t* q = p_ + pos_;
    pos_ += std::size_t(bytes);
    return q;
  }
  std::size_t remaining() const { return n_ - pos_; }
  std::size_t pos() const { return pos_; }
  [[noreturn]] void fail(const std::string& what) const { throw io_error(file_ + ": " + what); }
  void need(std::uint64_t bytes, const char* what) const {
    if (bytes > n_ - pos_)
      fail(concat_("truncated at byte ", pos_, " while reading ", what, " (", bytes, " bytes needed, ", n_ - pos_,
                   " left)"));
  }

 private:
  template <class... A>
  static std::string concat_(A&&... a) {
    return nnlens::detail::concat(std::forward<A>(a)...);
  }
  const std::uint8_t* p_;
  std::size_t n_, pos_ = 0;
  std::string file_;
};

inline std::uint64_t load_u64(const std::uint8_t* p) {
  std::uint64_t u;
  std::memcpy(&u, p, 8);
  if constexpr (std::endian::native == std::endian::big) u = __builtin_bswap64(u);
  return u;
}

struct layer_record {
  std::string name;
  shape out;
  std::vector<std::pair<std::uint64_t, const std::uint8_t*>> tensors;  // elements, data
  std::vector<std::pair<std::uint64_t, const std::uint8_t*>> buffers;  // version >= 2
};

struct weights_file {
  std::uint32_t version = weights_version;
  std::uint32_t scalar_bytes = 4;
  weights_metadata meta;
  shape input;
  std::vector<layer_record> layers;
  std::vector<std::uint8_t> storage;
};

inline weights_file parse_weights(const std::filesystem::path& path) {
  weights_file f;
  const std::string file = path.string();
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw io_error(file + ": is a directory, not a weights file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw io_error(file + ": cannot open (" + std::strerror(errno) + ")");
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0) throw io_error(file + ": cannot determine the file size");
  if (std::uint64_t(size) > (std::uint64_t(1) << 34)) throw io_error(file + ": larger than 16 GiB, not a weights file");
  in.seekg(0);
  f.storage.resize(std::size_t(size));
  if (size && !in.read(reinterpret_cast<char*>(f.storage.data()), size)) throw io_error(file + ": read error");
  weights_reader r(f.storage.data(), f.storage.size(), file);
  const std::uint8_t* magic = r.take(4, "the magic number");
  if (std::memcmp(magic, weights_magic, 4) != 0) r.fail("bad magic number (not an nnlens weights file)");
  const auto version = r.get<std::uint32_t>("the version");
  if (version < weights_min_version || version > weights_version)
    r.fail(nnlens::detail::concat("unsupported version ", version, " (this nnlens reads versions ", weights_min_version,
                                  " to ", weights_version, ")"));
  f.version = version;
  r.need(8, "the checksum");
  // Parse the body (everything before the checksum) with bounds checks, then verify the checksum.
  const std::size_t body = f.storage.size() - 8;
  weights_reader b(f.storage.data(), body, file);
  b.take(8, "the magic number");
  f.scalar_bytes = b.get<std::uint32_t>("the scalar size");
  if (f.scalar_bytes != 4 && f.scalar_bytes != 8)
    b.fail(nnlens::detail::concat("unsupported scalar size ", f.scalar_bytes, " (expected 4 or 8)"));
  const auto nmeta = b.get<std::uint32_t>("the metadata count");
  if (nmeta > b.remaining()) b.fail(nnlens::detail::concat("invalid metadata count ", nmeta));
  for (std::uint32_t i = 0; i < nmeta; ++i) {
    std::string k = b.str("a metadata key");
    f.meta[std::move(k)] = b.str("a metadata value");
  }
  f.input = b.shp("the input shape");
  const auto nlayers = b.get<std::uint32_t>("the layer count");
  if (nlayers > b.remaining()) b.fail(nnlens::detail::concat("invalid layer count ", nlayers));
  for (std::uint32_t l = 0; l < nlayers; ++l) {
    layer_record rec;
    rec.name = b.str("a layer name");
    rec.out = b.shp("a layer's output shape");
    const auto nt = b.get<std::uint32_t>("a parameter count");
    if (nt > b.remaining()) b.fail(nnlens::detail::concat("layer ", l, ": invalid parameter tensor count ", nt));
    for (std::uint32_t t = 0; t < nt; ++t) {
      const auto count = b.get<std::uint64_t>("a parameter size");
      if (count > b.remaining() / f.scalar_bytes)
        b.fail(nnlens::detail::concat("layer ", l, " (", rec.name, "): parameter ", t, " claims ", count,
                                      " elements, more than the file holds"));
      rec.tensors.emplace_back(count, b.take(count * f.scalar_bytes, "parameters"));
    }
    if (f.version >= 2) {
      const auto nb = b.get<std::uint32_t>("a buffer count");
      if (nb > b.remaining()) b.fail(nnlens::detail::concat("layer ", l, ": invalid buffer tensor count ", nb));
      for (std::uint32_t t = 0; t < nb; ++t) {
        const auto count = b.get<std::uint64_t>("a buffer size");
        if (count > b.remaining() / f.scalar_bytes)
          b.fail(nnlens::detail::concat("layer ", l, " (", rec.name, "): buffer ", t, " claims ", count,
                                        " elements, more than the file holds"));
        rec.buffers.emplace_back(count, b.take(count * f.scalar_bytes, "buffers"));
      }
    }
    f.layers.push_back(std::move(rec));
  }
  if (b.remaining() != 0) b.fail(nnlens::detail::concat(b.remaining(), " unexpected bytes after the last layer"));
  const std::uint64_t stored = load_u64(f.storage.data() + body);
  if (stored != fnv1a(f.storage.data(), body)) r.fail("checksum mismatch (the file is corrupt)");
  return f;
}

template <class T>
T load_scalar(const std::uint8_t* p, std::uint32_t bytes) {
  if (bytes == 4) {
    std::uint32_t u;
    std::memcpy(&u, p, 4);
    if constexpr (std::endian::native == std::endian::big) u = __builtin_bswap32(u);
    return T(std::bit_cast<float>(u));
  }
  return T(std::bit_cast<double>(load_u64(p)));
}

/// Whether v is finite and rounds to a finite T (values just above T's largest round down to it).
template <class T>
bool fits_scalar(double v) {
  if (!std::isfinite(v)) return false;
  if constexpr (sizeof(T) >= sizeof(double)) {
    return true;
  } else {
    constexpr double top = double(std::numeric_limits<T>::max());
    return std::fabs(v) < top + (top - double(std::nextafter(std::numeric_limits<T>::max(), T(0)))) / 2;
  }
}

}  // namespace detail

/// Writes every parameter of `net` (and `meta`) to `path`, atomically.  Throws io_error.
template <class Net>
void save_weights(const std::filesystem::path& path, const Net& net, const weights_metadata& meta = {}) {
  using T = network_scalar_t<Net>;
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "save_weights: float or double networks");
  detail::weights_writer w;
  w.buf = {std::uint8_t('N'), std::uint8_t('N'), std::uint8_t('L'), std::uint8_t('W')};
  w.put(detail::weights_version);
  w.put(std::uint32_t(sizeof(T)));
  w.put(std::uint32_t(meta.size()));
  for (const auto& [k, v] : meta) {
    w.str(k);
    w.str(v);
  }
  w.shp(input_shape_of(net));
  w.put(std::uint32_t(layer_count(net)));
  for_each_layer(net, [&](const auto& l, auto, shape, shape out) {
    using L = std::remove_cvref_t<decltype(l)>;
    w.str(layer_traits<L>::name);
    w.shp(out);
    if constexpr (HasParameters<L>) {
      const auto ps = layer_traits<L>::parameters(l);
      w.put(std::uint32_t(ps.size()));
      for (auto s : ps) {
        w.put(std::uint64_t(s.size()));
        for (T v : s) w.put(v);
      }
    } else {
      w.put(std::uint32_t(0));
    }
    if constexpr (HasBuffers<L>) {
      const auto bs = layer_traits<L>::buffers(l);
      w.put(std::uint32_t(bs.size()));
      for (auto s : bs) {
        w.put(std::uint64_t(s.size()));
        for (T v : s) w.put(v);
      }
    } else {
      w.put(std::uint32_t(0));
    }
  });
  w.put(detail::fnv1a(w.buf.data(), w.buf.size()));
  const std::filesystem::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw io_error(tmp.string() + ": cannot create (" + std::strerror(errno) + ")");
    out.write(reinterpret_cast<const char*>(w.buf.data()), std::streamsize(w.buf.size()));
    out.flush();
    if (!out) throw io_error(tmp.string() + ": write error");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    throw io_error(path.string() + ": cannot write (" + ec.message() + ")");
  }
}

/// The metadata stored with the weights.
inline weights_metadata read_weights_metadata(const std::filesystem::path& path) {
  return detail::parse_weights(path).meta;
}

/// Loads `path` into `net` (same architecture, parameters already allocated); returns the metadata.
template <class Net>
weights_metadata load_weights(const std::filesystem::path& path, Net& net) {
  using T = network_scalar_t<Net>;
  detail::weights_file f = detail::parse_weights(path);
  const std::string file = path.string() + ": ";
  if (!(f.input == input_shape_of(net)))
    throw shape_error(nnlens::detail::concat(file, "input shape ", f.input.str(), " in the file, ",
                                             input_shape_of(net).str(), " in the network"));
  if (f.layers.size() != layer_count(net))
    throw shape_error(nnlens::detail::concat(file, "the file has ", f.layers.size(), " layers, the network has ",
                                             layer_count(net)));
  // Check everything first, then copy: the network is untouched on error.
  for_each_layer(std::as_const(net), [&](const auto& l, auto idx, shape, shape out) {
    using L = std::remove_cvref_t<decltype(l)>;
    const auto& rec = f.layers[std::size_t(idx)];
    const std::string where = nnlens::detail::concat(file, "layer ", std::size_t(idx), " (", layer_traits<L>::name, "): ");
    if (rec.name != layer_traits<L>::name)
      throw shape_error(where + "the file has a " + rec.name + " layer here");
    if (!(rec.out == out))
      throw shape_error(where + "output shape " + rec.out.str() + " in the file, " + out.str() + " in the network");
    std::size_t k = 0;
    if constexpr (HasParameters<L>) {
      const auto ps = layer_traits<L>::parameters(l);
      if (rec.tensors.size() != ps.size())
        throw shape_error(nnlens::detail::concat(where, rec.tensors.size(), " parameter tensors in the file, ", ps.size(),
                                                 " in the network"));
      for (; k < ps.size(); ++k)
        if (rec.tensors[k].first != ps[k].size())
          throw shape_error(nnlens::detail::concat(where, "parameter ", k, " has ", rec.tensors[k].first,
                                                   " elements in the file, ", ps[k].size(), " in the network"));
    } else if (!rec.tensors.empty()) {
      throw shape_error(nnlens::detail::concat(where, rec.tensors.size(), " parameter tensors in the file, none in the network"));
    }
    if (f.version >= 2) {
      std::size_t nb = 0;
      if constexpr (HasBuffers<L>) {
        const auto bs = layer_traits<L>::buffers(l);
        nb = bs.size();
        if (rec.buffers.size() == nb)
          for (std::size_t j = 0; j < nb; ++j)
            if (rec.buffers[j].first != bs[j].size())
              throw shape_error(nnlens::detail::concat(where, "buffer ", j, " has ", rec.buffers[j].first,
                                                       " elements in the file, ", bs[j].size(), " in the network"));
      }
      if (rec.buffers.size() != nb)
        throw shape_error(nnlens::detail::concat(where, rec.buffers.size(), " buffer tensors in the file, ", nb,
                                                 " in the network"));
    }
  });
  Net staged = net;
  std::size_t li = 0;
  for_each_layer(staged, [&](auto& l, auto, shape, shape) {
    using L = std::remove_cvref_t<decltype(l)>;
    // every element finite, in the file and in T (a double file's 1e300 is +Inf as float)
    auto fill = [&](auto s, const std::uint8_t* p, const char* what, std::size_t k) {
      for (std::size_t i = 0; i < s.size(); ++i) {
        const double v = detail::load_scalar<double>(p + i * f.scalar_bytes, f.scalar_bytes);
        if (!detail::fits_scalar<T>(v))
          throw value_error(nnlens::detail::concat(
              file, "layer ", li, " (", layer_traits<L>::name, "): ", what, " ", k, " element ", i, " is ",
              std::isnan(v) ? std::string("NaN")
              : std::isinf(v) ? std::string(v > 0 ? "+Inf" : "-Inf")
                              : nnlens::detail::concat(v, ", beyond the network's ", sizeof(T) == 4 ? "float" : "scalar",
                                                       " range")));
        s[i] = T(v);
      }
    };
    if constexpr (HasParameters<L>) {
      std::size_t k = 0;
      for (auto s : layer_traits<L>::parameters(l)) {
        fill(s, f.layers[li].tensors[k].second, "parameter", k);
        ++k;
      }
    }
    if constexpr (HasBuffers<L>) {
      if (f.version >= 2) {
        std::size_t k = 0;
        for (auto s : layer_traits<L>::buffers(l)) {
          fill(s, f.layers[li].buffers[k].second, "buffer", k);
          ++k;
        }
      }
    }
    (void)fill;
    ++li;
  });
  net = std::move(staged);
  return f.meta;
}

/// A static network read from `path` (allocated by initialize(), then overwritten).
template <class Net>
  requires is_sequential_v<Net>
Net load_weights(const std::filesystem::path& path, weights_metadata* meta = nullptr) {
  Net net;
  initialize(net, 0);
  auto m = load_weights(path, net);
  if (meta) *meta = std::move(m);
  return net;
}

}  // namespace nnlens::io
