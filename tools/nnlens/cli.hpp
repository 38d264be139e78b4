// tools/nnlens/cli.hpp -- how a subcommand of `nnlens` declares itself: its options (bound to the
// fields of its options struct) and the function that runs it.  main.cpp calls each family's
// register_*(app, commands) and, after parsing, runs the one command the user named.
//
//   command, command_list       a subcommand's CLI11 app and its run function (the exit code)
//   add_command<O>(app, cmds, name, help, declare, run)   a subcommand whose options live in a fresh
//                               O: declare(cmd, o) declares them, run(o) runs it
// The options that several commands share, declared once each:
//   add_model_arg(cmd, path)    the MODEL positional (required), naming the formats this build reads
//   add_model_options(cmd, precision, layout, default)   --precision f32|f64, --layout nchw|nhwc
//   add_threads(cmd[, n][, help])   --threads N: the process-wide pool's size (NNLENS_NUM_THREADS)
//   add_no_progress(cmd, progress)  --no-progress: progress = false
//   add_header_options(cmd, header) --header / --no-header of CSV sample files
//   add_enum(cmd, name, value, names, help)   an option whose words are the values of an enum
//                               (enum_member: "X not in {a,b}" for another word, as CLI::IsMember)
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include <nnlens/io/csv.hpp>
#include <nnlens/io/layout.hpp>

#include "model.hpp"

namespace nnlens::tool {

/// A subcommand: its CLI11 app, and what runs it once the command line is parsed (the exit code).
struct command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};
using command_list = std::vector<command>;

/// Adds subcommand `name`: its options are the fields of a fresh O, declared by declare(cmd, o);
/// run(o) runs the command (O lives as long as the run function).
template <class O, class Declare, class Run>
CLI::App& add_command(CLI::App& app, command_list& cmds, const char* name, const char* help, Declare declare, Run run) {
  auto o = std::make_shared<O>();
  CLI::App* cmd = app.add_subcommand(name, help);
  declare(*cmd, *o);
  cmds.push_back({cmd, [o, run] { return run(*o); }});
  return *cmd;
}

/// The words of an enum option, in the order --help lists them.
template <class E>
using enum_names = std::vector<std::pair<std::string, E>>;

/// The word of `value` in `names` ("" when it has none).
template <class E>
std::string enum_word(const enum_names<E>& names, E value) {
  for (const auto& [w, e] : names)
    if (e == value) return w;
  return {};
}

/// A CLI11 transformer from the words of `names` to E; any other word fails as CLI::IsMember does:
/// "--OPTION: X not in {a,b}" (exit 2), and --help shows the words as IsMember's "{a,b}".
template <class E>
CLI::Validator enum_member(const enum_names<E>& names) {
  std::string set = "{";
  for (const auto& [w, e] : names) set += (set.size() > 1 ? "," : "") + w;
  set += "}";
  return CLI::Validator(
      [names, set](std::string& s) {
        for (const auto& [w, e] : names)
          if (s == w) {
            s = std::to_string(static_cast<std::underlying_type_t<E>>(e));  // what the typed option reads
            return std::string();
          }
        return s + " not in " + set;
      },
      set);
}

/// An option --NAME WORD stored as the enum value of WORD; --help shows the current value as the
/// default when `show_default`.
template <class E>
CLI::Option* add_enum(CLI::App& cmd, const std::string& name, E& value, const enum_names<E>& names, const std::string& help,
                      bool show_default = true) {
  CLI::Option* o = cmd.add_option(name, value, help)->type_name("TEXT")->transform(enum_member(names));
  if (show_default) o->default_str(enum_word(names, value));
  return o;
}

/// "f32" -> precision::f32, "f64" -> precision::f64.
const enum_names<precision>& precision_names();

/// The MODEL positional (required): "Model file: " and the formats this build reads.
CLI::Option* add_model_arg(CLI::App& cmd, std::string& path, const std::string& name = "MODEL");

/// --precision f32|f64 (default `fallback`) and --layout nchw|nhwc (default io::data_layout::none:
/// the layout the model file declares) of a command that loads a model and reads its data.
void add_model_options(CLI::App& cmd, precision& p, io::data_layout& layout, precision fallback);

/// --threads N (1-1024): the process-wide pool reads NNLENS_NUM_THREADS when first used, after the
/// command line is parsed, so the option sets it then.  `n`, when given, also receives the value.
CLI::Option* add_threads(CLI::App& cmd, std::size_t* n = nullptr, const std::string& help = "Worker threads (default: all cores)");

/// --no-progress: no progress bar on standard error (progress = false).
CLI::Option* add_no_progress(CLI::App& cmd, bool& progress);

/// --header / --no-header of the CSV sample files (io::csv_header; the default is detect).
void add_header_options(CLI::App& cmd, io::csv_header& header);

}  // namespace nnlens::tool
