// tools/nnlens/semslice_cmd.cpp -- `nnlens semslice` (see semslice_cmd.hpp).
#include "semslice_cmd.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include <nnlens/core/error.hpp>
#include <nnlens/core/progress.hpp>
#include <nnlens/neusemslice/neuron_mask.hpp>
#include <nnlens/neusemslice/semslice.hpp>
#include <nnlens/train/fit.hpp>

#include "maintenance_common.hpp"
#include "format.hpp"
#include "model.hpp"

namespace nnlens::tool {

namespace {

using json = nlohmann::ordered_json;  // keys in the documented order
using clock_type = std::chrono::steady_clock;
using maint::parse_classes;
using maint::parse_metric;
using maint::parse_similarity;

std::vector<std::size_t> labels_for(const std::string& data, const std::string& given, const char* option,
                                    std::size_t n, std::size_t classes) {
  const std::string lp = given.empty() ? companion_labels(data) : given;
  if (lp.empty())
    throw value_error(concat(option, " FILE is required: ", data, " has no IDX labels file beside it"));
  return read_labels(lp, n, classes);
}

template <class T>
double accuracy_of(const basic_dynamic_network<T>& net, const xt::xarray<T>& X, const std::vector<std::size_t>& y) {
  return 100.0 * train::evaluate(execution::par, net, X, y).accuracy;
}

}  // namespace

template <class T>
int run_as(const semslice_cmd_options& o) {
  // -- options first: no file is read for a bad option
  if (!(o.theta > 0 && o.theta <= 1))
    throw value_error(concat("--theta ", o.theta, ": expected 0 < theta <= 1"));
  const metric mt = parse_metric(o.metric);
  const similarity sim = parse_similarity(o.similarity);
  if (o.samples == 0) throw value_error("--samples: expected at least 1 sample per category");
  if (!o.mask.empty() && !o.output.empty()) throw value_error("--mask and -o: a mask is either evaluated or made");

  const model<T> md = open_model<T>(o.model, o.layout);
  const basic_dynamic_network<T>& net = md.net;
  const std::size_t classes = net.output_shape().size();
  const xt::xarray<T> X = read_samples<T>(o.data, md.in);
  const std::size_t n = X.shape()[0];
  if (n == 0) throw data_error(o.data + ": no samples");
  const auto y = labels_for(o.data, o.labels, "--labels", n, classes);
  const auto us = neuron_units(net);

  const auto t0 = clock_type::now();
  neuron_mask mask;
  std::optional<semslice_report> rep;
  if (!o.mask.empty()) {
    mask = maint::read_mask(o.mask, net, o.model, o.layout);
  } else {
    semslice_options so;
    so.metric = mt, so.theta = o.theta, so.similarity = sim, so.step = o.step;
    so.samples_per_category = o.samples, so.seed = o.seed, so.metric_samples = o.metric_samples;
    if (!o.categories.empty()) so.categories = parse_classes(o.categories, classes, "--categories");
    // A category without samples: name it and the data file (the library names the option).
    {
      std::vector<std::size_t> count(classes, 0);
      for (auto c : y) ++count[c];
      std::vector<std::size_t> cs = so.categories;
      if (cs.empty())
        for (std::size_t c = 0; c < classes; ++c) cs.push_back(c);
      for (auto c : cs)
        if (count[c] == 0)
          throw data_error(concat(o.data, ": category ", c, " has no samples",
                                  o.categories.empty() ? " (pass --categories to slice the others)" : ""));
    }
    try {
      auto r = semslice(execution::par, net, X, y, so);
      mask = std::move(r.mask);
      rep = std::move(r.report);
    } catch (const value_error& e) {
      throw value_error(concat(o.data, ": ", e.what()));
    } catch (const data_error& e) {
      throw data_error(concat(o.data, ": ", e.what()));
    }
  }
  const double seconds = std::chrono::duration<double>(clock_type::now() - t0).count();
  const auto acc = parameter_accounting(net, mask);

  if (!o.output.empty()) {
    const std::string tmp = o.output + ".tmp";
    {
      std::ofstream f(tmp, std::ios::trunc);
      if (!f) throw io_error(o.output + ": cannot open for writing");
      save_neuron_mask(f, mask);
      f.flush();
      if (!f) throw io_error(o.output + ": write error");
    }
    std::error_code ec;
    std::filesystem::rename(tmp, o.output, ec);
    if (ec) throw io_error(o.output + ": cannot write (" + ec.message() + ")");
  }

  // -- accuracy: --mask evaluates on --data; a slice on --test when given
  std::optional<std::pair<double, double>> accuracy;
  std::string acc_on;
  if (!o.mask.empty() || !o.test.empty()) {
    const basic_dynamic_network<T> masked = apply_neuron_mask(net, mask);
    if (!o.mask.empty()) {
      accuracy = {accuracy_of(net, X, y), accuracy_of(masked, X, y)};
      acc_on = o.data;
    } else {
      const xt::xarray<T> TX = read_samples<T>(o.test, md.in);
      if (TX.shape()[0] == 0) throw data_error(o.test + ": no samples");
      const auto ty = labels_for(o.test, o.test_labels, "--test-labels", TX.shape()[0], classes);
      accuracy = {accuracy_of(net, TX, ty), accuracy_of(masked, TX, ty)};
      acc_on = o.test;
    }
  }

  if (o.json) {
    json j;
    j["precision"] = precision_name(o.precision);
    if (rep) {
      j["metric"] = to_string(rep->metric);
      j["similarity"] = to_string(rep->similarity);
      j["theta"] = rep->theta;
      j["categories"] = rep->categories;
      j["samples"] = rep->samples;
    } else {
      j["mask"] = o.mask;
    }
    j["layers"] = json::array();
    for (std::size_t u = 0; u < us.size(); ++u) {
      json l{{"name", us[u].name}, {"neurons", us[u].neurons}, {"critical", mask.kept(u)}};
      if (us[u].output) l["output"] = true;
      if (rep) l["k"] = rep->units[u].k;
      j["layers"].push_back(std::move(l));
    }
    j["parameters"] = acc.total;
    j["parameters_kept"] = acc.kept;
    j["compression"] = acc.compression;
    if (accuracy) j["accuracy"] = json{{"data", acc_on}, {"model", accuracy->first}, {"masked", accuracy->second}};
    j["seconds"] = seconds;
    std::cout << j.dump() << "\n";
    return 0;
  }

  if (rep) {
    std::cout << o.model << ": NeuSemSlice on " << n << " sample" << (n == 1 ? "" : "s") << " from " << o.data << ", "
              << rep->categories.size() << " categor" << (rep->categories.size() == 1 ? "y" : "ies") << ", metric "
              << to_string(rep->metric) << ", theta " << fmt(rep->theta, "%g") << ", " << to_string(rep->similarity)
              << ", m <= " << o.samples << ", " << o.precision << ", " << format_duration(seconds) << "\n";
  } else {
    std::cout << o.model << ": mask " << o.mask << ", " << o.precision << "\n";
  }
  const bool per_cat = rep && rep->categories.size() <= 10;
  std::string head = "  layer            critical / neurons";
  if (per_cat) {
    head += "    k per category (";
    for (std::size_t i = 0; i < rep->categories.size(); ++i) head += (i ? " " : "") + std::to_string(rep->categories[i]);
    head += ")";
  }
  std::cout << head << "\n";
  for (std::size_t u = 0; u < us.size(); ++u) {
    const std::size_t k = mask.kept(u), w = us[u].neurons;
    char b[160];
    std::snprintf(b, sizeof b, "  %-14s %6zu / %-6zu %6.1f%%", us[u].name.c_str(), k, w, 100.0 * double(k) / double(w));
    std::string line = b;
    if (us[u].output) line += "    output, never sliced";
    else if (per_cat) {
      line += "   ";
      for (auto kc : rep->units[u].k) line += " " + std::to_string(kc);
    }
    std::cout << line << "\n";
  }
  std::cout << "  parameters: " << acc.kept << " / " << acc.total << " kept, compression " << fmt(acc.compression, "%.2f")
            << "%\n";
  if (accuracy)
    std::cout << "  accuracy on " << acc_on << ": " << fmt(accuracy->first, "%.2f") << "% -> "
              << fmt(accuracy->second, "%.2f") << "% masked\n";
  if (!o.output.empty()) std::cout << "  mask written to " << o.output << "\n";
  std::cout.flush();
  return 0;
}

/// `nnlens semslice MODEL --data FILE [--labels FILE]`: the critical neurons, per layer.
void register_semslice(CLI::App& app, command_list& cmds) {
  auto [cmd, o] = add_analysis<semslice_cmd_options>(
      app, cmds, "semslice", "NeuSemSlice: the critical neurons of a classifier per layer, the compression rate of their mask");
  cmd.add_option("--data,-d", o.data, "Labelled samples (CSV or IDX images, as `profile --data` reads)")->required();
  cmd.add_option("--labels", o.labels,
                 "Labels of --data (IDX labels or one integer per line; default: the IDX labels file beside IDX images)");
  maint::add_slice_options(cmd, o.metric, o.theta, o.similarity, &o.categories, o.samples, o.metric_samples, "",
                           "Comma-separated output classes to slice (default: every class)");
  cmd.add_option("--step", o.step, "Neurons added per scan step (0: 1% of the layer, at least 1)")->capture_default_str();
  cmd.add_option("--seed", o.seed, "Seed of the sample draws")->capture_default_str();
  cmd.add_option("--test", o.test, "Labelled samples on which to compare the accuracy of the model and the masked model");
  cmd.add_option("--test-labels", o.test_labels, "Labels of --test (default: the IDX labels file beside it)");
  cmd.add_option("--mask", o.mask, "Evaluate this mask (nnlens semslice -o) on --data instead of slicing");
  cmd.add_option("--output,-o", o.output, "Write the mask to this file");
  cmd.add_flag("--json", o.json,
               "One JSON object: layers[{name, neurons, critical, k}], parameters, parameters_kept, compression, "
               "[accuracy], seconds");
  add_threads(cmd);
  add_model_options(cmd, o, precision::f32);
}

}  // namespace nnlens::tool
