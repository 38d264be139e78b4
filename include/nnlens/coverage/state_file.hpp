// nnlens/coverage/state_file.hpp -- the text format of prepared coverage states (neuron bounds,
// surprise models): a header line, "key value" lines, one "end" line.
//
//   detail::write_doubles(os, v)      space-separated, shortest round-trip form (std::to_chars)
//   detail::end_state(os, "save_x")   the closing "end" line; io_error if the stream failed
//   detail::cov_text_reader rd(is, "load_x", "nnlens-coverage-x 1");  the header read; rd.value("key"),
//                                     rd.u64_value, rd.f64, rd.doubles(s, n, what), rd.sizes, rd.end()
//   detail::check_fingerprint(stored, model_fingerprint(net), who)   the state belongs to net
//
// requires: the stream holds lines (\n, a trailing \r is dropped).
// ensures:  every double written reads back bit for bit; every failure of the reader is a
//           data_error naming the line ("load_x: line 7: ..."): a wrong header or key, a number
//           that does not parse or is not finite, a wrong count, a truncated file; sizes read from
//           the file never reserve memory before the values are there.
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <istream>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "nnlens/core/error.hpp"
#include "nnlens/network/fingerprint.hpp"

namespace nnlens::detail {

inline void write_doubles(std::ostream& os, std::span<const double> v) {
  char buf[64];
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) os << ' ';
    auto r = std::to_chars(buf, buf + sizeof buf, v[i]);
    os.write(buf, r.ptr - buf);
  }
}

/// Line-by-line reader of a prepared-state file; every failure is a data_error naming the line.
class cov_text_reader {
 public:
  cov_text_reader(std::istream& in, std::string what) : in_(in), what_(std::move(what)) {}
  /// Reads the header line first (header()): the opening of every load function.
  cov_text_reader(std::istream& in, std::string what, std::string_view expected_header) : cov_text_reader(in, std::move(what)) {
    header(expected_header);
  }
  data_error bad(const std::string& msg) const { return data_error(concat(what_, ": line ", line_no_, ": ", msg)); }
  std::string line(const char* expected) {
    if (!std::getline(in_, line_)) {
      ++line_no_;
      throw bad(concat("expected ", expected, ", got the end of the input (truncated?)"));
    }
    ++line_no_;
    if (!line_.empty() && line_.back() == '\r') line_.pop_back();
    return line_;
  }
  /// "key rest" -> rest
  std::string value(const char* key) {
    const std::string l = line(key);
    const std::string k = std::string(key) + " ";
    if (l.rfind(k, 0) != 0) throw bad(concat("expected '", key, " ...', got '", l.substr(0, 40), "'"));
    return l.substr(k.size());
  }
  std::uint64_t u64(std::string_view s, const char* what) const {
    std::uint64_t v = 0;
    auto r = std::from_chars(s.data(), s.data() + s.size(), v);
    if (r.ec != std::errc() || r.ptr != s.data() + s.size())
      throw bad(concat(what, " is not a non-negative integer: '", s.substr(0, 40), "'"));
    return v;
  }
  std::uint64_t u64_value(const char* key) { return u64(value(key), key); }
  double f64(std::string_view s, const char* what) const {
    double v = 0;
    auto r = std::from_chars(s.data(), s.data() + s.size(), v);
    if (r.ec != std::errc() || r.ptr != s.data() + s.size() || !std::isfinite(v))
      throw bad(concat(what, " is not a finite number: '", s.substr(0, 40), "'"));
    return v;
  }
  /// Exactly n space-separated numbers (finite doubles).
  std::vector<double> doubles(std::string_view s, std::size_t n, const char* what) const {
    std::vector<double> v;
    v.reserve(std::min<std::size_t>(n, s.size() / 2 + 1));  // n comes from the file: never trust it for memory
    const char* c = s.data();
    const char* e = c + s.size();
    while (c < e) {
      while (c < e && *c == ' ') ++c;
      if (c >= e) break;
      double d = 0;
      auto r = std::from_chars(c, e, d);
      if (r.ec != std::errc() || !std::isfinite(d) || (r.ptr < e && *r.ptr != ' '))
        throw bad(concat(what, ": value ", v.size(), " is not a finite number"));
      v.push_back(d);
      c = r.ptr;
      if (v.size() > n) break;
    }
    if (v.size() != n) throw bad(concat(what, ": expected ", n, " values, got ", v.size() > n ? "more" : std::to_string(v.size())));
    return v;
  }
  std::vector<std::size_t> sizes(std::string_view s, std::size_t n, const char* what) const {
    std::vector<std::size_t> v;
    std::size_t p = 0;
    while (p < s.size()) {
      while (p < s.size() && s[p] == ' ') ++p;
      if (p >= s.size()) break;
      std::size_t q = s.find(' ', p);
      if (q == std::string_view::npos) q = s.size();
      v.push_back(std::size_t(u64(s.substr(p, q - p), what)));
      p = q;
      if (v.size() > n) break;
    }
    if (v.size() != n) throw bad(concat(what, ": expected ", n, " integers"));
    return v;
  }
  /// The closing "end" line (a file cut inside its last number is caught here).
  void end() {
    if (line("the closing 'end'") != "end") throw bad("expected 'end'");
  }
  void header(std::string_view expected) {
    const std::string h = line("the header");
    if (h != expected) throw bad(concat("not a ", expected.substr(0, expected.size() - 2), " file (expected '", expected, "')"));
  }

 private:
  std::istream& in_;
  std::string what_;
  std::string line_;
  std::size_t line_no_ = 0;
};

/// The closing "end" line of a state written to os; io_error naming `who` if the stream failed.
inline void end_state(std::ostream& os, const char* who) {
  os << "end\n";
  if (!os) throw io_error(concat(who, ": write failed"));
}

inline void check_fingerprint(std::uint64_t stored, std::uint64_t net, const char* what) {
  if (stored != net)
    throw data_error(concat(what, ": made on another model (model fingerprint ", stored, ", this network's is ", net,
                            ": other layers, shapes or weights)"));
}

}  // namespace nnlens::detail
