// docs/adding-a-layer.md's examples, verbatim: layers defined outside the library work in a
// Sequential with every generic algorithm (shape inference, forward, trace, backward; ExactLine
// for the piecewise-linear one).
#include <doctest/doctest.h>

#include <nnlens/nnlens.hpp>

#include <array>

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

/// y = |x|: piecewise-linear with one knot at 0, so one pwl_rule line makes ExactLine accept it.
struct Abs {};

template <>
struct layer_traits<Abs> : layer_defaults {
  static constexpr std::string_view name = "Abs";
  static constexpr shape_check infer(shape in) { return {in, nullptr}; }
  static shape output_shape(const Abs&, shape in) { return in; }
  template <class T>
  static void forward(const Abs&, const forward_args<T>& a) {
    for (std::size_t i = 0; i < a.batch * a.in.size(); ++i) a.y[i] = a.x[i] < T(0) ? -a.x[i] : a.x[i];
  }
  template <class T>
  static void backward(const Abs&, const backward_args<T>& a, Abs*) {
    if (!a.dx) return;
    for (std::size_t i = 0; i < a.batch * a.in.size(); ++i) a.dx[i] = a.x[i] < T(0) ? -a.dy[i] : a.dy[i];
  }
};
template <>
struct pwl_rule<Abs> {
  static constexpr std::array<double, 1> knots(const Abs&) { return {0.0}; }
};
}  // namespace nnlens

using namespace nnlens;

TEST_CASE("a user-defined piecewise-linear layer works with ExactLine") {
  static_assert(PiecewiseLinearLayer<Abs>);
  Sequential<Input<2>, Dense<2, double>, Abs, Dense<1, double>> net;
  net.layer<0>().W = {{1.0, 0.0}, {0.0, 1.0}};
  net.layer<0>().b = {0.0, 0.0};
  net.layer<2>().W = {{1.0}, {1.0}};
  net.layer<2>().b = {0.0};
  // |x0| + |x1| from (-1, -3) to (3, 1): kinks where x0 = 0 (t = 1/4) and x1 = 0 (t = 3/4)
  const auto r = exact_line(net, std::vector<double>{-1, -3}, std::vector<double>{3, 1});
  REQUIRE(r.t.size() == 4);
  CHECK(r.t[1] == 0.25);
  CHECK(r.t[2] == 0.75);
  CHECK(r.output(1)[0] == doctest::Approx(2.0));  // (0, -2)
  CHECK(r.output(2)[0] == doctest::Approx(2.0));  // (2, 0)
  const auto ig = exact_ig(net, std::vector<double>{3, 1}, std::vector<double>{-1, -3}, 0);
  CHECK(ig.sum == doctest::Approx(ig.delta));  // 4 - 4 = 0: the attributions cancel
  CHECK(ig.attributions[0] == doctest::Approx(2.0));  // mean slope (-1 on 1/4, +1 on 3/4) x 4
  CHECK(ig.attributions[1] == doctest::Approx(-2.0));
}

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
