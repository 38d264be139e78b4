// bench_zoo -- forward speed of an imported ONNX model (torchvision's CNNs) on one thread, and each
// op's speed against this machine's memory bandwidth.
//
//   bench_zoo MODEL.onnx [--batch 1,16] [--reps 11] [--warmup 3] [--par]
//       forward(execution::seq, net, x) at each batch, x seeded N(0, 1) (--par: execution::par,
//       the pool's NNLENS_NUM_THREADS threads splitting the batch): the median, minimum and
//       maximum of REPS calls after WARMUP calls, as JSON on stdout
//   bench_zoo MODEL.onnx --layers [--batch 16] [--reps 7] [--text]
//       every top-level layer, and every inner layer of a composite (Residual, Concat, Product),
//       each timed alone on its own input (the activations of one forward pass): op, shapes, ms,
//       bytes read + written (activations in and out, weights), GB/s, GFLOP/s (Conv2D, Dense), and
//       a memcpy of as many bytes between the same buffers, timed alongside (copy_GBs): the memory
//       speed at that size.  A composite's row also has its join timed alone on the branch outputs
//       (Residual's in-place sum, Concat's row copies, Product's detail::gate_multiply) and the rest
//       (the whole less its branches and its join), and its inner layers run one after another
//       outside it, timed as one (chain_ms: against the whole, what the composite itself adds).
//       Then a summary per op type (share: of the sum of the top-level layers' times; "whole" and
//       "in a row+join" rows for the top-level composites).  --text: a table instead of JSON.
//   bench_zoo --ops [--reps 7] [--text]
//       the memory reference (STREAM copy, scale, add, triad) and every element-wise op and join
//       on [64, 32, 32] images (the per-feature forms on the same 65,536 values as [65536]) at
//       three batches: 1 (256 KiB: in L2), 24 (6 MiB: in L3) and 256 (64 MiB per tensor: beyond
//       the caches), each with GB/s and its fraction of copy's.
//   bench_zoo MODEL.onnx --run IN.f32 OUT.f32
//       forward of the raw float32 samples in IN (NCHW, the batch from the file's size) into OUT:
//       compare_zoo.py checks the outputs against PyTorch's before it times anything
//   bench_zoo MODEL.onnx --serve
//       reads lines "BATCH REPS" on stdin and answers each with one JSON line (REPS timed calls):
//       benchmarks/compare_zoo.py interleaves these with PyTorch's in one loaded model.
//
// Threads: execution::seq runs every layer on the calling thread, and no kernel starts threads of
// its own; NNLENS_NUM_THREADS is set to 1 unless given, so the (unused) pool is one thread too.
// With --par, forward(execution::par, ...) splits the batch over NNLENS_NUM_THREADS threads (a
// sample is not split: batch 1 runs on one thread).
// Bytes are the minimal traffic: each input and output element once, weights once; STREAM's
// convention (copy: 8 bytes per float element, add and triad 12).
#include <nnlens/io/onnx.hpp>
#include <nnlens/nnlens.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

using namespace nnlens;

namespace {

using clk = std::chrono::steady_clock;

struct options {
  std::string model;
  std::vector<std::size_t> batches{1, 16};
  std::size_t reps = 11, warmup = 3;
  bool layers = false, ops = false, serve = false, text = false, par = false;
  bool reps_given = false, batch_given = false;
  std::string run_in, run_out;
};

struct stats {
  double median = 0, min = 0, max = 0;
  std::vector<double> all;
};

stats summarise(std::vector<double> t) {
  stats s;
  s.all = t;
  std::sort(t.begin(), t.end());
  s.min = t.front(), s.max = t.back();
  const std::size_t n = t.size();
  s.median = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
  return s;
}

/// REPS timed calls of f (ms each) after WARMUP untimed ones.
template <class F>
stats time_calls(F&& f, std::size_t reps, std::size_t warmup) {
  for (std::size_t i = 0; i < warmup; ++i) f();
  std::vector<double> t(reps);
  for (std::size_t i = 0; i < reps; ++i) {
    const auto t0 = clk::now();
    f();
    t[i] = std::chrono::duration<double, std::milli>(clk::now() - t0).count();
  }
  return summarise(t);
}

/// Calls of f for at least `min_ms` in total (and at least `reps`), the median of per-call times
/// of batches of calls: short kernels are timed in groups so the clock's resolution does not count.
template <class F>
double time_short(F&& f, std::size_t reps, double min_ms = 2.0) {
  f();
  const auto t0 = clk::now();
  f();
  const double one = std::max(1e-6, std::chrono::duration<double, std::milli>(clk::now() - t0).count());
  const std::size_t group = std::max<std::size_t>(1, std::size_t(min_ms / one));
  std::vector<double> t(reps);
  for (std::size_t r = 0; r < reps; ++r) {
    const auto a = clk::now();
    for (std::size_t g = 0; g < group; ++g) f();
    t[r] = std::chrono::duration<double, std::milli>(clk::now() - a).count() / double(group);
  }
  return summarise(t).median;
}

std::vector<float> normal_values(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

std::string json_str(std::string_view s) {
  std::string r = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') r += '\\';
    if (c == '\n') { r += "\\n"; continue; }
    r += c;
  }
  return r + "\"";
}

std::string num(double v, int prec = 6) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*g", prec, v);
  return b;
}

// ---- whole-model forward

xt::xarray<float> input_batch(const DynamicNetwork& net, std::size_t batch) {
  xt::xarray<float> x = xt::xarray<float>::from_shape(net.input_shape().with_batch(batch));
  const auto v = normal_values(x.size(), 42);
  std::copy(v.begin(), v.end(), x.data());
  return x;
}

std::string forward_json(const DynamicNetwork& net, std::size_t batch, std::size_t reps, std::size_t warmup,
                         bool par) {
  const auto x = input_batch(net, batch);
  float sink = 0;
  const stats s = par ? time_calls([&] { sink += forward(execution::par, net, x).data()[0]; }, reps, warmup)
                      : time_calls([&] { sink += forward(execution::seq, net, x).data()[0]; }, reps, warmup);
  std::string t = "[";
  for (std::size_t i = 0; i < s.all.size(); ++i) t += (i ? "," : "") + num(s.all[i]);
  return "{\"batch\":" + std::to_string(batch) + ",\"reps\":" + std::to_string(reps) + ",\"median_ms\":" + num(s.median) +
         ",\"min_ms\":" + num(s.min) + ",\"max_ms\":" + num(s.max) + ",\"ms\":" + t + "],\"check\":" + num(sink) + "}";
}

// ---- per-layer times

struct row {
  std::string path, op;
  shape in, out;
  int depth = 0;
  double ms = 0, bytes = 0, flops = 0, copy_ms = 0;
  bool composite = false;
  double join_ms = 0, join_bytes = 0, overhead_ms = 0;  // overhead: the whole less its branches and join
  double chain_ms = 0;  // a composite's inner layers run one after another outside it
};

template <class L>
double weight_bytes(const L& l) {
  if constexpr (requires { l.W.size(); l.b.size(); })
    return double(l.W.size() + l.b.size()) * sizeof(float);
  else
    return 0;
}

template <class L>
double layer_flops(const L& l, shape out, std::size_t batch) {
  if constexpr (requires { l.W.dimension(); }) {
    if (l.W.dimension() == 4)  // Conv2D: W [out, in/groups, kh, kw]
      return 2.0 * double(batch) * double(out.size()) * double(l.W.shape(1) * l.W.shape(2) * l.W.shape(3));
    if (l.W.dimension() == 2)  // Dense: W [in, out]
      return 2.0 * double(batch) * double(l.W.shape(0) * l.W.shape(1));
  }
  return 0;
}

struct layer_timer {
  std::size_t batch, reps;
  std::vector<row> rows;

  /// Runs l on x (batch samples of `in`), times it, records its row (and its inner layers' rows
  /// after it); returns its output and its median ms.
  template <class L>
  std::pair<std::vector<float>, double> run(const L& l, shape in, shape out, const float* x, const std::string& path,
                                            int depth) {
    std::vector<float> y(std::max<std::size_t>(1, batch * out.size()));
    std::vector<float> scratch(std::max<std::size_t>(1, layer_traits<L>::scratch_size(&l, in, out, batch)));
    auto call = [&] { layer_traits<L>::forward(l, forward_args<float>{in, out, batch, x, y.data(), nullptr, scratch.data()}); };
    const std::size_t at = rows.size();
    rows.push_back({});
    row r;
    r.path = path, r.op = std::string(layer_traits<L>::name), r.in = in, r.out = out, r.depth = depth;
    r.ms = time_short(call, reps);
    r.bytes = double(batch) * double(in.size() + out.size()) * sizeof(float) + weight_bytes(l);
    r.flops = layer_flops(l, out, batch);
    if constexpr (Composite<L>) {
      // the branches, each layer alone; then the join alone on the branch outputs: the loop the
      // composite's forward runs (Residual: y += s in place, Concat: each branch's rows copied to
      // their offset), Product's own kernel (detail::gate_multiply)
      r.composite = true;
      double inner = 0;
      std::size_t b = 0;
      std::vector<std::vector<float>> outs;
      // the same layers run one after another (each into its own buffers), timed as one: what the
      // branches cost together, with each other's data in the caches
      std::vector<std::function<void()>> steps;
      std::vector<std::vector<float>> bufs;
      bufs.reserve(1024);
      layer_traits<L>::for_each_branch(l, in, [&](auto walk) {
        std::vector<float> cur(x, x + batch * in.size());
        const std::string bp = path + "/" + branch_name_of<L>(b);
        const float* src = x;
        walk([&](const auto* il, auto idx, shape i, shape o) {
          using IL = std::remove_cvref_t<decltype(*il)>;
          auto [next, ms] = run(*il, i, o, cur.data(), bp + "." + std::to_string(std::size_t(idx)), depth + 1);
          inner += ms;
          cur = std::move(next);
          if (bufs.size() + 2 > bufs.capacity()) return;  // (pointers into bufs stay valid)
          bufs.emplace_back(std::max<std::size_t>(1, batch * o.size()));
          float* dst = bufs.back().data();
          bufs.emplace_back(std::max<std::size_t>(1, layer_traits<IL>::scratch_size(il, i, o, batch)));
          float* scr = bufs.back().data();
          const std::size_t nb = batch;
          steps.push_back([il, i, o, nb, src, dst, scr] {
            layer_traits<IL>::forward(*il, forward_args<float>{i, o, nb, src, dst, nullptr, scr});
          });
          src = dst;
        });
        outs.push_back(std::move(cur));
        ++b;
      });
      const std::size_t n = batch * out.size();
      const double nb = double(n) * sizeof(float);
      std::vector<float> z(n);
      switch (composite_join_v<L>) {
        case branch_join::sum:
          r.join_bytes = nb * double(outs.size() + 1);
          std::copy_n(outs[0].data(), n, z.data());
          r.join_ms = time_short([&] {
            for (std::size_t k = 1; k < outs.size(); ++k) {
              const float* s = outs[k].data();
              for (std::size_t i = 0; i < n; ++i) z[i] = z[i] + s[i];
            }
          }, reps);
          break;
        case branch_join::concat: {
          r.join_bytes = 2 * nb;
          const std::size_t total = out.size();
          r.join_ms = time_short([&] {
            std::size_t off = 0;
            for (const auto& o : outs) {
              const std::size_t m = o.size() / batch;
              for (std::size_t q = 0; q < batch; ++q) std::copy_n(o.data() + q * m, m, z.data() + q * total + off);
              off += m;
            }
          }, reps);
          break;
        }
        case branch_join::product: {
          const std::size_t G = outs[1].size() / batch;
          r.join_bytes = 2 * nb + double(outs[1].size()) * sizeof(float);
          r.join_ms = time_short([&] { detail::gate_multiply(batch, out.size(), G, outs[0].data(), outs[1].data(), z.data()); },
                                 reps);
          break;
        }
      }
      r.chain_ms = time_short([&] { for (auto& f : steps) f(); }, reps);
      r.overhead_ms = r.ms - inner - r.join_ms;
    } else {
      // memory speed at this size: a memcpy of as many bytes between the same buffers
      const std::size_t m = std::min(batch * in.size(), y.size());
      const std::size_t half = std::size_t(r.bytes / 2 / sizeof(float));
      const std::size_t k = std::min(m, std::max<std::size_t>(1, half));
      r.copy_ms = time_short([&] { std::memcpy(y.data(), x, k * sizeof(float)); }, reps) * double(half) / double(k);
      call();  // y back to the layer's output
    }
    rows[at] = r;
    return {std::move(y), r.ms};
  }
};

std::string layers_report(const DynamicNetwork& net, std::size_t batch, std::size_t reps, bool text) {
  layer_timer t{batch, reps, {}};
  std::vector<float> cur = normal_values(batch * net.input_shape().size(), 42);
  double total = 0;
  for_each_layer(net, [&](const auto& l, auto idx, shape in, shape out) {
    auto [y, ms] = t.run(l, in, out, cur.data(), std::to_string(std::size_t(idx)), 0);
    total += ms;
    cur = std::move(y);
  });
  // per op type: the leaves (inner layers of composites included) and the joins
  struct agg {
    std::size_t count = 0;
    double ms = 0, bytes = 0, flops = 0, copy_ms = 0;
  };
  std::map<std::string, agg> by_op;
  for (const row& r : t.rows) {
    agg& a = by_op[r.composite ? r.op + " join" : r.op];
    ++a.count;
    a.ms += r.composite ? r.join_ms : r.ms;
    a.bytes += r.composite ? r.join_bytes : r.bytes;
    a.flops += r.flops * !r.composite;
    a.copy_ms += r.copy_ms;
    if (r.composite) {
      agg& rest = by_op[r.op + " rest"];
      ++rest.count;
      rest.ms += r.overhead_ms;
      if (r.depth == 0) {  // the top-level composites: the whole against its inner layers in a row + join
        agg& w = by_op[r.op + " whole"];
        ++w.count;
        w.ms += r.ms;
        agg& c = by_op[r.op + " in a row+join"];
        ++c.count;
        c.ms += r.chain_ms + r.join_ms;
      }
    }
  }
  std::ostringstream o;
  if (text) {
    o << "batch " << batch << ", " << t.rows.size() << " rows, sum of top-level layers " << num(total, 4) << " ms\n";
    o << "path                         op              in -> out                    ms      MB    GB/s  copyGB/s  GFLOP/s\n";
    for (const row& r : t.rows) {
      char b[512];
      const double ms = r.composite ? r.join_ms : r.ms, bytes = r.composite ? r.join_bytes : r.bytes;
      const std::string shapes = r.in.str() + " -> " + r.out.str();
      const std::string whole = r.composite ? "  (whole " + num(r.ms, 4) + ", rest " + num(r.overhead_ms, 3) +
                                                  ", inner in a row " + num(r.chain_ms, 4) + ")"
                                            : "";
      std::snprintf(b, sizeof b, "%-*s%-*s %-14s %-26s %8.4f %7.2f %7.2f %8s %8s%s\n", r.depth * 2, "", 28 - r.depth * 2,
                    r.path.c_str(), r.composite ? (r.op + "*").c_str() : r.op.c_str(), shapes.c_str(), ms, bytes / 1e6,
                    bytes / ms / 1e6, r.copy_ms > 0 ? num(bytes / r.copy_ms / 1e6, 4).c_str() : "",
                    r.flops > 0 ? num(r.flops / r.ms / 1e6, 4).c_str() : "", whole.c_str());
      o << b;
    }
    o << "(* a composite: its row is its join alone, on the branch outputs; whole: the composite's time, rest: the whole "
         "less its branches and its join, each timed alone; inner in a row: the branches' layers run one after another "
         "outside the composite)\n\nper op: count, ms, share of the sum, GB/s, copy GB/s at the same sizes, "
         "GFLOP/s\n";
    for (const auto& [k, a] : by_op) {
      char b[256];
      std::snprintf(b, sizeof b, "%-18s %4zu %9.3f %6.1f%% %7.2f %8s %8s\n", k.c_str(), a.count, a.ms, 100 * a.ms / total,
                    a.bytes / a.ms / 1e6, a.copy_ms > 0 ? num(a.bytes / a.copy_ms / 1e6, 4).c_str() : "",
                    a.flops > 0 ? num(a.flops / a.ms / 1e6, 4).c_str() : "");
      o << b;
    }
    return o.str();
  }
  o << "{\"batch\":" << batch << ",\"sum_top_level_ms\":" << num(total) << ",\"layers\":[";
  for (std::size_t i = 0; i < t.rows.size(); ++i) {
    const row& r = t.rows[i];
    o << (i ? "," : "") << "\n{\"path\":" << json_str(r.path) << ",\"op\":" << json_str(r.op) << ",\"depth\":" << r.depth
      << ",\"in\":" << json_str(r.in.str()) << ",\"out\":" << json_str(r.out.str()) << ",\"ms\":" << num(r.ms);
    if (r.composite)
      o << ",\"join_ms\":" << num(r.join_ms) << ",\"join_bytes\":" << num(r.join_bytes, 10)
        << ",\"overhead_ms\":" << num(r.overhead_ms) << ",\"chain_ms\":" << num(r.chain_ms)
        << ",\"join_GBs\":" << num(r.join_bytes / r.join_ms / 1e6);
    else
      o << ",\"bytes\":" << num(r.bytes, 10) << ",\"GBs\":" << num(r.bytes / r.ms / 1e6)
        << ",\"copy_GBs\":" << num(r.bytes / r.copy_ms / 1e6);
    if (r.flops > 0) o << ",\"GFLOPs\":" << num(r.flops / r.ms / 1e6);
    o << "}";
  }
  o << "],\n\"by_op\":{";
  bool first = true;
  for (const auto& [k, a] : by_op) {
    o << (first ? "" : ",") << "\n" << json_str(k) << ":{\"count\":" << a.count << ",\"ms\":" << num(a.ms)
      << ",\"share\":" << num(a.ms / total, 4) << ",\"GBs\":" << num(a.bytes / a.ms / 1e6);
    if (a.copy_ms > 0) o << ",\"copy_GBs\":" << num(a.bytes / a.copy_ms / 1e6);
    if (a.flops > 0) o << ",\"GFLOPs\":" << num(a.flops / a.ms / 1e6);
    o << "}";
    first = false;
  }
  o << "}}\n";
  return o.str();
}

// ---- the memory reference and the element-wise ops beyond the caches

struct op_row {
  std::string name;
  std::size_t batch;
  double bytes, ms;
};

tensor<float, 1> values_1d(std::size_t n, float lo, float hi, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  tensor<float, 1> t = tensor<float, 1>::from_shape({n});
  for (auto& v : t) v = d(rng);
  return t;
}

std::string ops_report(std::size_t reps, bool text) {
  const shape img(64, 32, 32);
  const std::size_t C = img[0], E = img.size();
  std::vector<op_row> rows;
  for (std::size_t batch : {std::size_t(1), std::size_t(24), std::size_t(256)}) {
    const std::size_t n = batch * E;
    const std::vector<float> x = normal_values(n, 7), x2 = normal_values(n, 8);
    std::vector<float> y(2 * n), scratch(1 << 16);
    const double nb = double(n) * sizeof(float);
    auto add = [&](std::string name, double bytes, auto&& f) { rows.push_back({std::move(name), batch, bytes, time_short(f, reps, 20.0)}); };
    // STREAM (McCalpin): copy, scale, add, triad
    float* a = y.data();
    const float* b = x.data();
    const float* c = x2.data();
    const float q = 3.0f;
    add("STREAM copy", 2 * nb, [&] { std::memcpy(a, b, n * sizeof(float)); });
    add("STREAM scale", 2 * nb, [&] { for (std::size_t i = 0; i < n; ++i) a[i] = q * b[i]; });
    add("STREAM add", 3 * nb, [&] { for (std::size_t i = 0; i < n; ++i) a[i] = b[i] + c[i]; });
    add("STREAM triad", 3 * nb, [&] { for (std::size_t i = 0; i < n; ++i) a[i] = b[i] + q * c[i]; });
    auto op_on = [&](shape in, std::string name, const auto& l, double bytes) {
      using L = std::decay_t<decltype(l)>;
      const shape out = layer_traits<L>::output_shape(l, in);
      const std::size_t need = layer_traits<L>::scratch_size(&l, in, out, batch);
      if (scratch.size() < need) scratch.resize(need);
      if (bytes == 0) bytes = double(batch) * double(in.size() + out.size()) * sizeof(float);
      add(std::move(name), bytes, [&] {
        layer_traits<L>::forward(l, forward_args<float>{in, out, batch, x.data(), y.data(), nullptr, scratch.data()});
      });
    };
    auto op = [&](std::string name, const auto& l, double bytes = 0) { op_on(img, std::move(name), l, bytes); };
    const shape flat(E);  // the same elements as features (BatchNorm1d after a Dense)
    op("ReLU", ReLU{});
    op("Clamp (ReLU6)", Clamp{0.0, 6.0});
    op("LeakyReLU", LeakyReLU{});
    op("Sigmoid", Sigmoid{});
    op("Tanh", Tanh{});
    op("SiLU", SiLU{});
    op("HardSwish", HardSwish{});
    op("HardSigmoid", HardSigmoid{});
    op("GELU (erf)", GELU{});
    op("GELU (tanh)", GELU{true});
    op("Affine per channel", Affine<dyn, float>{values_1d(C, 0.5f, 1.5f, 1), values_1d(C, -0.1f, 0.1f, 2)});
    op("Affine per element", Affine<dyn, float>{values_1d(E, 0.5f, 1.5f, 1), values_1d(E, -0.1f, 0.1f, 2)},
       2 * nb + 2.0 * double(E) * sizeof(float));
    op("BatchNorm", BatchNorm<dyn, float>{values_1d(C, 0.5f, 1.5f, 3), values_1d(C, -0.1f, 0.1f, 4),
                                          values_1d(C, -0.1f, 0.1f, 5), values_1d(C, 0.5f, 2.0f, 6)});
    op_on(flat, "BatchNorm per feature", BatchNorm<dyn, float>{values_1d(E, 0.5f, 1.5f, 3), values_1d(E, -0.1f, 0.1f, 4),
                                                      values_1d(E, -0.1f, 0.1f, 5), values_1d(E, 0.5f, 2.0f, 6)},
          2 * nb + 4.0 * double(E) * sizeof(float));
    op("LayerNorm", LayerNorm<dyn, float>{values_1d(C, 0.5f, 1.5f, 3), values_1d(C, -0.1f, 0.1f, 4)});
    op("PReLU per channel", PReLU<dyn, float>{values_1d(C, 0.05f, 0.3f, 7)});
    op("ChannelShuffle", ChannelShuffle{2});
    op("ChannelSlice", ChannelSlice<>{0, C / 2});
    op("GlobalAvgPool", GlobalAvgPool{});
    // joins: both operands the same tensor for Residual and Concat (empty branches: the identity),
    // so their memory traffic is one read of x; the product's gate per channel as in
    // squeeze-excitation (the kernel Product's forward calls, on distinct signal and gate buffers)
    op("Residual add (x + x)", DynamicResidual<float>{}, 2 * nb);
    {
      DynamicConcat<float> cc;
      cc.branches.resize(2);
      op("Concat [x, x]", cc, 3 * nb);
    }
    {
      const std::vector<float> g = normal_values(batch * C, 9);
      add("Product join (gate per channel)", 2 * nb + double(g.size()) * sizeof(float),
          [&] { detail::gate_multiply(batch, E, C, x.data(), g.data(), y.data()); });
      add("Product join (gate per element)", 3 * nb, [&] { detail::gate_multiply(batch, E, E, x.data(), x2.data(), y.data()); });
    }
  }
  std::map<std::size_t, double> copy_gbs;
  for (const op_row& r : rows)
    if (r.name == "STREAM copy") copy_gbs[r.batch] = r.bytes / r.ms / 1e6;
  std::ostringstream o;
  if (text) {
    o << "ops on [64,32,32] images, batch 1 (256 KiB per tensor), 24 (6 MiB), 256 (64 MiB)\n";
    o << "op                                   batch      MB        ms     GB/s  of copy\n";
    for (const op_row& r : rows) {
      char b[256];
      const double g = r.bytes / r.ms / 1e6;
      std::snprintf(b, sizeof b, "%-36s %5zu %7.2f %9.4f %8.2f %7.0f%%\n", r.name.c_str(), r.batch, r.bytes / 1e6, r.ms, g,
                    100 * g / copy_gbs[r.batch]);
      o << b;
    }
    return o.str();
  }
  o << "{\"shape\":\"[64,32,32]\",\"rows\":[";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const op_row& r = rows[i];
    const double g = r.bytes / r.ms / 1e6;
    o << (i ? "," : "") << "\n{\"op\":" << json_str(r.name) << ",\"batch\":" << r.batch << ",\"bytes\":" << num(r.bytes, 10)
      << ",\"ms\":" << num(r.ms) << ",\"GBs\":" << num(g) << ",\"of_copy\":" << num(g / copy_gbs[r.batch], 3) << "}";
  }
  o << "]}\n";
  return o.str();
}

std::vector<std::size_t> parse_list(const std::string& s) {
  std::vector<std::size_t> v;
  std::stringstream ss(s);
  for (std::string t; std::getline(ss, t, ',');)
    if (!t.empty()) v.push_back(std::stoul(t));
  return v;
}

int usage() {
  std::cerr << "usage: bench_zoo MODEL.onnx [--batch 1,16] [--reps N] [--warmup N] [--par]\n"
               "       bench_zoo MODEL.onnx --layers [--batch 16] [--reps N] [--text]\n"
               "       bench_zoo --ops [--reps N] [--text]\n"
               "       bench_zoo MODEL.onnx --run IN.f32 OUT.f32\n"
               "       bench_zoo MODEL.onnx --serve [--par]   (stdin: lines 'BATCH REPS')\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  setenv("NNLENS_NUM_THREADS", "1", 0);
  options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error(a + " needs a value");
      return argv[++i];
    };
    try {
      if (a == "--batch") opt.batches = parse_list(value()), opt.batch_given = true;
      else if (a == "--reps") opt.reps = std::stoul(value()), opt.reps_given = true;
      else if (a == "--warmup") opt.warmup = std::stoul(value());
      else if (a == "--layers") opt.layers = true;
      else if (a == "--ops") opt.ops = true;
      else if (a == "--serve") opt.serve = true;
      else if (a == "--text") opt.text = true;
      else if (a == "--par") opt.par = true;
      else if (a == "--run") opt.run_in = value(), opt.run_out = value();
      else if (a.size() > 1 && a[0] == '-') return usage();
      else opt.model = a;
    } catch (const std::exception& e) {
      std::cerr << "bench_zoo: " << e.what() << "\n";
      return usage();
    }
  }
  if (opt.reps == 0) return usage();
  if (opt.ops) {
    std::cout << ops_report(opt.reps_given ? opt.reps : 7, opt.text);
    return 0;
  }
  if (opt.model.empty()) return usage();
  DynamicNetwork net;
  const auto t0 = clk::now();
  try {
    net = io::load_onnx(opt.model);
  } catch (const std::exception& e) {
    std::cout << "{\"model\":" << json_str(opt.model) << ",\"error\":" << json_str(e.what()) << "}\n";
    std::cerr << "bench_zoo: " << e.what() << "\n";
    return 1;
  }
  const double load_ms = std::chrono::duration<double, std::milli>(clk::now() - t0).count();
  if (!opt.run_in.empty()) {
    std::FILE* f = std::fopen(opt.run_in.c_str(), "rb");
    if (!f) return std::cerr << "bench_zoo: cannot read " << opt.run_in << "\n", 1;
    std::vector<float> v;
    float buf[4096];
    for (std::size_t k; (k = std::fread(buf, sizeof(float), 4096, f)) > 0;) v.insert(v.end(), buf, buf + k);
    std::fclose(f);
    const std::size_t per = net.input_shape().size(), batch = v.size() / per;
    if (batch == 0 || batch * per != v.size())
      return std::cerr << "bench_zoo: " << opt.run_in << " holds " << v.size() << " floats, not a multiple of " << per << "\n", 1;
    xt::xarray<float> x = xt::xarray<float>::from_shape(net.input_shape().with_batch(batch));
    std::copy(v.begin(), v.end(), x.data());
    const auto y = forward(execution::seq, net, x);
    std::FILE* o = std::fopen(opt.run_out.c_str(), "wb");
    if (!o || std::fwrite(y.data(), sizeof(float), y.size(), o) != y.size())
      return std::cerr << "bench_zoo: cannot write " << opt.run_out << "\n", 1;
    std::fclose(o);
    return 0;
  }
  if (opt.serve) {
    std::cout << "{\"ready\":true,\"layers\":" << net.size() << ",\"load_ms\":" << num(load_ms) << "}" << std::endl;
    for (std::string line; std::getline(std::cin, line);) {
      std::istringstream ls(line);
      std::size_t batch = 0, reps = 0;
      if (!(ls >> batch >> reps) || batch == 0 || reps == 0) {
        std::cout << "{\"error\":\"expected 'BATCH REPS'\"}" << std::endl;
        continue;
      }
      std::cout << forward_json(net, batch, reps, 1, opt.par) << std::endl;
    }
    return 0;
  }
  if (opt.layers) {
    const std::size_t batch = opt.batch_given ? opt.batches.front() : 16;
    std::cout << layers_report(net, batch, opt.reps_given ? opt.reps : 7, opt.text);
    return 0;
  }
  std::cout << "{\"model\":" << json_str(opt.model) << ",\"layers\":" << net.size() << ",\"load_ms\":" << num(load_ms)
            << ",\"threads\":" << (opt.par ? worker_threads() : 1) << ",\"runs\":[";
  for (std::size_t i = 0; i < opt.batches.size(); ++i)
    std::cout << (i ? "," : "") << forward_json(net, opt.batches[i], opt.reps, opt.warmup, opt.par);
  std::cout << "]}\n";
  return 0;
}
