// The main of a program made of several programs (cmake/nnlens_unity_gen.cmake with PROGRAMS=1;
// examples/CMakeLists.txt, NNLENS_EXAMPLES_ONE_PROGRAM): `examples NAME ARGS...` runs the program
// NAME (a source's file stem) with argv[0] = NAME and returns what it returns.  Each program's
// unity body registers its main here while the program starts.
#include <cstdio>
#include <map>
#include <string>

namespace {
std::map<std::string, int (*)(int, char**)>& programs() {
  static std::map<std::string, int (*)(int, char**)> p;
  return p;
}
}  // namespace

int nnlens_program_register(const char* name, int (*run)(int, char**)) {
  programs()[name] = run;
  return 0;
}

int main(int argc, char** argv) {
  if (argc >= 2) {
    const auto it = programs().find(argv[1]);
    if (it != programs().end()) return it->second(argc - 1, argv + 1);
    std::fprintf(stderr, "%s: no program '%s'\n", argv[0], argv[1]);
  }
  std::fprintf(stderr, "usage: %s PROGRAM [ARGS...]\nprograms:", argc > 0 ? argv[0] : "examples");
  for (const auto& [name, run] : programs()) std::fprintf(stderr, " %s", name.c_str());
  std::fprintf(stderr, "\n");
  return 2;
}
