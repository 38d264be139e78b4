// python/src/neusemslice.cpp -- NeuSemSlice: the critical neurons of each class (semslice), the
// mask as bool arrays per unit, its parameter accounting, and the masked network
// (apply_neuron_mask), as `nnlens semslice` makes them (tools/nnlens/semslice_cmd.cpp).
#include <fstream>

#include <nnlens/neusemslice/neuron_mask.hpp>
#include <nnlens/neusemslice/semslice.hpp>

#include "common.hpp"

namespace nnlens_python {
using namespace nnlens;  // NOLINT: the library's vocabulary (the module's own names are outside nnlens: pybind11's unqualified calls must not find nnlens's by ADL)

namespace {

struct semslice_py_result {
  semslice_result r;
  network net;
};

metric parse_metric(const std::string& s) {
  if (s == "avg") return metric::avg;
  if (s == "var") return metric::var;
  if (s == "ens") return metric::ens;
  if (s == "taylor") return metric::taylor;
  if (s == "deeplift") return metric::deeplift;
  throw value_error("metric: expected 'avg', 'var', 'ens', 'taylor' or 'deeplift', got '" + s + "'");
}

similarity parse_similarity(const std::string& s) {
  if (s == "cka" || s == "linear_cka") return similarity::linear_cka;
  if (s == "uncentered") return similarity::uncentered;
  if (s == "unbiased") return similarity::unbiased;
  throw value_error("similarity: expected 'cka', 'uncentered' or 'unbiased', got '" + s + "'");
}

semslice_py_result semslice_py(const network& n, py::handle X, py::handle Y, const std::string& met, double theta,
                               const std::string& sim, std::size_t step, std::size_t samples, std::uint64_t seed,
                               std::optional<std::vector<std::size_t>> categories, std::size_t metric_samples,
                               std::optional<std::size_t> threads) {
  n.require_plain("semslice");
  semslice_options so;
  so.metric = parse_metric(met);
  if (!(theta > 0 && theta <= 1)) throw value_error(cat("theta ", theta, ": expected 0 < theta <= 1"));
  so.theta = theta;
  so.similarity = parse_similarity(sim);
  so.step = step;
  if (samples == 0) throw value_error("samples: expected at least 1 sample per category");
  so.samples_per_category = samples;
  so.seed = seed;
  so.metric_samples = metric_samples;
  if (categories) so.categories = *categories;
  semslice_py_result out;
  out.net = n;
  n.visit([&](const auto& net) {
    using T = typename std::decay_t<decltype(net)>::scalar_type;
    const rows<T> x = input_rows<T>(n, X, "semslice: X");
    if (x.n == 0) throw data_error("semslice: X holds no samples");
    const std::size_t classes = net.output_shape().size();
    const auto y = labels_of(Y, x.n, classes, "semslice: y");
    {
      std::vector<std::size_t> count(classes, 0);
      for (auto c : y) ++count[c];
      std::vector<std::size_t> cs = so.categories;
      if (cs.empty())
        for (std::size_t c = 0; c < classes; ++c) cs.push_back(c);
      for (auto c : cs)
        if (c < classes && count[c] == 0)
          throw data_error(cat("semslice: category ", c, " has no samples in y",
                                  categories ? "" : " (pass categories= to slice the others)"));
    }
    const xt::xarray<T> xa = x.copy(net.input_shape());
    out.r = long_call([&] {
      return with_policy(threads, [&](const auto& pol) { return semslice(pol, net, xa, y, so); });
    });
  });
  return out;
}

py::list masks_of(const semslice_py_result& s) {
  py::list out;
  s.net.visit([&](const auto& net) {
    const auto us = neuron_units(net);
    for (std::size_t u = 0; u < us.size() && u < s.r.mask.keep.size(); ++u) {
      std::vector<bool> k(s.r.mask.keep[u].begin(), s.r.mask.keep[u].end());
      py::array_t<bool> a(py::ssize_t(k.size()));
      for (std::size_t i = 0; i < k.size(); ++i) a.mutable_data()[i] = k[i];
      py::dict d;
      d["name"] = us[u].name;
      d["layer"] = us[u].layer;
      d["output"] = us[u].output;
      d["keep"] = a;
      out.append(d);
    }
  });
  return out;
}

py::list report_of(const semslice_py_result& s) {
  py::list out;
  for (const auto& u : s.r.report.units) {
    py::dict d;
    d["name"] = u.name;
    d["neurons"] = u.neurons;
    d["kept"] = u.kept;
    d["output"] = u.output;
    d["step"] = u.step;
    d["k"] = u.k;
    d["sim"] = u.sim;
    d["blocks"] = u.blocks;
    out.append(d);
  }
  return out;
}

}  // namespace

void register_neusemslice(py::module_& m) {
  py::class_<semslice_py_result>(m, "SemanticSlice", "NeuSemSlice's critical neurons: the union over the categories.")
      .def_property_readonly("masks", &masks_of, "Per unit (Dense / Conv2D): name, layer, output, keep (bool per neuron).")
      .def_property_readonly("units", &report_of, "Per unit: neurons, kept, and per category k, sim, blocks.")
      .def_property_readonly("categories", [](const semslice_py_result& s) { return s.r.report.categories; })
      .def_property_readonly("samples", [](const semslice_py_result& s) { return s.r.report.samples; })
      .def_property_readonly("parameters", [](const semslice_py_result& s) {
        return s.net.visit([&](const auto& net) {
          const auto a = parameter_accounting(net, s.r.mask);
          py::dict d;
          d["total"] = a.total, d["kept"] = a.kept, d["removed"] = a.removed, d["compression"] = a.compression;
          return d;
        });
      }, "Parameters kept / removed by the mask and the compression rate (percent).")
      .def("network", [](const semslice_py_result& s) {
        return s.net.visit([&](const auto& net) {
          using T = typename std::decay_t<decltype(net)>::scalar_type;
          return make_network<T>(apply_neuron_mask(net, s.r.mask), s.net.in, s.net.source, "semslice mask");
        });
      }, "The masked network: the neurons outside the mask output 0.")
      .def("save", [](const semslice_py_result& s, const std::filesystem::path& path) {
        std::ofstream f(path, std::ios::trunc);
        if (!f) throw io_error(path.string() + ": cannot open for writing");
        save_neuron_mask(f, s.r.mask);
        f.flush();
        if (!f) throw io_error(path.string() + ": write error");
      }, py::arg("path"), "Writes the mask (`nnlens semslice --mask` reads it).")
      .def("__repr__", [](const semslice_py_result& s) {
        std::size_t kept = 0, all = 0;
        for (const auto& k : s.r.mask.keep)
          for (auto v : k) kept += v != 0, ++all;
        return cat("<nnlens.SemanticSlice: ", kept, " / ", all, " neurons kept, ", s.r.report.categories.size(), " categories>");
      });
  m.def("semslice", &semslice_py, py::arg("net"), py::arg("X"), py::arg("y"), py::arg("metric"), py::arg("theta"),
        py::arg("similarity"), py::arg("step"), py::arg("samples"), py::arg("seed"), py::arg("categories"),
        py::arg("metric_samples"), py::arg("threads"));
}

}  // namespace nnlens_python
