// tools/nnlens/maintenance_common.hpp -- what `nnlens restructure / readapt / increment` share
// (restructure_cmd.cpp, readapt_cmd.cpp, increment_cmd.cpp): their common options, option checks,
// labelled data, the neuron mask (a file or semslice), the JSON report, the output model; and what
// every analysis command of the tool shares about --precision (profile, slice, coverage, semslice,
// difftest, compress and the three above).  Internal to the tool.
//
// The three commands' common options (maintenance_common, declared by add_maintenance_options):
// --data, --labels, --test, --test-labels, --mask or the command's no-mask flag; the slice options,
// as `nnlens semslice`: --metric, --theta, --similarity, --categories, --samples, --metric-samples,
// --seed; --epochs, --lr, --batch, --limit N (the first N samples of each data file), --baseline,
// -o OUT, --json, --no-progress, --precision f32|f64 (the model, the slice, the training and the
// accuracies in float or double; .nnlw output keeps the scalar, .onnx output holds float32
// weights), --layout nchw|nhwc (the data files' rows; default: what the model file declares);
// --threads (each command's last).  OUT: .nnlw (the project's weights format; the tool reads it
// back for the demo's LeNet-5 architecture) or .onnx (any model; builds with ONNX).
//
//   add_maintenance_options(cmd, o, help)   the common options above, with the command's help texts
//   training_options<Training>(o, epochs, lr, seed)   --epochs, --lr, --batch, --seed, --no-progress
//                          (the command's defaults when not given)
//   print_json(o, settings, epochs, lr, net, mask, results, baseline, note, seconds)   the command's
//                          JSON object on standard output; joined(head, more): head's fields, then more's
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
#include <optional>
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
#include "cli.hpp"
#include "model.hpp"

namespace nnlens::tool {

/// Where the neuron mask comes from: a mask file, or `semslice` with these options.
struct mask_choice {
  std::string mask;                 // read this mask (nnlens semslice -o) instead of slicing
  std::string metric = "taylor";    // avg, var, ens, taylor, deeplift
  double theta = 0.95;
  std::string similarity = "cka";   // cka, uncentered, unbiased
  std::string categories;           // "": every class (increment: the old classes)
  std::size_t samples = 500;        // Gram samples per category
  std::size_t metric_samples = 0;   // 0: all of D_c
  std::uint64_t slice_seed = 0;
  bool none = false;                // --no-slice / --full / --retrain: no mask
};

/// The data, training and output options the three commands share.
struct maintenance_common : model_args {
  std::string data, labels, test, test_labels, output;
  mask_choice slice;
  std::size_t epochs = 0;           // 0: the command's default
  double lr = -1;                   // < 0: the command's default
  std::size_t batch = 64;
  std::size_t limit = 0;            // at most the first N samples of each data file (0: all)
  std::uint64_t seed = 0;
  bool seed_given = false;          // --seed was given (else the slice's draws use seed 0)
  bool baseline = false, json = false, progress = true;
};

}  // namespace nnlens::tool

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

/// What the three commands' shared options say about each one.
struct maintenance_help {
  const char* data;          // --data's help
  const char* no_mask;       // the flag that runs without a mask (the baseline alone) ...
  const char* no_mask_help;  // ... and its help
  bool categories;           // --categories (increment: the old classes are --old-classes)
  const char* test;          // the help of --test, --epochs, --lr, --seed, --baseline, --json
  const char* epochs;
  const char* lr;
  const char* seed;
  const char* baseline;
  const char* json;
};

/// The options the three share, in --help's order (the command's own follow, then --threads).
void add_maintenance_options(CLI::App& cmd, maintenance_common& m, const maintenance_help& h);

/// The training options of readapt and increment: --epochs and --lr (defaults when not given),
/// --batch, --seed (default `seed`), --no-progress.
template <class Training>
Training training_options(const maintenance_common& o, std::size_t epochs, double lr, std::uint64_t seed) {
  Training t;
  t.epochs = o.epochs ? o.epochs : epochs;
  t.lr = o.lr >= 0 ? o.lr : lr;
  t.batch = o.batch;
  t.seed = o.seed_given ? o.seed : seed;
  t.progress = o.progress;
  return t;
}

/// The JSON object of a maintenance command, on standard output: model, precision, the command's own
/// settings (in order), epochs, lr, [mask], `results` (in order), [baseline], output, [note],
/// total_seconds.
template <class T>
void print_json(const maintenance_common& o, const nlohmann::ordered_json& settings, std::size_t epochs, double lr,
                const basic_dynamic_network<T>& net, const std::optional<mask_info>& mi, const nlohmann::ordered_json& results,
                const std::optional<nlohmann::ordered_json>& baseline, const std::string& note, double seconds);

/// `head`'s fields, then `more`'s.
nlohmann::ordered_json joined(nlohmann::ordered_json head, const nlohmann::ordered_json& more);

}  // namespace nnlens::tool::maint
