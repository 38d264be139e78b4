// nnlens/io/csv.hpp -- samples as CSV: one sample per line, flattened row-major in the model's
// input layout (NCHW without the batch axis: c, then h, then w).
//
//   read_csv<T = float>(path, sample_shape, csv_options)        -> xt::xarray<T> [N, sample_shape...]
//   parse_csv<T = float>(text, sample_shape, name, csv_options) the same from memory (name in messages)
//   read_csv_rows / parse_csv_rows (same arguments)              -> csv_rows<T>{x, lines}: the samples and
//                                                                   the file line (1-based) of each
//   write_csv(path | ostream, y)                                y: [N, ...] -> N lines of size/N values
//
// Reading.  Values are separated by `delimiter` (default ','); spaces and tabs around a value, a
// trailing delimiter, blank lines, CRLF line ends and '#' comments (whole line or the rest of a
// line) are accepted; numbers in any float format (1, -2.5, 1e-3, +4.0E+2).
// The header (csv_options::header):
//   csv_header::detect (default)  the first non-blank line is a header only when EVERY value on it is
//                                 a non-number (x0,x1,label); a line with numbers and non-numbers
//                                 (0.1,abc), or numbers in another separator (1;2;3), is a data
//                                 line, and so an error naming the bad value
//   csv_header::present           the first non-blank line is a header, whatever it holds
//   csv_header::absent            every line is data
// sample_shape = shape() (rank 0) takes the column count from the first line: the result is [N, K].
// requires: sample_shape is fully known (or rank 0).
// ensures: every data line has exactly sample_shape.size() values, each a finite number in T's range.
// throws:  io_error "FILE:LINE:COLUMN: what" (COLUMN counts values from 1) for a line that does not
//          parse: a wrong number of values, a non-number, NaN or Inf ("is not a finite number"), a
//          finite number beyond T's range ("is finite but out of float range": read it as double;
//          "out of double range" beyond that; numbers too small for T read as 0), or values
//          that another separator splits into numbers ("fields separated by ';' -- nnlens reads
//          comma-separated values"; also tabs, spaces, '|', and ';' with decimal commas); "FILE: no
//          samples" when no data line remains; more than csv_options::max_values values.  Memory is
//          bounded by a small multiple of the text size.
// Writing prints each value in the shortest form that reads back exactly (std::to_chars).
#pragma once

#include <charconv>
#include <cmath>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <ostream>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
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

/// Samples read from CSV and the file line (1-based) each sample comes from.
template <class T>
struct csv_rows {
  xt::xarray<T> x;                 // [N, sample shape...]
  std::vector<std::size_t> lines;  // N line numbers
};

namespace detail {

inline std::string_view csv_trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

enum class csv_value { ok, not_number, not_finite, out_of_range, beyond_double };

/// Parses a whole token as a finite number of T's range.
template <class T>
csv_value csv_number(std::string_view s, T& out) {
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty() || s.front() == '+' || s.front() == ' ') return csv_value::not_number;
  double v = 0;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (r.ptr != s.data() + s.size() || (r.ec != std::errc{} && r.ec != std::errc::result_out_of_range))
    return csv_value::not_number;
  if (r.ec == std::errc::result_out_of_range) {
    // beyond double: too large, or so small that it underflows (1e-400 reads as 0, as 1e-50 does in float)
    long double w = 0;
    const auto q = std::from_chars(s.data(), s.data() + s.size(), w);
    if (q.ec != std::errc{} || !(std::fabs(w) < 1.0L)) return csv_value::beyond_double;
    v = double(w);
  }
  if (!std::isfinite(v)) return csv_value::not_finite;  // nan, inf
  if constexpr (!std::is_same_v<T, double>) {
    // values that round to T's largest finite value are in range (3.4028235e38 is FLT_MAX printed)
    constexpr double top = double(std::numeric_limits<T>::max());
    const double lim = top + (top - double(std::nextafter(std::numeric_limits<T>::max(), T(0)))) / 2;
    if (!(std::fabs(v) < lim)) return csv_value::out_of_range;
  }
  out = T(v);
  return csv_value::ok;
}

/// Whether a token reads as a number at all (nan, inf and out-of-range values included).
inline bool csv_numeric_text(std::string_view s) {
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  double v = 0;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  return !s.empty() && r.ptr == s.data() + s.size() && (r.ec == std::errc{} || r.ec == std::errc::result_out_of_range);
}

/// Splits l at c (runs of spaces and tabs when c == ' '); every piece must be a number (after
/// turning decimal commas into points when `comma_decimals`).  The count of pieces, 0 if not.
inline std::size_t csv_numbers_split_by(std::string_view l, char c, bool comma_decimals) {
  std::size_t n = 0, p = 0;
  auto is_sep = [&](char x) { return c == ' ' ? (x == ' ' || x == '\t') : x == c; };
  while (p <= l.size()) {
    std::size_t q = p;
    while (q < l.size() && !is_sep(l[q])) ++q;
    std::string_view t = csv_trim(l.substr(p, q - p));
    if (!t.empty() || c != ' ') {
      if (comma_decimals) {
        std::string u(t);
        for (char& x : u)
          if (x == ',') x = '.';
        if (!csv_numeric_text(u)) return 0;
      } else if (!csv_numeric_text(t)) {
        return 0;
      }
      ++n;
    }
    if (q == l.size()) break;
    p = q + 1;
    if (c == ' ')
      while (p < l.size() && is_sep(l[p])) ++p;
  }
  return n;
}

/// For a line that does not parse with `delim`: which other separator splits it into 2 or more
/// numbers, in words ("';'", "tabs", "spaces", ...), or "" when none does.
inline std::string csv_seen_separator(std::string_view l, char delim) {
  struct cand {
    char c;
    const char* words;
  };
  static constexpr cand cands[] = {{';', "';'"}, {'\t', "tabs"}, {'|', "'|'"}, {' ', "spaces"}, {',', "','"}};
  for (const auto& k : cands) {
    if (k.c == delim || l.find(k.c) == std::string_view::npos) continue;
    if (csv_numbers_split_by(l, k.c, false) >= 2) return k.words;
  }
  for (const auto& k : cands) {  // European style: 0,5;1,25
    if (k.c == delim || k.c == ',' || l.find(k.c) == std::string_view::npos) continue;
    if (csv_numbers_split_by(l, k.c, true) >= 2) return std::string(k.words) + " with decimal commas";
  }
  if (delim != ' ' && delim != '\t' && l.find(delim) == std::string_view::npos && csv_numbers_split_by(l, ' ', false) >= 2)
    return "spaces";
  return {};
}

inline std::string csv_separator_hint(std::string_view l, char delim) {
  const std::string seen = csv_seen_separator(l, delim);
  if (seen.empty()) return {};
  if (delim == ',')
    return "fields separated by " + seen + " -- nnlens reads comma-separated values" +
           (seen.find("decimal") != std::string::npos ? " with '.' as the decimal point" : "");
  return "fields separated by " + seen + " -- this reader expects '" + std::string(1, delim) + "'-separated values";
}

template <class T>
constexpr const char* csv_scalar_name() {
  return std::is_same_v<T, float> ? "float" : std::is_same_v<T, double> ? "double" : "the scalar type's";
}

}  // namespace detail

template <class T = float>
csv_rows<T> parse_csv_rows(std::string_view text, shape sample, const std::string& name = "<csv>",
                           const csv_options& opt = {}) {
  if (sample.rank != 0 && !sample.is_static())
    throw shape_error(nnlens::detail::concat(name, ": read_csv needs a fully known sample shape, got ", sample.str()));
  std::size_t K = sample.rank == 0 ? 0 : sample.size();
  if (sample.rank != 0 && K == 0) throw shape_error(name + ": the sample shape " + sample.str() + " is empty");
  std::vector<T> values;
  std::vector<std::size_t> lines;
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
    // A line that does not parse: say so, and name the separator when another one explains it.
    auto bad = [&](std::size_t col, const std::string& what) {
      const std::string hint = detail::csv_separator_hint(l, opt.delimiter);
      return io_error(hint.empty() ? where(col) + what : nnlens::detail::concat(where(col), hint, " (", what, ")"));
    };
    if (first) {
      first = false;
      bool header = opt.header == csv_header::present;
      if (opt.header == csv_header::detect) {
        // a header only when no value on the line is a number: "0.1,abc" is a data line with an error
        bool names = false, numbers = false;
        for (auto t : tok) {
          if (t.empty()) continue;
          if (detail::csv_numeric_text(t)) numbers = true;
          else names = true;
        }
        // ... and "1;2;3" is a data line in another separator, not a name
        header = names && !numbers && detail::csv_seen_separator(l, opt.delimiter).empty();
      }
      if (header) {
        if (K == 0) K = tok.size();
        continue;
      }
    }
    if (K == 0) K = tok.size();
    if (tok.size() != K)
      throw bad(std::min(tok.size(), K) + 1,
           nnlens::detail::concat("expected ", K, " values per sample",
                                  sample.rank ? " (sample shape " + sample.str() + ")" : std::string(), ", found ",
                                  tok.size()));
    if (values.size() + K > opt.max_values)
      throw io_error(nnlens::detail::concat(where(1), "more than ", opt.max_values, " values"));
    for (std::size_t i = 0; i < K; ++i) {
      T v{};
      const auto r = detail::csv_number(tok[i], v);
      if (r == detail::csv_value::ok) [[likely]] {
        values.push_back(v);
        continue;
      }
      if (r == detail::csv_value::out_of_range)
        throw bad(i + 1, nnlens::detail::concat("'", std::string(tok[i].substr(0, 40)), "' is finite but out of ",
                                                detail::csv_scalar_name<T>(), " range",
                                                std::is_same_v<T, float> ? " (read it in double precision: --precision f64)"
                                                                         : ""));
      if (r == detail::csv_value::beyond_double)
        throw bad(i + 1, nnlens::detail::concat("'", std::string(tok[i].substr(0, 40)), "' is out of double range"));
      throw bad(i + 1, nnlens::detail::concat("'", std::string(tok[i].substr(0, 40)), "' is not a finite number"));
    }
    lines.push_back(line_no);
    ++rows;
  }
  if (rows == 0) throw io_error(name + ": no samples (the file has no data line)");
  const shape s = sample.rank == 0 ? shape(K) : sample;
  csv_rows<T> out;
  out.x = xt::zeros<T>(s.with_batch(rows));
  std::copy(values.begin(), values.end(), out.x.data());
  out.lines = std::move(lines);
  return out;
}

template <class T = float>
xt::xarray<T> parse_csv(std::string_view text, shape sample, const std::string& name = "<csv>",
                        const csv_options& opt = {}) {
  return parse_csv_rows<T>(text, sample, name, opt).x;
}

template <class T = float>
csv_rows<T> read_csv_rows(const std::filesystem::path& path, shape sample, const csv_options& opt = {}) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw io_error(path.string() + ": is a directory, not a CSV file");
  std::ifstream f(path, std::ios::binary);
  if (!f) throw io_error(path.string() + ": cannot open");
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad()) throw io_error(path.string() + ": read error");
  return parse_csv_rows<T>(text, sample, path.string(), opt);
}

template <class T = float>
xt::xarray<T> read_csv(const std::filesystem::path& path, shape sample, const csv_options& opt = {}) {
  return read_csv_rows<T>(path, sample, opt).x;
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
