// nnlens/difftest/child_process.hpp -- a POSIX child process on pipes, with timeouts.
//
//   detail::child_process c("python3 serve.py", /*capture_stderr*/ true);   /bin/sh -c COMMAND in its
//                                  own process group; stdin, stdout (and stderr) on pipes
//   c.transfer(w, r, deadline, got) -> io_status   writes w while reading exactly r.size() bytes
//                                  (done, eof, broken_pipe or timeout at the deadline)
//   c.pending_output(), c.stderr_tail()   bytes beyond the answer; the last 4 KiB of its stderr
//   c.reap_describe(wait), c.kill_and_reap(), c.shutdown(grace)   how it ended; SIGKILL to the group
//   detail::describe_status(status)   "exited with status 3", "was killed by SIGSEGV"
//   detail::sigpipe_guard             SIGPIPE blocked in this thread while alive
//
// requires: a POSIX system (posix_spawn, poll, pipe2).
// ensures:  no call waits past its deadline; a write to a dead child gives broken_pipe, never
//           SIGPIPE; every child is reaped with waitpid (no zombies), also by the destructor.
// throws:  process_error (a nnlens::error) when the pipes cannot be made or /bin/sh cannot start.
#pragma once

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <thread>

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

extern char** environ;

namespace nnlens::difftest {

/// The external process could not be started, died, or did not answer in time.
class process_error : public error {
 public:
  using error::error;
};

namespace detail {

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

}  // namespace detail

}  // namespace nnlens::difftest
