// tests/difftest/children/linear_child.cpp -- a minimal C++ child for the "nnlens-bb 1" protocol
// (docs/difftest-process.md): the same fixed linear model as child.py, as softmax probabilities.
//
//   linear_child INPUT_SIZE CLASSES
//
// Standalone on purpose (no nnlens headers): this is what a firmware or emulator harness looks like.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <vector>

static bool read_exact(void* p, std::size_t n) { return std::fread(p, 1, n, stdin) == n; }

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  const std::size_t in = std::strtoul(argv[1], nullptr, 10), cls = std::strtoul(argv[2], nullptr, 10);
  std::printf("nnlens-bb 1 %zu %zu\n", in, cls);  // 1. the header line
  std::fflush(stdout);
  std::vector<float> x, p;
  std::vector<double> logit(cls);
  for (;;) {
    std::uint32_t n = 0;                          // 2. a request: n, then n * in floats
    if (!read_exact(&n, 4)) return 0;             // EOF: the parent is done
    x.resize(std::size_t(n) * in);
    if (!read_exact(x.data(), x.size() * 4)) return 0;
    p.resize(std::size_t(n) * cls);
    for (std::size_t r = 0; r < n; ++r) {
      double m = -1e300, s = 0;
      for (std::size_t c = 0; c < cls; ++c) {
        logit[c] = 0;
        for (std::size_t i = 0; i < in; ++i) logit[c] += x[r * in + i] * (double(long((7 * i + 3 * c) % 5) - 2) / 10.0);
        m = std::max(m, logit[c]);
      }
      for (std::size_t c = 0; c < cls; ++c) s += (logit[c] = std::exp(logit[c] - m));
      for (std::size_t c = 0; c < cls; ++c) p[r * cls + c] = float(logit[c] / s);
    }
    std::fwrite(&n, 4, 1, stdout);                // 3. the answer: n, then n * cls floats
    std::fwrite(p.data(), 4, p.size(), stdout);   //    (little-endian hosts: raw bytes)
    std::fflush(stdout);
  }
}
