//===- LossCurve.cpp - Training and validation loss as an SVG -------------===//

#include "kiln/Driver/LossCurve.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace kiln {

namespace {
constexpr double kWidth = 720, kHeight = 420;
constexpr double kLeft = 70, kRight = 20, kTop = 40, kBottom = 50;

/// A "nice" tick spacing (1, 2 or 5 x 10^k) giving about `count` ticks.
double tickStep(double span, int count) {
  double raw = span / count, magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0})
    if (raw <= m * magnitude)
      return m * magnitude;
  return 10 * magnitude;
}

std::string escape(const std::string &text) {
  std::string out;
  for (char c : text)
    out += c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '&' ? "&amp;" : std::string(1, c);
  return out;
}
} // namespace

std::string lossCurveSvg(const LossPoints &train, const LossPoints &validation,
                         const std::string &title) {
  int64_t maxStep = 1;
  double lo = INFINITY, hi = -INFINITY;
  for (const LossPoints *series : {&train, &validation})
    for (auto [step, loss] : *series) {
      maxStep = std::max(maxStep, step);
      lo = std::min(lo, loss);
      hi = std::max(hi, loss);
    }
  if (!(lo <= hi))
    lo = 0, hi = 1;
  double pad = std::max(0.05 * (hi - lo), 1e-3);
  lo -= pad;
  hi += pad;
  double plotW = kWidth - kLeft - kRight, plotH = kHeight - kTop - kBottom;
  auto x = [&](double step) { return kLeft + plotW * step / double(maxStep); };
  auto y = [&](double loss) { return kTop + plotH * (hi - loss) / (hi - lo); };

  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" "
      "viewBox=\"0 0 {0} {1}\" font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"24\" font-size=\"15\" text-anchor=\"middle\">{3}</text>\n",
      kWidth, kHeight, kWidth / 2, escape(title));
  // Grid and ticks.
  double dy = tickStep(hi - lo, 6);
  for (double v = std::ceil(lo / dy) * dy; v <= hi; v += dy)
    svg += fmt::format("<line x1=\"{0}\" x2=\"{1}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\" "
                       "stroke=\"#ddd\"/><text x=\"{3}\" y=\"{4:.1f}\" "
                       "text-anchor=\"end\">{5:.3g}</text>\n",
                       kLeft, kWidth - kRight, y(v), kLeft - 6, y(v) + 4, v);
  double dx = tickStep(double(maxStep), 8);
  for (double s = 0; s <= maxStep; s += dx)
    svg += fmt::format("<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1}\" y2=\"{2}\" "
                       "stroke=\"#ddd\"/><text x=\"{0:.1f}\" y=\"{3}\" "
                       "text-anchor=\"middle\">{4:g}</text>\n",
                       x(s), kTop, kTop + plotH, kTop + plotH + 16, s);
  svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" "
                     "stroke=\"#333\"/>\n",
                     kLeft, kTop, plotW, plotH);
  svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">step</text>\n",
                     kLeft + plotW / 2, kHeight - 12);
  svg += fmt::format("<text x=\"16\" y=\"{0}\" text-anchor=\"middle\" "
                     "transform=\"rotate(-90 16 {0})\">loss</text>\n",
                     kTop + plotH / 2);
  // Series.
  auto polyline = [&](const LossPoints &points, const char *color, const char *id) {
    std::string coords;
    for (auto [step, loss] : points)
      coords += fmt::format("{:.1f},{:.1f} ", x(double(step)), y(loss));
    return fmt::format("<polyline id=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\" "
                       "points=\"{}\"/>\n",
                       id, color, coords);
  };
  svg += polyline(train, "#1f77b4", "train");
  svg += polyline(validation, "#d62728", "validation");
  for (auto [step, loss] : validation)
    svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3.5\" fill=\"#d62728\"/>\n",
                       x(double(step)), y(loss));
  // Legend.
  double lx = kWidth - kRight - 150, ly = kTop + 14;
  svg += fmt::format("<line x1=\"{0}\" x2=\"{1}\" y1=\"{2}\" y2=\"{2}\" stroke=\"#1f77b4\" "
                     "stroke-width=\"2\"/><text x=\"{3}\" y=\"{4}\">train loss</text>\n",
                     lx, lx + 24, ly, lx + 30, ly + 4);
  svg += fmt::format("<line x1=\"{0}\" x2=\"{1}\" y1=\"{2}\" y2=\"{2}\" stroke=\"#d62728\" "
                     "stroke-width=\"2\"/><text x=\"{3}\" y=\"{4}\">validation loss</text>\n",
                     lx, lx + 24, ly + 18, lx + 30, ly + 22);
  return svg + "</svg>\n";
}

} // namespace kiln
