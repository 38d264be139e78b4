// After its first call, batch-1 inference on a static network makes no heap allocation, and its
// workspace size is a compile-time constant.  Global operator new is replaced to count.
#include <nnlens/nnlens.hpp>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <new>

static std::atomic<long> g_allocs{0};
void* operator new(std::size_t n) {
  ++g_allocs;
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

using namespace nnlens;

template <class Net>
int check(const char* name) {
  constexpr std::size_t ws_size = inference_workspace_v<Net>;  // compile-time
  static_assert(ws_size > 0);
  static Net net;
  initialize(net, 1);
  static static_workspace<Net> ws;  // static storage: no heap
  static std::array<float, Net::input_shape.size()> x{};
  static std::array<float, Net::output_shape.size()> y{};
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(i % 7) * 0.1f;
  forward_into(net, 1, x.data(), y.data(), ws.span());  // first call
  const long before = g_allocs.load();
  for (int r = 0; r < 100; ++r) forward_into(net, 1, x.data(), y.data(), ws.span());
  const long after = g_allocs.load();
  std::printf("%s: workspace %zu scalars (compile-time), %ld heap allocations in 100 batch-1 calls\n", name, ws_size,
              after - before);
  return after == before ? 0 : 1;
}

using MLP = Sequential<Input<784>, Dense<256>, ReLU, Dense<256>, ReLU, Dense<10>>;
using LeNet5 = Sequential<Input<1, 28, 28>, Conv2D<6, 5, 1, 2>, ReLU, MaxPool2D<2>, Conv2D<16, 5>, ReLU, MaxPool2D<2>,
                          Flatten, Dense<120>, ReLU, Dense<84>, ReLU, Dense<10>>;

int main() {
  int fails = 0;
  fails += check<MLP>("MLP 784-256-256-10");
  fails += check<LeNet5>("LeNet-5");
  return fails;
}
