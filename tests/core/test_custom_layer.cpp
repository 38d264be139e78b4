// docs/adding-a-layer.md's example, verbatim: a layer defined outside the library works in a
// Sequential with every generic algorithm (shape inference, forward, trace, backward).
#include <doctest/doctest.h>

#include <nnlens/nnlens.hpp>

namespace nnlens {
struct Square {};

template <>
struct layer_traits<Square> : layer_defaults {
  static constexpr std::string_view name = "Square";
  static constexpr shape_check infer(shape in) { return {in, nullptr}; }
  static shape output_shape(const Square&, shape in) { return in; }

  template <class T>
  static void forward(const Square&, const forward_args<T>& a) {
    const std::size_t n = a.batch * a.in.size();
    for (std::size_t i = 0; i < n; ++i) a.y[i] = a.x[i] * a.x[i];
  }
  template <class T>
  static void backward(const Square&, const backward_args<T>& a, Square*) {
    if (!a.dx) return;
    const std::size_t n = a.batch * a.in.size();
    for (std::size_t i = 0; i < n; ++i) a.dx[i] = 2 * a.x[i] * a.dy[i];
  }
};
}  // namespace nnlens

using namespace nnlens;

TEST_CASE("a user-defined layer runs through the generic algorithms") {
  static_assert(Layer<Square>);
  static_assert(!PiecewiseLinearLayer<Square>);
  Sequential<Input<3>, Dense<2, double>, Square> net;
  net.layer<0>().W = {{1.0, 0.0}, {0.0, 2.0}, {1.0, -1.0}};
  net.layer<0>().b = {0.5, 0.0};
  xt::xarray<double> x = {{1.0, 2.0, 3.0}};
  auto y = forward(net, x);
  // z = x W + b = (1 + 3 + 0.5, 4 - 3) = (4.5, 1); y = z^2
  CHECK(y(0, 0) == doctest::Approx(20.25));
  CHECK(y(0, 1) == doctest::Approx(1.0));
  trace<double> tr;
  forward_trace(net, 1, x.data(), tr);
  double dy[2] = {1.0, 1.0}, dx[3];
  auto g = zeros_like(net);
  backward(net, tr, dy, &g, dx);
  // dL/dz = 2z = (9, 2); dx = W dz = (9, 4, 9 - 2)
  CHECK(dx[0] == doctest::Approx(9.0));
  CHECK(dx[1] == doctest::Approx(4.0));
  CHECK(dx[2] == doctest::Approx(7.0));
  CHECK(g.layer<0>().b(0) == doctest::Approx(9.0));
  CHECK(g.layer<0>().W(2, 1) == doctest::Approx(3.0 * 2.0));
}
