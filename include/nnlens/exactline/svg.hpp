// nnlens/exactline/svg.hpp -- pictures of ExactLine results (plain SVG text, no dependencies).
//
//   line_svg(lines, rule, labels)     one strip per line: a band per class interval (coloured by
//                                     the winning class), a tick at every break, a 0..1 axis, a legend
//   plane_svg(plane, rule, labels)    exact_plane's result in the (u, v) plane: the exact class cells
//                                     (classify_plane), and with o.edges the linear regions' edges
//   heatmap_svg(values, h, w, title)  an h x w map (e.g. integrated gradients of an image):
//                                     red positive, blue negative, white 0 (symmetric scale)
// Each returns a complete SVG document as a string; write it with any ofstream.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

#include "nnlens/exactline/classify.hpp"
#include "nnlens/exactline/line.hpp"
#include "nnlens/exactline/plane.hpp"

namespace nnlens {

struct svg_options {
  double width = 800;         // pixels
  double strip_height = 22;   // line_svg: per line
  std::string title;
  bool edges = false;         // plane_svg: also draw the linear regions' edges
};

namespace detail {
inline const char* class_colour(std::size_t c) {
  static const char* pal[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                              "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
  return pal[c % 10];
}
inline std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f", v);
  return b;
}
inline std::string xml_escape(const std::string& s) {
  std::string r;
  for (char ch : s) {
    if (ch == '<') r += "&lt;";
    else if (ch == '>') r += "&gt;";
    else if (ch == '&') r += "&amp;";
    else if (ch == '"') r += "&quot;";
    else r += ch;
  }
  return r;
}
inline std::string label_of(const std::vector<std::string>& labels, std::size_t c) {
  return c < labels.size() ? labels[c] : std::to_string(c);
}
/// The legend, wrapped to rows of `per_row` entries; returns the height used.
inline double legend(std::string& s, std::size_t classes, const std::vector<std::string>& labels, double x, double y,
                     double width = 800) {
  const std::size_t per_row = std::max<std::size_t>(1, std::size_t((width - x) / 95));
  for (std::size_t c = 0; c < classes; ++c) {
    const double xx = x + double(c % per_row) * 95, yy = y + double(c / per_row) * 16;
    s += "<rect x=\"" + num(xx) + "\" y=\"" + num(yy) + "\" width=\"12\" height=\"12\" fill=\"" + class_colour(c) + "\"/>";
    s += "<text x=\"" + num(xx + 16) + "\" y=\"" + num(yy + 11) + "\" font-size=\"11\">" + xml_escape(label_of(labels, c)) +
         "</text>";
  }
  return double((classes + per_row - 1) / per_row) * 16;
}
}  // namespace detail

template <class S, class R>
std::string line_svg(const std::vector<line_result<S, R>>& lines, class_rule rule = class_rule::argmax,
                     const std::vector<std::string>& labels = {}, const svg_options& o = {}) {
  using detail::num;
  const double left = 60, right = 20, top = o.title.empty() ? 10 : 34, W = o.width - left - right;
  const double H = top + double(lines.size()) * (o.strip_height + 8) + 80;
  std::size_t classes = 0;
  for (const auto& l : lines) classes = std::max(classes, l.out_size());
  std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(o.width) + "\" height=\"" + num(H) +
                  "\" font-family=\"sans-serif\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  if (!o.title.empty()) s += "<text x=\"" + num(left) + "\" y=\"22\" font-size=\"14\">" + detail::xml_escape(o.title) + "</text>\n";
  double y = top;
  for (std::size_t i = 0; i < lines.size(); ++i, y += o.strip_height + 8) {
    const auto& L = lines[i];
    s += "<text x=\"4\" y=\"" + num(y + o.strip_height * 0.7) + "\" font-size=\"11\">line " + std::to_string(i) + "</text>\n";
    if (!L.error.empty() || L.t.size() < 2) {
      s += "<text x=\"" + num(left) + "\" y=\"" + num(y + o.strip_height * 0.7) + "\" font-size=\"11\" fill=\"#c00\">" +
           detail::xml_escape(L.error.empty() ? "no result" : L.error) + "</text>\n";
      continue;
    }
    for (const auto& iv : classify_line(L, rule))
      s += "<rect x=\"" + num(left + W * double(iv.from)) + "\" y=\"" + num(y) + "\" width=\"" +
           num(std::max(0.3, W * double(iv.to - iv.from))) + "\" height=\"" + num(o.strip_height) + "\" fill=\"" +
           detail::class_colour(iv.label) + "\"><title>" + detail::xml_escape(detail::label_of(labels, iv.label)) + " [" +
           std::to_string(double(iv.from)) + ", " + std::to_string(double(iv.to)) + "]</title></rect>\n";
    std::string ticks = "<path d=\"";
    for (std::size_t j = 1; j + 1 < L.t.size(); ++j) {
      const double x = left + W * double(L.t[j]);
      ticks += "M" + num(x) + " " + num(y + o.strip_height * 0.65) + "V" + num(y + o.strip_height);
    }
    s += ticks + "\" stroke=\"black\" stroke-width=\"0.5\"/>\n";
  }
  s += "<path d=\"M" + num(left) + " " + num(y) + "H" + num(left + W) + "\" stroke=\"black\"/>\n";
  for (int k = 0; k <= 10; ++k) {
    const double x = left + W * k / 10.0;
    s += "<path d=\"M" + num(x) + " " + num(y) + "v5\" stroke=\"black\"/><text x=\"" + num(x - 8) + "\" y=\"" + num(y + 17) +
         "\" font-size=\"10\">" + num(k / 10.0).substr(0, 3) + "</text>\n";
  }
  s += "<text x=\"" + num(left + W / 2 - 4) + "\" y=\"" + num(y + 30) + "\" font-size=\"11\">t</text>\n";
  detail::legend(s, classes, labels, left, y + 38, o.width);
  return s + "</svg>\n";
}

template <class S, class R>
std::string plane_svg(const plane_result<S, R>& p, class_rule rule = class_rule::argmax,
                      const std::vector<std::string>& labels = {}, const svg_options& o = {}) {
  using detail::num;
  double umin = 1e300, umax = -1e300, vmin = 1e300, vmax = -1e300;
  for (const auto& q : p.polygons)
    for (const auto& v : q.vertices) {
      umin = std::min(umin, double(v[0])), umax = std::max(umax, double(v[0]));
      vmin = std::min(vmin, double(v[1])), vmax = std::max(vmax, double(v[1]));
    }
  const double pad = 20, top = o.title.empty() ? pad : 40, W = o.width - 2 * pad;
  const double du = std::max(umax - umin, 1e-300), dv = std::max(vmax - vmin, 1e-300);
  const double H = W * dv / du;
  const std::size_t classes = p.output_shape.size();
  std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(o.width) + "\" height=\"" + num(top + H + 70) +
                  "\" font-family=\"sans-serif\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  if (!o.title.empty()) s += "<text x=\"" + num(pad) + "\" y=\"24\" font-size=\"14\">" + detail::xml_escape(o.title) + "</text>\n";
  for (const auto& reg : classify_plane(p, rule)) {  // exact class cells
    s += "<polygon points=\"";
    for (const auto& v : reg.polygon.vertices)
      s += num(pad + W * (double(v[0]) - umin) / du) + "," + num(top + H - H * (double(v[1]) - vmin) / dv) + " ";
    s += "\" fill=\"" + std::string(detail::class_colour(reg.label)) + "\" stroke=\"" + detail::class_colour(reg.label) +
         "\" stroke-width=\"0.3\"/>\n";
  }
  if (o.edges)  // the linear regions' edges
    for (const auto& q : p.polygons) {
      s += "<polygon points=\"";
      for (const auto& v : q.vertices)
        s += num(pad + W * (double(v[0]) - umin) / du) + "," + num(top + H - H * (double(v[1]) - vmin) / dv) + " ";
      s += "\" fill=\"none\" stroke=\"#333\" stroke-width=\"0.25\"/>\n";
    }
  detail::legend(s, classes, labels, pad, top + H + 16, o.width);
  return s + "</svg>\n";
}

template <class S>
std::string heatmap_svg(const std::vector<S>& values, std::size_t h, std::size_t w, const std::string& title = {},
                        double cell = 10) {
  using detail::num;
  NNLENS_EXPECTS(values.size() >= h * w);
  double m = 0;
  for (std::size_t i = 0; i < h * w; ++i) m = std::max(m, std::abs(double(values[i])));
  const double top = title.empty() ? 0 : 20;
  std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(double(w) * cell) + "\" height=\"" +
                  num(top + double(h) * cell) + "\" font-family=\"sans-serif\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  if (!title.empty()) s += "<text x=\"2\" y=\"14\" font-size=\"12\">" + detail::xml_escape(title) + "</text>\n";
  for (std::size_t r = 0; r < h; ++r)
    for (std::size_t c = 0; c < w; ++c) {
      const double v = m > 0 ? double(values[r * w + c]) / m : 0;
      const int k = int(std::lround(255 * (1 - std::min(1.0, std::abs(v)))));
      char col[16];
      if (v >= 0)
        std::snprintf(col, sizeof col, "#ff%02x%02x", k, k);
      else
        std::snprintf(col, sizeof col, "#%02x%02xff", k, k);
      s += "<rect x=\"" + num(double(c) * cell) + "\" y=\"" + num(top + double(r) * cell) + "\" width=\"" + num(cell) +
           "\" height=\"" + num(cell) + "\" fill=\"" + col + "\"/>";
    }
  return s + "\n</svg>\n";
}

}  // namespace nnlens
