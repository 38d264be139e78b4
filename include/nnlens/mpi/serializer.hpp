// nnlens/mpi/serializer.hpp -- results as bytes, to send them between MPI ranks (nnlens::mpi).
//
//   template <> struct nnlens::mpi::serializer<R> {          // one specialisation per result type
//     static void write(byte_writer&, const R&);
//     static R read(byte_reader&);                            // throws io_error on bad bytes
//   };
//   std::vector<char> b = to_bytes(r);  R s = from_bytes<R>(b);
//
// The format is private to one run (every rank is the same binary on the same kind of machine):
// fixed-width little/big-endian as the host has it, doubles bit for bit, so a result survives the
// trip unchanged.  Arithmetic types, enums, std::string and std::vector of serialisable types have
// serialisers here; the analyses' results have theirs in mpi/slicing.hpp, mpi/coverage.hpp and
// mpi/difftest.hpp.  A type without one fails the Serializable concept, with a message naming it.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "nnlens/core/error.hpp"

namespace nnlens::mpi {

class byte_writer {
 public:
  template <class T>
    requires std::is_trivially_copyable_v<T>
  void raw(const T* p, std::size_t n) {
    const auto* b = reinterpret_cast<const char*>(p);
    buf_.insert(buf_.end(), b, b + n * sizeof(T));
  }
  template <class T>
    requires std::is_arithmetic_v<T> || std::is_enum_v<T>
  void put(T v) {
    raw(&v, 1);
  }
  void size(std::size_t n) { put(std::uint64_t(n)); }
  std::vector<char>& bytes() { return buf_; }
  std::vector<char> take() { return std::move(buf_); }

 private:
  std::vector<char> buf_;
};

class byte_reader {
 public:
  explicit byte_reader(std::span<const char> b) : b_(b) {}
  template <class T>
    requires std::is_trivially_copyable_v<T>
  void raw(T* p, std::size_t n) {
    need(n, sizeof(T));
    if (n) std::memcpy(static_cast<void*>(p), b_.data() + pos_, n * sizeof(T));
    pos_ += n * sizeof(T);
  }
  template <class T>
    requires std::is_arithmetic_v<T> || std::is_enum_v<T>
  T get() {
    T v;
    raw(&v, 1);
    return v;
  }
  /// A count of items of `item_bytes` each: checked against the bytes left (never trusted for
  /// memory).
  std::size_t size(std::size_t item_bytes = 1) {
    const std::uint64_t n = get<std::uint64_t>();
    if (item_bytes && n > (b_.size() - pos_) / item_bytes)
      throw io_error(detail::concat("mpi: a message says ", n, " items, only ", b_.size() - pos_, " bytes are left"));
    return std::size_t(n);
  }
  std::size_t left() const { return b_.size() - pos_; }

 private:
  std::span<const char> b_;
  std::size_t pos_ = 0;
  void need(std::size_t n, std::size_t item) const {
    if (item && n > (b_.size() - pos_) / item)
      throw io_error(detail::concat("mpi: a message ends early (", b_.size(), " bytes, need ", pos_ + n * item, ")"));
  }
};

/// Specialise for each result type that travels between ranks (undefined: not serialisable).
template <class T>
struct serializer;

template <class T>
concept Serializable = requires(byte_writer& w, byte_reader& r, const T& v) {
  serializer<T>::write(w, v);
  { serializer<T>::read(r) } -> std::same_as<T>;
};

template <class T>
  requires std::is_arithmetic_v<T> || std::is_enum_v<T>
struct serializer<T> {
  static void write(byte_writer& w, T v) { w.put(v); }
  static T read(byte_reader& r) { return r.get<T>(); }
};

template <>
struct serializer<std::string> {
  static void write(byte_writer& w, const std::string& s) {
    w.size(s.size());
    w.raw(s.data(), s.size());
  }
  static std::string read(byte_reader& r) {
    std::string s(r.size(), '\0');
    r.raw(s.data(), s.size());
    return s;
  }
};

template <class T>
struct serializer<std::vector<T>> {
  static void write(byte_writer& w, const std::vector<T>& v) {
    w.size(v.size());
    if constexpr (std::is_arithmetic_v<T>)
      w.raw(v.data(), v.size());
    else
      for (const auto& x : v) serializer<T>::write(w, x);
  }
  static std::vector<T> read(byte_reader& r) {
    if constexpr (std::is_arithmetic_v<T>) {
      std::vector<T> v(r.size(sizeof(T)));
      r.raw(v.data(), v.size());
      return v;
    } else {
      std::vector<T> v(r.size(1));
      for (auto& x : v) x = serializer<T>::read(r);
      return v;
    }
  }
};

template <class T>
void write(byte_writer& w, const T& v) {
  serializer<T>::write(w, v);
}
template <class T>
T read(byte_reader& r) {
  return serializer<T>::read(r);
}

/// v as bytes.
template <class T>
std::vector<char> to_bytes(const T& v) {
  static_assert(Serializable<T>, "mpi::to_bytes: the type has no mpi::serializer<T> specialisation");
  byte_writer w;
  serializer<T>::write(w, v);
  return w.take();
}

/// The value to_bytes wrote; io_error when the bytes are short or left over.
template <class T>
T from_bytes(std::span<const char> b) {
  static_assert(Serializable<T>, "mpi::from_bytes: the type has no mpi::serializer<T> specialisation");
  byte_reader r(b);
  T v = serializer<T>::read(r);
  if (r.left()) throw io_error(detail::concat("mpi: ", r.left(), " bytes left over after a value"));
  return v;
}

}  // namespace nnlens::mpi
