//===- LossCurveTest.cpp - The SVG loss chart -----------------------------===//

#include "TestUtil.h"
#include "kiln/Driver/LossCurve.h"

#include <regex>
#include <sstream>

using namespace kiln;

namespace {

/// The (x, y) pairs of the polyline with id `id`.
std::vector<std::pair<double, double>> points(const std::string &svg, const std::string &id) {
  std::smatch m;
  std::regex line("<polyline id=\"" + id + "\"[^>]*points=\"([^\"]*)\"");
  EXPECT_TRUE(std::regex_search(svg, m, line)) << id;
  std::vector<std::pair<double, double>> out;
  std::istringstream in(m[1].str());
  std::string pair;
  while (in >> pair) {
    size_t comma = pair.find(',');
    out.push_back({std::stod(pair.substr(0, comma)), std::stod(pair.substr(comma + 1))});
  }
  return out;
}

TEST(LossCurveTest, PlotsBothSeriesWithStepsLeftToRightAndLossUpwards) {
  LossPoints train{{1, 11.9}, {2, 9.5}, {3, 8.0}, {4, 7.2}};
  LossPoints validation{{0, 12.0}, {4, 7.5}};
  std::string svg = lossCurveSvg(train, validation, "tiny <run>");
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_NE(svg.find("tiny &lt;run&gt;"), std::string::npos) << "title is escaped";
  auto t = points(svg, "train"), v = points(svg, "validation");
  ASSERT_EQ(t.size(), 4u);
  ASSERT_EQ(v.size(), 2u);
  for (size_t i = 1; i < t.size(); ++i) {
    EXPECT_GT(t[i].first, t[i - 1].first) << "steps increase to the right";
    EXPECT_GT(t[i].second, t[i - 1].second) << "lower loss is drawn lower (larger y)";
  }
  // Same step, same x; validation 7.5 above train 7.2 means a smaller y.
  EXPECT_DOUBLE_EQ(v[1].first, t[3].first);
  EXPECT_LT(v[1].second, t[3].second);
}

TEST(LossCurveTest, EmptySeriesStillMakeAChart) {
  std::string svg = lossCurveSvg({}, {}, "nothing yet");
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_TRUE(points(svg, "train").empty());
}

} // namespace
