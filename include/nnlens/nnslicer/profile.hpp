// nnlens/nnslicer/profile.hpp -- NNSlicer's profile: the mean activation of every neuron over a
// dataset (docs/specs/nnslicer.md#22-profiling, Eq. 1).
//
//   auto p = profile_network([policy,] net, X, {.granularity = granularity::channel});
//   profile_accumulator acc(net, granularity::channel);   // streamed: acc.add(net, X_batch) ...
//   auto p = acc.result();  merge(p1, p2)                  // mergeable (threads, processes)
//   save_profile(path, p);  auto q = load_profile(path);   // text, every double round-trips
//   p.mean(a)                                              // tensor a's neuron means
//   p.check_compatible(net)                                // data_error when the profile is of
//                                                          // another model (shapes or weights)
//
// Neurons: per channel (a rank-3 tensor's channel mean: the default, as in the paper) or per
// element; every tensor of the op graph (network/graph.hpp) has its own, the input included.
// The profile stores sums and the sample count, so merging is exact up to rounding.
#pragma once

#include <algorithm>
#include <atomic>
#include <charconv>
#include <memory>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "nnlens/core/error.hpp"
#include "nnlens/core/execution.hpp"
#include "nnlens/core/finite.hpp"
#include "nnlens/core/progress.hpp"
#include "nnlens/core/thread_pool.hpp"
#include "nnlens/network/forward.hpp"
#include "nnlens/network/parameters.hpp"
#include "nnlens/network/fingerprint.hpp"
#include "nnlens/network/graph.hpp"

namespace nnlens {

enum class granularity { channel, element };

inline std::string_view granularity_name(granularity g) { return g == granularity::channel ? "channel" : "element"; }

struct profile {
  granularity grain = granularity::channel;
  std::uint64_t fingerprint = 0;          // of the model (tensor shapes and weights)
  std::size_t samples = 0;
  std::vector<std::vector<double>> sums;  // per tensor, per neuron
  std::vector<std::string> names;         // per tensor ("input", "0 Conv2D", ...)

  std::vector<double> mean(std::size_t a) const {
    std::vector<double> m(sums.at(a).size());
    for (std::size_t i = 0; i < m.size(); ++i) m[i] = samples ? sums[a][i] / double(samples) : 0.0;
    return m;
  }
  /// Throws data_error unless this profile was made on `net` (same tensors, same weights).
  template <class Net>
  void check_compatible(const Net& net) const;
};


template <class Net>
void profile::check_compatible(const Net& net) const {
  const op_graph<network_scalar_t<Net>> g(net);
  if (sums.size() != g.acts().size())
    throw data_error(detail::concat("profile: made on a network with ", sums.size(), " tensors, this one has ",
                                    g.acts().size(), " (a profile of another model?)"));
  for (std::size_t a = 0; a < sums.size(); ++a)
    if (sums[a].size() != neuron_count(g.acts()[a], grain == granularity::element))
      throw data_error(detail::concat("profile: tensor ", a, " (", g.act_name(a), ") has ", sums[a].size(),
                                      " neurons in the profile, ", neuron_count(g.acts()[a], grain == granularity::element),
                                      " in the network (a profile of another model?)"));
  if (fingerprint != detail::model_fingerprint(net))
    throw data_error("profile: made on a network with other weights (the model fingerprints differ)");
}

/// Streams batches into a profile.
template <class T>
class profile_accumulator {
 public:
  template <class Net>
  profile_accumulator(const Net& net, granularity g) : graph_(net) {
    p_.grain = g;
    p_.fingerprint = detail::model_fingerprint(net);
    for (std::size_t a = 0; a < graph_.acts().size(); ++a) {
      p_.sums.emplace_back(neuron_count(graph_.acts()[a], g == granularity::element), 0.0);
      p_.names.push_back(graph_.act_name(a));
    }
  }
  /// Adds n samples (X: n x input size, flattened).
  void add(std::size_t n, const T* X) {
    auto& buf = buf_;  // kept between calls: no allocation (and no page faults) per batch
    auto& nv = nv_;
    const bool el = p_.grain == granularity::element;
    graph_.run(n, X, buf);
    for (std::size_t a = 0; a < buf.size(); ++a) {
      const shape s = graph_.acts()[a];
      const std::size_t per = s.size(), nn = p_.sums[a].size();
      nv.resize(nn);
      for (std::size_t i = 0; i < n; ++i) {
        neuron_values(s, el, buf[a].data() + i * per, nv.data());
        for (std::size_t k = 0; k < nn; ++k) p_.sums[a][k] += nv[k];
      }
    }
    p_.samples += n;
  }
  const profile& result() const { return p_; }
  profile& result() { return p_; }

 private:
  op_graph<T> graph_;
  profile p_;
  std::vector<std::vector<T>> buf_;
  std::vector<double> nv_;
};

/// a + b (same model and granularity; data_error otherwise).
inline profile merge(const profile& a, const profile& b) {
  if (a.grain != b.grain || a.fingerprint != b.fingerprint || a.sums.size() != b.sums.size())
    throw data_error("merge(profile, profile): the profiles are of different models or granularities");
  profile r = a;
  for (std::size_t t = 0; t < r.sums.size(); ++t) {
    if (r.sums[t].size() != b.sums[t].size()) throw data_error("merge(profile, profile): tensor sizes differ");
    for (std::size_t i = 0; i < r.sums[t].size(); ++i) r.sums[t][i] += b.sums[t][i];
  }
  r.samples += b.samples;
  return r;
}

struct profile_options {
  granularity grain = granularity::channel;
  std::size_t batch = 256;
  bool progress = false;
};

namespace detail {
/// profile_network's checks of the network and of X (every policy): the sample count N of X
/// [N, input...]; data_error when it is 0.
template <class Net, class E>
std::size_t profile_samples(const Net& net, const E& X) {
  check_shapes(net);
  const std::size_t n = check_batch_input(X, input_shape_of(net), "profile_network");
  if (n == 0) throw data_error("profile_network: the dataset is empty");
  return n;
}

/// profile_network after its input checks: x holds n row-major samples in T.  One instantiation per
/// policy and network, whatever container the caller had (the forms of nnlens/precompiled/nnslicer.hpp).
template <class Policy, class Net>
profile profile_rows(const Policy&, const Net& net, std::span<const network_scalar_t<Net>> x, std::size_t n,
                     const profile_options& o) {
  using T = network_scalar_t<Net>;
  const shape in = input_shape_of(net);
  require_finite(x, in.size(), "profile_network: input");
  const std::size_t batch = std::max<std::size_t>(1, o.batch), chunks = (n + batch - 1) / batch;
  std::unique_ptr<progress_bar> bar;
  if (o.progress) bar = std::make_unique<progress_bar>("profile", n);
  if constexpr (execution::is_host_parallel_policy_v<Policy>) {
    auto& pool = detail::default_pool();
    const std::size_t tasks = std::min(pool.size(), chunks);
    std::vector<profile> parts(tasks);
    pool.parallel_for(tasks, [&](std::size_t t) {
      profile_accumulator<T> acc(net, o.grain);
      for (std::size_t c = t; c < chunks; c += tasks) {
        const std::size_t b0 = c * batch, nb = std::min(batch, n - b0);
        acc.add(nb, x.data() + b0 * in.size());
      }
      parts[t] = std::move(acc.result());
    });
    profile p = parts[0];
    for (std::size_t t = 1; t < tasks; ++t) p = merge(p, parts[t]);
    if (bar) bar->finish();
    return p;
  } else {
    profile_accumulator<T> acc(net, o.grain);
    for (std::size_t c = 0; c < chunks; ++c) {
      const std::size_t b0 = c * batch, nb = std::min(batch, n - b0);
      acc.add(nb, x.data() + b0 * in.size());
      if (bar) bar->update(b0 + nb);
    }
    if (bar) bar->finish();
    return acc.result();
  }
}
}  // namespace detail

/// The profile of net over X ([N, input...]); with execution::par the batches run in parallel
/// (one accumulator per task, merged).
template <class Policy, class Net, class E>
  requires execution::is_execution_policy_v<Policy>
profile profile_network(const Policy& pol, const Net& net, const E& X, const profile_options& o = {}) {
  using T = network_scalar_t<Net>;
  const std::size_t n = detail::profile_samples(net, X);
  const auto& x = detail::row_major_input<T>(X);  // X itself, or a row-major copy in T
  return detail::profile_rows(pol, net, std::span<const T>(x.data(), x.size()), n, o);
}
template <class Net, class E>
  requires(!execution::is_execution_policy_v<Net>)
profile profile_network(const Net& net, const E& X, const profile_options& o = {}) {
  return execution::with_default_policy(net, [&](const auto& pol) { return profile_network(pol, net, X, o); });
}

/// Writes p as text ("nnlens-profile 1"); every double round-trips exactly.
inline void save_profile(const std::filesystem::path& path, const profile& p) {
  std::ofstream f(path);
  if (!f) throw io_error(detail::concat(path.string(), ": cannot open for writing"));
  f << "nnlens-profile 1\ngranularity " << granularity_name(p.grain) << "\nfingerprint " << p.fingerprint << "\nsamples "
    << p.samples << "\ntensors " << p.sums.size() << "\n";
  char buf[64];
  for (std::size_t a = 0; a < p.sums.size(); ++a) {
    f << "tensor " << p.sums[a].size() << " " << (a < p.names.size() ? p.names[a] : std::string("?")) << "\n";
    for (std::size_t i = 0; i < p.sums[a].size(); ++i) {
      auto r = std::to_chars(buf, buf + sizeof buf, p.sums[a][i]);
      f.write(buf, r.ptr - buf);
      f << (i + 1 == p.sums[a].size() ? '\n' : ' ');
    }
    if (p.sums[a].empty()) f << "\n";
  }
  if (!f) throw io_error(detail::concat(path.string(), ": write failed"));
}

/// Reads a profile written by save_profile; io_error naming the file and line on anything else.
inline profile load_profile(const std::filesystem::path& path) {
  std::ifstream f(path);
  if (!f) throw io_error(detail::concat(path.string(), ": cannot open"));
  std::size_t line_no = 0;
  std::string line;
  auto next = [&](const char* what) -> std::string {
    if (!std::getline(f, line)) throw io_error(detail::concat(path.string(), ":", line_no + 1, ": expected ", what, ", got end of file"));
    ++line_no;
    return line;
  };
  auto bad = [&](const std::string& what) { return io_error(detail::concat(path.string(), ":", line_no, ": ", what)); };
  auto key_value = [&](const char* key) -> std::string {
    const std::string l = next(key);
    const std::string k = std::string(key) + " ";
    if (l.rfind(k, 0) != 0) throw bad(detail::concat("expected '", key, " ...'"));
    return l.substr(k.size());
  };
  auto to_u64 = [&](const std::string& s, const char* what) {
    std::uint64_t v = 0;
    auto r = std::from_chars(s.data(), s.data() + s.size(), v);
    if (r.ec != std::errc() || r.ptr != s.data() + s.size()) throw bad(detail::concat(what, " is not a number: '", s, "'"));
    return v;
  };
  if (next("the header") != "nnlens-profile 1") throw bad("not an nnlens profile (expected 'nnlens-profile 1')");
  profile p;
  const std::string g = key_value("granularity");
  if (g == "channel") p.grain = granularity::channel;
  else if (g == "element") p.grain = granularity::element;
  else throw bad("granularity must be channel or element, got '" + g + "'");
  p.fingerprint = to_u64(key_value("fingerprint"), "fingerprint");
  p.samples = to_u64(key_value("samples"), "samples");
  const std::uint64_t nt = to_u64(key_value("tensors"), "tensors");
  if (nt > 100000) throw bad("too many tensors");
  for (std::uint64_t a = 0; a < nt; ++a) {
    const std::string h = key_value("tensor");
    const auto sp = h.find(' ');
    const std::uint64_t n = to_u64(h.substr(0, sp), "tensor size");
    if (n > (std::uint64_t(1) << 28)) throw bad("tensor too large");
    p.names.push_back(sp == std::string::npos ? std::string() : h.substr(sp + 1));
    const std::string vals = next("the tensor's values");
    std::vector<double> v;
    v.reserve(std::min<std::uint64_t>(n, vals.size() / 2 + 1));  // n comes from the file: never trust it for memory
    const char* c = vals.data();
    const char* e = c + vals.size();
    while (c < e) {
      while (c < e && *c == ' ') ++c;
      if (c >= e) break;
      double d;
      auto r = std::from_chars(c, e, d);
      if (r.ec != std::errc() || !std::isfinite(d)) throw bad("a value is not a finite number");
      v.push_back(d);
      c = r.ptr;
    }
    if (v.size() != n) throw bad(detail::concat("tensor ", a, ": expected ", n, " values, got ", v.size()));
    p.sums.push_back(std::move(v));
  }
  return p;
}

}  // namespace nnlens
