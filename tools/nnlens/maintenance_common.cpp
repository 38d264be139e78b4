// tools/nnlens/maintenance_common.cpp -- see maintenance_common.hpp.
#include "maintenance_common.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <type_traits>

#include <nnlens/core/error.hpp>
#include <nnlens/core/progress.hpp>
#include <nnlens/io/weights.hpp>
#include <nnlens/neusemslice/neuron_mask.hpp>
#include <nnlens/network/fingerprint.hpp>
#include <nnlens/neusemslice/semslice.hpp>
#include <nnlens/train/fit.hpp>

#if defined(NNLENS_TOOL_HAS_ONNX)
#include <nnlens/io/onnx_export.hpp>
#endif

#include "cli.hpp"
#include "model.hpp"

namespace nnlens::tool::maint {

// -- options shared with `nnlens semslice`

metric parse_metric(const std::string& s) {
  using m = metric;
  return parse_word<m>({{"avg", m::avg}, {"var", m::var}, {"ens", m::ens}, {"taylor", m::taylor}, {"deeplift", m::deeplift}}, s, "--metric");
}

similarity parse_similarity(const std::string& s) {
  using m = similarity;  // linear_cka: an alias of cka
  return parse_word<m>({{"cka", m::linear_cka}, {"uncentered", m::uncentered}, {"unbiased", m::unbiased}, {"linear_cka", m::linear_cka}}, s,
                       "--similarity");
}

compress::pruning_method parse_pruner(const std::string& s) {
  using pm = compress::pruning_method;
  return parse_word<pm>(
      {{"lamp", pm::lamp}, {"global", pm::global}, {"uniform", pm::uniform_plus}, {"erk", pm::erk}, {"uniform+", pm::uniform_plus}},
      s, "--pruner");
}

std::vector<std::size_t> parse_classes(const std::string& list, std::size_t classes, const char* option) {
  std::vector<std::size_t> r;
  std::size_t p = 0;
  while (p <= list.size()) {
    std::size_t q = list.find(',', p);
    if (q == std::string::npos) q = list.size();
    const std::string c = list.substr(p, q - p);
    if (!c.empty()) {
      if (c.find_first_not_of("0123456789") != std::string::npos || c.size() > 9)
        throw value_error(concat(option, ": '", c, "' is not a class number"));
      const std::size_t v = std::stoul(c);
      if (v >= classes)
        throw value_error(concat(option, ": ", v, " is not an output class (the model has ", classes, ": 0-", classes - 1, ")"));
      if (std::find(r.begin(), r.end(), v) != r.end()) throw value_error(concat(option, ": ", v, " is listed twice"));
      r.push_back(v);
    }
    p = q + 1;
  }
  if (r.empty()) throw value_error(concat(option, ": no category given"));
  return r;
}

void add_slice_options(CLI::App& cmd, std::string& metric, double& theta, std::string& similarity, std::string* categories,
                       std::size_t& samples, std::size_t& metric_samples, const std::string& prefix,
                       const char* categories_help) {
  auto help = [&](std::string s) {  // "Samples per ..." -> "Slice: samples per ..."
    if (!prefix.empty()) s = prefix + char(std::tolower(static_cast<unsigned char>(s[0]))) + s.substr(1);
    return s;
  };
  cmd.add_option("--metric", metric, help("Neuron contribution metric: avg, var, ens, taylor, deeplift"))->capture_default_str();
  cmd.add_option("--theta", theta, help("Similarity threshold, 0 < theta <= 1"))->capture_default_str();
  cmd.add_option("--similarity", similarity, help("cka (centred linear CKA), uncentered (the paper's Eq. 2), unbiased (HSIC_u)"))
      ->capture_default_str();
  if (categories) cmd.add_option("--categories", *categories, help(categories_help));
  cmd.add_option("--samples", samples, help("Samples per category in the Gram matrices"))->capture_default_str();
  cmd.add_option("--metric-samples", metric_samples, help("At most this many samples per category for the metric (0: all)"))
      ->capture_default_str();
}

/// Checks made before any file is read.
void check_common(const maintenance_common& o) {
  if (!o.slice.none && o.slice.mask.empty()) {
    if (!(o.slice.theta > 0 && o.slice.theta <= 1))
      throw value_error(concat("--theta ", o.slice.theta, ": expected 0 < theta <= 1"));
    parse_metric(o.slice.metric);
    parse_similarity(o.slice.similarity);
    if (o.slice.samples == 0) throw value_error("--samples: expected at least 1 sample per category");
  }
  if (o.batch == 0) throw value_error("--batch: expected at least 1");
  if (o.lr >= 0 && !(o.lr < 1e6)) throw value_error(concat("--lr ", o.lr, ": not a learning rate"));
  // The output: a format the tool writes, in a directory that exists (checked before the long work).
  const std::string ext = extension_of(o.output);
  if (ext == ".onnx") {
#if !defined(NNLENS_TOOL_HAS_ONNX)
    throw value_error(o.output + ": this build writes no ONNX (built without libonnx-dev); write .nnlw");
#endif
  } else if (ext == ".nnlw") {
    if (extension_of(o.model) != ".nnlw")
      throw value_error(concat(o.output, ": the tool reads .nnlw files back only for the demo's LeNet-5; ", o.model,
                               " is a ", extension_of(o.model), " model: write .onnx"));
  } else {
    throw value_error(concat(o.output, ": unsupported output format '", ext, "' (write .nnlw or .onnx)"));
  }
  const std::filesystem::path parent = std::filesystem::path(o.output).parent_path();
  std::error_code ec;
  if (!parent.empty() && !std::filesystem::is_directory(parent, ec))
    throw io_error(o.output + ": cannot open for writing (no such directory)");
}

// -- data

/// Only the samples of d whose label is in `classes` (when not empty), then at most the first
/// `limit` of them (0: all).
template <class T>
labelled<T> select(labelled<T> d, std::size_t limit, const std::vector<std::size_t>& classes) {
  const std::size_t n = d.size();
  if (classes.empty() && (limit == 0 || limit >= n)) return d;
  std::vector<std::size_t> keep;
  for (std::size_t i = 0; i < n && (limit == 0 || keep.size() < limit); ++i)
    if (classes.empty() || std::find(classes.begin(), classes.end(), d.y[i]) != classes.end()) keep.push_back(i);
  if (keep.empty()) {
    std::string cs;
    for (auto c : classes) cs += (cs.empty() ? "" : ",") + std::to_string(c);
    throw data_error(concat(d.path, ": no samples of class(es) ", cs));
  }
  const std::size_t dim = n ? d.x.size() / n : 0;
  auto sh = d.x.shape();
  std::vector<std::size_t> shape(sh.begin(), sh.end());
  shape[0] = keep.size();
  xt::xarray<T> x = xt::xarray<T>::from_shape(shape);
  std::vector<std::size_t> y(keep.size());
  for (std::size_t k = 0; k < keep.size(); ++k) {
    std::copy_n(d.x.data() + keep[k] * dim, dim, x.data() + k * dim);
    y[k] = d.y[keep[k]];
  }
  d.x = std::move(x);
  d.y = std::move(y);
  return d;
}

/// The labelled samples of a file (rows in the model's data layout), then select(limit, classes).
template <class T>
labelled<T> read_labelled(const model<T>& m, const std::string& data, const std::string& labels, const char* labels_option,
                          std::size_t limit, const std::vector<std::size_t>& classes) {
  labelled<T> d;
  d.path = data;
  d.x = read_samples<T>(data, m.in);
  const std::size_t n = d.x.shape()[0];
  if (n == 0) throw data_error(data + ": no samples");
  const std::string lp = labels.empty() ? companion_labels(data) : labels;
  if (lp.empty()) throw value_error(concat(labels_option, " FILE is required: ", data, " has no IDX labels file beside it"));
  d.y = read_labels(lp, n, m.net.output_shape().size());
  return select(std::move(d), limit, classes);
}

template <class T>
double accuracy_of(const basic_dynamic_network<T>& net, const labelled<T>& d) {
  return 100.0 * train::evaluate(execution::par, net, d.x, d.y).accuracy;
}

/// Fails for a category with no samples in d (naming the data file, as `nnlens semslice` does).
template <class T>
void check_categories_present(const labelled<T>& d, const std::vector<std::size_t>& cs, std::size_t classes, const char* hint) {
  std::vector<std::size_t> count(classes, 0);
  for (auto c : d.y) ++count[c];
  for (auto c : cs)
    if (count[c] == 0) throw data_error(concat(d.path, ": category ", c, " has no samples", hint));
}

// -- precision

template <class T>
std::string other_precision(std::uint64_t fp, const std::string& model, io::data_layout layout) {
  using U = std::conditional_t<std::is_same_v<T, float>, double, float>;
  try {
    if (fp == model_fingerprint(load_model<U>(model, layout).net)) return std::is_same_v<U, float> ? "f32" : "f64";
  } catch (const error&) {
  }
  return {};
}

template <class T>
neuron_mask read_mask(const std::string& path, const basic_dynamic_network<T>& net, const std::string& model,
                      io::data_layout layout) {
  std::ifstream f(path);
  if (!f) throw io_error(path + ": cannot open");
  neuron_mask m;
  try {
    m = load_neuron_mask(f, net, /*same_weights*/ false);  // the architecture
  } catch (const data_error& e) {
    throw data_error(concat(path, ": not a mask of ", model, ": ", e.what()));
  }
  const std::uint64_t mine = model_fingerprint(net);
  if (m.fingerprint != 0 && m.fingerprint != mine) {
    if (other_precision<T>(m.fingerprint, model, layout).empty())
      throw data_error(concat(path, ": not a mask of ", model,
                              ": load_neuron_mask: the mask was made on another model (the model fingerprints differ)"));
    m.fingerprint = mine;  // the same model file sliced at the other precision: the same neurons
  }
  return m;
}

template <class T>
std::string onnx_narrowing_note(const std::string& path) {
  if (!std::is_same_v<T, double> || extension_of(path) != ".onnx") return {};
  return path + " holds float32 weights (ONNX export writes FLOAT tensors): the double network is rounded to float in the file";
}

// -- the neuron mask

/// The mask from --mask, or semslice on d for `categories` (empty: every class, or --categories).
template <class T>
mask_info obtain_mask(const basic_dynamic_network<T>& net, const maintenance_common& o, const labelled<T>& d,
                      std::vector<std::size_t> categories, const char* category_option) {
  mask_info r;
  const auto t0 = clock_type::now();
  if (!o.slice.mask.empty()) {
    r.mask = read_mask(o.slice.mask, net, o.model, o.layout);
    r.source = o.slice.mask;
    r.categories = std::move(categories);
    return r;
  }
  const std::size_t classes = net.output_shape().size();
  const bool listed = !categories.empty() || !o.slice.categories.empty();
  if (categories.empty() && !o.slice.categories.empty()) categories = parse_classes(o.slice.categories, classes, category_option);
  std::vector<std::size_t> cs = categories;
  if (cs.empty())
    for (std::size_t c = 0; c < classes; ++c) cs.push_back(c);
  check_categories_present(d, cs, classes,
                           listed ? "" : concat(" (pass ", category_option, " to slice the others)").c_str());
  semslice_options so;
  so.metric = parse_metric(o.slice.metric), so.theta = o.slice.theta, so.similarity = parse_similarity(o.slice.similarity);
  so.samples_per_category = o.slice.samples, so.seed = o.slice.slice_seed, so.metric_samples = o.slice.metric_samples;
  so.categories = categories;
  try {
    r.mask = semslice(execution::par, net, d.x, d.y, so).mask;
  } catch (const value_error& e) {
    throw value_error(concat(d.path, ": ", e.what()));
  } catch (const data_error& e) {
    throw data_error(concat(d.path, ": ", e.what()));
  }
  r.source = "semslice";
  r.categories = cs;
  r.seconds = seconds_since(t0);
  return r;
}

template <class T>
nlohmann::ordered_json mask_json(const basic_dynamic_network<T>& net, const mask_info& m, const maintenance_common& o) {
  const auto us = neuron_units(net);
  const auto acc = parameter_accounting(net, m.mask);
  nlohmann::ordered_json j;
  j["source"] = m.source;
  if (m.source == "semslice") {
    j["metric"] = o.slice.metric;
    j["theta"] = o.slice.theta;
  }
  if (!m.categories.empty()) j["categories"] = m.categories;
  j["critical"] = nlohmann::ordered_json::array();
  for (std::size_t u = 0; u < us.size(); ++u) j["critical"].push_back(m.mask.kept(u));
  j["neurons"] = nlohmann::ordered_json::array();
  for (const auto& u : us) j["neurons"].push_back(u.neurons);
  j["compression"] = acc.compression;
  return j;
}

template <class T>
std::string mask_line(const basic_dynamic_network<T>& net, const mask_info& m, const maintenance_common& o) {
  const auto us = neuron_units(net);
  std::string s = m.source == "semslice"
                      ? concat("neuron mask: semslice (", o.slice.metric, ", theta ", fmt(o.slice.theta, "%g"), ", ",
                               m.categories.size(), " categor", m.categories.size() == 1 ? "y" : "ies", ", ",
                               format_duration(m.seconds), ") keeps")
                      : concat("neuron mask ", m.source, " keeps");
  for (std::size_t u = 0; u < us.size(); ++u) s += concat(" ", m.mask.kept(u), "/", us[u].neurons);
  return s + " neurons, CR " + fmt(parameter_accounting(net, m.mask).compression, "%.2f") + "%";
}

// -- the output model

template <class T>
void write_model(const std::string& path, const std::string& model, const basic_dynamic_network<T>& net, const std::string& what) {
  if (extension_of(path) == ".onnx") {
#if defined(NNLENS_TOOL_HAS_ONNX)
    io::onnx_export_options eo;
    eo.graph_name = what;
    const std::string tmp = path + ".tmp";
    io::save_onnx(tmp, net, eo);
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
    if (ec) throw io_error(path + ": cannot write (" + ec.message() + ")");
#endif
    return;
  }
  io::weights_metadata meta;
  try {
    meta = io::read_weights_metadata(model);
  } catch (const error&) {
  }
  if (!meta.count("model")) meta["model"] = "lenet5";
  meta["nnlens"] = what;
  meta["source"] = std::filesystem::path(model).filename().string();
  io::save_weights(path, net, meta);
}

// -- what the three commands share: their common options, their JSON report

void add_maintenance_options(CLI::App& cmd, maintenance_common& m, const maintenance_help& h) {
  cmd.add_option("--data,-d", m.data, h.data)->required();
  cmd.add_option("--labels", m.labels,
                 "Labels of --data (IDX labels or one integer per line; default: the IDX labels file beside IDX images)");
  cmd.add_option("--test", m.test, h.test);
  cmd.add_option("--test-labels", m.test_labels, "Labels of --test (default: the IDX labels file beside it)");
  auto* mask_opt = cmd.add_option("--mask", m.slice.mask, "Use this neuron mask (nnlens semslice -o) instead of slicing");
  cmd.add_flag(h.no_mask, m.slice.none, h.no_mask_help)->excludes(mask_opt);
  add_slice_options(cmd, m.slice.metric, m.slice.theta, m.slice.similarity, h.categories ? &m.slice.categories : nullptr,
                    m.slice.samples, m.slice.metric_samples, "Slice: ", "Comma-separated output classes (default: every class)");
  cmd.add_option("--epochs", m.epochs, h.epochs)->check(CLI::Range(1, 100000));
  cmd.add_option("--lr", m.lr, h.lr)->check(CLI::NonNegativeNumber);
  cmd.add_option("--batch", m.batch, "Mini-batch size")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  cmd.add_option("--limit", m.limit, "Use at most the first N samples of each data file (0: all)")->capture_default_str();
  cmd.add_option_function<std::uint64_t>(
      "--seed",
      [&m](std::uint64_t s) {  // without --seed, the slice's draws use seed 0
        m.seed = m.slice.slice_seed = s;
        m.seed_given = true;
      },
      h.seed);
  cmd.add_flag("--baseline", m.baseline, h.baseline);
  cmd.add_option("--output,-o", m.output, "The model to write: .nnlw (the demo's LeNet-5) or .onnx")->required();
  cmd.add_flag("--json", m.json, h.json);
  add_no_progress(cmd, m.progress);
  add_model_options(cmd, m, precision::f32);
}

template <class T>
void print_json(const maintenance_common& o, const nlohmann::ordered_json& settings, std::size_t epochs, double lr,
                const basic_dynamic_network<T>& net, const std::optional<mask_info>& mi, const nlohmann::ordered_json& results,
                const std::optional<nlohmann::ordered_json>& baseline, const std::string& note, double seconds) {
  nlohmann::ordered_json j;
  j["model"] = o.model;
  j["precision"] = precision_name(o.precision);
  for (const auto& [k, v] : settings.items()) j[k] = v;
  j["epochs"] = epochs;
  j["lr"] = lr;
  if (mi) j["mask"] = mask_json(net, *mi, o);
  for (const auto& [k, v] : results.items()) j[k] = v;
  if (baseline) j["baseline"] = *baseline;
  j["output"] = o.output;
  if (!note.empty()) j["note"] = note;
  j["total_seconds"] = seconds;
  std::cout << j.dump() << "\n";
}

nlohmann::ordered_json joined(nlohmann::ordered_json head, const nlohmann::ordered_json& more) {
  for (const auto& [k, v] : more.items()) head[k] = v;
  return head;
}

// Every template above, for --precision f32 and f64.
#define NNLENS_MAINT_INSTANTIATE(T)                                                                                          \
  template labelled<T> select(labelled<T>, std::size_t, const std::vector<std::size_t>&);                                 \
  template labelled<T> read_labelled(const model<T>&, const std::string&, const std::string&, const char*, std::size_t,    \
                                     const std::vector<std::size_t>&);                                                     \
  template double accuracy_of(const basic_dynamic_network<T>&, const labelled<T>&);                                        \
  template void check_categories_present(const labelled<T>&, const std::vector<std::size_t>&, std::size_t, const char*);  \
  template std::string other_precision<T>(std::uint64_t, const std::string&, io::data_layout);                             \
  template neuron_mask read_mask(const std::string&, const basic_dynamic_network<T>&, const std::string&,                  \
                                 io::data_layout);                                                                         \
  template std::string onnx_narrowing_note<T>(const std::string&);                                                         \
  template mask_info obtain_mask(const basic_dynamic_network<T>&, const maintenance_common&, const labelled<T>&,            \
                                 std::vector<std::size_t>, const char*);                                                   \
  template nlohmann::ordered_json mask_json(const basic_dynamic_network<T>&, const mask_info&, const maintenance_common&); \
  template std::string mask_line(const basic_dynamic_network<T>&, const mask_info&, const maintenance_common&);            \
  template void write_model(const std::string&, const std::string&, const basic_dynamic_network<T>&, const std::string&);    \
  template void print_json(const maintenance_common&, const nlohmann::ordered_json&, std::size_t, double,                 \
                           const basic_dynamic_network<T>&, const std::optional<mask_info>&, const nlohmann::ordered_json&,  \
                           const std::optional<nlohmann::ordered_json>&, const std::string&, double);
NNLENS_MAINT_INSTANTIATE(float)
NNLENS_MAINT_INSTANTIATE(double)
#undef NNLENS_MAINT_INSTANTIATE

}  // namespace nnlens::tool::maint
