// tools/nnlens/exactline_common.hpp -- what `nnlens exact-line` and `nnlens ig` share: the samples
// of a CSV file, each with the file line it comes from (the commands name segments and inputs by
// them).
//
//   read_rows<T>(path, in, header)   the samples of `path` (read_samples<T>: rows in the model's data
//                                    layout, `nnlens run`'s header rule), in the network's internal
//                                    order, and their file lines (io::read_csv_rows's)
// T is float (--precision f32) or double (f64).  throws: nnlens::error naming the file and line.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <nnlens/core/tensor.hpp>
#include <nnlens/io/csv.hpp>

#include "format.hpp"
#include "model.hpp"

namespace nnlens::tool {

/// The samples of a CSV file (rows in the model's data layout, kept in the network's internal
/// order) and the file line each one comes from.
template <class T>
struct csv_rows {
  std::string path;
  xt::xarray<T> x;                    // [N, input shape...] (internal order)
  std::vector<std::vector<T>> rows;   // N flattened samples (internal order)
  std::vector<std::size_t> lines;     // the file line of each sample (1-based)
  std::string where(std::size_t i) const { return concat(path, ":", lines[i]); }
};

template <class T>
csv_rows<T> read_rows(const std::string& path, const input_layout& in, io::csv_header header) {
  csv_rows<T> r;
  r.path = path;
  r.x = read_samples<T>(path, in, &r.lines, header);  // lines: the reader's own (io::read_csv_rows)
  const std::size_t n = r.x.shape()[0], d = in.net_input.size();
  r.rows.resize(n);
  for (std::size_t i = 0; i < n; ++i) r.rows[i].assign(r.x.data() + i * d, r.x.data() + (i + 1) * d);
  return r;
}

}  // namespace nnlens::tool
