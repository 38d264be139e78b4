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
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <span>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nnlens/core/error.hpp"
#include "nnlens/difftest/black_box.hpp"

extern char** environ;

namespace nnlens::difftest {

/// The external process could not be started, died, or did not answer in time.
class process_error : public error {
 public:
  using error::error;
};

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

/// Blocks SIGPIPE in this thread while alive; consume() swallows a SIGPIPE raised meanwhile by
/// our own write to a closed pipe (unless one was already pending before).
class sigpipe_guard {
 public:
  sigpipe_guard() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &set_, &old_);
    sigset_t pend;
    sigemptyset(&pend);
    sigpending(&pend);
    was_pending_ = sigismember(&pend, SIGPIPE) == 1;
  }
  sigpipe_guard(const sigpipe_guard&) = delete;
  sigpipe_guard& operator=(const sigpipe_guard&) = delete;
  void consume() {
    if (was_pending_) return;
    sigset_t pend;
    sigemptyset(&pend);
    sigpending(&pend);
    if (sigismember(&pend, SIGPIPE) != 1) return;
    const timespec zero{0, 0};
    while (sigtimedwait(&set_, nullptr, &zero) < 0 && errno == EINTR) {
    }
  }
  ~sigpipe_guard() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }

 private:
  sigset_t set_, old_;
  bool was_pending_ = false;
};

inline std::string signal_name(int sig) {
  switch (sig) {
    case SIGKILL: return "SIGKILL";
    case SIGSEGV: return "SIGSEGV";
    case SIGABRT: return "SIGABRT";
    case SIGTERM: return "SIGTERM";
    case SIGPIPE: return "SIGPIPE";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGINT: return "SIGINT";
    default: return "signal " + std::to_string(sig);
  }
}

inline std::string describe_status(int status) {
  if (WIFEXITED(status)) {
    const int code = WEXITSTATUS(status);
    if (code > 128 && code < 128 + 32)  // how /bin/sh reports a command that a signal killed
      return nnlens::detail::concat("exited with status ", code, " (the shell's code for ", signal_name(code - 128), ")");
    return nnlens::detail::concat("exited with status ", code);
  }
  if (WIFSIGNALED(status)) return nnlens::detail::concat("was killed by ", signal_name(WTERMSIG(status)));
  return "stopped";
}

/// Result of one pump of the pipes.
enum class io_status { done, eof, broken_pipe, timeout };

/// One running child: /bin/sh -c command in its own process group, stdin/stdout (and stderr)
/// connected to non-blocking pipes held by the parent.  The destructor shuts it down and reaps it.
class child_process {
 public:
  using clock = std::chrono::steady_clock;

  child_process(const std::string& command, bool capture_stderr) : command_(command) {
    int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
    auto close_all = [&] {
      for (int* p : {in, out, err})
        for (int k = 0; k < 2; ++k)
          if (p[k] >= 0) ::close(p[k]), p[k] = -1;
    };
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0 ||
        (capture_stderr && ::pipe2(err, O_CLOEXEC) != 0)) {
      const int e = errno;
      close_all();
      throw process_error(nnlens::detail::concat("process '", command_, "': cannot create pipes: ", std::strerror(e)));
    }
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&at);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    if (capture_stderr) posix_spawn_file_actions_adddup2(&fa, err[1], 2);
    sigset_t none, defaults;
    sigemptyset(&none);
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGPIPE);  // the child gets default SIGPIPE even if the parent ignores it
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setsigdefault(&at, &defaults);
    posix_spawnattr_setpgroup(&at, 0);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    std::string sh = "/bin/sh", dash_c = "-c", cmd = command_;
    char* argv[] = {sh.data(), dash_c.data(), cmd.data(), nullptr};
    pid_t pid = -1;
    const int rc = ::posix_spawn(&pid, "/bin/sh", &fa, &at, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    if (rc != 0) {
      close_all();
      throw process_error(nnlens::detail::concat("process '", command_, "': cannot start /bin/sh: ", std::strerror(rc)));
    }
    pid_ = pid;
    ::close(in[0]);
    ::close(out[1]);
    if (capture_stderr) ::close(err[1]);
    in_ = in[1];
    out_ = out[0];
    err_ = capture_stderr ? err[0] : -1;
    for (int fd : {in_, out_, err_})
      if (fd >= 0) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  }
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;
  ~child_process() { shutdown(std::chrono::milliseconds(1000)); }

  pid_t pid() const { return pid_; }
  bool reaped() const { return pid_ < 0; }
  /// The last bytes the child wrote to stderr (captured mode), trimmed.
  std::string stderr_tail() {
    drain_stderr();
    std::string s = err_tail_;
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
    return s;
  }

  /// Writes `w` and reads exactly `r.size()` bytes (both at once, so neither pipe can deadlock)
  /// until `deadline`.  `got` receives the number of bytes read.
  io_status transfer(std::span<const std::byte> w, std::span<std::byte> r, clock::time_point deadline, std::size_t& got) {
    std::size_t wd = 0;
    got = 0;
    while (wd < w.size() || got < r.size()) {
      pollfd fds[3];
      int nf = 0, iw = -1, ir = -1, ie = -1;
      if (wd < w.size()) {
        if (in_ < 0) return io_status::broken_pipe;
        iw = nf;
        fds[nf++] = {in_, POLLOUT, 0};
      }
      if (got < r.size()) {
        ir = nf;
        fds[nf++] = {out_, POLLIN, 0};
      }
      if (err_ >= 0) {
        ie = nf;
        fds[nf++] = {err_, POLLIN, 0};
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now()).count();
      if (left <= 0) return io_status::timeout;
      const int pr = ::poll(fds, nfds_t(nf), int(std::min<long long>(left, 1 << 30)));
      if (pr < 0) {
        if (errno == EINTR) continue;
        throw process_error(nnlens::detail::concat("process '", command_, "': poll failed: ", std::strerror(errno)));
      }
      if (pr == 0) return io_status::timeout;
      if (ie >= 0 && fds[ie].revents) drain_stderr();
      if (ir >= 0 && fds[ir].revents) {
        const ssize_t k = ::read(out_, r.data() + got, r.size() - got);
        if (k == 0) return io_status::eof;
        if (k > 0)
          got += std::size_t(k);
        else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
          return io_status::eof;
      }
      if (iw >= 0 && fds[iw].revents) {
        sigpipe_guard guard;
        const ssize_t k = ::write(in_, w.data() + wd, w.size() - wd);
        if (k >= 0) {
          wd += std::size_t(k);
        } else if (errno == EPIPE) {
          guard.consume();
          return io_status::broken_pipe;
        } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
          return io_status::broken_pipe;
        }
      }
    }
    return io_status::done;
  }

  /// Bytes the child has written beyond what was asked for (0 if none is available right now).
  std::size_t pending_output() {
    std::byte buf[4096];
    std::size_t total = 0;
    for (;;) {
      const ssize_t k = ::read(out_, buf, sizeof buf);
      if (k <= 0) break;
      total += std::size_t(k);
    }
    return total;
  }

  /// How the child ended, if it has ended within `wait`; kills and reaps it otherwise.  Returns a
  /// phrase such as "exited with status 3", "was killed by SIGSEGV", or "was still running (killed)".
  std::string reap_describe(std::chrono::milliseconds wait) {
    if (pid_ < 0) return last_status_;
    const auto until = clock::now() + wait;
    for (;;) {
      int st = 0;
      const pid_t r = ::waitpid(pid_, &st, WNOHANG);
      if (r == pid_) {
        ::kill(-pid_, SIGKILL);  // anything left in its process group
        pid_ = -1;
        last_status_ = describe_status(st);
        close_fds();
        return last_status_;
      }
      if (r < 0 && errno != EINTR) {
        pid_ = -1;
        close_fds();
        return last_status_ = "has ended (status unavailable)";
      }
      if (clock::now() >= until) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    kill_and_reap();
    return last_status_ = "was still running (killed)";
  }

  /// SIGKILL to the child's process group, then waitpid.
  void kill_and_reap() {
    if (pid_ < 0) return;
    ::kill(-pid_, SIGKILL);
    ::kill(pid_, SIGKILL);
    int st = 0;
    while (::waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    close_fds();
  }

  /// Closes stdin (the child should exit on EOF), waits up to `grace`, then kills; always reaps.
  void shutdown(std::chrono::milliseconds grace) {
    if (pid_ < 0) {
      close_fds();
      return;
    }
    if (in_ >= 0) ::close(in_), in_ = -1;
    reap_describe(grace);
  }

 private:
  void drain_stderr() {
    if (err_ < 0) return;
    char buf[4096];
    for (;;) {
      const ssize_t k = ::read(err_, buf, sizeof buf);
      if (k > 0) {
        err_tail_.append(buf, std::size_t(k));
        if (err_tail_.size() > 4096) err_tail_.erase(0, err_tail_.size() - 4096);
        continue;
      }
      if (k == 0) ::close(err_), err_ = -1;
      break;
    }
  }
  void close_fds() {
    if (err_ >= 0) drain_stderr();
    for (int* fd : {&in_, &out_, &err_})
      if (*fd >= 0) ::close(*fd), *fd = -1;
  }

  std::string command_;
  pid_t pid_ = -1;
  int in_ = -1, out_ = -1, err_ = -1;
  std::string err_tail_, last_status_ = "has ended";
};

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
