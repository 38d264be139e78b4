// tools/nnlens/exactline_cmd.cpp -- `nnlens exact-line`, `nnlens ig` (see exactline_cmd.hpp).
#include "exactline_cmd.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <optional>
#include <type_traits>
#include <set>
#include <sstream>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include <nnlens/core/error.hpp>
#include <nnlens/exactline/classify.hpp>
#include <nnlens/exactline/gradient.hpp>
#include <nnlens/exactline/ig.hpp>
#include <nnlens/exactline/line.hpp>
#include <nnlens/io/csv.hpp>
#include <nnlens/network/cast.hpp>
#include <nnlens/network/forward.hpp>

#include "format.hpp"
#include "model.hpp"

namespace nnlens::tool {

/// --classes: the words of class_rule.
const enum_names<class_rule>& class_rule_names() {
  static const enum_names<class_rule> names{{"argmax", class_rule::argmax}, {"argmin", class_rule::argmin}};
  return names;
}

namespace {

using json = nlohmann::ordered_json;  // keys in the documented order

/// The samples of a CSV file (rows in the model's data layout, kept in the network's internal
/// order) and the file line each one comes from.
template <class T>
struct csv_rows {
  std::string path;
  xt::xarray<T> x;                    // [N, input shape...] (internal order)
  std::vector<std::vector<T>> rows;   // N flattened samples (internal order)
  std::vector<std::size_t> lines;     // the file line of each sample (1-based)
  std::string where(std::size_t i) const { return concat(path, ":", lines[i]); }
};

template <class T>
csv_rows<T> read_rows(const std::string& path, const input_layout& in, io::csv_header header) {
  csv_rows<T> r;
  r.path = path;
  r.x = read_samples<T>(path, in, &r.lines, header);  // lines: the reader's own (io::read_csv_rows)
  const std::size_t n = r.x.shape()[0], d = in.net_input.size();
  r.rows.resize(n);
  for (std::size_t i = 0; i < n; ++i) r.rows[i].assign(r.x.data() + i * d, r.x.data() + (i + 1) * d);
  return r;
}

/// A per-input-element vector in the internal order -> the data layout's order.
template <class T>
std::vector<T> in_data_order(const std::vector<T>& v, const input_layout& in) {
  xt::xarray<T> x = xt::adapt(v, std::vector<std::size_t>{1, v.size()});
  const xt::xarray<T> y = to_data_layout<T>(x, in);
  return std::vector<T>(y.begin(), y.end());
}

/// The tolerance of --validate, and what "resolved" means for endpoints at precision T: relative
/// deviations up to this are rounding (double: 1e-9, the library's default; float: 1e-3 -- ACAS Xu
/// segments inside the declared range deviate by up to 1.3e-4 in float).
template <class T>
constexpr double resolution_tol = std::is_same_v<T, float> ? 1e-3 : 1e-9;

/// How far outside the declared input range (in half-widths s, see range_excess) precision T still
/// places the breaks to resolution_tol.  Measured on ACAS Xu 1_1 (segments reaching s half-widths
/// along rho): the pieces deviate by about 100 eps s (f64: 7.0e-9 at s = 3.3e5; f32: 1.9e-3 at
/// s = 297; f64 7.9e-10 at s = 2e4), so the limit is tol / (400 eps): 1.1e4 in f64, 21 in f32.  Segments between 1 and the
/// limit are validated (and fail on a violation); beyond the limit they fail at once.
template <class T>
constexpr double resolution_limit = resolution_tol<T> / (400 * double(std::numeric_limits<T>::epsilon()));

/// How far the segment P -> Q reaches outside the declared input range: max_i of
/// max(|P_i - c_i|, |Q_i - c_i|) / h_i (c_i the range's centre, h_i its half-width; <= 1 inside);
/// the element reaching furthest in `at`.  0 when no range is declared.
template <class T>
double range_excess(const std::vector<T>& P, const std::vector<T>& Q, const input_layout& in, std::size_t& at) {
  double worst = 0;
  at = 0;
  if (in.range_min.size() != P.size()) return 0;
  for (std::size_t i = 0; i < P.size(); ++i) {
    const double c = 0.5 * (in.range_min[i] + in.range_max[i]), h = 0.5 * (in.range_max[i] - in.range_min[i]);
    if (!(h > 0)) continue;
    const double e = std::max(std::abs(double(P[i]) - c), std::abs(double(Q[i]) - c)) / h;
    if (e > worst) worst = e, at = i;
  }
  return worst;
}


std::string xml_escape(std::string_view s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '&': o += "&amp;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

using intervals = std::vector<class_interval<double>>;

/// One strip per segment: a coloured band per class interval, a tick at every break, a legend.
template <class T>
void write_svg(const std::string& path, const std::vector<line_result<T>>& res, const std::vector<intervals>& cls,
               const std::vector<std::string>& names, const std::vector<std::string>& labels_of, const std::string& title) {
  static constexpr std::array<const char*, 10> palette{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                                       "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
  auto colour = [](std::size_t c) { return palette[c % palette.size()]; };
  const double L = 230, W = 640, H = 26, gap = 30, top = 40;
  const std::size_t n = res.size();
  std::set<std::size_t> labels;
  for (const auto& iv : cls)
    for (const auto& c : iv) labels.insert(c.label);
  const double axis_y = top + double(n) * (H + gap);
  const double legend_y = axis_y + 34;
  const double height = legend_y + 20 * double((labels.size() + 5) / 6) + 16;
  std::ostringstream s;
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << L + W + 30 << "\" height=\"" << height
    << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  s << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  s << "<text x=\"10\" y=\"22\" font-size=\"14\">" << xml_escape(title) << "</text>\n";
  for (std::size_t i = 0; i < n; ++i) {
    const double y = top + double(i) * (H + gap);
    const auto& r = res[i];
    s << "<text x=\"10\" y=\"" << y + 11 << "\"><title>" << xml_escape(names[i]) << "</title>segment " << i + 1
      << "</text>\n<text x=\"10\" y=\"" << y + 24 << "\" font-size=\"10\" fill=\"#555555\">" << xml_escape(labels_of[i])
      << "</text>\n";
    if (!r.error.empty()) {
      s << "<rect x=\"" << L << "\" y=\"" << y << "\" width=\"" << W << "\" height=\"" << H
        << "\" fill=\"#eeeeee\" stroke=\"#999999\"/>\n";
      s << "<text x=\"" << L + 6 << "\" y=\"" << y + H / 2 + 4 << "\" fill=\"#aa0000\">error: "
        << xml_escape(r.error.substr(0, 90)) << "</text>\n";
      continue;
    }
    for (const auto& c : cls[i])
      s << "<rect x=\"" << L + c.from * W << "\" y=\"" << y << "\" width=\"" << (c.to - c.from) * W << "\" height=\"" << H
        << "\" fill=\"" << colour(c.label) << "\"><title>class " << c.label << ": t in [" << fmt(c.from, "%.9g") << ", "
        << fmt(c.to, "%.9g") << "]</title></rect>\n";
    s << "<rect x=\"" << L << "\" y=\"" << y << "\" width=\"" << W << "\" height=\"" << H
      << "\" fill=\"none\" stroke=\"black\" stroke-width=\"0.6\"/>\n";
    s << "<path stroke=\"black\" stroke-width=\"0.5\" d=\"";  // ticks at every break t_j
    for (double t : r.t) s << "M" << L + t * W << " " << y + H << "v6";
    s << "\"/>\n";
    s << "<text x=\"" << L + W + 4 << "\" y=\"" << y + H + 14 << "\" font-size=\"10\" text-anchor=\"end\">" << r.pieces()
      << " pieces</text>\n";
  }
  for (int q = 0; q <= 4; ++q) {
    const double x = L + W * q / 4.0;
    s << "<line x1=\"" << x << "\" y1=\"" << axis_y - 8 << "\" x2=\"" << x << "\" y2=\"" << axis_y - 2
      << "\" stroke=\"black\"/><text x=\"" << x << "\" y=\"" << axis_y + 10 << "\" text-anchor=\"middle\">"
      << fmt(q / 4.0, "%g") << "</text>\n";
  }
  s << "<text x=\"" << L + W / 2 << "\" y=\"" << axis_y + 24 << "\" text-anchor=\"middle\">t</text>\n";
  std::size_t q = 0;
  for (std::size_t c : labels) {
    const double x = 10 + 110 * double(q % 6), y = legend_y + 20 * double(q / 6);
    s << "<rect x=\"" << x << "\" y=\"" << y << "\" width=\"14\" height=\"14\" fill=\"" << colour(c)
      << "\"/><text x=\"" << x + 20 << "\" y=\"" << y + 11 << "\">class " << c << "</text>\n";
    ++q;
  }
  s << "</svg>\n";
  std::ofstream f(path, std::ios::trunc);
  if (!f) throw io_error(path + ": cannot open for writing");
  f << s.str();
  f.flush();
  if (!f) throw io_error(path + ": write error");
}

/// The range and resolution checks of the endpoints (see exactline_cmd.hpp): a segment that
/// reaches beyond what T resolves fails before it runs; one that leaves the declared range only
/// gets a warning (the network clamps it).
template <class T>
void check_endpoints(const csv_rows<T>& A, const csv_rows<T>& B, const input_layout& in, precision prec,
                     std::vector<std::string>& errors, std::vector<std::string>& warnings) {
  const double limit = resolution_limit<T>;
  for (std::size_t i = 0; i < A.rows.size(); ++i) {
    std::size_t at = 0;
    const double e = range_excess(A.rows[i], B.rows[i], in, at);
    if (e <= 1) continue;
    const std::string elem = concat("input ", at, " (declared range [", fmt(in.range_min[at], "%.9g"), ", ",
                                    fmt(in.range_max[at], "%.9g"),
                                    "])");
    if (e > limit)
      errors[i] = concat("the segment reaches ", fmt(e, "%.3g"), " half-widths from the centre of ", elem,
                         "; beyond ", fmt(limit, "%.3g"), " ", precision_name(prec),
                         " cannot place the breaks to ", fmt(resolution_tol<T>, "%g"),
                         " (the pieces would not be exact)",
                         prec == precision::f32 ? "; use --precision f64 or shorter segments" : "; use shorter segments");
    else
      warnings[i] = concat("outside the declared input range: ", elem, " reaches ", fmt(e, "%.3g"),
                           " half-widths from its centre (the network clamps it; the segment is validated)");
  }
}

template <class T>
int exact_line_as(const exact_line_options& o, precision prec) {
  const class_rule rule = o.classes;
  if (!(o.merge_tol >= 0 && o.merge_tol <= 1))
    throw value_error(concat("--merge-tol: expected a distance in t between 0 and 1, got ", fmt(o.merge_tol, "%.6g")));
  const model<T> m = load_model<T>(o.model, o.layout);
  const csv_rows<T> A = read_rows<T>(o.from, m.in, o.header), B = read_rows<T>(o.to, m.in, o.header);
  if (A.rows.size() != B.rows.size())
    throw shape_error(concat(o.from, " has ", A.rows.size(), " samples but ", o.to, " has ", B.rows.size(),
                             ": line i of each gives segment i"));
  const std::size_t n = A.rows.size();
  std::vector<std::string> pre_errors(n), warnings(n);
  check_endpoints(A, B, m.in, prec, pre_errors, warnings);
  line_options lo;
  lo.merge_tol = o.merge_tol;
  lo.max_pieces = o.max_pieces;
  lo.validate = o.validate;
  if (!(o.validate_tol >= 0 && o.validate_tol < 1))
    throw value_error(concat("--validate-tol: expected a relative tolerance in [0, 1), got ", fmt(o.validate_tol, "%.6g")));
  const double vtol = o.validate_tol > 0 ? o.validate_tol : resolution_tol<T>;
  lo.validate_tol = vtol;
  lo.keep_going = true;
  const auto t0 = std::chrono::steady_clock::now();
  // the segments that pass the checks: inside the declared range (validated with --validate), and
  // outside it (always validated: a violation fails the segment)
  std::vector<line_result<T>> res(n);
  std::vector<bool> checked(n, o.validate);
  for (const bool outside : {false, true}) {
    std::vector<std::vector<T>> As, Bs;
    std::vector<std::size_t> idx;
    for (std::size_t i = 0; i < n; ++i)
      if (pre_errors[i].empty() && warnings[i].empty() != outside)
        As.push_back(A.rows[i]), Bs.push_back(B.rows[i]), idx.push_back(i);
    if (idx.empty()) continue;
    line_options l = lo;
    l.validate = lo.validate || outside;
    auto ran = exact_lines<T>(execution::par, m.net, As, Bs, l);
    for (std::size_t k = 0; k < idx.size(); ++k) {
      res[idx[k]] = std::move(ran[k]);
      checked[idx[k]] = l.validate;
    }
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (!pre_errors[i].empty()) {
      res[i].error = pre_errors[i];
    } else if (!o.validate && checked[i] && res[i].error.empty() && res[i].stats.violations) {
      // validated only because it leaves the declared range: not exact at this precision
      const auto& st = res[i].stats;
      res[i].error = concat(st.violations, " of ", st.validated_pieces, " pieces deviate from the network by up to ",
                            fmt(st.max_deviation, "%.3g"), " (tolerance ", fmt(vtol, "%g"),
                            "): the endpoints leave the declared input range further than ", precision_name(prec),
                            " resolves", prec == precision::f32 ? "; use --precision f64 or shorter segments" : "; use shorter segments");
      res[i].t.clear();
      res[i].values.clear();
    }
  }
  std::vector<intervals> cls(n);
  for (std::size_t i = 0; i < n; ++i)
    if (res[i].error.empty()) cls[i] = classify_line(res[i], rule);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  std::vector<std::string> names(n), raw_errors(n);
  std::size_t failed = 0, first_failed = 0, invalid = 0, first_invalid = 0, violations = 0;
  for (std::size_t i = 0; i < n; ++i) {
    names[i] = concat("segment ", i + 1, " (", A.where(i), " -> ", B.where(i), ")");
    if (!res[i].error.empty()) {
      raw_errors[i] = res[i].error;
      res[i].error = concat(A.where(i), " -> ", B.where(i), ": ", res[i].error);
      if (failed++ == 0) first_failed = i;
    } else if (checked[i] && res[i].stats.violations) {
      violations += res[i].stats.violations;
      if (invalid++ == 0) first_invalid = i;
    }
    if (!warnings[i].empty()) std::cerr << "nnlens: warning: " << A.where(i) << " -> " << B.where(i) << ": " << warnings[i] << "\n";
  }

  if (o.json) {
    json j;
    j["precision"] = precision_name(prec);
    j["input"] = m.in.describe();
    j["layout"] = io::layout_name(m.in.data);
    j["lines"] = json::array();
    for (std::size_t i = 0; i < n; ++i) {
      const auto& r = res[i];
      json l;
      l["t"] = r.t;
      l["outputs"] = json::array();
      for (std::size_t p = 0; p < r.t.size(); ++p) {
        const auto y = r.output(p);
        l["outputs"].push_back(std::vector<double>(y.begin(), y.end()));
      }
      l["pieces"] = r.pieces();
      l["classes"] = json::array();
      for (const auto& c : cls[i]) l["classes"].push_back(json{{"from", c.from}, {"to", c.to}, {"label", c.label}});
      if (checked[i] && r.error.empty())
        l["validation"] = json{{"pieces", r.stats.validated_pieces},
                               {"violations", r.stats.violations},
                               {"max_deviation", r.stats.max_deviation},
                               {"tolerance", vtol},
                               {"valid", r.stats.violations == 0}};
      if (!warnings[i].empty()) l["warning"] = warnings[i];
      if (!r.error.empty()) l["error"] = r.error;
      j["lines"].push_back(std::move(l));
    }
    if (o.validate) j["valid"] = invalid == 0 && failed == 0;
    j["seconds"] = seconds;
    std::cout << j.dump() << "\n";
  } else {
    std::cout << o.model << ": " << n << " segment" << (n == 1 ? "" : "s") << ", classes by " << enum_word(class_rule_names(), o.classes) << ", "
              << precision_name(prec) << ", " << fmt(seconds, "%.3g") << " s\n";
    for (std::size_t i = 0; i < n; ++i) {
      const auto& r = res[i];
      std::cout << names[i] << ": ";
      if (!r.error.empty()) {
        std::cout << "error: " << raw_errors[i] << "\n";
        continue;
      }
      std::cout << r.pieces() << " piece" << (r.pieces() == 1 ? "" : "s") << ", " << cls[i].size() << " class interval"
                << (cls[i].size() == 1 ? "" : "s") << "\n";
      if (!warnings[i].empty()) std::cout << "  warning: " << warnings[i] << "\n";
      if (checked[i])
        std::cout << "  validated " << r.stats.validated_pieces << " pieces: " << r.stats.violations
                  << " violations, max deviation " << fmt(r.stats.max_deviation, "%.3g") << " (tolerance "
                  << fmt(vtol, "%g") << ")" << (r.stats.violations ? ": NOT VALID" : "") << "\n";
      std::printf("  %-16s %-16s %s\n", "from t", "to t", "class");
      std::fflush(stdout);
      for (const auto& c : cls[i])
        std::printf("  %-16s %-16s %zu\n", fmt(c.from, "%.9g").c_str(), fmt(c.to, "%.9g").c_str(), c.label);
      std::fflush(stdout);
    }
  }
  std::cout.flush();
  if (!o.svg.empty()) {
    auto base = [](const std::string& p) { return std::filesystem::path(p).filename().string(); };
    std::vector<std::string> short_names(n);
    for (std::size_t i = 0; i < n; ++i)
      short_names[i] = concat(base(A.path), ":", A.lines[i], " -> ", base(B.path), ":", B.lines[i]);
    write_svg(o.svg, res, cls, names, short_names,
              concat("ExactLine: ", base(o.model), " (classes by ", enum_word(class_rule_names(), o.classes), ")"));
  }
  if (failed)
    throw value_error(concat(res[first_failed].error,
                             failed > 1 ? concat(" (and ", failed - 1, " more failed segments)") : std::string()));
  if (invalid)
    throw value_error(concat("validation failed: ", violations, " piece", violations == 1 ? "" : "s", " on ", invalid,
                             " segment", invalid == 1 ? "" : "s", " deviate from the network by more than ",
                             fmt(vtol, "%g"), " (first: ", names[first_invalid], ", max deviation ",
                             fmt(res[first_invalid].stats.max_deviation, "%.3g"), ")"));
  return 0;
}

template <class T>
int ig_as(const ig_options& o, precision prec) {
  if (o.m == 0) throw value_error("--m: expected at least 1 partition");
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

  json all = json::array();
  for (std::size_t i = 0; i < X.rows.size(); ++i) {
    const std::size_t bi = B.rows.size() == 1 ? 0 : i;
    const std::string where = concat(X.where(i), " (baseline ", B.where(bi), ")");
    std::size_t k = 0;
    if (o.output_index) {
      k = *o.output_index;
    } else {
      const T* yi = y.data() + i * dout;
      k = std::size_t(std::max_element(yi, yi + dout) - yi);
    }
    ig_result<T> ig;
    try {
      ig = exact_ig<T>(net, X.rows[i], B.rows[bi], k);
    } catch (const error& e) {
      throw value_error(concat(where, ": ", e.what()));
    }
    const std::vector<T> exact = in_data_order(ig.attributions, md.in);  // per input element, data layout
    json r;
    r["output_index"] = k;
    r["exact"] = exact;
    r["pieces"] = ig.pieces();
    r["delta"] = ig.delta;
    r["riemann"] = json::object();
    r["samples_for_5pct"] = json::object();
    std::array<std::vector<T>, 3> approx;
    std::array<double, 3> rel{};
    std::array<std::optional<std::size_t>, 3> need;
    for (std::size_t q = 0; q < rules.size(); ++q) {
      const std::string name(rule_name(rules[q]));
      approx[q] = riemann_from_pieces(ig, o.m, rules[q]);
      rel[q] = ig_relative_error(approx[q], ig.attributions);
      need[q] = samples_to_reach(ig, rules[q], 0.05);
      approx[q] = in_data_order(approx[q], md.in);
      r["riemann"][name] = json{{"m", o.m}, {"ig", approx[q]}, {"rel_error", rel[q]}};
      r["samples_for_5pct"][name] = need[q] ? json(*need[q]) : json(nullptr);
    }
    if (o.json) {
      all.push_back(std::move(r));
      continue;
    }
    if (i) std::cout << "\n";
    std::cout << where << ": output " << k << ", " << ig.pieces()
              << " pieces, delta = F(x) - F(x') = " << fmt(double(ig.delta), "%.9g")
              << ", sum of exact IG = " << fmt(double(ig.sum), "%.9g") << " (" << precision_name(prec) << ")\n";
    std::printf("  %-9s %-16s %-16s %-16s %s\n", "feature", "exact", concat("left m=", o.m).c_str(),
                concat("right m=", o.m).c_str(), concat("trapezoid m=", o.m).c_str());
    for (std::size_t f = 0; f < exact.size(); ++f)
      std::printf("  %-9zu %-16s %-16s %-16s %s\n", f, fmt(double(exact[f]), "%.9g").c_str(),
                  fmt(double(approx[0][f]), "%.9g").c_str(), fmt(double(approx[1][f]), "%.9g").c_str(),
                  fmt(double(approx[2][f]), "%.9g").c_str());
    std::printf("  %-9s %-16s %-16s %-16s %s\n", "rel_error", "", fmt(rel[0], "%.4g").c_str(), fmt(rel[1], "%.4g").c_str(),
                fmt(rel[2], "%.4g").c_str());
    auto nn = [](const std::optional<std::size_t>& v) { return v ? std::to_string(*v) : std::string("> 1006 partitions"); };
    std::printf("  samples for 5%% error: left %s, right %s, trapezoid %s\n", nn(need[0]).c_str(), nn(need[1]).c_str(),
                nn(need[2]).c_str());
    std::fflush(stdout);
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

}  // namespace

/// `nnlens exact-line MODEL --from A.csv --to B.csv`: ExactLine's pieces and class intervals.
void register_exact_line(CLI::App& app, command_list& cmds) {
  auto [cmd, o] = add_analysis<exact_line_options>(
      app, cmds, "exact-line", "ExactLine: the exact pieces and class intervals of the network on segments",
      []<class T>(const exact_line_options& opts) { return exact_line_as<T>(opts, opts.precision); });
  cmd.add_option("--from", o.from,
                 "CSV file of segment starts: one sample per line in the model's declared layout, as `run` reads them")
      ->required();
  cmd.add_option("--to", o.to, "CSV file of segment ends: line i of --from -> line i of --to is segment i")->required();
  cmd.add_flag("--json", o.json,
               "One JSON object: precision, input, layout, lines[{t, outputs, pieces, classes[{from, to, label}], "
               "validation?{pieces, violations, max_deviation, tolerance, valid}, warning?, error?}], valid?, seconds");
  add_enum(cmd, "--classes", o.classes, class_rule_names(),
           "Winning class: argmax (classifiers) or argmin (ACAS Xu advisories)");
  add_threads(cmd);
  cmd.add_option("--merge-tol", o.merge_tol, "Merge breaks closer than this in t (0 to 1)")->capture_default_str();
  cmd.add_option("--max-pieces", o.max_pieces, "Fail a segment with more pieces than this")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd.add_flag("--validate", o.validate,
               "Check every piece at 1/4, 1/2, 3/4 of its length against the network (tolerance 1e-9 in f64, 1e-3 "
               "in f32); a violation fails the command (exit 1)");
  cmd.add_option("--validate-tol", o.validate_tol,
                 "Relative tolerance of --validate: |f(x) - interpolation| <= tol (1 + |f(x)|) (default: 1e-9 in "
                 "f64, 1e-3 in f32)");
  cmd.add_option("--svg", o.svg, "Write an SVG strip chart (a band per class interval, a tick per break)");
  add_model_options(cmd, o, precision::f64);
  add_header_options(cmd, o.header);
}

/// `nnlens ig MODEL --input X.csv --baseline B.csv`: exact integrated gradients and Riemann sums.
void register_ig(CLI::App& app, command_list& cmds) {
  auto [cmd, o] = add_analysis<ig_options>(
      app, cmds, "ig", "Exact integrated gradients, and the Riemann sums' errors against them",
      []<class T>(const ig_options& opts) { return ig_as<T>(opts, opts.precision); });
  cmd.add_option("--input,-i", o.input, "CSV file: the inputs x, one per line in the model's declared layout")->required();
  cmd.add_option("--baseline,-b", o.baseline, "CSV file: the baselines x' (one line per input, or one for all)")->required();
  cmd.add_option("--output-index,-k", o.output_index, "The output k (default: the argmax at x)");
  cmd.add_flag("--json", o.json,
               "JSON: {output_index, exact, pieces, delta, riemann, samples_for_5pct} per input (attributions in "
               "the data layout), precision, layout");
  cmd.add_option("--m", o.m, "Partitions of the Riemann sums")->capture_default_str()->check(CLI::Range(1, 1 << 24));
  add_model_options(cmd, o, precision::f64);
  add_header_options(cmd, o.header);
}

}  // namespace nnlens::tool
