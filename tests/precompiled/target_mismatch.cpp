// The ctest precompiled_target_mismatch compiles this program for x86-64 (SSE2) and links it with
// an nnlens::precompiled built with -march=native: the link must fail, naming the program's vector
// types (nnlens/precompiled/forms.hpp), rather than mix two builds of the same kernels.  It uses
// one precompiled form only, so that the compile is short (tests/package/consumer_precompiled.cpp
// is the whole consumer).
#include <nnlens/layers/dense.hpp>
#include <nnlens/layers/input.hpp>
#include <nnlens/layers/relu.hpp>
#include <nnlens/network/parameters.hpp>
#include <nnlens/precompiled/network.hpp>

#if !defined(NNLENS_EXTERN_TEMPLATES)
#error "compile with -DNNLENS_EXTERN_TEMPLATES"
#endif

int main() {
  nnlens::Sequential<nnlens::Input<3>, nnlens::Dense<8>, nnlens::ReLU, nnlens::Dense<2>> s;
  nnlens::initialize(s, 1);
  const nnlens::DynamicNetwork net = nnlens::to_dynamic(s);
  const xt::xarray<float> y = nnlens::forward(net, xt::xarray<float>(xt::ones<float>({4, 3})));
  return y.size() == 8 ? 0 : 1;
}
