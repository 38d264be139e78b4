// tools/nnlens/maintenance_cmd.cpp -- `nnlens restructure`, `nnlens readapt`, `nnlens increment`
// (see maintenance_cmd.hpp).
#include "maintenance_cmd.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <set>
#include <vector>

#include <nlohmann/json.hpp>

#include <nnlens/compress/pruning.hpp>
#include <nnlens/core/error.hpp>
#include <nnlens/core/progress.hpp>
#include <nnlens/io/weights.hpp>
#include <nnlens/slicing/increment.hpp>
#include <nnlens/slicing/neuron_mask.hpp>
#include <nnlens/slicing/readapt.hpp>
#include <nnlens/slicing/restructure.hpp>
#include <nnlens/slicing/semslice.hpp>
#include <nnlens/train/fit.hpp>

#if defined(NNLENS_TOOL_HAS_ONNX)
#include <nnlens/io/onnx_export.hpp>
#endif

#include "model.hpp"

namespace nnlens::tool {

namespace {

using nnlens::detail::concat;
using json = nlohmann::ordered_json;  // keys in the documented order
using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t0) { return std::chrono::duration<double>(clock_type::now() - t0).count(); }

std::string fmt(double v, const char* f) {
  char b[64];
  std::snprintf(b, sizeof b, f, v + 0.0);
  return b;
}

std::string lower_extension(const std::string& path) {
  std::string e = std::filesystem::path(path).extension().string();
  for (auto& c : e) c = char(std::tolower(static_cast<unsigned char>(c)));
  return e;
}

// -- options (the same words and messages as `nnlens semslice`)

metric parse_metric(const std::string& s) {
  if (s == "avg") return metric::avg;
  if (s == "var") return metric::var;
  if (s == "ens") return metric::ens;
  if (s == "taylor") return metric::taylor;
  if (s == "deeplift") return metric::deeplift;
  throw value_error("--metric: expected avg, var, ens, taylor or deeplift, got '" + s + "'");
}

similarity parse_similarity(const std::string& s) {
  if (s == "cka" || s == "linear_cka") return similarity::linear_cka;
  if (s == "uncentered") return similarity::uncentered;
  if (s == "unbiased") return similarity::unbiased;
  throw value_error("--similarity: expected cka, uncentered or unbiased, got '" + s + "'");
}

compress::pruning_method parse_pruner(const std::string& s) {
  if (s == "lamp") return compress::pruning_method::lamp;
  if (s == "global") return compress::pruning_method::global;
  if (s == "uniform" || s == "uniform+") return compress::pruning_method::uniform_plus;
  if (s == "erk") return compress::pruning_method::erk;
  throw value_error("--pruner: expected lamp, global, uniform or erk, got '" + s + "'");
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
  const std::string ext = lower_extension(o.output);
  if (ext == ".onnx") {
#if !defined(NNLENS_TOOL_HAS_ONNX)
    throw value_error(o.output + ": this build writes no ONNX (built without libonnx-dev); write .nnlw");
#endif
  } else if (ext == ".nnlw") {
    if (lower_extension(o.model) != ".nnlw")
      throw value_error(concat(o.output, ": the tool reads .nnlw files back only for the demo's LeNet-5; ", o.model,
                               " is a ", lower_extension(o.model), " model: write .onnx"));
  } else {
    throw value_error(concat(o.output, ": unsupported output format '", ext, "' (write .nnlw or .onnx)"));
  }
  const std::filesystem::path parent = std::filesystem::path(o.output).parent_path();
  std::error_code ec;
  if (!parent.empty() && !std::filesystem::is_directory(parent, ec))
    throw io_error(o.output + ": cannot open for writing (no such directory)");
}

// -- data

struct labelled {
  std::string path;
  xt::xarray<float> x;
  std::vector<std::size_t> y;
  std::size_t size() const { return y.size(); }
};

/// Only the samples of d whose label is in `classes` (when not empty), then at most the first
/// `limit` of them (0: all).
labelled select(labelled d, std::size_t limit, const std::vector<std::size_t>& classes) {
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
  xt::xarray<float> x = xt::xarray<float>::from_shape(shape);
  std::vector<std::size_t> y(keep.size());
  for (std::size_t k = 0; k < keep.size(); ++k) {
    std::copy_n(d.x.data() + keep[k] * dim, dim, x.data() + k * dim);
    y[k] = d.y[keep[k]];
  }
  d.x = std::move(x);
  d.y = std::move(y);
  return d;
}

/// The labelled samples of a file, then select(limit, classes).
labelled read_labelled(const DynamicNetwork& net, const std::string& data, const std::string& labels,
                       const char* labels_option, std::size_t limit, const std::vector<std::size_t>& classes = {}) {
  labelled d;
  d.path = data;
  d.x = read_samples(data, net.input_shape());
  const std::size_t n = d.x.shape()[0];
  if (n == 0) throw data_error(data + ": no samples");
  const std::string lp = labels.empty() ? companion_labels(data) : labels;
  if (lp.empty()) throw value_error(concat(labels_option, " FILE is required: ", data, " has no IDX labels file beside it"));
  d.y = read_labels(lp, n, net.output_shape().size());
  return select(std::move(d), limit, classes);
}

double accuracy_of(const DynamicNetwork& net, const labelled& d) {
  return 100.0 * train::evaluate(execution::par, net, d.x, d.y).accuracy;
}

/// Fails for a category with no samples in d (naming the data file, as `nnlens semslice` does).
void check_categories_present(const labelled& d, const std::vector<std::size_t>& cs, std::size_t classes, const char* hint) {
  std::vector<std::size_t> count(classes, 0);
  for (auto c : d.y) ++count[c];
  for (auto c : cs)
    if (count[c] == 0) throw data_error(concat(d.path, ": category ", c, " has no samples", hint));
}

// -- the neuron mask

struct mask_info {
  neuron_mask mask;
  std::string source;  // "semslice" or the mask file
  std::vector<std::size_t> categories;
  double seconds = 0;
};

/// The mask from --mask, or semslice on d for `categories` (empty: every class, or --categories).
mask_info obtain_mask(const DynamicNetwork& net, const maintenance_common& o, const labelled& d,
                      std::vector<std::size_t> categories, const char* category_option) {
  mask_info r;
  const auto t0 = clock_type::now();
  if (!o.slice.mask.empty()) {
    std::ifstream f(o.slice.mask);
    if (!f) throw io_error(o.slice.mask + ": cannot open");
    try {
      r.mask = load_neuron_mask(f, net);
    } catch (const data_error& e) {
      throw data_error(concat(o.slice.mask, ": not a mask of ", o.model, ": ", e.what()));
    }
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

json mask_json(const DynamicNetwork& net, const mask_info& m, const maintenance_common& o) {
  const auto us = neuron_units(net);
  const auto acc = parameter_accounting(net, m.mask);
  json j;
  j["source"] = m.source;
  if (m.source == "semslice") {
    j["metric"] = o.slice.metric;
    j["theta"] = o.slice.theta;
  }
  if (!m.categories.empty()) j["categories"] = m.categories;
  j["critical"] = json::array();
  for (std::size_t u = 0; u < us.size(); ++u) j["critical"].push_back(m.mask.kept(u));
  j["neurons"] = json::array();
  for (const auto& u : us) j["neurons"].push_back(u.neurons);
  j["compression"] = acc.compression;
  return j;
}

std::string mask_line(const DynamicNetwork& net, const mask_info& m, const maintenance_common& o) {
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

void write_model(const std::string& path, const std::string& model, const DynamicNetwork& net, const std::string& what) {
  if (lower_extension(path) == ".onnx") {
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

}  // namespace

// ============================================================================ restructure

namespace {

json report_json(const restructure_report& r) {
  json j;
  j["pruner"] = std::string(compress::pruning_method_name(r.method));
  j["start_compression"] = r.start_compression;
  j["start_accuracy"] = r.start_accuracy;
  j["prunable"] = r.prunable;
  j["iterations"] = json::array();
  for (const auto& it : r.iterations)
    j["iterations"].push_back(json{{"iteration", it.iteration}, {"compression", it.compression},
                                   {"weight_pruned", it.weight_pruned}, {"accuracy", it.accuracy},
                                   {"accepted", it.accepted}, {"pruned", it.pruned}, {"seconds", it.seconds}});
  j["ni"] = r.ni;
  j["compression"] = r.compression;
  j["weight_pruned"] = r.weight_pruned;
  j["accuracy"] = r.accuracy;
  j["seconds"] = r.seconds;
  return j;
}

void print_iterations(const restructure_report& r) {
  std::cout << "  iter      CR   pool pruned   accuracy\n";
  for (const auto& it : r.iterations)
    std::cout << "  " << fmt(double(it.iteration), "%4.0f") << fmt(it.compression, "  %6.2f%%") << fmt(it.weight_pruned, "      %6.2f%%")
              << fmt(it.accuracy, "    %6.2f%%") << (it.accepted ? "  accepted" : "  REJECTED (undone)") << "  "
              << format_duration(it.seconds) << "\n";
}

}  // namespace

int run_restructure(const restructure_cmd_options& o) {
  check_common(o);
  const auto method = parse_pruner(o.pruner);
  if (!(o.prune_step > 0 && o.prune_step < 1))
    throw value_error(concat("--prune-step ", o.prune_step, ": expected 0 < p < 1"));
  if (!(o.max_drop >= 0)) throw value_error(concat("--max-drop ", o.max_drop, ": expected >= 0 accuracy points"));
  if (o.max_iterations == 0) throw value_error("--max-iterations: expected at least 1");

  keep_batch_buffers_on_the_heap();
  const auto t0 = clock_type::now();
  const DynamicNetwork original = load_model(o.model);
  const labelled train_d = read_labelled(original, o.data, o.labels, "--labels", o.limit);
  const labelled test_d = read_labelled(original, o.test, o.test_labels, "--test-labels", o.limit);
  std::optional<mask_info> mi;
  if (!o.slice.none) mi = obtain_mask(original, o, train_d, {}, "--categories");

  restructure_options ro;
  ro.method = method;
  ro.p = o.prune_step;
  ro.tolerance = o.max_drop;
  ro.epochs = o.epochs ? o.epochs : 1;
  ro.batch_size = o.batch;
  ro.lr = o.lr >= 0 ? o.lr : 1e-4;
  ro.max_iterations = o.max_iterations;
  ro.seed = o.seed_given ? o.seed : 0;
  ro.reference_accuracy = accuracy_of(original, test_d);

  auto run_one = [&](const neuron_mask* m, const std::string& label, DynamicNetwork& net) {
    std::optional<progress_bar> bar;  // per iteration, on stderr
    if (o.progress) bar.emplace(label, o.max_iterations);
    restructure_options r = ro;
    if (bar)
      r.on_iteration = [&](const restructure_iteration& it) {
        bar->update(it.iteration, [&] {
          return concat("CR ", fmt(it.compression, "%.2f"), "%  acc ", fmt(it.accuracy, "%.2f"), "%",
                        it.accepted ? "" : "  (rejected: done)");
        });
      };
    auto rep = restructure(execution::par, net, m, train_d.x, train_d.y, test_d.x, test_d.y, r);
    if (bar) bar->finish(concat("NI ", rep.ni, "  CR ", fmt(rep.compression, "%.2f"), "%  acc ", fmt(rep.accuracy, "%.2f"), "%"));
    return rep;
  };
  const std::string name = std::string(compress::pruning_method_name(method));
  DynamicNetwork net = original;
  const auto rep = run_one(mi ? &mi->mask : nullptr, mi ? "restructure NSS+" + name : "restructure " + name, net);
  std::optional<restructure_report> base;
  if (o.baseline && mi) {
    DynamicNetwork bnet = original;
    base = run_one(nullptr, "baseline " + name, bnet);
  }
  write_model(o.output, o.model, net,
              concat("restructure ", mi ? "NSS+" : "", name, " p ", o.prune_step, ", NI ", rep.ni, ", CR ",
                     fmt(rep.compression, "%.2f"), "%"));
  const double seconds = seconds_since(t0);

  if (o.json) {
    json j;
    j["model"] = o.model;
    j["pruner"] = name;
    j["p"] = o.prune_step;
    j["tolerance"] = o.max_drop;
    j["epochs"] = ro.epochs;
    j["lr"] = ro.lr;
    if (mi) j["mask"] = mask_json(original, *mi, o);
    j["parameters"] = rep.parameters;
    j["reference_accuracy"] = rep.reference_accuracy;
    json r = report_json(rep);
    for (auto& [k, v] : r.items()) j[k] = v;
    if (base) j["baseline"] = report_json(*base);
    j["output"] = o.output;
    j["total_seconds"] = seconds;
    std::cout << j.dump() << "\n";
    return 0;
  }
  std::cout << o.model << ": restructure with " << (mi ? "NSS+" : "") << name << ", p " << fmt(o.prune_step, "%g")
            << ", tolerance " << fmt(o.max_drop, "%g") << " point(s), fine-tuning " << ro.epochs << " epoch(s) on "
            << train_d.size() << " samples (Adam lr " << fmt(ro.lr, "%g") << ")\n";
  if (mi) std::cout << "  " << mask_line(original, *mi, o) << "\n";
  std::cout << "  accuracy on " << o.test << ": " << fmt(rep.reference_accuracy, "%.2f") << "%";
  if (mi) std::cout << ", " << fmt(rep.start_accuracy, "%.2f") << "% masked";
  std::cout << "; " << rep.parameters << " parameters, " << rep.prunable << " prunable weights\n";
  print_iterations(rep);
  auto summary = [&](const char* what, const restructure_report& r) {
    std::cout << "  " << what << ": CR " << fmt(r.compression, "%.2f") << "%, NI " << r.ni << ", accuracy "
              << fmt(r.accuracy, "%.2f") << "%, " << format_duration(r.seconds) << "\n";
  };
  summary(mi ? ("NSS+" + name).c_str() : name.c_str(), rep);
  if (base) summary((name + " alone (baseline)").c_str(), *base);
  std::cout << "  model written to " << o.output << "\n";
  std::cout.flush();
  return 0;
}

// ============================================================================ readapt

namespace {
json readapt_json(const readapt_report& r) {
  json j;
  j["trained_parameters"] = r.trained_parameters;
  j["parameters"] = r.total_parameters;
  j["tpr"] = 100.0 * r.tpr;
  j["adv_before"] = 100.0 * r.adv_before;
  j["ra"] = 100.0 * r.ra;
  j["raa"] = 100.0 * r.raa;
  j["clean_before"] = 100.0 * r.clean_before;
  j["clean_after"] = 100.0 * r.clean_after;
  j["adversarial"] = r.adversarial;
  j["train_seconds"] = r.train_seconds;
  j["seconds"] = r.seconds;
  return j;
}
}  // namespace

int run_readapt(const readapt_cmd_options& o) {
  check_common(o);
  if (o.attack != "fgsm" && o.attack != "pgd") throw value_error("--attack: expected fgsm or pgd, got '" + o.attack + "'");
  if (!(o.eps >= 0 && o.eps <= 1)) throw value_error(concat("--eps ", o.eps, ": expected 0 <= eps <= 1 (pixels in [0, 1])"));
  if (o.adv_samples == 0) throw value_error("--adv-samples: expected at least 1");
  if (o.pgd_steps == 0) throw value_error("--pgd-steps: expected at least 1");

  keep_batch_buffers_on_the_heap();
  const auto t0 = clock_type::now();
  const DynamicNetwork net = load_model(o.model);
  const labelled train_d = read_labelled(net, o.data, o.labels, "--labels", o.limit);
  const labelled test_d = o.test.empty() ? train_d : read_labelled(net, o.test, o.test_labels, "--test-labels", o.limit);
  std::optional<mask_info> mi;
  if (!o.slice.none) mi = obtain_mask(net, o, train_d, {}, "--categories");

  readapt_options ro;
  ro.epochs = o.epochs ? o.epochs : 5;
  ro.lr = o.lr >= 0 ? o.lr : 1e-3;
  ro.batch = o.batch;
  ro.seed = o.seed_given ? o.seed : 1;
  ro.progress = o.progress;
  const readapt_attack atk =
      o.attack == "fgsm" ? fgsm_attack(o.eps, o.adv_samples) : pgd_attack(o.eps, o.pgd_steps, o.adv_samples, ro.seed);

  auto run_one = [&](const neuron_mask* m) {
    try {
      return readapt(execution::par, net, m, train_d.x, train_d.y, test_d.x, test_d.y, atk, ro);
    } catch (const data_error& e) {
      throw data_error(concat(o.data, ": ", e.what()));
    }
  };
  auto res = run_one(mi ? &mi->mask : nullptr);
  std::optional<readapt_report> base;
  if (o.baseline && mi) base = run_one(nullptr).report;
  const auto& rep = res.report;
  write_model(o.output, o.model, res.model,
              concat("readapt ", mi ? "NSS" : "Full", " ", atk.name, " eps ", o.eps, ", RA ", fmt(100 * rep.ra, "%.2f"), "%"));
  const double seconds = seconds_since(t0);

  if (o.json) {
    json j;
    j["model"] = o.model;
    j["attack"] = atk.name;
    j["eps"] = o.eps;
    if (o.attack == "pgd") j["pgd_steps"] = o.pgd_steps;
    j["epochs"] = ro.epochs;
    j["lr"] = ro.lr;
    if (mi) j["mask"] = mask_json(net, *mi, o);
    json r = readapt_json(rep);
    for (auto& [k, v] : r.items()) j[k] = v;
    if (base) j["baseline"] = readapt_json(*base);
    j["output"] = o.output;
    j["total_seconds"] = seconds;
    std::cout << j.dump() << "\n";
    return 0;
  }
  std::cout << o.model << ": readapt (" << (mi ? "critical neurons only" : "every parameter") << ") against " << atk.name
            << " eps " << fmt(o.eps, "%g") << (o.attack == "pgd" ? concat(", ", o.pgd_steps, " steps") : std::string())
            << ", " << rep.adversarial << " adversarial samples from " << o.data << ", " << ro.epochs
            << " epoch(s), Adam lr " << fmt(ro.lr, "%g") << "\n";
  if (mi) std::cout << "  " << mask_line(net, *mi, o) << "\n";
  std::cout << "              TPR   adv before       RA      RAA   clean before -> after (on "
            << (o.test.empty() ? o.data : o.test) << ")\n";
  auto row = [&](const char* what, const readapt_report& r) {
    std::cout << "  " << what << fmt(100 * r.tpr, "%7.2f%%") << fmt(100 * r.adv_before, "    %7.2f%%")
              << fmt(100 * r.ra, "  %7.2f%%") << fmt(100 * r.raa, "  %7.2f%%") << fmt(100 * r.clean_before, "     %7.2f%%")
              << fmt(100 * r.clean_after, " -> %6.2f%%") << "   " << format_duration(r.train_seconds) << " training\n";
  };
  row(mi ? "NSS     " : "Full    ", rep);
  if (base) row("Full    ", *base);
  std::cout << "  model written to " << o.output << "\n";
  std::cout.flush();
  return 0;
}

// ============================================================================ increment

int run_increment(const increment_cmd_options& o) {
  check_common(o);
  if (!(o.replay >= 0 && o.replay <= 1)) throw value_error(concat("--replay ", o.replay, ": expected 0 <= fraction <= 1"));

  keep_batch_buffers_on_the_heap();
  const auto t0 = clock_type::now();
  const DynamicNetwork net = load_model(o.model);
  const std::size_t classes = net.output_shape().size();
  std::vector<std::size_t> old_classes, new_classes;
  if (!o.old_classes.empty()) old_classes = parse_classes(o.old_classes, classes, "--old-classes");
  if (!o.new_classes.empty()) new_classes = parse_classes(o.new_classes, classes, "--new-classes");
  // Every sample of the old classes' files is read, so that a category with no samples is named.
  labelled old_d = read_labelled(net, o.old_data, o.old_labels, "--old-labels", 0);
  if (old_classes.empty()) {
    const std::set<std::size_t> s(old_d.y.begin(), old_d.y.end());
    old_classes.assign(s.begin(), s.end());
  }
  check_categories_present(old_d, old_classes, classes, "");
  old_d = select(std::move(old_d), o.limit, old_classes);
  const labelled new_d = read_labelled(net, o.data, o.labels, "--labels", o.limit, new_classes);
  const labelled new_t = o.test.empty() ? new_d : read_labelled(net, o.test, o.test_labels, "--test-labels", o.limit, new_classes);
  const labelled old_t = o.old_test.empty() ? old_d
                                            : read_labelled(net, o.old_test, o.old_test_labels, "--old-test-labels", o.limit, old_classes);
  std::optional<mask_info> mi;
  if (!o.slice.none) {
    mi = obtain_mask(net, o, old_d, old_classes, "--old-classes");
    set_output_classes(net, mi->mask, old_classes);  // the output unit keeps (freezes) the old classes (A15)
  }

  increment_options io;
  io.epochs = o.epochs ? o.epochs : 5;
  io.lr = o.lr >= 0 ? o.lr : 1e-3;
  io.batch = o.batch;
  io.seed = o.seed_given ? o.seed : 1;
  io.progress = o.progress;
  std::optional<labelled_batch<float>> mix;
  if (o.replay > 0) mix = replay_mix(new_d.x, new_d.y, old_d.x, old_d.y, o.replay, io.seed + 100);
  auto run_one = [&](const neuron_mask* m) {
    return mix ? increment(execution::par, net, m, mix->x, mix->y, io) : increment(execution::par, net, m, new_d.x, new_d.y, io);
  };
  auto scores = [&](const DynamicNetwork& n) { return task_scores(execution::par, n, old_t.x, old_t.y, new_t.x, new_t.y); };
  const auto before = scores(net);
  auto res = run_one(mi ? &mi->mask : nullptr);
  const auto after = scores(res.model);
  std::optional<increment_report> base;
  std::optional<task_scores_report> base_scores;
  if (o.baseline && mi) {
    auto b = run_one(nullptr);
    base_scores = scores(b.model);
    base = std::move(b.report);
  }
  const auto& rep = res.report;
  write_model(o.output, o.model, res.model,
              concat("increment ", mi ? "NSS" : "Retrain", o.replay > 0 ? concat("+replay ", o.replay) : std::string(),
                     ", old ", fmt(100 * after.old_task, "%.2f"), "%, new ", fmt(100 * after.new_task, "%.2f"), "%"));
  const double seconds = seconds_since(t0);

  auto scores_json = [](const task_scores_report& s) {
    return json{{"old", 100 * s.old_task}, {"new", 100 * s.new_task}, {"mean", 100 * s.mean}};
  };
  auto report_json = [&](const increment_report& r, const task_scores_report& s) {
    json j;
    j["accuracy"] = scores_json(s);
    j["trained_parameters"] = r.trained_parameters;
    j["parameters"] = r.total_parameters;
    j["trained_fraction"] = 100 * r.trained_fraction;
    j["frozen_changed"] = r.frozen_changed;
    j["samples"] = r.samples;
    j["loss"] = r.fit.epochs.empty() ? 0.0 : r.fit.epochs.back().loss;
    j["seconds"] = r.fit.seconds;
    return j;
  };
  if (o.json) {
    json j;
    j["model"] = o.model;
    j["old_classes"] = old_classes;
    j["replay"] = o.replay;
    j["epochs"] = io.epochs;
    j["lr"] = io.lr;
    if (mi) j["mask"] = mask_json(net, *mi, o);
    j["before"] = scores_json(before);
    json r = report_json(rep, after);
    for (auto& [k, v] : r.items()) j[k] = v;
    if (base) j["baseline"] = report_json(*base, *base_scores);
    j["output"] = o.output;
    j["total_seconds"] = seconds;
    std::cout << j.dump() << "\n";
    return 0;
  }
  std::string oc;
  for (auto c : old_classes) oc += (oc.empty() ? "" : ",") + std::to_string(c);
  std::cout << o.model << ": increment (" << (mi ? "old task's critical neurons frozen" : "every parameter trains")
            << ") on " << rep.samples << " samples (" << o.data
            << (o.replay > 0 ? concat(" + ", rep.samples - new_d.size(), " old ones, replay ", fmt(o.replay, "%g")) : "")
            << "), old classes " << oc << ", " << io.epochs << " epoch(s), Adam lr " << fmt(io.lr, "%g") << "\n";
  if (mi) std::cout << "  " << mask_line(net, *mi, o) << "\n";
  std::cout << "            trained   old task   new task     mean   frozen changed\n";
  auto row = [&](const char* what, const task_scores_report& s, const increment_report* r) {
    std::cout << "  " << what << (r ? fmt(100 * r->trained_fraction, "%7.2f%%") : std::string("       -"))
              << fmt(100 * s.old_task, "   %7.2f%%") << fmt(100 * s.new_task, "  %7.2f%%") << fmt(100 * s.mean, "  %7.2f%%")
              << (r ? concat("   ", r->frozen_changed) : std::string()) << "\n";
  };
  row("before  ", before, nullptr);
  row(mi ? "NSS     " : "Retrain ", after, &rep);
  if (base) row("Retrain ", *base_scores, &*base);
  std::cout << "  accuracy on " << old_t.path << " (old) and " << new_t.path << " (new)\n";
  std::cout << "  model written to " << o.output << "\n";
  std::cout.flush();
  return 0;
}

}  // namespace nnlens::tool
