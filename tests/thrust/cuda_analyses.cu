// Every analysis entry point of the thrust backend (forward, profile_network, relevance,
// prepare_idc + measure, exact_lines, the device black box and DFlare's lockstep driver),
// instantiated in one CUDA translation unit: the ctest thrust_cuda_compile_analyses compiles it with
// nvcc for sm_80 and sm_90 (no GPU needed), so the analyses' device paths, not only the kernels,
// build with the CUDA front end.  The function is never called.
#include "nnlens/thrust/all.hpp"
#include "nnlens/thrust/coverage.hpp"
#include "nnlens/thrust/relevance.hpp"
#include <nnlens/coverage/idc.hpp>
#include <nnlens/coverage/neuron_coverage.hpp>
#include <nnlens/difftest/dflare.hpp>

using Net = nnlens::Sequential<nnlens::Input<1, 12, 12>, nnlens::Conv2D<16, 3>, nnlens::BatchNorm<16>, nnlens::ReLU,
                               nnlens::MaxPool2D<2>, nnlens::AvgPool2D<3, 1, 1>, nnlens::Affine<1>, nnlens::Flatten,
                               nnlens::Dense<10>, nnlens::BatchNorm<>, nnlens::ReLU, nnlens::Dense<3>>;
using Mlp = nnlens::Sequential<nnlens::Input<5>, nnlens::Affine<5>, nnlens::Dense<8>, nnlens::ReLU, nnlens::Dense<8>, nnlens::LeakyReLU,
                               nnlens::Dense<6>, nnlens::HardTanh, nnlens::Clamp, nnlens::Dropout, nnlens::Identity,
                               nnlens::Dense<2>>;

// composites (their branches' layers by their own kernels, the join by thrust_kernels::place),
// PReLU (ParametricMap), GlobalAvgPool (a mean window per plane), Softmax (SampleMap: std::exp on
// the device)
using Res = nnlens::Sequential<nnlens::Input<2, 6, 6>, nnlens::Conv2D<4, 3, 1, 1>, nnlens::PReLU<4>,
                               nnlens::Residual<nnlens::Block<nnlens::Conv2D<4, 3, 1, 1>, nnlens::ReLU>>,
                               nnlens::Concat<nnlens::Block<>, nnlens::Block<nnlens::MaxPool2D<3, 1, 1>>>, nnlens::GlobalAvgPool,
                               nnlens::Flatten, nnlens::Dense<3>, nnlens::Softmax>;

void instantiate_composites(const Res& res, const xt::xarray<float>& X) {
  auto out = nnlens::forward(nnlens::execution::thrust, res, X);
  (void)out;
}
using Gap = nnlens::Sequential<nnlens::Input<2, 6, 6>, nnlens::Conv2D<4, 3, 1, 1>, nnlens::PReLU<1>, nnlens::GlobalAvgPool,
                               nnlens::Flatten, nnlens::Dense<3>>;
void instantiate_gap(const Gap& g, const xt::xarray<float>& X, const std::vector<std::vector<double>>& A) {
  auto p = nnlens::profile_network(nnlens::execution::thrust, g, X);
  auto r = nnlens::relevance(nnlens::execution::thrust, g, X);
  auto lines = nnlens::exact_lines(nnlens::execution::thrust, g, A, A);
  (void)p; (void)r; (void)lines;
}

// a DynamicNetwork (every op of the variant list, composites included): forward, profile, LRP,
// ExactLine (the composites' join_union / join_values kernels)
void instantiate_dynamic(const nnlens::DynamicNetwork& d, const xt::xarray<float>& X, const std::vector<std::vector<double>>& A) {
  auto out = nnlens::forward(nnlens::execution::thrust, d, X);
  auto p = nnlens::profile_network(nnlens::execution::thrust, d, X);
  auto r = nnlens::relevance(nnlens::execution::thrust, d, X);
  auto lines = nnlens::exact_lines(nnlens::execution::thrust, d, A, A);
  (void)out; (void)p; (void)r; (void)lines;
}
// ExactLine of static composites (Residual, Concat) on the device
using ResLine = nnlens::Sequential<nnlens::Input<2, 6, 6>, nnlens::Conv2D<4, 3, 1, 1>, nnlens::ReLU,
                                   nnlens::Residual<nnlens::Block<nnlens::Conv2D<4, 3, 1, 1>, nnlens::ReLU>>,
                                   nnlens::Concat<nnlens::Block<>, nnlens::Block<nnlens::MaxPool2D<3, 1, 1>>>,
                                   nnlens::Flatten, nnlens::Dense<3>>;
void instantiate_composite_lines(const ResLine& n, const std::vector<std::vector<double>>& A) {
  auto lines = nnlens::exact_lines(nnlens::execution::thrust, n, A, A);
  (void)lines;
}

void instantiate(const Net& net, const Mlp& mlp, const xt::xarray<float>& X, const std::vector<std::size_t>& y,
                 const std::vector<std::vector<double>>& A, std::span<const float> seeds) {
  namespace ex = nnlens::execution;
  auto out = nnlens::forward(ex::thrust, net, X);
  auto p = nnlens::profile_network(ex::thrust, net, X);
  auto r = nnlens::relevance(ex::thrust, net, X);
  auto c = nnlens::prepare_idc(ex::thrust, net, X, y, {.m = 2});
  nnlens::measure(ex::thrust, net, X, c);
  auto lines = nnlens::exact_lines(ex::thrust, mlp, A, A);
  auto out2 = nnlens::forward(ex::thrust, mlp, X);  // the element-wise ops' functors on the device
  auto r2 = nnlens::relevance(ex::thrust, mlp, X);
  (void)out2; (void)r2;
  auto f = nnlens::difftest::wrap(ex::thrust, net, "f");
  auto res = nnlens::difftest::dflare(ex::thrust, f, f, seeds, 1, {});
  (void)out; (void)p; (void)r; (void)lines; (void)res;
}
