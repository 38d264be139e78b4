// nnlens/core/thread_pool.hpp -- a small fork-join pool for the host parallel policy.
//
// parallel_for(n, f) runs f(0..n-1) on the pool's workers and the calling thread, and returns when
// all are done.  The first exception thrown by a task is rethrown in the caller (the remaining
// tasks still run to completion, so nothing is left half-written).  A parallel_for issued from
// inside a task runs serially (no nested oversubscription, no deadlock).  intra_op_pool(): the pool
// a layer may split one call over (forward(execution::par) at a batch below its threads).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace nnlens::detail {

class thread_pool {
 public:
  explicit thread_pool(std::size_t threads) {
    for (std::size_t i = 1; i < threads; ++i) workers_.emplace_back([this] { loop(); });
  }
  ~thread_pool() {
    {
      std::lock_guard lk(m_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : workers_) t.join();
  }
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;

  std::size_t size() const { return workers_.size() + 1; }

  template <class F>
  void parallel_for(std::size_t n, F&& f) {
    if (n == 0) return;
    if (n == 1 || workers_.empty() || in_task()) {
      for (std::size_t i = 0; i < n; ++i) f(i);
      return;
    }
    std::unique_lock call_lock(call_m_);  // one parallel_for at a time per pool
    {
      std::lock_guard lk(m_);
      job_ = [&f](std::size_t i) { f(i); };
      n_ = n;
      next_ = 0;
      pending_.store(workers_.size(), std::memory_order_relaxed);
      error_ = nullptr;
      generation_.fetch_add(1, std::memory_order_release);
    }
    cv_.notify_all();
    work();
    // the workers finish within microseconds of the caller at a layer's scale: spin a while
    // before sleeping on the condition variable (a wake-up costs tens of microseconds on a VM)
    for (std::size_t s = 0; s < spin_rounds && pending_.load(std::memory_order_acquire) != 0; ++s) cpu_relax();
    std::unique_lock lk(m_);
    done_cv_.wait(lk, [&] { return pending_.load(std::memory_order_relaxed) == 0; });
    job_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

 private:
  static bool& in_task() {
    thread_local bool flag = false;
    return flag;
  }
  void work() {
    in_task() = true;
    for (;;) {
      const std::size_t i = next_.fetch_add(1);
      if (i >= n_) break;
      try {
        job_(i);
      } catch (...) {
        std::lock_guard lk(m_);
        if (!error_) error_ = std::current_exception();
      }
    }
    in_task() = false;
  }
  static void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
    asm volatile("yield");
#endif
  }
  void loop() {
    std::uint64_t seen = 0;
    for (;;) {
      // spin a while for the next job (the next layer's, microseconds away), then sleep
      for (std::size_t s = 0; s < spin_rounds && generation_.load(std::memory_order_acquire) == seen; ++s) cpu_relax();
      {
        std::unique_lock lk(m_);
        cv_.wait(lk, [&] { return stop_ || generation_.load(std::memory_order_relaxed) != seen; });
        if (stop_) return;
        seen = generation_.load(std::memory_order_relaxed);
      }
      work();
      {
        std::lock_guard lk(m_);
        pending_.fetch_sub(1, std::memory_order_release);
      }
      done_cv_.notify_all();
    }
  }
  /// Spin rounds (a pause instruction each, some 10-40 ns) before a wait sleeps: about 100 us.
  static constexpr std::size_t spin_rounds = 4096;

  std::vector<std::thread> workers_;
  std::mutex m_, call_m_;
  std::condition_variable cv_, done_cv_;
  std::function<void(std::size_t)> job_;
  std::size_t n_ = 0;
  std::atomic<std::size_t> next_{0};
  std::atomic<std::size_t> pending_{0};
  std::atomic<std::uint64_t> generation_{0};
  bool stop_ = false;
  std::exception_ptr error_;
};

/// The process-wide pool (hardware_concurrency threads, or NNLENS_NUM_THREADS / OMP_NUM_THREADS).
inline thread_pool& default_pool() {
  static thread_pool pool([] {
    for (const char* v : {"NNLENS_NUM_THREADS", "OMP_NUM_THREADS"}) {
      if (const char* s = std::getenv(v)) {
        const long n = std::strtol(s, nullptr, 10);
        if (n > 0) return std::size_t(n);
      }
    }
    return std::max<std::size_t>(1, std::thread::hardware_concurrency());
  }());
  return pool;
}

/// The pool a layer may split one call's work over, or nullptr (then every layer runs on the
/// calling thread): forward(execution::par) sets it (intra_op_scope) while it runs a batch smaller
/// than its threads on the calling thread, where splitting the batch cannot use them all.  A layer
/// that splits (Conv2D's GEMM form: its output channels) gives the same bits as on one thread.
/// Inside a pool task a parallel_for runs serially, so a nested call never waits on itself.
inline thread_pool*& intra_op_slot() {
  thread_local thread_pool* p = nullptr;
  return p;
}
inline thread_pool* intra_op_pool() { return intra_op_slot(); }
/// Sets intra_op_pool() for the scope's lifetime (restored after, also on an exception).
class intra_op_scope {
 public:
  explicit intra_op_scope(thread_pool* p) : prev_(intra_op_slot()) { intra_op_slot() = p; }
  ~intra_op_scope() { intra_op_slot() = prev_; }
  intra_op_scope(const intra_op_scope&) = delete;
  intra_op_scope& operator=(const intra_op_scope&) = delete;

 private:
  thread_pool* prev_;
};

}  // namespace nnlens::detail

namespace nnlens {
/// The threads the parallel analyses (execution::par) run on: the process-wide pool's size,
/// hardware_concurrency or NNLENS_NUM_THREADS / OMP_NUM_THREADS as read when the pool first starts
/// (a program that sets NNLENS_NUM_THREADS must do so before its first parallel call).
inline std::size_t worker_threads() { return detail::default_pool().size(); }
}  // namespace nnlens
