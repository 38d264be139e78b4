// ExactLine on ACAS Xu (docs/specs/exactline.md#3a-acas-xu-decision-boundaries, the paper's §3 and Fig. 2): exact advisory
// boundaries along lines of a head-on encounter, against the finite-sampling baselines.
//
//   exactline_acasxu [--models DIR] [--out DIR] [--quick] [--all] [--no-svg] [NET]
//
//   NET       a .nnet file, or a short name "i_j" (DIR/ACASXU_run2a_i_j_batch_2000.nnet);
//             default 1_1.  --models DIR: where the 45 files are (default ../shared/models/acasxu-nnet)
//   --out     where the SVGs go (default ./exactline_acasxu_out; --all: one sub-folder per network)
//   --quick   spokes and circles only (the ctest run)
//   --all     the 45 networks: one summary row each (and their figures)
//
// Units: the network is loaded in RAW units (io::load_nnet's defaults: the .nnet normalisation
// folded into the first Dense, outputs rescaled; the clamp to [min, max] stays in the network as
// Affine -> Clamp{0, 1}, which ExactLine handles exactly).  So a segment between two raw inputs
// (rho ft, theta rad, psi rad, v_own ft/s, v_int ft/s) is the segment the paper's preprocessing
// maps to a segment.  The advisory is the argmin score: COC, WL, WR, SL, SR.
// Geometry: ownship at (0, 0) heading +x (downrange); an intruder at (x, y) has rho = |(x, y)|,
// theta = atan2(y, x), so theta > 0 (y > 0, drawn up) is on the ownship's LEFT: the convention of
// the ACAS Xu properties (Reluplex phi5: "intruder approaching from the left" is 0.2 <= theta <= 0.4),
// checked at start-up on network 1_1 against phi5's expected "strong right".
//
// Exit status: 0; 1 when the self-check fails (a direct forward pass at the midpoint of an exact
// class interval disagrees with its label, beyond a tie); 2 for bad arguments or unreadable files.
#include <nnlens/io/nnet.hpp>
#include <nnlens/nnlens.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numbers>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace fs = std::filesystem;
using line_t = nnlens::line_result<double, double>;
using ivals_t = std::vector<nnlens::class_interval<double>>;
using vec = std::vector<double>;

constexpr double pi = std::numbers::pi;
constexpr double deg = pi / 180;
constexpr int n_labels = 5;
constexpr std::array<const char*, n_labels> label_short = {"COC", "WL", "WR", "SL", "SR"};
constexpr std::array<const char*, n_labels> label_long = {"clear of conflict", "weak left", "weak right", "strong left",
                                                           "strong right"};
// left = greens, right = reds, strong = darker; COC a light blue-grey
constexpr std::array<const char*, n_labels> label_color = {"#9fb3c8", "#74c476", "#fc9272", "#006d2c", "#a50f15"};
enum : std::size_t { COC, WL, WR, SL, SR };

// ---------------------------------------------------------------- the scenario (spec §3(a))
struct scenario {
  double psi = -pi, v_own = 150, v_int = 150;  // head-on
  double xmin = -6000, xmax = 10000, ymin = -6000, ymax = 6000;
  vec input(double rho, double theta) const { return {rho, theta, psi, v_own, v_int}; }
  bool in_box(double x, double y, double eps = 1e-6) const {
    return x >= xmin - eps && x <= xmax + eps && y >= ymin - eps && y <= ymax + eps;
  }
};

// A line of the study: a "distance" line (theta fixed, rho from a to b) or a "theta" line (rho
// fixed, theta from a to b).  Both are straight segments in raw input space.
struct study_line {
  bool distance;
  double fixed, a, b;
  double rho(double t) const { return distance ? a + t * (b - a) : fixed; }
  double theta(double t) const { return distance ? fixed : a + t * (b - a); }
  double x(double t) const { return rho(t) * std::cos(theta(t)); }
  double y(double t) const { return rho(t) * std::sin(theta(t)); }
  double feet(double t0, double t1) const { return (t1 - t0) * (b - a) * (distance ? 1.0 : fixed); }  // arc length
  vec P(const scenario& s) const { return distance ? s.input(a, fixed) : s.input(fixed, a); }
  vec Q(const scenario& s) const { return distance ? s.input(b, fixed) : s.input(fixed, b); }
};

/// rho where the ray at angle theta leaves the box.
double exit_rho(const scenario& s, double th) {
  const double c = std::cos(th), sn = std::sin(th), inf = 1e300;
  const double tx = c > 1e-12 ? s.xmax / c : c < -1e-12 ? s.xmin / c : inf;
  const double ty = sn > 1e-12 ? s.ymax / sn : sn < -1e-12 ? s.ymin / sn : inf;
  return std::min(tx, ty);
}

/// The theta intervals of the circle of radius rho that lie inside the box ([-pi, pi] when all).
std::vector<std::pair<double, double>> circle_arcs(const scenario& s, double rho) {
  vec th = {-pi, pi};
  for (double c : {s.xmin, s.xmax})
    if (std::abs(c) < rho) {
      const double a = std::acos(c / rho);
      th.push_back(a), th.push_back(-a);
    }
  for (double c : {s.ymin, s.ymax})
    if (std::abs(c) < rho) {
      const double a = std::asin(c / rho);
      th.push_back(a), th.push_back(a >= 0 ? pi - a : -pi - a);
    }
  std::sort(th.begin(), th.end());
  std::vector<std::pair<double, double>> arcs;
  for (std::size_t i = 0; i + 1 < th.size(); ++i) {
    if (th[i + 1] - th[i] < 1e-12) continue;
    const double m = 0.5 * (th[i] + th[i + 1]);
    if (!s.in_box(rho * std::cos(m), rho * std::sin(m))) continue;
    if (!arcs.empty() && std::abs(arcs.back().second - th[i]) < 1e-12)
      arcs.back().second = th[i + 1];
    else
      arcs.emplace_back(th[i], th[i + 1]);
  }
  return arcs;
}

std::vector<study_line> spokes(const scenario& s, int n) {  // n angles over [-180, 180)
  std::vector<study_line> v;
  for (int k = 0; k < n; ++k) {
    const double th = -pi + 2 * pi * k / n;
    v.push_back({true, th, 0.0, exit_rho(s, th)});
  }
  return v;
}
std::vector<study_line> circles(const scenario& s, int n) {  // rho_i = i/n rho_max, cut into in-box arcs
  const double rho_max = std::hypot(std::max(-s.xmin, s.xmax), std::max(-s.ymin, s.ymax));
  std::vector<study_line> v;
  for (int i = 1; i <= n; ++i) {
    const double rho = rho_max * i / n;
    for (auto [a, b] : circle_arcs(s, rho)) v.push_back({false, rho, a, b});
  }
  return v;
}

// ---------------------------------------------------------------- network helpers
std::size_t argmin5(const double* y) { return std::size_t(std::min_element(y, y + n_labels) - y); }

template <class Net>
std::vector<std::size_t> labels_at(const Net& net, const std::vector<vec>& pts) {
  if (pts.empty()) return {};
  xt::xarray<double> x = xt::zeros<double>({pts.size(), std::size_t(5)});
  for (std::size_t i = 0; i < pts.size(); ++i)
    for (std::size_t j = 0; j < 5; ++j) x(i, j) = pts[i][j];
  const auto y = nnlens::forward(net, x);
  std::vector<std::size_t> l(pts.size());
  for (std::size_t i = 0; i < pts.size(); ++i) l[i] = argmin5(y.data() + i * n_labels);
  return l;
}

struct analysed {
  std::vector<study_line> lines;
  std::vector<line_t> res;
  std::vector<ivals_t> iv;
  double seconds = 0;
};

template <class Net>
analysed run_lines(const Net& net, const scenario& s, std::vector<study_line> lines) {
  analysed a;
  a.lines = std::move(lines);
  const auto t0 = std::chrono::steady_clock::now();
  for (const auto& l : a.lines) a.res.push_back(nnlens::exact_line(net, l.P(s), l.Q(s)));
  a.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (const auto& r : a.res) a.iv.push_back(nnlens::classify_line(r, nnlens::class_rule::argmin));
  return a;
}

/// Self-check: a direct forward pass at the midpoint of every class interval reports its label
/// (or ties with it within 1e-7 relative).  Returns the number of disagreements.
template <class Net>
std::size_t self_check(const Net& net, const analysed& a) {
  std::vector<vec> pts;
  std::vector<std::size_t> want;
  for (std::size_t i = 0; i < a.res.size(); ++i)
    for (const auto& c : a.iv[i]) {
      pts.push_back(a.res[i].point(0.5 * (c.from + c.to)));
      want.push_back(c.label);
    }
  xt::xarray<double> x = xt::zeros<double>({pts.size(), std::size_t(5)});
  for (std::size_t i = 0; i < pts.size(); ++i)
    for (std::size_t j = 0; j < 5; ++j) x(i, j) = pts[i][j];
  const auto y = nnlens::forward(net, x);
  std::size_t bad = 0;
  for (std::size_t i = 0; i < pts.size(); ++i) {
    const double* yi = y.data() + i * n_labels;
    const double best = yi[argmin5(yi)];
    if (yi[want[i]] - best > 1e-7 * (1 + std::abs(best))) ++bad;
  }
  return bad;
}

/// A strong-turn island inside a weak region of the same side: SL between two WL, or SR between
/// two WR (the paper's Fig. 2a observation).
std::size_t islands(const ivals_t& iv) {
  std::size_t n = 0;
  for (std::size_t k = 1; k + 1 < iv.size(); ++k)
    if ((iv[k].label == SL && iv[k - 1].label == WL && iv[k + 1].label == WL) ||
        (iv[k].label == SR && iv[k - 1].label == WR && iv[k + 1].label == WR))
      ++n;
  return n;
}

std::string sequence(const ivals_t& iv) {
  std::string s;
  for (const auto& c : iv) s += (s.empty() ? "" : ">") + std::string(label_short[c.label]);
  return s;
}

// ---------------------------------------------------------------- the grid baseline
struct grid {
  static constexpr int n = 25;
  const scenario& s;
  std::vector<std::size_t> label;  // label[i * n + j]: x_i, y_j
  double dx() const { return (s.xmax - s.xmin) / (n - 1); }
  double dy() const { return (s.ymax - s.ymin) / (n - 1); }
  double gx(int i) const { return s.xmin + i * dx(); }
  double gy(int j) const { return s.ymin + j * dy(); }
  std::size_t nearest(double x, double y) const {
    const int i = std::clamp(int(std::lround((x - s.xmin) / dx())), 0, n - 1);
    const int j = std::clamp(int(std::lround((y - s.ymin) / dy())), 0, n - 1);
    return label[std::size_t(i * n + j)];
  }
};

template <class Net>
grid make_grid(const Net& net, const scenario& s) {
  grid g{s, {}};
  std::vector<vec> pts;
  for (int i = 0; i < grid::n; ++i)
    for (int j = 0; j < grid::n; ++j) {
      const double x = g.gx(i), y = g.gy(j);
      pts.push_back(s.input(std::hypot(x, y), std::atan2(y, x)));
    }
  g.label = labels_at(net, pts);
  return g;
}

/// The ratios t in (0, 1) where line l crosses x = c (or y = c when on_y).
void crossings(const study_line& l, double c, bool on_y, vec& out) {
  auto add = [&](double tt) {
    if (tt > 0 && tt < 1) out.push_back(tt);
  };
  if (l.distance) {
    const double u = on_y ? std::sin(l.fixed) : std::cos(l.fixed);
    if (std::abs(u) > 1e-12) add((c / u - l.a) / (l.b - l.a));
    return;
  }
  if (std::abs(c) > l.fixed) return;
  vec th;
  if (!on_y) {
    const double a = std::acos(c / l.fixed);
    th = {a, -a};
  } else {
    const double a = std::asin(c / l.fixed);
    th = {a, a >= 0 ? pi - a : -pi - a};
  }
  for (double v : th) add((v - l.a) / (l.b - l.a));
}

// Exact labels against the grid: every line is cut at its class-interval ends, at the borders of
// the grid's nearest-sample cells (x, y halfway between grid lines) and at the axes x = 0, y = 0;
// on each sub-interval the exact label, the label of the NEAREST grid sample and the region are
// constant (read at the midpoint), and its length in ft is added up.
struct grid_compare {
  double conf[n_labels][n_labels] = {};    // ft: [exact][nearest grid sample]
  double region[4][n_labels] = {};         // ft: [behind-left, behind-right, ahead-left, ahead-right][exact]
  std::size_t intervals = 0, missed = 0;   // exact intervals; those no nearest grid sample reports
  double missed_ft[n_labels] = {};         // their length by label
  std::size_t missed_n[n_labels] = {};
  double total() const {
    double t = 0;
    for (auto& r : conf)
      for (double v : r) t += v;
    return t;
  }
  double disagree() const {
    double t = total();
    for (int e = 0; e < n_labels; ++e) t -= conf[e][e];
    return t;
  }
};

void compare_with_grid(const analysed& a, const grid& g, grid_compare& gc) {
  const scenario& s = g.s;
  for (std::size_t i = 0; i < a.lines.size(); ++i) {
    const auto& l = a.lines[i];
    vec cuts = {0.0, 1.0};
    for (const auto& c : a.iv[i]) cuts.push_back(c.from), cuts.push_back(c.to);
    for (int k = 0; k + 1 < grid::n; ++k) {
      crossings(l, g.gx(k) + 0.5 * g.dx(), false, cuts);
      crossings(l, g.gy(k) + 0.5 * g.dy(), true, cuts);
    }
    crossings(l, 0.0, false, cuts);
    crossings(l, 0.0, true, cuts);
    std::sort(cuts.begin(), cuts.end());
    std::size_t k = 0;
    std::vector<bool> seen(a.iv[i].size(), false);
    for (std::size_t c = 0; c + 1 < cuts.size(); ++c) {
      const double t0 = cuts[c], t1 = cuts[c + 1];
      if (!(t1 > t0)) continue;
      const double m = 0.5 * (t0 + t1);
      while (k + 1 < a.iv[i].size() && a.iv[i][k].to <= m) ++k;
      const std::size_t e = a.iv[i][k].label;
      const double x = l.x(m), y = l.y(m), ft = l.feet(t0, t1);
      const std::size_t gl = g.nearest(x, y);
      gc.conf[e][gl] += ft;
      if (gl == e) seen[k] = true;
      const int r = (x < 0 ? 0 : 2) + (y > 0 ? 0 : 1);
      if (s.in_box(x, y)) gc.region[r][e] += ft;
    }
    for (std::size_t k2 = 0; k2 < a.iv[i].size(); ++k2) {
      ++gc.intervals;
      if (seen[k2]) continue;
      const auto& c = a.iv[i][k2];
      ++gc.missed;
      ++gc.missed_n[c.label];
      gc.missed_ft[c.label] += l.feet(c.from, c.to);
    }
  }
}

// ---------------------------------------------------------------- SVG (plain text)
class svg {
 public:
  svg(const scenario& s, double x0, double x1, double y0, double y1, const std::string& title)
      : x0_(x0), x1_(x1), y0_(y0), y1_(y1) {
    scale_ = 760.0 / (x1 - x0);
    w_ = L + 760 + 190;
    h_ = T + (y1 - y0) * scale_ + 60;
    o_ << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << w_ << "\" height=\"" << h_ << "\" viewBox=\"0 0 "
       << w_ << ' ' << h_ << "\" font-family=\"sans-serif\" font-size=\"13\">\n"
       << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
       << "<text x=\"" << L << "\" y=\"22\" font-size=\"15\">" << title << "</text>\n";
    // the region of interest, axes and ticks
    o_ << "<rect x=\"" << X(s.xmin) << "\" y=\"" << Y(s.ymax) << "\" width=\"" << (s.xmax - s.xmin) * scale_
       << "\" height=\"" << (s.ymax - s.ymin) * scale_ << "\" fill=\"none\" stroke=\"#888\" stroke-dasharray=\"4 3\"/>\n";
    o_ << "<rect x=\"" << X(x0) << "\" y=\"" << Y(y1) << "\" width=\"" << (x1 - x0) * scale_ << "\" height=\""
       << (y1 - y0) * scale_ << "\" fill=\"none\" stroke=\"black\"/>\n";
    for (double v = std::ceil(x0 / 2000) * 2000; v <= x1; v += 2000)
      o_ << "<text x=\"" << X(v) << "\" y=\"" << Y(y0) + 16 << "\" text-anchor=\"middle\">" << v << "</text>\n";
    for (double v = std::ceil(y0 / 2000) * 2000; v <= y1; v += 2000)
      o_ << "<text x=\"" << X(x0) - 5 << "\" y=\"" << Y(v) + 4 << "\" text-anchor=\"end\">" << v << "</text>\n";
    o_ << "<text x=\"" << X(0.5 * (x0 + x1)) << "\" y=\"" << Y(y0) + 34
       << "\" text-anchor=\"middle\">downrange x (ft)</text>\n"
       << "<text transform=\"translate(16," << Y(0.5 * (y0 + y1)) << ") rotate(-90)\" text-anchor=\"middle\">"
       << "crossrange y (ft), + = left</text>\n";
    o_ << "<g fill=\"none\" stroke-linecap=\"butt\">\n";
  }
  double X(double x) const { return std::round((L + (x - x0_) * scale_) * 10) / 10; }
  double Y(double y) const { return std::round((T + (y1_ - y) * scale_) * 10) / 10; }
  void segment(double xa, double ya, double xb, double yb, std::size_t label, double width) {
    o_ << "<path d=\"M" << X(xa) << ' ' << Y(ya) << 'L' << X(xb) << ' ' << Y(yb) << "\" stroke=\"" << label_color[label]
       << "\" stroke-width=\"" << width << "\"/>\n";
  }
  // arc of radius rho from angle a to b (counter-clockwise in the x-y plane, y drawn up)
  void arc(double rho, double a, double b, std::size_t label, double width) {
    o_ << "<path d=\"M" << X(rho * std::cos(a)) << ' ' << Y(rho * std::sin(a));
    const int parts = int(std::ceil((b - a) / (pi / 2)));
    for (int p = 1; p <= parts; ++p) {
      const double e = a + (b - a) * p / parts;
      o_ << 'A' << rho * scale_ << ' ' << rho * scale_ << " 0 0 0 " << X(rho * std::cos(e)) << ' ' << Y(rho * std::sin(e));
    }
    o_ << "\" stroke=\"" << label_color[label] << "\" stroke-width=\"" << width << "\"/>\n";
  }
  void thin_line(double xa, double ya, double xb, double yb) {
    o_ << "<path d=\"M" << X(xa) << ' ' << Y(ya) << 'L' << X(xb) << ' ' << Y(yb)
       << "\" stroke=\"#ccc\" stroke-width=\"1\"/>\n";
  }
  void thin_arc(double rho, double a, double b) {
    o_ << "<path d=\"M" << X(rho * std::cos(a)) << ' ' << Y(rho * std::sin(a));
    const int parts = int(std::ceil((b - a) / (pi / 2)));
    for (int p = 1; p <= parts; ++p) {
      const double e = a + (b - a) * p / parts;
      o_ << 'A' << rho * scale_ << ' ' << rho * scale_ << " 0 0 0 " << X(rho * std::cos(e)) << ' ' << Y(rho * std::sin(e));
    }
    o_ << "\" stroke=\"#ccc\" stroke-width=\"1\"/>\n";
  }
  void dot(double x, double y, std::size_t label, double r) {
    o_ << "<circle cx=\"" << X(x) << "\" cy=\"" << Y(y) << "\" r=\"" << r << "\" fill=\"" << label_color[label]
       << "\" stroke=\"black\" stroke-width=\"0.5\"/>\n";
  }
  void note(const std::string& text) { notes_.push_back(text); }
  bool save(const fs::path& p) {
    o_ << "</g>\n";
    // the ownship: a black triangle at (0, 0) pointing downrange (+x)
    const double cx = X(0), cy = Y(0);
    o_ << "<path d=\"M" << cx + 14 << ' ' << cy << 'L' << cx - 8 << ' ' << cy - 8 << 'L' << cx - 4 << ' ' << cy << 'L'
       << cx - 8 << ' ' << cy + 8 << "Z\" fill=\"black\"/>\n";
    double ly = T + 10;
    const double lx = L + 760 + 20;
    o_ << "<text x=\"" << lx << "\" y=\"" << ly << "\" font-weight=\"bold\">advisory (argmin)</text>\n";
    for (int k = 0; k < n_labels; ++k) {
      ly += 22;
      o_ << "<rect x=\"" << lx << "\" y=\"" << ly - 11 << "\" width=\"22\" height=\"12\" fill=\"" << label_color[k]
         << "\"/><text x=\"" << lx + 28 << "\" y=\"" << ly << "\">" << label_short[k] << " " << label_long[k]
         << "</text>\n";
    }
    ly += 30;
    o_ << "<path d=\"M" << lx + 14 << ' ' << ly - 4 << 'L' << lx - 8 + 8 << ' ' << ly - 12 << 'L' << lx + 4 << ' ' << ly - 4
       << 'L' << lx << ' ' << ly + 4 << "Z\" fill=\"black\"/><text x=\"" << lx + 28 << "\" y=\"" << ly
       << "\">ownship</text>\n";
    for (const auto& n : notes_) {
      ly += 18;
      o_ << "<text x=\"" << lx << "\" y=\"" << ly << "\" font-size=\"11\">" << n << "</text>\n";
    }
    o_ << "</svg>\n";
    std::ofstream f(p);
    f << o_.str();
    return bool(f);
  }

 private:
  static constexpr double L = 70, T = 40;
  double x0_, x1_, y0_, y1_, scale_, w_, h_;
  std::ostringstream o_;
  std::vector<std::string> notes_;
};

svg box_svg(const scenario& s, const std::string& title) { return svg(s, s.xmin, s.xmax, s.ymin, s.ymax, title); }

/// A figure around one line (the box plus the line's extent).
svg line_svg(const scenario& s, const study_line& l, const std::string& title) {
  double x0 = s.xmin, x1 = s.xmax, y0 = s.ymin, y1 = s.ymax;
  for (int k = 0; k <= 200; ++k) {
    const double t = k / 200.0;
    x0 = std::min(x0, l.x(t)), x1 = std::max(x1, l.x(t)), y0 = std::min(y0, l.y(t)), y1 = std::max(y1, l.y(t));
  }
  auto r = [](double v, bool up) { return (up ? std::ceil(v / 500) : std::floor(v / 500)) * 500; };
  return svg(s, r(x0, false), r(x1, true), r(y0, false), r(y1, true), title);
}

void draw_exact(svg& g, const study_line& l, const ivals_t& iv, double width) {
  for (const auto& c : iv) {
    if (l.distance)
      g.segment(l.x(c.from), l.y(c.from), l.x(c.to), l.y(c.to), c.label, width);
    else
      g.arc(l.fixed, l.theta(c.from), l.theta(c.to), c.label, width);
  }
}

// ---------------------------------------------------------------- reports
struct stats_row {
  std::size_t lines = 0, pieces = 0, max_pieces = 0, ivals = 0, max_ivals = 0, islands = 0, clamp_breaks = 0;
  double feet = 0;
};
stats_row line_stats_of(const analysed& a) {
  stats_row r;
  r.lines = a.res.size();
  for (std::size_t i = 0; i < a.res.size(); ++i) {
    r.pieces += a.res[i].pieces();
    r.max_pieces = std::max(r.max_pieces, a.res[i].pieces());
    r.ivals += a.iv[i].size();
    r.max_ivals = std::max(r.max_ivals, a.iv[i].size());
    r.islands += islands(a.iv[i]);
    r.feet += a.lines[i].feet(0, 1);
    // layers: 0 Affine, 1 Clamp{0,1}, 2.. Dense/ReLU: points after the clamp - 2 = its breaks
    if (a.res[i].stats.points.size() > 1) r.clamp_breaks += a.res[i].stats.points[1] - 2;
  }
  return r;
}

void print_stats(const char* name, const analysed& a) {
  const auto r = line_stats_of(a);
  std::printf("| %-22s | %5zu | %9.1f | %5zu | %9.2f | %5zu | %7zu | %9.0f | %8.2f |\n", name, r.lines,
              double(r.pieces) / double(r.lines), r.max_pieces, double(r.ivals) / double(r.lines), r.max_ivals, r.islands,
              r.feet, a.seconds * 1e3);
}

/// The single-line table: each exact class interval, with the 15 samples that fall inside it.
template <class Net>
std::vector<std::size_t> single_line_table(const Net& net, const scenario& s, const analysed& a, const char* what) {
  const auto& l = a.lines[0];
  const auto& iv = a.iv[0];
  std::vector<vec> pts;
  vec ts;
  for (int i = 0; i < 15; ++i) {
    ts.push_back(i / 14.0);
    pts.push_back(l.distance ? s.input(l.rho(ts.back()), l.fixed) : s.input(l.fixed, l.theta(ts.back())));
  }
  const auto lab = labels_at(net, pts);
  std::printf("\n%s: %zu pieces, %zu class intervals: %s\n", what, a.res[0].pieces(), iv.size(), sequence(iv).c_str());
  std::printf("| # | %-21s | advisory | length (ft) | samples inside (of 15) |\n|---|---|---|---|---|\n",
              l.distance ? "rho (ft)" : "theta (deg)");
  for (std::size_t k = 0; k < iv.size(); ++k) {
    const auto& c = iv[k];
    std::size_t in = 0;
    for (double t : ts) in += (t >= c.from && t <= c.to);
    char range[64];
    if (l.distance)
      std::snprintf(range, sizeof range, "%.1f .. %.1f", l.rho(c.from), l.rho(c.to));
    else
      std::snprintf(range, sizeof range, "%.2f .. %.2f", l.theta(c.from) / deg, l.theta(c.to) / deg);
    std::printf("| %zu | %-21s | %-8s | %11.1f | %zu%s |\n", k, range, label_short[c.label], l.feet(c.from, c.to), in,
                in == 0 ? "  MISSED" : "");
  }
  std::string sl;
  std::size_t disagree = 0;
  for (std::size_t i = 0; i < lab.size(); ++i) {
    sl += std::string(i ? " " : "") + label_short[lab[i]];
    const auto& c = *std::find_if(iv.begin(), iv.end(), [&](const auto& c) { return ts[i] <= c.to; });
    disagree += c.label != lab[i];
  }
  std::printf("15 samples: %s  (%zu disagree with the exact label at their point: only possible on a boundary)\n",
              sl.c_str(), disagree);
  return lab;
}

void print_grid_compare(const grid_compare& gc, const char* what) {
  std::printf("\n%s vs the 25 x 25 grid (nearest grid sample), length in ft along the lines:\n", what);
  std::printf("| exact \\ nearest grid sample |");
  for (int k = 0; k < n_labels; ++k) std::printf(" %8s |", label_short[k]);
  std::printf(" missed intervals (n, ft) |\n|---|---|---|---|---|---|---|\n");
  for (int e = 0; e < n_labels; ++e) {
    std::printf("| %-27s |", label_short[e]);
    for (int k = 0; k < n_labels; ++k) std::printf(" %8.0f |", gc.conf[e][k]);
    std::printf(" %3zu, %8.0f |\n", gc.missed_n[e], gc.missed_ft[e]);
  }
  std::printf("total %.0f ft; the nearest grid sample reports another advisory on %.0f ft (%.1f%%); %zu of %zu exact "
              "intervals (%.0f ft) contain no point whose nearest grid sample has their advisory\n",
              gc.total(), gc.disagree(), 100 * gc.disagree() / gc.total(), gc.missed, gc.intervals,
              [&] {
                double t = 0;
                for (double v : gc.missed_ft) t += v;
                return t;
              }());
}

void print_regions(const grid_compare& gc) {
  static const char* names[4] = {"behind-left (x<0, y>0)", "behind-right (x<0, y<0)", "ahead-left (x>0, y>0)",
                                 "ahead-right (x>0, y<0)"};
  std::printf("\nExact advisory by region (ft along the spokes and circles, inside the box):\n| region |");
  for (int k = 0; k < n_labels; ++k) std::printf(" %6s |", label_short[k]);
  std::printf("\n|---|---|---|---|---|---|\n");
  for (int r = 0; r < 4; ++r) {
    std::printf("| %-24s |", names[r]);
    for (int k = 0; k < n_labels; ++k) std::printf(" %6.0f |", gc.region[r][k]);
    std::printf("\n");
  }
  std::printf("toward-the-intruder turns behind the ownship: WL behind-left %.0f ft (SL %.0f), mirror WR behind-right "
              "%.0f ft (SR %.0f)\n",
              gc.region[0][WL], gc.region[0][SL], gc.region[1][WR], gc.region[1][SR]);
}

struct options {
  fs::path models = "../shared/models/acasxu-nnet", out = "exactline_acasxu_out";
  std::string net = "1_1";
  bool quick = false, all = false, svgs = true;
};

fs::path resolve(const options& o, const std::string& n) {
  if (n.find('/') != std::string::npos || n.ends_with(".nnet")) return n;
  return o.models / ("ACASXU_run2a_" + n + "_batch_2000.nnet");
}

// Everything for one network; returns the self-check disagreements.  summary: one row (--all).
std::size_t study(const options& o, const std::string& name, const fs::path& dir, bool verbose, bool quick) {
  const scenario s;
  const auto model = nnlens::io::load_nnet<double>(resolve(o, name));
  const auto& net = model.net;
  const std::string tag = fs::path(resolve(o, name)).stem().string();
  if (o.svgs) fs::create_directories(dir);

  const double rho_max = std::hypot(10000.0, 6000.0);
  auto sp = run_lines(net, s, spokes(s, 100));
  auto ci = run_lines(net, s, circles(s, 25));
  analysed dl, tl;
  if (!quick) {
    dl = run_lines(net, s, {{true, -68 * deg, 0.0, 12000.0}});
    tl = run_lines(net, s, {{false, 3100.0, -pi, pi}});
  }
  std::size_t bad = self_check(net, sp) + self_check(net, ci);
  if (!quick) bad += self_check(net, dl) + self_check(net, tl);

  const grid g = make_grid(net, s);
  grid_compare gc;
  compare_with_grid(sp, g, gc);
  compare_with_grid(ci, g, gc);

  if (verbose) {
    std::printf("\nNetwork %s (raw units; advisory = argmin). Scenario: psi = -180 deg, v_own = v_int = 150 ft/s; box x "
                "in [-6000, 10000], y in [-6000, 6000] ft; rho_max = %.1f ft.\n\n",
                tag.c_str(), rho_max);
    std::printf("| line type              | lines | pieces/line (mean) | max | class intervals/line (mean) | max | "
                "strong islands | length (ft) | ExactLine ms (seq) |\n|---|---|---|---|---|---|---|---|---|\n");
    print_stats("spokes (vary rho)", sp);
    print_stats("circle arcs (vary theta)", ci);
    if (!quick) {
      print_stats("distance line -68 deg", dl);
      print_stats("theta line rho=3100", tl);
    }
    std::size_t cb = line_stats_of(sp).clamp_breaks + line_stats_of(ci).clamp_breaks;
    if (!quick) cb += line_stats_of(dl).clamp_breaks + line_stats_of(tl).clamp_breaks;
    std::printf("(the input clamp to the .nnet [min, max] added %zu breaks in all: every input stays inside [min, max] "
                "(3.141593 > pi), so the clip is a no-op on these lines)\n",
                cb);
    std::printf("self-check: %zu of the class intervals' midpoints disagree with a direct forward pass\n", bad);
    if (!quick) {
      single_line_table(net, s, dl, "Distance line theta = -68 deg, rho 0..12000 ft (Fig. 2a/2b)");
      single_line_table(net, s, tl, "Theta line rho = 3100 ft, theta -180..180 deg (Fig. 2c/2d)");
    }
    print_grid_compare(gc, "Spokes + circles");
    print_regions(gc);
    std::size_t gcount[n_labels] = {}, greg[4][n_labels] = {};
    for (int i = 0; i < grid::n; ++i)
      for (int j = 0; j < grid::n; ++j) {
        const std::size_t l = g.label[std::size_t(i * grid::n + j)];
        ++gcount[l];
        const double x = g.gx(i), y = g.gy(j);
        if (x != 0 && y != 0) ++greg[(x < 0 ? 0 : 2) + (y > 0 ? 0 : 1)][l];
      }
    std::printf("grid samples per advisory:");
    for (int k = 0; k < n_labels; ++k) std::printf(" %s %zu", label_short[k], gcount[k]);
    std::printf(" (of 625); behind-left WL %zu, SL %zu; behind-right WR %zu, SR %zu (samples on the axes excluded)\n",
                greg[0][WL], greg[0][SL], greg[1][WR], greg[1][SR]);
  } else {
    // one summary row per network (--all)
    const auto a = line_stats_of(sp), b = line_stats_of(ci), d = line_stats_of(dl);
    std::printf("| %s | %.1f / %zu | %.1f / %zu | %zu | %s | %zu | %.0f | %.0f | %.0f (%.1f%%) | %zu | %.1f |\n",
                name.c_str(), double(a.pieces) / double(a.lines), a.max_pieces, double(b.pieces) / double(b.lines),
                b.max_pieces, a.islands + b.islands, sequence(dl.iv[0]).c_str(), d.islands, gc.region[0][WL],
                gc.region[1][WR], gc.disagree(), 100 * gc.disagree() / gc.total(), gc.missed,
                (sp.seconds + ci.seconds + dl.seconds + tl.seconds) * 1e3);
  }

  if (o.svgs) {
    std::string net_note = "network " + tag;
    for (const char* cut : {"ACASXU_run2a_", "_batch_2000"})
      if (auto at = net_note.find(cut); at != std::string::npos) net_note.erase(at, std::string(cut).size());
    {
      auto f = box_svg(s, "Fig. 2e: ExactLine on 100 spokes and 25 circles (head-on, psi = -180 deg)");
      for (std::size_t i = 0; i < ci.lines.size(); ++i) draw_exact(f, ci.lines[i], ci.iv[i], 1.6);
      for (std::size_t i = 0; i < sp.lines.size(); ++i) draw_exact(f, sp.lines[i], sp.iv[i], 1.6);
      f.note(net_note);
      f.note("v_own = v_int = 150 ft/s");
      f.save(dir / "fig2e_exact_lines.svg");
    }
    {
      auto f = box_svg(s, "Fig. 2f: 25 x 25 grid samples (head-on, psi = -180 deg)");
      for (int i = 0; i < grid::n; ++i)
        for (int j = 0; j < grid::n; ++j) f.dot(g.gx(i), g.gy(j), g.label[std::size_t(i * grid::n + j)], 4);
      f.note(net_note);
      f.save(dir / "fig2f_grid_samples.svg");
    }
    if (!quick) {
      auto single = [&](const analysed& a, const char* exact_name, const char* sample_name, const std::string& t1,
                        const std::string& t2) {
        const auto& l = a.lines[0];
        auto f = line_svg(s, l, t1);
        draw_exact(f, l, a.iv[0], 5);
        f.note(net_note);
        f.save(dir / exact_name);
        auto h = line_svg(s, l, t2);
        if (l.distance)
          h.thin_line(l.x(0), l.y(0), l.x(1), l.y(1));
        else
          h.thin_arc(l.fixed, l.a, l.b);
        std::vector<vec> pts;
        for (int i = 0; i < 15; ++i) {
          const double t = i / 14.0;
          pts.push_back(l.distance ? s.input(l.rho(t), l.fixed) : s.input(l.fixed, l.theta(t)));
        }
        const auto lab = labels_at(net, pts);
        for (int i = 0; i < 15; ++i) h.dot(l.x(i / 14.0), l.y(i / 14.0), lab[std::size_t(i)], 6);
        h.note(net_note);
        h.save(dir / sample_name);
      };
      single(dl, "fig2a_distance_exact.svg", "fig2b_distance_samples.svg",
             "Fig. 2a: ExactLine, theta = -68 deg, rho 0..12000 ft", "Fig. 2b: 15 samples, theta = -68 deg");
      single(tl, "fig2c_theta_exact.svg", "fig2d_theta_samples.svg", "Fig. 2c: ExactLine, rho = 3100 ft, all theta",
             "Fig. 2d: 15 samples, rho = 3100 ft");
    }
  }
  return bad;
}

// Timing of the spokes and arcs (plus the two single lines unless quick): exact_lines with
// execution::seq (one line after the other) and execution::par (parallel over lines), and seq
// followed by classify_line.  Best of `reps` runs each.
struct timing_row {
  std::size_t lines = 0, pieces = 0;
  double seq = 0, par = 0, classify = 0;
  timing_row& operator+=(const timing_row& o) {
    lines += o.lines, pieces += o.pieces, seq += o.seq, par += o.par, classify += o.classify;
    return *this;
  }
};

template <class Net>
timing_row timing(const Net& net, const scenario& s, bool quick, int reps) {
  auto lines = spokes(s, 100);
  for (auto& l : circles(s, 25)) lines.push_back(l);
  if (!quick) {
    lines.push_back({true, -68 * deg, 0.0, 12000.0});
    lines.push_back({false, 3100.0, -pi, pi});
  }
  std::vector<vec> A, B;
  for (const auto& l : lines) A.push_back(l.P(s)), B.push_back(l.Q(s));
  auto best = [&](auto&& f) {
    double b = 1e300;
    for (int r = 0; r < reps; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      f();
      b = std::min(b, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return b;
  };
  timing_row t;
  t.lines = lines.size();
  t.seq = best([&] {
    t.pieces = 0;
    for (auto& r : nnlens::exact_lines(nnlens::execution::seq, net, A, B)) t.pieces += r.pieces();
  });
  t.par = best([&] { (void)nnlens::exact_lines(nnlens::execution::par, net, A, B); });
  t.classify = best([&] {
    std::size_t n = 0;
    for (auto& r : nnlens::exact_lines(nnlens::execution::seq, net, A, B))
      n += nnlens::classify_line(r, nnlens::class_rule::argmin).size();
    if (n == 0) std::printf("?");
  });
  return t;
}

void print_timing(const timing_row& t, int reps, const char* what) {
  std::printf("\nTiming, %s (best of %d per network; %zu lines, %zu pieces; %u hardware threads):\n", what, reps, t.lines,
              t.pieces, std::thread::hardware_concurrency());
  std::printf("| run | total ms | lines/s | pieces/s |\n|---|---|---|---|\n");
  std::printf("| exact_lines(seq) | %.2f | %.0f | %.0f |\n", t.seq * 1e3, double(t.lines) / t.seq,
              double(t.pieces) / t.seq);
  std::printf("| exact_lines(par) | %.2f | %.0f | %.0f |\n", t.par * 1e3, double(t.lines) / t.par,
              double(t.pieces) / t.par);
  std::printf("| exact_lines(seq) + classify_line | %.2f | %.0f | |\n", t.classify * 1e3, double(t.lines) / t.classify);
}

int usage() {
  std::fprintf(stderr,
               "usage: exactline_acasxu [--models DIR] [--out DIR] [--quick] [--all] [--no-svg] [NET]\n"
               "  NET: a .nnet file or i_j (default 1_1)\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--models" && i + 1 < argc)
      o.models = argv[++i];
    else if (a == "--out" && i + 1 < argc)
      o.out = argv[++i];
    else if (a == "--quick")
      o.quick = true;
    else if (a == "--all")
      o.all = true;
    else if (a == "--no-svg")
      o.svgs = false;
    else if (a.starts_with("-"))
      return usage();
    else
      o.net = a;
  }
  try {
    const scenario s;
    {  // the sign convention, checked on 1_1 against Reluplex phi5 (left intruder, near: strong right)
      const fs::path p11 = resolve(o, "1_1");
      if (fs::exists(p11)) {
        const auto m = nnlens::io::load_nnet<double>(p11);
        const auto l = labels_at(m.net, {{300, 0.3, -pi + 0.0025, 250, 200}});
        std::printf("convention check (1_1, phi5 point rho 300, theta +0.3 rad = left, psi ~ -180 deg): %s (phi5 expects "
                    "SR)\n",
                    label_short[l[0]]);
      }
    }
    std::size_t bad = 0;
    if (!o.all) {
      const auto t0 = std::chrono::steady_clock::now();
      bad = study(o, o.net, o.out, true, o.quick);
      const auto m = nnlens::io::load_nnet<double>(resolve(o, o.net));
      const int reps = o.quick ? 1 : 5;
      print_timing(timing(m.net, s, o.quick, reps), reps, "spokes + arcs + the two single lines");
      if (!o.quick) {  // the engine's own check: the network is affine on every piece
        nnlens::line_options v;
        v.validate = true;
        std::size_t pieces = 0, viol = 0;
        double dev = 0;
        for (const auto& l : spokes(s, 100)) {
          const auto r = nnlens::exact_line(m.net, l.P(s), l.Q(s), v);
          pieces += r.stats.validated_pieces, viol += r.stats.violations, dev = std::max(dev, r.stats.max_deviation);
        }
        std::printf("validate (spokes): %zu pieces checked at 1/4, 1/2, 3/4; %zu not affine; max relative deviation %.2g\n",
                    pieces, viol, dev);
      }
      std::printf("\nwall time %.2f s; SVGs in %s\n",
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                  o.svgs ? o.out.string().c_str() : "(none: --no-svg)");
    } else {
      std::printf("\n| net | spokes pieces mean/max | circles pieces mean/max | strong islands (spokes+circles) | "
                  "distance line -68 deg | its islands | WL behind-left ft | WR behind-right ft | grid-NN disagrees ft | "
                  "missed intervals | ExactLine ms |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
      for (int i = 1; i <= 5; ++i)
        for (int j = 1; j <= 9; ++j) {
          const std::string n = std::to_string(i) + "_" + std::to_string(j);
          bad += study(o, n, o.out / n, false, false);
        }
      std::printf("self-check disagreements over the 45 networks: %zu\n", bad);
      timing_row all;
      for (int i = 1; i <= 5; ++i)
        for (int j = 1; j <= 9; ++j)
          all += timing(nnlens::io::load_nnet<double>(resolve(o, std::to_string(i) + "_" + std::to_string(j))).net, s,
                        false, 3);
      print_timing(all, 3, "all 45 networks");
    }
    if (bad) {
      std::fprintf(stderr, "self-check failed: %zu class intervals disagree with a forward pass\n", bad);
      return 1;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "exactline_acasxu: %s\n", e.what());
    return 2;
  }
  return 0;
}
