// tools/nnlens/exact_line_cmd.cpp -- `nnlens exact-line` (see exact_line_cmd.hpp).
#include "exact_line_cmd.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <iostream>
#include <limits>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <sstream>
#include <string_view>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include <nnlens/core/error.hpp>
#include <nnlens/exactline/classify.hpp>
#include <nnlens/core/progress.hpp>
#include <nnlens/exactline/line.hpp>
#include <nnlens/exactline/stream.hpp>
#ifdef NNLENS_TOOL_HAS_MPI  // ---- MPI (docs/scale.md): `mpirun -np N nnlens exact-line` ----
#include <nnlens/mpi/exactline.hpp>

#include "mpi_world.hpp"
#endif

#include "exactline_common.hpp"
#include "format.hpp"
#include "model.hpp"

namespace nnlens::tool {

/// --classes: the words of class_rule.
const enum_names<class_rule>& class_rule_names() {
  static const enum_names<class_rule> names{{"argmax", class_rule::argmax}, {"argmin", class_rule::argmin}};
  return names;
}

/// --pieces FILE: every row as it is completed, one line each, segments numbered from 1 as the text
/// output names them.  FILE.csv: a header `segment,t,class,y0,...`, then rows; any other name: JSON
/// lines {"segment", "t", "class", "outputs"}.  Segments run at once, so their rows interleave (each
/// segment's in order of t).  The class is the winner of the outputs at t (ties:
/// the lowest index).  Numbers as the shortest decimals that read back exactly in their type (t in
/// double, the outputs in the precision's type).
template <class T>
class pieces_writer {
 public:
  /// csv: the format (FILE.csv's); header: the CSV header line first (MPI ranks but 0: none).
  pieces_writer(const std::string& path, std::size_t outputs, class_rule rule, bool csv, bool header)
      : path_(path), f_(path, std::ios::trunc), d_(outputs), rule_(rule), csv_(csv) {
    if (!f_) throw io_error(path + ": cannot open for writing (--pieces)");
    if (csv_ && header) {
      f_ << "segment,t,class";
      for (std::size_t k = 0; k < d_; ++k) f_ << ",y" << k;
      f_ << "\n";
    }
  }
  void row(std::size_t segment, double t, std::span<const T> y) {
    std::size_t best = 0;
    for (std::size_t k = 1; k < y.size(); ++k)
      if (rule_ == class_rule::argmax ? y[k] > y[best] : y[k] < y[best]) best = k;
    line_.clear();
    if (csv_) {
      line_ += concat(segment + 1, ",");
      number(t);
      line_ += concat(",", best);
      for (const T v : y) line_ += ',', number(v);
      line_ += "\n";
    } else {
      line_ += concat("{\"segment\":", segment + 1, ",\"t\":");
      number(t);
      line_ += concat(",\"class\":", best, ",\"outputs\":[");
      for (std::size_t k = 0; k < y.size(); ++k) {
        if (k) line_ += ',';
        number(y[k]);
      }
      line_ += "]}\n";
    }
    f_ << line_;
    if (!f_) throw io_error(path_ + ": write error (--pieces)");
  }
  void close() {
    f_.flush();
    if (!f_) throw io_error(path_ + ": write error (--pieces)");
    f_.close();
  }

 private:
  std::string path_;
  std::ofstream f_;
  std::size_t d_;
  class_rule rule_;
  bool csv_;
  std::string line_;

  /// The shortest decimal that reads back as v in its own type (std::to_chars).
  template <class V>
  void number(V v) {
    char buf[32];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    line_.append(buf, r.ptr);
  }
};

namespace {

using json = nlohmann::ordered_json;  // keys in the documented order

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

/// The range and resolution checks of the endpoints (see exact_line_cmd.hpp): a segment that
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

}  // namespace

template <class T>
int run_as(const exact_line_options& o) {
  const precision prec = o.precision;
  const class_rule rule = o.classes;
  if (!(o.merge_tol >= 0 && o.merge_tol <= 1))
    throw value_error(concat("--merge-tol: expected a distance in t between 0 and 1, got ", fmt(o.merge_tol, "%.6g")));
#ifdef NNLENS_TOOL_HAS_MPI  // under mpirun with N > 1 ranks (before the thread pool starts)
  mpi_world world;
#endif
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
  lo.max_memory = o.max_memory_mib << 20;
  lo.validate = o.validate;
  if (!(o.validate_tol >= 0 && o.validate_tol < 1))
    throw value_error(concat("--validate-tol: expected a relative tolerance in [0, 1), got ", fmt(o.validate_tol, "%.6g")));
  const double vtol = o.validate_tol > 0 ? o.validate_tol : resolution_tol<T>;
  lo.validate_tol = vtol;
  lo.keep_going = true;
  const auto t0 = std::chrono::steady_clock::now();
  // --pieces: every row written as it is completed, the values not kept
  // MPI: each rank its block of the segments, gathered on rank 0, which alone prints; its rows go
  // to FILE.rankK, appended to FILE by rank 0 at the end
  std::size_t seg_lo = 0, seg_hi = n;
  int rank = 0, ranks = 1;
#ifdef NNLENS_TOOL_HAS_MPI
  if (world) {
    const auto r = nnlens::mpi::shard(n, *world);
    seg_lo = r.begin, seg_hi = r.end, rank = world->rank(), ranks = world->size();
  }
#endif
  auto part_of = [&](int k) { return k == 0 ? o.pieces : concat(o.pieces, ".rank", k); };
  std::optional<pieces_writer<T>> writer;
  if (!o.pieces.empty()) writer.emplace(part_of(rank), m.net.output_shape().size(), rule,
                                         std::filesystem::path(o.pieces).extension() == ".csv", rank == 0);
  const bool keep = !writer;
  std::vector<line_result<T>> res(n);
  std::vector<intervals> cls(n);
  std::vector<std::optional<class_tracker<T>>> trackers(n);
  std::vector<double> covered(n, 0.0);
  std::size_t rows_so_far = 0;
  std::optional<progress_bar> bar;
  if (o.progress && rank == 0) bar.emplace("exact-line", 1000 * (seg_hi - seg_lo));
  std::mutex mu;  // segments run at once: the writer, the bar
  // the segments that pass the checks: inside the declared range (validated with --validate), and
  // outside it (always validated: a violation fails the segment)
  std::vector<bool> checked(n, o.validate);
  for (const bool outside : {false, true}) {
    std::vector<std::vector<T>> As, Bs;
    std::vector<std::size_t> idx;
    for (std::size_t i = 0; i < n; ++i)
      if (i >= seg_lo && i < seg_hi && pre_errors[i].empty() && warnings[i].empty() != outside)
        As.push_back(A.rows[i]), Bs.push_back(B.rows[i]), idx.push_back(i);
    if (idx.empty()) continue;
    line_options l = lo;
    l.validate = lo.validate || outside;
    for (std::size_t k = 0; k < idx.size(); ++k) trackers[idx[k]].emplace(m.net.output_shape().size(), rule);
    auto ran = exact_lines_stream<T>(
        execution::par, m.net, As, Bs,
        [&](std::size_t k, double t, std::span<const T> y) {
          const std::size_t i = idx[k];
          auto& r = res[i];
          r.t.push_back(t);
          if (keep) r.values.insert(r.values.end(), y.begin(), y.end());
          trackers[i]->row(t, y.data());
          std::lock_guard<std::mutex> lock(mu);
          if (writer) writer->row(i, t, y);
          ++rows_so_far;
          if (bar) {
            covered[i] = t;
            double sum = 0;
            for (double c : covered) sum += c;
            bar->update(std::size_t(1000 * sum), [&] { return concat(rows_so_far, " rows"); });
          }
        },
        l);
    for (std::size_t k = 0; k < idx.size(); ++k) {
      auto& r = res[idx[k]];
      r.stats = std::move(ran[k].stats);
      r.error = std::move(ran[k].error);
      r.input_shape = ran[k].input_shape;
      r.output_shape = ran[k].output_shape;
      r.from = As[k];
      r.to = Bs[k];
      checked[idx[k]] = l.validate;
    }
  }
  if (bar && bar->redraws() > 0) bar->finish(concat(rows_so_far, " rows"));
  if (writer) writer->close();
  for (std::size_t i = seg_lo; i < seg_hi; ++i) {
    if (!pre_errors[i].empty()) {
      res[i].error = pre_errors[i];
    } else if (!o.validate && checked[i] && res[i].error.empty() && res[i].stats.violations) {
      // validated only because it leaves the declared range: not exact at this precision
      const auto& st = res[i].stats;
      res[i].error = concat(st.violations, " of ", st.validated_pieces, " pieces deviate from the network by up to ",
                            fmt(st.max_deviation, "%.3g"), " (tolerance ", fmt(vtol, "%g"),
                            "): the endpoints leave the declared input range further than ", precision_name(prec),
                            " resolves", prec == precision::f32 ? "; use --precision f64 or shorter segments" : "; use shorter segments");
    }
    if (!res[i].error.empty()) {
      res[i].t.clear();
      res[i].values.clear();
    } else if (trackers[i]) {
      cls[i] = trackers[i]->intervals();
    }
  }
#ifdef NNLENS_TOOL_HAS_MPI
  if (world) {  // the blocks in rank order on rank 0
    const std::size_t k = seg_hi - seg_lo;
    const std::vector<line_result<T>> mine(std::make_move_iterator(res.begin() + std::ptrdiff_t(seg_lo)),
                                           std::make_move_iterator(res.begin() + std::ptrdiff_t(seg_hi)));
    const std::vector<intervals> my_cls(cls.begin() + std::ptrdiff_t(seg_lo), cls.begin() + std::ptrdiff_t(seg_hi));
    std::vector<std::uint8_t> my_checked(k);
    for (std::size_t i = 0; i < k; ++i) my_checked[i] = checked[seg_lo + i];
    auto all_res = nnlens::mpi::gather(*world, mine);
    auto all_cls = nnlens::mpi::gather(*world, my_cls);
    auto all_checked = nnlens::mpi::gather(*world, my_checked);
    if (rank != 0) return 0;
    res = std::move(*all_res);
    cls = std::move(*all_cls);
    for (std::size_t i = 0; i < n; ++i) checked[i] = (*all_checked)[i] != 0;
    if (!o.pieces.empty()) {  // the other ranks' rows after rank 0's, in rank order
      std::ofstream f(o.pieces, std::ios::app | std::ios::binary);
      for (int r = 1; r < ranks; ++r) {
        std::ifstream part(part_of(r), std::ios::binary);
        if (!part) throw io_error(part_of(r) + ": cannot read the rows of MPI rank " + std::to_string(r));
        f << part.rdbuf();
        part.close();
        std::filesystem::remove(part_of(r));
      }
      f.flush();
      if (!f) throw io_error(o.pieces + ": write error (--pieces)");
    }
  }
#endif
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
      if (keep) {
        l["t"] = r.t;
        l["outputs"] = json::array();
        for (std::size_t p = 0; p < r.t.size(); ++p) {
          const auto y = r.output(p);
          l["outputs"].push_back(std::vector<double>(y.begin(), y.end()));
        }
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
    if (writer) j["pieces_file"] = o.pieces;
    j["seconds"] = seconds;
    std::cout << j.dump() << "\n";
  } else {
    std::cout << o.model << ": " << n << " segment" << (n == 1 ? "" : "s") << ", classes by " << enum_word(class_rule_names(), o.classes) << ", "
              << precision_name(prec) << ", " << fmt(seconds, "%.3g") << " s\n";
    if (writer) std::cout << "rows written to " << o.pieces << " as they were completed\n";
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


/// `nnlens exact-line MODEL --from A.csv --to B.csv`: ExactLine's pieces and class intervals.
void register_exact_line(CLI::App& app, command_list& cmds) {
  auto [cmd, o] = add_analysis<exact_line_options>(
      app, cmds, "exact-line", "ExactLine: the exact pieces and class intervals of the network on segments");
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
  cmd.add_option("--max-memory", o.max_memory_mib,
                 "MiB of values in flight (the segments running at once share it): a layer that would pass it runs on "
                 "sub-segments one after the other, with the same pieces; 0: no bound")
      ->capture_default_str();
  cmd.add_flag("--validate", o.validate,
               "Check every piece at 1/4, 1/2, 3/4 of its length against the network (tolerance 1e-9 in f64, 1e-3 "
               "in f32); a violation fails the command (exit 1)");
  cmd.add_option("--validate-tol", o.validate_tol,
                 "Relative tolerance of --validate: |f(x) - interpolation| <= tol (1 + |f(x)|) (default: 1e-9 in "
                 "f64, 1e-3 in f32)");
  cmd.add_option("--svg", o.svg, "Write an SVG strip chart (a band per class interval, a tick per break)");
  cmd.add_option("--pieces", o.pieces,
                 "Write every row (t, class, outputs) to FILE as it is completed, and keep no values: FILE.csv as "
                 "CSV (segment,t,class,y0,...), any other name as JSON lines; --json then leaves out t and outputs");
  add_no_progress(cmd, o.progress);
  add_model_options(cmd, o, precision::f64);
  add_header_options(cmd, o.header);
}

}  // namespace nnlens::tool
