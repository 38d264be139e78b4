// tools/nnlens/main.cpp -- the `nnlens` command-line tool (one subcommand per analysis).
//
//   nnlens version
//   nnlens demo --data DIR --cache DIR [--epochs N] [--seed S] [--threads N] [--retrain]
//
// Errors: one line on stderr ("nnlens: ..."), exit status 1 (2 for bad command-line usage).
#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>

#include <nnlens/config.hpp>
#include <nnlens/core/error.hpp>

#include "demo.hpp"

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
  } catch (const std::exception& e) {
    std::cerr << "nnlens: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
