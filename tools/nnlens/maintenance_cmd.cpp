// tools/nnlens/maintenance_cmd.cpp -- `nnlens restructure`, `nnlens readapt`, `nnlens increment`
// (see maintenance_cmd.hpp).
#include "maintenance_cmd.hpp"

#include <chrono>
#include <cstdio>
#include <iostream>
#include <optional>
#include <set>
#include <vector>

#include <nlohmann/json.hpp>

#include <nnlens/compress/pruning.hpp>
#include <nnlens/core/error.hpp>
#include <nnlens/core/progress.hpp>
#include <nnlens/neusemslice/increment.hpp>
#include <nnlens/neusemslice/neuron_mask.hpp>
#include <nnlens/neusemslice/readapt.hpp>
#include <nnlens/neusemslice/restructure.hpp>
#include <nnlens/train/fit.hpp>

#include "maintenance_common.hpp"
#include "model.hpp"

namespace nnlens::tool {

using namespace maint;
using json = nlohmann::ordered_json;  // keys in the documented order

namespace {

/// The JSON object of a maintenance command, on standard output: model, precision, the command's own
/// settings (in order), epochs, lr, [mask], `results` (in order), [baseline], output, [note],
/// total_seconds.
template <class T>
void print_json(const maintenance_common& o, const json& settings, std::size_t epochs, double lr,
                const basic_dynamic_network<T>& net, const std::optional<mask_info>& mi, const json& results,
                const std::optional<json>& baseline, const std::string& note, double seconds) {
  json j;
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

/// `head`'s fields, then `more`'s.
json joined(json head, const json& more) {
  for (const auto& [k, v] : more.items()) head[k] = v;
  return head;
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

template <class T>
int restructure_impl(const restructure_cmd_options& o) {
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

template <class T>
int readapt_impl(const readapt_cmd_options& o) {
  check_common(o);
  if (o.attack != "fgsm" && o.attack != "pgd") throw value_error("--attack: expected fgsm or pgd, got '" + o.attack + "'");
  if (!(o.eps >= 0 && o.eps <= 1)) throw value_error(concat("--eps ", o.eps, ": expected 0 <= eps <= 1 (pixels in [0, 1])"));
  if (o.adv_samples == 0) throw value_error("--adv-samples: expected at least 1");
  if (o.pgd_steps == 0) throw value_error("--pgd-steps: expected at least 1");

  const auto t0 = clock_type::now();
  const model<T> m = open_model<T>(o.model, o.layout);
  const basic_dynamic_network<T>& net = m.net;
  const labelled<T> train_d = read_labelled(m, o.data, o.labels, "--labels", o.limit);
  std::optional<labelled<T>> test_own;  // --test, when given (not a copy of --data otherwise)
  const labelled<T>& test_d =
      o.test.empty() ? train_d : test_own.emplace(read_labelled(m, o.test, o.test_labels, "--test-labels", o.limit));
  std::optional<mask_info> mi;
  if (!o.slice.none) mi = obtain_mask(net, o, train_d, {}, "--categories");

  const auto ro = training_options<readapt_options>(o, 5, 1e-3, 1);
  const readapt_attack atk =
      o.attack == "fgsm" ? fgsm_attack(o.eps, o.adv_samples) : pgd_attack(o.eps, o.pgd_steps, o.adv_samples, ro.seed);

  auto run_one = [&](const neuron_mask* mask) {
    try {
      return readapt(execution::par, net, mask, train_d.x, train_d.y, test_d.x, test_d.y, atk, ro);
    } catch (const data_error& e) {
      throw data_error(concat(o.data, ": ", e.what()));
    }
  };
  auto res = run_one(mi ? &mi->mask : nullptr);
  std::optional<readapt_report> base;
  if (o.baseline && mi) base = run_one(nullptr).report;
  const auto& rep = res.report;
  const std::string note = onnx_narrowing_note<T>(o.output);
  write_model(o.output, o.model, res.model,
              concat("readapt ", mi ? "NSS" : "Full", " ", atk.name, " eps ", o.eps, ", RA ", fmt(100 * rep.ra, "%.2f"), "%"));
  const double seconds = seconds_since(t0);

  if (o.json) {
    json settings{{"attack", atk.name}, {"eps", o.eps}};
    if (o.attack == "pgd") settings["pgd_steps"] = o.pgd_steps;
    print_json(o, settings, ro.epochs, ro.lr, net, mi, readapt_json(rep),
               base ? std::optional<json>(readapt_json(*base)) : std::nullopt, note, seconds);
    return 0;
  }
  std::cout << o.model << ": readapt (" << (mi ? "critical neurons only" : "every parameter") << ") against " << atk.name
            << " eps " << fmt(o.eps, "%g") << (o.attack == "pgd" ? concat(", ", o.pgd_steps, " steps") : std::string())
            << ", " << rep.adversarial << " adversarial samples from " << o.data << ", " << ro.epochs
            << " epoch(s), Adam lr " << fmt(ro.lr, "%g") << ", " << o.precision << "\n";
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
  if (!note.empty()) std::cout << "  note: " << note << "\n";
  std::cout.flush();
  return 0;
}

// ============================================================================ increment

template <class T>
int increment_impl(const increment_cmd_options& o) {
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

// ============================================================================ --precision


// ============================================================================ the command line

namespace {

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

}  // namespace

/// `nnlens restructure MODEL --data FILE --test FILE -o OUT`: mask, then iterative pruning.
void register_restructure(CLI::App& app, command_list& cmds) {
  auto [cmd, o] = add_analysis<restructure_cmd_options>(
      app, cmds, "restructure", "NeuSemSlice restructure: mask the non-critical neurons, then iterative pruning with fine-tuning",
      []<class T>(const restructure_cmd_options& opts) { return restructure_impl<T>(opts); });
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

/// `nnlens readapt MODEL --data FILE -o OUT`: adversarial repair of the critical neurons.
void register_readapt(CLI::App& app, command_list& cmds) {
  auto [cmd, o] = add_analysis<readapt_cmd_options>(
      app, cmds, "readapt", "NeuSemSlice re-adaptation: adversarial repair training only the critical neurons",
      []<class T>(const readapt_cmd_options& opts) { return readapt_impl<T>(opts); });
  add_maintenance_options(cmd, o,
      {.data = "Labelled training samples: the slice, and the clean sources of the adversarial training samples",
       .no_mask = "--full",
       .no_mask_help = "No neuron mask: every parameter trains (the Full baseline alone)",
       .categories = true,
       .test = "Labelled test samples: clean accuracy and the sources of the RAA samples (default: --data)",
       .epochs = "Training epochs (default 5)",
       .lr = "Adam learning rate (default 1e-3)",
       .seed = "Seed of the sample draws, shuffles and PGD's start (default 1; the slice's draws: 0)",
       .baseline = "Also run full retraining and report it beside",
       .json = "One JSON object: mask, trained_parameters, parameters, tpr, adv_before, ra, raa, clean_before, "
               "clean_after (percent), [baseline]"});
  cmd.add_option("--attack", o.attack, "fgsm or pgd")->capture_default_str();
  cmd.add_option("--eps", o.eps, "L-inf radius (pixels in [0, 1])")->capture_default_str();
  cmd.add_option("--pgd-steps", o.pgd_steps, "PGD: steps of eps/4")->capture_default_str();
  cmd.add_option("--adv-samples", o.adv_samples, "Adversarial samples for training, and new ones for RAA")
      ->capture_default_str();
  add_threads(cmd);
}

/// `nnlens increment MODEL --data NEW --old-data OLD -o OUT`: a new task, old neurons frozen.
void register_increment(CLI::App& app, command_list& cmds) {
  auto [cmd, o] = add_analysis<increment_cmd_options>(
      app, cmds, "increment", "NeuSemSlice incremental development: learn a new task with the old task's critical neurons frozen",
      []<class T>(const increment_cmd_options& opts) { return increment_impl<T>(opts); });
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
