// tests/tool/layout/test_layout.cpp -- io/layout.hpp: NHWC <-> NCHW conversions of batches (rank 4
// and flat rows), declared sample shapes, layout names; expected values written out by hand.
#include <doctest/doctest.h>

#include <nnlens/io/layout.hpp>

using namespace nnlens;

TEST_CASE("to_nchw / from_nchw permute NHWC batches; none and nchw are unchanged") {
  // one sample, H = 2, W = 2, C = 3; NHWC value = 100 h + 10 w + c
  xt::xarray<double> x = xt::zeros<double>({1, 2, 2, 3});
  for (std::size_t h = 0; h < 2; ++h)
    for (std::size_t w = 0; w < 2; ++w)
      for (std::size_t c = 0; c < 3; ++c) x(0, h, w, c) = 100.0 * h + 10.0 * w + c;
  const auto y = io::to_nchw(x, io::data_layout::nhwc);
  REQUIRE(y.shape() == std::vector<std::size_t>{1, 3, 2, 2});
  // NCHW order: c, then h, then w
  const std::vector<double> expect{0, 10, 100, 110, 1, 11, 101, 111, 2, 12, 102, 112};
  CHECK(std::vector<double>(y.begin(), y.end()) == expect);
  CHECK(io::from_nchw(y, io::data_layout::nhwc) == x);
  CHECK(io::to_nchw(x, io::data_layout::nchw) == x);
  CHECK(io::to_nchw(x, io::data_layout::none) == x);
  // flat rows [N, H*W*C] with the internal sample shape {C,H,W}
  xt::xarray<double> flat = xt::reshape_view(x, {1, 12});
  const auto yf = io::to_nchw(flat, io::data_layout::nhwc, shape(3, 2, 2));
  REQUIRE(yf.shape() == std::vector<std::size_t>{1, 12});
  CHECK(std::vector<double>(yf.begin(), yf.end()) == expect);
  CHECK(io::from_nchw(yf, io::data_layout::nhwc, shape(3, 2, 2)) == flat);
  CHECK_THROWS_AS(io::to_nchw(flat, io::data_layout::nhwc), shape_error);                 // no sample shape
  CHECK_THROWS_AS(io::to_nchw(flat, io::data_layout::nhwc, shape(3, 2, 3)), shape_error);  // 18 != 12 values
}

TEST_CASE("declared_sample_shape, layout_name, parse_layout") {
  CHECK(io::declared_sample_shape(shape(3, 32, 32), io::data_layout::nhwc) == std::vector<std::size_t>{32, 32, 3});
  CHECK(io::declared_sample_shape(shape(3, 32, 32), io::data_layout::nchw) == std::vector<std::size_t>{3, 32, 32});
  CHECK(io::declared_sample_shape(shape(5), io::data_layout::none) == std::vector<std::size_t>{5});
  CHECK(std::string(io::layout_name(io::data_layout::nhwc)) == "nhwc");
  CHECK(io::parse_layout("nchw") == io::data_layout::nchw);
  try {
    (void)io::parse_layout("hwc", "--layout");
    FAIL("no error");
  } catch (const io_error& e) {
    CHECK(std::string(e.what()) == "--layout: expected nchw or nhwc, got 'hwc'");
  }
}
