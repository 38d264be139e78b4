// tools/nnlens/coverage_cmd.cpp -- `nnlens coverage` (see coverage_cmd.hpp).
#include "coverage_cmd.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include <nnlens/core/error.hpp>
#include <nnlens/core/progress.hpp>
#include <nnlens/coverage.hpp>
#include <nnlens/coverage/neuron_coverage.hpp>
#include <nnlens/coverage/surprise.hpp>
#include <nnlens/network/fingerprint.hpp>

#include "maintenance_common.hpp"  // maint::other_precision
#include "format.hpp"
#include "model.hpp"
#ifdef NNLENS_TOOL_HAS_MPI  // ---- MPI (docs/scale.md): `mpirun -np N nnlens coverage`: IDC's test set sharded ----
#include <nnlens/mpi/coverage.hpp>

#include "mpi_world.hpp"
#endif

namespace nnlens::tool {

namespace {

using json = nlohmann::ordered_json;  // keys in the documented order
using clock_type = std::chrono::steady_clock;

const std::vector<std::string> known_criteria = {"idc", "nc", "kmnc", "nbc", "snac", "tknc", "lsc", "dsc"};

std::vector<std::string> parse_criteria(const std::string& list) {
  std::vector<std::string> r;
  std::size_t p = 0;
  while (p <= list.size()) {
    std::size_t q = list.find(',', p);
    if (q == std::string::npos) q = list.size();
    std::string c = list.substr(p, q - p);
    for (auto& ch : c) ch = char(std::tolower(static_cast<unsigned char>(ch)));
    if (!c.empty()) {
      if (std::find(known_criteria.begin(), known_criteria.end(), c) == known_criteria.end())
        throw value_error("--criteria: unknown criterion '" + c + "' (expected some of idc,nc,kmnc,nbc,snac,tknc,lsc,dsc)");
      if (std::find(r.begin(), r.end(), c) == r.end()) r.push_back(c);
    }
    p = q + 1;
  }
  if (r.empty()) throw value_error("--criteria: no criterion given");
  return r;
}

bool wants(const std::vector<std::string>& cs, std::initializer_list<std::string_view> names) {
  for (const auto& c : cs)
    for (auto n : names)
      if (c == n) return true;
  return false;
}


/// What is learnt from the training set, per kind; each optional.
struct preparations {
  std::optional<idc> idc_state;
  std::optional<neuron_bounds> bounds;
  std::optional<surprise_model> surprise;
};

// -- state file: "nnlens-coverage-state 1", "fingerprint F", then "section NAME BYTES\n" + BYTES
//    (each section is the criterion's own text format), then "end".
constexpr std::string_view state_magic = "nnlens-coverage-state 1";

void save_state(const std::string& path, std::uint64_t fingerprint, const preparations& p) {
  std::ostringstream out;
  out << state_magic << "\nfingerprint " << fingerprint << "\n";
  auto section = [&](const char* name, const std::string& body) {
    out << "section " << name << " " << body.size() << "\n" << body;
  };
  if (p.idc_state) {
    std::ostringstream s;
    save_idc(s, *p.idc_state);
    section("idc", s.str());
  }
  if (p.bounds) {
    std::ostringstream s;
    save_neuron_bounds(s, *p.bounds);
    section("bounds", s.str());
  }
  if (p.surprise) {
    std::ostringstream s;
    save_surprise(s, *p.surprise);
    section("surprise", s.str());
  }
  out << "end\n";
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) throw io_error(path + ": cannot open for writing");
    f << out.str();
    f.flush();
    if (!f) throw io_error(path + ": write error");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw io_error(path + ": cannot write (" + ec.message() + ")");
}

template <class T>
preparations load_state(const std::string& path, const std::string& model, io::data_layout layout,
                        const basic_dynamic_network<T>& net) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw io_error(path + ": cannot open");
  std::string line;
  std::size_t line_no = 0;
  auto bad = [&](const std::string& why) { return data_error(concat(path, ":", line_no, ": ", why)); };
  auto next = [&](const char* what) {
    if (!std::getline(f, line)) throw data_error(concat(path, ": truncated before ", what));
    ++line_no;
  };
  next("the header");
  if (line != state_magic) throw bad(concat("not an nnlens coverage state (expected '", state_magic, "')"));
  next("the fingerprint");
  std::uint64_t fp = 0;
  {
    std::istringstream ss(line);
    std::string k;
    if (!(ss >> k >> fp) || k != "fingerprint") throw bad("expected 'fingerprint N'");
  }
  const std::uint64_t mine = model_fingerprint(net);
  if (fp != mine && !maint::other_precision<T>(fp, model, layout).empty())
    throw data_error(concat(path, ": a state of ", model, " prepared with --precision ", maint::other_precision<T>(fp, model, layout),
                            "; run with that precision, or remove the file to prepare again"));
  if (fp != mine)
    throw data_error(concat(path, ": a state of another model, not of ", model, " (model fingerprint ", fp, ", ",
                            std::filesystem::path(model).filename().string(), " has ", mine, ")"));
  preparations p;
  for (;;) {
    next("'end'");
    if (line == "end") break;
    std::istringstream ss(line);
    std::string k, name;
    std::size_t bytes = 0;
    if (!(ss >> k >> name >> bytes) || k != "section" || bytes > (std::size_t(1) << 34))
      throw bad("expected 'section NAME BYTES' or 'end'");
    std::string body(bytes, '\0');
    if (!f.read(body.data(), std::streamsize(bytes))) throw bad(concat("section ", name, ": truncated"));
    line_no += std::size_t(std::count(body.begin(), body.end(), '\n'));
    std::istringstream is(body);
    try {
      if (name == "idc")
        p.idc_state = load_idc(is, net);
      else if (name == "bounds")
        p.bounds = load_neuron_bounds(is, net);
      else if (name == "surprise")
        p.surprise = load_surprise(is, net);
      else
        throw bad("unknown section '" + name + "'");
    } catch (const data_error& e) {
      if (std::string_view(e.what()).rfind(path, 0) == 0) throw;
      throw data_error(concat(path, ": section ", name, ": ", e.what()));
    } catch (const io_error& e) {
      throw data_error(concat(path, ": section ", name, ": ", e.what()));
    } catch (const value_error& e) {
      throw data_error(concat(path, ": section ", name, ": ", e.what()));
    }
  }
  return p;
}

}  // namespace

template <class T>
int run_as(const coverage_cmd_options& o) {
  const std::vector<std::string> crit = parse_criteria(o.criteria);
  if (o.lsc_range != "spec" && o.lsc_range != "reference")
    throw value_error("--lsc-range: expected spec or reference, got '" + o.lsc_range + "'");
  const bool lsc_reference = o.lsc_range == "reference";
  if (o.m == 0) throw value_error("--m: expected at least 1 important neuron");
#ifdef NNLENS_TOOL_HAS_MPI  // MPI: under mpirun with N > 1 ranks (before the thread pool starts)
  mpi_world world;
#endif
  const model<T> md = open_model<T>(o.model, o.layout);
  const basic_dynamic_network<T>& net = md.net;
  const auto layers = all_layers(net);
  const std::size_t L = o.layer.empty() ? subject_layer(net) : layer_index(net, o.layer);  // value_error when out of range
  const std::size_t width = coverage_neurons(layers[L].out);
  if (o.m > width)
    throw value_error(concat("--m ", o.m, ": larger than layer ", layers[L].name, ", which has ", width, " neuron",
                             width == 1 ? "" : "s"));
  const std::size_t classes = coverage_neurons(net.output_shape());

  const bool need_idc = wants(crit, {"idc"}), need_bounds = wants(crit, {"kmnc", "nbc", "snac"}),
             need_surprise = wants(crit, {"lsc", "dsc"});

  const xt::xarray<T> TX = read_samples<T>(o.test, md.in);  // io_error for an empty file
  const std::size_t test_n = TX.shape()[0];

  // -- preparations: from the state file, then whatever is missing from the training set
  const auto t0 = clock_type::now();
  preparations p;
  std::error_code ec;
  const bool have_state = !o.state.empty() && std::filesystem::exists(o.state, ec);
  bool root = true;  // writes the state file and the report
#ifdef NNLENS_TOOL_HAS_MPI  // MPI: every rank prepares (deterministic: the same state); rank 0 saves it
  if (world) world->barrier(), root = world->rank() == 0;  // every rank has looked for the file
#endif
  if (have_state) {
    p = load_state(o.state, o.model, o.layout, net);
    if (p.idc_state && need_idc && (p.idc_state->layer() != L || p.idc_state->neurons().size() != o.m))
      throw data_error(concat(o.state, ": its IDC was prepared with --layer ", p.idc_state->layer(), " --m ",
                              p.idc_state->neurons().size(), ", not --layer ", L, " --m ", o.m,
                              " (remove the file to prepare again)"));
    if (p.surprise && need_surprise && p.surprise->layer != L)
      throw data_error(concat(o.state, ": its surprise model was prepared on layer ", p.surprise->layer, ", not on --layer ",
                              L, " (remove the file to prepare again)"));
    if (p.idc_state) p.idc_state->reset();  // measure the test set alone
  }
  const bool make_idc = need_idc && !p.idc_state, make_bounds = need_bounds && !p.bounds,
             make_surprise = need_surprise && !p.surprise;
  std::size_t train_n = 0;
  // A criterion that cannot be computed on this data (e.g. DSC when every training input is
  // predicted as one class) is reported with its error; the others are still computed and shown.
  std::map<std::string, std::string> failed;
  auto fail = [&](std::initializer_list<std::string> cs, const std::string& why) {
    for (const auto& c : cs)
      if (wants(crit, {c})) failed.emplace(c, why);
  };
  const std::size_t steps = std::size_t(make_idc) + make_bounds + make_surprise + crit.size();
  std::size_t done = 0;
  std::string doing;
  std::optional<progress_bar> bar;
  auto step = [&](const std::string& what) {
    doing = what;
    if (bar) bar->update(done, [&] { return doing; });
  };
  if (make_idc || make_bounds || make_surprise) {
    if (o.train.empty()) {
      std::string what = make_idc ? "idc" : make_bounds ? "kmnc/nbc/snac" : "lsc/dsc";
      throw value_error("--train FILE is required to prepare " + what +
                        (o.state.empty() ? std::string() : " (the state file " + o.state + (have_state ? " lacks it)" : " does not exist yet)")));
    }
    const xt::xarray<T> X = read_samples<T>(o.train, md.in);  // io_error for an empty file
    train_n = X.shape()[0];
    if (train_n == 0) throw data_error(o.train + ": the training set is empty");
    if (o.progress && train_n + test_n >= 4096) bar.emplace("coverage", steps);
    if (make_idc) {
      std::string lp = o.train_labels.empty() ? companion_labels(o.train) : o.train_labels;
      if (lp.empty())
        throw value_error(concat("--train-labels FILE is required for idc: ", o.train,
                                 " has no IDX labels file beside it (IDC uses the correctly classified training inputs)"));
      const auto y = read_labels(lp, train_n, classes);
      step("prepare idc");
      idc_options io;
      io.layer = L;
      io.m = o.m;
      try {
        p.idc_state = prepare_idc(execution::par, net, X, y, io);
      } catch (const data_error& e) {
        fail({"idc"}, concat(o.train, ": ", e.what()));
      }
      ++done;
    }
    if (make_bounds) {
      step("prepare neuron bounds");
      p.bounds = prepare_neuron_bounds(execution::par, net, X);
      ++done;
    }
    if (make_surprise) {
      step("prepare surprise");
      try {
        p.surprise = prepare_surprise(execution::par, net, X, L);
      } catch (const data_error& e) {
        fail({"lsc", "dsc"}, concat(o.train, ": ", e.what()));
      }
      ++done;
    }
    if (!o.state.empty() && root) save_state(o.state, model_fingerprint(net), p);
  }
  const double prepare_s = std::chrono::duration<double>(clock_type::now() - t0).count();

  // -- measurement
  if (!bar && o.progress && test_n >= 4096) bar.emplace("coverage", steps);
  const auto t1 = clock_type::now();
  std::shared_ptr<const neuron_bounds> bounds;
  if (p.bounds) bounds = std::make_shared<const neuron_bounds>(*p.bounds);
  std::shared_ptr<const surprise_model> sm;
  if (p.surprise) sm = std::make_shared<const surprise_model>(*p.surprise);
  std::vector<std::pair<std::string, coverage_result>> results;
  // LSC / DSC: the range [lower, upper] and where the test inputs' values fell against it (an LSC
  // whose inputs mostly fall outside its range must not be reported silently)
  struct range_report {
    surprise_coverage_options opts;
    surprise_range_counts counts;
  };
  std::map<std::string, range_report> ranges;
  auto measure_surprise = [&](auto crit_, auto&& run_) {
    run_(crit_);
    ranges[std::string(crit_.name())] = {crit_.options(), crit_.range()};
  };
  for (const auto& c : crit) {
    step("measure " + c);
    if (failed.count(c)) {  // its preparation failed
      ++done;
      continue;
    }
    auto run = [&](auto& criterion) {
      try {
        results.emplace_back(c, measure(execution::par, net, TX, criterion));
      } catch (const data_error& e) {
        failed.emplace(c, concat(c, " on ", o.test, ": ", e.what()));
      } catch (const value_error& e) {
        failed.emplace(c, concat(c, " on ", o.test, ": ", e.what()));
      }
    };
#ifdef NNLENS_TOOL_HAS_MPI  // MPI: IDC's covered sets of the ranks' blocks of the test set, united
    if (c == "idc" && world) {
      results.emplace_back(c, nnlens::mpi::measure(*world, execution::par, net, TX, *p.idc_state, {.broadcast = true})->result());
      ++done;
      continue;
    }  // the other criteria: every rank measures the whole test set (the same result)
#endif
    auto run_new = [&](auto&& criterion) { run(criterion); };
    if (c == "idc") run(*p.idc_state);
    else if (c == "nc") run_new(nc_criterion(net, {.threshold = o.nc_threshold}));
    else if (c == "tknc") run_new(tknc_criterion(net, {.k = o.tknc_k}));
    else if (c == "kmnc") run_new(kmnc_criterion(bounds, o.kmnc_k));
    else if (c == "nbc") run_new(nbc_criterion(bounds));
    else if (c == "snac") run_new(snac_criterion(bounds));
    else if (c == "lsc") {
      surprise_coverage_options so;  // the spec's [0, 2000]
      if (lsc_reference) {            // the reference code's: lower = the smallest LSA of the test set
        try {
          so = reference_surprise_range(lsa_values(execution::par, net, *sm, TX), surprise_kind::lsa);
        } catch (const nnlens::error& e) {
          failed.emplace(c, concat("--lsc-range reference on ", o.test, ": ", e.what()));
          ++done;
          continue;
        }
      }
      measure_surprise(lsc_criterion(sm, so), run);
    } else if (c == "dsc") measure_surprise(dsc_criterion(sm), run);
    ++done;
  }
  if (bar) bar->finish();
  const double measure_s = std::chrono::duration<double>(clock_type::now() - t1).count();
  if (!root) return failed.empty() ? 0 : 1;  // MPI: rank 0 alone reports
  for (const auto& c : crit)  // each error on stderr too, as a failed command would print it
    if (const auto it = failed.find(c); it != failed.end()) std::cerr << "nnlens: " << it->second << "\n";
  const int status = failed.empty() ? 0 : 1;

  if (o.json) {
    json j;
    j["precision"] = precision_name(o.precision);
    j["criteria"] = json::object();
    for (const auto& [c, r] : results) {
      json e{{"coverage", r.percent}, {"covered", r.covered}, {"total", r.total}};
      if (const auto it = ranges.find(c); it != ranges.end()) {
        const auto& [so, rc] = it->second;
        e["range"] = json{{"lower", so.lower},       {"upper", so.upper},       {"buckets", so.buckets},
                          {"inputs", rc.inputs},     {"in_range", rc.in_range}, {"below", rc.below},
                          {"above", rc.above},       {"nan", rc.nan},           {"in_range_fraction", rc.in_range_fraction()}};
        if (c == "lsc") e["range"]["source"] = o.lsc_range;
      }
      if (c == "idc") {
        e["total_capped"] = p.idc_state->total_capped();  // |INCC| >= 2^64: "total" is SIZE_MAX, not the count
        e["incc"] = p.idc_state->incc_exact();            // |INCC| exactly, as a decimal string
        e["layer"] = p.idc_state->layer();
        e["neurons"] = p.idc_state->neurons();
        e["clusters"] = p.idc_state->centroids();
      }
      j["criteria"][c] = std::move(e);
    }
    for (const auto& [c, why] : failed) j["criteria"][c] = json{{"error", why}};
    j["seconds"] = json{{"prepare", prepare_s}, {"measure", measure_s}};
    std::cout << j.dump() << "\n";
    return status;
  }
  std::cout << o.model << ": coverage of " << test_n << " test input" << (test_n == 1 ? "" : "s") << " from " << o.test;
  if (train_n)
    std::cout << ", prepared on " << train_n << " training inputs from " << o.train;
  if (have_state) std::cout << (train_n ? " and " : ", ") << "state " << o.state;
  std::cout << ", " << o.precision << "\n";
  auto row = [](const std::string& c, const std::string& pct, const std::string& ct, const std::string& note) {
    char b[512];
    std::snprintf(b, sizeof b, "  %-9s %9s %21s  %s", c.c_str(), pct.c_str(), ct.c_str(), note.c_str());
    std::string l = b;
    l.erase(l.find_last_not_of(' ') + 1);
    std::cout << l << "\n";
  };
  row("criterion", "coverage", "covered / total", "");
  auto next = results.begin();  // the results, in the order of --criteria, the failed ones between them
  for (const auto& c : crit) {
    if (const auto it = failed.find(c); it != failed.end()) {
      row(c, "-", "-", "error: " + it->second);
      continue;
    }
    const coverage_result& r = (next++)->second;
    std::string note;
    std::string total = concat(r.total);
    if (c == "idc") {
      note = concat("layer ", layers[L].name, ", m ", p.idc_state->neurons().size(), ", |INCC| ", p.idc_state->incc_exact());
      total = p.idc_state->incc_exact();  // exact even past 2^64, where r.total is capped at SIZE_MAX
      if (p.idc_state->total_capped()) note += " (capped: coverage = covered / |INCC| in double)";
    }
    else if (c == "nc") note = concat("threshold ", fmt(o.nc_threshold, "%g"));
    else if (c == "kmnc") note = concat("k ", o.kmnc_k);
    else if (c == "tknc") note = concat("k ", o.tknc_k);
    if (const auto it = ranges.find(c); it != ranges.end()) {
      const auto& [so, rc] = it->second;
      note = concat(so.buckets, " buckets on [", fmt(so.lower, "%.6g"), ", ", fmt(so.upper, "%.6g"), "]",
                    c == "lsc" && lsc_reference ? " (reference: lower = min test LSA)" : "", ", layer ", layers[L].name, "; ",
                    // 2 decimals, never rounded up to 100.00 (nor down to 0.00) unless it is exact
                    fmt(rc.in_range == rc.inputs || rc.in_range == 0 ? 100 * rc.in_range_fraction()
                                                                      : std::clamp(100 * rc.in_range_fraction(), 0.01, 99.99),
                        "%.2f"),
                    "% of inputs in range (", rc.in_range, " in, ", rc.below, " below, ",
                    rc.above, " above", rc.nan ? concat(", ", rc.nan, " NaN") : std::string(), ")");
    }
    const std::string ct = concat(r.covered, " / ", total) + (c == "idc" && p.idc_state->total_capped() ? " (capped)" : "");
    row(c, fmt(r.percent, "%.2f%%"), ct, note);
  }
  std::cout << "  prepare " << format_duration(prepare_s) << ", measure " << format_duration(measure_s) << "\n";
  std::cout.flush();
  return status;
}

/// `nnlens coverage MODEL --train FILE --test FILE [--criteria ...]`: coverage of a test set.
void register_coverage(CLI::App& app, command_list& cmds) {
  auto [cmd, o] = add_analysis<coverage_cmd_options>(
      app, cmds, "coverage", "DeepImportance: IDC and the DeepGauge / surprise coverage criteria of a test set");
  cmd.add_option("--train", o.train,
                 "Training samples (CSV or IDX images, as `profile --data` reads); required unless --state holds the preparations");
  cmd.add_option("--train-labels", o.train_labels,
                 "Labels of the training samples (IDX labels or one integer per line; default: the IDX labels file beside IDX images)");
  cmd.add_option("--test", o.test, "Test samples whose coverage is measured (CSV or IDX images)")->required();
  cmd.add_option("--layer", o.layer,
                 "Subject layer of IDC and LSC/DSC: an index (negative from the end) or Type#k (default: the layer feeding the last weighted layer)");
  cmd.add_option("--m", o.m, "IDC: important neurons")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  cmd.add_option("--criteria", o.criteria, "Comma-separated criteria")->capture_default_str();
  cmd.add_flag("--json", o.json,
               "One JSON object: criteria{name: {coverage, covered, total[, total_capped, incc, layer, neurons, "
               "clusters][, range]} or {error} for a criterion that could not be computed}, seconds{prepare, measure}; "
               "the exit code is 1 when any criterion failed");
  cmd.add_option("--lsc-range", o.lsc_range,
                 "LSC's bucket range: spec ([0, 2000]) or reference (the SA reference code's: [min LSA of the test "
                 "set, 2000]); the share of test inputs inside it is always reported")
      ->capture_default_str();
  cmd.add_option("--state", o.state, "Load the preparations from this file if it exists, else prepare and save them there");
  cmd.add_option("--nc-threshold", o.nc_threshold, "NC: activation threshold after per-layer min-max scaling")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  cmd.add_option("--kmnc-k", o.kmnc_k, "KMNC: sections per neuron")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  cmd.add_option("--tknc-k", o.tknc_k, "TKNC: top neurons per layer")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  add_threads(cmd);
  add_no_progress(cmd, o.progress);
  add_model_options(cmd, o, precision::f32);
}

}  // namespace nnlens::tool
