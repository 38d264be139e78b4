// tools/nnlens/ig_cmd.cpp -- `nnlens ig` (see ig_cmd.hpp).
#include "ig_cmd.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <iostream>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <nnlens/core/error.hpp>
#include <nnlens/core/progress.hpp>
#include <nnlens/exactline/ig.hpp>
#include <nnlens/exactline/ig_stream.hpp>
#include <nnlens/network/forward.hpp>

#ifdef NNLENS_TOOL_HAS_MPI  // ---- MPI (docs/scale.md): `mpirun -np N nnlens ig` ----
#include <nnlens/mpi/communicator.hpp>
#include <nnlens/mpi/reduce.hpp>

#include "mpi_world.hpp"
#endif
#include "exactline_common.hpp"
#include "format.hpp"
#include "model.hpp"

namespace nnlens::tool {

namespace {

using json = nlohmann::ordered_json;  // keys in the documented order

/// A per-input-element vector in the internal order -> the data layout's order.
template <class T>
std::vector<T> in_data_order(const std::vector<T>& v, const input_layout& in) {
  xt::xarray<T> x = xt::adapt(v, std::vector<std::size_t>{1, v.size()});
  const xt::xarray<T> y = to_data_layout<T>(x, in);
  return std::vector<T>(y.begin(), y.end());
}

}  // namespace

template <class T>
int run_as(const ig_options& o) {
  const precision prec = o.precision;
  if (o.m == 0) throw value_error("--m: expected at least 1 partition");
#ifdef NNLENS_TOOL_HAS_MPI  // under mpirun with N > 1 ranks (before the thread pool starts)
  mpi_world world;
#endif
  const model<T> md = load_model<T>(o.model, o.layout);
  const auto& net = md.net;
  const csv_rows<T> X = read_rows<T>(o.input, md.in, o.header), B = read_rows<T>(o.baseline, md.in, o.header);
  if (B.rows.size() != 1 && B.rows.size() != X.rows.size())
    throw shape_error(concat(o.baseline, " has ", B.rows.size(), " samples; expected 1 (one baseline for every input)",
                             X.rows.size() > 1 ? concat(" or ", X.rows.size(), " (one per line of ", o.input, ")")
                                               : std::string()));
  const std::size_t dout = net.output_shape().size();
  if (o.output_index && *o.output_index >= dout)
    throw value_error(concat("--output-index ", *o.output_index, ": the model has ", dout, " outputs"));
  const xt::xarray<T> y = forward(net, X.x);  // [N, out...]: the default output index
  constexpr std::array<riemann_rule, 3> rules{riemann_rule::left, riemann_rule::right, riemann_rule::trapezoid};

  bool show = o.progress;  // a progress bar: rank 0's alone under MPI
#ifdef NNLENS_TOOL_HAS_MPI
  if (world && world->rank() != 0) show = false;
#endif
  // one input: its JSON object and text block, or its error (each rank its block under MPI)
  struct input_out {
    std::string json, text, error;
  };
  auto one = [&](std::size_t i) -> input_out {
    input_out out;
    const std::size_t bi = B.rows.size() == 1 ? 0 : i;
    const std::string where = concat(X.where(i), " (baseline ", B.where(bi), ")");
    std::size_t k = 0;
    if (o.output_index) {
      k = *o.output_index;
    } else {
      const T* yi = y.data() + i * dout;
      k = std::size_t(std::max_element(yi, yi + dout) - yi);
    }
    // streamed (exact_ig_stream): the user's m for each rule and, where they fit in half the budget,
    // every m of the samples-to-reach protocol (1 .. max_partitions + run - 1 partitions)
    constexpr std::size_t max_partitions = 1006, run = 5, protocol = max_partitions + run - 1;
    const std::size_t di = X.rows[i].size();
    const bool with_protocol = o.samples_to_reach && (o.max_memory_mib == 0 ||
                                                      3 * protocol * di * sizeof(T) <= (o.max_memory_mib << 20) / 2);
    std::vector<riemann_sum> sums;
    for (riemann_rule rule : rules) sums.push_back({rule, o.m});
    if (with_protocol)
      for (riemann_rule rule : rules)
        for (std::size_t mm = 1; mm <= protocol; ++mm) sums.push_back({rule, mm});
    line_options lo;
    lo.max_memory = o.max_memory_mib << 20;
    std::optional<progress_bar> bar;
    if (show) bar.emplace(concat("ig ", i + 1, "/", X.rows.size()), 1000);
    std::size_t rows = 0;
    ig_summary<T> ig;
    try {
      ig = exact_ig_stream<T>(execution::par, net, X.rows[i], B.rows[bi], k, lo, sums, [&](double t, std::span<const T>) {
        ++rows;
        if (bar) bar->update(std::size_t(1000 * t), [&] { return concat(rows, " rows"); });
      });
    } catch (const error& e) {
      out.error = concat(where, ": ", e.what());
      return out;
    }
    if (bar && bar->redraws() > 0) bar->finish(concat(ig.pieces, " pieces"));
    const std::vector<T> exact = in_data_order(ig.attributions, md.in);  // per input element, data layout
    json r;
    r["output_index"] = k;
    r["exact"] = exact;
    r["pieces"] = ig.pieces;
    r["delta"] = ig.delta;
    r["riemann"] = json::object();
    r["samples_for_5pct"] = json::object();
    std::array<std::vector<T>, 3> approx;
    std::array<double, 3> rel{};
    std::array<std::optional<std::size_t>, 3> need;
    for (std::size_t q = 0; q < rules.size(); ++q) {
      const std::string name(rule_name(rules[q]));
      approx[q] = ig.riemann[q];
      rel[q] = ig_relative_error(approx[q], ig.attributions);
      if (with_protocol)
        need[q] = samples_to_reach_with(
            ig.attributions, [&](std::size_t mm) -> const std::vector<T>& { return ig.riemann[3 + q * protocol + (mm - 1)]; },
            rules[q], 0.05, max_partitions, run);
      approx[q] = in_data_order(approx[q], md.in);
      r["riemann"][name] = json{{"m", o.m}, {"ig", approx[q]}, {"rel_error", rel[q]}};
      r["samples_for_5pct"][name] = need[q] ? json(*need[q]) : json(nullptr);
    }
    if (!with_protocol)
      r["samples_for_5pct_skipped"] = o.samples_to_reach ? concat("3 x ", protocol, " sums of ", di,
                                                                  " attributions do not fit in half of --max-memory")
                                                         : std::string("--no-samples-to-reach");
    out.json = r.dump();
    if (o.json) return out;
    std::string& t = out.text;
    auto printf_to = [&t](const char* f, auto... v) {
      const int len = std::snprintf(nullptr, 0, f, v...);
      std::vector<char> buf(std::size_t(std::max(len, 0)) + 1);
      std::snprintf(buf.data(), buf.size(), f, v...);
      t += buf.data();
    };
    t += concat(where, ": output ", k, ", ", ig.pieces, " pieces, delta = F(x) - F(x') = ", fmt(double(ig.delta), "%.9g"),
                ", sum of exact IG = ", fmt(double(ig.sum), "%.9g"), " (", precision_name(prec), ")\n");
    printf_to("  %-9s %-16s %-16s %-16s %s\n", "feature", "exact", concat("left m=", o.m).c_str(),
                concat("right m=", o.m).c_str(), concat("trapezoid m=", o.m).c_str());
    for (std::size_t f = 0; f < exact.size(); ++f)
      printf_to("  %-9zu %-16s %-16s %-16s %s\n", f, fmt(double(exact[f]), "%.9g").c_str(),
                  fmt(double(approx[0][f]), "%.9g").c_str(), fmt(double(approx[1][f]), "%.9g").c_str(),
                  fmt(double(approx[2][f]), "%.9g").c_str());
    printf_to("  %-9s %-16s %-16s %-16s %s\n", "rel_error", "", fmt(rel[0], "%.4g").c_str(), fmt(rel[1], "%.4g").c_str(),
                fmt(rel[2], "%.4g").c_str());
    auto nn = [](const std::optional<std::size_t>& v) { return v ? std::to_string(*v) : std::string("> 1006 partitions"); };
    if (with_protocol)
      printf_to("  samples for 5%% error: left %s, right %s, trapezoid %s\n", nn(need[0]).c_str(), nn(need[1]).c_str(),
                  nn(need[2]).c_str());
    else if (o.samples_to_reach)
      printf_to("  samples for 5%% error: not computed (3 x %zu sums of %zu attributions pass half of --max-memory)\n",
                  protocol, di);
    return out;
  };
  std::vector<input_out> outs;
  std::size_t in_lo = 0, in_hi = X.rows.size();
#ifdef NNLENS_TOOL_HAS_MPI
  if (world) {  // each rank its block of the inputs; rank 0 prints them all in order
    const auto r = nnlens::mpi::shard(X.rows.size(), *world);
    in_lo = r.begin, in_hi = r.end;
  }
#endif
  for (std::size_t i = in_lo; i < in_hi; ++i) {
    outs.push_back(one(i));
    if (!outs.back().error.empty()) break;  // as one process: nothing after the first failure
  }
#ifdef NNLENS_TOOL_HAS_MPI
  if (world) {
    std::vector<std::string> js, ts, es;
    for (auto& x : outs) js.push_back(std::move(x.json)), ts.push_back(std::move(x.text)), es.push_back(std::move(x.error));
    auto aj = nnlens::mpi::gather(*world, js), at = nnlens::mpi::gather(*world, ts), ae = nnlens::mpi::gather(*world, es);
    if (world->rank() != 0) return 0;
    outs.clear();
    for (std::size_t i = 0; i < aj->size(); ++i) outs.push_back({std::move((*aj)[i]), std::move((*at)[i]), std::move((*ae)[i])});
  }
#endif
  json all = json::array();
  for (std::size_t i = 0; i < outs.size(); ++i) {
    if (!outs[i].error.empty()) throw value_error(outs[i].error);
    if (o.json) {
      all.push_back(json::parse(outs[i].json));
      continue;
    }
    if (i) std::cout << "\n";
    std::cout << outs[i].text << std::flush;
  }
  if (o.json) {
    if (all.size() == 1) {
      all[0]["precision"] = precision_name(prec);
      all[0]["layout"] = io::layout_name(md.in.data);
      std::cout << all[0].dump() << "\n";
    } else {
      json j;
      j["precision"] = precision_name(prec);
      j["layout"] = io::layout_name(md.in.data);
      j["inputs"] = std::move(all);
      std::cout << j.dump() << "\n";
    }
  }
  std::cout.flush();
  return 0;
}


/// `nnlens ig MODEL --input X.csv --baseline B.csv`: exact integrated gradients and Riemann sums.
void register_ig(CLI::App& app, command_list& cmds) {
  auto [cmd, o] = add_analysis<ig_options>(
      app, cmds, "ig", "Exact integrated gradients, and the Riemann sums' errors against them");
  cmd.add_option("--input,-i", o.input, "CSV file: the inputs x, one per line in the model's declared layout")->required();
  cmd.add_option("--baseline,-b", o.baseline, "CSV file: the baselines x' (one line per input, or one for all)")->required();
  cmd.add_option("--output-index,-k", o.output_index, "The output k (default: the argmax at x)");
  cmd.add_flag("--json", o.json,
               "JSON: {output_index, exact, pieces, delta, riemann, samples_for_5pct} per input (attributions in "
               "the data layout), precision, layout");
  cmd.add_option("--m", o.m, "Partitions of the Riemann sums")->capture_default_str()->check(CLI::Range(1, 1 << 24));
  cmd.add_option("--max-memory", o.max_memory_mib,
                 "MiB of values in flight: the line runs on sub-segments beyond it and its pieces are not kept (the "
                 "attributions accumulate as they come); the samples-to-reach sums are skipped where they pass half "
                 "of it; 0: no bound")
      ->capture_default_str();
  cmd.add_flag_callback("--no-samples-to-reach", [&o] { o.samples_to_reach = false; },
                        "Skip the samples-to-reach-5% protocol (3 x 1010 sums accumulated beside the exact IG)");
  add_threads(cmd);
  add_no_progress(cmd, o.progress);
  add_model_options(cmd, o, precision::f64);
  add_header_options(cmd, o.header);
}

}  // namespace nnlens::tool
