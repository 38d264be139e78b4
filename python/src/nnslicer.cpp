// python/src/nnslicer.cpp -- NNSlicer: profiles (profile_rows in slabs, merged: Ctrl-C and progress
// between slabs, as `nnlens profile` does), slices (nnslicer_rows in slabs), their neuron masks and
// the sliced network (apply_slice).  The precompiled forms: the caller's rows, no copy.
#include <nnlens/core/progress.hpp>
#include <nnlens/core/thread_pool.hpp>
#include <nnlens/nnslicer.hpp>

#include "common.hpp"

namespace nnlens_python {
using namespace nnlens;  // NOLINT: the library's vocabulary (the module's own names are outside nnlens: pybind11's unqualified calls must not find nnlens's by ADL)

namespace {

/// f(b0, nb) on slabs of [0, n), merged in order; poll() and the progress bar between slabs.
template <class F>
auto by_slabs(std::size_t n, std::size_t slab, bool show, const char* what, F f) {
  using result = decltype(f(std::size_t(0), slab));
  std::optional<progress_bar> bar;
  if (show && n > slab) bar.emplace(what, n);
  std::optional<result> all;
  for (std::size_t b0 = 0; b0 < n; b0 += slab) {
    poll();
    const std::size_t nb = std::min(slab, n - b0);
    result part;
    try {
      part = f(b0, nb);
    } catch (const value_error& e) {
      throw value_error(cat("samples ", b0, "-", b0 + nb - 1, ": ", e.what()));
    }
    all = all ? merge(*all, part) : std::move(part);
    if (bar) bar->update(b0 + nb);
  }
  if (bar) bar->finish();
  return std::move(*all);
}

/// A profile (bound through this wrapper: pybind11's own unqualified calls must not see nnlens'
/// functions by ADL on nnlens::profile).
struct profile_handle {
  profile p;
};

granularity parse_granularity(const std::string& s) {
  if (s == "channel") return granularity::channel;
  if (s == "element") return granularity::element;
  throw value_error("granularity: expected 'channel' or 'element', got '" + s + "'");
}

profile_handle profile_py(const network& n, py::handle X, const std::string& grain, std::size_t batch,
                   std::optional<std::size_t> threads, bool progress) {
  n.require_plain("profile");
  if (batch == 0) throw value_error("batch: expected at least 1 sample per forward pass");
  profile_options po;
  po.grain = parse_granularity(grain);
  po.batch = batch;
  return n.visit([&](const auto& net) {
    using T = typename std::decay_t<decltype(net)>::scalar_type;
    const rows<T> x = input_rows<T>(n, X, "profile: X");
    if (x.n == 0) throw data_error("profile: X holds no samples");
    const std::size_t slab = batch * worker_threads() * 4;
    return profile_handle{long_call([&] {
      return with_policy(threads, [&](const auto& pol) {
        return by_slabs(x.n, slab, progress, "profile", [&](std::size_t b0, std::size_t nb) {
          return detail::profile_rows(pol, net, std::span<const T>(x.data + b0 * x.width, nb * x.width), nb, po);
        });
      });
    })};
  });
}

/// A slice: the CONTRIB table and the network it was made on.
struct slice_result {
  contrib_table table;
  network net;
  double theta = 0;
};

slice_result slice_py(const network& n, const profile_handle& ph, py::handle X, double theta, py::handle target, bool abs_sum,
                      const std::string& denominator, const std::string& cutoff, std::optional<std::size_t> threads,
                      bool progress) {
  n.require_plain("slice");
  const profile& prof = ph.p;
  slice_options so;
  if (!(theta >= 0) || !std::isfinite(theta)) throw value_error(cat("theta: expected a number >= 0, got ", theta));
  so.theta = theta;
  so.abs_sum = abs_sum;
  if (denominator == "sum")
    so.denominator = theta_denominator::sum;
  else if (denominator == "activation")
    so.denominator = theta_denominator::activation;
  else
    throw value_error("denominator: expected 'sum' or 'activation', got '" + denominator + "'");
  if (cutoff == "max")
    so.cutoff = theta_cutoff::max_index;
  else if (cutoff == "first")
    so.cutoff = theta_cutoff::first_violation;
  else
    throw value_error("cutoff: expected 'max' or 'first', got '" + cutoff + "'");
  return n.visit([&](const auto& net) {
    using T = typename std::decay_t<decltype(net)>::scalar_type;
    prof.check_compatible(net);  // data_error: a profile of another model
    const shape out = net.output_shape();
    const std::size_t nout = prof.grain == granularity::channel && out.rank == 3 ? out[0] : out.size();
    criterion cr = criterion::predicted();
    if (!target.is_none()) {
      const auto t = py::cast<long long>(target);
      if (t < 0 || std::size_t(t) >= nout)
        throw value_error(cat("target ", t, ": out of range, the model has ", nout, " outputs (classes 0-", nout - 1, ")"));
      cr = criterion::target(std::size_t(t));
    }
    const rows<T> x = input_rows<T>(n, X, "slice: samples");
    if (x.n == 0) throw data_error("slice: no samples (the criterion needs at least one)");
    const std::size_t slab = worker_threads() * 256;
    slice_result r;
    r.table = long_call([&] {
      return with_policy(threads, [&](const auto& pol) {
        return by_slabs(x.n, slab, progress, "slice", [&](std::size_t b0, std::size_t nb) {
          return detail::nnslicer_rows(pol, net, prof, std::span<const T>(x.data + b0 * x.width, nb * x.width), nb, cr, so);
        });
      });
    });
    r.net = n;
    r.theta = theta;
    return r;
  });
}

/// Tensor a's values as a numpy int64 array; the input tensor at element granularity in the data layout.
py::array tensor_values(const slice_result& s, std::size_t a, const std::vector<std::int64_t>& v) {
  const network& n = s.net;
  if (a == 0 && v.size() == n.input_shape().size() && n.input_shape().rank > 1 && s.table.grain == granularity::element)
    return per_input(n, std::vector<std::int64_t>(v), 1, false);
  return to_numpy(std::vector<std::int64_t>(v));
}

network sliced_network(const slice_result& s, double keep, bool zero_bias) {
  if (!(keep > 0 && keep <= 1)) throw value_error(cat("keep: expected a fraction in (0, 1], got ", keep));
  const dead_neurons dn = zero_bias ? dead_neurons::zero_bias : dead_neurons::keep_bias;
  return s.net.visit([&](const auto& net) {
    using T = typename std::decay_t<decltype(net)>::scalar_type;
    return make_network<T>(apply_slice(net, s.table, keep, dn), s.net.in, s.net.source, cat("slice theta ", s.theta));
  });
}

}  // namespace

void register_nnslicer(py::module_& m) {
  py::class_<profile_handle>(m, "Profile", "NNSlicer's profile: the mean activation of every neuron over a dataset.")
      .def_property_readonly("granularity", [](const profile_handle& h) { return std::string(granularity_name(h.p.grain)); })
      .def_property_readonly("samples", [](const profile_handle& h) { return h.p.samples; })
      .def_property_readonly("fingerprint", [](const profile_handle& h) { return h.p.fingerprint; })
      .def_property_readonly("names", [](const profile_handle& h) { return h.p.names; })
      .def("mean", [](const profile_handle& h, std::size_t a) {
        if (a >= h.p.sums.size()) throw value_error(cat("Profile.mean: tensor ", a, " of ", h.p.sums.size()));
        return to_numpy(h.p.mean(a));
      }, py::arg("tensor"), "The neuron means of tensor `tensor` (0: the input).")
      .def_property_readonly("means", [](const profile_handle& h) {
        py::dict d;
        for (std::size_t a = 0; a < h.p.sums.size(); ++a) d[py::str(h.p.names[a])] = to_numpy(h.p.mean(a));
        return d;
      })
      .def("save", [](const profile_handle& h, const std::filesystem::path& path) { save_profile(path, h.p); }, py::arg("path"),
           "Writes the profile as text (every double round-trips); nnlens.load_profile reads it.")
      .def("merge", [](const profile_handle& a, const profile_handle& b) { return profile_handle{merge(a.p, b.p)}; }, py::arg("other"),
           "The profile of both datasets (same model and granularity).")
      .def("__repr__", [](const profile_handle& h) {
        std::size_t neurons = 0;
        for (const auto& s : h.p.sums) neurons += s.size();
        return cat("<nnlens.Profile: ", h.p.samples, " samples, ", h.p.sums.size(), " tensors, ", neurons, " neurons (",
                      granularity_name(h.p.grain), " granularity)>");
      });
  m.def("load_profile", [](const std::filesystem::path& path) { return profile_handle{load_profile(path)}; }, py::arg("path"));
  m.def("profile", &profile_py, py::arg("net"), py::arg("X"), py::arg("granularity"), py::arg("batch"), py::arg("threads"),
        py::arg("progress"));

  py::class_<slice_result>(m, "Slice", "NNSlicer's slice: CONTRIB of every neuron and synapse, summed over the samples.")
      .def_property_readonly("samples", [](const slice_result& s) { return s.table.samples; })
      .def_property_readonly("theta", [](const slice_result& s) { return s.theta; })
      .def_property_readonly("granularity", [](const slice_result& s) { return std::string(granularity_name(s.table.grain)); })
      .def_property_readonly("tensor_names", [](const slice_result& s) { return s.table.tensor_names; })
      .def_property_readonly("node_names", [](const slice_result& s) { return s.table.node_names; })
      .def_property_readonly("contrib", [](const slice_result& s) {
        py::dict d;
        for (std::size_t a = 0; a < s.table.neurons.size(); ++a)
          d[py::str(s.table.tensor_names[a])] = tensor_values(s, a, s.table.neurons[a]);
        return d;
      }, "CONTRIB per tensor (name -> int64 array; 'input' first).")
      .def_property_readonly("masks", [](const slice_result& s) {
        py::dict d;
        for (std::size_t a = 0; a < s.table.neurons.size(); ++a) {
          py::array v = tensor_values(s, a, s.table.neurons[a]);
          d[py::str(s.table.tensor_names[a])] = v.attr("__ne__")(0);
        }
        return d;
      }, "Per tensor, the neurons in the slice (CONTRIB != 0) as a bool array.")
      .def_property_readonly("synapse_contrib", [](const slice_result& s) {
        py::dict d;
        for (std::size_t k = 0; k < s.table.synapses.size(); ++k)
          if (!s.table.synapses[k].empty()) d[py::str(s.table.node_names[k])] = to_numpy(std::vector<std::int64_t>(s.table.synapses[k]));
        return d;
      }, "CONTRIB of the synapses (node name -> int64 array over its first parameter tensor).")
      .def_property_readonly("sizes", [](const slice_result& s) {
        py::list out;
        for (const auto& z : slice_sizes(s.table)) {
          py::dict d;
          d["name"] = z.name;
          d["neurons"] = z.neurons;
          d["neurons_in_slice"] = z.neurons_in_slice;
          d["synapses"] = z.synapses;
          d["synapses_in_slice"] = z.synapses_in_slice;
          out.append(d);
        }
        return out;
      })
      .def("network", &sliced_network, py::arg("keep") = 1.0, py::arg("zero_bias") = true,
           "The sliced network: weights outside the slice (or, keep < 1, all but the fraction keep of largest "
           "|CONTRIB| per layer) set to 0.")
      .def("__repr__", [](const slice_result& s) {
        std::size_t syn = 0, in = 0;
        for (const auto& z : slice_sizes(s.table)) syn += z.synapses, in += z.synapses_in_slice;
        return cat("<nnlens.Slice: ", s.table.samples, " samples, theta ", s.theta, ", ", in, " / ", syn, " synapses>");
      });
  m.def("slice", &slice_py, py::arg("net"), py::arg("profile"), py::arg("samples"), py::arg("theta"), py::arg("target"),
        py::arg("abs_sum"), py::arg("denominator"), py::arg("cutoff"), py::arg("threads"), py::arg("progress"));
}

}  // namespace nnlens_python
