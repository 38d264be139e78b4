// nnlens/io/nnet.hpp -- the .nnet format (ACAS Xu; Kyle Julian, Stanford 2016): read and write.
//
//   load_nnet<T = float>(path, nnet_options)              -> basic_nnet_model<T> { net, norm, options }
//   parse_nnet<T = float>(text, name, nnet_options)       the same from memory (name appears in messages)
//   write_nnet(path | ostream, net, norm [, comment])     a Dense/ReLU chain in normalised units
//   write_nnet(path | ostream, model)                     a model loaded with both folds off
//
// Format (see ../shared/models/README.md): `//` comment lines; `numLayers,inputSize,outputSize,
// maxLayerSize,`; numLayers+1 layer sizes; a "symmetric" flag (ignored); input minimums, maximums;
// inputSize means + one output mean; inputSize ranges + one output range; then per weight layer
// size(k) lines of size(k-1) weights (row o = weights into neuron o) and size(k) lines of one bias.
// Numbers may use any float format (1, 1.0, 1e-3, +2.5E+01); trailing commas, blank lines, `//`
// comment lines anywhere and CRLF line ends are accepted.
//
// Semantics: those of the reference C++ reader (sisl/NNet cpp/nnet.cpp, evaluate_network with
// normalize = true): clamp input i to [min_i, max_i], x' = (x - mean_i) / range_i, ReLU after every
// weight layer but the last, y = y' * range_out + mean_out.
//
// The returned network (Dense<dyn,T> and ReLU layers; no ReLU after the last Dense) evaluates, by
// default, in RAW units, so nnlens::forward(model.net, raw) equals the reference reader's output:
//   * normalize_inputs (default true): (x - mean) / range is folded into the first Dense (exact in
//     real arithmetic; computed in double).  With clamp_inputs (default true) the network starts with
//     Affine{s = 1/(max-min), t = -min/(max-min)} -> Clamp{0, 1}, and the first Dense absorbs
//     x = u (max-min) + min as well: that is the per-feature clamp to [min_i, max_i] expressed with
//     scalar-bounded layers (an input with min == max becomes the constant min).  clamp_inputs =
//     false leaves a pure Dense/ReLU chain; clamp with norm.clamp_input(x) yourself then.
//   * rescale_outputs (default true): y * range_out + mean_out is folded into the last Dense.
//   With both false, net holds the file's weights unchanged (normalised units); norm's helpers
//   normalize_input / rescale_output then do the conversions (clamping included) on xarrays.
//
// requires: the .nnet text as above.  ensures: never reads out of bounds, and never allocates more
// than a bounded multiple of the file's size: a truncated file, a wrong count on any line, a
// non-number or non-finite number (also after conversion to T and folding), a non-integer or zero size, a range of 0, min > max, trailing
// data after the last bias, or sizes above nnet_limits all throw io_error "FILE:LINE: what".
// write_nnet prints every value in the shortest form that reads back exactly (std::to_chars), so
// write -> read is bit-exact; a network that is not a Dense/ReLU chain throws value_error.
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <ostream>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "nnlens/core/error.hpp"
#include "nnlens/core/tensor.hpp"
#include "nnlens/layers/affine.hpp"
#include "nnlens/layers/dense.hpp"
#include "nnlens/layers/hard_tanh.hpp"
#include "nnlens/layers/relu.hpp"
#include "nnlens/network/dynamic_network.hpp"

namespace nnlens::io {

/// Hostile-size caps (the file-size bound applies in addition).
struct nnet_limits {
  std::size_t max_layers = 4096;
  std::size_t max_layer_size = std::size_t(1) << 24;
  std::size_t max_parameters = std::size_t(1) << 28;
};

struct nnet_options {
  bool normalize_inputs = true;  // the network takes raw (physical) inputs
  bool clamp_inputs = true;      // with normalize_inputs: clamp to [min, max] inside the network
  bool rescale_outputs = true;   // the network returns y * range_out + mean_out
  nnet_limits limits{};
};

/// The normalisation lines of a .nnet file, with the reference reader's conversions.
struct nnet_normalization {
  std::vector<double> input_min, input_max, input_mean, input_range;
  double output_mean = 0.0, output_range = 1.0;

  std::size_t inputs() const { return input_min.size(); }

  /// Clamps each feature to [min_i, max_i].  x: [N, n] or [n].
  template <class T>
  xt::xarray<T> clamp_input(const xt::xarray<T>& x) const {
    return map_input(x, [&](T v, std::size_t i) { return T(std::clamp(double(v), input_min[i], input_max[i])); });
  }
  /// Clamp, then (x - mean_i) / range_i: the reference reader's input normalisation.
  template <class T>
  xt::xarray<T> normalize_input(const xt::xarray<T>& x) const {
    return map_input(x, [&](T v, std::size_t i) {
      return T((std::clamp(double(v), input_min[i], input_max[i]) - input_mean[i]) / input_range[i]);
    });
  }
  /// y * range_out + mean_out (element-wise, any shape).
  template <class T>
  xt::xarray<T> rescale_output(const xt::xarray<T>& y) const {
    xt::xarray<T> r = y;
    for (auto& v : r) v = T(double(v) * output_range + output_mean);
    return r;
  }

 private:
  template <class T, class F>
  xt::xarray<T> map_input(const xt::xarray<T>& x, F f) const {
    const std::size_t n = inputs();
    if (n == 0 || x.dimension() == 0 || x.shape(x.dimension() - 1) != n || x.dimension() > 2)
      throw shape_error(nnlens::detail::concat("nnet: expected inputs of shape [N, ", n, "] or [", n, "]"));
    xt::xarray<T> r = x;
    for (std::size_t k = 0; k < r.size(); ++k) r.data()[k] = f(x.data()[k], k % n);
    return r;
  }
};

template <class T = float>
struct basic_nnet_model {
  basic_dynamic_network<T> net;
  nnet_normalization norm;
  nnet_options options;  // how net was built (which conversions it contains)
};
using nnet_model = basic_nnet_model<float>;

namespace detail {

class nnet_parser {
 public:
  nnet_parser(std::string_view text, std::string name) : text_(text), name_(std::move(name)) {}

  [[noreturn]] void fail(std::size_t line, const std::string& what) const {
    throw io_error(nnlens::detail::concat(name_, ":", line, ": ", what));
  }
  [[noreturn]] void fail_eof(const std::string& expected) const {
    throw io_error(nnlens::detail::concat(name_, ":", line_no_, ": truncated: the file ends where ", expected,
                                          " should follow"));
  }
  std::size_t remaining_bytes() const { return text_.size() - pos_; }
  std::size_t line() const { return cur_line_; }

  /// The next data line (comments and blank lines skipped), split on commas; false at the end.
  bool next_line(std::vector<std::string_view>& tokens) {
    while (pos_ < text_.size()) {
      const std::size_t nl = text_.find('\n', pos_);
      const std::size_t end = nl == std::string_view::npos ? text_.size() : nl;
      std::string_view l = text_.substr(pos_, end - pos_);
      pos_ = nl == std::string_view::npos ? text_.size() : nl + 1;
      ++line_no_;
      l = trim(l);
      if (l.empty() || l.starts_with("//")) continue;
      cur_line_ = line_no_;
      tokens.clear();
      std::size_t p = 0;
      while (true) {
        const std::size_t c = l.find(',', p);
        const std::string_view tok = trim(l.substr(p, c == std::string_view::npos ? std::string_view::npos : c - p));
        if (c == std::string_view::npos) {
          if (!tok.empty()) tokens.push_back(tok);  // a trailing comma leaves an empty last token
          break;
        }
        if (tok.empty()) fail(cur_line_, nnlens::detail::concat("empty value in column ", tokens.size() + 1));
        tokens.push_back(tok);
        p = c + 1;
      }
      return true;
    }
    return false;
  }

  /// Reads one data line holding exactly `count` numbers into out (appended).
  void record(std::size_t count, const std::string& what, std::vector<double>& out) {
    if (!next_line(tok_)) fail_eof(what);
    if (tok_.size() != count)
      fail(cur_line_, nnlens::detail::concat(what, ": expected ", count, " value", count == 1 ? "" : "s", ", found ",
                                             tok_.size()));
    for (std::size_t i = 0; i < tok_.size(); ++i) out.push_back(number(tok_[i], i, what));
  }

  double number(std::string_view t, std::size_t col, const std::string& what) const {
    std::string_view s = t;
    if (!s.empty() && s.front() == '+') s.remove_prefix(1);
    double v = 0;
    const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || r.ec != std::errc{} || r.ptr != s.data() + s.size() || !std::isfinite(v))
      fail(cur_line_, nnlens::detail::concat(what, ": value ", col + 1, " '", std::string(t.substr(0, 40)),
                                             "' is not a finite number"));
    return v;
  }
  std::size_t count(double v, std::size_t col, const std::string& what, std::size_t cap) const {
    if (!(v >= 1) || v != std::floor(v) || v > double(cap))
      fail(cur_line_, nnlens::detail::concat(what, ": value ", col + 1, " must be an integer in [1, ", cap, "], got ",
                                             v));
    return std::size_t(v);
  }

  static std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
    return s;
  }

  std::vector<std::string_view> tok_;

 private:
  std::string_view text_;
  std::string name_;
  std::size_t pos_ = 0, line_no_ = 0, cur_line_ = 0;
};

inline std::string read_text_file(const std::filesystem::path& path, std::string_view what) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw io_error(nnlens::detail::concat(path.string(), ": is a directory, not ", what));
  std::ifstream f(path, std::ios::binary);
  if (!f) throw io_error(nnlens::detail::concat(path.string(), ": cannot open"));
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad()) throw io_error(nnlens::detail::concat(path.string(), ": read error"));
  return s;
}

template <class T>
void append_number(std::string& s, T v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  s.append(buf, r.ptr);
}

}  // namespace detail

namespace detail {
[[noreturn]] inline void bad_value(const nnet_parser& p, std::size_t k) {
  p.fail(p.line(), nnlens::detail::concat("layer ", k,
                                          ": a weight or bias overflows the network's scalar type (after folding "
                                          "the normalisation)"));
}
}  // namespace detail

/// Parses .nnet text; `name` (e.g. the path) prefixes every error message.
template <class T = float>
basic_nnet_model<T> parse_nnet(std::string_view text, const std::string& name = "<nnet>",
                               const nnet_options& opt = {}) {
  detail::nnet_parser p(text, name);
  const nnet_limits& lim = opt.limits;
  std::vector<double> v;

  // header: numLayers, inputSize, outputSize[, maxLayerSize]
  if (!p.next_line(p.tok_)) p.fail_eof("the header line numLayers,inputSize,outputSize,maxLayerSize");
  if (p.tok_.size() < 3 || p.tok_.size() > 4)
    p.fail(p.line(), nnlens::detail::concat("header: expected numLayers,inputSize,outputSize,maxLayerSize, found ",
                                            p.tok_.size(), " values"));
  for (std::size_t i = 0; i < p.tok_.size(); ++i) v.push_back(p.number(p.tok_[i], i, "header"));
  const std::size_t L = p.count(v[0], 0, "header (numLayers)", lim.max_layers);
  const std::size_t nin = p.count(v[1], 1, "header (inputSize)", lim.max_layer_size);
  const std::size_t nout = p.count(v[2], 2, "header (outputSize)", lim.max_layer_size);
  if (v.size() == 4) (void)p.count(v[3], 3, "header (maxLayerSize)", std::numeric_limits<std::size_t>::max() / 2);

  v.clear();
  p.record(L + 1, "layer sizes (numLayers+1 values)", v);
  std::vector<std::size_t> sizes(L + 1);
  for (std::size_t k = 0; k <= L; ++k) sizes[k] = p.count(v[k], k, "layer sizes", lim.max_layer_size);
  if (sizes.front() != nin)
    p.fail(p.line(), nnlens::detail::concat("layer sizes: the first size ", sizes.front(), " differs from inputSize ", nin));
  if (sizes.back() != nout)
    p.fail(p.line(), nnlens::detail::concat("layer sizes: the last size ", sizes.back(), " differs from outputSize ", nout));
  // parameters: checked against the caps and against the bytes left (each value takes >= 2 bytes)
  std::size_t params = 0;
  for (std::size_t k = 1; k <= L; ++k) {
    const std::size_t w = sizes[k] * sizes[k - 1] + sizes[k];  // sizes <= 2^24: no overflow
    if (w > lim.max_parameters || params > lim.max_parameters - w)
      p.fail(p.line(), nnlens::detail::concat("layer sizes: more than ", lim.max_parameters, " parameters"));
    params += w;
  }
  if (params > p.remaining_bytes() / 2 + 1)
    p.fail(p.line(), nnlens::detail::concat("truncated: the layer sizes declare ", params, " parameters but only ",
                                            p.remaining_bytes(), " bytes follow"));

  v.clear();
  p.record(1, "the symmetric flag", v);
  nnet_normalization norm;
  v.clear();
  p.record(nin, "input minimums", norm.input_min);
  p.record(nin, "input maximums", norm.input_max);
  for (std::size_t i = 0; i < nin; ++i)
    if (norm.input_min[i] > norm.input_max[i])
      p.fail(p.line(), nnlens::detail::concat("input ", i + 1, ": minimum ", norm.input_min[i], " exceeds maximum ",
                                              norm.input_max[i]));
  p.record(nin + 1, "means (inputSize values, then the output mean)", norm.input_mean);
  norm.output_mean = norm.input_mean.back();
  norm.input_mean.pop_back();
  p.record(nin + 1, "ranges (inputSize values, then the output range)", norm.input_range);
  norm.output_range = norm.input_range.back();
  norm.input_range.pop_back();
  for (std::size_t i = 0; i < nin; ++i)
    if (norm.input_range[i] == 0) p.fail(p.line(), nnlens::detail::concat("ranges: input range ", i + 1, " is 0"));

  basic_nnet_model<T> model{basic_dynamic_network<T>(shape(nin)), norm, opt};
  const bool fold_in = opt.normalize_inputs, clamp = opt.normalize_inputs && opt.clamp_inputs;
  // the first Dense sees x = a_i u + c_i (u = the network input, or the clamped [0,1] coordinate)
  std::vector<double> a(nin, 1.0), c(nin, 0.0);
  if (clamp) {
    Affine<dyn, T> aff;
    aff.s = xt::zeros<T>({nin});
    aff.t = xt::zeros<T>({nin});
    for (std::size_t i = 0; i < nin; ++i) {
      const double w = norm.input_max[i] - norm.input_min[i];
      if (w > 0) {
        aff.s(i) = T(1.0 / w);
        aff.t(i) = T(-norm.input_min[i] / w);
      }
      a[i] = w;
      c[i] = norm.input_min[i];
    }
    model.net.add(std::move(aff));
    model.net.add(Clamp{0.0, 1.0});
  }

  std::vector<double> W, b;
  for (std::size_t k = 1; k <= L; ++k) {
    const std::size_t I = sizes[k - 1], O = sizes[k];
    W.clear();
    b.clear();
    W.reserve(I * O);
    b.reserve(O);
    for (std::size_t o = 0; o < O; ++o)
      p.record(I, nnlens::detail::concat("layer ", k, " weights, row ", o + 1, " of ", O), W);
    for (std::size_t o = 0; o < O; ++o)
      p.record(1, nnlens::detail::concat("layer ", k, " bias ", o + 1, " of ", O), b);
    // W is [O, I] (file order); fold the conversions in double
    if (k == 1 && fold_in) {
      for (std::size_t o = 0; o < O; ++o) {
        double acc = b[o];
        for (std::size_t i = 0; i < I; ++i) {
          const double wi = W[o * I + i] / norm.input_range[i];
          acc += wi * (c[i] - norm.input_mean[i]);
          W[o * I + i] = wi * a[i];
        }
        b[o] = acc;
      }
    }
    if (k == L && opt.rescale_outputs) {
      for (auto& w : W) w *= norm.output_range;
      for (auto& x : b) x = x * norm.output_range + norm.output_mean;
    }
    Dense<dyn, T> d;
    d.W = xt::zeros<T>({I, O});
    d.b = xt::zeros<T>({O});
    for (std::size_t o = 0; o < O; ++o) {
      for (std::size_t i = 0; i < I; ++i) d.W(i, o) = T(W[o * I + i]);
      d.b(o) = T(b[o]);
    }
    for (const T& x : d.W)
      if (!std::isfinite(x)) detail::bad_value(p, k);
    for (const T& x : d.b)
      if (!std::isfinite(x)) detail::bad_value(p, k);
    model.net.add(std::move(d));
    if (k < L) model.net.add(ReLU{});
  }
  std::vector<std::string_view> rest;
  if (p.next_line(rest)) p.fail(p.line(), "unexpected data after the last bias (wrong layer sizes?)");
  return model;
}

/// Reads a .nnet file (see the header comment for the units of the returned network).
template <class T = float>
basic_nnet_model<T> load_nnet(const std::filesystem::path& path, const nnet_options& opt = {}) {
  const std::string text = detail::read_text_file(path, "an .nnet file");
  return parse_nnet<T>(text, path.string(), opt);
}

/// Writes net (Dense, ReLU, Dense, ..., Dense, in normalised units: the file's own weights) and
/// the normalisation lines.  `comment` lines are prefixed with "// ".
template <class T>
void write_nnet(std::ostream& os, const basic_dynamic_network<T>& net, const nnet_normalization& norm,
                std::string_view comment = "Written by nnlens") {
  const shape in = net.input_shape();
  if (in.rank != 1) throw value_error("write_nnet: the network input must be flat (rank 1), got " + in.str());
  std::vector<const Dense<dyn, T>*> dense;
  for (std::size_t i = 0; i < net.size(); ++i) {
    const auto* d = std::get_if<Dense<dyn, T>>(&net.layer(i));
    const bool ok = i % 2 == 0 ? d != nullptr : std::holds_alternative<ReLU>(net.layer(i)) && i + 1 < net.size();
    if (!ok)
      throw value_error(nnlens::detail::concat("write_nnet: layer ", i, " is ", net.layer_name(i),
                                              "; .nnet holds Dense, ReLU, Dense, ..., Dense chains only"));
    if (d) dense.push_back(d);
  }
  if (dense.empty()) throw value_error("write_nnet: the network has no Dense layer");
  const std::size_t n = in[0];
  if (norm.input_min.size() != n || norm.input_max.size() != n || norm.input_mean.size() != n ||
      norm.input_range.size() != n)
    throw value_error(nnlens::detail::concat("write_nnet: the normalisation must hold ", n, " values per input line"));
  std::string s;
  std::size_t start = 0;
  while (start <= comment.size() && !comment.empty()) {
    const std::size_t e = std::min(comment.find('\n', start), comment.size());
    s += "// ";
    s.append(comment.substr(start, e - start));
    s += '\n';
    start = e + 1;
  }
  auto num = [&](auto v) {
    detail::append_number(s, v);
    s += ',';
  };
  const std::size_t out = net.output_shape()[0];
  std::size_t maxs = n;
  for (auto* d : dense) maxs = std::max(maxs, d->W.shape(1));
  num(dense.size()), num(n), num(out), num(maxs), s += '\n';
  num(n);
  for (auto* d : dense) num(d->W.shape(1));
  s += "\n0,\n";
  for (const auto* line : {&norm.input_min, &norm.input_max}) {
    for (double x : *line) num(x);
    s += '\n';
  }
  for (double x : norm.input_mean) num(x);
  num(norm.output_mean), s += '\n';
  for (double x : norm.input_range) num(x);
  num(norm.output_range), s += '\n';
  for (auto* d : dense) {
    const std::size_t I = d->W.shape(0), O = d->W.shape(1);
    for (std::size_t o = 0; o < O; ++o) {
      for (std::size_t i = 0; i < I; ++i) num(d->W(i, o));
      s += '\n';
    }
    for (std::size_t o = 0; o < O; ++o) num(d->b(o)), s += '\n';
  }
  os << s;
  if (!os) throw io_error("write_nnet: write failed");
}

template <class T>
void write_nnet(const std::filesystem::path& path, const basic_dynamic_network<T>& net,
                const nnet_normalization& norm, std::string_view comment = "Written by nnlens") {
  std::ofstream f(path, std::ios::binary);
  if (!f) throw io_error(path.string() + ": cannot open for writing");
  write_nnet(f, net, norm, comment);
  f.flush();
  if (!f) throw io_error(path.string() + ": write failed");
}

namespace detail {
template <class T>
void check_unfolded(const basic_nnet_model<T>& m) {
  if (m.options.normalize_inputs || m.options.rescale_outputs)
    throw value_error(
        "write_nnet: this model has the normalisation folded into its weights; load it with "
        "normalize_inputs = rescale_outputs = false to write it back");
}
}  // namespace detail

/// Writes a model loaded with normalize_inputs = rescale_outputs = false (the file's own weights).
template <class T>
void write_nnet(std::ostream& os, const basic_nnet_model<T>& m) {
  detail::check_unfolded(m);
  write_nnet(os, m.net, m.norm);
}
template <class T>
void write_nnet(const std::filesystem::path& path, const basic_nnet_model<T>& m) {
  detail::check_unfolded(m);
  write_nnet(path, m.net, m.norm);
}

}  // namespace nnlens::io
