// tools/nnlens/format.hpp -- printf-style number formatting for the tool's tables, SVG and messages.
#pragma once

#include <cstdio>
#include <string>

namespace nnlens::tool {

/// v formatted with the printf format f (one double conversion): fmt(0.25, "%.2f") == "0.25".
/// Adds 0.0 first, so a negative zero prints as "0".
inline std::string fmt(double v, const char* f = "%.3g") {
  char b[64];
  std::snprintf(b, sizeof b, f, v + 0.0);
  return b;
}

}  // namespace nnlens::tool
