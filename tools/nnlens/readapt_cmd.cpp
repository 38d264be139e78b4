// tools/nnlens/readapt_cmd.cpp -- `nnlens readapt` (see readapt_cmd.hpp).
#include "readapt_cmd.hpp"

#include <iostream>
#include <optional>

#include <nlohmann/json.hpp>

#include <nnlens/core/error.hpp>
#include <nnlens/neusemslice/neuron_mask.hpp>
#include <nnlens/neusemslice/readapt.hpp>

#include "maintenance_common.hpp"
#include "model.hpp"

namespace nnlens::tool {

using namespace maint;
using json = nlohmann::ordered_json;  // keys in the documented order

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
int run_as(const readapt_cmd_options& o) {
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

/// `nnlens readapt MODEL --data FILE -o OUT`: adversarial repair of the critical neurons.
void register_readapt(CLI::App& app, command_list& cmds) {
  auto [cmd, o] = add_analysis<readapt_cmd_options>(
      app, cmds, "readapt", "NeuSemSlice re-adaptation: adversarial repair training only the critical neurons");
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

}  // namespace nnlens::tool
