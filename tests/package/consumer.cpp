// A program built against an installed nnlens with find_package(nnlens).
#include <nnlens/io/idx.hpp>
#include <nnlens/nnlens.hpp>

#include <cstdio>

using Net = nnlens::Sequential<nnlens::Input<3>, nnlens::Dense<4>, nnlens::ReLU, nnlens::Dense<2>>;

int main() {
  Net net;
  nnlens::initialize(net, 7);
  xt::xarray<float> x = xt::ones<float>({1, 3});
  auto y = nnlens::forward(net, x);
  try {
    nnlens::io::read_idx("no-such-file.idx");
    return 1;
  } catch (const nnlens::io_error&) {
  }
  std::printf("consumer ok: %zu outputs\n", y.size());
  return y.size() == 2 ? 0 : 1;
}
