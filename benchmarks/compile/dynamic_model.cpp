// A research user's program on a model read at run time (scripts/compile-times):
// load an ONNX file, then ExactLine on a segment, NNSlicer's slice of a few inputs and IDC.
// Built (not run) by the measurement; it runs: dynamic_model MODEL.onnx.
#include <nnlens/io/onnx.hpp>
#if defined(NNLENS_TECHNIQUE_HEADERS)  // scripts/compile-times' "technique headers" rows
#include <nnlens/coverage.hpp>
#include <nnlens/exactline.hpp>
#include <nnlens/nnslicer.hpp>
#else
#include <nnlens/nnlens.hpp>
#endif

#include <cstdio>

#include <xtensor/xrandom.hpp>
#include <xtensor/xsort.hpp>
#include <xtensor/xview.hpp>

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  auto net = nnlens::io::load_onnx(argv[1]);
  const std::size_t in = net.input_shape().size();
  std::vector<double> a(in, 0.0), b(in, 1.0);
  auto line = nnlens::exact_line(net, a, b);
  std::vector<std::size_t> dims{16};
  for (std::size_t d = 0; d < net.input_shape().rank; ++d) dims.push_back(net.input_shape()[d]);
  xt::xarray<float> X = xt::random::rand<float>(dims);
  auto prof = nnlens::profile_network(nnlens::execution::par, net, X);
  auto tab = nnlens::nnslicer(nnlens::execution::par, net, prof, X, nnlens::criterion::predicted(), {.theta = 0.3});
  const auto logits = nnlens::forward(net, X);
  std::vector<std::size_t> labels(16);  // the predicted classes: every input counts as correct
  for (std::size_t i = 0; i < 16; ++i) labels[i] = xt::argmax(xt::view(logits, i))();
  auto c = nnlens::prepare_idc(nnlens::execution::par, net, X, labels, {.m = 2});
  nnlens::measure(net, X, c);
  std::printf("%zu pieces, %zu slice layers, idc %.3f\n", line.pieces(), nnlens::slice_sizes(tab).size(), c.result().percent);
  return 0;
}
