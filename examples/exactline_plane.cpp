// examples/exactline_plane.cpp -- ExactLine on a whole plane: the exact advisory map of an ACAS Xu
// network over the head-on scenario (docs/exactline.md, "Planes").
//
//   exactline_plane [--models DIR] [--net 1_1] [--rho-max 12000] [--out DIR] [--check N]
//
// The plane is (rho, theta) with psi = -pi and v_own = v_int = 150 ft/s fixed: every other
// input is constant, so the plane is a straight 2-D slice of input space and exact_plane returns
// the convex polygons on which the network is affine.  The program writes
//   plane_rho_theta.svg   the polygons in (rho, theta), coloured by advisory (argmin score)
//   plane_xy.svg          the same polygons drawn around the ownship (x = rho cos theta,
//                         y = rho sin theta; edges subdivided, since the map is not linear)
// and checks N random points: the advisory of a direct forward pass equals the one of the polygon
// that contains the point (exit status 1 otherwise).
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include <nnlens/exactline.hpp>
#include <nnlens/io/nnet.hpp>
#include <nnlens/nnlens.hpp>

namespace fs = std::filesystem;

namespace {
const std::vector<std::string> advisories = {"COC", "WL", "WR", "SL", "SR"};

std::size_t argmin(std::span<const double> y) {
  std::size_t b = 0;
  for (std::size_t i = 1; i < y.size(); ++i)
    if (y[i] < y[b]) b = i;
  return b;
}

bool inside(const nnlens::plane_polygon<double>& p, double u, double v) {
  for (std::size_t i = 0, n = p.vertices.size(); i < n; ++i) {
    const auto& a = p.vertices[i];
    const auto& b = p.vertices[(i + 1) % n];
    if ((b[0] - a[0]) * (v - a[1]) - (b[1] - a[1]) * (u - a[0]) < -1e-9 * (1 + std::abs(b[0] - a[0]))) return false;
  }
  return true;
}

std::string xy_svg(const nnlens::plane_result<double>& r, double rho_max) {
  const double S = 700, pad = 20, scale = S / (2 * rho_max);
  auto X = [&](double rho, double th) { return pad + S / 2 + scale * rho * std::cos(th); };
  auto Y = [&](double rho, double th) { return pad + S / 2 - scale * rho * std::sin(th); };
  std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(int(S + 2 * pad)) +
                  "\" height=\"" + std::to_string(int(S + 2 * pad + 30)) +
                  "\" font-family=\"sans-serif\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  char buf[64];
  for (const auto& reg : nnlens::classify_plane(r, nnlens::class_rule::argmin)) {
    const auto& p = reg.polygon;
    s += "<polygon points=\"";
    const std::size_t n = p.vertices.size();
    for (std::size_t i = 0; i < n; ++i) {
      const auto& a = p.vertices[i];
      const auto& b = p.vertices[(i + 1) % n];
      for (int k = 0; k < 8; ++k) {  // subdivide: straight in (rho, theta), curved in (x, y)
        const double rho = a[0] + (b[0] - a[0]) * k / 8.0, th = a[1] + (b[1] - a[1]) * k / 8.0;
        std::snprintf(buf, sizeof buf, "%.1f,%.1f ", X(rho, th), Y(rho, th));
        s += buf;
      }
    }
    const char* col = nnlens::detail::class_colour(reg.label);
    s += "\" fill=\"" + std::string(col) + "\" stroke=\"" + col + "\" stroke-width=\"0.3\"/>\n";
  }
  std::snprintf(buf, sizeof buf, "%.1f", pad + S / 2);
  s += "<circle cx=\"" + std::string(buf) + "\" cy=\"" + buf + "\" r=\"4\" fill=\"black\"/>\n";
  for (std::size_t c = 0; c < advisories.size(); ++c) {
    const double x = pad + 80.0 * double(c);
    s += "<rect x=\"" + std::to_string(x) + "\" y=\"" + std::to_string(S + 2 * pad) + "\" width=\"12\" height=\"12\" fill=\"" +
         nnlens::detail::class_colour(c) + "\"/><text x=\"" + std::to_string(x + 16) + "\" y=\"" +
         std::to_string(S + 2 * pad + 11) + "\" font-size=\"12\">" + advisories[c] + "</text>\n";
  }
  return s + "</svg>\n";
}
}  // namespace

int main(int argc, char** argv) try {
  std::string models = "../shared/models/acasxu-nnet", net_name = "1_1", out = "exactline_plane_out";
  double rho_max = 12000;
  std::size_t checks = 2000;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--models") models = v;
    else if (a == "--net") net_name = v;
    else if (a == "--rho-max") rho_max = std::stod(v);
    else if (a == "--out") out = v;
    else if (a == "--check") checks = std::stoul(v);
    else throw nnlens::value_error("unknown option " + a + " (see the header comment)");
  }
  const auto model = nnlens::io::load_nnet<double>(fs::path(models) / ("ACASXU_run2a_" + net_name + "_batch_2000.nnet"));
  const double pi = 3.14159265358979323846;
  const std::vector<double> O{0, 0, -pi, 150, 150}, U{1, 0, 0, 0, 0}, V{0, 1, 0, 0, 0};
  const std::vector<std::array<double, 2>> box{{0, -pi}, {rho_max, -pi}, {rho_max, pi}, {0, pi}};
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = nnlens::exact_plane(model.net, O, U, V, box);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::size_t per_class[5] = {};
  double area_per_class[5] = {};
  const auto cells = nnlens::classify_plane(r, nnlens::class_rule::argmin);
  for (const auto& reg : cells) {
    ++per_class[reg.label];
    area_per_class[reg.label] += reg.polygon.area();
  }
  std::cout << "ACAS Xu " << net_name << ", head-on plane rho in [0, " << rho_max << "] ft, theta in [-pi, pi]: "
            << r.polygons.size() << " linear regions in " << secs * 1e3 << " ms (total area "
            << r.area() / (rho_max * 2 * pi) << " of the box)\n";
  std::cout << "exact decision cells (a linear region cut where the advisory changes): " << cells.size() << "\n"
            << "advisory  cells    share of the plane\n";
  for (std::size_t c = 0; c < 5; ++c) {
    char line[96];
    std::snprintf(line, sizeof line, "%-8s  %7zu  %6.2f%%\n", advisories[c].c_str(), per_class[c],
                  100 * area_per_class[c] / double(r.area()));
    std::cout << line;
  }
  // self-check: random points against direct forward passes
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> ur(0, rho_max), ut(-pi, pi);
  std::size_t bad = 0, missing = 0;
  for (std::size_t q = 0; q < checks; ++q) {
    const double u = ur(rng), v = ut(rng);
    const nnlens::plane_polygon<double>* hit = nullptr;
    for (const auto& p : r.polygons)
      if (inside(p, u, v)) {
        hit = &p;
        break;
      }
    if (!hit) {
      ++missing;
      continue;
    }
    const auto x = r.point(u, v);
    xt::xarray<double> X = xt::adapt(x, std::vector<std::size_t>{1, x.size()});
    const auto y = nnlens::forward(model.net, X);
    std::vector<double> yv(y.begin(), y.end());
    // exact check: the value at (u, v) from the polygon's vertices (least squares on 3 of them)
    const auto& P = *hit;
    const auto& a = P.vertices[0];
    const auto& b = P.vertices[1];
    const auto& c = P.vertices[2];
    const double det = (b[0] - a[0]) * (c[1] - a[1]) - (c[0] - a[0]) * (b[1] - a[1]);
    if (std::abs(det) < 1e-12) continue;
    const double l1 = ((u - a[0]) * (c[1] - a[1]) - (c[0] - a[0]) * (v - a[1])) / det;
    const double l2 = ((b[0] - a[0]) * (v - a[1]) - (u - a[0]) * (b[1] - a[1])) / det;
    for (std::size_t k = 0; k < 5; ++k) {
      const double pred = P.output(0)[k] + l1 * (P.output(1)[k] - P.output(0)[k]) + l2 * (P.output(2)[k] - P.output(0)[k]);
      if (std::abs(pred - yv[k]) > 1e-6 * (1 + std::abs(yv[k]))) {
        ++bad;
        break;
      }
    }
  }
  // and the advisory of every random point against the exact decision cell that contains it
  std::size_t wrong_label = 0;
  for (std::size_t q = 0; q < checks; ++q) {
    const double u = ur(rng), v = ut(rng);
    const auto x = r.point(u, v);
    xt::xarray<double> X = xt::adapt(x, std::vector<std::size_t>{1, x.size()});
    const auto y = nnlens::forward(model.net, X);
    const std::vector<double> yv(y.begin(), y.end());
    const std::size_t want = argmin(yv);
    bool found = false, ok = false;
    for (const auto& reg : cells)
      if (inside(reg.polygon, u, v)) {
        found = true;
        ok |= reg.label == want || std::abs(yv[reg.label] - yv[want]) <= 1e-9 * (1 + std::abs(yv[want]));
      }
    if (!found) ++missing;
    else if (!ok) ++wrong_label;
  }
  std::cout << "self-check: " << 2 * checks << " random points, " << missing << " outside every polygon/cell, " << bad
            << " where the polygon's affine map differs from a forward pass, " << wrong_label
            << " where the decision cell's advisory differs from a forward pass\n";
  bad += wrong_label;
  fs::create_directories(out);
  nnlens::svg_options so;
  so.title = "ACAS Xu " + net_name + ": exact advisories over (rho, theta), " + std::to_string(r.polygons.size()) + " regions";
  std::ofstream(fs::path(out) / "plane_rho_theta.svg") << nnlens::plane_svg(r, nnlens::class_rule::argmin, advisories, so);
  std::ofstream(fs::path(out) / "plane_xy.svg") << xy_svg(r, rho_max);
  std::cout << "wrote " << (fs::path(out) / "plane_rho_theta.svg").string() << " and " << (fs::path(out) / "plane_xy.svg").string()
            << "\n";
  return bad == 0 && missing == 0 ? 0 : 1;
} catch (const std::exception& e) {
  std::cerr << "exactline_plane: " << e.what() << "\n";
  return 1;
}
