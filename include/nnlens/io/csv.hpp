// nnlens/io/csv.hpp -- samples as CSV: one sample per line, flattened row-major in the model's
// input layout (NCHW without the batch axis: c, then h, then w).
//
//   read_csv<T = float>(path, sample_shape, csv_options)        -> xt::xarray<T> [N, sample_shape...]
//   parse_csv<T = float>(text, sample_shape, name, csv_options) the same from memory (name in messages)
//   write_csv(path | ostream, y)                                y: [N, ...] -> N lines of size/N values
//
// Reading.  Values are separated by `delimiter` (default ','); spaces and tabs around a value, a
// trailing delimiter, blank lines, CRLF line ends and '#' comments (whole line or the rest of a
// line) are accepted; numbers in any float format (1, -2.5, 1e-3, +4.0E+2).  The first data line is
// a header when csv_header::present, or -- with csv_header::detect, the default -- when some value on
// it is not a number.  sample_shape = shape() (rank 0) takes the column count from the first row:
// the result is then [N, K].
// requires: sample_shape is fully known (or rank 0).
// ensures: every row has exactly sample_shape.size() values; otherwise, or for a non-number, a NaN
// or infinite value, no data row at all (an empty file), or more than csv_options::max_values
// values, io_error "FILE:LINE:COLUMN: what" (COLUMN counts values from 1).  Memory is bounded by a
// small multiple of the text size.
// Writing prints each value in the shortest form that reads back exactly (std::to_chars).
#pragma once

#include <charconv>
#include <cmath>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <ostream>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "nnlens/core/error.hpp"
#include "nnlens/core/shape.hpp"
#include "nnlens/core/tensor.hpp"

namespace nnlens::io {

enum class csv_header { detect, present, absent };

struct csv_options {
  char delimiter = ',';
  csv_header header = csv_header::detect;
  std::size_t max_values = std::size_t(1) << 30;  // cap on N * sample size
};

namespace detail {

inline std::string_view csv_trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

/// Parses a whole token as a finite number; false otherwise.
template <class T>
bool csv_number(std::string_view s, T& out) {
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty() || s.front() == '+' || s.front() == ' ') return false;
  double v = 0;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (r.ec != std::errc{} || r.ptr != s.data() + s.size() || !std::isfinite(v)) return false;
  if (!std::isfinite(T(v))) return false;
  out = T(v);
  return true;
}

/// Whether a token reads as a number at all (nan, inf and out-of-range values included).
inline bool csv_numeric_text(std::string_view s) {
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  double v = 0;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  return !s.empty() && r.ptr == s.data() + s.size() && (r.ec == std::errc{} || r.ec == std::errc::result_out_of_range);
}

}  // namespace detail

template <class T = float>
xt::xarray<T> parse_csv(std::string_view text, shape sample, const std::string& name = "<csv>",
                        const csv_options& opt = {}) {
  if (sample.rank != 0 && !sample.is_static())
    throw shape_error(nnlens::detail::concat(name, ": read_csv needs a fully known sample shape, got ", sample.str()));
  std::size_t K = sample.rank == 0 ? 0 : sample.size();
  if (sample.rank != 0 && K == 0) throw shape_error(name + ": the sample shape " + sample.str() + " is empty");
  std::vector<T> values;
  std::vector<std::string_view> tok;
  std::size_t pos = 0, line_no = 0, rows = 0;
  bool first = true;
  while (pos < text.size()) {
    const std::size_t nl = text.find('\n', pos);
    const std::size_t end = nl == std::string_view::npos ? text.size() : nl;
    std::string_view l = text.substr(pos, end - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    ++line_no;
    if (const std::size_t h = l.find('#'); h != std::string_view::npos) l = l.substr(0, h);
    l = detail::csv_trim(l);
    if (l.empty()) continue;
    tok.clear();
    std::size_t p = 0;
    while (true) {
      const std::size_t c = l.find(opt.delimiter, p);
      tok.push_back(detail::csv_trim(l.substr(p, c == std::string_view::npos ? std::string_view::npos : c - p)));
      if (c == std::string_view::npos) break;
      p = c + 1;
    }
    if (tok.size() > 1 && tok.back().empty()) tok.pop_back();  // trailing delimiter
    auto where = [&](std::size_t col) { return nnlens::detail::concat(name, ":", line_no, ":", col, ": "); };
    if (first) {
      first = false;
      bool header = opt.header == csv_header::present;
      if (opt.header == csv_header::detect) {
        for (auto t : tok)
          if (!t.empty() && !detail::csv_numeric_text(t)) header = true;  // a name, not a number
      }
      if (header) {
        if (K == 0) K = tok.size();
        continue;
      }
    }
    if (K == 0) K = tok.size();
    if (tok.size() != K)
      throw io_error(nnlens::detail::concat(where(std::min(tok.size(), K) + 1), "expected ", K, " values per sample",
                                            sample.rank ? " (sample shape " + sample.str() + ")" : std::string(),
                                            ", found ", tok.size()));
    if (values.size() + K > opt.max_values)
      throw io_error(nnlens::detail::concat(where(1), "more than ", opt.max_values, " values"));
    for (std::size_t i = 0; i < K; ++i) {
      T v;
      if (!detail::csv_number(tok[i], v))
        throw io_error(nnlens::detail::concat(where(i + 1), "'", std::string(tok[i].substr(0, 40)),
                                              "' is not a finite number"));
      values.push_back(v);
    }
    ++rows;
  }
  if (rows == 0) throw io_error(name + ": no samples (the file has no data line)");
  const shape s = sample.rank == 0 ? shape(K) : sample;
  xt::xarray<T> out = xt::zeros<T>(s.with_batch(rows));
  std::copy(values.begin(), values.end(), out.data());
  return out;
}

template <class T = float>
xt::xarray<T> read_csv(const std::filesystem::path& path, shape sample, const csv_options& opt = {}) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw io_error(path.string() + ": is a directory, not a CSV file");
  std::ifstream f(path, std::ios::binary);
  if (!f) throw io_error(path.string() + ": cannot open");
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad()) throw io_error(path.string() + ": read error");
  return parse_csv<T>(text, sample, path.string(), opt);
}

/// One line per sample (the leading axis), values flattened row-major, shortest exact form.
template <class E>
void write_csv(std::ostream& os, const E& y, char delimiter = ',') {
  const std::size_t N = y.dimension() == 0 ? 1 : y.shape()[0];
  const std::size_t K = N ? y.size() / N : 0;
  std::string s;
  char buf[64];
  auto it = y.begin();
  for (std::size_t n = 0; n < N; ++n) {
    for (std::size_t k = 0; k < K; ++k, ++it) {
      if (k) s += delimiter;
      const auto r = std::to_chars(buf, buf + sizeof buf, *it);
      s.append(buf, r.ptr);
    }
    s += '\n';
    if (s.size() > (1u << 20)) os << s, s.clear();
  }
  os << s;
  if (!os) throw io_error("write_csv: write failed");
}

template <class E>
void write_csv(const std::filesystem::path& path, const E& y, char delimiter = ',') {
  std::ofstream f(path, std::ios::binary);
  if (!f) throw io_error(path.string() + ": cannot open for writing");
  write_csv(f, y, delimiter);
  f.flush();
  if (!f) throw io_error(path.string() + ": write failed");
}

}  // namespace nnlens::io
