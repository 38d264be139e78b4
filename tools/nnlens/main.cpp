// tools/nnlens/main.cpp -- the `nnlens` command-line tool (one subcommand per analysis).
//
//   nnlens version
//   nnlens demo --data DIR --cache DIR [--out DIR] [--epochs N] [--seed S] [--threads N] [--retrain]
//   nnlens info MODEL [--json]
//   nnlens run MODEL --input FILE.csv [--output FILE.csv] [--batch N] [--no-progress]
//   nnlens codegen MODEL -o FILE.hpp [--name NAME] [--namespace NS]
//   nnlens exact-line MODEL --from A.csv --to B.csv [--json] [--classes argmax|argmin] [--threads N]
//                     [--merge-tol X] [--max-pieces N] [--validate] [--svg FILE]
//                     ExactLine on the segments A[i] -> B[i]: pieces, outputs, class intervals
//   nnlens ig MODEL --input X.csv --baseline B.csv [--output-index k] [--json] [--m 50]
//                     exact integrated gradients, and the Riemann sums' errors against them
// (docs/exactline-tool.md; .nnet models in raw units, so the CSVs hold raw inputs.)
//   nnlens profile MODEL --data FILE -o PROFILE [--granularity channel|element] [--threads N] [--batch N]
//                  [--no-progress]       NNSlicer's profile: mean neuron activations over a dataset
//   nnlens slice MODEL --profile PROFILE --samples FILE [--target CLASS] [--theta 0.3] [--json]
//                [--synapses FILE] [--abs-sum] [--denominator sum|activation] [--cutoff max|first]
//                [--threads N] [--no-progress]   NNSlicer's slice (CONTRIB) of the samples' classes
// (docs/nnslicer-tool.md; FILE: CSV as `run` reads, or IDX images scaled to [0, 1].)
//   nnlens coverage MODEL --train FILE [--train-labels FILE] --test FILE [--layer L] [--m 6]
//                   [--criteria idc,nc,kmnc,nbc,snac,tknc,lsc,dsc] [--json] [--state FILE]
//                   DeepImportance's IDC and the DeepGauge / surprise criteria (docs/coverage-tool.md)
//   nnlens semslice MODEL --data FILE [--labels FILE] [--metric taylor] [--theta 0.95] [--similarity cka]
//                   [--categories 0,1,...] [--samples 500] [--test FILE] [--json] [-o MASK] [--mask MASK]
//                   NeuSemSlice's critical neurons, CR, masked accuracy (docs/neusemslice-tool.md)
//
// Errors: one line on stderr ("nnlens: ..."), exit status 1 (2 for bad command-line usage).
#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>

#include <nnlens/config.hpp>
#include <nnlens/core/error.hpp>

#include "commands.hpp"
#include "coverage_cmd.hpp"
#include "demo.hpp"
#include "exactline_cmd.hpp"
#include "model.hpp"
#include "semslice_cmd.hpp"
#include "slice_cmd.hpp"

int main(int argc, char** argv) {
  CLI::App app{"nnlens: analysis of piecewise-linear neural networks"};
  app.name("nnlens");
  app.require_subcommand(1);

  auto* version = app.add_subcommand("version", "Print the version");

  nnlens::tool::demo_options demo;
  auto* demo_cmd = app.add_subcommand("demo", "Train (or reuse from the cache) LeNet-5 on Fashion-MNIST and report");
  demo_cmd->add_option("--data", demo.data_dir, "Directory with the Fashion-MNIST IDX files")->capture_default_str();
  demo_cmd->add_option("--cache", demo.cache_dir, "Directory for trained models")->capture_default_str();
  demo_cmd->add_option("--epochs", demo.epochs, "Training epochs (default: the recipe's 12)")->check(CLI::Range(1, 1000));
  demo_cmd->add_option("--seed", demo.seed, "Seed of initialisation and shuffling")->capture_default_str();
  demo_cmd->add_option("--threads", demo.threads, "Worker threads (default: all cores)")->check(CLI::Range(1, 1024));
  demo_cmd->add_flag("--retrain", demo.retrain, "Train even if a cached model exists");
  demo_cmd->add_option("--out", demo.output_dir, "Directory for the pictures (SVG) of the analysis steps")->capture_default_str();

  const std::string formats = "Model file: " + nnlens::tool::supported_model_formats();

  nnlens::tool::info_options info;
  auto* info_cmd = app.add_subcommand("info", "Print the layers, their output shapes and parameter counts");
  info_cmd->add_option("MODEL", info.model, formats)->required();
  info_cmd->add_flag("--json", info.json, "One JSON object: input_shape, output_shape, layers[{type, output_shape, params}], params");

  nnlens::tool::run_options run;
  auto* run_cmd = app.add_subcommand("run", "Run a model on CSV samples; one CSV output line per sample");
  run_cmd->add_option("MODEL", run.model, formats)->required();
  run_cmd->add_option("--input,-i", run.input, "CSV file: one sample per line, flattened row-major (NCHW)")->required();
  run_cmd->add_option("--output,-o", run.output, "CSV file for the outputs (default: standard output)");
  run_cmd->add_option("--batch", run.batch, "Samples per forward pass")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  bool no_progress = false;
  run_cmd->add_flag("--no-progress", no_progress, "No progress bar on standard error");

  nnlens::tool::codegen_cmd_options cg;
  auto* cg_cmd = app.add_subcommand("codegen", "Write a C++ header with the static network type and its weights");
  cg_cmd->add_option("MODEL", cg.model, formats)->required();
  cg_cmd->add_option("--output,-o", cg.output, "The header to write")->required();
  cg_cmd->add_option("--name", cg.name, "Type alias (make_NAME() returns the network)")->capture_default_str();
  cg_cmd->add_option("--namespace", cg.ns, "Enclosing namespace, e.g. fw::models (default: none)");

  nnlens::tool::exact_line_options el;
  std::size_t el_threads = 0;
  auto* el_cmd = app.add_subcommand("exact-line", "ExactLine: the exact pieces and class intervals of the network on segments");
  el_cmd->add_option("MODEL", el.model, formats)->required();
  el_cmd->add_option("--from", el.from, "CSV file of segment starts: one sample per line, as `run` reads them")->required();
  el_cmd->add_option("--to", el.to, "CSV file of segment ends: line i of --from -> line i of --to is segment i")->required();
  el_cmd->add_flag("--json", el.json, "One JSON object: lines[{t, outputs, pieces, classes[{from, to, label}], error?}], seconds");
  el_cmd->add_option("--classes", el.classes, "Winning class: argmax (classifiers) or argmin (ACAS Xu advisories)")
      ->capture_default_str()
      ->check(CLI::IsMember({"argmax", "argmin"}));
  el_cmd->add_option("--threads", el_threads, "Worker threads (default: all cores)")->check(CLI::Range(1, 1024));
  el_cmd->add_option("--merge-tol", el.merge_tol, "Merge breaks closer than this in t")->capture_default_str()->check(
      CLI::NonNegativeNumber);
  el_cmd->add_option("--max-pieces", el.max_pieces, "Fail a segment with more pieces than this")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  el_cmd->add_flag("--validate", el.validate, "Check every piece at 1/4, 1/2, 3/4 of its length against the network");
  el_cmd->add_option("--svg", el.svg, "Write an SVG strip chart (a band per class interval, a tick per break)");

  nnlens::tool::ig_options ig;
  std::size_t ig_index = 0;
  auto* ig_cmd = app.add_subcommand("ig", "Exact integrated gradients, and the Riemann sums' errors against them");
  ig_cmd->add_option("MODEL", ig.model, formats)->required();
  ig_cmd->add_option("--input,-i", ig.input, "CSV file: the inputs x, one per line")->required();
  ig_cmd->add_option("--baseline,-b", ig.baseline, "CSV file: the baselines x' (one line per input, or one for all)")
      ->required();
  auto* ig_index_opt = ig_cmd->add_option("--output-index,-k", ig_index, "The output k (default: the argmax at x)");
  ig_cmd->add_flag("--json", ig.json, "JSON: {output_index, exact, pieces, delta, riemann, samples_for_5pct} per input");
  ig_cmd->add_option("--m", ig.m, "Partitions of the Riemann sums")->capture_default_str()->check(CLI::Range(1, 1 << 24));

  nnlens::tool::profile_cmd_options pr;
  std::size_t pr_threads = 0;
  bool pr_no_progress = false;
  auto* pr_cmd = app.add_subcommand("profile", "NNSlicer: profile a model (mean neuron activations) over a dataset");
  pr_cmd->add_option("MODEL", pr.model, formats)->required();
  pr_cmd->add_option("--data,-d", pr.data,
                     "Samples: a CSV file as `run` reads it, or IDX images (.idx, -idx3-ubyte[.gz]; bytes scaled to [0, 1])")
      ->required();
  pr_cmd->add_option("--output,-o", pr.output, "The profile file to write")->required();
  pr_cmd->add_option("--granularity", pr.granularity, "Neurons of a feature map: its channels or its elements")
      ->capture_default_str()
      ->check(CLI::IsMember({"channel", "element"}));
  pr_cmd->add_option("--threads", pr_threads, "Worker threads (default: all cores)")->check(CLI::Range(1, 1024));
  pr_cmd->add_option("--batch", pr.batch, "Samples per forward pass")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  pr_cmd->add_flag("--no-progress", pr_no_progress, "No progress bar on standard error");

  nnlens::tool::slice_cmd_options sl;
  std::size_t sl_threads = 0, sl_target = 0;
  bool sl_no_progress = false;
  auto* sl_cmd = app.add_subcommand("slice", "NNSlicer: the slice (CONTRIB of every neuron and synapse) of samples' classes");
  sl_cmd->add_option("MODEL", sl.model, formats)->required();
  sl_cmd->add_option("--profile,-p", sl.profile, "A profile of MODEL (nnlens profile); its granularity is used")->required();
  sl_cmd->add_option("--samples,-s", sl.samples, "The criterion's samples: CSV or IDX images, as `profile --data` reads")
      ->required();
  auto* sl_target_opt = sl_cmd->add_option("--target,-t", sl_target, "Slice this output class (default: each sample's predicted class)");
  sl_cmd->add_option("--theta", sl.theta, "The filter threshold θ")->capture_default_str()->check(CLI::NonNegativeNumber);
  sl_cmd->add_flag("--json", sl.json, "One JSON object: layers[{name, neurons, neurons_in_slice, synapses, synapses_in_slice}], contrib{tensor: [...]}, seconds");
  sl_cmd->add_option("--synapses", sl.synapses, "Write the synapses' CONTRIB as JSON {node: [...]} to this file");
  sl_cmd->add_flag("--abs-sum", sl.abs_sum, "Sum |CONTRIB| over the samples instead of the signed sum");
  sl_cmd->add_option("--denominator", sl.denominator, "θ filter's denominator: sum of the items or the activation")
      ->capture_default_str()
      ->check(CLI::IsMember({"sum", "activation"}));
  sl_cmd->add_option("--cutoff", sl.cutoff, "θ filter's cut-off: the largest index within θ, or the first violation")
      ->capture_default_str()
      ->check(CLI::IsMember({"max", "first"}));
  sl_cmd->add_option("--threads", sl_threads, "Worker threads (default: all cores)")->check(CLI::Range(1, 1024));
  sl_cmd->add_flag("--no-progress", sl_no_progress, "No progress bar on standard error");

  nnlens::tool::coverage_cmd_options cv;
  std::size_t cv_threads = 0;
  bool cv_no_progress = false;
  auto* cv_cmd = app.add_subcommand("coverage", "DeepImportance: IDC and the DeepGauge / surprise coverage criteria of a test set");
  cv_cmd->add_option("MODEL", cv.model, formats)->required();
  cv_cmd->add_option("--train", cv.train,
                     "Training samples (CSV or IDX images, as `profile --data` reads); required unless --state holds the preparations");
  cv_cmd->add_option("--train-labels", cv.train_labels,
                     "Labels of the training samples (IDX labels or one integer per line; default: the IDX labels file beside IDX images)");
  cv_cmd->add_option("--test", cv.test, "Test samples whose coverage is measured (CSV or IDX images)")->required();
  cv_cmd->add_option("--layer", cv.layer, "Subject layer of IDC and LSC/DSC: an index (negative from the end) or Type#k (default: the layer feeding the last weighted layer)");
  cv_cmd->add_option("--m", cv.m, "IDC: important neurons")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  cv_cmd->add_option("--criteria", cv.criteria, "Comma-separated criteria")->capture_default_str();
  cv_cmd->add_flag("--json", cv.json, "One JSON object: criteria{name: {coverage, covered, total[, layer, neurons, clusters]}}, seconds{prepare, measure}");
  cv_cmd->add_option("--state", cv.state, "Load the preparations from this file if it exists, else prepare and save them there");
  cv_cmd->add_option("--nc-threshold", cv.nc_threshold, "NC: activation threshold after per-layer min-max scaling")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  cv_cmd->add_option("--kmnc-k", cv.kmnc_k, "KMNC: sections per neuron")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  cv_cmd->add_option("--tknc-k", cv.tknc_k, "TKNC: top neurons per layer")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  cv_cmd->add_option("--threads", cv_threads, "Worker threads (default: all cores)")->check(CLI::Range(1, 1024));
  cv_cmd->add_flag("--no-progress", cv_no_progress, "No progress bar on standard error");

  nnlens::tool::semslice_cmd_options ss;
  std::size_t ss_threads = 0;
  auto* ss_cmd = app.add_subcommand("semslice", "NeuSemSlice: the critical neurons of a classifier per layer, the compression rate of their mask");
  ss_cmd->add_option("MODEL", ss.model, formats)->required();
  ss_cmd->add_option("--data,-d", ss.data, "Labelled samples (CSV or IDX images, as `profile --data` reads)")->required();
  ss_cmd->add_option("--labels", ss.labels,
                     "Labels of --data (IDX labels or one integer per line; default: the IDX labels file beside IDX images)");
  ss_cmd->add_option("--metric", ss.metric, "Neuron contribution metric: avg, var, ens, taylor, deeplift")->capture_default_str();
  ss_cmd->add_option("--theta", ss.theta, "Similarity threshold, 0 < theta <= 1")->capture_default_str();
  ss_cmd->add_option("--similarity", ss.similarity, "cka (centred linear CKA), uncentered (the paper's Eq. 2), unbiased (HSIC_u)")
      ->capture_default_str();
  ss_cmd->add_option("--categories", ss.categories, "Comma-separated output classes to slice (default: every class)");
  ss_cmd->add_option("--samples", ss.samples, "Samples per category in the Gram matrices")->capture_default_str();
  ss_cmd->add_option("--metric-samples", ss.metric_samples, "At most this many samples per category for the metric (0: all)")
      ->capture_default_str();
  ss_cmd->add_option("--step", ss.step, "Neurons added per scan step (0: 1% of the layer, at least 1)")->capture_default_str();
  ss_cmd->add_option("--seed", ss.seed, "Seed of the sample draws")->capture_default_str();
  ss_cmd->add_option("--test", ss.test, "Labelled samples on which to compare the accuracy of the model and the masked model");
  ss_cmd->add_option("--test-labels", ss.test_labels, "Labels of --test (default: the IDX labels file beside it)");
  ss_cmd->add_option("--mask", ss.mask, "Evaluate this mask (nnlens semslice -o) on --data instead of slicing");
  ss_cmd->add_option("--output,-o", ss.output, "Write the mask to this file");
  ss_cmd->add_flag("--json", ss.json,
                   "One JSON object: layers[{name, neurons, critical, k}], parameters, parameters_kept, compression, [accuracy], seconds");
  ss_cmd->add_option("--threads", ss_threads, "Worker threads (default: all cores)")->check(CLI::Range(1, 1024));

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "nnlens: " << e.what() << " (run nnlens --help)\n";
    return 2;
  }

  try {
    if (*version) {
      std::cout << "nnlens " << NNLENS_VERSION_MAJOR << "." << NNLENS_VERSION_MINOR << "." << NNLENS_VERSION_PATCH
                << "\n";
      return 0;
    }
    if (*demo_cmd) {
      // The process-wide pool reads NNLENS_NUM_THREADS when first used, i.e. after this.
      if (demo.threads) ::setenv("NNLENS_NUM_THREADS", std::to_string(demo.threads).c_str(), 1);
      return nnlens::tool::run_demo(demo);
    }
    if (*info_cmd) return nnlens::tool::run_info(info);
    if (*run_cmd) {
      run.progress = !no_progress;
      return nnlens::tool::run_run(run);
    }
    if (*cg_cmd) return nnlens::tool::run_codegen(cg);
    if (*el_cmd) {
      // The process-wide pool reads NNLENS_NUM_THREADS when first used, i.e. after this.
      if (el_threads) ::setenv("NNLENS_NUM_THREADS", std::to_string(el_threads).c_str(), 1);
      return nnlens::tool::run_exact_line(el);
    }
    if (*ig_cmd) {
      if (*ig_index_opt) ig.output_index = ig_index;
      return nnlens::tool::run_ig(ig);
    }
    if (*pr_cmd) {
      // The process-wide pool reads NNLENS_NUM_THREADS when first used, i.e. after this.
      if (pr_threads) ::setenv("NNLENS_NUM_THREADS", std::to_string(pr_threads).c_str(), 1);
      pr.progress = !pr_no_progress;
      return nnlens::tool::run_profile(pr);
    }
    if (*sl_cmd) {
      if (sl_threads) ::setenv("NNLENS_NUM_THREADS", std::to_string(sl_threads).c_str(), 1);
      if (*sl_target_opt) sl.target = sl_target;
      sl.progress = !sl_no_progress;
      return nnlens::tool::run_slice(sl);
    }
    if (*cv_cmd) {
      // The process-wide pool reads NNLENS_NUM_THREADS when first used, i.e. after this.
      if (cv_threads) ::setenv("NNLENS_NUM_THREADS", std::to_string(cv_threads).c_str(), 1);
      cv.progress = !cv_no_progress;
      return nnlens::tool::run_coverage(cv);
    }
    if (*ss_cmd) {
      // The process-wide pool reads NNLENS_NUM_THREADS when first used, i.e. after this.
      if (ss_threads) ::setenv("NNLENS_NUM_THREADS", std::to_string(ss_threads).c_str(), 1);
      return nnlens::tool::run_semslice(ss);
    }
  } catch (const std::exception& e) {
    std::cerr << "nnlens: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
