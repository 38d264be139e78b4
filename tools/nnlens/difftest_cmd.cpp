// tools/nnlens/difftest_cmd.cpp -- `nnlens difftest` (see difftest_cmd.hpp).
#include "difftest_cmd.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include <nnlens/compress/magnitude.hpp>
#include <nnlens/compress/quantize.hpp>
#include <nnlens/core/error.hpp>
#include <nnlens/difftest/black_box.hpp>
#include <nnlens/difftest/dflare.hpp>
#include <nnlens/difftest/diffchaser.hpp>
#include <nnlens/difftest/process.hpp>

#include "model.hpp"
#ifdef NNLENS_TOOL_HAS_MPI  // ---- MPI (docs/scale.md): `mpirun -np N nnlens difftest`: the seeds sharded ----
#include <nnlens/mpi/difftest.hpp>

#include "mpi_world.hpp"
#endif

namespace nnlens::tool {

namespace {

using json = nlohmann::ordered_json;
namespace dt = nnlens::difftest;

dt::acceptance parse_acceptance(const std::string& s) {
  using a = dt::acceptance;
  return parse_word<a>({{"paper", a::paper}, {"reference", a::reference}, {"no-novelty", a::no_novelty}, {"no_novelty", a::no_novelty}},
                       s, "--acceptance");
}

dt::selection_rule parse_selection(const std::string& s) {
  using r = dt::selection_rule;  // last_accepted: an alias of last-accepted
  return parse_word<r>(
      {{"paper", r::paper}, {"reference", r::reference}, {"last-accepted", r::last_accepted}, {"uniform", r::uniform}, {"last_accepted", r::last_accepted}},
      s, "--selection");
}

dt::distance_measure parse_distance(const std::string& s) {
  using d = dt::distance_measure;
  return parse_word<d>({{"paper", d::top1_probability}, {"logit-margin", d::logit_margin}, {"logit_margin", d::logit_margin}}, s,
                       "--distance");
}

const char* distance_name(dt::distance_measure d) {
  return d == dt::distance_measure::logit_margin ? "logit-margin" : "paper";
}

double parse_ratio(const std::string& s, const std::string& what) {
  std::size_t used = 0;
  double r = -1;
  try {
    r = std::stod(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != s.size() || !(r >= 0 && r <= 1)) throw value_error(concat(what, ": expected a ratio in [0, 1], got '", s, "'"));
  return r;
}

/// The dimensions DFlare's image operators need: C x H x W from the model's input.
dt::image_shape image_of(const shape& in, const std::string& model) {
  if (in.rank == 3) return {in[0], in[1], in[2]};
  if (in.rank == 1) return {1, 1, in[0]};  // a vector: a 1 x n "image" (blurs act along it)
  throw shape_error(concat(model, ": input shape of rank ", in.rank, "; difftest needs C x H x W images or vectors"));
}

/// A black box over a quantised twin, reading raw pixels (scaled down by `scale`, in float as
/// wrap(net)'s normalisation does).
template <class T>
dt::black_box wrap_quantized(std::shared_ptr<const compress::quantized_network<basic_dynamic_network<T>>> q, shape in,
                             std::size_t classes, float scale, std::string name) {
  return dt::wrap(
      [q, in, scale](std::span<const float> x, std::size_t n, std::span<float> probs) {
        xt::xarray<T> a = xt::xarray<T>::from_shape(in.with_batch(n));
        for (std::size_t i = 0; i < a.size(); ++i) a.data()[i] = T(x[i] / scale);
        const xt::xarray<T> p = q->predict(a);
        for (std::size_t i = 0; i < p.size(); ++i) probs[i] = float(p.data()[i]);
      },
      in.size(), classes, std::move(name));
}

/// An exec: child sees its rows in the data layout (the user's order); the search's are internal.
dt::black_box in_data_layout(dt::black_box g, const input_layout& in) {
  if (in.data != io::data_layout::nhwc) return g;
  const std::size_t isz = g.input_size, classes = g.classes;
  std::string name = g.name;
  auto inner = std::make_shared<const dt::black_box>(std::move(g));
  return dt::wrap(
      [inner, in](std::span<const float> x, std::size_t n, std::span<float> probs) {
        xt::xarray<float> a = xt::xarray<float>::from_shape(in.net_input.with_batch(n));
        std::copy_n(x.data(), a.size(), a.data());
        const xt::xarray<float> d = to_data_layout<float>(a, in);
        (*inner)(std::span<const float>(d.data(), d.size()), n, probs);
      },
      isz, classes, std::move(name));
}

std::string status_name(dt::seed_status s) {
  switch (s) {
    case dt::seed_status::found: return "found";
    case dt::seed_status::not_found: return "not_found";
    case dt::seed_status::already_triggering: return "already_triggering";
    case dt::seed_status::failed: return "failed";
  }
  return "?";
}

}  // namespace

template <class T>
int difftest_impl(const difftest_cmd_options& o) {
  // -- options first: nothing is read for a bad option
  if (o.method != "dflare" && o.method != "diffchaser")
    throw value_error("--method: expected dflare or diffchaser, got '" + o.method + "'");
  const auto acc = parse_acceptance(o.acceptance);
  const auto sel = parse_selection(o.selection);
  const auto dist = parse_distance(o.distance);
  if (o.method != "dflare" && (o.skip_repeats || dist != dt::distance_measure::top1_probability))
    throw value_error("--distance logit-margin and --skip-repeats are options of --method dflare, not of " + o.method);
  if (o.budget_queries == 0 && !(o.timeout > 0))
    throw value_error("--budget-queries 0 and --timeout 0: a search needs a query or a time budget");
  if (!(o.timeout >= 0) || !std::isfinite(o.timeout)) throw value_error(concat("--timeout ", o.timeout, ": expected seconds >= 0"));
  if (!(o.pixel_scale > 0) || !std::isfinite(o.pixel_scale))
    throw value_error(concat("--pixel-scale ", o.pixel_scale, ": expected a positive number"));
  if (o.compressed.empty()) throw value_error("COMPRESSED: expected a model file, exec:COMMAND, int8, q8, prune:R or channel-prune:R");

#ifdef NNLENS_TOOL_HAS_MPI  // MPI: under mpirun with N > 1 ranks (before the thread pool starts)
  mpi_world world;
#endif
  const model<T> m = open_model<T>(o.model, o.layout);
  const basic_dynamic_network<T>& net = m.net;
  const shape in = net.input_shape();
  const std::size_t classes = net.output_shape().size();
  const auto img = image_of(in, o.model);
  const float scale = float(o.pixel_scale);
  const dt::normalization norm = dt::normalization::divide_by(scale);

  const xt::xarray<T> X = read_samples<T>(o.seeds, m.in);  // internal C x H x W order
  std::size_t n = X.shape()[0];
  if (n == 0) throw data_error(o.seeds + ": no seeds");
  if (o.limit && n > o.limit) n = o.limit;
  std::vector<float> seeds(n * in.size());
  for (std::size_t i = 0; i < seeds.size(); ++i) {
    const float v = float(X.data()[i] * T(scale));
    if (!(v >= 0.f && v <= 255.f))
      throw value_error(concat(o.seeds, ": seed ", i / in.size(), " element ", i % in.size(), " is ", X.data()[i], "; times --pixel-scale ",
                               o.pixel_scale, " it leaves the pixel range [0, 255]"));
    seeds[i] = v;
  }

  const dt::black_box f = dt::wrap(net, o.model, norm);
  dt::black_box g;
  const std::string& c = o.compressed;
  if (c.rfind("exec:", 0) == 0) {
    dt::process_options po;
    po.input_size = in.size(), po.classes = classes;
    if (o.timeout > 0) po.request_timeout = std::chrono::milliseconds(std::int64_t(std::min(o.timeout, 3600.0) * 1000) + 1000);
    g = in_data_layout(dt::process_black_box(c.substr(5), po, c), m.in);
  } else if (c == "int8" || c == "q8") {
    using Q = compress::quantized_network<basic_dynamic_network<T>>;
    std::shared_ptr<const Q> q;
    if (c == "q8") {
      q = std::make_shared<const Q>(compress::quantize_weights(net, compress::quantize_options::dflare_reference()));
    } else {
      const xt::xarray<T> cal = o.calibration.empty() ? X : read_samples<T>(o.calibration, m.in);
      q = std::make_shared<const Q>(compress::quantize(net, cal));
    }
    g = wrap_quantized<T>(q, in, classes, scale, c);
  } else if (c.rfind("prune:", 0) == 0) {
    g = dt::wrap(compress::magnitude_prune(net, parse_ratio(c.substr(6), "prune:R")), c, norm);
  } else if (c.rfind("channel-prune:", 0) == 0) {
    g = dt::wrap(compress::channel_prune(net, parse_ratio(c.substr(14), "channel-prune:R")), c, norm);
  } else {
    basic_dynamic_network<T> twin = load_model<T>(c).net;  // fed internal tensors: its declared layout is not used
    if (twin.input_shape() != in || twin.output_shape().size() != classes)
      throw shape_error(concat(c, ": input ", twin.input_shape().size(), " / classes ", twin.output_shape().size(), ", but ", o.model,
                               " has ", in.size(), " / ", classes));
    g = dt::wrap(std::move(twin), c, norm);
  }

  std::size_t first = 0, count = n;  // the seeds this process searches
  bool show = o.progress;
#ifdef NNLENS_TOOL_HAS_MPI  // MPI: this rank's block of the seeds (first_index keeps each seed's RNG stream)
  if (world) {
    const auto b = nnlens::mpi::shard(n, *world);
    first = b.begin, count = b.size(), show = show && world->rank() == 0;
  }
#endif
  const std::span<const float> mine(seeds.data() + first * in.size(), count * in.size());
  auto search_options = [&]<class Options>() {  // what DFlare and DiffChaser share
    Options d;
    d.image = img;
    d.max_queries = o.budget_queries;
    d.max_seconds = o.timeout;
    d.seed = o.seed;
    d.progress = show;
    d.first_index = first;
    return d;
  };
  dt::dflare_result r;
  if (count == 0) {
  } else if (o.method == "dflare") {
    auto d = search_options.template operator()<dt::dflare_options>();
    d.accept = acc;
    d.selection = sel;
    d.distance = dist;
    d.skip_repeats = o.skip_repeats;
    r = dt::dflare(execution::par, f, g, mine, count, d);
  } else {
    r = dt::diffchaser(execution::par, f, g, mine, count, search_options.template operator()<dt::diffchaser_options>());
  }
#ifdef NNLENS_TOOL_HAS_MPI  // MPI: merged in rank order (by seed index); rank 0 alone writes
  if (world) {
    r = *nnlens::mpi::reduce_merge(*world, count ? std::optional(r) : std::nullopt, {.broadcast = true});
    const auto s = r.summary();
    if (world->rank() != 0) return (s.not_found == 0 && s.failed == 0) ? 0 : 1;
  }
#endif

  // -- the triggering inputs, at the model's scale, in the data layout (a CSV row `nnlens run` reads
  //    with the same --layout); each value is the float the models saw, written so that it reads
  //    back exactly at either precision (%.9g round-trips a float, %.17g the double it converts to)
  std::vector<std::string> files(r.seeds.size());
  if (!o.out_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(o.out_dir, ec);
    if (ec) throw io_error(o.out_dir + ": cannot create (" + ec.message() + ")");
    for (std::size_t i = 0; i < r.seeds.size(); ++i) {
      const auto& s = r.seeds[i];
      if (!s.found() || s.input.empty()) continue;
      files[i] = (std::filesystem::path(o.out_dir) / concat("trigger-", s.index, ".csv")).string();
      std::ofstream os(files[i]);
      xt::xarray<T> row = xt::xarray<T>::from_shape(in.with_batch(1));
      for (std::size_t k = 0; k < s.input.size(); ++k) row.data()[k] = T(s.input[k] / scale);
      const xt::xarray<T> d = to_data_layout<T>(row, m.in);
      char b[40];
      for (std::size_t k = 0; k < d.size(); ++k) {
        std::snprintf(b, sizeof b, std::is_same_v<T, float> ? "%.9g" : "%.17g", double(d.data()[k]));
        os << (k ? "," : "") << b;
      }
      os << "\n";
      if (!os) throw io_error(files[i] + ": write failed");
    }
  }

  const auto sum = r.summary();
  if (o.json) {
    json j;
    j["precision"] = precision_name(o.precision);
    j["layout"] = io::layout_name(m.in.data);
    j["seeds"] = json::array();
    for (std::size_t i = 0; i < r.seeds.size(); ++i) {
      const auto& s = r.seeds[i];
      json e;
      e["seed"] = s.index;
      e["status"] = status_name(s.status);
      e["found"] = s.found();
      e["queries"] = s.queries;
      e["seconds"] = s.seconds;
      e["labels"] = json::array({s.label_f, s.label_g});
      if (!files[i].empty()) e["input"] = files[i];
      if (!s.error.empty()) e["error"] = s.error;
      j["seeds"].push_back(e);
    }
    json& js = j["summary"];
    js["method"] = o.method;
    if (o.method == "dflare") {  // the search's rules, the two beyond the spec included
      js["acceptance"] = o.acceptance, js["selection"] = o.selection;
      js["distance"] = distance_name(dist), js["skip_repeats"] = o.skip_repeats;
    }
    js.update(json{{"seeds", sum.seeds},
                    {"searched", sum.searched},     {"found", sum.found},
                    {"already_triggering", sum.already_triggering}, {"failed", sum.failed},
                    {"success_rate", sum.success_rate}, {"mean_queries", sum.mean_queries},
                    {"mean_seconds", sum.mean_seconds}, {"total_queries", sum.total_queries}});
    std::cout << j.dump(2) << "\n";
  } else {
    std::printf("%-6s %-18s %8s %10s %8s\n", "seed", "status", "queries", "seconds", "labels");
    for (std::size_t i = 0; i < r.seeds.size(); ++i) {
      const auto& s = r.seeds[i];
      std::printf("%-6zu %-18s %8zu %10.4f %3zu %3zu%s%s\n", s.index, status_name(s.status).c_str(), s.queries, s.seconds, s.label_f,
                  s.label_g, files[i].empty() ? "" : "  ", files[i].c_str());
      if (!s.error.empty()) std::printf("       error: %s\n", s.error.c_str());
    }
    std::string method = o.method;  // with DFlare's options beyond the spec, when asked
    if (o.method == "dflare" && dist != dt::distance_measure::top1_probability) method += " --distance logit-margin";
    if (o.method == "dflare" && o.skip_repeats) method += " --skip-repeats";
    std::printf("%s: %zu seeds, %zu searched, %zu found (success %.2f%%), %zu already differ, %zu failed; mean %.2f queries, %.4f s per triggering input; %s\n",
                method.c_str(), sum.seeds, sum.searched, sum.found, 100 * sum.success_rate, sum.already_triggering, sum.failed,
                sum.mean_queries, sum.mean_seconds, precision_name(o.precision));
  }
  return (sum.not_found == 0 && sum.failed == 0) ? 0 : 1;
}

/// `nnlens difftest ORIGINAL COMPRESSED --seeds FILE`: inputs on which the twin deviates.
void register_difftest(CLI::App& app, command_list& cmds) {
  auto [cmd, o] = add_command<difftest_cmd_options>(
      app, cmds, "difftest", "DFlare: inputs on which a compressed model deviates from its original (top-1 labels differ)",
      [](const difftest_cmd_options& opts) {
        return with_precision(opts.precision, [&]<class T>() { return difftest_impl<T>(opts); });
      });
  add_model_arg(cmd, o.model, "ORIGINAL");  // difftest's MODEL
  cmd.add_option("COMPRESSED", o.compressed,
                 "The twin: a model file, exec:COMMAND (a process speaking the nnlens-bb 1 pipe protocol), or made "
                 "from ORIGINAL: int8, q8, prune:R, channel-prune:R")
      ->required();
  cmd.add_option("--seeds", o.seeds, "Seed inputs (CSV rows or IDX images scaled to [0, 1], as `run` reads them)")
      ->required();
  cmd.add_option("--budget-queries", o.budget_queries, "Queries per seed (one query = both models once; 0: no limit)")
      ->capture_default_str();
  cmd.add_option("--timeout", o.timeout, "Seconds per seed (0: no limit)")->capture_default_str();
  cmd.add_option("--method", o.method, "dflare or diffchaser")->capture_default_str();
  cmd.add_option("--acceptance", o.acceptance, "DFlare's acceptance rule: paper, reference, no-novelty")
      ->capture_default_str();
  cmd.add_option("--selection", o.selection, "DFlare's operator selection: paper, reference, last-accepted, uniform")
      ->capture_default_str();
  cmd.add_option("--distance", o.distance,
                 "DFlare's D: paper (top-1 probabilities) or logit-margin (beyond the spec: the relative gap of the "
                 "two models' logit margins)")
      ->capture_default_str();
  cmd.add_flag("--skip-repeats", o.skip_repeats,
               "DFlare, beyond the spec: do not query a mutant equal to x_max or to one already queried since x_max "
               "changed");
  cmd.add_option("--seed", o.seed, "Random seed (each input seed gets its own stream)")->capture_default_str();
  cmd.add_option("--pixel-scale", o.pixel_scale,
                 "Seeds times this are raw pixels in [0, 255]; the models see pixels / this (1: models reading [0, "
                 "255])")
      ->capture_default_str();
  cmd.add_option("--calibration", o.calibration, "int8: activation calibration samples (default: the seeds)");
  cmd.add_option("--limit", o.limit, "Only the first N seeds (0: all)")->capture_default_str();
  cmd.add_option("--out-dir", o.out_dir,
                 "Write each triggering input as a CSV row (model scale) to DIR/trigger-SEED.csv");
  cmd.add_flag("--json", o.json,
               "One JSON object: seeds[{seed, status, found, queries, seconds, labels, input}], summary{...}");
  add_threads(cmd, nullptr, "Worker threads: seeds run in parallel (default: all cores)");
  add_no_progress(cmd, o.progress);
  add_model_options(cmd, o, precision::f32);
  cmd.get_option("--precision")
      ->description("Scalar type of ORIGINAL and of a model-file or on-the-fly twin: f32 or f64.  DFlare's search "
                    "stays float (the black boxes take float pixels and return float probabilities); int8 / q8 twins "
                    "compute their quantised layers in int8 with float32 scales at either precision");
  cmd.get_option("--layout")
      ->description("Layout of the rows of --seeds and --calibration: nchw or nhwc (default: ORIGINAL's declared "
                    "layout); the triggering inputs of --out-dir and the rows an exec: child reads are in it");
}

}  // namespace nnlens::tool
