// tools/nnlens/maintenance_common.hpp -- what `nnlens restructure / readapt / increment` share
// (maintenance_cmd.cpp): option checks, labelled data, the neuron mask (a file or semslice), the
// output model.  Internal to the tool.
//
//   check_common(o)        the checks made before any file is read: the slice's options (the same
//                          messages as `nnlens semslice`), the output's format and directory
//   read_labelled(net, data, labels, "--labels", limit, classes)   samples + labels, then select()
//   select(d, limit, classes)   the samples of `classes` (all when empty), the first `limit` (0: all)
//   obtain_mask(net, o, d, categories, "--categories")   --mask MASK (checked against the model),
//                          or semslice on d; every category must have samples
//   write_model(path, model, net, what)   .nnlw (io::save_weights, metadata: the task) or .onnx
// throws: nnlens::error naming the file / option.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <nnlens/compress/pruning.hpp>
#include <nnlens/core/tensor.hpp>
#include <nnlens/network/dynamic_network.hpp>
#include <nnlens/slicing/neuron_mask.hpp>
#include <nnlens/slicing/semslice.hpp>

#include "maintenance_cmd.hpp"

namespace nnlens::tool::maint {

using clock_type = std::chrono::steady_clock;
inline double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

/// printf-formatted v ("%.2f").
std::string fmt(double v, const char* f);

compress::pruning_method parse_pruner(const std::string& s);
/// --metric and --similarity (the same words and messages in semslice and the maintenance commands).
metric parse_metric(const std::string& s);
similarity parse_similarity(const std::string& s);
/// "0,1,4" -> {0, 1, 4}; each < classes, no repeats (value_error naming `option`).
std::vector<std::size_t> parse_classes(const std::string& list, std::size_t classes, const char* option);

void check_common(const maintenance_common& o);

struct labelled {
  std::string path;
  xt::xarray<float> x;          // [n, input shape...]
  std::vector<std::size_t> y;
  std::size_t size() const { return y.size(); }
};
labelled select(labelled d, std::size_t limit, const std::vector<std::size_t>& classes);
labelled read_labelled(const DynamicNetwork& net, const std::string& data, const std::string& labels,
                       const char* labels_option, std::size_t limit, const std::vector<std::size_t>& classes = {});
/// Test accuracy in percent.
double accuracy_of(const DynamicNetwork& net, const labelled& d);
/// data_error "FILE: category c has no samples<hint>" for the first category without samples.
void check_categories_present(const labelled& d, const std::vector<std::size_t>& cs, std::size_t classes, const char* hint);

struct mask_info {
  neuron_mask mask;
  std::string source;  // "semslice" or the mask file
  std::vector<std::size_t> categories;
  double seconds = 0;
};
mask_info obtain_mask(const DynamicNetwork& net, const maintenance_common& o, const labelled& d,
                      std::vector<std::size_t> categories, const char* category_option);
/// {source, [metric, theta], categories, critical[], neurons[], compression}
nlohmann::ordered_json mask_json(const DynamicNetwork& net, const mask_info& m, const maintenance_common& o);
/// "neuron mask: semslice (taylor, theta 0.95, ...) keeps 6/6 ... neurons, CR 47.80%"
std::string mask_line(const DynamicNetwork& net, const mask_info& m, const maintenance_common& o);

void write_model(const std::string& path, const std::string& model, const DynamicNetwork& net, const std::string& what);

}  // namespace nnlens::tool::maint
