// After its first call, batch-1 inference on a static network makes no heap allocation, and its
// workspace size is a compile-time constant.  forward() on an xt::xarray of the network's scalar
// allocates its result but no copy of the input (a copy of a large batch is fresh pages on every
// call: docs/scale.md, "The batch-4096 cliff").  Global operator new is replaced to count.
#include <nnlens/nnlens.hpp>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <new>

static std::atomic<long> g_allocs{0};
static std::atomic<std::size_t> g_bytes{0};
void* operator new(std::size_t n) {
  ++g_allocs;
  g_bytes += n;
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

// forward(policy, net, X) with X an xt::xarray<float> (and an xt::xtensor<float, 2>): after a first
// call (which grows the thread's workspace), a call allocates less than the input's size, so the
// input is read in place.  A float64 input is converted (the copy is then needed and counted).
template <class Policy>
int check_batched(const Policy& pol, const char* name) {
  using Net = Sequential<Input<512>, Dense<4>>;
  static Net net;
  initialize(net, 1);
  constexpr std::size_t batch = 2048;
  xt::xarray<float> X = xt::xarray<float>::from_shape({batch, 512});
  for (std::size_t i = 0; i < X.size(); ++i) X.data()[i] = float(i % 13) * 0.01f;
  const std::size_t input_bytes = X.size() * sizeof(float);
  auto bytes_of = [&](const auto& x) {
    (void)forward(pol, net, x);  // first call: workspace
    const std::size_t before = g_bytes.load();
    (void)forward(pol, net, x);
    return g_bytes.load() - before;
  };
  const std::size_t a = bytes_of(X);
  const xt::xtensor<float, 2> Xt = X;
  const std::size_t t = bytes_of(Xt);
  const xt::xarray<double> Xd = X;
  const std::size_t d = bytes_of(Xd);
  std::printf("forward(%s) at batch %zu (input %zu bytes): %zu bytes allocated per call on xarray<float>, %zu on "
              "xtensor<float, 2>, %zu on xarray<double>\n",
              name, batch, input_bytes, a, t, d);
  int fails = 0;
  fails += a < input_bytes ? 0 : 1;
  fails += t < input_bytes ? 0 : 1;
  fails += d >= input_bytes ? 0 : 1;  // the float copy of a double input (shows the counter sees it)
  return fails;
}

int main() {
  int fails = 0;
  fails += check<MLP>("MLP 784-256-256-10");
  fails += check<LeNet5>("LeNet-5");
  fails += check_batched(execution::seq, "seq");
  fails += check_batched(execution::par, "par");
  return fails;
}
