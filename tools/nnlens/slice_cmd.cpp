// tools/nnlens/slice_cmd.cpp -- `nnlens slice` (see slice_cmd.hpp).
#include "slice_cmd.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include <nnlens/core/error.hpp>
#include <nnlens/core/thread_pool.hpp>
#include <nnlens/nnslicer.hpp>

#include "format.hpp"
#include "maintenance_common.hpp"  // maint::other_precision
#include "model.hpp"
#include "nnslicer_common.hpp"
#ifdef NNLENS_TOOL_HAS_MPI  // ---- MPI (docs/scale.md): `mpirun -np N nnlens slice` ----
#include <nnlens/mpi/slicing.hpp>

#include "mpi_world.hpp"
#endif

namespace nnlens::tool {

namespace {

using json = nlohmann::ordered_json;  // keys in the documented order

/// The CONTRIB of the input tensor's neurons in the data layout: at element granularity the values
/// are per input element (internally NCHW); per-channel values (channel granularity) have no layout.
std::vector<std::int64_t> input_contrib_in_data_layout(const std::vector<std::int64_t>& v, const input_layout& in) {
  if (v.size() != in.net_input.size() || v.size() < 2) return v;
  std::vector<std::size_t> sh{1};
  for (std::size_t d = 0; d < in.net_input.rank; ++d) sh.push_back(in.net_input[d]);
  xt::xarray<double> x = xt::xarray<double>::from_shape(sh);  // counts of samples: exact in double
  std::copy(v.begin(), v.end(), x.begin());
  const xt::xarray<double> y = to_data_layout<double>(x, in);
  std::vector<std::int64_t> r(y.size());
  std::transform(y.begin(), y.end(), r.begin(), [](double d) { return std::int64_t(d); });
  return r;
}

}  // namespace

template <class T>
int run_as(const slice_cmd_options& o) {
  slice_options so;
  if (!(o.theta >= 0) || !std::isfinite(o.theta)) throw value_error(concat("--theta: expected a number >= 0, got ", o.theta));
  so.theta = o.theta;
  so.abs_sum = o.abs_sum;
  so.denominator = o.denominator;
  so.cutoff = o.cutoff;
#ifdef NNLENS_TOOL_HAS_MPI  // ---- MPI: under mpirun with N > 1 ranks, each slices a block of samples ----
  mpi_world world;
#endif

  const model<T> m = open_model<T>(o.model, o.layout);
  const basic_dynamic_network<T>& net = m.net;
  const shape in = net.input_shape();
  const profile prof = load_profile(o.profile);  // io_error FILE:LINE when malformed
  try {
    prof.check_compatible(net);
  } catch (const data_error& e) {
    std::string_view w = e.what();
    if (w.rfind("profile: ", 0) == 0) w.remove_prefix(9);
    const std::string other = maint::other_precision<T>(prof.fingerprint, o.model, o.layout);
    if (!other.empty())
      throw data_error(concat(o.profile, ": a profile of ", o.model, " made with --precision ", other, "; slice with --precision ",
                              other, ", or profile again with --precision ", o.precision));
    throw data_error(concat(o.profile, ": not a profile of ", o.model, ": ", w));
  }
  const shape out = net.output_shape();
  const std::size_t nout = prof.grain == granularity::channel && out.rank == 3 ? out[0] : out.size();
  if (o.target && *o.target >= nout)
    throw value_error(concat("--target ", *o.target, ": out of range, the model has ", nout, " outputs (classes 0-",
                             nout - 1, ")"));
  const xt::xarray<T> X = read_samples<T>(o.samples, m.in);
  const std::size_t n = X.shape()[0];
  const criterion cr = o.target ? criterion::target(*o.target) : criterion::predicted();

  const std::size_t slab = worker_threads() * 256;
  const auto t0 = std::chrono::steady_clock::now();
  auto slice_rows = [&](std::size_t b, std::size_t e, bool show) {  // samples [b, e)
    return by_slabs(b, e, slab, show && o.progress, "slice", o.samples, [&](std::size_t b0, std::size_t nb) {
      return nnslicer(execution::par, net, prof, rows_of(X, in, b0, nb), cr, so);
    });
  };
  std::optional<contrib_table> tab;
#ifdef NNLENS_TOOL_HAS_MPI
  if (world) {  // integer tables, merged in rank order on rank 0 (exactly one process's), which alone writes
    tab = nnlens::mpi::map_reduce(*world, n, [&](nnlens::mpi::range r) { return slice_rows(r.begin, r.end, world->rank() == 0); });
    if (world->rank() != 0) return 0;
  }
#endif
  if (!tab) tab = slice_rows(0, n, true);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto sizes = slice_sizes(*tab);

  if (!o.synapses.empty()) {
    json s = json::object();
    for (std::size_t k = 0; k < tab->synapses.size(); ++k)
      if (!tab->synapses[k].empty()) s[tab->node_names[k]] = tab->synapses[k];
    std::ofstream f(o.synapses, std::ios::trunc);
    if (!f) throw io_error(o.synapses + ": cannot open for writing");
    f << s.dump() << "\n";
    f.flush();
    if (!f) throw io_error(o.synapses + ": write error");
  }

  if (o.json) {
    json j;
    j["layers"] = json::array();
    for (const auto& s : sizes)
      j["layers"].push_back(json{{"name", s.name},
                                 {"neurons", s.neurons},
                                 {"neurons_in_slice", s.neurons_in_slice},
                                 {"synapses", s.synapses},
                                 {"synapses_in_slice", s.synapses_in_slice}});
    j["precision"] = precision_name(o.precision);
    j["layout"] = io::layout_name(m.in.data);
    j["contrib"] = json::object();
    for (std::size_t a = 0; a < tab->neurons.size(); ++a)  // tensor 0: the input, in the data layout
      j["contrib"][tab->tensor_names[a]] = a == 0 ? input_contrib_in_data_layout(tab->neurons[a], m.in) : tab->neurons[a];
    j["seconds"] = seconds;
    std::cout << j.dump() << "\n";
    return 0;
  }
  std::cout << o.model << ": slice of " << n << " sample" << (n == 1 ? "" : "s") << " from " << o.samples << " ("
            << (o.target ? concat("class ", *o.target) : std::string("each sample's predicted class")) << "), theta "
            << fmt(o.theta, "%g") << ", " << granularity_name(prof.grain) << " granularity, " << o.precision << ", " << fmt(seconds)
            << " s\n";
  auto pct = [](std::size_t a, std::size_t b) { return b ? fmt(100.0 * double(a) / double(b), "%.1f%%") : std::string(); };
  auto row = [](const std::string& name, const std::string& nr, const std::string& np, const std::string& sr,
                const std::string& sp) {
    char b[512];
    std::snprintf(b, sizeof b, "  %-22s %19s %7s %21s %7s", name.c_str(), nr.c_str(), np.c_str(), sr.c_str(), sp.c_str());
    std::string l = b;
    l.erase(l.find_last_not_of(' ') + 1);
    std::cout << l << "\n";
  };
  row("layer", "neurons in slice", "", "synapses in slice", "");
  std::size_t syn = 0, syn_in = 0;
  for (const auto& s : sizes) {
    row(s.name, concat(s.neurons_in_slice, " / ", s.neurons), pct(s.neurons_in_slice, s.neurons),
        s.synapses ? concat(s.synapses_in_slice, " / ", s.synapses) : std::string("-"), pct(s.synapses_in_slice, s.synapses));
    syn += s.synapses;
    syn_in += s.synapses_in_slice;
  }
  row("total", "", "", concat(syn_in, " / ", syn), pct(syn_in, syn));
  std::cout.flush();
  return 0;
}


/// `nnlens slice MODEL --profile PROFILE --samples FILE`: NNSlicer's slice of the samples' classes.
void register_slice(CLI::App& app, command_list& cmds) {
  auto [cmd, o] = add_analysis<slice_cmd_options>(
      app, cmds, "slice", "NNSlicer: the slice (CONTRIB of every neuron and synapse) of samples' classes");
  cmd.add_option("--profile,-p", o.profile, "A profile of MODEL (nnlens profile); its granularity is used")->required();
  cmd.add_option("--samples,-s", o.samples, "The criterion's samples: CSV or IDX images, as `profile --data` reads")
      ->required();
  cmd.add_option("--target,-t", o.target, "Slice this output class (default: each sample's predicted class)");
  cmd.add_option("--theta", o.theta, "The filter threshold θ")->capture_default_str()->check(CLI::NonNegativeNumber);
  cmd.add_flag("--json", o.json,
               "One JSON object: layers[{name, neurons, neurons_in_slice, synapses, synapses_in_slice}], "
               "contrib{tensor: [...]}, seconds");
  cmd.add_option("--synapses", o.synapses, "Write the synapses' CONTRIB as JSON {node: [...]} to this file");
  cmd.add_flag("--abs-sum", o.abs_sum, "Sum |CONTRIB| over the samples instead of the signed sum");
  add_enum(cmd, "--denominator", o.denominator,
           {{"sum", theta_denominator::sum}, {"activation", theta_denominator::activation}},
           "θ filter's denominator: sum of the items or the activation");
  add_enum(cmd, "--cutoff", o.cutoff, {{"max", theta_cutoff::max_index}, {"first", theta_cutoff::first_violation}},
           "θ filter's cut-off: the largest index within θ, or the first violation");
  add_threads(cmd);
  add_no_progress(cmd, o.progress);
  add_model_options(cmd, o, precision::f32);
}

}  // namespace nnlens::tool
