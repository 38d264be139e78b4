// tools/nnlens/model.hpp -- model files, sample files and label files for the `nnlens` subcommands.
//
//   load_model(path)  a DynamicNetwork from .onnx (when built with nnlens::onnx), .nnet (raw units,
//                     as the reference reader evaluates: io::load_nnet's defaults) or .nnlw (the demo's LeNet-5 weights: the
//                     architecture is the demo's, the file only holds the weights)
//   read_samples(path, in)   the samples of a CSV file (one flattened sample per line, as `nnlens
//                     run` reads them) or of IDX images -- a name ending in .idx, -ubyte or either +
//                     .gz -- whose unsigned bytes are scaled to [0, 1], as [N, input shape...]
//   companion_labels(images)  the IDX labels file beside IDX images (train-images-idx3-ubyte.gz ->
//                     train-labels-idx1-ubyte.gz), or "" when there is none
//   read_labels(path, n)     n class labels: IDX labels (idx1-ubyte) or a text/CSV file with one
//                     non-negative integer per line
//   rows_of(X, in, b0, nb)   samples [b0, b0 + nb) of X as a view [nb, input shape...]
// throws: nnlens::error naming the file (and line) and what was expected.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <nnlens/core/shape.hpp>
#include <nnlens/core/tensor.hpp>
#include <nnlens/network/dynamic_network.hpp>

namespace nnlens::tool {

/// The model formats this build reads, e.g. ".onnx, .nnet, .nnlw (LeNet-5 weights)".
std::string supported_model_formats();

DynamicNetwork load_model(const std::string& path);

/// IDX files: a name ending in .idx or -ubyte (train-images-idx3-ubyte, t10k-images.idx3-ubyte),
/// optionally followed by .gz.
bool is_idx_name(const std::string& path);

/// The samples of a CSV or IDX file as [N, input shape...] (float, the tool's models' scalar).
/// IDX bytes are scaled to [0, 1]; images whose size is the input's size take the input's shape.
xt::xarray<float> read_samples(const std::string& path, shape in);

/// The IDX labels file next to IDX images ("images" -> "labels", "idx3" -> "idx1" in the file
/// name), if it exists; "" otherwise (and for CSV files).
std::string companion_labels(const std::string& images_path);

/// n labels from an IDX labels file or a text file of one integer per line; each < classes.
std::vector<std::size_t> read_labels(const std::string& path, std::size_t n, std::size_t classes);

/// Samples [b0, b0 + nb) of X as a view [nb, input shape...].
inline auto rows_of(const xt::xarray<float>& X, shape in, std::size_t b0, std::size_t nb) {
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
