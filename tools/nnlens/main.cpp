// tools/nnlens/main.cpp -- the `nnlens` command-line tool: one subcommand per analysis.
//
//   nnlens version | nnlens --version      the version and the build's options (precisions, formats,
//                                         backends, SIMD target, compiler)
//   nnlens help [COMMAND]                 the same as `nnlens COMMAND --help` (no COMMAND: the list)
//   nnlens completion bash                a bash completion script (source <(nnlens completion bash))
//   nnlens demo                           train (or reuse) LeNet-5 on Fashion-MNIST and report (demo.hpp)
//   nnlens info | run | codegen           a model: its layers, its outputs on CSV samples, a C++ header
//                                         (info_cmd.hpp, run_cmd.hpp, codegen_cmd.hpp)
//   nnlens exact-line | ig                ExactLine: pieces and class intervals on segments, exact
//                                         integrated gradients (exact_line_cmd.hpp, ig_cmd.hpp,
//                                         docs/exactline-tool.md)
//   nnlens profile | slice                NNSlicer (profile_cmd.hpp, slice_cmd.hpp, docs/nnslicer-tool.md)
//   nnlens coverage                       DeepImportance's IDC and the DeepGauge / surprise criteria
//                                         (coverage_cmd.hpp, docs/coverage-tool.md)
//   nnlens semslice                       NeuSemSlice's critical neurons (semslice_cmd.hpp)
//   nnlens restructure | readapt | increment   NeuSemSlice's maintenance tasks (restructure_cmd.hpp,
//                                         readapt_cmd.hpp, increment_cmd.hpp, docs/neusemslice-tool.md)
//   nnlens difftest | compress            DFlare and the compressed twins (difftest_cmd.hpp,
//                                         compress_cmd.hpp, docs/dflare-tool.md)
// Each subcommand has its own file, NAME_cmd.cpp, which declares its options and run function
// (register_NAME, cli.hpp); what a family of commands shares is in FAMILY_common.hpp; the
// options several share (MODEL, --precision, --layout, --threads, --no-progress, --header) are
// declared once, in cli.hpp.  Commands that load a model take --precision f32|f64 (exact-line and ig
// default to f64, the others to f32) and --layout nchw|nhwc (default: the layout the model file
// declares, `nnlens info` shows it).  `nnlens COMMAND --help` lists a command's options.
//
// Errors: one line on stderr ("nnlens: ..."), exit status 1 (2 for bad command-line usage).
#include <exception>
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>

#include "cli.hpp"
#include "cli_help.hpp"
#include "codegen_cmd.hpp"
#include "compress_cmd.hpp"
#include "coverage_cmd.hpp"
#include "demo.hpp"
#include "difftest_cmd.hpp"
#include "exact_line_cmd.hpp"
#include "ig_cmd.hpp"
#include "increment_cmd.hpp"
#include "info_cmd.hpp"
#include "profile_cmd.hpp"
#include "readapt_cmd.hpp"
#include "restructure_cmd.hpp"
#include "run_cmd.hpp"
#include "semslice_cmd.hpp"
#include "slice_cmd.hpp"

int main(int argc, char** argv) {
  using namespace nnlens::tool;
  CLI::App app{"nnlens: analysis of piecewise-linear neural networks"};
  app.name("nnlens");
  app.require_subcommand(1);

  // ---- the tool's own commands: version, help, completion
  auto* version = app.add_subcommand("version", "Print the version and the build's options (as --version)");
  app.set_version_flag("--version", [] { return build_info(); },
                       "Print the version and the build's options (precisions, formats, backends, SIMD target)");
  std::string help_topic;
  auto* help_cmd = app.add_subcommand("help", "Help on a command: `nnlens help COMMAND` is `nnlens COMMAND --help`");
  help_cmd->add_option("COMMAND", help_topic, "The command");
  std::string completion_shell;
  auto* completion_cmd = app.add_subcommand("completion", "Print a shell completion script: source <(nnlens completion bash)");
  completion_cmd->add_option("SHELL", completion_shell, "The shell (bash)")->required()->check(CLI::IsMember({"bash"}));

  // ---- the analyses, in the order --help lists them
  command_list commands;
  for (auto* register_command :
       {register_demo, register_info, register_run, register_codegen, register_exact_line, register_ig, register_profile,
        register_slice, register_coverage, register_semslice, register_restructure, register_readapt, register_increment,
        register_difftest, register_compress})
    register_command(app, commands);

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
      std::cout << build_info() << "\n";
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
      std::cout << bash_completion(app);
      return 0;
    }
    for (const command& c : commands)
      if (*c.app) return c.run();
  } catch (const std::exception& e) {
    std::cerr << "nnlens: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
