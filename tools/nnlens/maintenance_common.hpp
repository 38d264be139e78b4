// tools/nnlens/maintenance_common.hpp -- what `nnlens restructure / readapt / increment` share
// (maintenance_cmd.cpp): option checks, labelled data, the neuron mask (a file or semslice), the
// output model; and what every analysis command of the tool shares about --precision (profile,
// slice, coverage, semslice, difftest, compress and the three above).  Internal to the tool.
//
//   check_common(o)        the checks made before any file is read: the slice's options (the same
//                          messages as `nnlens semslice`), the output's format and directory
//   read_labelled(m, data, labels, "--labels", limit, classes)   samples (read_samples<T>: rows
//                          in the data layout) + labels, then select()
//   select(d, limit, classes)   the samples of `classes` (all when empty), the first `limit` (0: all)
//   obtain_mask(m, o, d, categories, "--categories")   --mask MASK (checked against the model),
//                          or semslice on d at T; every category must have samples
//   read_mask(path, net, model, layout)   a neuron mask of the model: one made with the other
//                          --precision is accepted (a mask is structural: which neurons are kept)
//   other_precision(fp, model, layout)   "f32" / "f64" when fp (a profile's, a state's) is the
//                          model's fingerprint at the other precision than T; "" otherwise
//   add_slice_options(cmd, ..., prefix, categories_help)   semslice's options --metric --theta
//                          --similarity [--categories] --samples --metric-samples (the maintenance
//                          commands: prefix "Slice: ")
//   write_model(path, model, net, what)   .nnlw (io::save_weights, the scalar T; metadata: the
//                          task) or .onnx (io::save_onnx: float32 weights)
// T is float (--precision f32) or double (f64): every template here is instantiated for both.
// throws: nnlens::error naming the file / option.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <nnlens/compress/pruning.hpp>
#include <nnlens/core/tensor.hpp>
#include <nnlens/network/dynamic_network.hpp>
#include <nnlens/neusemslice/neuron_mask.hpp>
#include <nnlens/neusemslice/semslice.hpp>

#include "format.hpp"
#include "maintenance_cmd.hpp"
#include "model.hpp"

namespace nnlens::tool::maint {

using clock_type = std::chrono::steady_clock;
inline double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

compress::pruning_method parse_pruner(const std::string& s);
/// --metric and --similarity (the same words and messages in semslice and the maintenance commands).
metric parse_metric(const std::string& s);
similarity parse_similarity(const std::string& s);
/// "0,1,4" -> {0, 1, 4}; each < classes, no repeats (value_error naming `option`).
std::vector<std::size_t> parse_classes(const std::string& list, std::size_t classes, const char* option);

void check_common(const maintenance_common& o);

/// semslice's options, declared by `nnlens semslice` and (prefix "Slice: ") by the maintenance
/// commands: --metric --theta --similarity, --categories (when categories_help is given), --samples,
/// --metric-samples.
void add_slice_options(CLI::App& cmd, std::string& metric, double& theta, std::string& similarity, std::string* categories,
                       std::size_t& samples, std::size_t& metric_samples, const std::string& prefix,
                       const char* categories_help);

template <class T>
struct labelled {
  std::string path;
  xt::xarray<T> x;              // [n, input shape...] (internal NCHW order)
  std::vector<std::size_t> y;
  std::size_t size() const { return y.size(); }
};
template <class T>
labelled<T> select(labelled<T> d, std::size_t limit, const std::vector<std::size_t>& classes);
template <class T>
labelled<T> read_labelled(const model<T>& m, const std::string& data, const std::string& labels, const char* labels_option,
                          std::size_t limit, const std::vector<std::size_t>& classes = {});
/// Test accuracy in percent.
template <class T>
double accuracy_of(const basic_dynamic_network<T>& net, const labelled<T>& d);
/// data_error "FILE: category c has no samples<hint>" for the first category without samples.
template <class T>
void check_categories_present(const labelled<T>& d, const std::vector<std::size_t>& cs, std::size_t classes, const char* hint);

struct mask_info {
  neuron_mask mask;
  std::string source;  // "semslice" or the mask file
  std::vector<std::size_t> categories;
  double seconds = 0;
};
template <class T>
mask_info obtain_mask(const basic_dynamic_network<T>& net, const maintenance_common& o, const labelled<T>& d,
                      std::vector<std::size_t> categories, const char* category_option);
/// {source, [metric, theta], categories, critical[], neurons[], compression}
template <class T>
nlohmann::ordered_json mask_json(const basic_dynamic_network<T>& net, const mask_info& m, const maintenance_common& o);
/// "neuron mask: semslice (taylor, theta 0.95, ...) keeps 6/6 ... neurons, CR 47.80%"
template <class T>
std::string mask_line(const basic_dynamic_network<T>& net, const mask_info& m, const maintenance_common& o);

/// A neuron mask file of `model` (loaded as net): data_error "PATH: not a mask of MODEL: ..." for a
/// mask of another architecture or other weights; a mask made with the other --precision of the
/// same model file is accepted (its fingerprint is the model's at that precision).
template <class T>
neuron_mask read_mask(const std::string& path, const basic_dynamic_network<T>& net, const std::string& model,
                      io::data_layout layout);

/// "f32" or "f64" when `fp` is model_fingerprint of MODEL loaded at the other precision
/// than T (the fingerprint hashes the weights' bytes, so it tells the two apart); "" otherwise.
template <class T>
std::string other_precision(std::uint64_t fp, const std::string& model, io::data_layout layout);

/// The note a command prints (and puts in its JSON) when it writes a model at T = double to ONNX,
/// whose export holds float32 weights; "" otherwise.
template <class T>
std::string onnx_narrowing_note(const std::string& path);

template <class T>
void write_model(const std::string& path, const std::string& model, const basic_dynamic_network<T>& net, const std::string& what);

}  // namespace nnlens::tool::maint
