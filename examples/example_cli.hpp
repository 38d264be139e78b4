// examples/example_cli.hpp -- what every example program shares: a tiny command line
// (--name value, or --switch) and a stopwatch.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <string>

#include <nnlens/core/error.hpp>

namespace nnlens_examples {

struct cli {
  std::map<std::string, std::string> kv;
  cli(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      if (a.rfind("--", 0) != 0) throw nnlens::value_error("unexpected argument '" + a + "' (options are --name [value])");
      a = a.substr(2);
      if (i + 1 < argc && std::string(argv[i + 1]).rfind("--", 0) != 0)
        kv[a] = argv[++i];
      else
        kv[a] = "1";
    }
  }
  bool has(const std::string& k) const { return kv.count(k) != 0; }
  std::string str(const std::string& k, const std::string& d) const { return has(k) ? kv.at(k) : d; }
  std::size_t num(const std::string& k, std::size_t d) const { return has(k) ? std::stoul(kv.at(k)) : d; }
  double real(const std::string& k, double d) const { return has(k) ? std::stod(kv.at(k)) : d; }
};

struct stopwatch {
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  double seconds() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); }
};

}  // namespace nnlens_examples
