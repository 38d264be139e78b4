// nnlens/difftest/process.hpp -- a black box served by an external process over pipes.
//
// Differential testing often compares a model with a build of it that cannot be linked into the
// tester: firmware in an emulator, a TFLite interpreter, a Python framework.  process_model starts
// such a program (`/bin/sh -c COMMAND`) and talks to it over its stdin/stdout:
//
//   black_box g = process_black_box("qemu-arm ./fw_lenet --serve", {.request_timeout = 2s});
//   g(x, n, probs);                                   // like any other black box
//
// Protocol "nnlens-bb 1" (docs/difftest-process.md has a Python and a C++ child):
//   1. On start the child writes one ASCII line to stdout:  "nnlens-bb 1 <input_size> <classes>\n"
//      (the first bytes it writes; at most 255 characters before the newline).
//   2. Request (parent -> child stdin):  uint32 n  (n >= 1), then n * input_size float32.
//   3. Answer  (child -> parent stdout): uint32 n  (the same n), then n * classes float32: one
//      probability vector per input (or logits, with process_options::logits).
//      All integers and floats are little-endian (IEEE-754 binary32); there is no padding.
//   4. The parent closes the child's stdin to end the session; the child exits on EOF.
//   Anything the child writes to stderr is captured (the last 4 KiB appear in error messages) or
//   passed through, see process_options::capture_stderr.  Rows must be finite, each value in
//   [-tol, 1 + tol] and each row must sum to 1 within tol (tol = process_options::tolerance).
//
// requires: a POSIX system (posix_spawn, poll, pipes); the command runs via /bin/sh -c in its own
//           process group (so timeouts kill the whole pipeline, e.g. `sh -c "python3 x.py"`).
// ensures:  the parent never hangs: every read and write waits at most the startup or request
//           timeout (poll), then the child's process group is killed with SIGKILL and reaped;
//           a child that dies mid-request gives EOF/EPIPE, never SIGPIPE (SIGPIPE is blocked in
//           the writing thread around each write and a SIGPIPE raised by it is consumed); every
//           child is reaped with waitpid (no zombies), also by the destructor.
// throws:  process_error (a nnlens::error) when the child cannot start, exits or is killed, or
//          times out: the message names the command, the timeout or exit status, and the tail of
//          its stderr.  data_error when it writes garbage: a wrong header, a wrong count, NaN/Inf,
//          values outside [0,1], rows not summing to 1; shape_error when the header's sizes differ
//          from the expected ones.  After a framing error, crash or timeout the child is killed;
//          with restart = true (default) the next request starts a fresh child, otherwise every
//          later request throws process_error.  A value error (NaN, bad sum) keeps the child.
#pragma once

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "nnlens/core/error.hpp"
#include "nnlens/difftest/black_box.hpp"
#include "nnlens/difftest/child_process.hpp"

namespace nnlens::difftest {

struct process_options {
  std::chrono::milliseconds startup_timeout{10000};  // until the header line has arrived
  std::chrono::milliseconds request_timeout{10000};  // per request (one batch of <= max_batch)
  std::chrono::milliseconds shutdown_timeout{1000};  // after closing stdin, before SIGKILL
  bool restart = true;          // after a crash/timeout/framing error, start a fresh child next time
  bool logits = false;          // the child writes logits: the parent applies softmax (no sum check)
  double tolerance = 1e-2;      // probabilities: each in [-tol, 1+tol], each row sums to 1 +- tol
  bool capture_stderr = true;   // false: the child inherits the parent's stderr
  std::size_t max_batch = 0;    // split larger requests into batches of at most this many (0: no limit)
  std::size_t input_size = 0;   // expected sizes (0: take the header's); a mismatch is a shape_error
  std::size_t classes = 0;
};

namespace detail {

inline constexpr const char* protocol_magic = "nnlens-bb";
inline constexpr unsigned protocol_version = 1;

inline void put_u32(std::byte* p, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = std::byte((v >> (8 * i)) & 0xffu);
}
inline std::uint32_t get_u32(const std::byte* p) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= std::uint32_t(std::to_integer<unsigned>(p[i])) << (8 * i);
  return v;
}
inline void put_f32(std::byte* p, float f) { put_u32(p, std::bit_cast<std::uint32_t>(f)); }
inline float get_f32(const std::byte* p) { return std::bit_cast<float>(get_u32(p)); }

inline std::string printable(const std::string& s) {
  std::string o;
  for (unsigned char c : s) {
    if (c >= 32 && c < 127) {
      o += char(c);
    } else {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      o += b;
    }
  }
  return o;
}

}  // namespace detail

/// A model served by an external process (see the header comment for the protocol).  predict()
/// may be called from several threads: requests are serialised by a mutex.
class process_model {
 public:
  using clock = std::chrono::steady_clock;

  /// Starts the child and reads its header (throws process_error / data_error / shape_error).
  explicit process_model(std::string command, process_options options = {})
      : command_(std::move(command)), opt_(options) {
    if (command_.empty()) throw value_error("process_model: empty command");
    if (!(opt_.tolerance >= 0)) throw value_error("process_model: tolerance must be >= 0");
    start();
  }
  process_model(const process_model&) = delete;
  process_model& operator=(const process_model&) = delete;
  ~process_model() {
    if (child_) child_->shutdown(opt_.shutdown_timeout);
  }

  const std::string& command() const { return command_; }
  const process_options& options() const { return opt_; }
  std::size_t input_size() const { return input_size_; }
  std::size_t classes() const { return classes_; }
  /// Children started so far (1 + restarts).
  std::size_t starts() const {
    std::lock_guard lock(mu_);
    return starts_;
  }
  /// The running child's pid, or -1 when none is running.
  pid_t pid() const {
    std::lock_guard lock(mu_);
    return child_ ? child_->pid() : -1;
  }
  bool running() const { return pid() > 0; }

  /// x: n * input_size floats; probs: n * classes floats (shape_error otherwise).
  void predict(std::span<const float> x, std::size_t n, std::span<float> probs) {
    if (x.size() != n * input_size_ || probs.size() != n * classes_)
      throw shape_error(nnlens::detail::concat("process '", command_, "': ", n, " inputs need ", n * input_size_,
                                               " input and ", n * classes_, " output floats, got ", x.size(), " and ",
                                               probs.size()));
    std::lock_guard lock(mu_);
    if (!child_) {
      if (!opt_.restart)
        throw process_error(nnlens::detail::concat("process '", command_,
                                                   "': the child is not running (restart is off); it ", last_failure_));
      start();
    }
    const std::size_t step = opt_.max_batch ? opt_.max_batch : std::max<std::size_t>(n, 1);
    for (std::size_t i0 = 0; i0 < n; i0 += step) {
      const std::size_t m = std::min(step, n - i0);
      request(x.subspan(i0 * input_size_, m * input_size_), m, probs.subspan(i0 * classes_, m * classes_));
    }
  }

  /// Closes the child's stdin and reaps it (waits at most shutdown_timeout, then SIGKILL).  The
  /// next predict starts a new child if restart is on.
  void stop() {
    std::lock_guard lock(mu_);
    if (child_) child_->shutdown(opt_.shutdown_timeout);
    child_.reset();
    last_failure_ = "was stopped";
  }

 private:
  std::string where() const { return nnlens::detail::concat("process '", command_, "'"); }
  std::string with_stderr(detail::child_process& c) {
    const std::string t = c.stderr_tail();
    return t.empty() ? std::string() : nnlens::detail::concat("; its stderr ends with: ", detail::printable(t));
  }

  /// Kills the child and throws E(message + exit description + stderr).
  template <class E>
  [[noreturn]] void fail(std::string msg, bool wait_for_exit = false) {
    std::string status;
    std::string err;
    if (child_) {
      status = wait_for_exit ? child_->reap_describe(std::chrono::milliseconds(200))
                             : (child_->kill_and_reap(), std::string("was killed"));
      err = with_stderr(*child_);
    }
    child_.reset();
    last_failure_ = nnlens::detail::concat(status, " after: ", msg);
    throw E(nnlens::detail::concat(where(), ": ", msg, "; the child (", status.empty() ? "gone" : status, ")", err));
  }

  void start() {
    child_ = std::make_unique<detail::child_process>(command_, opt_.capture_stderr);
    ++starts_;
    const auto deadline = clock::now() + opt_.startup_timeout;
    std::string line;
    for (;;) {
      std::byte b{};
      std::size_t got = 0;
      const auto st = child_->transfer({}, std::span<std::byte>(&b, 1), deadline, got);
      if (st == detail::io_status::timeout)
        fail<process_error>(nnlens::detail::concat("no header line within the startup timeout of ",
                                                   opt_.startup_timeout.count(), " ms (got '",
                                                   detail::printable(line), "')"));
      if (st != detail::io_status::done)
        fail<process_error>(nnlens::detail::concat("the child closed its stdout before sending the header line '",
                                                   detail::protocol_magic, " 1 <input_size> <classes>' (got '",
                                                   detail::printable(line), "')"),
                            true);
      if (char(b) == '\n') break;
      line += char(b);
      if (line.size() > 255)
        fail<data_error>(nnlens::detail::concat("wrong header: no newline in the first 256 bytes (expected '",
                                                detail::protocol_magic, " 1 <input_size> <classes>', got '",
                                                detail::printable(line.substr(0, 64)), "...')"));
    }
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::istringstream is(line);
    std::string magic, extra;
    long long version = -1, isz = -1, ncls = -1;
    is >> magic >> version >> isz >> ncls;
    const bool parsed = bool(is) && !(is >> extra);
    if (magic != detail::protocol_magic || !parsed || isz <= 0 || ncls <= 0)
      fail<data_error>(nnlens::detail::concat("wrong header: expected '", detail::protocol_magic,
                                              " 1 <input_size> <classes>' with positive sizes, got '",
                                              detail::printable(line), "'"));
    if (version != detail::protocol_version)
      fail<data_error>(nnlens::detail::concat("unsupported protocol version ", version, " in header '",
                                              detail::printable(line), "' (this parent speaks version ",
                                              detail::protocol_version, ")"));
    const std::size_t want_in = input_size_ ? input_size_ : opt_.input_size;
    const std::size_t want_cls = classes_ ? classes_ : opt_.classes;
    if ((want_in && std::size_t(isz) != want_in) || (want_cls && std::size_t(ncls) != want_cls))
      fail<shape_error>(nnlens::detail::concat("header '", detail::printable(line), "' announces ", isz, " inputs and ",
                                               ncls, " classes, expected ", want_in ? want_in : std::size_t(isz),
                                               " and ", want_cls ? want_cls : std::size_t(ncls)));
    input_size_ = std::size_t(isz);
    classes_ = std::size_t(ncls);
  }

  void request(std::span<const float> x, std::size_t n, std::span<float> probs) {
    if (n > 0xffffffffu) throw value_error(where() + ": a request of more than 2^32-1 inputs; set max_batch");
    wbuf_.resize(4 + 4 * n * input_size_);
    detail::put_u32(wbuf_.data(), std::uint32_t(n));
    for (std::size_t i = 0; i < n * input_size_; ++i) detail::put_f32(wbuf_.data() + 4 + 4 * i, x[i]);
    rbuf_.resize(4 + 4 * n * classes_);
    const auto deadline = clock::now() + opt_.request_timeout;
    std::size_t got = 0;
    // The count first: a child that answers a different count is caught before we wait for rows.
    auto st = child_->transfer(wbuf_, std::span<std::byte>(rbuf_.data(), 4), deadline, got);
    std::size_t got_rows = 0;
    if (st == detail::io_status::done) {
      const std::uint32_t m = detail::get_u32(rbuf_.data());
      if (m != n)
        fail<data_error>(nnlens::detail::concat("wrong count: asked for ", n, " answers, the child announced ", m));
      st = child_->transfer({}, std::span<std::byte>(rbuf_.data() + 4, rbuf_.size() - 4), deadline, got_rows);
      got += got_rows;
    }
    if (st == detail::io_status::timeout)
      fail<process_error>(nnlens::detail::concat("no answer to a request of ", n, " inputs within the request timeout of ",
                                                 opt_.request_timeout.count(), " ms (got ", got, " of ", rbuf_.size(),
                                                 " bytes)"));
    if (st != detail::io_status::done)
      fail<process_error>(nnlens::detail::concat(st == detail::io_status::eof ? "end of output" : "broken pipe",
                                                 " during a request of ", n, " inputs (got ", got, " of ", rbuf_.size(),
                                                 " answer bytes)"),
                          true);
    if (const std::size_t extra = child_->pending_output())
      fail<data_error>(nnlens::detail::concat("the child wrote ", extra, " bytes more than the ", rbuf_.size(),
                                              "-byte answer to a request of ", n, " inputs"));
    for (std::size_t i = 0; i < n * classes_; ++i) probs[i] = detail::get_f32(rbuf_.data() + 4 + 4 * i);
    check_rows(probs, n);
  }

  /// Value checks on a correctly framed answer: the child stays up (the stream is in sync).
  void check_rows(std::span<float> probs, std::size_t n) const {
    const double tol = opt_.tolerance;
    for (std::size_t r = 0; r < n; ++r) {
      const std::span<float> row = probs.subspan(r * classes_, classes_);
      double sum = 0;
      for (std::size_t c = 0; c < classes_; ++c) {
        const float v = row[c];
        if (!std::isfinite(v))
          throw data_error(nnlens::detail::concat(where(), ": answer ", r, " class ", c, " is ",
                                                  std::isnan(v) ? "NaN" : "Inf"));
        if (!opt_.logits && (v < -tol || v > 1 + tol))
          throw data_error(nnlens::detail::concat(where(), ": answer ", r, " class ", c, " is ", v,
                                                  ", not a probability in [0, 1]"));
        sum += v;
      }
      if (opt_.logits) {
        softmax_rows(row, classes_);
      } else if (std::abs(sum - 1.0) > tol) {
        throw data_error(nnlens::detail::concat(where(), ": answer ", r, " sums to ", sum,
                                                ", not to 1 (tolerance ", tol, "; logits need process_options::logits)"));
      }
    }
  }

  std::string command_;
  process_options opt_;
  std::size_t input_size_ = 0, classes_ = 0;
  mutable std::mutex mu_;
  std::unique_ptr<detail::child_process> child_;
  std::size_t starts_ = 0;
  std::string last_failure_;
  std::vector<std::byte> wbuf_, rbuf_;
};

/// A black box backed by `model` (shared: copies of the black box use the same child).
inline black_box as_black_box(std::shared_ptr<process_model> model, std::string name = {}) {
  black_box b;
  b.input_size = model->input_size();
  b.classes = model->classes();
  b.name = name.empty() ? model->command() : std::move(name);
  b.predict = [m = std::move(model)](std::span<const float> x, std::size_t n, std::span<float> probs) {
    m->predict(x, n, probs);
  };
  return b;
}

/// Starts `command` (via /bin/sh -c) and returns it as a black box; see the header comment.
inline black_box process_black_box(std::string command, process_options options = {}, std::string name = {}) {
  return as_black_box(std::make_shared<process_model>(std::move(command), options), std::move(name));
}

}  // namespace nnlens::difftest
