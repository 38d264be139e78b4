// tools/nnlens/restructure_cmd.cpp -- `nnlens restructure` (see restructure_cmd.hpp).
#include "restructure_cmd.hpp"

#include <iostream>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include <nnlens/core/error.hpp>
#include <nnlens/compress/pruning.hpp>
#include <nnlens/core/progress.hpp>
#include <nnlens/neusemslice/neuron_mask.hpp>
#include <nnlens/neusemslice/restructure.hpp>

#include "maintenance_common.hpp"
#include "model.hpp"

namespace nnlens::tool {

using namespace maint;
using json = nlohmann::ordered_json;  // keys in the documented order

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

template <class T>
int run_as(const restructure_cmd_options& o) {
  check_common(o);
  const auto method = parse_pruner(o.pruner);
  if (!(o.prune_step > 0 && o.prune_step < 1))
    throw value_error(concat("--prune-step ", o.prune_step, ": expected 0 < p < 1"));
  if (!(o.max_drop >= 0)) throw value_error(concat("--max-drop ", o.max_drop, ": expected >= 0 accuracy points"));
  if (o.max_iterations == 0) throw value_error("--max-iterations: expected at least 1");

  const auto t0 = clock_type::now();
  const model<T> m = open_model<T>(o.model, o.layout);
  const basic_dynamic_network<T>& original = m.net;
  const labelled<T> train_d = read_labelled(m, o.data, o.labels, "--labels", o.limit);
  const labelled<T> test_d = read_labelled(m, o.test, o.test_labels, "--test-labels", o.limit);
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

  auto run_one = [&](const neuron_mask* mask, const std::string& label, basic_dynamic_network<T>& net) {
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
    auto rep = restructure(execution::par, net, mask, train_d.x, train_d.y, test_d.x, test_d.y, r);
    if (bar) bar->finish(concat("NI ", rep.ni, "  CR ", fmt(rep.compression, "%.2f"), "%  acc ", fmt(rep.accuracy, "%.2f"), "%"));
    return rep;
  };
  const std::string name = std::string(compress::pruning_method_name(method));
  basic_dynamic_network<T> net = original;
  const auto rep = run_one(mi ? &mi->mask : nullptr, mi ? "restructure NSS+" + name : "restructure " + name, net);
  std::optional<restructure_report> base;
  if (o.baseline && mi) {
    basic_dynamic_network<T> bnet = original;
    base = run_one(nullptr, "baseline " + name, bnet);
  }
  const std::string note = onnx_narrowing_note<T>(o.output);
  write_model(o.output, o.model, net,
              concat("restructure ", mi ? "NSS+" : "", name, " p ", o.prune_step, ", NI ", rep.ni, ", CR ",
                     fmt(rep.compression, "%.2f"), "%"));
  const double seconds = seconds_since(t0);

  if (o.json) {
    print_json(o, json{{"pruner", name}, {"p", o.prune_step}, {"tolerance", o.max_drop}}, ro.epochs, ro.lr, original, mi,
               joined(json{{"parameters", rep.parameters}, {"reference_accuracy", rep.reference_accuracy}}, report_json(rep)),
               base ? std::optional<json>(report_json(*base)) : std::nullopt, note, seconds);
    return 0;
  }
  std::cout << o.model << ": restructure with " << (mi ? "NSS+" : "") << name << ", p " << fmt(o.prune_step, "%g")
            << ", tolerance " << fmt(o.max_drop, "%g") << " point(s), fine-tuning " << ro.epochs << " epoch(s) on "
            << train_d.size() << " samples (Adam lr " << fmt(ro.lr, "%g") << "), " << o.precision << "\n";
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
  if (!note.empty()) std::cout << "  note: " << note << "\n";
  std::cout.flush();
  return 0;
}

/// `nnlens restructure MODEL --data FILE --test FILE -o OUT`: mask, then iterative pruning.
void register_restructure(CLI::App& app, command_list& cmds) {
  auto [cmd, o] = add_analysis<restructure_cmd_options>(
      app, cmds, "restructure", "NeuSemSlice restructure: mask the non-critical neurons, then iterative pruning with fine-tuning");
  add_maintenance_options(cmd, o,
      {.data = "Labelled training samples for the slice and the fine-tuning (CSV or IDX images, as `profile --data` reads)",
       .no_mask = "--no-slice",
       .no_mask_help = "No neuron mask: the pruner alone",
       .categories = true,
       .test = "Labelled test samples: the accuracy that decides each iteration (required)",
       .epochs = "Fine-tuning epochs per iteration (default 1)",
       .lr = "Adam learning rate of the fine-tuning (default 1e-4)",
       .seed = "Seed of the slice's draws and the fine-tuning's shuffles (default 0)",
       .baseline = "Also run the pruner alone (no mask) and report it beside",
       .json = "One JSON object: mask, reference_accuracy, start_compression, start_accuracy, iterations[{iteration, "
               "compression, weight_pruned, accuracy, accepted}], ni, compression, accuracy, [baseline]"});
  cmd.get_option("--test")->required();
  cmd.add_option("--pruner", o.pruner, "Magnitude pruner: lamp, global, uniform (Uniform+), erk")->capture_default_str();
  cmd.add_option("--prune-step", o.prune_step, "p: fraction of the remaining weights pruned per iteration")
      ->capture_default_str();
  cmd.add_option("--max-drop", o.max_drop,
                 "Stop at the first iteration whose test accuracy is below the model's minus this (points)")
      ->capture_default_str();
  cmd.add_option("--max-iterations", o.max_iterations, "At most this many pruning iterations")->capture_default_str();
  add_threads(cmd);
}

}  // namespace nnlens::tool
