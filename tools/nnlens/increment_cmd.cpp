// tools/nnlens/increment_cmd.cpp -- `nnlens increment` (see increment_cmd.hpp).
#include "increment_cmd.hpp"

#include <iostream>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <nnlens/core/error.hpp>
#include <nnlens/neusemslice/increment.hpp>
#include <nnlens/neusemslice/neuron_mask.hpp>

#include "maintenance_common.hpp"
#include "model.hpp"

namespace nnlens::tool {

using namespace maint;
using json = nlohmann::ordered_json;  // keys in the documented order

template <class T>
int run_as(const increment_cmd_options& o) {
  check_common(o);
  if (!(o.replay >= 0 && o.replay <= 1)) throw value_error(concat("--replay ", o.replay, ": expected 0 <= fraction <= 1"));

  const auto t0 = clock_type::now();
  const model<T> m = open_model<T>(o.model, o.layout);
  const basic_dynamic_network<T>& net = m.net;
  const std::size_t classes = net.output_shape().size();
  std::vector<std::size_t> old_classes, new_classes;
  if (!o.old_classes.empty()) old_classes = parse_classes(o.old_classes, classes, "--old-classes");
  if (!o.new_classes.empty()) new_classes = parse_classes(o.new_classes, classes, "--new-classes");
  // Every sample of the old classes' files is read, so that a category with no samples is named.
  labelled<T> old_d = read_labelled(m, o.old_data, o.old_labels, "--old-labels", 0);
  if (old_classes.empty()) {
    const std::set<std::size_t> s(old_d.y.begin(), old_d.y.end());
    old_classes.assign(s.begin(), s.end());
  }
  check_categories_present(old_d, old_classes, classes, "");
  old_d = select(std::move(old_d), o.limit, old_classes);
  const labelled<T> new_d = read_labelled(m, o.data, o.labels, "--labels", o.limit, new_classes);
  std::optional<labelled<T>> new_own, old_own;  // --test / --old-test, when given
  const labelled<T>& new_t =
      o.test.empty() ? new_d : new_own.emplace(read_labelled(m, o.test, o.test_labels, "--test-labels", o.limit, new_classes));
  const labelled<T>& old_t =
      o.old_test.empty()
          ? old_d
          : old_own.emplace(read_labelled(m, o.old_test, o.old_test_labels, "--old-test-labels", o.limit, old_classes));
  std::optional<mask_info> mi;
  if (!o.slice.none) {
    mi = obtain_mask(net, o, old_d, old_classes, "--old-classes");
    set_output_classes(net, mi->mask, old_classes);  // the output unit keeps (freezes) the old classes (A15)
  }

  const auto io = training_options<increment_options>(o, 5, 1e-3, 1);
  std::optional<labelled_batch<T>> mix;
  if (o.replay > 0) mix = replay_mix(new_d.x, new_d.y, old_d.x, old_d.y, o.replay, io.seed + 100);
  auto run_one = [&](const neuron_mask* mask) {
    return mix ? increment(execution::par, net, mask, mix->x, mix->y, io) : increment(execution::par, net, mask, new_d.x, new_d.y, io);
  };
  auto scores = [&](const basic_dynamic_network<T>& n) { return task_scores(execution::par, n, old_t.x, old_t.y, new_t.x, new_t.y); };
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
  const std::string note = onnx_narrowing_note<T>(o.output);
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
    print_json(o, json{{"old_classes", old_classes}, {"replay", o.replay}}, io.epochs, io.lr, net, mi,
               joined(json{{"before", scores_json(before)}}, report_json(rep, after)),
               base ? std::optional<json>(report_json(*base, *base_scores)) : std::nullopt, note, seconds);
    return 0;
  }
  std::string oc;
  for (auto c : old_classes) oc += (oc.empty() ? "" : ",") + std::to_string(c);
  std::cout << o.model << ": increment (" << (mi ? "old task's critical neurons frozen" : "every parameter trains")
            << ") on " << rep.samples << " samples (" << o.data
            << (o.replay > 0 ? concat(" + ", rep.samples - new_d.size(), " old ones, replay ", fmt(o.replay, "%g")) : "")
            << "), old classes " << oc << ", " << io.epochs << " epoch(s), Adam lr " << fmt(io.lr, "%g") << ", " << o.precision
            << "\n";
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
  if (!note.empty()) std::cout << "  note: " << note << "\n";
  std::cout.flush();
  return 0;
}

/// `nnlens increment MODEL --data NEW --old-data OLD -o OUT`: a new task, old neurons frozen.
void register_increment(CLI::App& app, command_list& cmds) {
  auto [cmd, o] = add_analysis<increment_cmd_options>(
      app, cmds, "increment", "NeuSemSlice incremental development: learn a new task with the old task's critical neurons frozen");
  add_maintenance_options(cmd, o,
      {.data = "Labelled samples of the new task (CSV or IDX images)",
       .no_mask = "--retrain",
       .no_mask_help = "No neuron mask: every parameter trains (the Retrain baseline alone)",
       .categories = false,
       .test = "Labelled test samples of the new task (default: --data)",
       .epochs = "Training epochs (default 5)",
       .lr = "Adam learning rate (default 1e-3)",
       .seed = "Seed of the replay draw and the shuffles (default 1; the slice's draws: 0)",
       .baseline = "Also run Retrain (every parameter, the same data) and report it beside",
       .json = "One JSON object: mask, before{old, new, mean}, accuracy{old, new, mean}, trained_fraction, "
               "frozen_changed, [baseline]"});
  cmd.add_option("--old-data", o.old_data, "Labelled samples of the old task: Omega is sliced on them")->required();
  cmd.add_option("--old-labels", o.old_labels, "Labels of --old-data (default: the IDX labels file beside it)");
  cmd.add_option("--old-classes", o.old_classes,
                 "The old task's classes: only their samples of --old-data / --old-test are used; the slice's "
                 "categories and the frozen outputs (default: the labels of --old-data)");
  cmd.add_option("--new-classes", o.new_classes,
                 "The new task's classes: only their samples of --data and --test are used (default: all)");
  cmd.add_option("--old-test", o.old_test, "Labelled test samples of the old task (default: --old-data)");
  cmd.add_option("--old-test-labels", o.old_test_labels, "Labels of --old-test");
  cmd.add_option("--replay", o.replay, "Add this fraction of the old samples to the training data (Replay)")
      ->capture_default_str();
  add_threads(cmd);
}

}  // namespace nnlens::tool
