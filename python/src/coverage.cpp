// python/src/coverage.cpp -- DeepImportance's IDC and the criteria beside it (NC, KMNC, NBC, SNAC,
// TKNC, LSC, DSC), as `nnlens coverage` prepares and measures them (tools/nnlens/coverage_cmd.cpp):
// a Coverage is prepared once on a training set and measures any number of test sets.  Also the
// 1-D k-means and silhouette of IDC's clustering step, for comparisons (scikit-learn).
#include <algorithm>
#include <map>

#include <nnlens/coverage.hpp>
#include <nnlens/coverage/neuron_coverage.hpp>
#include <nnlens/coverage/surprise.hpp>

#include "common.hpp"

namespace nnlens_python {
using namespace nnlens;  // NOLINT: the library's vocabulary (the module's own names are outside nnlens: pybind11's unqualified calls must not find nnlens's by ADL)

namespace {

const std::vector<std::string> known = {"idc", "nc", "kmnc", "nbc", "snac", "tknc", "lsc", "dsc"};

struct coverage_state {
  network net;
  std::vector<std::string> criteria;
  std::size_t layer = 0;  // IDC's and LSC/DSC's subject layer
  std::size_t m = 6;
  double nc_threshold = 0.75;
  std::size_t kmnc_k = 1000, tknc_k = 3;
  bool lsc_reference = false;
  std::optional<std::size_t> threads;
  std::optional<idc> idc_state;
  std::shared_ptr<const neuron_bounds> bounds;
  std::shared_ptr<const surprise_model> surprise;
  std::map<std::string, std::string> failed;  // a preparation that failed: the criterion's error
  std::size_t train_n = 0;
};

bool wants(const coverage_state& s, std::initializer_list<const char*> names) {
  for (const auto& c : s.criteria)
    for (const char* n : names)
      if (c == n) return true;
  return false;
}

template <class T>
std::size_t layer_of(const basic_dynamic_network<T>& net, py::handle layer) {
  if (layer.is_none()) return subject_layer(net);
  if (py::isinstance<py::int_>(layer)) return layer_index(net, std::to_string(py::cast<long long>(layer)));
  return layer_index(net, py::cast<std::string>(layer));  // "Type#k"; value_error when out of range
}

coverage_state prepare(const network& n, py::handle X, py::handle Y, const std::vector<std::string>& criteria, py::handle layer,
                       std::size_t m, double nc_threshold, std::size_t kmnc_k, std::size_t tknc_k,
                       const std::string& lsc_range, std::optional<std::size_t> threads) {
  n.require_plain("coverage");
  coverage_state s;
  s.net = n;
  for (auto c : criteria) {
    for (auto& ch : c) ch = char(std::tolower(static_cast<unsigned char>(ch)));
    if (std::find(known.begin(), known.end(), c) == known.end())
      throw value_error("criteria: unknown criterion '" + c + "' (expected some of idc, nc, kmnc, nbc, snac, tknc, lsc, dsc)");
    if (std::find(s.criteria.begin(), s.criteria.end(), c) == s.criteria.end()) s.criteria.push_back(c);
  }
  if (s.criteria.empty()) throw value_error("criteria: no criterion given");
  if (lsc_range != "spec" && lsc_range != "reference")
    throw value_error("lsc_range: expected 'spec' or 'reference', got '" + lsc_range + "'");
  if (m == 0) throw value_error("m: expected at least 1 important neuron");
  if (!(nc_threshold >= 0 && nc_threshold <= 1)) throw value_error(cat("nc_threshold: expected 0 to 1, got ", nc_threshold));
  if (kmnc_k == 0 || tknc_k == 0) throw value_error("kmnc_k, tknc_k: expected at least 1");
  s.m = m, s.nc_threshold = nc_threshold, s.kmnc_k = kmnc_k, s.tknc_k = tknc_k, s.lsc_reference = lsc_range == "reference";
  s.threads = threads;
  n.visit([&](const auto& net) {
    using T = typename std::decay_t<decltype(net)>::scalar_type;
    const auto layers = all_layers(net);
    s.layer = layer_of(net, layer);
    const std::size_t width = coverage_neurons(layers[s.layer].out);
    if (m > width)
      throw value_error(cat("m ", m, ": larger than layer ", layers[s.layer].name, ", which has ", width, " neuron",
                               width == 1 ? "" : "s"));
    const rows<T> x = input_rows<T>(n, X, "coverage: train_x");
    if (x.n == 0) throw data_error("coverage: train_x holds no samples");
    s.train_n = x.n;
    std::vector<std::size_t> y;
    if (wants(s, {"idc"})) {
      if (Y.is_none()) throw value_error("coverage: idc needs train_y (IDC uses the correctly classified training inputs)");
      y = labels_of(Y, x.n, coverage_neurons(net.output_shape()), "coverage: train_y");
    }
    long_call([&] {
      with_policy(threads, [&](const auto& pol) {
        if (wants(s, {"idc"})) {
          idc_options io;
          io.layer = s.layer;
          io.m = m;
          try {
            s.idc_state = prepare_idc(pol, net, x.span(), x.n, y, io);
          } catch (const data_error& e) {
            s.failed.emplace("idc", cat("train_x: ", e.what()));
          }
        }
        poll();
        if (wants(s, {"kmnc", "nbc", "snac"}))
          s.bounds = std::make_shared<const neuron_bounds>(prepare_neuron_bounds(pol, net, x.flat_view()));
        poll();
        if (wants(s, {"lsc", "dsc"})) {
          try {
            s.surprise = std::make_shared<const surprise_model>(prepare_surprise(pol, net, x.flat_view(), s.layer));
          } catch (const data_error& e) {
            for (const char* c : {"lsc", "dsc"}) s.failed.emplace(c, cat("train_x: ", e.what()));
          }
        }
      });
    });
  });
  return s;
}

py::dict result_dict(const coverage_result& r) {
  py::dict d;
  d["coverage"] = r.percent;
  d["covered"] = r.covered;
  d["total"] = r.total;
  return d;
}

/// Every criterion on the test set X, from the prepared state (each measure starts uncovered).
py::dict measure_py(coverage_state& s, py::handle X) {
  py::dict out;
  const network& n = s.net;
  n.visit([&](const auto& net) {
    using T = typename std::decay_t<decltype(net)>::scalar_type;
    const rows<T> x = input_rows<T>(n, X, "coverage: test_x");
    if (x.n == 0) throw data_error("coverage: test_x holds no samples");
    for (const auto& c : s.criteria) {
      if (auto it = s.failed.find(c); it != s.failed.end()) {
        py::dict e;
        e["error"] = it->second;
        out[py::str(c)] = e;
        continue;
      }
      py::dict d;
      try {
        long_call([&] {
          with_policy(s.threads, [&](const auto& pol) {
            auto run = [&](auto& crit) {
              const coverage_result r = measure(pol, net, x.span(), x.n, crit);
              py::gil_scoped_acquire gil;
              d = result_dict(r);
            };
            auto run_surprise = [&](auto crit) {
              run(crit);
              py::gil_scoped_acquire gil;
              const auto& so = crit.options();
              const auto& rc = crit.range();
              py::dict rg;
              rg["lower"] = so.lower, rg["upper"] = so.upper, rg["buckets"] = so.buckets;
              rg["inputs"] = rc.inputs, rg["in_range"] = rc.in_range, rg["below"] = rc.below, rg["above"] = rc.above;
              rg["nan"] = rc.nan, rg["in_range_fraction"] = rc.in_range_fraction();
              d["range"] = rg;
            };
            if (c == "idc") {
              idc st = *s.idc_state;
              st.reset();
              run(st);
              py::gil_scoped_acquire gil;
              d["layer"] = st.layer();
              d["neurons"] = st.neurons();
              d["clusters"] = st.centroids();
              d["incc"] = st.incc_exact();
              d["total_capped"] = st.total_capped();
            } else if (c == "nc") {
              nc_criterion k(net, {.threshold = s.nc_threshold});
              run(k);
            } else if (c == "tknc") {
              tknc_criterion k(net, {.k = s.tknc_k});
              run(k);
            } else if (c == "kmnc") {
              kmnc_criterion k(s.bounds, s.kmnc_k);
              run(k);
            } else if (c == "nbc") {
              nbc_criterion k(s.bounds);
              run(k);
            } else if (c == "snac") {
              snac_criterion k(s.bounds);
              run(k);
            } else if (c == "lsc") {
              surprise_coverage_options so;  // the spec's [0, 2000]
              if (s.lsc_reference)
                so = reference_surprise_range(lsa_values(pol, net, *s.surprise, x.flat_view()), surprise_kind::lsa);
              run_surprise(lsc_criterion(s.surprise, so));
            } else if (c == "dsc") {
              run_surprise(dsc_criterion(s.surprise));
            }
            poll();
          });
        });
      } catch (const data_error& e) {
        d = py::dict();
        d["error"] = cat(c, " on test_x: ", e.what());
      } catch (const value_error& e) {
        d = py::dict();
        d["error"] = cat(c, " on test_x: ", e.what());
      }
      out[py::str(c)] = d;
    }
  });
  return out;
}

}  // namespace

void register_coverage(py::module_& m) {
  py::class_<coverage_state>(m, "Coverage", "Coverage criteria prepared on a training set; measure() takes test sets.")
      .def("measure", &measure_py, py::arg("test_x"),
           "The coverage of test_x under every prepared criterion: {name: {coverage, covered, total, ...}}.")
      .def_property_readonly("criteria", [](const coverage_state& s) { return s.criteria; })
      .def_property_readonly("layer", [](const coverage_state& s) { return s.layer; })
      .def_property_readonly("train_samples", [](const coverage_state& s) { return s.train_n; })
      .def_property_readonly("idc", [](const coverage_state& s) -> py::object {
        if (!s.idc_state) return py::none();
        py::dict d;
        d["layer"] = s.idc_state->layer();
        d["neurons"] = s.idc_state->neurons();
        d["clusters"] = s.idc_state->centroids();
        d["incc"] = s.idc_state->incc_exact();
        d["training_inputs"] = s.idc_state->training_inputs();
        return d;
      }, "IDC's preparation: the subject layer, its important neurons and their cluster centroids.")
      .def("__repr__", [](const coverage_state& s) {
        std::string c;
        for (const auto& k : s.criteria) c += (c.empty() ? "" : ", ") + k;
        return cat("<nnlens.Coverage: ", c, "; prepared on ", s.train_n, " training inputs, layer ", s.layer, ">");
      });
  m.def("prepare_coverage", &prepare, py::arg("net"), py::arg("train_x"), py::arg("train_y"), py::arg("criteria"),
        py::arg("layer"), py::arg("m"), py::arg("nc_threshold"), py::arg("kmnc_k"), py::arg("tknc_k"), py::arg("lsc_range"),
        py::arg("threads"));
  m.def("kmeans_1d", [](const std::vector<double>& v, std::size_t k) {
    const auto r = kmeans_1d(v, k);
    return py::make_tuple(to_numpy(std::vector<double>(r.centroids)), to_numpy(std::vector<std::size_t>(r.labels)), r.sse);
  }, py::arg("values"), py::arg("k"), "Optimal 1-D k-means: (centroids ascending, labels, sse).");
  m.def("silhouette_1d", [](const std::vector<double>& v, const std::vector<std::size_t>& labels, std::size_t k) {
    return silhouette_1d(v, labels, k);
  }, py::arg("values"), py::arg("labels"), py::arg("k"), "The exact mean silhouette (L1 distance), as scikit-learn's.");
}

}  // namespace nnlens_python
