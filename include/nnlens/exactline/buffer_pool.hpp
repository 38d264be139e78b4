// nnlens/exactline/buffer_pool.hpp -- the value buffers of ExactLine's engines: vectors that skip
// zero-filling, and a per-thread pool that hands the same pages from layer to layer.
//
//   detail::value_buffer<S> b(n)        std::vector<S> whose resize() leaves new values uninitialised
//   detail::buffer_pool<S>::local()     this thread's pool: take(n) a buffer of n values (a spare one
//                                       when n >= 64 KiB worth), give(std::move(b)) keeps it for later
//   detail::layer_scratch<S>()          this thread's scratch vector
//
// requires: a buffer taken is written before it is read (take() does not initialise).
// ensures:  a thread keeps at most 4 spare buffers of 64 KiB to 64 MiB each; nothing is shared
//           between threads (thread_local).
#pragma once

#include <cstddef>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

namespace nnlens::detail {

/// std::allocator that default-initialises (no zeroing of buffers that are written right away).
template <class T>
struct default_init_allocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = default_init_allocator<U>;
  };
  using std::allocator<T>::allocator;
  template <class U>
  void construct(U* p) noexcept(std::is_nothrow_default_constructible_v<U>) {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... A>
  void construct(U* p, A&&... a) {
    ::new (static_cast<void*>(p)) U(std::forward<A>(a)...);
  }
};
template <class S>
using value_buffer = std::vector<S, default_init_allocator<S>>;

/// A thread's spare large value buffers: a line's layers take one for their output and give the
/// one they replaced back, so the same pages serve every layer and every line (fresh pages cost a
/// page fault each: on a small residual CNN, 2.3-2.8x the speed).  Buffers under 64 KiB come from
/// the allocator as before (ACAS Xu's: the pool cost 10% there).  A thread keeps at most 4, each
/// at most 64 MiB: a larger line's buffers go back to the allocator.
template <class S>
struct buffer_pool {
  static constexpr std::size_t min_values = (std::size_t(1) << 16) / sizeof(S);
  static constexpr std::size_t max_values = (std::size_t(1) << 26) / sizeof(S);
  std::vector<value_buffer<S>> spare;
  /// A buffer of n values, not initialised.
  value_buffer<S> take(std::size_t n) {
    value_buffer<S> b;
    if (n >= min_values && !spare.empty()) b = std::move(spare.back()), spare.pop_back();
    b.resize(n);
    return b;
  }
  void give(value_buffer<S>&& b) {
    if (spare.size() < 4 && b.capacity() >= min_values && b.capacity() <= max_values) spare.push_back(std::move(b));
  }
  static buffer_pool& local() {
    thread_local buffer_pool p;
    return p;
  }
};

template <class S>
std::vector<S>& layer_scratch() {
  thread_local std::vector<S> s;
  return s;
}

}  // namespace nnlens::detail
