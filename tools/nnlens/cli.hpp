// tools/nnlens/cli.hpp -- how a subcommand of `nnlens` declares itself: its options (bound to the
// fields of its options struct) and the function that runs it.  Each command's file defines its
// register_X(app, commands); main.cpp calls them all and, after parsing, runs the one named.
//
//   command, command_list       a subcommand's CLI11 app and its run function (the exit code)
//   auto [cmd, o] = add_command<O>(app, cmds, name, help, run)   a subcommand whose options live in a
//                               fresh O: declare them on cmd, bound to o's fields; run(o) runs it
//   auto [cmd, o] = add_analysis<O>(app, cmds, name, help)   the same for a command that loads a
//                               model (O derives from model_args): MODEL is declared, and the command
//                               runs run_as<T>(o) at --precision's T (the command's file defines
//                               template <class T> int run_as(const O&) in nnlens::tool)
// The options that several commands share, declared once each:
//   add_model_arg(cmd, path)    the MODEL positional (required), naming the formats this build reads
//   model_args                  MODEL, --precision, --layout: the base of such a command's options
//   add_model_options(cmd, m, default)   --precision f32|f64 (default), --layout nchw|nhwc
//   add_threads(cmd[, n][, help])   --threads N: the process-wide pool's size (NNLENS_NUM_THREADS)
//   add_no_progress(cmd, progress)  --no-progress: progress = false
//   add_header_options(cmd, header) --header / --no-header of CSV sample files
//   add_enum(cmd, name, value, names, help)   an option whose words are the values of an enum
//                               (enum_member: "X not in {a,b}" for another word, as CLI::IsMember)
//   parse_word(names, word, option)   the same words for an option the command checks when it runs,
//                               after the checks before it: value_error "OPTION: expected a, b or c,
//                               got 'x'" (exit 1)
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include <nnlens/core/error.hpp>
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

/// A new subcommand and its options' storage: declare its options on `cmd`, bound to `o`'s fields.
template <class O>
struct new_command {
  CLI::App& cmd;
  O& o;
};

/// Adds subcommand `name`, its options to be the fields of a fresh O (which lives as long as the
/// command); run(o) runs the command.  auto [cmd, o] = add_command<O>(...): declare the options.
template <class O, class Run>
new_command<O> add_command(CLI::App& app, command_list& cmds, const char* name, const char* help, Run run) {
  auto o = std::make_shared<O>();
  CLI::App* cmd = app.add_subcommand(name, help);
  cmds.push_back({cmd, [o, run] { return run(*o); }});
  return {*cmd, *o};
}

/// MODEL, --precision and --layout: what a command that loads a model and reads its data is given.
struct model_args {
  std::string model;
  tool::precision precision = tool::precision::f32;
  io::data_layout layout = io::data_layout::none;  // none: the model file's declared layout
};

/// The MODEL positional (required): "Model file: " and the formats this build reads.
CLI::Option* add_model_arg(CLI::App& cmd, std::string& path, const std::string& name = "MODEL");

/// add_command for O derived from model_args, with its MODEL positional declared; the command runs
/// run_as<T>(o) with T float (--precision f32) or double (f64), found beside O (its command's file).
template <class O>
new_command<O> add_analysis(CLI::App& app, command_list& cmds, const char* name, const char* help) {
  auto run = [](const O& o) { return with_precision(o.precision, [&]<class T>() { return run_as<T>(o); }); };
  new_command<O> c = add_command<O>(app, cmds, name, help, run);
  add_model_arg(c.cmd, c.o.model);
  return c;
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

/// The value of `word` in `names`; value_error "OPTION: expected a, b or c, got 'word'" otherwise.  The
/// message lists the first word of each value (later words of a value are accepted aliases).
template <class E>
E parse_word(const enum_names<E>& names, const std::string& word, const std::string& option) {
  std::vector<std::string> listed;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (names[i].first == word) return names[i].second;
    bool first = true;
    for (std::size_t k = 0; k < i; ++k) first = first && names[k].second != names[i].second;
    if (first) listed.push_back(names[i].first);
  }
  std::string expected;
  for (std::size_t i = 0; i < listed.size(); ++i)
    expected += (i == 0 ? "" : i + 1 == listed.size() ? " or " : ", ") + listed[i];
  throw value_error(option + ": expected " + expected + ", got '" + word + "'");
}

/// "f32" -> precision::f32, "f64" -> precision::f64.
const enum_names<precision>& precision_names();

/// --precision f32|f64 (default `fallback`) and --layout nchw|nhwc (default io::data_layout::none:
/// the layout the model file declares) of a command that loads a model and reads its data.
void add_model_options(CLI::App& cmd, model_args& m, precision fallback);

/// --threads N (1-1024): the process-wide pool reads NNLENS_NUM_THREADS when first used, after the
/// command line is parsed, so the option sets it then.  `n`, when given, also receives the value.
CLI::Option* add_threads(CLI::App& cmd, std::size_t* n = nullptr, const std::string& help = "Worker threads (default: all cores)");

/// --no-progress: no progress bar on standard error (progress = false).
CLI::Option* add_no_progress(CLI::App& cmd, bool& progress);

/// --header / --no-header of the CSV sample files (io::csv_header; the default is detect).
void add_header_options(CLI::App& cmd, io::csv_header& header);

}  // namespace nnlens::tool
