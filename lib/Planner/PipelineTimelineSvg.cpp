//===- PipelineTimelineSvg.cpp - A pipeline schedule drawn as SVG ---------===//

#include "kiln/Planner/PipelineTimelineSvg.h"

#include <fmt/format.h>

namespace kiln {

namespace {

constexpr double kLeft = 84, kTop = 34, kWidth = 760, kRow = 26, kGap = 6;

/// Forwards in blues, backwards in greens; a rank's later stages (looped
/// schedules) in the lighter shade.
const char *fillOf(PipelineActionKind kind, int64_t stageOnRank) {
  static const char *forward[] = {"#4e79a7", "#a0cbe8", "#2b4a6f", "#c6dcef"};
  static const char *backward[] = {"#59a14f", "#8cd17d", "#37642f", "#c3e8bb"};
  return (kind == PipelineActionKind::Forward ? forward : backward)[stageOnRank % 4];
}

std::string escaped(const std::string &text) {
  std::string out;
  for (char c : text)
    out += c == '<'   ? std::string("&lt;")
           : c == '>' ? std::string("&gt;")
           : c == '&' ? std::string("&amp;")
                      : std::string(1, c);
  return out;
}

} // namespace

std::string pipelineTimelineSvg(const PipelineSchedule &schedule, const PipelineTimeline &timeline,
                                const std::string &title) {
  const double scale = timeline.makespan > 0 ? kWidth / timeline.makespan : 0;
  const double rowsBottom = kTop + double(schedule.degree) * (kRow + kGap);
  const double height = rowsBottom + 44;
  std::string svg =
      fmt::format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" height=\"{:.0f}\" "
                  "viewBox=\"0 0 {:.0f} {:.0f}\" font-family=\"sans-serif\" font-size=\"11\">\n"
                  "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
                  "<text x=\"{:.0f}\" y=\"18\" font-size=\"13\">{}</text>\n",
                  kLeft + kWidth + 16, height, kLeft + kWidth + 16, height, kLeft, escaped(title));
  for (int64_t rank = 0; rank < schedule.degree; ++rank) {
    double y = kTop + double(rank) * (kRow + kGap);
    svg += fmt::format("<text x=\"8\" y=\"{:.1f}\">pp rank {}</text>\n"
                       "<rect x=\"{:.0f}\" y=\"{:.1f}\" width=\"{:.0f}\" height=\"{:.0f}\" "
                       "fill=\"#f4f4f4\" stroke=\"#bbbbbb\"/>\n",
                       y + kRow / 2 + 4, rank, kLeft, y, kWidth, kRow);
    for (const TimedAction &t : timeline.ranks[rank]) {
      if (!t.action.isCompute())
        continue;
      int64_t stageOnRank = t.action.stage / schedule.degree;
      double x = kLeft + t.start * scale, w = (t.end - t.start) * scale;
      svg +=
          fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.0f}\" "
                      "fill=\"{}\" stroke=\"white\"><title>{}</title></rect>\n"
                      "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" "
                      "fill=\"{}\">{}</text>\n",
                      x, y, w, kRow, fillOf(t.action.kind, stageOnRank), t.action.str(), x + w / 2,
                      y + kRow / 2 + 4, stageOnRank % 2 ? "black" : "white", t.action.microbatch);
    }
  }
  // The legend: a swatch per kind and stage of a rank.
  double x = kLeft, y = rowsBottom + 8;
  for (PipelineActionKind kind : {PipelineActionKind::Forward, PipelineActionKind::Backward})
    for (int64_t v = 0; v < schedule.stagesPerRank; ++v) {
      std::string label =
          fmt::format("{}{}", kind == PipelineActionKind::Forward ? "forward" : "backward",
                      schedule.stagesPerRank > 1 ? fmt::format(", stage {} of the rank", v) : "");
      svg += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"14\" height=\"14\" "
                         "fill=\"{}\"/>\n<text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>\n",
                         x, y, fillOf(kind, v), x + 18, y + 11, label);
      x += 30 + 6.5 * double(label.size());
    }
  svg += fmt::format("<text x=\"{:.0f}\" y=\"{:.1f}\" fill=\"#555555\">numbers: microbatches; "
                     "blank: the bubble ({:.1f}% of ranks x time)</text>\n",
                     kLeft, y + 30, 100 * timeline.bubbleFraction);
  return svg + "</svg>\n";
}

} // namespace kiln
