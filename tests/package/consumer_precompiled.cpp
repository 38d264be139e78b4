// A program on a DynamicNetwork linked against an installed nnlens::precompiled
// (find_package(nnlens COMPONENTS precompiled)): forward and exact_line are calls into the library.
#include <nnlens/nnlens.hpp>

#include <cmath>
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
  double worst = 0;  // the dynamic and static forms may sum in another order: last-bit differences
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::fmax(worst, std::fabs(double(a.data()[i]) - double(b.data()[i])));
  const bool ok = a.size() == b.size() && worst <= 1e-5 && line.pieces() == same.pieces() && line.pieces() >= 1;
  std::printf("consumer_precompiled %s: %zu outputs (max |dy| %.2g), %zu pieces (static network: %zu)\n", ok ? "ok" : "FAILED",
              a.size(), worst, line.pieces(), same.pieces());
  return ok ? 0 : 1;
}
