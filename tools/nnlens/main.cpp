// tools/nnlens/main.cpp -- the `nnlens` command-line tool (one subcommand per analysis).
//
//   nnlens version | nnlens --version      the version and the build's options (precisions, formats,
//                                         backends, SIMD target, compiler)
//   nnlens help [COMMAND]                 the same as `nnlens COMMAND --help` (no COMMAND: the list)
//   nnlens completion bash                a bash completion script (source <(nnlens completion bash))
//   nnlens demo --data DIR --cache DIR [--out DIR] [--epochs N] [--seed S] [--threads N] [--retrain]
//   nnlens info MODEL [--json]
//   nnlens run MODEL --input FILE.csv [--output FILE.csv] [--batch N] [--no-progress]
//   nnlens codegen MODEL -o FILE.hpp [--name NAME] [--namespace NS] [--precision f32|f64] [--freestanding]
//   nnlens exact-line MODEL --from A.csv --to B.csv [--json] [--classes argmax|argmin] [--threads N]
//                     [--merge-tol X] [--max-pieces N] [--validate] [--validate-tol X] [--svg FILE]
//                     ExactLine on the segments A[i] -> B[i]: pieces, outputs, class intervals
//   nnlens ig MODEL --input X.csv --baseline B.csv [--output-index k] [--json] [--m 50]
//                     exact integrated gradients, and the Riemann sums' errors against them
// Commands that load a model and read its data take --precision f32|f64 (exact-line and ig default
// to f64, the others to f32) and --layout nchw|nhwc (default: the layout the model file declares,
// `nnlens info` shows it; rows of an [N,H,W,C] ONNX input are read as NHWC).
// run, exact-line and ig take --header | --no-header for their CSV files (default: the first line is a
// header only when every value on it is a non-number; docs/formats.md "CSV samples").
// (docs/exactline-tool.md; .nnet models in raw units, so the CSVs hold raw inputs.)
//   nnlens profile MODEL --data FILE -o PROFILE [--granularity channel|element] [--threads N] [--batch N]
//                  [--no-progress]       NNSlicer's profile: mean neuron activations over a dataset
//   nnlens slice MODEL --profile PROFILE --samples FILE [--target CLASS] [--theta 0.3] [--json]
//                [--synapses FILE] [--abs-sum] [--denominator sum|activation] [--cutoff max|first]
//                [--threads N] [--no-progress]   NNSlicer's slice (CONTRIB) of the samples' classes
// (docs/nnslicer-tool.md; FILE: CSV as `run` reads, or IDX images scaled to [0, 1].)
//   nnlens coverage MODEL --train FILE [--train-labels FILE] --test FILE [--layer L] [--m 6]
//                   [--criteria idc,nc,kmnc,nbc,snac,tknc,lsc,dsc] [--json] [--state FILE] [--lsc-range spec|reference]
//                   DeepImportance's IDC and the DeepGauge / surprise criteria (docs/coverage-tool.md)
//   nnlens semslice MODEL --data FILE [--labels FILE] [--metric taylor] [--theta 0.95] [--similarity cka]
//                   [--categories 0,1,...] [--samples 500] [--test FILE] [--json] [-o MASK] [--mask MASK]
//                   NeuSemSlice's critical neurons, CR, masked accuracy (docs/neusemslice-tool.md)
// NeuSemSlice's maintenance tasks (docs/neusemslice-tool.md); the neuron mask comes from --mask MASK
// or from semslice on the (old) data with semslice's options (--metric --theta --similarity
// --categories --samples --metric-samples); OUT is .nnlw (LeNet-5 models) or .onnx:
//   nnlens restructure MODEL --data FILE [--labels FILE] --test FILE [--test-labels FILE] [--mask MASK |
//                      --no-slice] [--pruner lamp|global|uniform|erk] [--prune-step 0.05] [--max-drop 1]
//                      [--max-iterations 60] [--epochs 1] [--lr 1e-4] [--baseline] [--json] -o OUT
//                      mask + iterative pruning with fine-tuning: CR / accuracy per iteration, NI
//   nnlens readapt MODEL --data FILE [--labels FILE] [--test FILE] [--mask MASK | --full]
//                  [--attack fgsm|pgd] [--eps 0.1] [--pgd-steps 10] [--adv-samples 1000] [--epochs 5]
//                  [--lr 1e-3] [--baseline] [--json] -o OUT
//                  adversarial repair of the critical neurons only: TPR, RA, RAA, clean accuracy
//   nnlens increment MODEL --data NEW [--labels FILE] --old-data OLD [--old-labels FILE]
//                    [--old-classes 0,1,...] [--new-classes 5,6,...] [--mask MASK | --retrain] [--replay 0.1]
//                    [--test FILE] [--old-test FILE] [--epochs 5] [--lr 1e-3] [--baseline] [--json] -o OUT
//                    learn a new task with the old task's critical neurons frozen: old / new accuracy
//   (common: [--batch 64] [--limit N] [--seed S] [--threads N] [--no-progress])
// DFlare (docs/dflare-tool.md):
//   nnlens difftest ORIGINAL COMPRESSED --seeds FILE [--budget-queries N] [--timeout S]
//                   [--method dflare|diffchaser] [--acceptance paper|reference|no-novelty]
//                   [--selection paper|reference|last-accepted|uniform] [--pixel-scale 255]
//                   [--distance paper|logit-margin] [--skip-repeats]
//                   [--calibration FILE] [--limit N] [--out-dir DIR] [--json]
//                   COMPRESSED: a model file, exec:COMMAND (pipe protocol "nnlens-bb 1"), or a twin
//                   made on the fly: int8, q8, prune:R, channel-prune:R
//   nnlens compress MODEL (--int8 --calibration FILE | --q8 | --prune R | --channel-prune R) -o OUT
//                   [--labels FILE] [--per-tensor] [--json]
//
// Errors: one line on stderr ("nnlens: ..."), exit status 1 (2 for bad command-line usage).
#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>

#include <nnlens/config.hpp>
#include <nnlens/core/error.hpp>

#include "cli_help.hpp"
#include "commands.hpp"
#include "coverage_cmd.hpp"
#include "demo.hpp"
#include "difftest_cmd.hpp"
#include "exactline_cmd.hpp"
#include "maintenance_cmd.hpp"
#include "model.hpp"
#include "semslice_cmd.hpp"
#include "slice_cmd.hpp"

namespace {

/// --precision f32|f64 and --layout nchw|nhwc for a subcommand that loads a model and reads its data.
void add_model_options(CLI::App* cmd, std::string& precision, std::string& layout, const char* default_precision) {
  precision = default_precision;
  cmd->add_option("--precision", precision,
                  "Scalar type of the model and the analysis: f32 (float) or f64 (double; .nnet files keep their "
                  "float64 weights)")
      ->capture_default_str()
      ->check(CLI::IsMember({"f32", "f64"}));
  cmd->add_option("--layout", layout,
                  "Layout of the data files' rows: nchw or nhwc (default: what the model file declares, see "
                  "`nnlens info`; flat for .nnet and undeclared inputs)")
      ->check(CLI::IsMember({"nchw", "nhwc"}));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"nnlens: analysis of piecewise-linear neural networks"};
  app.name("nnlens");
  app.require_subcommand(1);

  auto* version = app.add_subcommand("version", "Print the version and the build's options (as --version)");
  app.set_version_flag("--version", [] { return nnlens::tool::build_info(); },
                       "Print the version and the build's options (precisions, formats, backends, SIMD target)");
  std::string help_topic;
  auto* help_cmd = app.add_subcommand("help", "Help on a command: `nnlens help COMMAND` is `nnlens COMMAND --help`");
  help_cmd->add_option("COMMAND", help_topic, "The command");
  std::string completion_shell;
  auto* completion_cmd = app.add_subcommand("completion", "Print a shell completion script: source <(nnlens completion bash)");
  completion_cmd->add_option("SHELL", completion_shell, "The shell (bash)")->required()->check(CLI::IsMember({"bash"}));

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
  info_cmd->add_flag("--json", info.json,
                     "One JSON object: input_shape (per sample, as the file declares it), input (\"[N,32,32,3] (nhwc)\"), "
                     "layout (nchw, nhwc or none), network_input_shape (NCHW), output_shape, "
                     "layers[{type, output_shape, params}], params");

  // --header / --no-header of the CSV sample files of run, exact-line and ig (io::csv_header).
  auto add_header_options = [](CLI::App* cmd, nnlens::io::csv_header& header) {
    auto* h = cmd->add_flag_callback(
        "--header", [&header] { header = nnlens::io::csv_header::present; },
        "The CSV files' first non-blank line is a header, whatever it holds (default: only when every value on it "
        "is a non-number, e.g. x0,x1,label)");
    auto* nh = cmd->add_flag_callback(
        "--no-header", [&header] { header = nnlens::io::csv_header::absent; },
        "Every line of the CSV files is a sample: a non-number on the first line is an error");
    h->excludes(nh);
  };

  nnlens::tool::run_options run;
  auto* run_cmd = app.add_subcommand("run", "Run a model on CSV samples; one CSV output line per sample");
  run_cmd->add_option("MODEL", run.model, formats)->required();
  run_cmd->add_option("--input,-i", run.input,
                      "CSV file: one sample per line, flattened row-major in the model's declared layout (NHWC for "
                      "an [N,H,W,C] input, see `nnlens info`; --layout overrides)")
      ->required();
  run_cmd->add_option("--output,-o", run.output, "CSV file for the outputs (default: standard output)");
  run_cmd->add_option("--batch", run.batch, "Samples per forward pass")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  bool no_progress = false;
  run_cmd->add_flag("--no-progress", no_progress, "No progress bar on standard error");
  add_model_options(run_cmd, run.precision, run.layout, "f32");
  add_header_options(run_cmd, run.header);

  nnlens::tool::codegen_cmd_options cg;
  auto* cg_cmd = app.add_subcommand("codegen", "Write a C++ header with the static network type and its weights");
  cg_cmd->add_option("MODEL", cg.model, formats)->required();
  cg_cmd->add_option("--output,-o", cg.output, "The header to write")->required();
  cg_cmd->add_option("--name", cg.name, "Type alias (make_NAME() returns the network)")->capture_default_str();
  cg_cmd->add_option("--namespace", cg.ns, "Enclosing namespace, e.g. fw::models (default: none)");
  cg_cmd->add_option("--precision", cg.precision, "Scalar type of the generated network: f32 (float) or f64 (double)")
      ->capture_default_str()
      ->check(CLI::IsMember({"f32", "f64"}));
  cg_cmd->add_flag("--freestanding", cg.freestanding,
                   "For a microcontroller: the weights as constant data (flash), a forward(x, y) that allocates nothing "
                   "and throws nothing, returning a status; needs only <nnlens/kernels/freestanding.hpp> (docs/edge.md)");

  nnlens::tool::exact_line_options el;
  std::size_t el_threads = 0;
  auto* el_cmd = app.add_subcommand("exact-line", "ExactLine: the exact pieces and class intervals of the network on segments");
  el_cmd->add_option("MODEL", el.model, formats)->required();
  el_cmd->add_option("--from", el.from,
                     "CSV file of segment starts: one sample per line in the model's declared layout, as `run` reads them")
      ->required();
  el_cmd->add_option("--to", el.to, "CSV file of segment ends: line i of --from -> line i of --to is segment i")->required();
  el_cmd->add_flag("--json", el.json,
                   "One JSON object: precision, input, layout, lines[{t, outputs, pieces, classes[{from, to, label}], "
                   "validation?{pieces, violations, max_deviation, tolerance, valid}, warning?, error?}], valid?, seconds");
  el_cmd->add_option("--classes", el.classes, "Winning class: argmax (classifiers) or argmin (ACAS Xu advisories)")
      ->capture_default_str()
      ->check(CLI::IsMember({"argmax", "argmin"}));
  el_cmd->add_option("--threads", el_threads, "Worker threads (default: all cores)")->check(CLI::Range(1, 1024));
  el_cmd->add_option("--merge-tol", el.merge_tol, "Merge breaks closer than this in t (0 to 1)")->capture_default_str();
  el_cmd->add_option("--max-pieces", el.max_pieces, "Fail a segment with more pieces than this")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  el_cmd->add_flag("--validate", el.validate,
                   "Check every piece at 1/4, 1/2, 3/4 of its length against the network (tolerance 1e-9 in f64, 1e-3 in "
                   "f32); a violation fails the command (exit 1)");
  el_cmd->add_option("--validate-tol", el.validate_tol,
                     "Relative tolerance of --validate: |f(x) - interpolation| <= tol (1 + |f(x)|) (default: 1e-9 in f64, "
                     "1e-3 in f32)");
  el_cmd->add_option("--svg", el.svg, "Write an SVG strip chart (a band per class interval, a tick per break)");
  add_model_options(el_cmd, el.precision, el.layout, "f64");
  add_header_options(el_cmd, el.header);

  nnlens::tool::ig_options ig;
  std::size_t ig_index = 0;
  auto* ig_cmd = app.add_subcommand("ig", "Exact integrated gradients, and the Riemann sums' errors against them");
  ig_cmd->add_option("MODEL", ig.model, formats)->required();
  ig_cmd->add_option("--input,-i", ig.input, "CSV file: the inputs x, one per line in the model's declared layout")->required();
  ig_cmd->add_option("--baseline,-b", ig.baseline, "CSV file: the baselines x' (one line per input, or one for all)")
      ->required();
  auto* ig_index_opt = ig_cmd->add_option("--output-index,-k", ig_index, "The output k (default: the argmax at x)");
  ig_cmd->add_flag("--json", ig.json,
                   "JSON: {output_index, exact, pieces, delta, riemann, samples_for_5pct} per input (attributions in the "
                   "data layout), precision, layout");
  ig_cmd->add_option("--m", ig.m, "Partitions of the Riemann sums")->capture_default_str()->check(CLI::Range(1, 1 << 24));
  add_model_options(ig_cmd, ig.precision, ig.layout, "f64");
  add_header_options(ig_cmd, ig.header);

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
  add_model_options(pr_cmd, pr.precision, pr.layout, "f32");

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
  add_model_options(sl_cmd, sl.precision, sl.layout, "f32");

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
  cv_cmd->add_flag("--json", cv.json,
                   "One JSON object: criteria{name: {coverage, covered, total[, total_capped, incc, layer, neurons, clusters][, range]}}, "
                   "seconds{prepare, measure}");
  cv_cmd->add_option("--lsc-range", cv.lsc_range,
                     "LSC's bucket range: spec ([0, 2000]) or reference (the SA reference code's: [min LSA of the test set, 2000]); "
                     "the share of test inputs inside it is always reported")
      ->capture_default_str();
  cv_cmd->add_option("--state", cv.state, "Load the preparations from this file if it exists, else prepare and save them there");
  cv_cmd->add_option("--nc-threshold", cv.nc_threshold, "NC: activation threshold after per-layer min-max scaling")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  cv_cmd->add_option("--kmnc-k", cv.kmnc_k, "KMNC: sections per neuron")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  cv_cmd->add_option("--tknc-k", cv.tknc_k, "TKNC: top neurons per layer")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  cv_cmd->add_option("--threads", cv_threads, "Worker threads (default: all cores)")->check(CLI::Range(1, 1024));
  cv_cmd->add_flag("--no-progress", cv_no_progress, "No progress bar on standard error");
  add_model_options(cv_cmd, cv.precision, cv.layout, "f32");

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
  add_model_options(ss_cmd, ss.precision, ss.layout, "f32");

  // ---- NeuSemSlice's maintenance tasks: restructure, readapt, increment (maintenance_cmd.hpp)
  struct maintenance_cli {
    CLI::App* cmd = nullptr;
    CLI::Option* seed = nullptr;
    std::size_t threads = 0;
    bool no_progress = false;
  };
  // The options the three share; `data_help` says what --data is, `no_mask` names the flag that
  // runs without a mask (the baseline alone).
  auto add_maintenance = [&](const char* name, const char* help, nnlens::tool::maintenance_common& m, const char* data_help,
                             const char* no_mask, const char* no_mask_help, bool categories, const char* test_help,
                             const char* epochs_help, const char* lr_help, const char* seed_help,
                             const char* baseline_help, const char* json_help) {
    maintenance_cli c;
    c.cmd = app.add_subcommand(name, help);
    c.cmd->add_option("MODEL", m.model, formats)->required();
    c.cmd->add_option("--data,-d", m.data, data_help)->required();
    c.cmd->add_option("--labels", m.labels,
                      "Labels of --data (IDX labels or one integer per line; default: the IDX labels file beside IDX images)");
    c.cmd->add_option("--test", m.test, test_help);
    c.cmd->add_option("--test-labels", m.test_labels, "Labels of --test (default: the IDX labels file beside it)");
    auto* mask_opt = c.cmd->add_option("--mask", m.slice.mask, "Use this neuron mask (nnlens semslice -o) instead of slicing");
    c.cmd->add_flag(no_mask, m.slice.none, no_mask_help)->excludes(mask_opt);
    c.cmd->add_option("--metric", m.slice.metric, "Slice: neuron contribution metric: avg, var, ens, taylor, deeplift")
        ->capture_default_str();
    c.cmd->add_option("--theta", m.slice.theta, "Slice: similarity threshold, 0 < theta <= 1")->capture_default_str();
    c.cmd->add_option("--similarity", m.slice.similarity, "Slice: cka, uncentered, unbiased")->capture_default_str();
    if (categories)
      c.cmd->add_option("--categories", m.slice.categories, "Slice: comma-separated output classes (default: every class)");
    c.cmd->add_option("--samples", m.slice.samples, "Slice: samples per category in the Gram matrices")->capture_default_str();
    c.cmd->add_option("--metric-samples", m.slice.metric_samples, "Slice: at most this many samples per category for the metric (0: all)")
        ->capture_default_str();
    c.cmd->add_option("--epochs", m.epochs, epochs_help)->check(CLI::Range(1, 100000));
    c.cmd->add_option("--lr", m.lr, lr_help)->check(CLI::NonNegativeNumber);
    c.cmd->add_option("--batch", m.batch, "Mini-batch size")->capture_default_str()->check(CLI::Range(1, 1 << 20));
    c.cmd->add_option("--limit", m.limit, "Use at most the first N samples of each data file (0: all)")->capture_default_str();
    c.seed = c.cmd->add_option("--seed", m.seed, seed_help);
    c.cmd->add_flag("--baseline", m.baseline, baseline_help);
    c.cmd->add_option("--output,-o", m.output, "The model to write: .nnlw (the demo's LeNet-5) or .onnx")->required();
    c.cmd->add_flag("--json", m.json, json_help);
    c.cmd->add_flag("--no-progress", c.no_progress, "No progress bar on standard error");
    add_model_options(c.cmd, m.precision, m.layout, "f32");
    return c;
  };

  nnlens::tool::restructure_cmd_options rs;
  auto rs_cli = add_maintenance(
      "restructure", "NeuSemSlice restructure: mask the non-critical neurons, then iterative pruning with fine-tuning", rs,
      "Labelled training samples for the slice and the fine-tuning (CSV or IDX images, as `profile --data` reads)",
      "--no-slice", "No neuron mask: the pruner alone", true,
      "Labelled test samples: the accuracy that decides each iteration (required)",
      "Fine-tuning epochs per iteration (default 1)", "Adam learning rate of the fine-tuning (default 1e-4)",
      "Seed of the slice's draws and the fine-tuning's shuffles (default 0)",
      "Also run the pruner alone (no mask) and report it beside",
      "One JSON object: mask, reference_accuracy, start_compression, start_accuracy, iterations[{iteration, compression, weight_pruned, accuracy, accepted}], ni, compression, accuracy, [baseline]");
  rs_cli.cmd->get_option("--test")->required();
  rs_cli.cmd->add_option("--pruner", rs.pruner, "Magnitude pruner: lamp, global, uniform (Uniform+), erk")->capture_default_str();
  rs_cli.cmd->add_option("--prune-step", rs.prune_step, "p: fraction of the remaining weights pruned per iteration")
      ->capture_default_str();
  rs_cli.cmd->add_option("--max-drop", rs.max_drop, "Stop at the first iteration whose test accuracy is below the model's minus this (points)")
      ->capture_default_str();
  rs_cli.cmd->add_option("--max-iterations", rs.max_iterations, "At most this many pruning iterations")->capture_default_str();

  nnlens::tool::readapt_cmd_options ra;
  auto ra_cli = add_maintenance(
      "readapt", "NeuSemSlice re-adaptation: adversarial repair training only the critical neurons", ra,
      "Labelled training samples: the slice, and the clean sources of the adversarial training samples", "--full",
      "No neuron mask: every parameter trains (the Full baseline alone)", true,
      "Labelled test samples: clean accuracy and the sources of the RAA samples (default: --data)",
      "Training epochs (default 5)", "Adam learning rate (default 1e-3)",
      "Seed of the sample draws, shuffles and PGD's start (default 1; the slice's draws: 0)",
      "Also run full retraining and report it beside",
      "One JSON object: mask, trained_parameters, parameters, tpr, adv_before, ra, raa, clean_before, clean_after (percent), [baseline]");
  ra_cli.cmd->add_option("--attack", ra.attack, "fgsm or pgd")->capture_default_str();
  ra_cli.cmd->add_option("--eps", ra.eps, "L-inf radius (pixels in [0, 1])")->capture_default_str();
  ra_cli.cmd->add_option("--pgd-steps", ra.pgd_steps, "PGD: steps of eps/4")->capture_default_str();
  ra_cli.cmd->add_option("--adv-samples", ra.adv_samples, "Adversarial samples for training, and new ones for RAA")
      ->capture_default_str();

  nnlens::tool::increment_cmd_options in;
  auto in_cli = add_maintenance(
      "increment", "NeuSemSlice incremental development: learn a new task with the old task's critical neurons frozen", in,
      "Labelled samples of the new task (CSV or IDX images)", "--retrain",
      "No neuron mask: every parameter trains (the Retrain baseline alone)", false,
      "Labelled test samples of the new task (default: --data)", "Training epochs (default 5)",
      "Adam learning rate (default 1e-3)", "Seed of the replay draw and the shuffles (default 1; the slice's draws: 0)",
      "Also run Retrain (every parameter, the same data) and report it beside",
      "One JSON object: mask, before{old, new, mean}, accuracy{old, new, mean}, trained_fraction, frozen_changed, [baseline]");
  in_cli.cmd->add_option("--old-data", in.old_data, "Labelled samples of the old task: Omega is sliced on them")->required();
  in_cli.cmd->add_option("--old-labels", in.old_labels, "Labels of --old-data (default: the IDX labels file beside it)");
  in_cli.cmd->add_option("--old-classes", in.old_classes,
                         "The old task's classes: only their samples of --old-data / --old-test are used; the slice's categories and the frozen outputs (default: the labels of --old-data)");
  in_cli.cmd->add_option("--new-classes", in.new_classes,
                         "The new task's classes: only their samples of --data and --test are used (default: all)");
  in_cli.cmd->add_option("--old-test", in.old_test, "Labelled test samples of the old task (default: --old-data)");
  in_cli.cmd->add_option("--old-test-labels", in.old_test_labels, "Labels of --old-test");
  in_cli.cmd->add_option("--replay", in.replay, "Add this fraction of the old samples to the training data (Replay)")
      ->capture_default_str();
  for (auto* c : {&rs_cli, &ra_cli, &in_cli})
    c->cmd->add_option("--threads", c->threads, "Worker threads (default: all cores)")->check(CLI::Range(1, 1024));

  nnlens::tool::difftest_cmd_options dt;
  std::size_t dt_threads = 0;
  bool dt_no_progress = false;
  auto* dt_cmd = app.add_subcommand("difftest", "DFlare: inputs on which a compressed model deviates from its original (top-1 labels differ)");
  dt_cmd->add_option("ORIGINAL", dt.original, formats)->required();
  dt_cmd->add_option("COMPRESSED", dt.compressed,
                     "The twin: a model file, exec:COMMAND (a process speaking the nnlens-bb 1 pipe protocol), or made from ORIGINAL: "
                     "int8, q8, prune:R, channel-prune:R")
      ->required();
  dt_cmd->add_option("--seeds", dt.seeds, "Seed inputs (CSV rows or IDX images scaled to [0, 1], as `run` reads them)")->required();
  dt_cmd->add_option("--budget-queries", dt.budget_queries, "Queries per seed (one query = both models once; 0: no limit)")
      ->capture_default_str();
  dt_cmd->add_option("--timeout", dt.timeout, "Seconds per seed (0: no limit)")->capture_default_str();
  dt_cmd->add_option("--method", dt.method, "dflare or diffchaser")->capture_default_str();
  dt_cmd->add_option("--acceptance", dt.acceptance, "DFlare's acceptance rule: paper, reference, no-novelty")->capture_default_str();
  dt_cmd->add_option("--selection", dt.selection, "DFlare's operator selection: paper, reference, last-accepted, uniform")
      ->capture_default_str();
  dt_cmd->add_option("--distance", dt.distance,
                     "DFlare's D: paper (top-1 probabilities) or logit-margin (beyond the spec: the relative gap of the two "
                     "models' logit margins)")
      ->capture_default_str();
  dt_cmd->add_flag("--skip-repeats", dt.skip_repeats,
                   "DFlare, beyond the spec: do not query a mutant equal to x_max or to one already queried since x_max changed");
  dt_cmd->add_option("--seed", dt.seed, "Random seed (each input seed gets its own stream)")->capture_default_str();
  dt_cmd->add_option("--pixel-scale", dt.pixel_scale,
                     "Seeds times this are raw pixels in [0, 255]; the models see pixels / this (1: models reading [0, 255])")
      ->capture_default_str();
  dt_cmd->add_option("--calibration", dt.calibration, "int8: activation calibration samples (default: the seeds)");
  dt_cmd->add_option("--limit", dt.limit, "Only the first N seeds (0: all)")->capture_default_str();
  dt_cmd->add_option("--out-dir", dt.out_dir, "Write each triggering input as a CSV row (model scale) to DIR/trigger-SEED.csv");
  dt_cmd->add_flag("--json", dt.json, "One JSON object: seeds[{seed, status, found, queries, seconds, labels, input}], summary{...}");
  dt_cmd->add_option("--threads", dt_threads, "Worker threads: seeds run in parallel (default: all cores)")->check(CLI::Range(1, 1024));
  dt_cmd->add_flag("--no-progress", dt_no_progress, "No progress bar on standard error");
  add_model_options(dt_cmd, dt.precision, dt.layout, "f32");
  dt_cmd->get_option("--precision")
      ->description("Scalar type of ORIGINAL and of a model-file or on-the-fly twin: f32 or f64.  DFlare's search stays float "
                    "(the black boxes take float pixels and return float probabilities); int8 / q8 twins compute their quantised "
                    "layers in int8 with float32 scales at either precision");
  dt_cmd->get_option("--layout")
      ->description("Layout of the rows of --seeds and --calibration: nchw or nhwc (default: ORIGINAL's declared layout); the "
                    "triggering inputs of --out-dir and the rows an exec: child reads are in it");

  nnlens::tool::compress_cmd_options cp;
  auto* cp_cmd = app.add_subcommand("compress", "A compressed twin of a model: int8 / q8 quantisation or magnitude / channel pruning");
  cp_cmd->add_option("MODEL", cp.model, formats)->required();
  cp_cmd->add_flag("--int8", cp.int8, "Full int8 quantisation (per-channel weights, calibrated activations; needs --calibration)");
  cp_cmd->add_flag("--q8", cp.q8, "DFlare's reference rule: weight-only int8 of weight tensors with >= 1024 elements");
  cp_cmd->add_option("--prune", cp.prune, "Magnitude pruning: this fraction of each layer's weights becomes 0");
  cp_cmd->add_option("--channel-prune", cp.channel_prune, "This fraction of each layer's channels (smallest L1 norm) becomes 0");
  cp_cmd->add_flag("--per-tensor", cp.per_tensor, "int8: one weight scale per tensor instead of per output channel");
  cp_cmd->add_option("--calibration", cp.calibration, "Samples: int8's activation ranges; with labels, the accuracy of both models");
  cp_cmd->add_option("--labels", cp.labels, "Labels of --calibration (default: the IDX labels file beside it)");
  cp_cmd->add_option("--output,-o", cp.output, "The twin: .onnx, or .nnlw for the demo's LeNet-5")->required();
  add_model_options(cp_cmd, cp.precision, cp.layout, "f32");
  cp_cmd->get_option("--precision")
      ->description("Scalar type of MODEL and the twin: f32 or f64.  An int8 twin's quantised layers are int8 with float32 "
                    "scales at either precision; an .onnx twin is written with float32 weights (the report says so at f64)");
  cp_cmd->add_flag("--json", cp.json, "One JSON object: model, twin, output, weight_sparsity, [quantized_layers, accuracy, twin_accuracy]");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    std::cout << e.what() << "\n";
    return 0;
  } catch (const CLI::ParseError& e) {
    std::cerr << "nnlens: " << e.what() << " (run nnlens --help)\n";
    return 2;
  }

  try {
    if (*version) {
      std::cout << nnlens::tool::build_info() << "\n";
      return 0;
    }
    if (*help_cmd) {
      if (help_topic.empty()) {
        std::cout << app.get_formatter()->make_help(&app, app.get_name(), CLI::AppFormatMode::Normal);
        return 0;
      }
      for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
        if (sub->get_name() == help_topic) {
          std::cout << sub->help(app.get_name());
          return 0;
        }
      std::cerr << "nnlens: help: no command '" << help_topic << "' (the commands: nnlens --help)\n";
      return 2;
    }
    if (*completion_cmd) {
      std::cout << nnlens::tool::bash_completion(app);
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
    auto maintenance = [](const maintenance_cli& c, nnlens::tool::maintenance_common& m) {
      // The process-wide pool reads NNLENS_NUM_THREADS when first used, i.e. after this.
      if (c.threads) ::setenv("NNLENS_NUM_THREADS", std::to_string(c.threads).c_str(), 1);
      m.seed_given = c.seed->count() > 0;
      m.slice.slice_seed = m.seed_given ? m.seed : 0;
      m.progress = !c.no_progress;
    };
    if (*rs_cli.cmd) {
      maintenance(rs_cli, rs);
      return nnlens::tool::run_restructure(rs);
    }
    if (*ra_cli.cmd) {
      maintenance(ra_cli, ra);
      return nnlens::tool::run_readapt(ra);
    }
    if (*in_cli.cmd) {
      maintenance(in_cli, in);
      return nnlens::tool::run_increment(in);
    }
    if (*dt_cmd) {
      // The process-wide pool reads NNLENS_NUM_THREADS when first used, i.e. after this.
      if (dt_threads) ::setenv("NNLENS_NUM_THREADS", std::to_string(dt_threads).c_str(), 1);
      dt.progress = !dt_no_progress;
      return nnlens::tool::run_difftest(dt);
    }
    if (*cp_cmd) return nnlens::tool::run_compress(cp);
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
