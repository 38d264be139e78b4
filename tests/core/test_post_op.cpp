// Inference runs an element-wise map that follows a Conv2D inside the convolution
// (core/post_op.hpp): forward's output keeps the bits of a layer-by-layer pass (forward_trace),
// for static and run-time networks, inside composites, with the map as the last layer, and the
// map does run inside the producer (in parts, on the producer's output).
#include <doctest/doctest.h>

#include <nnlens/nnlens.hpp>

#include <cstring>
#include <random>
#include <vector>

namespace nnlens {
/// y = 2x - 1 counting its forward calls and the values they cover (an in-place map).
struct CountedMap {};
inline thread_local std::size_t counted_calls = 0, counted_values = 0;
template <>
struct layer_traits<CountedMap> : elementwise_map_defaults<CountedMap> {
  static constexpr std::string_view name = "CountedMap";
  struct scalar_map_fn {
    template <class T>
    T operator()(T x) const { return T(2) * x - T(1); }
    template <class T>
    T grad(T, T dy) const { return T(2) * dy; }
  };
  static constexpr scalar_map_fn scalar_map(const CountedMap&) { return {}; }
  template <class T>
  static void forward(const CountedMap& l, const forward_args<T>& a) {
    ++counted_calls;
    counted_values += a.batch * a.in.size();
    elementwise_map_defaults<CountedMap>::forward(l, a);
  }
};
}  // namespace nnlens

using namespace nnlens;

namespace {

template <class Net, class T>
bool forward_matches_trace(const Net& net, std::size_t batch, std::mt19937& r) {
  std::normal_distribution<T> n;
  xt::xarray<T> x = xt::zeros<T>(input_shape_of(net).with_batch(batch));
  for (auto& v : x) v = n(r);
  for (std::size_t i = 0; i < x.size(); i += 7) x.data()[i] = T(0);  // zeros and ties at the kinks
  const auto seq = forward(execution::seq, net, x);
  const auto par = forward(execution::par, net, x);
  trace<T> tr;
  forward_trace(net, batch, x.data(), tr);
  const T* ref = tr.activation(tr.layers()).data();
  return std::memcmp(seq.data(), ref, seq.size() * sizeof(T)) == 0 &&
         std::memcmp(par.data(), ref, par.size() * sizeof(T)) == 0;
}

}  // namespace

TEST_CASE("post-ops: a map after a Conv2D runs inside it, with a layer-by-layer pass's bits") {
  static_assert(detail::in_place_map_v<ReLU> && detail::in_place_map_v<Clamp> && detail::in_place_map_v<SiLU>);
  static_assert(!detail::in_place_map_v<Softmax> && !detail::in_place_map_v<Dense<4>> && detail::in_place_map_v<LeakyReLU>);
  static_assert(detail::accepts_post_op_v<Conv2D<4, 3>> && !detail::accepts_post_op_v<ReLU>);
  using Net = Sequential<Input<3, 19, 17>, Conv2D<8, 3, 1, 1>, ReLU, Conv2D<12, 3, 2, 1>, HardTanh,
                         Residual<Block<Conv2D<12, 3, 1, 1>, ReLU, Conv2D<12, 3, 1, 1>>>, ReLU,
                         Conv2D<16, 1>, SiLU, Conv2D<6, 3, 1, 1, 1, 2>, ReLU>;  // grouped last, its map last
  Net net;
  initialize(net, 3);
  std::mt19937 r(1);
  for (std::size_t batch : {1, 3, 8}) {
    CAPTURE(batch);
    CHECK(forward_matches_trace<Net, float>(net, batch, r));
    const auto dyn = to_dynamic(net);
    CHECK(forward_matches_trace<decltype(dyn), float>(dyn, batch, r));
  }
  const auto dbl = network_cast<double>(to_dynamic(net));
  CHECK(forward_matches_trace<decltype(dbl), double>(dbl, 4, r));
}

TEST_CASE("post-ops: the map runs inside the producer, part by part, only after a producer") {
  Sequential<Input<2, 30, 30>, Conv2D<4, 3, 1, 1>, CountedMap, Flatten, Dense<3>> fused;
  Sequential<Input<2, 30, 30>, Flatten, CountedMap, Dense<3>> alone;  // after a Flatten: a pass of its own
  initialize(fused, 5);
  initialize(alone, 5);
  xt::xarray<float> x = xt::ones<float>({5, 2, 30, 30});
  counted_calls = counted_values = 0;
  (void)forward(execution::seq, fused, x);
  CHECK(counted_values == 5 * 4 * 30 * 30);  // every output once
  CHECK(counted_calls == 5);                 // a 900-position plane per call: one sample at a time
  counted_calls = counted_values = 0;
  (void)forward(execution::seq, alone, x);
  CHECK(counted_calls == 1);
  CHECK(counted_values == 5 * 2 * 30 * 30);
  // a trace (the analyses' pass) runs each layer on its own
  counted_calls = 0;
  trace<float> tr;
  forward_trace(fused, 5, x.data(), tr);
  CHECK(counted_calls == 1);
}
