// A program on a DynamicNetwork linked against an installed nnlens::precompiled
// (find_package(nnlens COMPONENTS precompiled)): forward and exact_line are calls into the library.
#include <nnlens/nnlens.hpp>

#include <cstdio>

#if !defined(NNLENS_EXTERN_TEMPLATES)
#error "nnlens::precompiled must bring NNLENS_EXTERN_TEMPLATES"
#endif

int main() {
  nnlens::Sequential<nnlens::Input<3>, nnlens::Dense<8>, nnlens::ReLU, nnlens::Dense<2>> net;
  nnlens::initialize(net, 5);
  const nnlens::DynamicNetwork dyn = nnlens::to_dynamic(net);
  xt::xarray<float> x = xt::ones<float>({4, 3});
  const xt::xarray<float> a = nnlens::forward(dyn, x), b = nnlens::forward(net, x);
  const auto line = nnlens::exact_line(dyn, std::vector<double>{-2, -1, 0}, std::vector<double>{2, 1, 3});
  const auto same = nnlens::exact_line(net, std::vector<double>{-2, -1, 0}, std::vector<double>{2, 1, 3});
  std::printf("consumer_precompiled ok: %zu outputs, %zu pieces\n", a.size(), line.pieces());
  return a == b && line.pieces() == same.pieces() && line.pieces() >= 1 ? 0 : 1;
}
