// nnlens/core/progress.hpp -- a progress bar for long loops (training epochs, analyses).
//
//   progress_bar bar("epoch 2/8", total);
//   bar.update(done, [&] { return "loss 0.3121  acc 88.7%"; });   // cheap when not redrawn
//   bar.finish("loss 0.3011  acc 89.0%");
//
// Draws  `epoch 2/8 [#########.........] 30016/60000  loss 0.3121  acc 88.7%  12.3s  ETA 12.0s`
// on stderr (or the given stream).  On a terminal the line is redrawn in place ('\r'), at most
// once per min_interval (0.1 s: about ten times per second); otherwise (a log file, a pipe) it
// prints plain lines: one every plain_interval seconds and the final one.  The field callback is
// only called when a line is actually drawn.
// ensures: finish() ends the line with '\n' exactly once; the destructor does it if finish() was
//          never called and something was drawn.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <functional>
#include <iostream>
#include <ostream>
#include <string>
#include <string_view>
#include <type_traits>

#if __has_include(<unistd.h>)
#include <unistd.h>
#define NNLENS_HAS_ISATTY 1
#endif

namespace nnlens {

struct progress_options {
  std::ostream* os = nullptr;    // nullptr: std::cerr
  int tty = -1;                  // -1: detect (stderr is a terminal), 0: plain lines, 1: redraw in place
  double min_interval = 0.1;     // seconds between redraws on a terminal
  double plain_interval = 10.0;  // seconds between plain lines otherwise
  std::size_t width = 24;        // characters of the bar itself
  std::function<double()> clock; // seconds since some origin; steady_clock when empty (tests inject)
};

/// "850ms", "12.3s", "4m05s", "1h02m".
inline std::string format_duration(double s) {
  char buf[32];
  if (!(s >= 0)) s = 0;
  if (s < 1)
    std::snprintf(buf, sizeof buf, "%.0fms", s * 1000);
  else if (s < 60)
    std::snprintf(buf, sizeof buf, "%.1fs", s);
  else if (s < 3600)
    std::snprintf(buf, sizeof buf, "%dm%02ds", int(s) / 60, int(s) % 60);
  else
    std::snprintf(buf, sizeof buf, "%dh%02dm", int(s) / 3600, (int(s) / 60) % 60);
  return buf;
}

/// True when stderr is an interactive terminal.
inline bool stderr_is_tty() {
#ifdef NNLENS_HAS_ISATTY
  return ::isatty(2) == 1;
#else
  return false;
#endif
}

class progress_bar {
 public:
  progress_bar(std::string label, std::size_t total, progress_options o = {})
      : label_(std::move(label)), total_(total), o_(std::move(o)) {
    if (!o_.os) o_.os = &std::cerr;
    if (o_.tty < 0) o_.tty = (o_.os == &std::cerr || o_.os == &std::clog) && stderr_is_tty();
    if (!o_.clock)
      o_.clock = [] {
        return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
      };
    start_ = o_.clock();
  }
  progress_bar(const progress_bar&) = delete;
  progress_bar& operator=(const progress_bar&) = delete;
  ~progress_bar() {
    if (drawn_ && !finished_ && o_.tty) *o_.os << '\n' << std::flush;
  }

  /// Reports progress; draws when due.  `fields` is a string or a callable returning one.
  template <class F>
  void update(std::size_t done, F&& fields) {
    if (finished_) return;
    const double now = o_.clock();
    const double interval = o_.tty ? o_.min_interval : o_.plain_interval;
    if (drawn_ ? now - last_ < interval : (!o_.tty && now - start_ < interval)) return;
    draw(done, now, call(fields), false);
  }
  void update(std::size_t done) { update(done, std::string_view{}); }

  /// Draws the final line (done = total) and ends it.
  template <class F>
  void finish(F&& fields) {
    if (finished_) return;
    draw(total_, o_.clock(), call(fields), true);
    finished_ = true;
  }
  void finish() { finish(std::string_view{}); }

  double elapsed() const { return o_.clock() - start_; }
  std::size_t redraws() const { return redraws_; }

  /// The line for `done` after `elapsed` seconds (no terminal control characters).
  std::string line(std::size_t done, double elapsed, std::string_view fields) const {
    done = std::min(done, total_);
    std::string s = label_;
    if (!s.empty()) s += ' ';
    const std::size_t fill = total_ ? o_.width * done / total_ : o_.width;
    s += '[';
    s.append(fill, '#');
    s.append(o_.width - fill, '.');
    s += "] ";
    s += std::to_string(done) + "/" + std::to_string(total_);
    if (!fields.empty()) {
      s += "  ";
      s += fields;
    }
    s += "  " + format_duration(elapsed);
    if (done < total_) {
      s += "  ETA ";
      s += done ? format_duration(elapsed * double(total_ - done) / double(done)) : std::string("?");
    }
    return s;
  }

 private:
  template <class F>
  static std::string call(F&& f) {
    if constexpr (std::is_invocable_v<F&>)
      return std::string(f());
    else
      return std::string(std::string_view(f));
  }
  void draw(std::size_t done, double now, const std::string& fields, bool final) {
    const std::string l = line(done, now - start_, fields);
    if (o_.tty) {
      *o_.os << '\r' << l << "\x1b[K";
      if (final) *o_.os << '\n';
    } else {
      *o_.os << l << '\n';
    }
    o_.os->flush();
    drawn_ = true;
    last_ = now;
    ++redraws_;
  }

  std::string label_;
  std::size_t total_;
  progress_options o_;
  double start_ = 0, last_ = 0;
  bool drawn_ = false, finished_ = false;
  std::size_t redraws_ = 0;
};

}  // namespace nnlens
