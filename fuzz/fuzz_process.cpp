// libFuzzer target: the "nnlens-bb 1" pipe protocol reader (nnlens/difftest/process.hpp).  The
// fuzz input is what a child process writes on its stdout: a child `cat FILE` replays it, the
// parent reads the header and answers one request of 2 inputs.  Any input must give probabilities
// or an nnlens::error (data_error / shape_error / process_error); nothing may crash, hang (the
// request timeout is 2 s) or leave a child behind.  Slow (one process per input): run it for
// minutes, not hours.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include "nnlens/difftest/process.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::filesystem::path file =
      std::filesystem::temp_directory_path() / ("nnlens-fuzz-process-" + std::to_string(::getpid()) + ".out");
  {
    std::ofstream f(file, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(data), std::streamsize(size));
  }
  namespace dt = nnlens::difftest;
  dt::process_options o;
  o.startup_timeout = std::chrono::milliseconds(2000);
  o.request_timeout = std::chrono::milliseconds(2000);
  o.shutdown_timeout = std::chrono::milliseconds(200);
  o.restart = false;
  try {
    dt::process_model m("cat '" + file.string() + "'; sleep 0.05", o);
    if (m.input_size() > (1u << 16) || m.classes() > (1u << 16)) return 0;
    std::vector<float> x(2 * m.input_size(), 0.5f), p(2 * m.classes());
    m.predict(x, 2, p);
    for (float v : p)
      if (!(v >= 0.f && v <= 1.f)) __builtin_trap();
  } catch (const nnlens::error&) {
  }
  if (::waitpid(-1, nullptr, WNOHANG) > 0) __builtin_trap();  // a child left unreaped
  return 0;
}
