// tools/nnlens/nnslicer_common.hpp -- what `nnlens profile` and `nnlens slice` share: the samples
// taken in slabs, so that a progress bar moves and an error names the samples.
//
//   by_slabs(b, e, slab, show, what, file, f)   f(b0, nb) on the slabs of rows [b, e), merged in order
// throws: value_error "FILE: samples I-J: ..." for a slab's value_error.
#pragma once

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string>
#include <utility>

#include <nnlens/core/error.hpp>
#include <nnlens/core/progress.hpp>

#include "format.hpp"

namespace nnlens::tool {

/// f(b0, nb) on the slabs [b0, b0 + nb) of rows [b, e), merged in order (merge(a, b)); a progress
/// bar `what` on standard error when `show` and there is more than one slab; a value_error of a
/// slab (a non-finite activation) is rethrown naming `file`'s samples.
template <class F>
auto by_slabs(std::size_t b, std::size_t e, std::size_t slab, bool show, const char* what, const std::string& file, F f) {
  using result = decltype(f(b, slab));
  std::optional<progress_bar> bar;
  if (show && e - b > slab) bar.emplace(what, e - b);
  std::optional<result> all;
  for (std::size_t b0 = b; b0 < e; b0 += slab) {
    const std::size_t nb = std::min(slab, e - b0);
    result part;
    try {
      part = f(b0, nb);
    } catch (const value_error& err) {
      throw value_error(concat(file, ": samples ", b0 + 1, "-", b0 + nb, ": ", err.what()));
    }
    all = all ? merge(*all, part) : std::move(part);
    if (bar) bar->update(b0 + nb - b);
  }
  if (bar) bar->finish();
  return std::move(*all);
}

}  // namespace nnlens::tool
