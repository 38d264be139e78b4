// tools/nnlens/model.hpp -- model files, sample files and label files for the `nnlens` subcommands,
// at the precision (f32 / f64) and in the data layout (NCHW / NHWC) the user asks for.
//
//   precision, precision_name(p), with_precision(p, f)   --precision f32|f64: f's
//                     operator()<float>() or operator()<double>()
//   load_model<T>(path, layout)  model<T>{net, in}: a basic_dynamic_network<T> from .onnx
//                     (when built with nnlens::onnx; float weights, converted exactly to double for
//                     T = double), .nnet (raw units, as the reference reader evaluates:
//                     io::load_nnet's defaults; parsed at T's precision, so f64 keeps the file's
//                     float64 weights) or .nnlw (the demo's LeNet-5 weights: the architecture is the
//                     demo's, the file only holds the weights), and the input_layout: what the file
//                     declares (io::data_layout, the declared per-sample dims) and the layout of the
//                     user's data files (the declared one, or --layout)
//   read_samples<T>(path, in, lines, header)   the samples of a CSV file (one flattened sample per
//                     line in the data layout; io::read_csv_rows' rules, header: --header /
//                     --no-header, default detect) or of IDX images -- a name ending in .idx, -ubyte
//                     or either + .gz -- whose unsigned bytes are scaled to [0, 1], as
//                     [N, net_input...] (NCHW inside)
//   open_model<T>(path, layout)   what a command does first: keep_batch_buffers_on_the_heap(),
//                     then load_model<T>
//   to_data_layout / from_data_layout   internal [N, net_input...] <-> the data layout
//   companion_labels(images)  the IDX labels file beside IDX images (train-images-idx3-ubyte.gz ->
//                     train-labels-idx1-ubyte.gz), or "" when there is none
//   read_labels(path, n)     n class labels: IDX labels (idx1-ubyte) or a text/CSV file with one
//                     non-negative integer per line
//   rows_of(X, in, b0, nb)   samples [b0, b0 + nb) of X as a view [nb, input shape...]
// throws: nnlens::error naming the file (and line) and what was expected.
#pragma once

#include <cstddef>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include <nnlens/core/shape.hpp>
#include <nnlens/core/tensor.hpp>
#include <nnlens/io/csv.hpp>
#include <nnlens/io/layout.hpp>
#include <nnlens/network/dynamic_network.hpp>

namespace nnlens::tool {

/// The scalar type an analysis runs in (--precision).
enum class precision { f32, f64 };

/// "f32" / "f64" (what --json prints as "precision").
const char* precision_name(precision p);

/// Prints precision_name(p): the text outputs name the precision as --precision spells it.
inline std::ostream& operator<<(std::ostream& os, precision p) { return os << precision_name(p); }

/// Calls f.template operator()<float>() or f.template operator()<double>().
template <class F>
decltype(auto) with_precision(precision p, F&& f) {
  if (p == precision::f64) return std::forward<F>(f).template operator()<double>();
  return std::forward<F>(f).template operator()<float>();
}

/// What the model file declares about its input, and the layout of the user's data files.
struct input_layout {
  io::data_layout declared = io::data_layout::none;  // from the model file: nchw, nhwc, or none (flat / undeclared)
  io::data_layout data = io::data_layout::none;      // layout of data files: `declared`, or the --layout override
  std::vector<std::size_t> declared_shape;           // per sample, as the file declares it, e.g. {32,32,3}
  shape net_input;                                   // the network's internal (NCHW) input shape, e.g. {3,32,32}
  bool batch_axis = true;                            // false: the file's input has no batch axis (ONNX [5])
  std::vector<double> range_min, range_max;          // the declared input range per element (.nnet: the
                                                     // clamp [min_i, max_i]); empty when none is declared
  /// The per-sample dims the data files hold (declared_shape, or net_input's dims permuted to `data`).
  std::vector<std::size_t> data_shape() const;
  /// The declared input with its batch axis, e.g. "[N,32,32,3] (nhwc)", "[N,5]" for none.
  std::string describe() const;
};

template <class T>
struct model {
  basic_dynamic_network<T> net;
  input_layout in;
};

/// layout: the layout of the data files (--layout); io::data_layout::none: what the file declares.
/// nhwc needs an image input (shape_error for a flat one).
template <class T>
model<T> load_model(const std::string& path, io::data_layout layout = io::data_layout::none);

/// The preamble of a command that loads a model: keep_batch_buffers_on_the_heap(), then
/// load_model<T>(path, layout).
template <class T>
model<T> open_model(const std::string& path, io::data_layout layout);

/// A CSV/IDX sample file whose rows are in `in.data` layout -> [N, net_input...] (NCHW inside).
/// `lines`, when given, receives the file line (1-based) of each CSV sample (IDX: the image number):
/// io::read_csv_rows' own lines, so they agree with what the reader took as header and data.
/// `header` (CSV only; IDX files have none): detect (the first line is a header only when every
/// value on it is a non-number), present (--header: the first non-blank line is one) or absent
/// (--no-header).
/// throws: io_error "FILE:LINE:COLUMN: what" for a line that does not parse (a wrong number of
/// values, a non-number such as the 'abc' of a first line "0.1,abc,...", NaN/Inf, values another
/// separator splits: "fields separated by ';' ..."); for T = float a value beyond float's range is
/// "... out of float range (... --precision f64)"; "FILE: no samples" (io::read_csv_rows).
template <class T>
xt::xarray<T> read_samples(const std::string& path, const input_layout& in, std::vector<std::size_t>* lines = nullptr,
                           io::csv_header header = io::csv_header::detect);

/// [N, net_input...] (internal) -> the same values in the data layout ([N, data_shape()...]), for
/// per-input-element results (IG attributions, CONTRIB of input neurons, JSON fields indexed by
/// input element).  A flat [N, size] batch stays flat.
template <class T>
xt::xarray<T> to_data_layout(const xt::xarray<T>& x, const input_layout& in);

/// [N, data_shape()...] (or flat [N, size]) in the data layout -> [N, net_input...] (internal).
template <class T>
xt::xarray<T> from_data_layout(const xt::xarray<T>& x, const input_layout& in);

/// The model formats this build reads, e.g. ".onnx, .nnet, .nnlw (LeNet-5 weights)".
std::string supported_model_formats();

/// The file name's extension in lower case, with its dot: "a/B.ONNX" -> ".onnx" ("" when none).
std::string extension_of(const std::string& path);

/// IDX files: a name ending in .idx or -ubyte (train-images-idx3-ubyte, t10k-images.idx3-ubyte),
/// optionally followed by .gz.
bool is_idx_name(const std::string& path);

/// The IDX labels file next to IDX images ("images" -> "labels", "idx3" -> "idx1" in the file
/// name), if it exists; "" otherwise (and for CSV files).
std::string companion_labels(const std::string& images_path);

/// n labels from an IDX labels file or a text file of one integer per line; each < classes.
std::vector<std::size_t> read_labels(const std::string& path, std::size_t n, std::size_t classes);

/// Samples [b0, b0 + nb) of X as a view [nb, input shape...].
template <class T>
inline auto rows_of(const xt::xarray<T>& X, shape in, std::size_t b0, std::size_t nb) {
  return xt::adapt(X.data() + b0 * in.size(), nb * in.size(), xt::no_ownership(), in.with_batch(nb));
}

/// The analyses allocate their per-batch buffers anew for every batch (profile_accumulator::add,
/// op_graph::run: about 20 MB for LeNet-5 at batch 256).  glibc serves blocks above its mmap
/// threshold with mmap and returns them at free, so each batch page-faults its buffers in again; the
/// threshold adapts upwards only after a free of a block <= 32 MB, which a large sample file (the
/// 47 MB of bytes of 60,000 IDX images) does not provide: profiling 60k images took 5x as long
/// (1M page faults).  Keep such blocks on the heap instead.
void keep_batch_buffers_on_the_heap();

}  // namespace nnlens::tool
