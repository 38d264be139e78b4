// tools/nnlens/format.hpp -- printf-style number formatting for the tool's tables, SVG and messages.
#pragma once

#include <cstddef>
#include <cstdio>
#include <map>
#include <string>

namespace nnlens::tool {

/// v formatted with the printf format f (one double conversion): fmt(0.25, "%.2f") == "0.25".
/// Adds 0.0 first, so a negative zero prints as "0".
inline std::string fmt(double v, const char* f = "%.3g") {
  char b[64];
  std::snprintf(b, sizeof b, f, v + 0.0);
  return b;
}

/// "Product x3, GlobalAvgPool": names with their counts (a count of 1 not written), in name order.
inline std::string counted_names(const std::map<std::string, std::size_t>& counts) {
  std::string list;
  for (const auto& [name, k] : counts) list += (list.empty() ? "" : ", ") + name + (k > 1 ? " x" + std::to_string(k) : "");
  return list;
}

}  // namespace nnlens::tool
